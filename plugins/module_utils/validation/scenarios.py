# -*- coding: utf-8 -*-
# Copyright: fairgpu maintainers
# Apache License 2.0 (see LICENSE)
"""The validation scenarios' bookkeeping: which load Jobs to submit and which checks pass, judged only from
what Kueue and Kubernetes decided (``kueue_admission_info`` results, Job, Pod and Event objects).

Pure logic, no cluster access. A scenario result is a dict ``{"name", "title", "checks": [report.check rows],
"metrics": {...}, "timeline": [...]}`` that ``report.py`` renders.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import calendar
import time

from ansible_collections.fairgpu.tenancy.plugins.module_utils.kueue.status import (
    EVICTED_BY_PREEMPTION,
    conditions as workload_conditions,
    evictions as _evictions,
    pod_requests,
    preempted as _was_preempted,
)
from ansible_collections.fairgpu.tenancy.plugins.module_utils.validation.report import check as _check
from ansible_collections.fairgpu.tenancy.plugins.module_utils.common.names import (
    GPU_RESOURCE,
    JOB_NAME_LABEL,
    LOAD_JOB_PREFIX,
    LOCAL_QUEUE_SUFFIX,
)


def load_jobs(tenant, count, scenario, seconds, queue_suffix=LOCAL_QUEUE_SUFFIX, gpus=1, start=0, backlog=False):
    """``count`` load Job descriptions for ``tenant`` (a normalised tenant), for the ``load-jobs`` template:
    ``{name, namespace, queue, tenant, scenario, seconds, resource, gpus, backlog}``. Names are
    ``fairgpu-val-<scenario>-<tenant>-<index>``; ``gpus`` per Job (devices), ``seconds`` of run time;
    ``backlog``: labelled ``fairgpu.io/backlog`` (queued to load Kueue, deleted after the measurement)."""
    return [
        {
            "name": "%s%s-%s-%d" % (LOAD_JOB_PREFIX, scenario.replace("_", "-"), tenant["name"], index),
            "namespace": tenant["namespaces"][0],
            "queue": tenant["name"] + queue_suffix,
            "tenant": tenant["name"],
            "scenario": scenario,
            "seconds": int(seconds),
            "resource": tenant["gpu_resource"],
            "gpus": int(gpus),
            "backlog": bool(backlog),
        }
        for index in range(int(start), int(start) + int(count))
    ]


def _scenario_workloads(info, scenario):
    prefix = LOAD_JOB_PREFIX + scenario.replace("_", "-") + "-"
    return [w for w in info["workloads"] if (w.get("job") or "").startswith(prefix)]


def _succeeded(jobs):
    return sorted(j["metadata"]["name"] for j in jobs if ((j.get("status") or {}).get("succeeded") or 0) >= 1)


def _preempted(workloads):
    """The workload summaries Kueue has preempted (``kueue_status.preempted``)."""
    return [w for w in workloads if _was_preempted(w["conditions"])]


def baseline_result(tenants, jobs_per_tenant, admitted, finished, jobs):
    """Judge the baseline. ``admitted``: per tenant, the ``kueue_admission_info`` result of waiting until its
    Jobs were admitted (``{tenant name: result}``); ``finished``: the result of waiting until all finished;
    ``jobs``: the scenario's Job objects."""
    workloads = _scenario_workloads(finished, "baseline")
    checks = []
    for tenant in tenants:
        queue = admitted[tenant["name"]]["queues"][tenant["name"]]
        checks.append(_check(
            "all %d Jobs of %s admitted at once" % (jobs_per_tenant, tenant["name"]),
            jobs_per_tenant, queue["admitted_or_finished_workloads"],
            queue["admitted_or_finished_workloads"] >= jobs_per_tenant))
    preempted = sorted(w["name"] for w in _preempted(workloads))
    checks.append(_check("workloads preempted", [], preempted, not preempted))
    expected = jobs_per_tenant * len(tenants)
    succeeded = _succeeded(jobs)
    checks.append(_check("every Job succeeded (none lost)", expected, len(succeeded), len(succeeded) == expected))
    return {
        "name": "baseline",
        "title": "Baseline: %d Jobs of one %s per tenant" % (jobs_per_tenant, tenants[0]["gpu_resource"]),
        "checks": checks,
        "metrics": {"admission_seconds": {name: result["elapsed"] for name, result in sorted(admitted.items())}},
        "timeline": finished.get("timeline", []),
    }


def _lasting(timeline, grace_seconds, off):
    """Each ``(queue, entry, point, lasted)`` of ``timeline`` where ``off(entry)`` has held for more than
    ``grace_seconds`` in a row on that queue, ``lasted`` counted from the first sample of the run; a sample where it
    does not hold ends the run, one where ``off`` returns None is left out."""
    since = {}
    for point in timeline:
        for queue, entry in sorted(point["queues"].items()):
            state = off(entry)
            if state is None:
                continue
            if not state:
                since.pop(queue, None)
                continue
            lasted = point["ts"] - since.setdefault(queue, point["ts"])
            if lasted > grace_seconds:
                yield queue, entry, point, lasted


def accounting_check(timeline, grace_seconds, where):
    """No tenant's Running pods hold more devices than Kueue has reserved for it, for longer than
    ``grace_seconds`` in a row (between Kueue releasing a preempted workload and the Job controller deleting its
    pods a sample can see the pods still Running). ``timeline``: ``kueue_admission_info`` samples read with pods
    (``running``, ``reserved`` per queue). Fails naming the tenant, the devices and when; a tenant whose pods run
    outside Kueue's accounting is the one named, not its victim."""
    over = {}
    for queue, entry, point, lasted in _lasting(timeline, grace_seconds,
                                                lambda e: e.get("running", 0) > e["reserved"]):
        excess = entry["running"] - entry["reserved"]
        if excess > over.get(queue, (0, 0))[0]:
            over[queue] = (excess, "%s: pods hold %d, Kueue reserved %d (for %.1f s, t=%.1f s)"
                           % (queue, entry["running"], entry["reserved"], lasted, point["t"]))
    observed = "; ".join(text for _excess, text in over.values()) or "never (%d samples)" % len(timeline)
    return _check("no tenant's Running pods hold more GPUs than Kueue reserved for it (%s)" % where,
                  "never longer than %s s" % grace_seconds, observed, not over and bool(timeline))


