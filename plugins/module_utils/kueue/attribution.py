# -*- coding: utf-8 -*-
# Copyright: fairgpu maintainers
# Apache License 2.0 (see LICENSE)
"""Every pod that holds accelerator devices on the nodes, whoever owns it, and those no admitted Kueue Workload
accounts for ("outside Kueue").

Kueue's reservations only cover what Kueue admitted. A tenant that deletes its admitted Jobs with
``--cascade=orphan`` leaves their pods running with no owner while Kueue releases the quota at once; a pod kept
by a finalizer, a pod in a namespace that is no tenant's, a pod bound by ``spec.nodeName`` all hold devices that
the scheduler counts and Kueue does not, and Kueue hands those devices to other tenants whose pods then wait.
``outside_kueue`` names such pods, one read at a time; ``scenarios.gpu_pods_check`` judges a timeline of them.

What "holds devices" means here is the scheduler's view, not the kubelet's: kube-scheduler counts every pod
bound to a node (``spec.nodeName`` set) that is not Succeeded or Failed, Terminating ones included, until its
object is gone (kubernetes v1.36.3 ``pkg/scheduler/scheduler.go`` ``newPodInformer``: field selector
``status.phase!=Succeeded,status.phase!=Failed``; ``pkg/scheduler/eventhandlers.go`` ``assignedPod``: a pod with
a node name is added to the cache, ``deletePod`` removes it). A real kubelet frees the devices once the containers
stopped, but until the object is gone no other pod is scheduled onto them, so that is what another tenant waits
for. ``HOLDING_SELECTOR`` reads exactly those pods, in one cluster-wide list.

Pure logic apart from ``read``, which takes a kubernetes dynamic client.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.fairgpu.tenancy.plugins.module_utils.common.names import KUEUE_API
from ansible_collections.fairgpu.tenancy.plugins.module_utils.common.quantity import parse_quantity
from ansible_collections.fairgpu.tenancy.plugins.module_utils.kueue.status import conditions, pod_requests, workload_state
from ansible_collections.fairgpu.tenancy.plugins.module_utils.replay import fairness
from ansible_collections.fairgpu.tenancy.plugins.module_utils.tenants.spec import is_accelerator_resource

# The pods kube-scheduler counts on their nodes (above), as one field selector the API server evaluates (kubernetes
# v1.36.3 pkg/registry/core/pod/strategy.go, ToSelectableFields: spec.nodeName and status.phase are selectable).
HOLDING_SELECTOR = "spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed"


def accelerators(pod_spec):
    """``{resource: devices > 0}`` of the accelerator resources (``tenants.spec.is_accelerator_resource``: whole and
    shared GPUs, MIG devices) a pod asks for, each by Kubernetes' pod request rule (``status.pod_requests``)."""
    names = set((pod_spec.get("overhead") or {}))
    for container in (pod_spec.get("containers") or []) + (pod_spec.get("initContainers") or []):
        resources = container.get("resources") or {}
        names.update(resources.get("requests") or {}, resources.get("limits") or {})
    held = {name: pod_requests(pod_spec, name) for name in sorted(names) if is_accelerator_resource(name)}
    return {name: count for name, count in held.items() if count > 0}


def _controller(metadata):
    return next((o for o in metadata.get("ownerReferences") or [] if o.get("controller")), None)


def _admitted_devices(workload):
    """``{resource: devices}`` Kueue admitted the Workload with: ``status.admission.podSetAssignments[].resourceUsage``,
    the total of all the pod set's pods (Kueue v0.19.2 ``apis/kueue/v1beta2/workload_types.go``, PodSetAssignment)."""
    usage = {}
    for assignment in ((workload.get("status") or {}).get("admission") or {}).get("podSetAssignments") or []:
        for name, value in (assignment.get("resourceUsage") or {}).items():
            if is_accelerator_resource(name):
                usage[name] = usage.get(name, 0) + int(parse_quantity(value))
    return usage


def _workloads_by_job(workloads):
    """``{(namespace, Job uid): Workload}``: Kueue's job reconciler makes the Job the Workload's controller owner
    (Kueue v0.19.2 ``pkg/controller/jobframework/reconciler.go``, ``ctrl.SetControllerReference``)."""
    by_job = {}
    for workload in workloads:
        metadata = workload.get("metadata") or {}
        owner = _controller(metadata)
        if owner and owner.get("kind") == "Job":
            by_job[(metadata.get("namespace"), owner.get("uid"))] = workload
    return by_job


