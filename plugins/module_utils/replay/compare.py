# -*- coding: utf-8 -*-
# Copyright: fairgpu contributors
# Apache License 2.0 (see LICENSE)
"""Several replay reports side by side (issue 17, item 3: the same replay under several policies) and, where the
model predicted a policy, its prediction next to the replay's measurement (item 4), and the spread of repeated
runs of each policy (issue 28, item 2: min, median and max over the runs; two policies differ on a figure only where
their ranges do not overlap). Pure logic, no cluster access. Units: waits in trace seconds (the reports' ``trace_``
figures), GPU-hours in trace hours, shares in GPUs."""

import statistics

# The figures of a tenant's row that repeated runs are summarised by (policy_rows' keys).
SPREAD_FIGURES = ("p50", "p95", "max", "trace_gpu_hours", "preempted", "held")


def _within(check):
    if not check or check.get("held") is None or check.get("reference") is None:
        return None
    return abs(check["held"] - check["reference"]) <= check["tolerance"]


def policy_rows(policy):
    """Per tenant of one policy's replay report ``policy["report"]`` (replay.json): measured waits, GPU-hours,
    preemptions, the share check and, with ``policy["prediction"]`` (replay_advise's), the predicted waits."""
    report, predicted = policy["report"], (policy.get("prediction") or {}).get("tenants", {})
    rows = {}
    for tenant, figures in sorted(report["tenants"].items()):
        waits = figures["waits"]
        check = report.get("share", {}).get("tenants", {}).get(tenant, {})
        row = {"jobs": figures["workloads"], "not_admitted": waits.get("not_admitted", 0),
               "p50": waits["trace_p50"], "p95": waits["trace_p95"], "max": waits["trace_max"],
               "trace_gpu_hours": figures["trace_gpu_hours"], "preempted": figures["preemptions_suffered"],
               "caused": figures["preemptions_caused"], "held": check.get("held"),
               "reference": check.get("reference"), "tolerance": check.get("tolerance"),
               "share_within_tolerance": _within(check)}
        if tenant in predicted:
            guess = predicted[tenant]
            row["model"] = {"p50": guess["trace_p50"], "p95": guess["trace_p95"], "max": guess["trace_max"],
                            "not_admitted": guess["not_admitted"], "preempted": guess["preempted"],
                            "trace_gpu_hours": guess.get("trace_gpu_hours")}
        rows[tenant] = row
    return rows


def spread(values):
    """``{"runs", "min", "median", "max"}`` of the figures of repeated runs (None left out; the median of an even
    count is the mean of the middle two); None figures when no run has one."""
    known = sorted(v for v in values if v is not None)
    return {"runs": len(values), "min": known[0] if known else None,
            "median": statistics.median(known) if known else None, "max": known[-1] if known else None}


def run_spread(reports):
    """Per tenant and ``SPREAD_FIGURES``, the ``spread`` over the replay reports of one policy's repeated runs."""
    rows = [policy_rows({"report": report}) for report in reports]
    tenants = sorted(set(t for row in rows for t in row))
    return dict((t, dict((figure, spread([row.get(t, {}).get(figure) for row in rows])) for figure in SPREAD_FIGURES))
                for t in tenants)


def range_claim(first, a, second, b):
    """Whether two named spreads (``spread``'s ``{"runs", "min", "median", "max"}``) differ, lower median first:
    ``{"lower", "higher", "lower_range", "higher_range", "differs"}``, ``differs`` only when the ranges (min..max)
    do not overlap, and None (not claimed either way) with a single run on either side."""
    (low, lo), (high, hi) = sorted(((first, a), (second, b)), key=lambda named: named[1]["median"])
    return {"lower": low, "higher": high, "lower_range": [lo["min"], lo["max"]], "higher_range": [hi["min"], hi["max"]],
            "differs": None if min(a["runs"], b["runs"]) < 2 else lo["max"] < hi["min"]}


def differences(policies, figure="p95"):
    """Which policies differ on ``figure`` per tenant, from their runs' spreads (policies of ``compare_document``
    with ``runs``): ``[dict(range_claim(...), tenant, figure)]`` for each pair."""
    out = []
    with_runs = [p for p in policies if p.get("spread")]
    for index, first in enumerate(with_runs):
        for second in with_runs[index + 1:]:
            for tenant in sorted(set(first["spread"]) & set(second["spread"])):
                a, b = first["spread"][tenant][figure], second["spread"][tenant][figure]
                if a["median"] is None or b["median"] is None:
                    continue
                out.append(dict(range_claim(first["name"], a, second["name"], b), tenant=tenant, figure=figure))
    return out


