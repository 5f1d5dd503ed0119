# -*- coding: utf-8 -*-
# Copyright: fairgpu contributors
# Apache License 2.0 (see LICENSE)
"""From replay tasks to Jobs at wall-clock times (issue 17): scale to a load factor, map tenants to their
LocalQueues, build each Job, say which are due. Pure logic, no cluster access; the module replay_submit only
sleeps and creates.

A Job of the replay runs for its compressed run time on the embedded cluster through kwok's pod-complete stage:
the annotations ``pod-complete.stage.kwok.x-k8s.io/delay`` and ``.../jitter-delay`` set to the same Go duration
give a fixed time (kwok v0.8.0, kustomize/stage/pod/general/pod-complete.yaml), as the validate role's Jobs do.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib

from ansible_collections.fairgpu.tenancy.plugins.module_utils.common.names import (
    GPU_RESOURCE, QUEUE_LABEL, REPLAY_LABEL, TENANT_LABEL)
from ansible_collections.fairgpu.tenancy.plugins.module_utils.replay import trace as replay_trace


class ScheduleError(ValueError):
    """Bad replay input; the message names the setting and the fix."""


def _unit(name):
    """A stable number in [0, 1) from a task's name (SHA-256), for thinning alike on every run and machine."""
    return int(hashlib.sha256(name.encode("utf-8")).hexdigest()[:12], 16) / float(16 ** 12)


def scale_to_load(tasks, capacity, load_factor, length, largest):
    """Bring the mean GPU demand of ``tasks`` over ``length`` seconds (GPU-seconds of their runs / ``length``) to
    ``load_factor`` x ``capacity`` with one factor: above 1, each task's GPUs become round(gpus x factor), at most
    ``largest`` (the most GPUs one node offers, so every task can run); below 1, since a 1-GPU task cannot shrink,
    the tasks are thinned instead: a task is kept when a stable hash of its name falls below the factor (each task
    kept or not alike on every run). Run and submit times are kept. Returns new tasks and ``{"load_factor",
    "capacity", "factor", "trace_mean_demand" (before), "mean_demand" (after), "achieved_load", "capped",
    "thinned"}``."""
    if not capacity > 0:
        raise ScheduleError("replay: the cluster has no GPU capacity to scale to (capacity %r)" % (capacity,))
    if not load_factor > 0:
        raise ScheduleError("replay_load_factor: must be above 0 (a share of the cluster's GPUs), got %r"
                            % (load_factor,))
    before = replay_trace.mean_demand(replay_trace.demand_steps(tasks), 0, length)
    factor = (load_factor * capacity / before) if before > 0 else 1.0
    scaled, capped, thinned = [], 0, 0
    for task in tasks:
        if factor < 1:
            if _unit(task["name"]) >= factor:
                thinned += 1
                continue
            gpus = task["gpus"]
        else:
            gpus = int(round(task["gpus"] * factor))
        if gpus > largest:
            gpus, capped = int(largest), capped + 1
        scaled.append(dict(task, gpus=gpus, trace_gpus=task["gpus"]))
    after = replay_trace.mean_demand(replay_trace.demand_steps(scaled), 0, length)
    return scaled, {"load_factor": load_factor, "capacity": capacity, "factor": round(factor, 4),
                    "trace_mean_demand": round(before, 3), "mean_demand": round(after, 3),
                    "achieved_load": round(after / float(capacity), 3), "capped": capped, "thinned": thinned}


def submissions(tasks, queues, prefix):
    """One Job per task, in submit order: ``{"name": <prefix>-<NNNN>, "namespace", "queue", "tenant", "gpus",
    "seconds" (compressed run time), "at" (compressed submit time, seconds from the replay's start),
    "trace_name"}``. ``queues``: ``{tenant: {"namespace", "queue"}}``. Raises ScheduleError naming a tenant of the
    trace that has no queue."""
    missing = sorted(set(t["tenant"] for t in tasks) - set(queues))
    if missing:
        raise ScheduleError("replay: the trace's tenants %s have no LocalQueue; add them to tenants_list (names %s) "
                            "and run site.yml, or change replay_tenants / replay_tenant_column"
                            % (", ".join(missing), ", ".join(missing)))
    ordered = sorted(tasks, key=lambda t: (t["submit"], t["name"]))
    jobs = []
    for number, task in enumerate(ordered):
        start = task["start"] if task.get("start") is not None else task["submit"]
        jobs.append({"name": "%s-%04d" % (prefix, number), "namespace": queues[task["tenant"]]["namespace"],
                     "queue": queues[task["tenant"]]["queue"], "tenant": task["tenant"], "gpus": int(task["gpus"]),
                     "seconds": int(task["end"] - start), "at": int(task["submit"]), "trace_name": task["name"]})
    return jobs


