# -*- coding: utf-8 -*-
# Copyright: fairgpu maintainers
# Apache License 2.0 (see LICENSE)
"""The flood scenario's live check of the alerts, judged from what the real Prometheus decided. Pure logic, no
cluster or network access: the validate role asks Prometheus's HTTP API and passes the answers here.

Inputs are ``data.result`` lists of ``/api/v1/query_range`` answers (matrices: ``[{"metric": {labels},
"values": [[unix seconds, "value"], ...]}]``) and ``data.groups`` of ``/api/v1/rules`` (each rule with ``name``
and ``duration`` in seconds). Prometheus writes one ``ALERTS{alertname, alertstate="pending"|"firing", <alert
labels>}`` sample per rule evaluation while an alert is active: that series is the alert's history.

The result is a report scenario (``validation/report.py``'s shape) with ``images`` (plots written by the
``prometheus_plot`` module) and ``metrics``.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.fairgpu.tenancy.plugins.module_utils.validation.report import check as _check

OVER_GUARANTEE = "FairgpuTenantOverGuarantee"


def rule_durations(groups):
    """``{alert name: for in seconds}`` from ``/api/v1/rules``'s ``data.groups``."""
    return {r["name"]: float(r.get("duration") or 0) for g in groups or [] for r in g.get("rules") or []
            if r.get("type", "alerting") == "alerting"}


def alert_history(matrix):
    """``{(alertname, tenant): {"pending": [t, ...], "firing": [t, ...]}}`` from the ``ALERTS`` series (tenant ``""``
    for alerts without one), times in Unix seconds, sorted."""
    history = {}
    for series in matrix or []:
        labels = series["metric"]
        key = (labels.get("alertname", ""), labels.get("tenant", ""))
        states = history.setdefault(key, {"pending": [], "firing": []})
        state = labels.get("alertstate")
        if state in states:
            states[state].extend(float(t) for t, value in series["values"] if float(value) == 1)
    for states in history.values():
        for times in states.values():
            times.sort()
    return history


def series_by(matrix, label):
    """``{label value: [(unix seconds, value), ...]}`` of a matrix, one series per value of ``label``."""
    result = {}
    for series in matrix or []:
        result.setdefault(series["metric"].get(label, ""), []).extend(
            (float(t), float(v)) for t, v in series["values"])
    return {k: sorted(v) for k, v in result.items()}


def _max(matrix):
    return max([float(v) for s in matrix or [] for _t, v in s["values"]] or [0])


def streaks(times, gap):
    """Runs of sample times no more than ``gap`` seconds apart: ``[(first, last)]``."""
    runs = []
    for t in sorted(times):
        if runs and t - runs[-1][1] <= gap:
            runs[-1][1] = t
        else:
            runs.append([t, t])
    return [tuple(r) for r in runs]


def active_since(pending, firing, at, gap):
    """Start (Unix seconds) of the run of active samples (``pending`` and ``firing`` times, consecutive ones no more
    than ``gap`` seconds apart) that contains time ``at``; None when no run contains it. Prometheus keeps an alert's
    ``activeAt`` only while its condition holds at every evaluation, so the firing that follows a run of pending
    samples started ``for:`` after that run's first sample, not after an earlier run that ended."""
    for first, last in streaks(list(pending) + list(firing), gap):
        if first <= at <= last:
            return first
    return None