def gpu_pods_check(timeline, grace_seconds, where):
    """Every pod on the nodes that holds accelerator devices belongs to an admitted Workload that accounts for
    them, whoever owns the pod and whatever its namespace: none is listed outside Kueue for longer than
    ``grace_seconds`` in a row.

    ``timeline``: samples read with ``outside_kueue`` (``attribution.outside_kueue``; samples without it are not
    judged). A listed pod counts from its ``since`` (a pod being deleted: its deletion deadline, so a termination
    grace period is never blamed) or else from the first sample that lists it; a sample that no longer lists it
    ends its run. The grace is the accounting check's: a Job deleted with ``propagationPolicy: Background`` goes,
    and its Workload with it, before the garbage collector marks its pods deleted (5.3 s seen), and a Workload
    turns Finished or evicted a moment before its pods' phase or deletion catches up. Fails naming each pod
    (namespace/name, node, devices, why, for how long); passes only when some sample was read with the list."""
    start, over, judged = {}, {}, 0
    for point in timeline:
        if "outside_kueue" not in point:
            continue
        judged += 1
        listed = {entry["uid"]: entry for entry in point["outside_kueue"]}
        for uid in set(start) - set(listed):
            del start[uid]
        for uid, entry in sorted(listed.items()):
            since = entry["since"] if entry.get("since") is not None else start.get(uid, point["ts"])
            start[uid] = since
            lasted = point["ts"] - since
            if lasted > grace_seconds and lasted > over.get(uid, (0, ""))[0]:
                devices = ", ".join("%d %s" % (count, name) for name, count in sorted(entry["devices"].items()))
                over[uid] = (lasted, "%s/%s on %s (%s): %s, for %.1f s (t=%.1f s)" % (
                    entry["namespace"], entry["pod"], entry["node"], devices, entry["why"], lasted, point["t"]))
    observed = "; ".join(text for _lasted, text in sorted(over.values(), key=lambda o: o[1])) or (
        "none (%d samples)" % judged if judged else "never read")
    return _check("every GPU pod on the nodes belongs to an admitted Workload (%s)" % where,
                  "none outside Kueue longer than %s s" % grace_seconds, observed, not over and judged > 0)


def guarantee_times(timeline, queue, devices, arrival_ts):
    """``(seconds to Kueue's reservation, seconds to pods started)`` of ``queue``'s ``devices`` from
    ``arrival_ts`` (Unix time), from the first sample where each held; None where it never did. Started: the
    devices of the queue's Running and Succeeded pods (``started`` of a sample; ``running`` in a sample without
    it), so that a Job that finished before the last one started still counts: with 30 s Jobs, on kwok's pod
    start and deletion delays, the first may be done before the eighth runs (a CI run saw 7 of 8 at once)."""
    reserved = next((p["ts"] for p in timeline if p["queues"].get(queue, {}).get("reserved", 0) >= devices), None)
    running = next((p["ts"] for p in timeline
                    if p["queues"].get(queue, {}).get("started", p["queues"].get(queue, {}).get("running", 0)) >= devices),
                   None)
    return tuple(None if ts is None else round(ts - arrival_ts, 3) for ts in (reserved, running))


