# -*- coding: utf-8 -*-
# Copyright: fairgpu contributors
# Apache License 2.0 (see LICENSE)
"""What a replay is judged by (issue 17): waits from what Kueue decided, and each tenant's GPU share while tenants
contend, against the demand-capped weighted max-min share. Pure logic, no cluster access. Units: seconds, GPUs.

- A workload's wait runs from its creation (``metadata.creationTimestamp``) to its admission: the first time its
  ``QuotaReserved`` condition became True (Kueue v1beta2 Workload status; Kueue sets QuotaReserved when the
  workload gets quota and Admitted once its admission checks pass, which the replay's ClusterQueues have none of).
- The share a tenant is promised while tenants contend (``fair_reference``), Kueue's own model: its nominal quota
  first (``reclaimWithinCohort`` takes it back from borrowers, "Cluster Queue" concept page, v0.19), then the
  cohort's unused, lendable quota in proportion to the weights (fair sharing equalises each ClusterQueue's
  borrowed GPUs / lendable GPUs / weight, ``pkg/cache/scheduler/fair_sharing.go`` dominantResourceShare, and
  the "Fair Sharing" concept page), within borrowing and lending limits, never more than it asks.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import datetime
import math


def _time(text):
    """Seconds since the epoch of an RFC 3339 time as the API server writes it: ``2026-12-01T10:00:00Z`` (metav1.Time,
    whole seconds) or ``2026-12-01T10:00:00.123456Z`` (metav1.MicroTime, an Event's ``eventTime``)."""
    layout = "%Y-%m-%dT%H:%M:%S.%fZ" if "." in text else "%Y-%m-%dT%H:%M:%SZ"
    moment = datetime.datetime.strptime(text, layout)
    return (moment - datetime.datetime(1970, 1, 1)).total_seconds()


def workload_wait(workload):
    """Seconds from a Workload's creation to its quota reservation, or None while it has none."""
    status = workload.get("status") or {}
    reserved = next((c for c in status.get("conditions") or [] if c.get("type") == "QuotaReserved"
                     and c.get("status") == "True"), None)
    if reserved is None:
        return None
    return max(0.0, _time(reserved["lastTransitionTime"]) - _time(workload["metadata"]["creationTimestamp"]))


def percentile(values, fraction):
    """The nearest-rank percentile (``fraction`` 0..1) of ``values``; None for none."""
    ordered = sorted(values)
    if not ordered:
        return None
    return ordered[max(0, int(math.ceil(fraction * len(ordered))) - 1)]


def wait_summary(waits, factor=1):
    """``{"count", "p50", "p95", "max"}`` of wall-clock ``waits`` (seconds) and the same in trace time
    (``trace_p50``...: wall time times the compression ``factor``); waits of None (never admitted) are counted
    in ``not_admitted`` and left out of the figures."""
    admitted = [w for w in waits if w is not None]
    summary = {"count": len(admitted), "not_admitted": len(waits) - len(admitted)}
    for name, fraction in (("p50", 0.5), ("p95", 0.95), ("max", 1.0)):
        value = percentile(admitted, fraction)
        summary[name] = value
        summary["trace_" + name] = None if value is None else value * factor
    return summary


def weighted_max_min(capacity, demands, weights=None):
    """``{tenant: GPUs}``: ``capacity`` shared by water-filling over ``demands`` (``{tenant: GPUs wanted}``) in
    proportion to ``weights`` (``{tenant: weight > 0}``, default 1 each); no tenant gets more than its demand."""
    weights = weights or {}
    shares = dict((tenant, 0.0) for tenant in demands)
    open_tenants = set(t for t, d in demands.items() if d > 0)
    left = float(capacity)
    while open_tenants and left > 1e-9:
        total = sum(float(weights.get(t, 1)) for t in open_tenants)
        offer = dict((t, left * float(weights.get(t, 1)) / total) for t in open_tenants)
        satisfied = set(t for t in open_tenants if demands[t] - shares[t] <= offer[t])
        if not satisfied:
            for tenant in open_tenants:
                shares[tenant] += offer[tenant]
            break
        for tenant in satisfied:
            left -= demands[tenant] - shares[tenant]
            shares[tenant] = float(demands[tenant])
        open_tenants -= satisfied
    return shares


def _limit(value):
    return float("inf") if value is None else float(value)


def _quota(quotas, tenant, key, default=None):
    value = (quotas.get(tenant) or {}).get(key)
    return default if value is None else value


def admissible(gpus, tenant, quotas):
    """Whether Kueue can ever admit a Workload of ``gpus`` GPUs for ``tenant`` under ``quotas`` (``fair_reference``'s):
    at most its nominal quota plus what it may borrow, its borrowingLimit and at most what the other members may
    lend (their lendingLimit, else their nominal quota). A larger one stays pending whatever the others do (a
    strict quota's 8-GPU Job of a tenant guaranteed 6): it is no demand Kueue could meet."""
    nominal = float(_quota(quotas, tenant, "gpus", 0))
    lendable = sum(min(float(_quota(quotas, other, "gpus", 0)), _limit(_quota(quotas, other, "lending_limit")))
                   for other in quotas if other != tenant)
    return gpus <= nominal + min(_limit(_quota(quotas, tenant, "borrowing_limit")), lendable)


def best_fill(sizes, room):
    """The most GPUs whole Workloads of ``sizes`` (GPUs each) can fill of ``room`` GPUs (a subset sum, at most
    ``room``): Kueue admits a Workload whole or not at all."""
    room = int(math.floor(room + 1e-9))
    if room <= 0:
        return 0
    reachable = 1  # bit n set: n GPUs can be filled
    for size in sizes:
        reachable |= (reachable << int(size)) & ((1 << (room + 1)) - 1)
    return reachable.bit_length() - 1


def fair_reference(capacity, demands, quotas, fair_sharing=True):
    """``{tenant: GPUs}`` Kueue promises each tenant of a cohort on ``capacity`` GPUs while it asks ``demands``
    (``{tenant: GPUs held plus pending}``), from ``quotas`` (``{tenant: {"gpus": nominalQuota, "weight",
    "borrowing_limit", "lending_limit"}}``; a limit None: none; weight default 1; a tenant absent: no quota).

    1. Each tenant gets what it asks up to its nominal quota.
    2. With ``fair_sharing``, the cohort's unused quota that may be lent (per tenant the smaller of its unused quota
       and its lendingLimit), at most the GPUs left of ``capacity``, goes to the tenants asking more than their
       quota, in proportion to their weights (water-filling: fair sharing equalises borrowed / weight), each up to
       its borrowingLimit. Kueue gives a ClusterQueue of weight 0 an infinite share, so it borrows only what the
       others leave; those tenants share that equally. Without fair sharing Kueue lends first come, first served
       and promises step 1 only."""
    tenants = sorted(set(demands) | set(quotas))
    asked = dict((t, float(demands.get(t, 0))) for t in tenants)
    nominal = dict((t, float(_quota(quotas, t, "gpus", 0))) for t in tenants)
    reference = dict((t, min(asked[t], nominal[t])) for t in tenants)
    if not fair_sharing:
        return reference
    pool = sum(min(nominal[t] - reference[t], _limit(_quota(quotas, t, "lending_limit"))) for t in tenants)
    pool = max(0.0, min(pool, float(capacity) - sum(reference.values())))
    wants = dict((t, min(asked[t] - nominal[t], _limit(_quota(quotas, t, "borrowing_limit"))))
                 for t in tenants if asked[t] > nominal[t])
    weights = dict((t, float(_quota(quotas, t, "weight", 1))) for t in wants)
    weighted = dict((t, w) for t, w in wants.items() if weights[t] > 0)
    lent = weighted_max_min(pool, weighted, weights)
    unweighted = dict((t, w) for t, w in wants.items() if weights[t] <= 0)
    lent.update(weighted_max_min(pool - sum(lent.values()), unweighted))
    for tenant, gpus in lent.items():
        reference[tenant] += gpus
    return reference


def contention_shares(steps, capacity, quotas, fair_sharing=True):
    """Time-weighted GPU shares while two or more tenants have pending work. ``steps``: ``[(time, {tenant:
    {"held": GPUs held, "wanted": GPUs held plus pending, "sizes": [GPUs of each wanted Workload]}})]`` in time
    order, each holding until the next (``sizes`` optional); ``quotas``: ``fair_reference``'s. Returns
    ``{"seconds": time under contention, "held": {tenant: mean GPUs held}, "reference": {tenant: mean
    fair_reference}, "fragment": {tenant: mean GPUs of the reference no set of its whole Workloads fills}, "spare":
    {tenant: mean GPUs its reference gains when the GPUs the others can neither fill nor hold are lent}}``; means
    are over the contended time only.

    The spare is what Kueue may lend on: GPUs another tenant is promised but cannot use, its Workloads being whole
    (an 8-GPU Job waits while 4 GPUs of its tenant's share stand free), go to a Workload that fits them; Kueue
    admits any Workload that fits, its fair sharing orders the ClusterQueues, it keeps no GPU idle for a Workload
    that cannot fit (BestEffortFIFO; kubernetes-sigs/kueue#6929 for the head-of-queue case). At each moment the
    reference is computed again with each tenant's demand cut by the whole GPUs of its reference it neither fills
    nor holds, so those GPUs are lent as Kueue's promise lends (by weight, within borrowingLimit and
    lendingLimit), once; a reference's fraction (8.5 of 16 GPUs) is rounding, which share_tolerance's 1 GPU
    covers, and is not lent. Without ``fair_sharing`` nothing beyond the guarantees is promised, so the spare is 0."""
    seconds, held, reference, fragment, spare = 0.0, {}, {}, {}, {}
    for (time, tenants), (following, _next) in zip(steps, steps[1:]):
        pending = [t for t, v in tenants.items() if v["wanted"] > v["held"]]
        if len(pending) < 2 or following <= time:
            continue
        span = following - time
        wanted = dict((t, v["wanted"]) for t, v in tenants.items())
        shares = fair_reference(capacity, wanted, quotas, fair_sharing)
        seconds += span
        unfilled, cut = {}, dict(wanted)
        for tenant, value in tenants.items():
            share = shares.get(tenant, 0.0)
            unfilled[tenant] = 0.0 if value.get("sizes") is None else share - best_fill(value["sizes"], share)
            idle = math.floor(min(unfilled[tenant], max(0.0, share - value["held"])) + 1e-9)
            if idle > 0:
                cut[tenant] = min(wanted[tenant], share - idle)
        lent = shares if cut == wanted else fair_reference(capacity, cut, quotas, fair_sharing)
        for tenant, value in tenants.items():
            share = shares.get(tenant, 0.0)
            held[tenant] = held.get(tenant, 0.0) + value["held"] * span
            reference[tenant] = reference.get(tenant, 0.0) + share * span
            fragment[tenant] = fragment.get(tenant, 0.0) + unfilled[tenant] * span
            spare[tenant] = spare.get(tenant, 0.0) + max(0.0, lent.get(tenant, 0.0) - share) * span
    if seconds:
        held, reference, fragment, spare = [dict((t, v / seconds) for t, v in figures.items())
                                            for figures in (held, reference, fragment, spare)]
    return {"seconds": seconds, "held": held, "reference": reference, "fragment": fragment, "spare": spare}


SHARE_TOLERANCE_GPUS = 1.0
SHARE_TOLERANCE_FRACTION = 0.2


def share_tolerance(reference, fragment=0.0):
    """GPUs a tenant's mean contended share may be from its mean ``fair_reference``: the larger of 1 GPU and 20 % of
    the reference, plus the mean ``fragment`` (the part of the reference its whole Workloads could not fill at each
    moment: a tenant asking 8-GPU Jobs cannot hold 6). A share further off is a policy that does not keep its
    promise (shown with a weight of 0.1 and a halved nominalQuota in tests/unit/test_replay_fairness.py and
    test_98_replay.py)."""
    return round(max(SHARE_TOLERANCE_GPUS, SHARE_TOLERANCE_FRACTION * reference) + fragment, 3)


def _owed(held, pending, guarantee):
    """Whether a tenant holding ``held`` GPUs is owed admission within its guarantee: one of its ``pending``
    Workloads (GPUs each) fits in what is left of its nominal quota."""
    return any(held + gpus <= guarantee for gpus in pending)


def guarantee_episodes(workloads, guarantees, end=None):
    """When each tenant waited for GPUs within its guarantee, and how long: the time-to-guarantee. Kueue's promise
    for a ClusterQueue's nominalQuota ("Cluster Queue" concept page, v0.19: quota it may always use; with
    ``reclaimWithinCohort`` it preempts the cohort's borrowers to get it back): a pending Workload that fits in what
    is left of its tenant's nominal quota is admitted, preempting borrowers when the cohort is full.

    ``workloads``: ``[{"tenant", "gpus", "created", "holds": [[start, end], ...], "finished", "unknown"}]`` in
    seconds, where ``holds`` are the spans the Workload held quota (one per admission; an evicted Workload is
    pending again between two; one never finished is pending until ``end``) and ``unknown``, when given, a span
    ``[start, end]`` in which its state is not known (a history Kueue's Events do not hold whole: held or pending,
    nobody can say). An episode of a tenant during an unknown span of one of its Workloads is not judged
    (``"judged": False``): counted as pending, such a span made episodes that never were, and counted as held it
    would hide real ones. ``guarantees``: ``{tenant: GPUs of nominal
    quota}``. An episode starts when one of a tenant's pending Workloads fits in its unused guarantee and ends when
    none does any more (admitted, or the tenant's holds grew); a Workload admitted in the second it was created
    (the status's timestamps are whole seconds) makes none. Returns ``{tenant: [{"start", "seconds",
    "reclaim"}]}`` (an episode still going at the end has ``"open": True`` and lasts until ``end``): ``reclaim``
    is True when another tenant held more than its guarantee at the episode's start (the GPUs had to come back
    from borrowers)."""
    changes = {}

    def add(time, tenant, key, value):
        changes.setdefault(time, []).append((tenant, key, value))

    for workload in workloads:
        tenant, gpus = workload["tenant"], workload["gpus"]
        waiting_from = workload["created"]
        unknown = workload.get("unknown")
        if unknown:
            add(unknown[0], tenant, "unknown", 1)
            add(unknown[1], tenant, "unknown", -1)
            waiting_from = max(waiting_from, unknown[1])
        for admitted, released in sorted(workload.get("holds") or []):
            if admitted > waiting_from:
                add(waiting_from, tenant, "pending+", gpus)
                add(admitted, tenant, "pending-", gpus)
            add(admitted, tenant, "held", gpus)
            add(released, tenant, "held", -gpus)
            waiting_from = released
        stop = workload.get("finished")
        if stop is None or stop > waiting_from:
            add(waiting_from, tenant, "pending+", gpus)
            if stop is not None:
                add(stop, tenant, "pending-", gpus)
    tenants = sorted(set(guarantees) | set(w["tenant"] for w in workloads))
    held = dict((t, 0) for t in tenants)
    pending = dict((t, []) for t in tenants)
    unknown = dict((t, 0) for t in tenants)
    open_since, episodes = {}, dict((t, []) for t in tenants)

    def episode(tenant, start, seconds, reclaim, judged):
        item = {"start": start, "seconds": seconds, "reclaim": reclaim}
        if not judged:
            item["judged"] = False
        return item

    for time in sorted(changes):
        for tenant, key, value in changes[time]:
            if key == "held":
                held[tenant] += value
            elif key == "unknown":
                unknown[tenant] += value
            elif key == "pending+":
                pending[tenant].append(value)
            else:
                pending[tenant].remove(value)
        for tenant in tenants:
            owed = _owed(held[tenant], pending[tenant], guarantees.get(tenant, 0))
            if owed and tenant not in open_since:
                reclaim = any(held[o] > guarantees.get(o, 0) for o in tenants if o != tenant)
                open_since[tenant] = [time, reclaim, not unknown[tenant]]
            elif tenant in open_since and unknown[tenant]:
                open_since[tenant][2] = False
            if not owed and tenant in open_since:
                start, reclaim, judged = open_since.pop(tenant)
                episodes[tenant].append(episode(tenant, start, time - start, reclaim, judged))
    last = end if end is not None else max(changes or [0])
    for tenant, (start, reclaim, judged) in open_since.items():
        episodes[tenant].append(dict(episode(tenant, start, last - start, reclaim, judged), open=True))
    return episodes


def guarantee_summary(episodes, bound):
    """Per tenant, of ``guarantee_episodes``: ``{"episodes", "unjudged", "reclaims", "max", "p95", "reclaim_max",
    "reclaim_p95", "release_max", "release_p95", "over_bound", "passed"}`` (seconds); the figures are of the judged
    episodes, ``unjudged`` counts the others; reclaims (GPUs taken back from borrowers) apart from the episodes
    that began while nobody borrowed (the tenant waits for a release or a scheduling cycle); passed when no
    judged episode lasted longer than ``bound`` seconds."""
    summary = {}
    for tenant, items in sorted(episodes.items()):
        judged = [e for e in items if e.get("judged", True)]
        seconds = [e["seconds"] for e in judged]
        reclaims = [e["seconds"] for e in judged if e["reclaim"]]
        releases = [e["seconds"] for e in judged if not e["reclaim"]]
        over = [e for e in judged if e["seconds"] > bound]
        summary[tenant] = {"episodes": len(judged), "unjudged": len(items) - len(judged), "reclaims": len(reclaims),
                           "max": max(seconds) if seconds else None, "p95": percentile(seconds, 0.95),
                           "reclaim_max": max(reclaims) if reclaims else None,
                           "reclaim_p95": percentile(reclaims, 0.95),
                           "release_max": max(releases) if releases else None,
                           "release_p95": percentile(releases, 0.95), "over_bound": len(over),
                           "passed": not over}
    return summary