def alert_result(scenario, flooder, arriver, start, alerts_matrix, rule_groups, expected_for, dcgm_pods_matrix,
                 step_seconds=5, images=None):
    """Judge the flood scenario's alerts. ``flooder``, ``arriver``: normalised tenants; ``start``: Unix time the
    flooder submitted; ``expected_for``: the ``for:`` the inventory gave the over-guarantee alert (a Prometheus
    duration string, shown) as seconds in ``expected_for[1]`` (``(text, seconds)``); ``dcgm_pods_matrix``: the
    count of the flooder's pods the DCGM exporter attributed GPUs to, over time; ``step_seconds``: the step of the
    matrices. The metrics give how long each tenant's condition held (active: pending or firing), the margins of
    the ``for:`` on both sides."""
    durations = rule_durations(rule_groups)
    history = alert_history(alerts_matrix)
    flood = history.get((OVER_GUARANTEE, flooder["name"]), {"pending": [], "firing": []})
    first_pending = flood["pending"][0] if flood["pending"] else None
    first_firing = flood["firing"][0] if flood["firing"] else None
    # The pending run that led to the first firing (an earlier run that ended reset the alert's for:).
    run_start = None if first_firing is None else active_since(flood["pending"], flood["firing"], first_firing,
                                                               2 * step_seconds)
    loaded_for = durations.get(OVER_GUARANTEE)

    def rel(t):
        return None if t is None else round(t - start, 1)

    arriver_alerts = sorted({name for (name, tenant), states in history.items()
                             if tenant == arriver["name"] and states["firing"]})
    other_firing = sorted({"%s%s" % (name, " (%s)" % tenant if tenant else "") for (name, tenant), states
                           in history.items()
                           if states["firing"] and (name, tenant) != (OVER_GUARANTEE, flooder["name"])})
    attributed = int(_max(dcgm_pods_matrix))

    def longest(name):
        states = history.get((OVER_GUARANTEE, name), {"pending": [], "firing": []})
        runs = streaks(states["pending"] + states["firing"], 2 * step_seconds)
        return max([round(b - a + step_seconds, 1) for a, b in runs] or [0])
    checks = [
        _check("Prometheus evaluates %s with the inventory's for:" % OVER_GUARANTEE,
               "%s (%ss)" % (expected_for[0], expected_for[1]),
               "not loaded" if loaded_for is None else "%ss" % loaded_for,
               loaded_for is not None and abs(loaded_for - float(expected_for[1])) < 0.001),
        _check("%s for %s (holds more than 90%% of its %d guaranteed GPUs) goes pending, then firing"
               % (OVER_GUARANTEE, flooder["name"], flooder["gpus"]),
               "pending, then firing at least for: later (pending without a break)",
               "pending at +%ss, firing at +%ss" % (rel(run_start), rel(first_firing)) if first_firing
               else ("pending at +%ss, never firing" % rel(first_pending) if first_pending else "never pending"),
               run_start is not None and first_firing is not None and loaded_for is not None
               and first_firing - run_start >= loaded_for - 0.001),
        _check("No alert fires for %s (holds its own guarantee, briefly)" % arriver["name"], "none",
               arriver_alerts or "none", not arriver_alerts),
        _check("No other fairgpu alert fires (starvation, GPU memory, Kueue down)", "none",
               other_firing or "none", not other_firing),
        _check("The DCGM exporter attributes GPUs to %s's running pods (most at once)" % flooder["name"],
               ">= %d (its guarantee)" % flooder["gpus"], attributed, attributed >= flooder["gpus"]),
    ]
    return {
        "name": "%s_alerts" % scenario,
        "title": "%s: alerts on Prometheus (%s floods, %s arrives)" % (scenario, flooder["name"], arriver["name"]),
        "checks": checks,
        "metrics": {
            "over_guarantee_for": "%s (the shipped rule file says 5m; shortened by the validation inventory's "
                                  "monitoring_alert_for)" % expected_for[0],
            "over_guarantee_pending_after_s": rel(first_pending),
            "over_guarantee_firing_after_s": rel(first_firing),
            "over_90_percent_held_s": {flooder["name"]: longest(flooder["name"]), arriver["name"]: longest(arriver["name"])},
        },
        "images": images or [],
    }


def alert_spans(matrix, alertname, tenant, step="5s", state="firing"):
    """Time ranges ``[{"start", "end"}]`` (Unix seconds) in which ``alertname`` was in ``state`` (firing or pending)
    for ``tenant``: consecutive samples no more than two steps apart form one range."""
    from ansible_collections.fairgpu.tenancy.plugins.module_utils.monitoring.objects import duration_seconds

    times = alert_history(matrix).get((alertname, tenant), {}).get(state, [])
    return [{"start": a, "end": b} for a, b in streaks(times, 2 * duration_seconds(step))]


KUEUE_DOWN = "FairgpuKueueDown"
# The capacity alert the gpu_node_loss scenario must see firing while the node is away.
GUARANTEES_OVER_CAPACITY = "FairgpuGuaranteesOverCapacity"


def kueue_down_check(alerts_matrix, down_ts, back_ts, for_seconds, step_seconds):
    """Whether ``FairgpuKueueDown`` did what its rule says while Kueue was down from ``down_ts`` to ``back_ts`` (Unix
    seconds). Prometheus sees the outage at its first failed scrape of Kueue (``up == 0``, within a scrape interval,
    ``step_seconds`` here), keeps the alert pending for ``for_seconds`` and fires it at the next evaluation: an
    outage longer than ``for_seconds`` plus three steps must fire it; a shorter one must leave it pending at most
    (a firing then is the rule's ``for:`` not in force). Firing samples up to three steps after ``back_ts`` count:
    the first successful scrape ends the alert."""
    history = alert_history(alerts_matrix).get((KUEUE_DOWN, ""), {"pending": [], "firing": []})
    end = back_ts + 3 * step_seconds
    pending = [t for t in history["pending"] if down_ts <= t <= end]
    firing = [t for t in history["firing"] if down_ts <= t <= end]
    observed = ", ".join(part for part in (
        "pending %.0f s after the fault" % (pending[0] - down_ts) if pending else "",
        "firing %.0f s after the fault" % (firing[0] - down_ts) if firing else "") if part) or "never active"
    down = back_ts - down_ts
    if down >= for_seconds + 3 * step_seconds:
        return _check("%s fired while Kueue was down (%.0f s; for: %.0f s)" % (KUEUE_DOWN, down, for_seconds),
                      "firing", observed, bool(firing))
    return _check("%s pending, not firing, while Kueue was down (%.0f s, shorter than for: %.0f s plus three "
                  "evaluations)" % (KUEUE_DOWN, down, for_seconds), "pending, never firing", observed,
                  bool(pending) and not firing)


