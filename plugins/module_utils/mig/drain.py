# -*- coding: utf-8 -*-
# Copyright: fairgpu maintainers
# Apache License 2.0 (see LICENSE)
"""Draining GPU nodes before the MIG manager re-partitions them: ``mig_layout``'s ``drain``. Pure logic, no cluster
access: the caller passes the Node and Pod objects (API dicts) it read, and cordons, evicts and waits itself.

Why a drain: NVIDIA's MIG manager changes a node's layout as soon as its ``nvidia.com/mig.config`` label changes. It
stops the GPU Operator's own GPU clients (mig-parted v0.13.1 ``pkg/mig/reconfigure/reconfigure.go``, ``Run``) and
nobody else's: it leaves it to whoever sets the label to cordon the node and let the GPU work go first, the sequence
its maintainers recommend - cordon, wait for the GPU jobs, label, wait for the MIG manager, uncordon
(NVIDIA/gpu-operator#262). A tenant's pod left on the GPUs either makes the apply fail (the GPU is in use) or loses
the MIG device it ran on.

Which pods must leave a node (``holders``): those bound to it (``spec.nodeName``) that hold accelerator devices -
whole GPUs, shared GPUs, MIG devices, each by Kubernetes' pod request rule (``attribution.accelerators``, the same
rule the GPU pod attribution and Kueue use) - except, as ``kubectl drain`` does (k8s.io/kubectl v0.36.3
``pkg/drain/filters.go``: ``daemonSetFilter``, ``mirrorPodFilter``, and ``unreplicatedFilter``'s pass for finished
pods):

- a Succeeded or Failed pod, which the scheduler no longer counts on the node (``attribution.HOLDING_SELECTOR``) and
  which should not block a drain (kubernetes/kubernetes#26080);
- a DaemonSet's pod: its controller would recreate it at once, on a cordoned node too, because DaemonSet pods
  tolerate ``node.kubernetes.io/unschedulable`` (kubernetes/kubernetes#20232). On a GPU node those are the GPU
  Operator's own pods (device plugin, GFD, DCGM), which the MIG manager stops and restarts itself;
- a static pod's mirror (annotation ``kubernetes.io/config.mirror``): the API server cannot remove it, its kubelet
  runs it from a file.

A pod already terminating (``metadata.deletionTimestamp``) is not evicted again but is still waited for: it holds its
devices until its object is gone (the scheduler's view, ``attribution``'s docstring), and a pod stuck terminating is
named when the time runs out (kubernetes/kubernetes#85577 is ``kubectl drain``'s answer to the same hang).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import time

from ansible_collections.fairgpu.tenancy.plugins.module_utils.common.names import MIG_CONFIG_LABEL, MIG_STATE_LABEL
from ansible_collections.fairgpu.tenancy.plugins.module_utils.common.names import MIG_DRAIN_ANNOTATION
from ansible_collections.fairgpu.tenancy.plugins.module_utils.kueue.attribution import accelerators

TERMINAL_PHASES = ("Succeeded", "Failed")
# The Event fairgpu writes on each pod it evicts.
EVENT_REASON = "FairgpuMigDrain"
EVENT_COMPONENT = "fairgpu"


def pod_key(pod):
    """``namespace/name`` of a pod."""
    metadata = pod.get("metadata") or {}
    return "%s/%s" % (metadata.get("namespace"), metadata.get("name"))


MIRROR_ANNOTATION = "kubernetes.io/config.mirror"


def _not_drained(pod):
    """A DaemonSet's pod or a static pod's mirror (the module's docstring)."""
    metadata = pod.get("metadata") or {}
    return MIRROR_ANNOTATION in (metadata.get("annotations") or {}) or any(
        o.get("kind") == "DaemonSet" and o.get("controller") for o in metadata.get("ownerReferences") or [])


def devices(pod):
    """``{resource: devices}`` of the accelerator devices ``pod`` holds (``attribution.accelerators``)."""
    return accelerators((pod.get("spec") or {}))


def holders(pods, node_names):
    """The pods that must leave the nodes ``node_names`` before their layout changes (the module's docstring), sorted
    by node then ``namespace/name``."""
    names = set(node_names)
    found = [pod for pod in pods
             if (pod.get("spec") or {}).get("nodeName") in names
             and (pod.get("status") or {}).get("phase") not in TERMINAL_PHASES
             and not _not_drained(pod) and devices(pod)]
    return sorted(found, key=lambda pod: (pod["spec"]["nodeName"], pod_key(pod)))


def evictable(pods):
    """Those of ``pods`` to evict: every one not already terminating."""
    return [pod for pod in pods if not (pod.get("metadata") or {}).get("deletionTimestamp")]


def _labels(node):
    return (node.get("metadata") or {}).get("labels") or {}


def _annotations(node):
    return (node.get("metadata") or {}).get("annotations") or {}


def to_change(nodes, config):
    """Names of the ``nodes`` whose ``nvidia.com/mig.config`` label is not ``config``, sorted: the only ones drained."""
    return sorted(n["metadata"]["name"] for n in nodes if _labels(n).get(MIG_CONFIG_LABEL) != config)


def batches(nodes, config, batch_size):
    """The nodes to change (``to_change``) in batches of ``batch_size`` (>= 1) names, in name order: a list of
    lists. A batch is drained, relabelled and waited for before the next one is cordoned."""
    names = to_change(nodes, config)
    return [names[i:i + batch_size] for i in range(0, len(names), batch_size)]


def plan(nodes, pods, config):
    """What a run would drain (check mode's RV ``drain``): ``[{"node": name, "pods": ["namespace/name", ...]}]``, one
    entry per node to change, in name order, with the pods it would evict or wait for."""
    return [{"node": name, "pods": [pod_key(p) for p in holders(pods, [name])]} for name in to_change(nodes, config)]


def plan_lines(drain_plan):
    """``plan``'s entries as lines for the task's warnings, so that ``--check`` shows them."""
    return ["check mode: would cordon and drain node %s before relabelling it (%s)"
            % (entry["node"], ("evicting " + ", ".join(entry["pods"])) if entry["pods"] else "no pod holds its GPUs")
            for entry in drain_plan]


def cordoned_by_fairgpu(node):
    """Whether fairgpu cordoned ``node`` for a drain (annotation ``fairgpu.io/mig-drain-cordoned``)."""
    return MIG_DRAIN_ANNOTATION in _annotations(node)


def unschedulable(node):
    return bool((node.get("spec") or {}).get("unschedulable"))


def cordon_patch(config):
    """The merge patch that cordons a node (``spec.unschedulable``, as ``kubectl cordon``) and records that fairgpu
    did it, for ``config``."""
    return {"spec": {"unschedulable": True}, "metadata": {"annotations": {MIG_DRAIN_ANNOTATION: config}}}


def uncordon_patch():
    """The merge patch that undoes ``cordon_patch`` (RFC 7386: null removes a field)."""
    return {"spec": {"unschedulable": None}, "metadata": {"annotations": {MIG_DRAIN_ANNOTATION: None}}}


def repairs(nodes, config):
    """Names of the nodes an earlier run cordoned and left cordoned after their label changed to ``config`` and the
    MIG manager answered ``success`` (the run was interrupted before it uncordoned them): to uncordon at once. A node
    fairgpu cordoned whose label is not yet ``config`` is not listed: it is drained again with its batch."""
    return sorted(n["metadata"]["name"] for n in nodes
                  if cordoned_by_fairgpu(n) and _labels(n).get(MIG_CONFIG_LABEL) == config
                  and _labels(n).get(MIG_STATE_LABEL) == "success")


def eviction(pod):
    """The policy/v1 Eviction of ``pod``, the body of a POST to its ``eviction`` subresource. The API server checks
    the PodDisruptionBudgets (429 while one forbids it), sets the pod's ``DisruptionTarget`` condition (reason
    ``EvictionByEvictionAPI``) and deletes it (kubernetes v1.36 ``pkg/registry/core/pod/storage/eviction.go``,
    ``addConditionAndDeletePod``; KEP-3329, GA in v1.31)."""
    metadata = pod["metadata"]
    return {"apiVersion": "policy/v1", "kind": "Eviction",
            "metadata": {"name": metadata["name"], "namespace": metadata["namespace"]}}


def _timestamp(wall):
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(wall))