def job_manifest(job, run_id, image, simulated, resource=GPU_RESOURCE):
    """The batch/v1 Job of one submission: created suspended (Kueue unsuspends it on admission), queued on its
    tenant's LocalQueue, restricted Pod Security, and on the embedded cluster kwok's fixed run time."""
    seconds = "%ds" % job["seconds"]
    labels = {QUEUE_LABEL: job["queue"], REPLAY_LABEL: run_id, TENANT_LABEL: job["tenant"]}
    template = {
        "metadata": {"labels": {REPLAY_LABEL: run_id, TENANT_LABEL: job["tenant"]},
                     "annotations": {"fairgpu.io/trace-task": job["trace_name"]}},
        "spec": {
            "restartPolicy": "Never",
            "securityContext": {"runAsNonRoot": True, "runAsUser": 1000, "runAsGroup": 1000,
                                "seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [{
                "name": "task", "image": image, "command": ["sleep", str(job["seconds"])],
                "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
                "resources": {"requests": {"cpu": "1", "memory": "2Gi", resource: str(job["gpus"])},
                              "limits": {"cpu": "1", "memory": "2Gi", resource: str(job["gpus"])}},
            }],
        },
    }
    if simulated:
        template["metadata"]["annotations"].update({"pod-complete.stage.kwok.x-k8s.io/delay": seconds,
                                                    "pod-complete.stage.kwok.x-k8s.io/jitter-delay": seconds})
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": job["name"], "namespace": job["namespace"], "labels": labels,
                         "annotations": {"fairgpu.io/replay-at": str(job["at"])}},
            "spec": {"parallelism": 1, "completions": 1, "backoffLimit": 0, "suspend": True, "template": template}}


def due(jobs, elapsed, done):
    """The jobs after the first ``done`` (in ``at`` order) whose time has come at ``elapsed`` seconds, and the
    seconds until the next one after them (None when none is left)."""
    ready = []
    for job in jobs[done:]:
        if job["at"] > elapsed:
            return ready, job["at"] - elapsed
        ready.append(job)
    return ready, None


def lateness(records):
    """``{"count", "max", "mean"}`` of the seconds each Job was created after its time (``records``: dicts with
    ``late``)."""
    late = [r["late"] for r in records]
    return {"count": len(late), "max": round(max(late), 3) if late else 0.0,
            "mean": round(sum(late) / float(len(late)), 3) if late else 0.0}


# kwok v0.8.0's pod stages (kustomize/stage/pod/general/pod-create.yaml, pod-ready.yaml): 1 s plus up to 5 s of
# jitter each, so a pod runs up to about 12 s after its Job is unsuspended. A compressed run time must stay well
# above that, or the start delay, not Kueue, decides the replay's timing.
POD_START_STOP_SECONDS = 12
MIN_RUN_FLOOR = 2 * POD_START_STOP_SECONDS