def flood_result(scenario, flooder, arriver, reach, capacity, flood_jobs, flooded, held_back, arrival_ts, arrived,
                 after, finished, jobs, events, bound_seconds, running=None, running_bound_seconds=60, backlog=0,
                 accounting_grace_seconds=5):
    """Judge one flood scenario (``flooder`` floods the cluster, then ``arriver`` submits its guarantee).

    ``reach``: devices the flooder can hold when alone (``quota.reachable``); ``capacity``: devices of the
    resource on the cluster; ``flood_jobs``: Jobs it
    submitted; ``flooded``: admission info once it held ``reach``; ``held_back``: ``{"jobs": [Job objects of its
    pending workloads], "pods": [their Pods]}``; ``arrival_ts``: Unix time just before the arriver submitted;
    ``arrived``: admission info of waiting for the arriver's guarantee, whose last timeline sample is the moment
    it held it (time-to-guarantee = that sample's ``ts`` - ``arrival_ts``); ``after``: admission info right after
    that; ``finished``: admission info once all finished; ``jobs``: every Job of the scenario at the end;
    ``events``: Events of the flooder's namespace; ``bound_seconds``: the bound on Kueue's reservation of the
    guarantee; ``running``: admission info of waiting, after ``after`` was read, for the arriver's pods Running on
    its guarantee (read with pods, as ``arrived``); ``running_bound_seconds``: the bound on that, from
    ``arrival_ts``; ``backlog``: Jobs the flooder queued with the flood, behind it, before the arrival (pending in
    ``flooded``; deleted after the measurement, so not among ``jobs``); ``accounting_grace_seconds``: see
    ``accounting_check`` and ``gpu_pods_check``, applied to every sample read.
    """
    f, a = flooder["name"], arriver["name"]
    checks = []
    held = flooded["queues"][f]["reserved"]
    checks.append(_check("%s borrows every idle GPU it may (holds reachable GPUs)" % f, reach, held, held == reach))
    excess = flood_jobs - reach + backlog
    pending = flooded["queues"][f]["pending_workloads"]
    checks.append(_check("%s's excess stays queued (pending workloads%s)" % (f, ", its backlog included" if backlog else ""),
                         excess, pending, pending == excess))
    unsuspended = sorted(j["metadata"]["name"] for j in held_back["jobs"] if not (j.get("spec") or {}).get("suspend"))
    checks.append(_check("queued Jobs of %s not suspended" % f, [], unsuspended, not unsuspended and held_back["jobs"]))
    pods = sorted(p["metadata"]["name"] for p in held_back["pods"])
    checks.append(_check("pods of queued Jobs of %s" % f, [], pods, not pods))
    arrival = (arrived.get("timeline") or []) + ((running or {}).get("timeline") or [])
    ttg, ttr = guarantee_times(arrival, a, arriver["gpus"], arrival_ts)
    got = arrived["queues"][a]["reserved"]
    checks.append(_check("%s gets its guarantee (GPUs reserved)" % a, arriver["gpus"], got, got >= arriver["gpus"]))
    with_backlog = " with %d Jobs of %s's backlog queued" % (backlog, f) if backlog else ""
    checks.append(_check("time-to-guarantee of %s, Kueue's reservation, within %s s%s" % (a, bound_seconds, with_backlog),
                         "<= %s s" % bound_seconds, "never" if ttg is None else "%.1f s" % ttg,
                         ttg is not None and ttg <= bound_seconds))
    checks.append(_check("time-to-guarantee of %s, its pods started on %d GPUs, within %s s%s"
                         % (a, arriver["gpus"], running_bound_seconds, with_backlog),
                         "<= %s s" % running_bound_seconds, "never" if ttr is None else "%.1f s" % ttr,
                         ttr is not None and ttr <= running_bound_seconds))
    timeline = flooded.get("timeline", []) + arrival + finished.get("timeline", [])
    checks.append(accounting_check(timeline, accounting_grace_seconds, scenario))
    checks.append(gpu_pods_check(timeline, accounting_grace_seconds, scenario))
    flooder_workloads = _scenario_workloads(after, scenario)
    preempted = _preempted([w for w in flooder_workloads if w["namespace"] in flooder["namespaces"]])
    borrowed = flooded["queues"][f]["borrowed"]
    # The arriver first gets what is free; the rest of its guarantee must be reclaimed from borrowers.
    free = max(0, capacity - sum(q["reserved"] for q in flooded["queues"].values()))
    must_reclaim = max(0, arriver["gpus"] - free)
    checks.append(_check("%s's borrowed GPUs are reclaimed by preemption" % f, ">= %d workloads" % must_reclaim,
                         len(preempted), len(preempted) >= must_reclaim))
    silent = sorted(w["name"] for w in preempted
                    if not (w["conditions"].get("Preempted") or {}).get("reason")
                    or not (w["conditions"].get("Evicted") or {}).get("reason"))
    checks.append(_check("preempted workloads without a Preempted and Evicted condition reason", [], silent, not silent))
    with_event = {e.get("involvedObject", {}).get("name") for e in events
                  if e.get("reason") == "Preempted" and e.get("involvedObject", {}).get("kind") == "Workload"}
    no_event = sorted(w["name"] for w in preempted if w["name"] not in with_event)
    checks.append(_check("preempted workloads without a Preempted Event", [], no_event, not no_event))
    expected = flood_jobs + arriver["gpus"]
    succeeded = _succeeded(jobs)
    checks.append(_check("every Job of both tenants succeeded (none lost)", expected, len(succeeded),
                         len(succeeded) == expected))
    reasons = sorted({(w["conditions"].get("Preempted") or {}).get("reason") for w in preempted} - {None})
    return {
        "name": scenario,
        "title": "%s floods the cluster with %d one-GPU Jobs, then %s submits %d" % (f, flood_jobs, a, arriver["gpus"]),
        "checks": checks,
        "metrics": {
            "time_to_guarantee_seconds": ttg,
            "time_to_running_seconds": ttr,
            "running_bound_seconds": running_bound_seconds,
            "backlog_jobs": backlog,
            "flooder_reserved_before": held,
            "flooder_borrowed_before": borrowed,
            "preempted_workloads": len(preempted),
            "preemption_reasons": reasons,
            "finish_seconds": finished.get("elapsed"),
        },
        "timeline": timeline,
    }


def _device_requests(pod, resource):
    """``(devices of resource, whole GPUs)`` a Pod dict asks for, by Kubernetes' pod request rule
    (``kueue_status.pod_requests``)."""
    spec = pod.get("spec") or {}
    return (pod_requests(spec, resource),
            pod_requests(spec, GPU_RESOURCE) if resource != GPU_RESOURCE else 0)


def mig_result(tenants, guaranteed, extra, admitted, held, finished, pods, smi=None):
    """Judge the MIG scenario: every tenant runs ``guaranteed[tenant]`` one-device Jobs of its MIG profile; the
    first also asks for ``extra`` more than its quota.

    ``admitted``: per tenant, ``kueue_admission_info`` once its guaranteed Jobs were admitted (or finished);
    ``held``: the first tenant's info on the read where its guarantee was admitted and its extra Jobs waited;
    ``finished``: after all finished; ``pods``: the scenario's pods that started (Running or Succeeded when read,
    Pod dicts; the extra Jobs' pods may be among them once a guaranteed Job finished); ``smi``: on a GPU host,
    ``{pod name: parse_list output}`` of ``nvidia-smi -L`` in each pod that was running (None on the embedded
    cluster).
    """
    first = tenants[0]
    checks = []
    for tenant in tenants:
        queue = admitted[tenant["name"]]["queues"][tenant["name"]]
        want = guaranteed[tenant["name"]]
        checks.append(_check("%s: its %d Jobs of one %s admitted" % (tenant["name"], want, tenant["gpu_resource"]),
                             want, queue["admitted_or_finished_workloads"],
                             queue["admitted_or_finished_workloads"] >= want))
        mine = [p for p in pods if p["metadata"]["namespace"] in tenant["namespaces"]]
        whole = [p["metadata"]["name"] for p in mine if _device_requests(p, tenant["gpu_resource"]) == (1, 0)
                 and (p.get("spec") or {}).get("nodeName")]
        checks.append(_check("%s: each started pod is bound to one whole %s device and no whole GPU"
                             % (tenant["name"], tenant["gpu_resource"]), "%d or more, all" % want,
                             "%d of %d" % (len(whole), len(mine)), len(whole) == len(mine) >= want))
    waiting = [w for w in _scenario_workloads(held, "mig") if w["cluster_queue"] == first["name"]
               and w["state"] == "pending"]
    reasons = sorted({(w["conditions"].get("QuotaReserved") or {}).get("message", "") for w in waiting})
    checks.append(_check("%s: its Jobs above its quota (%d) wait, with Kueue's reason" % (first["name"], extra),
                         extra, "%d waiting: %s" % (len(waiting), "; ".join(reasons) or "none"),
                         len(waiting) == extra and all("insufficient" in r for r in reasons)))
    workloads = _scenario_workloads(finished, "mig")
    preempted = sorted(w["name"] for w in _preempted(workloads))
    checks.append(_check("workloads preempted", [], preempted, not preempted))
    if smi is not None:
        seen = {}
        for pod, gpus in sorted(smi.items()):
            devices = [d["uuid"] for g in gpus for d in g["mig_devices"]]
            seen[pod] = devices
        shared = sorted({u for u in sum(seen.values(), []) if sum(u in d for d in seen.values()) > 1})
        checks.append(_check("nvidia-smi -L in each pod: exactly one MIG device, none shared",
                             "1 each, none shared", {p: len(d) for p, d in seen.items()},
                             all(len(d) == 1 for d in seen.values()) and not shared))
    return {
        "name": "mig",
        "title": "MIG: each tenant on whole %s devices" % ", ".join(sorted({t["gpu_resource"] for t in tenants})),
        "checks": checks,
        "metrics": {"simulated_devices": smi is None},
        "timeline": finished.get("timeline", []),
    }


