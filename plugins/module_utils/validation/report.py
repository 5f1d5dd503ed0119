# -*- coding: utf-8 -*-
# Copyright: fairgpu maintainers
# Apache License 2.0 (see LICENSE)
"""The validation report: a JSON document and a Markdown page a person can read, built from scenario results
(``scenarios.py``, ``isolation.py``, ``monitoring/checks.py``). Pure logic, no cluster access, no file writes (the
``validation_report`` module writes).

A scenario result is ``{"name", "title", "checks": [check(...)], "metrics": {...}, "timeline": [...]}`` (and
optionally ``"images"``; ``"tables"``, ``[{"title", "header": [str], "rows": [[value]]}]`` shown as Markdown tables,
such as the MultiKueue fleet's guarantees; and ``"notes"``: sentences the page shows above the checks, such as what
struggled in a run that passed and what the embedded cluster cannot show); ``check`` is the one row type every
scenario's checks are made of."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

from ansible_collections.fairgpu.tenancy.plugins.module_utils.tenants.plan import guarantees_by_product, not_counted


def check(check, expected, observed, passed):
    """One row of the report: what was checked, what was expected, what was observed and whether it passed."""
    return {"check": check, "expected": expected, "observed": observed, "passed": bool(passed)}


def capacity_rows(capacity, tenants):
    """The GPU capacity per product and accelerator resource, one row each: ``{"product", "resource",
    "installed", "schedulable" (devices), "guaranteed" (devices the tenants are guaranteed on that product, as Kueue
    counts them), "sharing" (e.g. ``"time-slicing x4"`` or None), "not_counted": ["<node> (<reason>)"]}``.
    ``capacity``: ``tenants.plan.cluster_capacity`` output (None: no rows); ``tenants``: the normalised tenants,
    whose ``products`` entries hold the per-product guarantees."""
    if not capacity:
        return []
    guaranteed = guarantees_by_product(tenants)
    rows = []
    for product, resources in sorted((capacity.get("products") or {}).items()):
        shared = (capacity.get("sharing") or {}).get(product)
        for resource, installed in sorted(resources.items()):
            rows.append({
                "product": product,
                "resource": resource,
                "installed": installed,
                "schedulable": ((capacity.get("schedulable_products") or {}).get(product) or {}).get(resource, 0),
                "guaranteed": guaranteed.get((product, resource), 0),
                "sharing": "%s x%d" % (shared["strategy"], shared["replicas"]) if shared else None,
                "not_counted": not_counted(capacity, product, resource),
            })
    return rows


def report_document(cluster, tenants, scenarios, generated_at, warnings=None, capacity=None):
    """The JSON report: ``{"cluster", "generated_at", "passed", "tenants": [...], "capacity": [capacity_rows],
    "scenarios": [...], "failed_checks": ["<scenario>: <check> (expected X, observed Y)"], "warnings": [str]}``.
    ``warnings``: the tenant plan's (``tenants.plan.tenant_plan``), such as guarantees above what the schedulable
    nodes offer while nodes are cordoned or NotReady; they do not fail the report. ``capacity``: the plan's
    ``cluster_capacity`` (None: the report has no capacity rows)."""
    failed = [
        "%s: %s (expected %s, observed %s)" % (s["name"], c["check"], _fmt(c["expected"]), _fmt(c["observed"]))
        for s in scenarios for c in s["checks"] if not c["passed"]
    ]
    return {
        "cluster": cluster,
        "generated_at": generated_at,
        "passed": not failed and bool(scenarios),
        "tenants": [
            {k: t.get(k) for k in (
                "name", "namespaces", "gpu_resource", "gpus", "borrowing_limit", "lending_limit", "max_gpus", "weight",
                "products", "gpu_units")}
            for t in tenants
        ],
        "capacity": capacity_rows(capacity, tenants),
        "scenarios": scenarios,
        "failed_checks": failed,
        "warnings": list(warnings or []),
    }


def _fmt(value):
    if isinstance(value, (list, dict)):
        return json.dumps(value, sort_keys=True) if value else "none"
    return str(value)


def _guaranteed(tenant):
    """The guarantee, with its split over GPU products when the tenant holds quota on several."""
    products = tenant.get("products") or []

    def part(p):
        if p.get("replicas", 1) > 1:  # Kueue counts replicas; the report shows both
            physical = _physical(p["gpus"], p["replicas"])
            return "%s replicas = %s physical GPUs (%s x%d)" % (p["gpus"], physical, p.get("strategy"), p["replicas"])
        return str(p["gpus"])
    if len(products) < 2:
        return part(products[0]) if products else tenant["gpus"]
    return "%s (%s)" % (tenant["gpus"], ", ".join("%s: %s" % (p["product"], part(p)) for p in products))


def _physical(replicas, per_gpu):
    whole, rest = divmod(replicas, per_gpu)
    return str(whole) if not rest else "%.2f" % (float(replicas) / per_gpu)


def _cell(value):
    return _fmt(value).replace("|", "\\|")


def report_markdown(document, images):
    """The Markdown page. ``images`` maps a scenario name to the file name of its plot (or is empty)."""
    lines = [
        "# fairgpu validation report: %s" % document["cluster"],
        "",
        "Generated %s. Result: **%s**." % (document["generated_at"], "PASSED" if document["passed"] else "FAILED"),
        "",
        "Every check below is judged from what the real Kueue and Kubernetes components decided (Workload",
        "conditions, ClusterQueue status, Job and Pod objects, Events), read through the API server.",
        "",
        "## Tenants",
        "",
        "| tenant | namespaces | resource | guaranteed | borrowing limit | lending limit | hard maximum | weight |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for t in document["tenants"]:
        lines.append("| %s | %s | %s | %s | %s | %s | %s | %s |" % (
            t["name"], ", ".join(t["namespaces"]), t["gpu_resource"], _guaranteed(t),
            "none" if t["borrowing_limit"] is None else t["borrowing_limit"],
            "all" if t["lending_limit"] is None else t["lending_limit"], t["max_gpus"], t["weight"]))
    if document.get("capacity"):
        lines += ["", "## Capacity per GPU product", "",
                  "Installed counts every GPU node; schedulable leaves out cordoned and NotReady ones. Devices as "
                  "Kueue counts them (a shared GPU's replicas).", "",
                  "| product | resource | installed | schedulable | guaranteed | sharing | not counted |",
                  "|---|---|---|---|---|---|---|"]
        for row in document["capacity"]:
            lines.append("| %s | %s | %d | %d | %d | %s | %s |" % (
                row["product"], row["resource"], row["installed"], row["schedulable"], row["guaranteed"],
                row["sharing"] or "none", _cell(", ".join(row["not_counted"]) or "none")))
    if document.get("warnings"):
        lines += ["", "## Warnings", ""] + ["- " + w for w in document["warnings"]]
    for scenario in document["scenarios"]:
        lines += ["", "## %s" % scenario["title"], ""]
        metrics = scenario.get("metrics") or {}
        if metrics:
            lines += ["Measured: " + "; ".join("%s = %s" % (k.replace("_", " "), _fmt(v))
                                               for k, v in sorted(metrics.items())) + ".", ""]
        if scenario.get("notes"):
            lines += ["- " + note for note in scenario["notes"]] + [""]
        for table in scenario.get("tables") or []:
            lines += ["%s:" % table["title"], "", "| %s |" % " | ".join(_cell(h) for h in table["header"]),
                      "|%s" % ("---|" * len(table["header"]))]
            lines += ["| %s |" % " | ".join(_cell(v) for v in row) for row in table["rows"]] + [""]
        if scenario["checks"]:
            lines += ["| check | expected | observed | result |", "|---|---|---|---|"]
        for c in scenario["checks"]:
            lines.append("| %s | %s | %s | %s |" % (_cell(c["check"]), _cell(c["expected"]), _cell(c["observed"]),
                                                    "pass" if c["passed"] else "**FAIL**"))
        if images.get(scenario["name"]):
            lines += ["", "![GPUs held per tenant: %s](%s)" % (scenario["name"], images[scenario["name"]])]
        for image in scenario.get("images") or []:
            lines += ["", "![%s](%s)" % (image["title"], image["file"])]
    if document["failed_checks"]:
        lines += ["", "## Failed checks", ""] + ["- " + f for f in document["failed_checks"]]
    return "\n".join(lines) + "\n"


def held_series(timeline):
    """From a timeline (samples ``{"ts", "queues": {name: {"reserved", ...}}}``) to per-queue series of
    ``(seconds since the first sample, GPUs reserved)``, ordered by time; duplicate timestamps kept once."""
    samples = sorted({s["ts"]: s for s in timeline}.values(), key=lambda s: s["ts"])
    if not samples:
        return {}
    t0 = samples[0]["ts"]
    series = {}
    for s in samples:
        for name, queue in s["queues"].items():
            series.setdefault(name, []).append((round(s["ts"] - t0, 3), queue["reserved"]))
    return series
