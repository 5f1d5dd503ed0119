# -*- coding: utf-8 -*-
# Copyright: fairgpu contributors
# Apache License 2.0 (see LICENSE)
"""A fast model of Kueue's admission for a planned replay (issue 17, item 4): a discrete-event simulation of the
replay_plan's Jobs (submit time ``at``, run time ``seconds``, ``gpus``, ``tenant``; wall seconds) through one
cohort of ClusterQueues, one per tenant, under a policy. Pure logic, no cluster access. Units: wall seconds, GPUs.

What it models, read from Kueue v0.19.2 (sigs.k8s.io/kueue, cited by path) and its "Fair Sharing" concept page
(https://kueue.sigs.k8s.io/docs/concepts/fair_sharing/):

- Quota: a tenant's usage within ``gpus`` (nominalQuota) plus ``borrowing_limit`` (None: unlimited); what it
  uses above ``gpus - lending_limit`` (its private part) comes from the cohort's pool, the sum of the lendable
  quotas. Guarantees below the cluster's GPUs leave the rest unused (fairgpu's Cohort has no quota of its own).
- Queueing: BestEffortFIFO, each ClusterQueue by creation time (a preempted Workload keeps its place). Between
  ClusterQueues: with fair sharing the lowest share after admission first, a non-borrowing head before a
  borrowing one (gate FairSharingPrioritizeNonBorrowing, on by default since v0.17); without fair sharing
  non-borrowing heads first, then the oldest.
- Fair sharing's share (DRS): the GPUs borrowed above nominal quota (with the Workload) x 1000 / the cohort's
  lendable GPUs / the weight (``pkg/cache/scheduler/fair_sharing.go``, dominantResourceShare).
- Preemption, ClusterQueues' ``reclaimWithinCohort: Any`` (fairgpu's default; all Jobs of one priority, so
  none within a ClusterQueue): candidates are other tenants' admitted Workloads while their tenant borrows,
  the most recently admitted first (``pkg/scheduler/preemption/common/ordering.go``). Without fair sharing only a
  Workload that fits within its tenant's nominal quota preempts (reclaim; no borrowWithinCohort). With fair
  sharing (``pkg/scheduler/preemption/preemption.go``): a preemptor within nominal quota preempts any borrowing
  candidate (gate FairSharingPreemptWithinNominal, on by default since v0.17), otherwise the candidates of the
  ClusterQueue with the highest share first, under the strategies in order: LessThanOrEqualToFinalShare
  (preemptor's share with the Workload <= the target's share without the victim), then LessThanInitialShare
  (< the target's share before). The fewest victims are kept (Kueue gives back victims not needed).
- A preempted Workload loses its progress (its pods are deleted and started again) and is pending again.

What it leaves out: node placement (a Workload admitted by quota may wait for the scheduler to find a node; the
replay measures waits to QuotaReserved, as here), scheduling-cycle latency and the pods' start and stop delays
(``start_delay`` adds a fixed time to each run), one admission per ClusterQueue per cycle (kubernetes-sigs/kueue
#14477) and CPU/memory quotas (the replay's are far above what it asks)."""

import heapq
import math

LESS_EQUAL_FINAL = "LessThanOrEqualToFinalShare"
LESS_INITIAL = "LessThanInitialShare"
DEFAULT_STRATEGIES = (LESS_EQUAL_FINAL, LESS_INITIAL)


class ModelError(ValueError):
    """A policy or job list the model cannot simulate; the message names the field."""