def outside_kueue(pods, workloads, tenant_namespaces, now):
    """The pods that hold accelerator devices and that no admitted Workload accounts for.

    ``pods``: Pod objects (any namespace; those not bound, Succeeded, Failed or without accelerators are skipped,
    so the output of ``HOLDING_SELECTOR`` or any superset will do); ``workloads``: Workload objects of the pods'
    namespaces; ``tenant_namespaces``: the tenants' namespaces; ``now``: Unix time of the read.

    A pod is accounted when its controller owner is a Job whose Workload is admitted (Admitted and not Finished)
    and that Workload's admitted devices (``resourceUsage``) still cover it: the Workload's pods are taken in
    order of creation, so a pod that forges a Job owner beside that Job's real pods (or a replacement beside a
    pod that will not go) is the one left over. A pod being deleted (``deletionTimestamp``) before its deletion
    deadline is in its termination grace period: the Job controller's replacement or a preemption's quota
    release is normal Kubernetes behaviour (a tenant Job's grace is capped at 30 s by the Job policy), so such a
    pod is listed only when not accounted, with ``since`` its deadline; past its deadline (a finalizer keeps the
    object) it is outside Kueue whatever its Workload, since the deadline.

    Returns a list sorted by namespace and name of ``{"namespace", "pod", "uid", "node", "devices": {resource:
    devices}, "tenant": bool (the namespace is a tenant's), "why": text, "since": Unix time from which it counts,
    or None for "from the first read that lists it"}``.
    """
    tenant_namespaces = set(tenant_namespaces)
    by_job = _workloads_by_job(workloads)
    budget = {key: _admitted_devices(w) for key, w in by_job.items() if workload_state(conditions(w)) == "admitted"}
    holding = []
    for pod in pods:
        metadata, spec = pod.get("metadata") or {}, pod.get("spec") or {}
        devices = accelerators(spec)
        if devices and spec.get("nodeName") and (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed"):
            deadline = metadata.get("deletionTimestamp")
            holding.append((deadline is not None, metadata.get("creationTimestamp") or "", metadata.get("name") or "",
                            pod, devices, fairness._time(deadline) if deadline else None))
    outside = []
    for _terminating, _created, name, pod, devices, deadline in sorted(holding, key=lambda h: h[:3]):
        metadata = pod["metadata"]
        namespace = metadata.get("namespace")
        why = _unaccounted(metadata, devices, by_job, budget)
        if deadline is not None and deadline <= now:
            finalizers = ", ".join(metadata.get("finalizers") or []) or "none"
            why = "Terminating past its grace period (deletion deadline %s, finalizers: %s)%s" % (
                metadata["deletionTimestamp"], finalizers, "; " + why if why else "")
        elif why and deadline is not None:
            why = "being deleted, within its grace period until %s; %s" % (metadata["deletionTimestamp"], why)
        if why:
            if namespace not in tenant_namespaces:
                why = "namespace %s is no tenant's; %s" % (namespace, why)
            outside.append({"namespace": namespace, "pod": name, "uid": metadata.get("uid"),
                            "node": pod["spec"]["nodeName"], "devices": devices, "tenant": namespace in tenant_namespaces,
                            "why": why, "since": deadline})
    return sorted(outside, key=lambda o: (o["namespace"], o["pod"]))


def _unaccounted(metadata, devices, by_job, budget):
    """Why no admitted Workload accounts for a pod's ``devices`` ("" when one does; its devices are then taken
    from that Workload's ``budget``)."""
    owner = _controller(metadata)
    if owner is None:
        return "no owner"
    if owner.get("kind") != "Job":
        return "its controller is %s %s, not a Job" % (owner.get("kind"), owner.get("name"))
    key = (metadata.get("namespace"), owner.get("uid"))
    workload = by_job.get(key)
    if workload is None:
        return "its Job %s has no Workload" % owner.get("name")
    if key not in budget:
        return "Workload %s of Job %s is %s, not admitted" % (
            workload["metadata"]["name"], owner.get("name"), workload_state(conditions(workload)))
    left = budget[key]
    short = sorted(name for name, count in devices.items() if left.get(name, 0) < count)
    if short:
        return "Workload %s of Job %s accounts for %s; its other pods hold those" % (
            workload["metadata"]["name"], owner.get("name"),
            ", ".join("%d %s" % (_admitted_devices(workload).get(name, 0), name) for name in short))
    for name, count in devices.items():
        left[name] -= count
    return ""


def read(client, workloads=None):
    """Read what ``outside_kueue`` needs: ``(pods, workloads)``. ``client``: a kubernetes dynamic client allowed to
    list Pods cluster-wide and Workloads in the pods' namespaces; ``workloads``: ``{namespace: [Workload]}``
    already read (those namespaces are not read again).

    One request for the pods, whatever the number of GPU nodes: a cluster-wide list with ``HOLDING_SELECTOR``,
    the set kube-scheduler keeps in memory (every live bound pod; those without accelerators are dropped here),
    rather than one list per GPU node (``spec.nodeName=<node>``), whose requests grow with the nodes. Then one
    Workload list per namespace holding accelerator pods that was not given (usually none: the tenants')."""
    pods = client.get(client.resource("Pod", "v1"), field_selector=HOLDING_SELECTOR).to_dict()["items"]
    pods = [p for p in pods if accelerators(p.get("spec") or {})]
    known = dict(workloads or {})
    resource = client.resource("Workload", KUEUE_API)
    for namespace in sorted({p["metadata"]["namespace"] for p in pods} - set(known)):
        known[namespace] = client.get(resource, namespace=namespace).to_dict()["items"]
    return pods, [w for items in known.values() for w in items]