def admission_orders(reports):
    """Per run of one policy, what its report says of admission order (``report.admission_evidence``): ``[{"on":
    groups with admission fair sharing, "pairs", "overtaken", "share": overtaken / pairs, "recorded"}]``; empty when
    the reports have no such section (replays before it) or no two groups of one ClusterQueue waited together
    without admission fair sharing (the groups are tenants, each its own ClusterQueue)."""
    out = []
    for report in reports:
        admission = report.get("admission")
        if not admission or not (admission["on"] or admission["order"]["pairs"]):
            continue  # none, or groups of several ClusterQueues (tenants): nothing competed in one queue
        order = admission["order"]
        out.append({"on": admission["on"], "pairs": order["pairs"], "overtaken": order["overtaken"],
                    "share": round(order["overtaken"] / float(order["pairs"]), 4) if order["pairs"] else None,
                    "recorded": admission["recorded"]})
    return out


def order_differences(policies):
    """Pairs of policies whose shares of comparable pairs admitted out of creation order (``admission_orders``)
    differ over their runs: ``[range_claim(...)]`` for each pair of policies with such runs."""
    ranked = []
    for policy in policies:
        shares = [o["share"] for o in policy.get("admission_order") or [] if o["share"] is not None]
        if shares:
            ranked.append((policy["name"], spread(shares)))
    return [range_claim(first[0], first[1], second[0], second[1])
            for index, first in enumerate(ranked) for second in ranked[index + 1:]]


def _missed_part(row):
    """Which part of the model missed a tenant's measured waits, from the figures beside them: the evictions
    (preemption losses), the GPU-hours reserved (the replay counts every hold, those an eviction cut short too,
    the model the finished runs: quota held before the pods ran, or lost to evictions), or else what the model
    leaves out (scheduling cycles, node placement)."""
    model = row["model"]
    parts = []
    if row["preempted"] > (model.get("preempted") or 0):
        parts.append("preemption: %d evictions measured, %d modelled" % (row["preempted"], model.get("preempted") or 0))
    if model.get("trace_gpu_hours") and row["trace_gpu_hours"] > 1.1 * model["trace_gpu_hours"]:
        parts.append("quota held before the pods ran or lost to evictions: %s GPU-hours reserved, %s modelled" % (
            _c(row["trace_gpu_hours"]), _c(model["trace_gpu_hours"])))
    return "; ".join(parts) or "admission order or latency (the model leaves out scheduling cycles and node placement)"


def advice_checks(policy, targets, error_bound):
    """The advisor's promise checked on one policy of ``compare_document`` (the replay of its recommendation, with
    the model's prediction): the replay met every target (``{tenant: {"p50"|"p95"|"max": trace seconds}}``, every
    Job admitted), and each targeted figure's prediction is within ``error_bound`` x its target of the measurement.
    Returns ``{"checks": [{name, passed, detail}], "errors": [{tenant, figure, target, measured, predicted, error,
    allowed}], "passed"}`` (trace seconds); a failed detail names the tenant, the figure and, for the prediction,
    which part of the model missed (``_missed_part``)."""
    missed, off, errors = [], [], []
    for tenant, target in sorted(targets.items()):
        row = policy["tenants"].get(tenant)
        if row is None:
            missed.append("%s: no Jobs in the replay" % tenant)
            continue
        if row["not_admitted"]:
            missed.append("%s: %d Jobs never admitted" % (tenant, row["not_admitted"]))
        for figure, limit in sorted(target.items()):
            measured = row[figure]
            if measured is None or measured > limit:
                missed.append("%s %s %s h, target %s h" % (tenant, figure, _hours(measured), _hours(limit)))
            predicted = (row.get("model") or {}).get(figure)
            if predicted is None or measured is None:
                off.append("%s %s: no %s" % (tenant, figure, "prediction" if predicted is None else "measurement"))
                continue
            error, allowed = measured - predicted, error_bound * limit
            errors.append({"tenant": tenant, "figure": figure, "target": limit, "measured": measured,
                           "predicted": predicted, "error": round(error, 1), "allowed": round(allowed, 1)})
            if abs(error) > allowed:
                off.append("%s %s measured %s h, model %s h, off by %s h (allowed %s h): %s" % (
                    tenant, figure, _hours(measured), _hours(predicted), _hours(abs(error)), _hours(allowed),
                    _missed_part(row)))
    checks = [{"name": "the replay met every target", "passed": not missed,
               "detail": "; ".join(missed) or "%d targets" % sum(len(t) for t in targets.values())},
              {"name": "the model's prediction within %g x each target of the replay" % error_bound,
               "passed": not off, "detail": "; ".join(off) or "largest error %s h" % _hours(
                   max([abs(e["error"]) for e in errors] or [0]))}]
    return {"checks": checks, "errors": errors, "passed": all(c["passed"] for c in checks)}


