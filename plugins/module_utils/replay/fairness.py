# -*- coding: utf-8 -*-
# Copyright: fairgpu contributors
# Apache License 2.0 (see LICENSE)
"""What a replay is judged by (issue 17): waits from what Kueue decided, and each tenant's GPU share while tenants
contend, against the demand-capped weighted max-min share. Pure logic, no cluster access. Units: seconds, GPUs.

- A workload's wait runs from its creation (``metadata.creationTimestamp``) to its admission: the first time its
  ``QuotaReserved`` condition became True (Kueue v1beta2 Workload status; Kueue sets QuotaReserved when the
  workload gets quota and Admitted once its admission checks pass, which the replay's ClusterQueues have none of).
- The weighted max-min share (water-filling, as fair sharing's goal is described in Kueue's "Fair Sharing"
  concept page): capacity is handed out in proportion to the tenants' weights, no tenant gets more than it
  demands, and what a tenant cannot use goes to the others in proportion to theirs.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import datetime
import math


def _time(text):
    """Seconds since the epoch of an RFC 3339 time as the API server writes it (``2026-12-01T10:00:00Z``)."""
    moment = datetime.datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ")
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
    proportion to ``weights`` (``{tenant: weight}``, default 1 each); no tenant gets more than its demand."""
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


def contention_shares(steps, capacity, weights=None):
    """Time-weighted GPU shares while two or more tenants have pending work. ``steps``: ``[(time, {tenant:
    {"held": GPUs held, "wanted": GPUs held plus pending}})]`` in time order, each holding until the next.
    Returns ``{"seconds": time under contention, "held": {tenant: mean GPUs held}, "fair": {tenant: mean
    weighted max-min share of what it wanted}}``; means are over the contended time only."""
    seconds, held, fair = 0.0, {}, {}
    for (time, tenants), (following, _next) in zip(steps, steps[1:]):
        pending = [t for t, v in tenants.items() if v["wanted"] > v["held"]]
        if len(pending) < 2 or following <= time:
            continue
        span = following - time
        shares = weighted_max_min(capacity, dict((t, v["wanted"]) for t, v in tenants.items()), weights)
        seconds += span
        for tenant, value in tenants.items():
            held[tenant] = held.get(tenant, 0.0) + value["held"] * span
            fair[tenant] = fair.get(tenant, 0.0) + shares[tenant] * span
    if seconds:
        held = dict((t, v / seconds) for t, v in held.items())
        fair = dict((t, v / seconds) for t, v in fair.items())
    return {"seconds": seconds, "held": held, "fair": fair}


def share_bound(capacity, largest_task):
    """How far a tenant's contended share may be from its fair share: max(10 % of capacity, its largest task),
    since Kueue admits whole workloads (issue 17's bound)."""
    return max(0.1 * capacity, largest_task)
