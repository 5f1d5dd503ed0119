# -*- coding: utf-8 -*-
# Copyright: fairgpu contributors
# Apache License 2.0 (see LICENSE)
"""Several replay reports side by side (issue 17, item 3: the same replay under several policies) and, where the
model predicted a policy, its prediction next to the replay's measurement (item 4). Pure logic, no cluster access.
Units: waits in trace seconds (the reports' ``trace_`` figures), GPU-hours in trace hours."""


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


def _missed_part(row):
    """Which part of the model missed a tenant's measured waits, from the figures beside them: the evictions
    (preemption losses), the GPU-hours reserved (quota held before the pods ran, or runs longer than planned),
    or else what the model leaves out (scheduling cycles, node placement)."""
    model = row["model"]
    parts = []
    if row["preempted"] > (model.get("preempted") or 0):
        parts.append("preemption: %d evictions measured, %d modelled" % (row["preempted"], model.get("preempted") or 0))
    if model.get("trace_gpu_hours") and row["trace_gpu_hours"] > 1.1 * model["trace_gpu_hours"]:
        parts.append("quota held before the pods ran: %s GPU-hours reserved, %s modelled" % (
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


def compare_document(policies, now, targets=None, error_bound=0.5):
    """``policies``: ``[{"name", "description", "report", "prediction"?, "settings"?}]`` in order. With
    ``targets`` (the advisor's), each policy with a prediction also carries ``advice`` (``advice_checks``).
    Returns the comparison as one dict."""
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
                    "modelled": bool(policy.get("prediction"))})
        if targets and policy.get("prediction"):
            out[-1]["advice"] = advice_checks(out[-1], targets, error_bound)
    first = policies[0]["report"] if policies else {}
    same = len(set((p["report"]["window"]["start"], p["report"]["window"]["tasks"]) for p in policies)) <= 1
    return {"generated": now, "policies": out, "same_replay": same,
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


def compare_markdown(doc, title="fairgpu replay: policies compared"):
    """The comparison as Markdown: one table, a row per policy and tenant."""
    w, c = doc.get("window") or {}, doc.get("compression") or {}
    lines = ["# %s" % title, "", "Generated %s. The same replay under each policy%s: %s s of trace from %s s, %s "
             "Jobs, %sx compressed, %s GPUs." % (doc["generated"], "" if doc["same_replay"] else " (NOT the same window)",
                                                 w.get("seconds"), w.get("start"), w.get("tasks"), c.get("factor"),
                                                 doc.get("capacity")), "",
             "Waits in trace hours (creation to the last QuotaReserved, x the compression); `model` is the fast "
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
    lines += ["", "| policy | what | checks | contention (wall s) | idle while pending | most evictions of one |",
              "|---|---|---|---|---|---|"]
    for policy in doc["policies"]:
        lines.append("| %s | %s | %s | %s | %s | %s |" % (
            policy["name"], policy["description"] or "-",
            "passed" if policy["passed"] else "FAILED: " + "; ".join(policy["failed_checks"]),
            _c(policy["contended_seconds"]), _c(policy["idle_while_pending"]), _c(policy["most_evictions"])))
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
    """``(tenants, {policy: {"p50": [...], "p95": [...], "model_p95": [...]}})`` in trace hours, for the plot."""
    tenants = sorted(set(t for p in doc["policies"] for t in p["tenants"]))
    series = {}
    for policy in doc["policies"]:
        rows = policy["tenants"]
        entry = {}
        for key in ("p50", "p95", "max"):
            entry[key] = [None if rows.get(t, {}).get(key) is None else rows[t][key] / 3600.0 for t in tenants]
        entry["model_p95"] = [None if not rows.get(t, {}).get("model") or rows[t]["model"]["p95"] is None
                              else rows[t]["model"]["p95"] / 3600.0 for t in tenants]
        series[policy["name"]] = entry
    return tenants, series