def compare_document(policies, now, targets=None, error_bound=0.5, same_jobs=True):
    """``policies``: ``[{"name", "description", "report", "prediction"?, "settings"?, "runs"?}]`` in order
    (``runs``: the reports of every run of the policy, ``report`` among them, summarised by ``run_spread``). With
    ``targets`` (the advisor's), each policy with a prediction also carries ``advice`` (``advice_checks``).
    ``same_jobs`` false: a load sweep, whose replays differ in their Jobs by design (each load scales and thins the
    window's tasks); then ``same_replay`` asks only for the same window. Returns the comparison as one dict, with
    ``differences`` (wait p95 per tenant between policies with runs) and ``trace_cluster`` (the trace's own cluster
    in the window, from the first report that has it)."""
    out = []
    for policy in policies:
        report = policy["report"]
        out.append({"name": policy["name"], "description": policy.get("description", ""),
                    "settings": policy.get("settings", {}), "passed": report["passed"],
                    "failed_checks": ["%s: %s" % (c["name"], c["detail"]) for c in report["checks"] if not c["passed"]],
                    "contended_seconds": report.get("share", {}).get("contended_seconds"),
                    "idle_while_pending": report.get("idle_while_pending", {}).get("share"),
                    "most_evictions": report.get("most_evictions"), "jobs": report["window"]["tasks"],
                    "lost": len(report.get("lost", [])), "tenants": policy_rows(policy),
                    "modelled": bool(policy.get("prediction")),
                    "load": report.get("scaling", {}).get("load_factor"),
                    "achieved_load": report.get("scaling", {}).get("achieved_load")})
        if targets and policy.get("prediction"):
            out[-1]["advice"] = advice_checks(out[-1], targets, error_bound)
        if policy.get("runs"):
            out[-1]["spread"] = run_spread(policy["runs"])
            out[-1]["runs_passed"] = [r["passed"] for r in policy["runs"]]
        out[-1]["admission_order"] = admission_orders(policy.get("runs") or [report])
    first = policies[0]["report"] if policies else {}
    reports = [r for p in policies for r in (p.get("runs") or [p["report"]])]
    same = len(set((r["window"]["start"], r["window"]["seconds"] if not same_jobs else r["window"]["tasks"])
                   for r in reports)) <= 1
    own = next((r["trace_cluster"] for r in reports if r.get("trace_cluster")), None)
    return {"generated": now, "policies": out, "same_replay": same, "same_jobs": same_jobs, "trace_cluster": own,
            "differences": differences(out),
            "order_differences": order_differences(out),
            "window": first.get("window"), "compression": first.get("compression"), "capacity": first.get("capacity")}


def _c(value):
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return "%g" % round(value, 3)
    return str(value)


def _hours(seconds):
    return "-" if seconds is None else "%.2f" % (seconds / 3600.0)


def _range(figure, show):
    """A spread as ``min / median / max`` in ``show``'s format."""
    return "%s / %s / %s" % (show(figure["min"]), show(figure["median"]), show(figure["max"]))


def _claim_text(claim, show, unit=""):
    """A ``range_claim`` in words: ``differs: fair 0.50-0.61 h below borrowing 0.83-1.11 h`` (``show`` formats a
    figure, ``unit`` follows each range)."""
    return "%s: %s %s%s %s %s %s%s" % (
        "differs" if claim["differs"] else "no difference shown" if claim["differs"] is False
        else "one run, not claimed", claim["lower"], "-".join(show(v) for v in claim["lower_range"]), unit,
        "below" if claim["differs"] else "against", claim["higher"], "-".join(show(v) for v in claim["higher_range"]),
        unit)