def reservation_check(timeline, grace_seconds, where):
    """Kueue's own count of each ClusterQueue's reserved devices (its status, ``reserved``) equals what the
    Workloads holding its quota ask for (``workloads_reserved``), on every read: never apart longer than
    ``grace_seconds`` in a row (Kueue writes a ClusterQueue's status a moment after the Workload's). A double
    admission after a restart shows as the count above the Workloads, a Workload lost from the cache as below.
    Samples without ``workloads_reserved`` are not judged. Field reports behind it: a restarted Kueue re-admitting
    finished Workloads whose quota it then never released (kubernetes-sigs/kueue#1654, #1450), and a ClusterQueue
    under-counting its Workloads' usage and admitting over quota (kubernetes-sigs/kueue#14609)."""
    judged = sum(1 for point in timeline for entry in point["queues"].values() if "workloads_reserved" in entry)
    apart = {}
    for queue, entry, point, lasted in _lasting(
            timeline, grace_seconds,
            lambda e: e["reserved"] != e["workloads_reserved"] if "workloads_reserved" in e else None):
        apart[queue] = "%s: Kueue counts %d reserved, its Workloads %d (for %.1f s, t=%.1f s)" % (
            queue, entry["reserved"], entry["workloads_reserved"], lasted, point["t"])
    observed = "; ".join(text for _queue, text in sorted(apart.items())) or "equal (%d reads)" % judged
    return _check("Kueue's reserved GPUs equal its admitted Workloads' (%s)" % where,
                  "never apart longer than %s s" % grace_seconds, observed, not apart and judged > 0)


def reach_check(timeline, reach, where):
    """No ClusterQueue ever reserves more than it may reach (``reach``: ``{queue: devices}``, its guarantee plus what
    it may borrow, ``quota.reachable``): Kueue never admits beyond that, so one read above it is a failure."""
    over = {}
    for point in timeline:
        for queue, limit in sorted(reach.items()):
            held = point["queues"].get(queue, {}).get("reserved", 0)
            if held > limit and held > over.get(queue, (0, ""))[0]:
                over[queue] = (held, "%s: %d reserved, may reach %d (t=%.1f s)" % (queue, held, limit, point["t"]))
    observed = "; ".join(text for _held, text in over.values()) or "never (%d reads)" % len(timeline)
    return _check("no tenant holds more than its guarantee plus what it may borrow (%s)" % where,
                  dict(sorted(reach.items())), observed, not over and bool(timeline))


def ran_twice(jobs, pods):
    """The Jobs that ran to the end more than once: ``status.succeeded`` above 1 (their completions are 1), or more
    than one Succeeded pod. A Job preempted and run again is not one of them: Kueue's preemption suspends it, its
    pods are deleted unfinished (kueue v0.19.2 pkg/controller/jobframework/reconciler.go, stopJob)."""
    succeeded = {}
    for pod in pods:
        if (pod.get("status") or {}).get("phase") == "Succeeded":
            job = (pod["metadata"].get("labels") or {}).get(JOB_NAME_LABEL)
            succeeded[job] = succeeded.get(job, 0) + 1
    return sorted(j["metadata"]["name"] for j in jobs
                  if ((j.get("status") or {}).get("succeeded") or 0) > 1 or succeeded.get(j["metadata"]["name"], 0) > 1)


def kueue_restart_result(flooder, arriver, reach, flood_jobs, fault, during, back, arrival_ts, arrived, finished,
                         jobs, pods, bound_seconds, grace_seconds, kueue_down=None, earlier=()):
    """Judge the Kueue-restart scenario: ``flooder`` holds every GPU it may reach (``reach``: ``{queue: devices}``),
    Kueue is taken down (``fault``: ``{"how", "ts", ...}``), ``arriver`` tries to create a Job while it is down
    (``during``: ``{"refused": error text or None, "job": the created Job or None, "pods": its pods before Kueue
    came back}``; Kueue's Job webhook fails closed, ``failurePolicy: Fail``, so the API server refuses every Job of a
    managed namespace while it is down: kubernetes-sigs/kueue#5244), Kueue comes back (``back``: ``{"ts",
    "ready_seconds"}``), ``arriver`` submits its guarantee at ``arrival_ts`` (``arrived``: the wait for its
    reservation), and every Job runs to the end (``finished``).
    ``jobs``, ``pods``: every Job and Pod of the scenario at the end; ``kueue_down``: the alert's check
    (``monitoring.checks``), or None without Prometheus; ``earlier``: the samples read before the arrival (the
    flood and the outage), judged with the rest."""
    f, a = flooder["name"], arriver["name"]
    down_seconds = round(back["ts"] - fault["ts"], 1)
    checks = [_check("Kueue taken down while %s holds every GPU it may reach, then back" % f,
                     fault["how"], "down %.1f s, ready %.1f s after its start" % (down_seconds, back["ready_seconds"] or 0),
                     down_seconds > 0)]
    refused, created = during.get("refused"), during.get("job")
    if created is None:
        webhook = bool(refused) and "failed calling webhook" in refused
        checks.append(_check("a Job %s created while Kueue was down" % a, "refused by Kueue's webhook",
                             refused or "neither created nor refused", webhook))
    else:
        suspended = bool((created.get("spec") or {}).get("suspend"))
        started = sorted(p["metadata"]["name"] for p in during.get("pods") or [])
        checks.append(_check("a Job %s created while Kueue was down" % a,
                             "refused by Kueue's webhook, or suspended with no pod until Kueue is back",
                             "created, %s, pods %s" % ("suspended" if suspended else "NOT suspended", started or "none"),
                             suspended and not started))
    timeline = list(earlier) + (arrived.get("timeline") or []) + (finished.get("timeline") or [])
    ttg, _ttr = guarantee_times(arrived.get("timeline") or [], a, arriver["gpus"], arrival_ts)
    checks.append(_check("time-to-guarantee of %s after Kueue is back, Kueue's reservation, within %s s"
                         % (a, bound_seconds), "<= %s s" % bound_seconds, "never" if ttg is None else "%.1f s" % ttg,
                         ttg is not None and ttg <= bound_seconds))
    checks.append(reservation_check(timeline, grace_seconds, "kueue_restart"))
    checks.append(reach_check(timeline, reach, "kueue_restart"))
    checks.append(accounting_check(timeline, grace_seconds, "kueue_restart"))
    checks.append(gpu_pods_check(timeline, grace_seconds, "kueue_restart"))
    expected = flood_jobs + arriver["gpus"] + (1 if created is not None else 0)
    succeeded = _succeeded(jobs)
    checks.append(_check("every Job of both tenants succeeded (none lost)", expected, len(succeeded),
                         len(succeeded) == expected))
    twice = ran_twice(jobs, pods)
    checks.append(_check("Jobs run to the end twice", [], twice, not twice))
    if kueue_down is not None:
        checks.append(kueue_down)
    return {
        "name": "kueue_restart",
        "title": "Kueue restarts: %s floods, Kueue goes down, %s arrives once it is back" % (f, a),
        "checks": checks,
        "metrics": {
            "fault": fault["how"],
            "down_seconds": down_seconds,
            "kueue_ready_seconds": back["ready_seconds"],
            "time_to_guarantee_seconds": ttg,
            "jobs_lost": max(0, expected - len(succeeded)),
            "jobs_run_twice": len(twice),
            "finish_seconds": finished.get("elapsed"),
        },
        "timeline": timeline,
    }