def event(pod, node, config, wall):
    """The core/v1 Event fairgpu writes in the pod's namespace when it has evicted ``pod`` from ``node`` to apply
    ``config``, at Unix time ``wall``. Named as client-go's recorder names its Events, ``<pod>.<nanoseconds in
    hex>`` (k8s.io/client-go v0.36.3 ``tools/record/event.go`` ``makeEvent``, through ``tools/record/util``
    ``GenerateEventName``), so it can be created without generateName."""
    metadata = pod["metadata"]
    return {"apiVersion": "v1", "kind": "Event",
            "metadata": {"name": "%s.%x" % (metadata["name"], int(wall * 1e9)), "namespace": metadata["namespace"]},
            "involvedObject": {"apiVersion": "v1", "kind": "Pod", "name": metadata["name"],
                               "namespace": metadata["namespace"], "uid": metadata.get("uid")},
            "reason": EVENT_REASON, "type": "Warning",
            "message": "evicted from node %s: fairgpu re-partitions its GPUs with MIG config %r" % (node, config),
            "source": {"component": EVENT_COMPONENT}, "reportingComponent": EVENT_COMPONENT,
            "firstTimestamp": _timestamp(wall), "lastTimestamp": _timestamp(wall), "count": 1}


def holding_line(pod, refused=None):
    """One pod still holding devices: ``namespace/name on node N: resource=count, phase P``, with ``terminating`` and
    the API server's last refusal of its eviction (``refused``, such as a PodDisruptionBudget's) when there are."""
    held = ", ".join("%s=%d" % item for item in sorted(devices(pod).items()))
    phase = (pod.get("status") or {}).get("phase")
    line = "%s on node %s: %s, phase %s" % (pod_key(pod), pod["spec"]["nodeName"], held, phase)
    if (pod.get("metadata") or {}).get("deletionTimestamp"):
        line += ", terminating"
    if refused:
        line += "; eviction refused: " + refused
    return line


def timeout_message(pods, node_names, config, seconds, refused=None):
    """Why a batch's drain failed: the ``pods`` (``holders``) still on ``node_names`` after ``seconds``, each named
    with its devices and phase, and the last refusal of its eviction from ``refused`` (``{"namespace/name":
    message}``). A PodDisruptionBudget's 429 is retried until then, not shown as it comes: ``kubectl drain`` retrying
    it silently left users with a drain that hung without saying why (kubernetes/kubectl#172)."""
    refused = refused or {}
    return ("the drain of node(s) %s for MIG config %r did not finish within %d s (mig_config_drain_timeout): %d "
            "pod(s) still hold devices on them:\n%s"
            % (", ".join(node_names), config, seconds, len(pods),
               "\n".join(holding_line(pod, refused.get(pod_key(pod))) for pod in pods)))
