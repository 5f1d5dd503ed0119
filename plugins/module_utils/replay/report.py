# -*- coding: utf-8 -*-
# Copyright: fairgpu contributors
# Apache License 2.0 (see LICENSE)
"""The replay report (issue 17): per tenant, from what Kueue decided on the real cluster (its Workloads'
conditions and scheduling stats), waits, GPU-hours, preemptions, Jobs lost and the contended share against the
weighted max-min share. Pure logic, no cluster access; the module replay_report writes it.

What a Workload tells, Kueue v0.19 (apis/kueue/v1beta2/workload_types.go): ``QuotaReserved`` (True from the
last time Kueue reserved quota), ``Finished`` (True with reason Succeeded or Failed when its Job ended),
``Preempted`` (its message names the preemptor: "Preempted to accommodate a workload (UID: ..., JobUID: ...)
due to ...", pkg/scheduler/preemption), and ``status.schedulingStats.evictions[] {reason, underlyingCause,
count}``, which counts every eviction, also those undone by a later re-admission.

A Workload's status keeps only its last quota reservation, so a preempted Workload's earlier holds come from
Kueue's Events (events.k8s.io/v1, Kueue v0.19's recorders from ``mgr.GetEventRecorder``): the scheduler records
``QuotaReserved`` on each reservation (pkg/scheduler/scheduler.go) and the preemptor records ``Preempted`` on its
victim (pkg/scheduler/preemption/preemption.go), with microsecond ``eventTime``. client-go's events broadcaster
(tools/events/event_broadcaster.go, v0.36) writes the second isomorphic event (same Workload, reason, action and
reporter) as ``series: {count: 2, lastObservedTime}`` at once but later ones only when the series ends (6 minutes
without one), so a history is complete up to two reservations; a Workload with more, or whose events expired
(the API server's ``--event-ttl``, 1 h by default), keeps its last hold only and is counted as incomplete. A hold
ends at the Preempted event, when Kueue decided to evict; the quota is freed a moment later, once the Job is
suspended.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import math
import re

from ansible_collections.fairgpu.tenancy.plugins.module_utils.common.names import GPU_RESOURCE
from ansible_collections.fairgpu.tenancy.plugins.module_utils.common.quantity import parse_quantity
from ansible_collections.fairgpu.tenancy.plugins.module_utils.replay import fairness

PREEMPTOR_UID = re.compile(r"UID: ([0-9a-fA-F-]{36})")


def _condition(workload, kind):
    return next((c for c in (workload.get("status") or {}).get("conditions") or []
                 if c.get("type") == kind and c.get("status") == "True"), None)


def _event_times(event):
    """Every time an events.k8s.io/v1 Event was observed that its object tells: ``eventTime``, and
    ``series.lastObservedTime`` when the series has exactly two (later ones are not written until the series ends).
    Returns (times, complete)."""
    first = event.get("eventTime") or event.get("deprecatedFirstTimestamp")
    times = [fairness._time(first)] if first else []
    series = event.get("series") or {}
    count = series.get("count", 1 if times else 0)
    if count >= 2 and series.get("lastObservedTime"):
        times.append(fairness._time(series["lastObservedTime"]))
    return times, count <= 2 and len(times) == count


def workload_holds(fact, events):
    """The spans ``[[start, end]]`` a Workload held quota, from its Kueue ``events`` (events.k8s.io/v1 Events whose
    ``regarding`` is the Workload) and its ``fact`` (``workload_facts``: last reservation and finish). Returns
    (holds, complete): without a usable history, the one hold from the status."""
    if fact["reserved"] is None:
        return [], True
    last = [[fact["reserved"], fact["finished"]]] if fact["finished"] is not None else []
    reserved, preempted, complete = [], [], True
    for event in events:
        times, whole = _event_times(event)
        if event.get("reason") == "QuotaReserved":
            reserved += times
        elif event.get("reason") == "Preempted":
            preempted += times
        else:
            continue
        complete = complete and whole
    reserved.sort()
    preempted.sort()
    if not reserved or not complete or len(reserved) != len(preempted) + 1 or fact["finished"] is None:
        return last, not fact["evictions"]
    holds = [[start, end] for start, end in zip(reserved, preempted)]
    holds.append([max(reserved[-1], holds[-1][1]) if holds else reserved[-1], fact["finished"]])
    return holds, True


def workload_facts(workload, jobs_by_name):
    """One Workload as ``{"workload", "uid", "job", "tenant", "gpus", "created", "reserved", "finished",
    "finished_reason", "wait", "evictions", "preempted", "preemptor_uid"}`` (times: Unix seconds from Kueue's
    timestamps; None when missing). ``jobs_by_name``: the replay's Jobs by name. None for a Workload of no Job of
    the replay."""
    metadata = workload.get("metadata") or {}
    owner = next((o.get("name") for o in metadata.get("ownerReferences") or [] if o.get("kind") == "Job"), None)
    job = jobs_by_name.get(owner)
    if job is None:
        return None
    reserved, finished = _condition(workload, "QuotaReserved"), _condition(workload, "Finished")
    evictions = (workload.get("status") or {}).get("schedulingStats", {}).get("evictions") or []
    preempted_by = [e.get("count", 0) for e in evictions if e.get("reason") == "Preempted"]
    preempted = next((c for c in (workload.get("status") or {}).get("conditions") or []
                      if c.get("type") == "Preempted"), None)
    match = PREEMPTOR_UID.search((preempted or {}).get("message") or "")
    return {"workload": metadata.get("name"), "uid": metadata.get("uid"), "job": owner, "tenant": job["tenant"],
            "gpus": job["gpus"], "created": fairness._time(metadata["creationTimestamp"]),
            "reserved": fairness._time(reserved["lastTransitionTime"]) if reserved else None,
            "finished": fairness._time(finished["lastTransitionTime"]) if finished else None,
            "finished_reason": finished.get("reason") if finished else None,
            "wait": fairness.workload_wait(workload),
            "evictions": sum(e.get("count", 0) for e in evictions), "preempted": sum(preempted_by),
            "preemptor_uid": match.group(1) if match and sum(preempted_by) else None}


def _holds(fact, stop):
    """A fact's holds (``workload_holds``; without them, its last reservation to ``stop``), each cut at ``stop``."""
    holds = fact.get("holds")
    if holds is None:
        holds = [[fact["reserved"], stop]] if fact["reserved"] is not None else []
    return [[start, min(end, stop)] for start, end in holds if start < min(end, stop)]