# The Events of a pod that its node's loss of contact caused: the node lifecycle controller marking it not ready
# (its Ready condition False; kubernetes v1.36.3 pkg/controller/util/node/controller_utils.go MarkPodsNotReady) and
# the taint eviction controller deleting it (pkg/controller/tainteviction/taint_eviction.go). The controller counts
# a node's heartbeat stale from the last lease renewal it saw itself, so an API server's return after an outage
# longer than the node monitor's grace period (kube-controller-manager --node-monitor-grace-period: 50 s by default,
# 200 s as kwokctl v0.8.0 runs it: heartbeatFactor 5 times 40 s), or a controller-manager that relists late, marks
# the pods not ready; they are evicted once their node.kubernetes.io/unreachable toleration ends (300 s by default;
# kubernetes/kubernetes#24200).
NOT_READY_EVENT, EVICTION_EVENT = "NodeNotReady", "TaintManagerEviction"

# How long a controller may take to list again once the API server is back: client-go's reflector retries a failed
# list or watch after 0.8 s, doubling up to a cap of 30 s, and jitters each wait by up to as much again
# (k8s.io/client-go v0.36.2 tools/cache/reflector.go, defaultBackoffInit, defaultBackoffMax, defaultBackoffJitter
# 1.0; the client-go of Kueue v0.19.2 and of kube-controller-manager and kube-scheduler v1.36.3). After an outage
# of half a minute Kueue, the Job controller and the scheduler may each sleep up to 60 s before they see the cluster
# again; the first run here saw Kueue create no Workload and finish none for 54 s after the API server was ready.
RELIST_BACKOFF_SECONDS = 60
# Kueue's eviction by waitForPodsReady (kueue v0.19.2 apis/kueue/v1beta2 workload_types.go,
# WorkloadEvictedByPodsReadyTimeout).
PODS_READY_TIMEOUT = "PodsReadyTimeout"


def _event_seconds(event):
    """An Event's last time (lastTimestamp, else eventTime, else its creation) as Unix seconds (whole)."""
    text = event.get("lastTimestamp") or event.get("eventTime") or (event.get("metadata") or {}).get("creationTimestamp")
    return calendar.timegm(time.strptime(text[:19], "%Y-%m-%dT%H:%M:%S")) if text else 0


def _pairs(before, after):
    """Each Workload of ``before`` with the same object in ``after``: ``(workload, now)``, ``now`` None when it is
    gone or another object of its name (another uid) replaced it."""
    now_by_name = dict((w["metadata"]["name"], w) for w in after)
    for workload in before:
        now = now_by_name.get(workload["metadata"]["name"])
        yield workload, (now if now is not None and now["metadata"]["uid"] == workload["metadata"]["uid"] else None)


def admissions_kept(before, after):
    """What an outage did to the Workloads in etcd: ``before``, ``after`` the Workload objects read on each side of
    it, ``after`` as soon as the API server serves (before any controller has acted on what it missed).
    ``{"lost": names gone or replaced (another uid), "changed": {name: "type: before -> after"} for every condition
    that was True before and is not the same (status, reason, lastTransitionTime) after, "admitted": how many had a
    True condition before}``. Pending Workloads only have to be there: Kueue rewrites their message at every
    scheduling attempt."""
    lost, changed, admitted = [], {}, 0
    for workload, now in _pairs(before, after):
        name = workload["metadata"]["name"]
        if now is None:
            lost.append(name)
            continue
        held = [c for c in (workload.get("status") or {}).get("conditions") or [] if c.get("status") == "True"]
        admitted += bool(held)
        current = dict((c["type"], c) for c in (now.get("status") or {}).get("conditions") or [])
        for condition in held:
            seen = current.get(condition["type"]) or {}
            if any(seen.get(key) != condition.get(key) for key in ("status", "reason", "lastTransitionTime")):
                changed[name] = "%s: %s %s since %s -> %s" % (
                    condition["type"], condition["status"], condition.get("reason"),
                    condition.get("lastTransitionTime"), "%s %s since %s" % (
                        seen.get("status"), seen.get("reason"), seen.get("lastTransitionTime")) if seen else "gone")
    return {"lost": sorted(lost), "changed": changed, "admitted": admitted}


