# -*- coding: utf-8 -*-
# Copyright: fairgpu contributors
# Apache License 2.0 (see LICENSE)
"""Several replay reports side by side (issue 17, item 3: the same replay under several policies) and, where the
model predicted a policy, its prediction next to the replay's measurement (item 4). Pure logic, no cluster access.
Units: waits in trace seconds (the reports' ``trace_`` figures), GPU-hours in trace hours."""


def _within(check):
    if not check or check.get("held") is None or check.get("fair") is None:
        return None
    return abs(check["held"] - check["fair"]) <= check["bound"]


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
               "caused": figures["preemptions_caused"], "held": check.get("held"), "fair": check.get("fair"),
               "bound": check.get("bound"), "share_within_bound": _within(check)}
        if tenant in predicted:
            guess = predicted[tenant]
            row["model"] = {"p50": guess["trace_p50"], "p95": guess["trace_p95"], "max": guess["trace_max"],
                            "not_admitted": guess["not_admitted"], "preempted": guess["preempted"]}
        rows[tenant] = row
    return rows


def compare_document(policies, now):
    """``policies``: ``[{"name", "description", "report", "prediction"?, "settings"?}]`` in order. Returns the
    comparison as one dict."""
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
             "while two or more tenants had pending work, against the weighted max-min share (bound).", "",
             "| policy | tenant | Jobs | not admitted | wait p50 / p95 / max (h) | model p50 / p95 / max (h) | "
             "GPU-hours | preempted / caused | share held / fair (bound) | within |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for policy in doc["policies"]:
        for tenant, r in sorted(policy["tenants"].items()):
            m = r.get("model")
            lines.append("| %s | %s | %s | %s | %s / %s / %s | %s | %s | %s / %s | %s / %s (%s) | %s |" % (
                policy["name"], tenant, r["jobs"], r["not_admitted"], _hours(r["p50"]), _hours(r["p95"]),
                _hours(r["max"]), ("%s / %s / %s" % (_hours(m["p50"]), _hours(m["p95"]), _hours(m["max"])))
                if m else "-", _c(r["trace_gpu_hours"]), r["preempted"], r["caused"], _c(r["held"]), _c(r["fair"]),
                _c(r["bound"]), _c(r["share_within_bound"])))
    lines += ["", "| policy | what | checks | contention (wall s) | idle while pending | most evictions of one |",
              "|---|---|---|---|---|---|"]
    for policy in doc["policies"]:
        lines.append("| %s | %s | %s | %s | %s | %s |" % (
            policy["name"], policy["description"] or "-",
            "passed" if policy["passed"] else "FAILED: " + "; ".join(policy["failed_checks"]),
            _c(policy["contended_seconds"]), _c(policy["idle_while_pending"]), _c(policy["most_evictions"])))
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