def share_steps(facts, end=None, quotas=None):
    """``[(time, {tenant: {"held", "wanted", "sizes"}})]`` from the Workloads' facts: a Workload is wanted from its
    creation to its end (finished, or ``end``) and held during its holds (``workload_holds``); ``sizes`` are the GPUs
    of each Workload wanted. With ``quotas`` (``fairness.fair_reference``'s), a Workload Kueue could never admit
    (``fairness.admissible``) is left out of what its tenant wants: no policy could meet it."""
    changes = {}
    tenants = sorted(set(f["tenant"] for f in facts))

    def add(time, tenant, key, value):
        changes.setdefault(time, []).append((tenant, key, value))

    for fact in facts:
        stop = fact["finished"] if fact["finished"] is not None else end
        if stop is None:
            continue
        if quotas is None or fairness.admissible(fact["gpus"], fact["tenant"], quotas):
            add(fact["created"], fact["tenant"], "wanted", fact["gpus"])
            add(stop, fact["tenant"], "wanted", -fact["gpus"])
        for start, released in _holds(fact, stop):
            add(start, fact["tenant"], "held", fact["gpus"])
            add(released, fact["tenant"], "held", -fact["gpus"])
    level = dict(((t, k), 0) for t in tenants for k in ("held", "wanted"))
    sizes = dict((t, []) for t in tenants)
    steps = []
    for time in sorted(changes):
        for tenant, key, value in changes[time]:
            level[(tenant, key)] += value
            if key == "wanted" and value > 0:
                sizes[tenant].append(value)
            elif key == "wanted":
                sizes[tenant].remove(-value)
        steps.append((time, dict((t, {"held": level[(t, "held")], "wanted": level[(t, "wanted")],
                                      "sizes": sorted(sizes[t])}) for t in tenants)))
    return steps


def tenant_figures(facts, tenants, factor):
    """Per tenant: Jobs, waits (``fairness.wait_summary`` in wall and trace time), GPU-hours used (wall, and in
    trace time x ``factor``), preemptions suffered and caused (preemptor UIDs matched to the tenants' Workloads)."""
    tenant_of_uid = dict((f["uid"], f["tenant"]) for f in facts)
    caused = {}
    for fact in facts:
        if fact["preemptor_uid"] in tenant_of_uid:
            by = tenant_of_uid[fact["preemptor_uid"]]
            caused[by] = caused.get(by, 0) + 1
    figures = {}
    for tenant in tenants:
        mine = [f for f in facts if f["tenant"] == tenant]
        hours = sum(f["gpus"] * (end - start) for f in mine if f["finished"] is not None
                    for start, end in _holds(f, f["finished"])) / 3600.0
        figures[tenant] = {"workloads": len(mine), "waits": fairness.wait_summary([f["wait"] for f in mine], factor),
                           "gpu_hours": round(hours, 4), "trace_gpu_hours": round(hours * factor, 2),
                           "preemptions_suffered": sum(f["preempted"] for f in mine),
                           "evictions": sum(f["evictions"] for f in mine),
                           "preemptions_caused": caused.get(tenant, 0)}
    return figures


def lost_jobs(jobs, facts):
    """Names of the replay's Jobs that Kueue did not see to a successful end: no Workload, never admitted, not
    finished, or finished Failed."""
    done = set(f["job"] for f in facts if f["reserved"] is not None and f["finished_reason"] == "Succeeded")
    return sorted(j["name"] for j in jobs if j["name"] not in done)