def admissions_after_kueue(before, later):
    """What Kueue, back and with its cache rebuilt from etcd, did to the Workloads that held quota before the outage
    (``before``; ``later``: read once it has admitted again). It may finish them or preempt them (the arriver
    reclaims the GPUs they borrowed), and admit a preempted one again once quota frees; a Workload caught between
    two of Kueue's status writes may show its admission gone before its Finished or Evicted condition.
    waitForPodsReady may evict one (``PODS_READY_TIMEOUT``): its timeouts run through the outage, and the Job
    controller, as stalled as Kueue after it, reports the Job's pods ready or done late; that is counted
    (``timed_out``), for the report to say. What Kueue must not do is admit one again with no eviction in between
    (its QuotaReserved True since another time and its eviction counts, ``evictions``, unchanged) or evict one for
    any other reason (a deactivation, a stopped queue). The evictions since ``before`` are read from the counts,
    which a new reservation leaves, and from the Evicted condition, which it turns False (a run on 2026-12-06 saw
    two preempted Workloads admitted again before this read). ``{"lost", "readmitted": {name: time}, "evicted":
    {name: reasons}, "preempted": count, "timed_out": count}``."""
    lost, readmitted, evicted, preempted, timed_out = [], {}, {}, 0, 0
    for workload, now in _pairs(before, later):
        name = workload["metadata"]["name"]
        was = workload_conditions(workload)
        if (was.get("QuotaReserved") or {}).get("status") != "True":
            continue
        if now is None:
            lost.append(name)
            continue
        conds = workload_conditions(now)
        reserved, eviction = conds.get("QuotaReserved") or {}, conds.get("Evicted") or {}
        counted = _evictions(workload)
        since = set(reason for reason, count in _evictions(now).items() if count > counted.get(reason, 0))
        if _was_preempted(conds):
            since.add(EVICTED_BY_PREEMPTION)
        elif eviction.get("status") == "True":
            since.add(eviction.get("reason"))
        preempted += EVICTED_BY_PREEMPTION in since
        timed_out += PODS_READY_TIMEOUT in since
        other = sorted(since - {EVICTED_BY_PREEMPTION, PODS_READY_TIMEOUT})
        if other:
            evicted[name] = ", ".join(other)
        if (not since and reserved.get("status") == "True"
                and reserved.get("last_transition_time") != was["QuotaReserved"]["last_transition_time"]):
            readmitted[name] = reserved.get("last_transition_time")
    return {"lost": sorted(lost), "readmitted": readmitted, "evicted": evicted, "preempted": preempted,
            "timed_out": timed_out}