def plan(rows, queues, capacity, largest, window_seconds, compression, floor, load_factor, tenants=0,
         tenant_column=None, window_start=None, prefix="replay", max_tasks=0, node_rows=None):
    """The whole replay from the trace's rows: ``trace.alibaba_v2023``, tenants by column or hash, the window
    (``window_start`` seconds into the trace, or the busiest ``window_seconds`` when None), GPUs scaled to
    ``load_factor`` x ``capacity`` (``scale_to_load``), time divided by ``compression`` with run times of at least
    ``floor`` wall seconds, and the Jobs (``submissions``). ``max_tasks`` > 0 keeps the window's first N tasks.
    ``node_rows``: the trace's node list (``trace.alibaba_v2023_nodes``), for how loaded the trace's own cluster was
    in the window and how long its tasks waited there (``trace.own_cluster_load``).
    Returns ``{"jobs", "adapter" (the trace's decision counts), "assignment", "window", "compression", "scaling",
    "trace_cluster" (None without ``node_rows``), "capacity", "weights"...}``. Raises ScheduleError /
    trace.TraceError naming the setting at fault."""
    if floor < MIN_RUN_FLOOR:
        raise ScheduleError("replay_run_floor: %r s is not well above the embedded cluster's pod start and stop "
                            "delays (up to %d s); give at least %d" % (floor, POD_START_STOP_SECONDS, MIN_RUN_FLOOR))
    if not window_seconds > 0:
        raise ScheduleError("replay_window_seconds: give the window's length in trace seconds (> 0), got %r"
                            % (window_seconds,))
    tasks, adapter = replay_trace.alibaba_v2023(rows)
    tasks, assignment = replay_trace.assign_tenants(tasks, column=tenant_column, tenants=tenants)
    if window_start is None:
        window_start, busy = replay_trace.busiest_window(tasks, window_seconds)
        chosen = "busiest"
    else:
        busy, chosen = None, "given"
    windowed = replay_trace.window(tasks, window_start, window_seconds)
    windowed = [t for t in windowed if t.get("start") is not None]
    windowed.sort(key=lambda t: (t["submit"], t["name"]))
    cut = 0
    if max_tasks and len(windowed) > max_tasks:
        cut, windowed = len(windowed) - max_tasks, windowed[:max_tasks]
    if not windowed:
        raise ScheduleError("replay_window_start/replay_window_seconds: no task of the trace is submitted in "
                            "[%s, %s)" % (window_start, window_start + window_seconds))
    length = window_seconds if not cut else max(t["submit"] for t in windowed) + 1
    # Compressed first, then scaled: the load factor is of what the replay cluster sees, run times raised to the
    # floor included.
    compressed, squeeze = replay_trace.compress(windowed, compression, floor)
    wall_length = max(1, int(round(length / float(compression))))
    scaled, scaling = scale_to_load(compressed, capacity, load_factor, wall_length, largest)
    scaling["trace_time_load"] = round(replay_trace.mean_demand(replay_trace.demand_steps(windowed), 0, length)
                                       / float(capacity), 3)
    scaling["peak_demand"] = replay_trace.peak_demand(scaled)
    jobs = submissions(scaled, queues, prefix)
    own = None
    if node_rows is not None:
        own = replay_trace.own_cluster_load(tasks, replay_trace.alibaba_v2023_nodes(node_rows), window_start, length,
                                            replay_trace.never_scheduled(rows, window_start, length))
    by_tenant = {}
    for job in jobs:
        entry = by_tenant.setdefault(job["tenant"], {"jobs": 0, "gpu_seconds": 0, "largest_task": 0})
        entry["jobs"] += 1
        entry["gpu_seconds"] += job["gpus"] * job["seconds"]
        entry["largest_task"] = max(entry["largest_task"], job["gpus"])
    return {"jobs": jobs, "adapter": adapter, "assignment": dict(assignment, replayed=by_tenant),
            "window": {"start": window_start, "seconds": window_seconds, "chosen": chosen, "tasks": len(jobs),
                       "cut_to_max_tasks": cut, "busiest_mean_gpus": None if busy is None else round(busy, 3),
                       "wall_seconds": wall_length},
            "compression": squeeze, "scaling": scaling, "trace_cluster": own, "capacity": capacity, "largest": largest}


def tenant_queues(tenants, suffix, groups="tenants"):
    """The replay's groups of the tenants role's normalised tenants, ``{group: {"namespace", "queue", "weight",
    "gpus", "borrowing_limit", "lending_limit", "max_jobs", "cluster_queue", "admission_fair_sharing"}}`` (GPUs; a
    limit None: none), the trace's tenants going one to one onto them by name.

    ``groups`` tenants: one group per tenant, its Jobs on its first namespace and its LocalQueue ``<name><suffix>``.
    ``groups`` namespaces: one group per namespace of every tenant (the namespaces of one ClusterQueue, for admission
    fair sharing), with the namespace's ``local_queue_weights`` as its weight; a group has no guarantee of its own
    (``gpus`` 0) and no limit, its tenant's ClusterQueue being the one quota they share (``cluster_queue_gpus``, the
    tenant's guarantee). Raises ScheduleError for another ``groups``."""
    if groups not in ("tenants", "namespaces"):
        raise ScheduleError("replay_groups: %r is not tenants or namespaces" % (groups,))
    out = {}
    for t in tenants:
        common = {"queue": t["name"] + suffix, "max_jobs": t.get("max_jobs"), "cluster_queue": t["name"],
                  "admission_fair_sharing": bool(t.get("admission_fair_sharing"))}
        if groups == "tenants":
            out[t["name"]] = dict(common, namespace=t["namespaces"][0], weight=t.get("weight", 1), gpus=t.get("gpus"),
                                  borrowing_limit=t.get("borrowing_limit"), lending_limit=t.get("lending_limit"))
            continue
        for namespace in t["namespaces"]:
            out[namespace] = dict(common, namespace=namespace, gpus=0, borrowing_limit=None, lending_limit=None,
                                  weight=(t.get("local_queue_weights") or {}).get(namespace, 1),
                                  cluster_queue_gpus=t.get("gpus"))
    return out