def share_check(steps, capacity, quotas, fair_sharing=True):
    """``fairness.contention_shares`` of the steps against ``fairness.fair_reference`` of the tenants' ``quotas``,
    and per tenant whether its mean contended share is within ``fairness.share_tolerance`` of its mean reference;
    above it, also the tenant's mean ``spare`` (``fairness.contention_shares``: its part of the GPUs other tenants
    were promised and could neither fill with whole Workloads nor hold, which Kueue lends to a Workload that fits).
    Without ``fair_sharing`` the reference is the guarantee part alone and only a share below it fails (Kueue then
    lends first come, first served). Returns
    ``{"contended_seconds", "fair_sharing", "tenants": {tenant: {"held", "reference", "fragment", "spare",
    "tolerance", "passed"}}, "passed", "detail"}`` (GPUs); ``detail`` names each tenant outside its tolerance."""
    shares = fairness.contention_shares(steps, capacity, quotas, fair_sharing)
    checks = {}
    for tenant in sorted(set(shares["held"]) | set(shares["reference"])):
        held, reference = shares["held"].get(tenant, 0.0), shares["reference"].get(tenant, 0.0)
        fragment, spare = shares["fragment"].get(tenant, 0.0), shares["spare"].get(tenant, 0.0)
        tolerance = fairness.share_tolerance(reference, fragment)
        above = not fair_sharing or held - reference <= tolerance + spare
        checks[tenant] = {"held": round(held, 3), "reference": round(reference, 3), "fragment": round(fragment, 3),
                          "spare": round(spare, 3), "tolerance": tolerance,
                          "passed": held >= reference - tolerance and above}
    off = ["%s held %.2f GPUs, reference %.2f +- %g%s" % (
        t, c["held"], c["reference"], c["tolerance"],
        " (+ %g spare above)" % c["spare"] if c["spare"] and c["held"] > c["reference"] else "")
        for t, c in sorted(checks.items()) if not c["passed"]]
    detail = "%s s of contention" % round(shares["seconds"], 3) + ("; " + "; ".join(off) if off else "")
    return {"contended_seconds": round(shares["seconds"], 3), "fair_sharing": fair_sharing, "tenants": checks,
            "detail": detail, "passed": bool(shares["seconds"]) and not off}


def idle_while_pending(facts, capacity):
    """GPU-seconds of quota that stood unreserved while a pending Workload would have fitted in it: between any two
    events (a creation, reservation or end), the free GPUs (capacity less those held) that the pending Workloads,
    smallest first, could have filled. Kueue admits one Workload per ClusterQueue per scheduling cycle
    (kubernetes-sigs/kueue#14477), so a burst can leave GPUs idle while a queue drains. A preempted Workload's
    earlier holds come from its events (``workload_holds``); where they are incomplete, this is an upper bound.
    Returns ``{"gpu_seconds", "share"}`` (share of capacity x the span from the first creation to the last end)."""
    ended = [dict(f, spans=_holds(f, f["finished"])) for f in facts if f["finished"] is not None]
    times = sorted(set([f["created"] for f in ended] + [f["finished"] for f in ended]
                       + [edge for f in ended for span in f["spans"] for edge in span]))
    total = 0.0
    for time, following in zip(times, times[1:]):
        holding = [f for f in ended if any(start <= time < end for start, end in f["spans"])]
        held = sum(f["gpus"] for f in holding)
        free = max(0, capacity - held)
        fits = 0
        for gpus in sorted(f["gpus"] for f in ended if f["created"] <= time < f["finished"]
                           and not any(start <= time < end for start, end in f["spans"])):
            if fits + gpus > free:
                break
            fits += gpus
        total += fits * (following - time)
    span = (times[-1] - times[0]) if len(times) > 1 else 0
    return {"gpu_seconds": round(total, 3), "share": round(total / float(capacity * span), 4) if span else 0.0}


def beyond_guarantee(facts, tenants, factor):
    """Every Workload asking more GPUs than its tenant's guarantee (``tenants``' ``gpus``): Kueue admits it only by
    borrowing, which the guarantee does not promise, so the time-to-guarantee never sees it. ``[{"workload", "job",
    "tenant", "gpus", "guarantee", "wait", "trace_wait", "evictions", "why"}]`` (waits in wall and trace seconds,
    None when never admitted), longest wait first."""
    out = []
    for fact in facts:
        guarantee = (tenants.get(fact["tenant"]) or {}).get("gpus") or 0
        if fact["gpus"] <= guarantee:
            continue
        why = "asks %d GPUs, above its tenant's guarantee of %d: admitted only when the cohort lent %d" % (
            fact["gpus"], guarantee, fact["gpus"] - guarantee)
        out.append({"workload": fact["workload"], "job": fact["job"], "tenant": fact["tenant"], "gpus": fact["gpus"],
                    "guarantee": guarantee, "wait": fact["wait"],
                    "trace_wait": None if fact["wait"] is None else fact["wait"] * factor,
                    "evictions": fact["evictions"], "why": why if fact["wait"] is not None else why + "; never admitted"})
    return sorted(out, key=lambda x: (x["wait"] is not None, -(x["wait"] or 0), x["workload"]))


def events_by_workload(events):
    """``{Workload UID: [Event]}`` of the events.k8s.io/v1 Events whose ``regarding`` is a Workload."""
    grouped = {}
    for event in events or []:
        regarding = event.get("regarding") or {}
        if regarding.get("kind") == "Workload" and regarding.get("uid"):
            grouped.setdefault(regarding["uid"], []).append(event)
    return grouped