def policy_tenants(tenants):
    """Normalise ``{tenant: {gpus, borrowing_limit, lending_limit, weight}}`` (borrowing_limit/lending_limit None:
    unlimited / all of gpus; weight default 1). Raises ModelError naming the tenant and field."""
    out = {}
    for name, spec in sorted(tenants.items()):
        gpus = spec.get("gpus", 0)
        borrow = spec.get("borrowing_limit")
        lend = spec.get("lending_limit")
        weight = spec.get("weight", 1)
        if not isinstance(gpus, (int, float)) or isinstance(gpus, bool) or gpus < 0:
            raise ModelError("tenant %s: gpus must be a number >= 0, got %r" % (name, gpus))
        if borrow is not None and borrow < 0:
            raise ModelError("tenant %s: borrowing_limit must be >= 0 or null, got %r" % (name, borrow))
        if lend is not None and not 0 <= lend <= gpus:
            raise ModelError("tenant %s: lending_limit must be within 0..gpus, got %r" % (name, lend))
        if weight is None or weight < 0:
            raise ModelError("tenant %s: weight must be >= 0, got %r" % (name, weight))
        out[name] = {"gpus": gpus, "borrowing_limit": borrow, "lending_limit": gpus if lend is None else lend,
                     "weight": float(weight)}
    return out


class _State(object):
    def __init__(self, tenants, capacity):
        self.tenants = tenants
        self.capacity = capacity
        self.usage = dict((t, 0) for t in tenants)
        self.lendable = sum(t["lending_limit"] for t in tenants.values())

    def fits(self, tenant, gpus, removed=()):
        usage = dict(self.usage)
        for victim in removed:
            usage[victim["tenant"]] -= victim["gpus"]
        usage[tenant] += gpus
        spec = self.tenants[tenant]
        if spec["borrowing_limit"] is not None and usage[tenant] > spec["gpus"] + spec["borrowing_limit"]:
            return False
        pool = sum(max(0, u - (self.tenants[t]["gpus"] - self.tenants[t]["lending_limit"])) for t, u in usage.items())
        return pool <= self.lendable and sum(usage.values()) <= self.capacity

    def share(self, tenant, delta=0):
        """Kueue's weighted DRS of ``tenant`` with ``delta`` GPUs more (dominantResourceShare / weight)."""
        borrowed = self.usage[tenant] + delta - self.tenants[tenant]["gpus"]
        if borrowed <= 0 or self.lendable <= 0:
            return 0.0
        weight = self.tenants[tenant]["weight"]
        ratio = borrowed * 1000.0 / self.lendable
        return math.inf if weight == 0 else ratio / weight

    def borrowing(self, tenant, delta=0):
        return self.usage[tenant] + delta > self.tenants[tenant]["gpus"]


def _minimal(state, tenant, gpus, victims):
    """Give back the victims not needed, last chosen first (as Kueue's minimal preemption does)."""
    kept = list(victims)
    for victim in reversed(victims):
        rest = [v for v in kept if v is not victim]
        if state.fits(tenant, gpus, rest):
            kept = rest
    return kept


def _preempt_classical(state, wl, running):
    if state.borrowing(wl["tenant"], wl["gpus"]):
        return None
    usage = dict(state.usage)
    victims = []
    for cand in sorted((r for r in running if r["tenant"] != wl["tenant"]), key=lambda r: -r["admitted"]):
        spec = state.tenants[cand["tenant"]]
        if usage[cand["tenant"]] <= spec["gpus"]:
            continue
        victims.append(cand)
        usage[cand["tenant"]] -= cand["gpus"]
        if state.fits(wl["tenant"], wl["gpus"], victims):
            return _minimal(state, wl["tenant"], wl["gpus"], victims)
    return None