def control_plane_restart_result(flooder, arriver, reach, flood_jobs, fault, back, before, after, later, arrival_ts,
                                 arrived, running, finished, jobs, pods, events, bound_seconds, grace_seconds,
                                 running_bound_seconds=60, earlier=()):
    """Judge the control-plane-restart scenario: ``flooder`` holds every GPU it may reach (``reach``: ``{queue:
    devices}``), etcd and the API server are killed (``fault``: ``{"how", "ts", "pids", "unreachable"}``) and started
    again (``back``: ``{"ts", "ready_seconds", "pids"}``); ``before``, ``after``: the tenants' Workloads read on each
    side of the outage (``after``: etcd's, as soon as the API server serves), ``later``: once Kueue has reserved the
    arriver's guarantee (Kueue's, once it works again); ``arriver`` submits its guarantee at ``arrival_ts``
    (``arrived``: the wait for its reservation, ``running``: for its pods started); every Job runs to the end
    (``finished``). ``jobs``, ``pods``, ``events``: every Job, Pod and pod Event of the tenant namespaces at the end.
    ``earlier``: the samples read before the outage, judged with the rest."""
    f, a = flooder["name"], arriver["name"]
    down_seconds = round(back["ts"] - fault["ts"], 1)
    old, new = fault.get("pids") or {}, back.get("pids") or {}
    restarted = sorted(old) == sorted(new) and not set(old.values()) & set(new.values())
    checks = [_check("etcd and the API server taken down while %s holds every GPU it may reach, then back" % f,
                     "%s: unreachable, then running as new processes" % fault["how"],
                     "%s for %.1f s (pids %s, then %s), serving %.1f s after kwokctl's start" % (
                         "unreachable" if fault.get("unreachable") else "STILL ANSWERING", down_seconds,
                         sorted(old.values()), sorted(new.values()), back["ready_seconds"] or 0),
                     bool(fault.get("unreachable")) and restarted)]
    now, then = admissions_kept(before, after), admissions_after_kueue(before, later)
    lost = ["lost: %s" % ", ".join(now["lost"])] if now["lost"] else []
    etcd_words = "; ".join(lost + ["%s %s" % item for item in sorted(now["changed"].items())]) or (
        "%d of %d there, the %d admitted unchanged" % (len(before), len(before), now["admitted"]))
    kueue_words = "; ".join(
        (["lost: %s" % ", ".join(then["lost"])] if then["lost"] else [])
        + ["%s admitted again at %s" % item for item in sorted(then["readmitted"].items())]
        + ["%s evicted (%s)" % item for item in sorted(then["evicted"].items())]) or (
        "none admitted again; evicted: %d by preemption, %d by waitForPodsReady"
        % (then["preempted"], then["timed_out"]))
    checks.append(_check("every Workload survives the outage with its admission: unchanged in etcd at the return, "
                         "and once Kueue works again none admitted again or evicted but by preemption or "
                         "waitForPodsReady",
                         "all %d" % len(before), "at the return: %s. Later: %s" % (etcd_words, kueue_words),
                         not now["lost"] and not now["changed"] and now["admitted"] > 0 and not then["lost"]
                         and not then["readmitted"] and not then["evicted"]))
    ttg, _ttr = guarantee_times(arrived.get("timeline") or [], a, arriver["gpus"], arrival_ts)
    _ttg, ttr = guarantee_times(running.get("timeline") or [], a, arriver["gpus"], arrival_ts)
    bound, running_bound = bound_seconds + RELIST_BACKOFF_SECONDS, running_bound_seconds + RELIST_BACKOFF_SECONDS
    checks.append(_check("time-to-guarantee of %s after the API server is back, Kueue's reservation, within %s s "
                         "(%s s and the controllers' relist backoff, %d s)"
                         % (a, bound, bound_seconds, RELIST_BACKOFF_SECONDS), "<= %s s" % bound,
                         "never" if ttg is None else "%.1f s" % ttg, ttg is not None and ttg <= bound))
    checks.append(_check("%s's pods run on its guarantee after the API server is back (scheduled, started), within "
                         "%s s (%s s and the relist backoff)" % (a, running_bound, running_bound_seconds),
                         "<= %s s" % running_bound, "never" if ttr is None else "%.1f s" % ttr,
                         ttr is not None and ttr <= running_bound))
    timeline = (list(earlier) + (arrived.get("timeline") or []) + (running.get("timeline") or [])
                + (finished.get("timeline") or []))
    # Kueue's own statuses trail its decisions after the outage: an object whose reconcile failed all through it is
    # retried after controller-runtime's per-item backoff (5 ms doubling, client-go v0.36.2 util/workqueue
    # DefaultTypedControllerRateLimiter: the next retry about as far off as the outage is long), on top of the relist
    # backoff. A run saw the ClusterQueue's reserved count trail its finished Workloads by 18.7 s. A double
    # admission lasts; a lag of the status does not.
    lag = grace_seconds + RELIST_BACKOFF_SECONDS
    checks.append(reservation_check(timeline, lag, "control_plane_restart"))
    checks.append(reach_check(timeline, reach, "control_plane_restart"))
    checks.append(accounting_check(timeline, lag, "control_plane_restart"))
    checks.append(gpu_pods_check(timeline, lag, "control_plane_restart"))
    # The scenario's pods (named after its Jobs) since the fault: an Event of an earlier run or another pod is not
    # this outage's.
    names = tuple(j["metadata"]["name"] + "-" for j in jobs)
    ours = [e for e in events if (e.get("involvedObject") or {}).get("name", "").startswith(names)
            and _event_seconds(e) >= int(fault["ts"])] if names else []
    evicted = sorted(e["involvedObject"]["name"] for e in ours if e.get("reason") == EVICTION_EVENT)
    not_ready = sorted(e["involvedObject"]["name"] for e in ours if e.get("reason") == NOT_READY_EVENT)
    checks.append(_check("no pod evicted for its node after the outage (%s)" % EVICTION_EVENT, [], evicted,
                         not evicted))
    expected = flood_jobs + arriver["gpus"]
    succeeded = _succeeded(jobs)
    checks.append(_check("every Job of both tenants succeeded (none lost)", expected, len(succeeded),
                         len(succeeded) == expected))
    twice = ran_twice(jobs, pods)
    checks.append(_check("Jobs run to the end twice", [], twice, not twice))
    notes = []
    if then["timed_out"]:
        notes.append("Kueue's waitForPodsReady evicted %d of the Workloads admitted before the outage once it was back "
                     "(%s): its timeouts ran through the outage while the Job controller could not report their pods "
                     "ready; they were queued again." % (then["timed_out"], PODS_READY_TIMEOUT))
    if not_ready:
        notes.append("The node lifecycle controller marked %d pods not ready on the API server's return (%s): it saw "
                     "no lease renewal for longer than its grace period; their pods are evicted if their nodes stay "
                     "so past the unreachable toleration (300 s by default)." % (len(not_ready), NOT_READY_EVENT))
    title = "Control plane restarts: %s floods, etcd and the API server go down, %s arrives once they are back" % (f, a)
    return {
        "name": "control_plane_restart",
        "title": title,
        "checks": checks,
        "metrics": {
            "fault": fault["how"],
            "down_seconds": down_seconds,
            "api_server_ready_seconds": back["ready_seconds"],
            "workloads_kept": len(before) - len(now["lost"]),
            "admissions_kept": now["admitted"] - len(now["changed"]),
            "preempted_after": then["preempted"],
            "evicted_pods_ready_timeout": then["timed_out"],
            "pods_marked_not_ready": len(not_ready),
            "time_to_guarantee_seconds": ttg,
            "time_to_running_seconds": ttr,
            "guarantee_bound_seconds": bound,
            "jobs_lost": max(0, expected - len(succeeded)),
            "jobs_run_twice": len(twice),
            "finish_seconds": finished.get("elapsed"),
        },
        "notes": notes,
        "timeline": timeline,
    }


def evictions_since(before, after):
    """Per Workload that was there ``before`` and is ``after``, the evictions since: ``{name: {reason: count}}``
    from ``status.schedulingStats.evictions`` (``kueue.status.evictions``), only the Workloads Kueue evicted; and
    the names gone (``lost``: deleted or replaced by another uid). ``(evicted, lost)``."""
    evicted, lost = {}, []
    for workload, now in _pairs(before, after):
        name = workload["metadata"]["name"]
        if now is None:
            lost.append(name)
            continue
        counted = _evictions(workload)
        since = dict((reason, count - counted.get(reason, 0)) for reason, count in _evictions(now).items()
                     if count > counted.get(reason, 0))
        if since:
            evicted[name] = since
    return evicted, sorted(lost)