def guarantee_check(facts, tenants, bound):
    """The time-to-guarantee of each tenant over the replay (``fairness.guarantee_episodes`` of the facts' holds,
    guarantees from ``tenants``' ``gpus``) and whether every episode ended within ``bound`` seconds."""
    guarantees = dict((t, (v or {}).get("gpus") or 0) for t, v in tenants.items())
    end = max([f["finished"] for f in facts if f["finished"] is not None] or [0])
    episodes = fairness.guarantee_episodes(
        [dict(f, holds=_holds(f, f["finished"] if f["finished"] is not None else end)) for f in facts],
        guarantees, end)
    summary = fairness.guarantee_summary(episodes, bound)
    worst = max([(e["seconds"], t, e) for t, items in episodes.items() for e in items if e.get("judged", True)]
                or [(0, None, None)],
                key=lambda x: x[0])
    return {"bound": bound, "tenants": summary, "passed": all(v["passed"] for v in summary.values()),
            "longest": {"tenant": worst[1], "seconds": worst[0],
                        "start": None if worst[2] is None else round(worst[2]["start"], 3)}}


def overtakes(facts, cluster_queues):
    """How far admission left first come, first served inside each ClusterQueue: the pairs of Workloads of two groups
    of one ClusterQueue (``cluster_queues``: ``{group: ClusterQueue}``) that waited together (the later was created
    while the earlier was still pending) where the later asked at least as many GPUs, so the earlier would have fitted
    where it went, and of those the pairs whose later Workload was first admitted before the earlier one. Kueue's
    BestEffortFIFO admits such a pair in creation order (it passes over an older Workload only when that one does not
    fit); admission fair sharing reorders them by the groups' usage. Times are whole seconds (Kueue's conditions),
    a Workload's first reservation its first hold; a Workload whose earlier holds are unknown (``unknown``, its
    history incomplete) is left out. Returns ``{"pairs", "overtaken", "by_group": {group: times its Workloads were
    overtaken}}``."""
    firsts = []
    for fact in facts:
        holds = fact.get("holds") or ([[fact["reserved"], None]] if fact["reserved"] is not None else [])
        if holds and not fact.get("unknown") and fact["tenant"] in cluster_queues:
            firsts.append((int(fact["created"]), int(min(h[0] for h in holds)), fact["gpus"], fact["tenant"]))
    firsts.sort(key=lambda x: (x[0], x[1]))
    pairs, overtaken, by_group = 0, 0, {}
    for index, (created, first, gpus, group) in enumerate(firsts):
        for later_created, later_first, later_gpus, later_group in firsts[index + 1:]:
            if later_created >= first:
                break  # created once the earlier was admitted: they never waited together
            if later_created == created or later_group == group or later_gpus < gpus \
                    or cluster_queues[later_group] != cluster_queues[group]:
                continue
            pairs += 1
            if later_first < first:
                overtaken += 1
                by_group[group] = by_group.get(group, 0) + 1
    return {"pairs": pairs, "overtaken": overtaken, "by_group": by_group}


def local_queue_usage(local_queue, resource):
    """A LocalQueue's admission fair sharing usage of ``resource`` (``status.fairSharing.admissionFairSharingStatus
    .consumedResources``, Kueue v0.19.2 apis/kueue/v1beta2/localqueue_types.go: the decayed GPUs it held) as a float,
    and its ``lastUpdate``; ``(None, None)`` when Kueue keeps none (no admissionFairSharing in its Configuration; with
    one, its LocalQueue controller keeps it for every LocalQueue, pkg/controller/core/localqueue_controller.go)."""
    status = ((local_queue.get("status") or {}).get("fairSharing") or {}).get("admissionFairSharingStatus")
    if not status:
        return None, None
    value = (status.get("consumedResources") or {}).get(resource)
    return (float(parse_quantity(value)) if value is not None else 0.0), status.get("lastUpdate")