def _preempt_fair(state, wl, running, strategies):
    tenant, gpus = wl["tenant"], wl["gpus"]
    within_nominal = not state.borrowing(tenant, gpus)
    others = [r for r in running if r["tenant"] != tenant]
    saved = dict(state.usage)
    victims = []
    try:
        def candidates_by_queue():
            queues = {}
            for cand in sorted(others, key=lambda r: -r["admitted"]):
                if cand in victims:
                    continue
                if state.borrowing(cand["tenant"]):
                    queues.setdefault(cand["tenant"], []).append(cand)
            return queues

        def take(victim):
            victims.append(victim)
            state.usage[victim["tenant"]] -= victim["gpus"]

        retry = []
        dropped = set()
        while True:
            queues = dict((t, c) for t, c in candidates_by_queue().items() if t not in dropped)
            if not queues:
                break
            target = max(sorted(queues), key=state.share)
            preemptor_new = state.share(tenant, gpus)
            target_old = state.share(target)
            took = False
            for cand in queues[target]:
                if within_nominal:
                    passed = True
                elif strategies and strategies[0] == LESS_EQUAL_FINAL:
                    passed = preemptor_new <= state.share(target, -cand["gpus"])
                else:
                    passed = preemptor_new < target_old
                if passed:
                    take(cand)
                    took = True
                    break
                retry.append(cand)
            if state.fits(tenant, gpus, ()) and took:
                return _minimal_restore(state, saved, tenant, gpus, victims)
            if not took:
                dropped.add(target)
        if len(strategies) > 1 and strategies[1] == LESS_INITIAL:
            tried = set()
            for cand in sorted(retry, key=lambda r: -state.share(r["tenant"])):
                if cand["tenant"] in tried or cand in victims or not state.borrowing(cand["tenant"]):
                    continue
                tried.add(cand["tenant"])
                if state.share(tenant, gpus) < state.share(cand["tenant"]):
                    take(cand)
                    if state.fits(tenant, gpus, ()):
                        return _minimal_restore(state, saved, tenant, gpus, victims)
        return None
    finally:
        state.usage = saved


def _minimal_restore(state, saved, tenant, gpus, victims):
    state.usage = dict(saved)
    return _minimal(state, tenant, gpus, victims)


def simulate(jobs, tenants, capacity, fair_sharing=True, strategies=DEFAULT_STRATEGIES, start_delay=0.0):
    """Run ``jobs`` (replay_plan's, each ``{name, tenant, gpus, seconds, at}``) through the policy ``tenants``
    (``policy_tenants``' input) on ``capacity`` GPUs. ``fair_sharing`` False: Kueue without the Configuration's
    fairSharing. Returns ``{"workloads": {name: {"tenant", "gpus", "at", "wait", "evictions", "admitted",
    "finished", "holds"}}, "preemptions": n, "end": seconds}``; waits in wall seconds from submission to the last
    admission, ``holds`` the spans ``[[admitted, released]]`` it held quota (released: finished or evicted)."""
    spec = policy_tenants(tenants)
    state = _State(spec, capacity)
    for job in jobs:
        if job["tenant"] not in spec:
            raise ModelError("job %s: tenant %s has no quota in the policy" % (job.get("name"), job["tenant"]))
    events = []
    for index, job in enumerate(sorted(jobs, key=lambda j: (j["at"], j["name"]))):
        heapq.heappush(events, (float(job["at"]), 1, index, job["name"]))
    by_name = dict((j["name"], {"name": j["name"], "tenant": j["tenant"], "gpus": int(j["gpus"]),
                                "seconds": float(j["seconds"]) + start_delay, "at": float(j["at"]),
                                "evictions": 0, "admitted": None, "finished": None, "run": 0, "holds": []})
                   for j in jobs)
    pending = dict((t, []) for t in spec)
    running = []
    preemptions = 0
    now = 0.0
    version = 0
    failed = {}
    seq = len(jobs)
    while events:
        now = events[0][0]
        while events and events[0][0] == now:
            _time, kind, _index, payload = heapq.heappop(events)
            if kind == 1:
                pending[by_name[payload]["tenant"]].append(by_name[payload])
            else:
                name, run = payload
                wl = by_name[name]
                if wl["run"] == run and wl in running:
                    running.remove(wl)
                    state.usage[wl["tenant"]] -= wl["gpus"]
                    wl["finished"] = now
                    wl["holds"][-1][1] = now
                    version += 1
        while True:
            heads = []
            for tenant in sorted(spec):
                for position, wl in enumerate(sorted(pending[tenant], key=lambda w: (w["at"], w["name"]))):
                    if wl["gpus"] > capacity:
                        continue
                    if state.fits(tenant, wl["gpus"]):
                        heads.append((wl, ()))
                        break
                    if position or wl.get("evicted_at") == now:
                        # Only the oldest pending Workload preempts (a simplification of BestEffortFIFO); one
                        # evicted at this instant does not preempt back before its pods are gone.
                        continue
                    if failed.get(wl["name"]) == version:
                        continue
                    victims = (_preempt_fair(state, wl, running, list(strategies)) if fair_sharing
                               else _preempt_classical(state, wl, running))
                    if not victims:
                        # Nothing changes until some usage does: do not ask again before.
                        failed[wl["name"]] = version
                    if victims:
                        heads.append((wl, victims))
                        break
            if not heads:
                break
            if fair_sharing:
                heads.sort(key=lambda h: (state.borrowing(h[0]["tenant"], h[0]["gpus"]),
                                          state.share(h[0]["tenant"], h[0]["gpus"]), h[0]["at"], h[0]["name"]))
            else:
                heads.sort(key=lambda h: (state.borrowing(h[0]["tenant"], h[0]["gpus"]), h[0]["at"], h[0]["name"]))
            wl, victims = heads[0]
            for victim in victims:
                running.remove(victim)
                state.usage[victim["tenant"]] -= victim["gpus"]
                victim["evictions"] += 1
                victim["run"] += 1
                victim["admitted"] = None
                victim["evicted_at"] = now
                victim["holds"][-1][1] = now
                pending[victim["tenant"]].append(victim)
                preemptions += 1
            pending[wl["tenant"]].remove(wl)
            state.usage[wl["tenant"]] += wl["gpus"]
            wl["admitted"] = now
            wl["holds"].append([now, None])
            wl["run"] += 1
            version += 1
            running.append(wl)
            seq += 1
            heapq.heappush(events, (now + wl["seconds"], 0, seq, (wl["name"], wl["run"])))
    out = {}
    for name, wl in by_name.items():
        out[name] = {"tenant": wl["tenant"], "gpus": wl["gpus"], "at": wl["at"], "evictions": wl["evictions"],
                     "admitted": wl["admitted"], "finished": wl["finished"], "holds": [list(h) for h in wl["holds"]],
                     "wait": None if wl["admitted"] is None else round(wl["admitted"] - wl["at"], 3)}
    return {"workloads": out, "preemptions": preemptions, "end": now}