def compare_markdown(doc, title="fairgpu replay: policies compared"):
    """The comparison as Markdown: one table, a row per policy and tenant."""
    w, c = doc.get("window") or {}, doc.get("compression") or {}
    if doc.get("same_jobs", True):
        what = "The same replay under each policy%s: %s s of trace from %s s, %s Jobs, %sx compressed, %s GPUs." % (
            "" if doc["same_replay"] else " (NOT the same window)", w.get("seconds"), w.get("start"), w.get("tasks"),
            c.get("factor"), doc.get("capacity"))
    else:
        what = ("The same window at each load%s: %s s of trace from %s s, its tasks' GPUs scaled and thinned to the "
                "load asked of %s GPUs (the Jobs differ between loads), %sx compressed." % (
                    "" if doc["same_replay"] else " (NOT the same window)", w.get("seconds"), w.get("start"),
                    doc.get("capacity"), c.get("factor")))
    lines = ["# %s" % title, "", "Generated %s. %s" % (doc["generated"], what), ""]
    own = doc.get("trace_cluster")
    if own:
        lines += ["The trace's own cluster in this window (its node list): %s GPUs held on average of %s, a load of %s; "
                  "the tasks created in the window waited p50 %s / p95 %s / max %s trace seconds there (%s / %s / %s h), "
                  "%s never scheduled." % (
                      own["mean_demand"], own["gpus"], own["load"], own["waits"]["p50"], own["waits"]["p95"],
                      own["waits"]["max"], _hours(own["waits"]["p50"]), _hours(own["waits"]["p95"]),
                      _hours(own["waits"]["max"]), own["waits"].get("never_scheduled", 0)), ""]
    lines += ["Waits in trace hours (creation to the last QuotaReserved, x the compression); `model` is the fast "
              "model's prediction for the same Jobs (plugins/module_utils/replay/model.py). Share: mean GPUs held "
              "while two or more tenants had pending work, against the fair reference (guarantee first, then the "
              "cohort's unused quota by weight) and its tolerance.", "",
              "| policy | tenant | Jobs | not admitted | wait p50 / p95 / max (h) | model p50 / p95 / max (h) | "
              "GPU-hours | preempted / caused | share held / reference (tolerance) | within |",
              "|---|---|---|---|---|---|---|---|---|---|"]
    for policy in doc["policies"]:
        for tenant, r in sorted(policy["tenants"].items()):
            m = r.get("model")
            lines.append("| %s | %s | %s | %s | %s / %s / %s | %s | %s | %s / %s | %s / %s (%s) | %s |" % (
                policy["name"], tenant, r["jobs"], r["not_admitted"], _hours(r["p50"]), _hours(r["p95"]),
                _hours(r["max"]), ("%s / %s / %s" % (_hours(m["p50"]), _hours(m["p95"]), _hours(m["max"])))
                if m else "-", _c(r["trace_gpu_hours"]), r["preempted"], r["caused"], _c(r["held"]),
                _c(r["reference"]), _c(r["tolerance"]), _c(r["share_within_tolerance"])))
    lines += ["", "| policy | what | load asked / achieved | checks | contention (wall s) | idle while pending | "
              "most evictions of one |", "|---|---|---|---|---|---|---|"]
    for policy in doc["policies"]:
        lines.append("| %s | %s | %s / %s | %s | %s | %s | %s |" % (
            policy["name"], policy["description"] or "-", _c(policy.get("load")), _c(policy.get("achieved_load")),
            "passed" if policy["passed"] else "FAILED: " + "; ".join(policy["failed_checks"]),
            _c(policy["contended_seconds"]), _c(policy["idle_while_pending"]), _c(policy["most_evictions"])))
    spreads = [p for p in doc["policies"] if p.get("spread")]
    if spreads:
        lines += ["", "## Across repeated runs", "",
                  "Each policy replayed on a fresh cluster several times: min / median / max over the runs (waits in "
                  "trace hours, GPU-hours in trace hours, share in GPUs held under contention), the model's one "
                  "prediction beside them.", "",
                  "| policy | tenant | runs (passed) | wait p50 | wait p95 | model p95 | wait max | GPU-hours | "
                  "preempted | share held |", "|---|---|---|---|---|---|---|---|---|---|"]
        for policy in spreads:
            for tenant, figures in sorted(policy["spread"].items()):
                model = (policy["tenants"].get(tenant) or {}).get("model") or {}
                lines.append("| %s | %s | %d (%d) | %s | %s | %s | %s | %s | %s | %s |" % (
                    policy["name"], tenant, figures["p95"]["runs"], sum(policy["runs_passed"]),
                    _range(figures["p50"], _hours), _range(figures["p95"], _hours), _hours(model.get("p95")),
                    _range(figures["max"], _hours), _range(figures["trace_gpu_hours"], _c),
                    _range(figures["preempted"], _c), _range(figures["held"], _c)))
        lines += ["", "Differences in wait p95 (claimed only where the ranges of the runs do not overlap):", ""]
        lines += ["- %s, %s" % (d["tenant"], _claim_text(d, _hours, " h")) for d in doc.get("differences") or []]
    ordered = [p for p in doc["policies"] if p.get("admission_order")]
    if ordered:
        lines += ["", "## Admission order", "",
                  "Pairs of Workloads of two groups of one ClusterQueue where the later created asked at least the "
                  "earlier's GPUs, and how many of them Kueue admitted out of creation order, per run (BestEffortFIFO "
                  "keeps such a pair in order; admission fair sharing reorders by usage). Usage recorded: Kueue kept "
                  "a usage above 0 for every group with admission fair sharing (the evidence that it was on).", "",
                  "| policy | admission fair sharing on | out of order / pairs, per run | usage recorded |",
                  "|---|---|---|---|"]
        for policy in ordered:
            runs = policy["admission_order"]
            lines.append("| %s | %s | %s | %s |" % (
                policy["name"], ", ".join(runs[0]["on"]) or "none",
                ", ".join("%d / %d" % (o["overtaken"], o["pairs"]) for o in runs),
                ", ".join(_c(o["recorded"]) for o in runs) if runs[0]["on"] else "-"))
        lines += ["", "Differences in the share admitted out of order (claimed only where the ranges of the runs do "
                  "not overlap):", ""]
        lines += ["- " + _claim_text(d, _c) for d in doc.get("order_differences") or []]
    for policy in doc["policies"]:
        advice = policy.get("advice")
        if not advice:
            continue
        lines += ["## The advice of %s checked" % policy["name"], "", "| check | result | detail |", "|---|---|---|"]
        lines += ["| %s | %s | %s |" % (c["name"], "passed" if c["passed"] else "FAILED", c["detail"])
                  for c in advice["checks"]]
        lines += ["", "| tenant | figure | target (h) | measured (h) | model (h) | error (h) | allowed (h) |",
                  "|---|---|---|---|---|---|---|"]
        lines += ["| %s | %s | %s | %s | %s | %s | %s |" % (
            e["tenant"], e["figure"], _hours(e["target"]), _hours(e["measured"]), _hours(e["predicted"]),
            _hours(e["error"]), _hours(e["allowed"])) for e in advice["errors"]]
        lines.append("")
    lines.append("")
    return "\n".join(lines)


def wait_series(doc):
    """``(tenants, {policy: {"p50": [...], "p95": [...], "max": [...], "model_p95": [...], "p95_range": [(min, max)
    or None]}})`` in trace hours, for the plot: where the policy has runs, the medians of the runs and the range of
    their p95; else the one report's figures."""
    tenants = sorted(set(t for p in doc["policies"] for t in p["tenants"]))
    series = {}
    for policy in doc["policies"]:
        rows, ranges = policy["tenants"], policy.get("spread") or {}
        entry = {}
        for key in ("p50", "p95", "max"):
            values = [ranges[t][key]["median"] if t in ranges else rows.get(t, {}).get(key) for t in tenants]
            entry[key] = [None if v is None else v / 3600.0 for v in values]
        entry["model_p95"] = [None if not rows.get(t, {}).get("model") or rows[t]["model"]["p95"] is None
                              else rows[t]["model"]["p95"] / 3600.0 for t in tenants]
        entry["p95_range"] = [None if t not in ranges or ranges[t]["p95"]["min"] is None
                              else (ranges[t]["p95"]["min"] / 3600.0, ranges[t]["p95"]["max"] / 3600.0)
                              for t in tenants]
        series[policy["name"]] = entry
    return tenants, series