def admission_evidence(reads, groups, facts, resource=GPU_RESOURCE):
    """Whether admission fair sharing acted, from what Kueue wrote and decided. ``reads``: ``{read: [LocalQueue]}``
    (the replay reads them after the last submission and after the last Workload finished); ``groups``: the replay's
    groups (``schedule.tenant_queues``: namespace, queue, cluster_queue, admission_fair_sharing, weight). Returns
    ``{"on": [groups whose ClusterQueue has admission fair sharing], "usage": {group: {read: {"gpus", "last_update"}}},
    "weights", "order": overtakes(...), "recorded": bool, "detail"}``: ``recorded`` when some group with admission
    fair sharing had a Workload admitted and every such group has a usage above 0 in some read (Kueue samples it; a
    half-life of 0 leaves it 0, kubernetes-sigs/kueue#11134)."""
    on = sorted(g for g, v in groups.items() if v.get("admission_fair_sharing"))
    usage = {}
    for read, local_queues in sorted((reads or {}).items()):
        found = {}
        for local_queue in local_queues or []:
            if not isinstance(local_queue, dict):
                continue
            metadata = local_queue.get("metadata") or {}
            found[(metadata.get("namespace"), metadata.get("name"))] = local_queue
        for group, queue in sorted(groups.items()):
            gpus, updated = local_queue_usage(found.get((queue["namespace"], queue["queue"]), {}), resource)
            usage.setdefault(group, {})[read] = {"gpus": None if gpus is None else round(gpus, 3),
                                                 "last_update": updated}
    # A group's usage can only grow once one of its Workloads was admitted.
    admitted = [g for g in on if any(f["tenant"] == g and f["reserved"] is not None for f in facts)]
    silent = [g for g in admitted if not any((sample["gpus"] or 0) > 0 for sample in usage.get(g, {}).values())]
    order = overtakes(facts, dict((g, v.get("cluster_queue")) for g, v in groups.items()))
    detail = "%d of %d comparable pairs admitted out of creation order" % (order["overtaken"], order["pairs"])
    if on:
        detail += "; usage above 0 in %d of %d groups with admitted Workloads%s" % (
            len(admitted) - len(silent), len(admitted), (": none for " + ", ".join(silent)) if silent else "")
    return {"on": on, "usage": usage, "weights": dict((g, v.get("weight", 1)) for g, v in sorted(groups.items())),
            "order": order, "recorded": bool(admitted) and not silent, "detail": detail}


def shared_quotas(groups):
    """The ClusterQueues the groups share, as lenders for ``fairness.fair_reference``: ``{"ClusterQueue/<name>":
    {"gpus": its nominalQuota}}`` from the groups' ``cluster_queue`` and ``cluster_queue_gpus`` (namespaces of one
    ClusterQueue, ``schedule.tenant_queues``). No group wants anything of its own, so the reference lends each
    ClusterQueue's GPUs to its groups by their weight: the share admission fair sharing orders admission towards.
    The key cannot be a group's (a namespace has no ``/``)."""
    out = {}
    for group in groups.values():
        if group.get("cluster_queue") and group.get("cluster_queue_gpus") is not None:
            out["ClusterQueue/" + group["cluster_queue"]] = {"gpus": group["cluster_queue_gpus"], "weight": 1}
    return out


def metric_table(results):
    """``{tenant: {metric: value}}`` of Prometheus instant vectors, ``{metric: [{"metric": {labels}, "value": [time,
    "value"]}]}`` (``/api/v1/query``'s ``data.result``); a sample's tenant is its ``cluster_queue`` label (the
    tenant's ClusterQueue) or, for Kueue's preemption counter, ``preempting_cluster_queue``."""
    table = {}
    for name, vector in sorted((results or {}).items()):
        for sample in vector or []:
            labels = sample.get("metric") or {}
            tenant = labels.get("cluster_queue") or labels.get("preempting_cluster_queue")
            if tenant is None:
                continue
            value = float(sample["value"][1])
            table.setdefault(tenant, {})[name] = None if math.isnan(value) else round(value, 3)
    return table


def policy_label(tenants):
    """The declared quotas in a few words, for titles: ``guarantees 6/5/5 GPUs, weights 2/1/1, borrowing limits
    -/-/-`` (tenants in name order; ``-``: no limit)."""
    names = sorted(tenants)

    def column(key, default):
        return "/".join(_cell(default if (tenants[t] or {}).get(key) is None else tenants[t][key]) for t in names)

    return "guarantees %s GPUs, weights %s, borrowing limits %s" % (
        column("gpus", 0), column("weight", 1), column("borrowing_limit", "-"))