def percentile(values, fraction):
    """The nearest-rank percentile, as the replay report computes it (fairness.percentile)."""
    ordered = sorted(values)
    if not ordered:
        return None
    return ordered[max(0, int(math.ceil(fraction * len(ordered))) - 1)]


def predict(jobs, tenants, capacity, factor=1.0, fair_sharing=True, strategies=DEFAULT_STRATEGIES, start_delay=0.0):
    """Per tenant ``{"jobs", "p50", "p95", "max", "trace_p50", "trace_p95", "trace_max", "preempted",
    "not_admitted", "gpu_hours", "trace_gpu_hours"}`` of ``simulate``: waits in wall seconds and in trace seconds
    (x the compression ``factor``), GPU-hours of the runs that finished (wall, and trace x factor)."""
    result = simulate(jobs, tenants, capacity, fair_sharing, strategies, start_delay)
    seconds = dict((j["name"], float(j["seconds"]) + start_delay) for j in jobs)
    gpus = dict((j["name"], int(j["gpus"])) for j in jobs)
    out = {}
    for tenant in sorted(set(w["tenant"] for w in result["workloads"].values()) | set(tenants)):
        mine = [(n, w) for n, w in result["workloads"].items() if w["tenant"] == tenant]
        waits = [w["wait"] for _n, w in mine if w["wait"] is not None]
        hours = sum(gpus[n] * seconds[n] for n, w in mine if w["finished"] is not None) / 3600.0
        row = {"jobs": len(mine), "not_admitted": len(mine) - len(waits),
               "preempted": sum(w["evictions"] for _n, w in mine),
               "gpu_hours": round(hours, 4), "trace_gpu_hours": round(hours * factor, 2)}
        for key, fraction in (("p50", 0.5), ("p95", 0.95), ("max", 1.0)):
            value = percentile(waits, fraction)
            row[key] = value
            row["trace_" + key] = None if value is None else round(value * factor, 1)
        out[tenant] = row
    return {"tenants": out, "preemptions": result["preemptions"], "end": result["end"]}