def gpu_node_loss_result(tenants, fault, tainted, deleted, gone, back, capacity_alert, before, after, jobs, pods,
                         finished, guaranteed):
    """Judge the GPU node's loss: both ``tenants`` hold their guarantee with Jobs that outlast it; the node running
    most of their pods stops reporting (``fault``: ``{"how", "ts", "node", "gpus", "pods", "offered_before"}``), the
    node lifecycle controller taints it (``tainted``: ``{"ts", "taints", "seconds", "held"}``), it is deleted
    (``deleted``: ``{"ts"}``), PodGC removes its pods (``gone``: ``{"ts", "left", "seconds", "held"}``) and a node
    of the same name joins again (``back``: ``{"ts", "ready_seconds", "gpus"}``). ``capacity_alert``: what
    Prometheus saw (``{"fired_ts", "offered", "guaranteed", "for"}``) or None without Prometheus. ``before``,
    ``after``: the tenants' Workloads before the loss and at the end; ``jobs``, ``pods``: the scenario's at the
    end; ``finished``: the wait for every Job; ``guaranteed``: the devices all tenants are guaranteed."""
    node, lost_pods = fault["node"], list(fault.get("pods") or [])
    checks = [_check(
        "GPU node %s (%d GPUs, %d of the tenants' pods) stops reporting, is tainted not ready by the node lifecycle "
        "controller, deleted, its pods removed by PodGC, and joins again" % (node, fault["gpus"], len(lost_pods)),
        "tainted, pods gone, Ready again with its GPUs",
        "%s after %.1f s; %s %.1f s after the deletion; Ready with %s GPUs %.1f s after joining" % (
            ", ".join(sorted(tainted.get("taints") or [])) or "NOT TAINTED", tainted.get("seconds") or 0,
            "pods gone" if gone.get("held") else "STILL THERE: %s" % ", ".join(gone.get("left") or []),
            gone.get("seconds") or 0, back.get("gpus"), back.get("ready_seconds") or 0),
        bool(tainted.get("held")) and bool(gone.get("held")) and back.get("gpus") == fault["gpus"])]
    # The lost pods are gone by the end; their Jobs are known by the pods' names (a Job's pod is <job>-<suffix>,
    # the Job controller's generateName).
    by_name = dict((j["metadata"]["name"], j) for j in jobs)
    lost_names = set(key.split("/", 1)[1] for key in lost_pods)
    lost_jobs = set(name for name in by_name for pod_name in lost_names if pod_name.startswith(name + "-"))
    orphans = sorted(pod_name for pod_name in lost_names if not any(pod_name.startswith(name + "-") for name in by_name))
    unmatched = ["pods of no Job of the scenario: %s" % ", ".join(orphans)] if orphans else []
    # Ran again: the pod that succeeded is another than the lost one (a lost pod that completed all the same would
    # be a node that was not lost).
    again = set((p["metadata"].get("labels") or {}).get(JOB_NAME_LABEL) for p in pods
                if (p.get("status") or {}).get("phase") == "Succeeded" and p["metadata"]["name"] not in lost_names)
    failing = sorted("%s (succeeded %s, failed %s%s)" % (
        name, (by_name[name].get("status") or {}).get("succeeded") or 0,
        (by_name[name].get("status") or {}).get("failed") or 0, "" if name in again else ", no new pod succeeded")
        for name in lost_jobs if name in by_name and (
            name not in again
            or ((by_name[name].get("status") or {}).get("succeeded") or 0) < 1
            or ((by_name[name].get("status") or {}).get("failed") or 0) > 0))
    checks.append(_check(
        "every Job that lost its pod with the node ran again (a new pod) and succeeded, no failure counted against "
        "its backoffLimit (podFailurePolicy: Ignore DisruptionTarget)", "%d succeeded, failed 0" % len(lost_names),
        "; ".join(failing + unmatched) or "%d succeeded, failed 0" % len(lost_jobs), not failing and not unmatched))
    evicted, gone_workloads = evictions_since(before, after)
    allowed = (EVICTED_BY_PREEMPTION, PODS_READY_TIMEOUT)
    other = sorted("%s (%s)" % (name, ", ".join(sorted(r for r in reasons if r not in allowed)))
                   for name, reasons in evicted.items() if any(r not in allowed for r in reasons))
    requeued = sorted(name for name, reasons in evicted.items() if PODS_READY_TIMEOUT in reasons)
    checks.append(_check(
        "every Workload requeued with a reason: evicted only by waitForPodsReady (%s) or preemption, none "
        "deactivated, none lost" % PODS_READY_TIMEOUT, "none else",
        "; ".join((["lost: %s" % ", ".join(gone_workloads)] if gone_workloads else []) + other) or
        "%d evicted %s and requeued, %d preempted" % (
            len(requeued), PODS_READY_TIMEOUT, sum(EVICTED_BY_PREEMPTION in r for r in evicted.values())),
        not other and not gone_workloads))
    if capacity_alert is not None:
        checks.append(_check(
            "FairgpuGuaranteesOverCapacity fires while the node is away (guarantees above what the Ready nodes offer)",
            "firing, within its for: (%s) and the scrapes" % capacity_alert.get("for"),
            "firing %.1f s after the node stopped reporting; guaranteed %s, offered %s" % (
                capacity_alert["fired_ts"] - fault["ts"], capacity_alert.get("guaranteed"),
                capacity_alert.get("offered")) if capacity_alert.get("fired_ts") else "NEVER FIRED",
            bool(capacity_alert.get("fired_ts"))))
    expected = sum(t["gpus"] for t in tenants)
    succeeded = _succeeded(jobs)
    checks.append(_check("every Job of both tenants succeeded (none lost)", expected, len(succeeded),
                         len(succeeded) == expected))
    twice = ran_twice(jobs, pods)
    checks.append(_check("Jobs run to the end twice", [], twice, not twice))
    offered_during = fault["offered_before"] - fault["gpus"]
    notes = ["Kueue knows no nodes (no topology-aware scheduling): while %s was away the Ready nodes offered %d GPUs "
             "against %d guaranteed, and Kueue kept admitting up to the guarantees; what it admitted beyond the "
             "offer waited for GPUs that were gone (kubernetes-sigs/kueue#12656)." % (node, offered_during, guaranteed)]
    if requeued:
        notes.append("%d Workloads evicted by waitForPodsReady and requeued (their pods not ready past its recovery "
                     "timeout while the node was away): %s." % (len(requeued), ", ".join(requeued)))
    title = ("A GPU node goes away: %s stops reporting, is deleted and replaced while %s use their guarantees"
             % (node, " and ".join(t["name"] for t in tenants)))
    fired = capacity_alert.get("fired_ts") if capacity_alert else None
    return {
        "name": "gpu_node_loss",
        "title": title,
        "checks": checks,
        "metrics": {
            "fault": fault["how"],
            "node": node,
            "gpus_lost": fault["gpus"],
            "gpus_offered_before": fault["offered_before"],
            "gpus_offered_during": offered_during,
            "gpus_guaranteed": guaranteed,
            "pods_lost": len(lost_pods),
            "taint_seconds": tainted.get("seconds"),
            "pods_gone_seconds": gone.get("seconds"),
            "rejoin_seconds": back.get("ready_seconds"),
            "evicted_pods_ready_timeout": len(requeued),
            "capacity_alert_seconds": round(fired - fault["ts"], 1) if fired else None,
            "jobs_lost": max(0, expected - len(succeeded)),
            "jobs_run_twice": len(twice),
            "finish_seconds": finished.get("elapsed"),
        },
        "notes": notes,
        "timeline": finished.get("timeline") or [],
    }