def replay_document(cluster, plan, submitted, workloads, tenants, now, events=None, guarantee_bound=20.0,
                    kueue_metrics=None, eviction_limit=10, fair_sharing=True, local_queues=None):
    """The report as one dict. ``plan``: replay_plan's result (jobs, adapter, assignment, window, compression,
    scaling) plus ``capacity``; ``submitted``: replay_submit's result; ``workloads``: the Workload objects read
    after the replay; ``tenants``: ``{tenant: {"weight", "gpus"}}`` (weights and guarantees); ``events``: the
    tenants' events.k8s.io/v1 Events (the Workloads' histories, ``workload_holds``); ``guarantee_bound``: seconds
    a tenant may wait for GPUs within its guarantee; ``kueue_metrics``: what Kueue's own metrics said
    (``metric_table``'s input, reported beside the figures from the Workloads); ``eviction_limit``: the most
    evictions of one Workload before the run counts as a preemption loop (kubernetes-sigs/kueue#3779, #14543);
    ``fair_sharing``: whether Kueue's Configuration has fairSharing (``share_check``); ``local_queues``: the
    LocalQueues as read during and after the replay, ``{read: [LocalQueue]}`` (``admission_evidence``; ``tenants``
    then also carries each group's ``namespace``, ``queue``, ``cluster_queue`` and ``admission_fair_sharing``).

    Groups without a guarantee of their own (the namespaces of one ClusterQueue, ``gpus`` 0 for all) get no
    time-to-guarantee check: nothing is promised to them, so it could not fail. With admission fair sharing on for
    any group, the check "Kueue recorded each group's usage" is added (``admission_evidence``)."""
    jobs = plan["jobs"]
    by_name = dict((j["name"], j) for j in jobs)
    facts = [f for f in (workload_facts(w, by_name) for w in workloads) if f is not None]
    history = events_by_workload(events)
    incomplete = 0
    for fact in facts:
        fact["holds"], complete = workload_holds(fact, history.get(fact["uid"], []))
        incomplete += 0 if complete else 1
        if not complete and fact["reserved"] is not None:
            fact["unknown"] = [fact["created"], fact["reserved"]]  # its earlier holds are not known
    factor = plan["compression"]["factor"]
    names = sorted(set(j["tenant"] for j in jobs))
    quotas = dict((t, v or {}) for t, v in tenants.items())  # every declared tenant lends, with Jobs or not
    guaranteed = any(v.get("gpus") for v in quotas.values())
    # Groups without a guarantee share their ClusterQueue's: it lends its nominalQuota to them by weight.
    judged = dict(quotas, **({} if guaranteed else shared_quotas(quotas)))
    steps = share_steps(facts, quotas=judged)
    lost = lost_jobs(jobs, facts)
    admitted = set(f["job"] for f in facts if f["reserved"] is not None)
    share = share_check(steps, plan["capacity"], judged, fair_sharing)
    share["tenants"] = dict((t, v) for t, v in share["tenants"].items() if t in quotas)
    guarantee = guarantee_check(facts, dict((t, tenants.get(t, {})) for t in names), guarantee_bound)
    unjudged = sum(v["unjudged"] for v in guarantee["tenants"].values())
    looping = sorted((f["evictions"], f["workload"]) for f in facts if f["evictions"] > eviction_limit)
    admission = admission_evidence(local_queues, tenants, facts) if local_queues is not None else None
    checks = [
        {"name": "no Job lost", "passed": not lost, "detail": "%d of %d lost%s" % (
            len(lost), len(jobs), (": " + ", ".join(lost[:10])) if lost else "")},
        {"name": "every Job's Workload admitted by Kueue", "passed": len(admitted) == len(jobs),
         "detail": "%d Workloads with QuotaReserved of %d Jobs" % (
             len([f for f in facts if f["reserved"] is not None]), len(jobs))},
        {"name": "contended share within its tolerance of the fair reference (guarantee first, then by weight)"
         if fair_sharing else "contended share at least the guarantee part of the reference (fair sharing off)",
         "passed": share["passed"], "detail": share["detail"]},
    ] + ([{"name": "every tenant gets its guarantee within %g s" % guarantee_bound, "passed": guarantee["passed"],
           "detail": "longest %g s (%s)%s%s" % (
               guarantee["longest"]["seconds"], guarantee["longest"]["tenant"] or "-",
               "; %d Workloads' histories incomplete" % incomplete if incomplete else "",
               "; %d episodes not judged" % unjudged if unjudged else "")}] if guaranteed else []) + [
        {"name": "no Workload evicted more than %d times" % eviction_limit, "passed": not looping,
         "detail": "most %d%s" % (max([f["evictions"] for f in facts] or [0]), "; " + ", ".join(
             "%s %d" % (name, count) for count, name in reversed(looping[-5:])) if looping else "")},
    ] + ([{"name": "Kueue recorded each group's usage (admission fair sharing on for %s)" % ", ".join(admission["on"]),
           "passed": admission["recorded"], "detail": admission["detail"]}] if admission and admission["on"] else [])
    start = min([f["created"] for f in facts] or [0])
    return {"cluster": cluster, "generated": now, "passed": all(c["passed"] for c in checks), "checks": checks,
            "capacity": plan["capacity"], "window": plan["window"], "compression": plan["compression"],
            "scaling": plan["scaling"], "adapter": plan["adapter"], "assignment": plan["assignment"],
            "trace_cluster": plan.get("trace_cluster"),
            "submission": {"created": submitted.get("created"), "existing": submitted.get("existing"),
                           "lateness": submitted.get("lateness")},
            "tenants": tenant_figures(facts, names, factor), "share": share, "lost": lost,
            "guarantee": guarantee if guaranteed else None, "admission": admission,
            "beyond_guarantee": beyond_guarantee(facts, tenants, factor) if guaranteed else [],
            "eviction_limit": eviction_limit, "histories_incomplete": incomplete, "kueue_metrics": metric_table(kueue_metrics),
            "wait_samples": dict((t, sorted(f["wait"] * factor for f in facts if f["tenant"] == t and f["wait"] is not None))
                                 for t in names),
            "idle_while_pending": idle_while_pending(facts, plan["capacity"]),
            "most_evictions": max([f["evictions"] for f in facts] or [0]),
            "workloads": len(facts),
            "policy": policy_label(quotas) + ("" if fair_sharing else ", fair sharing off") + "".join(
                ", sharing %s's %s GPUs" % (name.split("/", 1)[1], _cell(v["gpus"]))
                for name, v in sorted(judged.items()) if name not in quotas),
            "timeline": [[round(t - start, 3), dict((k, v["held"]) for k, v in s.items())] for t, s in steps],
            "reference_timeline": [[round(t - start, 3), dict((k, round(v, 3)) for k, v in fairness.fair_reference(
                plan["capacity"], dict((k, v["wanted"]) for k, v in s.items()), judged, fair_sharing).items()
                if k in s)]
                for t, s in steps]}