def kueue_noise(errors_vector, evictions_vector):
    """Kueue's own trouble during a scenario, from its metrics: ``errors_vector``, the instant vector of
    ``sum by (controller) (increase(controller_runtime_reconcile_errors_total[window]))`` (controller-runtime's
    counter of reconciles that returned an error, which Kueue retries with backoff); ``evictions_vector``, that of
    ``sum by (reason) (increase(kueue_evicted_workloads_total[window]))`` (kueue v0.19.2 pkg/metrics). Returns
    ``(metrics, notes)``: ``{"kueue_reconcile_errors": {controller: n}, "kueue_evictions": {reason: n}}`` (rounded:
    ``increase`` extrapolates) and the report's sentences saying what struggled, none when nothing did."""
    def counts(vector, label):
        found = {}
        for sample in vector or []:
            value = int(round(float(sample["value"][1])))
            if value > 0:
                found[sample["metric"].get(label, "")] = value
        return found
    errors, evictions = counts(errors_vector, "controller"), counts(evictions_vector, "reason")
    notes = []
    if errors:
        notes.append("Kueue struggled: %d reconciler errors (%s), each retried by Kueue; its log says which objects"
                     % (sum(errors.values()), ", ".join("%s %d" % kv for kv in sorted(errors.items()))))
    if evictions:
        notes.append("Kueue evicted workloads %d times (%s)" % (
            sum(evictions.values()), ", ".join("%s %d" % kv for kv in sorted(evictions.items()))))
    return {"kueue_reconcile_errors": errors, "kueue_evictions": evictions}, notes


def prometheus_restart_result(flooder, fault, back, before, after, for_seconds, step_seconds):
    """Judge the Prometheus-restart scenario: ``flooder`` holds more than its guarantee, so the over-guarantee alert
    fires (``before``: ``{"ts", "for_state"}``, ALERTS_FOR_STATE's value, the Unix time the alert became active);
    Prometheus is taken down (``fault``: ``{"how", "ts"}``) and comes back (``back``: ``{"ts", "ready_seconds"}``);
    ``after``: the same read once it fires again (``ts`` None: never). ``for_seconds``: the rule's for: as
    Prometheus read it; ``step_seconds``: its evaluation interval.

    Prometheus restores an alert's for: state at its first evaluation after a start, from the ALERTS_FOR_STATE series
    it wrote before (prometheus v3.16.0 rules/group.go ``RestoreForState``): an alert that was firing keeps its
    active-since time and fires again at that evaluation, if the outage was shorter than
    ``--rules.alert.for-outage-tolerance`` (1h by default). So it must fire again within three evaluations of the
    return, not after a new for:, with the same active-since time; a Prometheus that lost its data (an emptyDir gone
    with the pod) or a restore turned off shows a new for: and a new time, and fails both."""
    name = flooder["name"]
    down = round(back["ts"] - fault["ts"], 1)
    again = None if after.get("ts") is None else round(after["ts"] - back["ts"], 1)
    bound = 3 * step_seconds
    checks = [
        _check("Prometheus taken down while %s fires for %s, then back" % (OVER_GUARANTEE, name), fault["how"],
               "down %.1f s, ready %.1f s after its start" % (down, back.get("ready_seconds") or 0), down > 0),
        _check("%s for %s fires again within three evaluations of Prometheus's return, not after a new for: (%s s)"
               % (OVER_GUARANTEE, name, "?" if for_seconds is None else "%.0f" % for_seconds),
               "<= %.0f s" % bound, "never" if again is None else "%.1f s" % again,
               again is not None and again <= bound),
        _check("its for: clock restored: the time it became active (ALERTS_FOR_STATE) is the one before the outage",
               before.get("for_state"), after.get("for_state"),
               before.get("for_state") is not None and after.get("for_state") is not None
               and abs(before["for_state"] - after["for_state"]) < 1),
    ]
    return {
        "name": "prometheus_restart",
        "title": "Prometheus restarts while %s fires for %s" % (OVER_GUARANTEE, name),
        "checks": checks,
        "metrics": {"fault": fault["how"], "down_seconds": down, "prometheus_ready_seconds": back.get("ready_seconds"),
                    "refiring_seconds": again, "alert_for_seconds": for_seconds},
        "timeline": [],
    }
