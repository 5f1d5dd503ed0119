# -*- coding: utf-8 -*-
# Copyright: fairgpu maintainers
# Apache License 2.0 (see LICENSE)
"""Summaries of Kueue's admission state: what each ClusterQueue holds and what each Workload went through.

Pure logic, no cluster access: the callers pass ClusterQueue, LocalQueue and Workload objects as the API
returns them (``kueue.x-k8s.io/v1beta2``). Quantities of the accelerator resource are whole devices (GPUs or
MIG devices); Kueue's ``status.fairSharing.weightedShare`` is reported as Kueue computes it (share x 1000 /
weight, an integer; see Kueue's fair sharing documentation).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.fairgpu.tenancy.plugins.module_utils.common.quantity import parse_quantity
from ansible_collections.fairgpu.tenancy.plugins.module_utils.common.names import GPU_RESOURCE

CONDITIONS = ("QuotaReserved", "Admitted", "PodsReady", "Evicted", "Preempted", "Requeued", "Finished")


def _count(value):
    """A quantity of whole devices as an int (0 for None)."""
    return int(parse_quantity(value)) if value is not None else 0


def _flavor_total(flavors, resource, key):
    return sum(
        _count(entry.get(key))
        for flavor in flavors or []
        for entry in flavor.get("resources") or []
        if entry.get("name") == resource
    )


def _quota(spec, resource):
    """(nominal, borrowing_limit or None, lending_limit or None) of ``resource`` over all flavors."""
    nominal, borrowing, lending = 0, None, None
    for group in spec.get("resourceGroups") or []:
        for flavor in group.get("flavors") or []:
            for entry in flavor.get("resources") or []:
                if entry.get("name") != resource:
                    continue
                nominal += _count(entry.get("nominalQuota"))
                if entry.get("borrowingLimit") is not None:
                    borrowing = (borrowing or 0) + _count(entry["borrowingLimit"])
                if entry.get("lendingLimit") is not None:
                    lending = (lending or 0) + _count(entry["lendingLimit"])
    return nominal, borrowing, lending


def pod_requests(pod_spec, resource):
    """Devices of ``resource`` one pod holds, by Kubernetes' own rule (k8s.io/component-helpers
    ``resource.PodRequests``, which Kueue uses too): the regular containers add up, together with every sidecar
    (an init container with ``restartPolicy: Always``); each other init container runs alone with the sidecars
    declared before it, and the pod needs the largest of those; ``overhead`` is added. A container's limit counts
    when it has no request (the API server defaults the request to the limit). Returns an int."""
    def amount(container):
        resources = container.get("resources") or {}
        return _count((resources.get("requests") or {}).get(resource, (resources.get("limits") or {}).get(resource)))

    containers = sum(amount(c) for c in pod_spec.get("containers") or [])
    sidecars = init_peak = 0
    for init in pod_spec.get("initContainers") or []:
        if init.get("restartPolicy") == "Always":
            sidecars += amount(init)
            init_peak = max(init_peak, sidecars)
        else:
            init_peak = max(init_peak, sidecars + amount(init))
    overhead = _count((pod_spec.get("overhead") or {}).get(resource))
    return max(containers + sidecars, init_peak) + overhead


def pod_devices(pods, namespace_queues, resource):
    """What tenants' pods hold on the nodes, per ClusterQueue: ``{queue: {"running": devices of Running pods that
    are not being deleted, "terminating": devices of Running pods being deleted, "succeeded": devices of Succeeded
    pods (they ran on them and are done)}}``.

    ``pods``: Pod objects; ``namespace_queues``: namespace -> the ClusterQueue its LocalQueues point at (a pod
    counts for its namespace's tenant whether Kueue admitted it or not: that is the point). A Running pod holds its
    devices until it is gone; a preempted pod does so for its termination grace period."""
    held = {}
    for pod in pods:
        metadata = pod.get("metadata") or {}
        queue = namespace_queues.get(metadata.get("namespace"))
        phase = (pod.get("status") or {}).get("phase")
        if queue is None or phase not in ("Running", "Succeeded"):
            continue
        devices = pod_requests(pod.get("spec") or {}, resource)
        entry = held.setdefault(queue, {"running": 0, "terminating": 0, "succeeded": 0})
        if phase == "Succeeded":
            entry["succeeded"] += devices
        else:
            entry["terminating" if metadata.get("deletionTimestamp") else "running"] += devices
    return held


def queue_summary(cluster_queue, resource):
    """One ClusterQueue as a dict: ``name``, ``cohort``, ``weight`` (float), ``nominal``, ``borrowing_limit``,
    ``lending_limit`` (devices or None), ``reserved``, ``in_use``, ``borrowed`` (devices),
    ``weighted_share`` (int or None), ``pending_workloads``, ``reserving_workloads``, ``admitted_workloads``
    (ints, from the ClusterQueue's status), ``admitted_or_finished_workloads`` (here the same as
    ``admitted_workloads``: ``admission_info`` counts finished workloads in when it lists them), ``active`` (bool);
    ``pods_running``, ``pods_terminating`` and ``pods_succeeded`` (devices of the
    tenant's Running pods, and of its Succeeded ones, 0 here: ``admission_info`` fills them when it is given
    pods)."""
    spec = cluster_queue.get("spec") or {}
    status = cluster_queue.get("status") or {}
    nominal, borrowing, lending = _quota(spec, resource)
    active = any(c.get("type") == "Active" and c.get("status") == "True" for c in status.get("conditions") or [])
    weight = (spec.get("fairSharing") or {}).get("weight")
    return {
        "name": cluster_queue["metadata"]["name"],
        "cohort": spec.get("cohortName"),
        "weight": float(parse_quantity(weight)) if weight is not None else 1.0,
        "nominal": nominal,
        "borrowing_limit": borrowing,
        "lending_limit": lending,
        "reserved": _flavor_total(status.get("flavorsReservation"), resource, "total"),
        "in_use": _flavor_total(status.get("flavorsUsage"), resource, "total"),
        "borrowed": _flavor_total(status.get("flavorsReservation"), resource, "borrowed"),
        "weighted_share": (status.get("fairSharing") or {}).get("weightedShare"),
        "pending_workloads": status.get("pendingWorkloads", 0),
        "reserving_workloads": status.get("reservingWorkloads", 0),
        "admitted_workloads": status.get("admittedWorkloads", 0),
        "admitted_or_finished_workloads": status.get("admittedWorkloads", 0),
        "active": active,
        "pods_running": 0,
        "pods_terminating": 0,
        "pods_succeeded": 0,
    }


def requested(workload, resource):
    """Devices of ``resource`` the workload asks for: per pod set, ``count`` x the sum of its containers'
    requests (a container's limit counts when it has no request, as Kubernetes defaults it)."""
    total = 0
    for pod_set in (workload.get("spec") or {}).get("podSets") or []:
        pod_spec = (pod_set.get("template") or {}).get("spec") or {}
        per_pod = 0
        for container in pod_spec.get("containers") or []:
            resources = container.get("resources") or {}
            value = (resources.get("requests") or {}).get(resource, (resources.get("limits") or {}).get(resource))
            per_pod += _count(value)
        total += per_pod * int(pod_set.get("count", 1))
    return total


def conditions(workload):
    """The workload's Kueue conditions: type -> ``{status, reason, message, last_transition_time}``."""
    result = {}
    for condition in (workload.get("status") or {}).get("conditions") or []:
        if condition.get("type") in CONDITIONS:
            result[condition["type"]] = {
                "status": condition.get("status"),
                "reason": condition.get("reason"),
                "message": condition.get("message"),
                "last_transition_time": condition.get("lastTransitionTime"),
            }
    return result


# Kueue v0.19.2 (apis/kueue/v1beta2/workload_types.go): the reasons of a Workload's Preempted condition, and the
# reason of its Evicted condition when a preemption evicted it (WorkloadEvictedByPreemption). Kueue sets both
# conditions True when it preempts (pkg/scheduler/preemption, workload.SetPreemptedCondition); when it reserves
# quota for the Workload again it turns both False with reason QuotaReserved and the message "Previously: ..."
# (pkg/workload/workload.go, SetQuotaReservation and resetActiveCondition).
PREEMPTION_REASONS = ("InClusterQueue", "InCohortReclamation", "InCohortFairSharing", "InCohortReclaimWhileBorrowing")
EVICTED_BY_PREEMPTION = "Preempted"


def preempted(conds):
    """Whether Kueue has preempted the Workload and not reserved quota for it since: its Preempted condition has a
    preemption reason, or its Evicted condition the reason ``Preempted``. ``conds``: ``conditions(workload)``.

    Once Kueue reserves quota again (re-admission) both conditions read ``QuotaReserved``, so a preemption that
    Kueue has undone no longer shows: judge preemptions from a read taken while they hold."""
    return ((conds.get("Preempted") or {}).get("reason") in PREEMPTION_REASONS
            or (conds.get("Evicted") or {}).get("reason") == EVICTED_BY_PREEMPTION)


def evictions(workload):
    """How often Kueue has evicted the Workload, by reason: ``{reason: count}`` from its
    ``status.schedulingStats.evictions`` (Kueue v0.19.2 apis/kueue/v1beta2 workload_types.go, counts summed over
    the underlying causes). Unlike the Evicted and Preempted conditions, which a new reservation turns False, the
    counts last: Kueue adds to them in the status patch that evicts (pkg/workload/evict/evict.go, Evict and
    workloadEvictionStateInc)."""
    counts = {}
    for entry in ((workload.get("status") or {}).get("schedulingStats") or {}).get("evictions") or []:
        counts[entry.get("reason")] = counts.get(entry.get("reason"), 0) + int(entry.get("count") or 0)
    return counts


def evicted(conds):
    """Whether Kueue has evicted the Workload, for a preemption (``preempted``) or any other reason (PodsReadyTimeout,
    a deactivation, a stopped queue), and not reserved quota for it since: its Evicted condition is True.
    ``conds``: ``conditions(workload)``."""
    return preempted(conds) or (conds.get("Evicted") or {}).get("status") == "True"


def workload_state(conds):
    """One word for where a workload stands: finished, admitted, reserved, evicted or pending."""
    def true(kind):
        return (conds.get(kind) or {}).get("status") == "True"

    if true("Finished"):
        return "finished"
    if true("Admitted"):
        return "admitted"
    if true("QuotaReserved"):
        return "reserved"
    if true("Evicted"):
        return "evicted"
    return "pending"


def workload_summary(workload, local_queues, resource):
    """One Workload as a dict: ``name``, ``namespace``, ``job`` (owner name or None), ``local_queue``,
    ``cluster_queue`` (from its admission, else from its LocalQueue), ``gpus`` (devices requested),
    ``priority`` (int or None), ``state``, ``conditions``, ``created`` (timestamp).
    ``local_queues`` maps ``(namespace, name)`` to the ClusterQueue name."""
    metadata = workload.get("metadata") or {}
    spec = workload.get("spec") or {}
    status = workload.get("status") or {}
    namespace = metadata.get("namespace")
    local_queue = spec.get("queueName")
    admission = status.get("admission") or {}
    owners = [o.get("name") for o in metadata.get("ownerReferences") or [] if o.get("kind") == "Job"]
    conds = conditions(workload)
    return {
        "name": metadata.get("name"),
        "namespace": namespace,
        "job": owners[0] if owners else None,
        "local_queue": local_queue,
        "cluster_queue": admission.get("clusterQueue") or local_queues.get((namespace, local_queue)),
        "gpus": requested(workload, resource),
        "priority": spec.get("priority"),
        "state": workload_state(conds),
        "conditions": conds,
        "created": metadata.get("creationTimestamp"),
    }


def admission_info(cluster_queues, local_queues, workloads, resource=GPU_RESOURCE, queue_names=None, pods=None):
    """Summarise Kueue's admission state.

    ``cluster_queues``, ``local_queues``, ``workloads``: lists of API objects. ``queue_names``: restrict to
    these ClusterQueues (None: all given). ``pods``: the tenants' Pod objects, to set each queue's
    ``pods_running`` and ``pods_terminating`` (``pod_devices``). Returns ``{"queues": {name: queue_summary},
    "workloads": [workload_summary sorted by namespace, creation time, name]}``; a workload is kept when its
    ClusterQueue is one of the reported queues.
    """
    queues = {
        cq["metadata"]["name"]: queue_summary(cq, resource)
        for cq in cluster_queues
        if queue_names is None or cq["metadata"]["name"] in queue_names
    }
    lq_map = {
        ((lq.get("metadata") or {}).get("namespace"), (lq.get("metadata") or {}).get("name")):
            (lq.get("spec") or {}).get("clusterQueue")
        for lq in local_queues
    }
    namespace_queues = {namespace: queue for (namespace, _name), queue in lq_map.items() if queue in queues}
    for queue, held in pod_devices(pods or [], namespace_queues, resource).items():
        queues[queue]["pods_running"], queues[queue]["pods_terminating"] = held["running"], held["terminating"]
        queues[queue]["pods_succeeded"] = held["succeeded"]
    summaries = [workload_summary(w, lq_map, resource) for w in workloads]
    summaries = [s for s in summaries if s["cluster_queue"] in queues]
    for queue in queues.values():
        # A ClusterQueue's admittedWorkloads drops as Jobs finish; a Kueue-managed Job runs only once admitted,
        # so admitted + finished is a count that only grows (a wait on it cannot miss a short Job).
        ran = sum(1 for s in summaries if s["cluster_queue"] == queue["name"] and s["state"] in ("admitted", "finished"))
        queue["admitted_or_finished_workloads"] = max(queue["admitted_workloads"], ran)
        # What the listed Workloads that hold quota add up to, to set beside the ClusterQueue's own count
        # (``reserved``): the two differ when Kueue double-counts or loses a Workload (a restart's rebuild).
        queue["workloads_reserved"] = sum(s["gpus"] for s in summaries
                                          if s["cluster_queue"] == queue["name"] and s["state"] in ("admitted", "reserved"))
    summaries.sort(key=lambda s: (s["namespace"] or "", s["created"] or "", s["name"] or ""))
    return {"queues": queues, "workloads": summaries}


WAIT_KEYS = ("reserved_at_least", "admitted_at_least", "pending_at_least", "running_at_least", "started_at_least")


def wait_for_errors(wait_for):
    """Check a ``wait_for`` condition; return error strings (empty when valid).

    Forms: ``{"queue": NAME, "reserved_at_least" | "admitted_at_least" | "pending_at_least" |
    "running_at_least" | "started_at_least": N, ...}``, one or more counts that must all hold on the same read
    (devices for reserved, running and started: running counts the Running pods' devices, started those of Running
    and Succeeded pods, so that short Jobs that already finished still count as having had their devices;
    workloads for admitted, which counts finished workloads too, and pending) or ``{"all_finished": true,
    "workloads_at_least": N (optional)}``.
    """
    if not isinstance(wait_for, dict) or not wait_for:
        return ["wait_for: give a mapping, for example {queue: team-b, reserved_at_least: 8}"]
    if wait_for.get("all_finished"):
        extra = set(wait_for) - {"all_finished", "workloads_at_least"}
        return ["wait_for.%s: not allowed with all_finished" % sorted(extra)[0]] if extra else []
    keys = [k for k in WAIT_KEYS if k in wait_for]
    errors = []
    if not wait_for.get("queue"):
        errors.append("wait_for.queue: name the ClusterQueue to wait for")
    if not keys:
        errors.append("wait_for: give one or more of %s (or all_finished: true)" % ", ".join(WAIT_KEYS))
    for key in keys:
        value = wait_for[key]
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            errors.append("wait_for.%s: must be an integer >= 0, got %r" % (key, value))
    extra = set(wait_for) - set(WAIT_KEYS) - {"queue"}
    if extra:
        errors.append("wait_for.%s: unknown key" % sorted(extra)[0])
    return errors


def condition_met(info, wait_for):
    """Whether ``admission_info`` output ``info`` satisfies a valid ``wait_for`` condition."""
    if wait_for.get("all_finished"):
        workloads = info["workloads"]
        return (len(workloads) >= wait_for.get("workloads_at_least", 0)
                and all(w["state"] == "finished" for w in workloads))
    queue = info["queues"].get(wait_for["queue"])
    if queue is None:
        return False
    counts = {
        "reserved_at_least": queue["reserved"],
        "admitted_at_least": queue["admitted_or_finished_workloads"],
        "pending_at_least": queue["pending_workloads"],
        "running_at_least": queue["pods_running"],
        "started_at_least": queue["pods_running"] + queue["pods_succeeded"],
    }
    return all(counts[key] >= wait_for[key] for key in WAIT_KEYS if key in wait_for)


def sample(info, seconds, wall_time):
    """One point of a timeline: ``{"t": seconds since the wait began, "ts": wall_time (Unix seconds),
    "queues": {name: {reserved, borrowed, workloads_reserved, pending, admitted, running, terminating, started}}}``
    (workloads_reserved: the devices of the listed Workloads that hold the queue's quota; running and
    terminating: devices held by the queue's Running pods, started: those of its Running and Succeeded pods, when
    pods were read), and ``"outside_kueue"`` when ``info`` has it (``attribution.outside_kueue``: the pods on the
    nodes that hold devices no admitted Workload accounts for)."""
    point = {
        "t": round(seconds, 3),
        "ts": round(wall_time, 3),
        "queues": {
            name: {"reserved": q["reserved"], "borrowed": q["borrowed"], "workloads_reserved": q.get("workloads_reserved", 0),
                   "pending": q["pending_workloads"], "admitted": q["admitted_workloads"],
                   "running": q["pods_running"], "terminating": q["pods_terminating"],
                   "started": q["pods_running"] + q["pods_succeeded"]}
            for name, q in sorted(info["queues"].items())
        },
    }
    if "outside_kueue" in info:
        point["outside_kueue"] = info["outside_kueue"]
    return point