def _cell(value):
    return "-" if value is None else ("%g" % value if isinstance(value, float) else str(value))


def replay_markdown(doc):
    """The report as Markdown."""
    lines = ["# fairgpu replay report: %s" % doc["cluster"], "",
             "Generated %s. Verdict: **%s**." % (doc["generated"], "passed" if doc["passed"] else "FAILED"), "",
             "## Checks", "", "| check | result | detail |", "|---|---|---|"]
    lines += ["| %s | %s | %s |" % (c["name"], "passed" if c["passed"] else "FAILED", c["detail"]) for c in doc["checks"]]
    w, c, s = doc["window"], doc["compression"], doc["scaling"]
    lines += ["", "## The replay", "",
              "- Window: %s s of trace from %s s (%s), %d tasks, %s wall seconds." % (
                  w["seconds"], w["start"], w["chosen"], w["tasks"], w["wall_seconds"]),
              "- Compression: %g trace seconds per wall second; run times at least %s s (%d raised to it)." % (
                  c["factor"], c["floor"], c["raised_to_floor"]),
              "- Load: %g x %s GPUs asked of the replay (wall time, run times raised to the floor included); "
              "the trace's own window is %g x capacity; GPUs scaled by %g; mean demand %g GPUs before scaling, %g "
              "after (%g x capacity), peak %s; %d tasks capped at one node, %d thinned out (stable hash)." % (
                  s["load_factor"], doc["capacity"], s["trace_time_load"], s["factor"], s["trace_mean_demand"],
                  s["mean_demand"], s["achieved_load"], s["peak_demand"], s["capped"], s["thinned"]),
              "- Tenants: by %s; declared quotas: %s." % (doc["assignment"]["by"], doc.get("policy", "-")),
              "- Submission: %s created, %s existing; lateness max %s s, mean %s s." % (
                  doc["submission"]["created"], doc["submission"]["existing"],
                  (doc["submission"]["lateness"] or {}).get("max"), (doc["submission"]["lateness"] or {}).get("mean")),
              "- GPUs idle while work was pending: %s GPU-seconds (%s of capacity x time, an upper bound); the most "
              "evictions of one Workload: %s." % (doc["idle_while_pending"]["gpu_seconds"],
                                                  doc["idle_while_pending"]["share"], doc["most_evictions"])]
    own = doc.get("trace_cluster")
    if own:
        waits = own["waits"]
        lines.append("- The trace's own cluster (its node list): %s GPUs on %s nodes, at most %s GPUs held on average "
                     "in this window (a load of %s against this replay's %s); the tasks created in the window waited "
                     "p50 %s / p95 %s / max %s trace seconds there, %s never scheduled. The replay's waits measure the "
                     "load it was given, not the trace's cluster." % (
                         own["gpus"], own["nodes"], own["mean_demand"], own["load"], doc["scaling"]["load_factor"],
                         waits["p50"], waits["p95"], waits["max"], waits.get("never_scheduled", 0)))
    lines += ["", "### What the trace adapter decided", "", "| decision | tasks |", "|---|---|"]
    a = doc["adapter"]
    for key, text in (("rows", "rows read"), ("no_gpu", "dropped: CPU-only"), ("never_scheduled", "dropped: never scheduled"),
                      ("failed_kept", "kept: ended Failed"), ("fractional_rounded_up", "fractional GPU rounded up to 1"),
                      ("cut_at_end", "cut at the trace's end"), ("gpu_spec_empty", "no GPU model asked"),
                      ("tasks", "kept")):
        lines.append("| %s | %s |" % (text, a.get(key)))
    lines += ["", "## Per tenant", "",
              "| tenant | Jobs | wait p50 / p95 / max (wall s) | (trace s) | GPU-hours (wall / trace) | preempted | "
              "caused | contended share | reference | tolerance |", "|---|---|---|---|---|---|---|---|---|---|"]
    for tenant, f in sorted(doc["tenants"].items()):
        x, share = f["waits"], doc["share"]["tenants"].get(tenant, {})
        lines.append("| %s | %d | %s / %s / %s | %s / %s / %s | %s / %s | %d | %d | %s | %s | %s |" % (
            tenant, f["workloads"], _cell(x["p50"]), _cell(x["p95"]), _cell(x["max"]), _cell(x["trace_p50"]),
            _cell(x["trace_p95"]), _cell(x["trace_max"]), f["gpu_hours"], f["trace_gpu_hours"],
            f["preemptions_suffered"], f["preemptions_caused"], share.get("held"), share.get("reference"),
            "%s (+ %s spare above)" % (share.get("tolerance"), share["spare"]) if share.get("spare")
            else share.get("tolerance")))
    lines += ["", "Waits run from each Workload's creation to its last QuotaReserved (Kueue's timestamps, whole "
              "seconds); trace time is wall time x the compression. Shares are mean GPUs held while two or more "
              "tenants had pending work (%s s), against Kueue's promise at each moment (the reference: what it "
              "asks up to its nominal quota, then%s the cohort's unused lendable quota by weight within its "
              "borrowing limit; a Workload no quota could admit is not asked); the tolerance is the larger of %g "
              "GPU and %g %% of the reference, plus the part of it the tenant's whole Workloads could not fill; "
              "above the reference also the spare: its part, as Kueue lends, of the whole GPUs the other tenants "
              "were promised and could neither fill nor hold." % (
                  doc["share"]["contended_seconds"], "" if doc["share"].get("fair_sharing", True) else
                  " (fair sharing off: not promised, not judged)", fairness.SHARE_TOLERANCE_GPUS,
                  100 * fairness.SHARE_TOLERANCE_FRACTION), ""]
    g = doc.get("guarantee")
    if g:
        lines += ["## Time-to-guarantee", "",
                  "How long each tenant had a pending Workload that fitted in its unused guarantee (nominalQuota) "
                  "before Kueue reserved it, preempting borrowers when the cohort was full (reclaims: another tenant "
                  "was borrowing when it began). Bound %g s, wall clock; %d Workloads' histories incomplete (more "
                  "than two reservations, or events gone): their earlier holds are missing, so from its creation "
                  "to its last reservation such a Workload's state is unknown, and its tenant's episodes in that "
                  "span are not judged (counted apart)." % (g["bound"], doc.get("histories_incomplete", 0)), "",
                  "| tenant | episodes | not judged | after a release: count / max / p95 (s) | reclaims from "
                  "borrowers: count / max / p95 (s) | over the bound |",
                  "|---|---|---|---|---|---|"]
        for tenant, v in sorted(g["tenants"].items()):
            lines.append("| %s | %d | %d | %d / %s / %s | %d / %s / %s | %d |" % (
                tenant, v["episodes"], v.get("unjudged", 0), v["episodes"] - v["reclaims"], _cell(v["release_max"]),
                _cell(v["release_p95"]), v["reclaims"], _cell(v["reclaim_max"]), _cell(v["reclaim_p95"]),
                v["over_bound"]))
        lines.append("")
    big = doc.get("beyond_guarantee") or []
    if g:
        lines += ["### Workloads larger than their tenant's guarantee", "",
                  "The time-to-guarantee does not see them: no guarantee promises them GPUs. %d of them." % len(big),
                  ""]
    else:
        lines += ["## Time-to-guarantee", "", "Not judged: no group has a guarantee of its own (namespaces of one "
                  "ClusterQueue share its nominalQuota), so nothing is promised to one of them.", ""]
    if big:
        lines += ["| Workload | tenant | GPUs | guarantee | wait (wall s / trace s) | evictions | why |",
                  "|---|---|---|---|---|---|---|"]
        lines += ["| %s | %s | %d | %d | %s / %s | %d | %s |" % (
            b["workload"], b["tenant"], b["gpus"], b["guarantee"], _cell(b["wait"]), _cell(b["trace_wait"]),
            b["evictions"], b["why"]) for b in big]
        lines.append("")
    admission = doc.get("admission")
    if admission and (admission["on"] or admission["order"]["pairs"]):
        order = admission["order"]
        reads = sorted(set(r for v in admission["usage"].values() for r in v))
        lines += ["## Admission order and admission fair sharing", "",
                  "Admission fair sharing on for: %s. Pairs of Workloads of two groups of one ClusterQueue, the later "
                  "created asking at least the earlier's GPUs: %d; admitted out of creation order: %d (Kueue's "
                  "BestEffortFIFO keeps such a pair in order; admission fair sharing reorders by usage)." % (
                      ", ".join(admission["on"]) or "none", order["pairs"], order["overtaken"]), "",
                  "| group | weight | overtaken | " + " | ".join("usage %s (GPUs)" % r for r in reads) + " |",
                  "|---|---|---|" + "---|" * len(reads)]
        for group, samples in sorted(admission["usage"].items()):
            lines.append("| %s | %s | %d | %s |" % (group, _cell(admission["weights"].get(group)),
                                                    order["by_group"].get(group, 0),
                                                    " | ".join(_cell(samples.get(r, {}).get("gpus")) for r in reads)))
        lines += ["", "Usage: the LocalQueue's status.fairSharing.admissionFairSharingStatus.consumedResources (GPUs "
                  "held, decayed with the half-life), as read; `-`: Kueue keeps none (no admissionFairSharing in its "
                  "Configuration).", ""]
    metrics = doc.get("kueue_metrics") or {}
    if metrics:
        names = sorted(set(k for v in metrics.values() for k in v))
        lines += ["## What Kueue's metrics said", "",
                  "Read from Prometheus after the replay, beside the figures above (from the Workloads).", "",
                  "| tenant | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
        for tenant, values in sorted(metrics.items()):
            lines.append("| %s | %s |" % (tenant, " | ".join(_cell(values.get(n)) for n in names)))
        lines.append("")
    return "\n".join(lines)


def held_series(timeline):
    """``{tenant: ([seconds], [GPUs held])}`` of the report's timeline, for the plot."""
    series = {}
    for seconds, held in timeline:
        for tenant, value in held.items():
            xs, ys = series.setdefault(tenant, ([], []))
            xs.append(seconds)
            ys.append(value)
    return series
