# -*- coding: utf-8 -*-
# Copyright: fairgpu maintainers
# Apache License 2.0 (see LICENSE)
"""What the embedded cluster's kubelets refuse, where kwok alone would run anything: the device manager's
admission of a pod bound to a node, and the end of a deleted pod that carries a finalizer. Pure logic, no
cluster access; ``files/lab/kubelet_sim.py`` plays it against the API server, and the cluster role's
``kwokctl.yaml.j2`` gives kwok the stages of ``kwok_stages``.

Upstream (Kubernetes v1.36.3, ``pkg/kubelet``):

- Admission. ``Kubelet.HandlePodAdditions`` (kubelet.go) admits the pods bound to the node in creation order,
  against the node's other active pods (``GetActivePods``: not terminal, or terminating with containers not yet
  stopped; kubelet_pods.go ``isPodInactive``). The admit handlers run in the order ``NewMainKubelet`` adds them
  and the first refusal wins (allocation/allocation_manager.go ``canAdmitPod``): the topology manager's handler
  (``GetAllocateResourcesPodAdmitHandler``) comes before the predicate handler (``lifecycle.NewPredicateAdmitHandler``,
  whose ``OutOf<resource>`` refusal is for node-level resources, not for those of a device plugin). It calls the
  device manager's ``Allocate`` for each init container, then each container (cm/topologymanager/scope.go
  ``admitPolicyNone``); ``devicesToAllocate`` (cm/devicemanager/manager.go) takes first the devices a finished
  init container of the same pod left (``devicesToReuse``), then free ones, and fails with
  ``requested number of devices unavailable for <resource>. Requested: <needed>, Available: <free>``.
  cm/admission/errors.go wraps that as reason ``UnexpectedAdmissionError``, message ``Allocate failed due to
  <error>, which is unexpected``, and ``Kubelet.rejectPod`` sets phase ``Failed`` with that reason and the
  message prefixed ``Pod was rejected: ``, and records a Warning Event with the reason and the bare message.
  Only the resources a device plugin registered are allocated (``isDevicePluginResource``); on a simulated node
  those are the extended resources of its allocatable (the simulated device plugin publishes them all).
- Admitted pods: the kubelet then creates the pod's sandbox and reports condition ``PodReadyToStartContainers``
  ``True`` (status/generate.go ``GeneratePodReadyToStartContainersCondition``) before any container starts.
  Here that condition is the admission's mark: kwok's ``pod-create`` stage, which starts the containers, waits
  for it (``kwok_stages``), so no kwok stage can run a pod that the admission has not decided on.
- Devices are held from admission until the pod is inactive: a terminal phase, or gone
  (devicemanager ``UpdateAllocatedDevices`` drops the pods that are no longer active).
- Deletion. A pod with a ``deletionTimestamp`` has its containers killed within its grace period and its
  terminal phase written from their exit codes (kubelet.go ``SyncTerminatingPod``, run by pod_workers.go;
  kubelet_pods.go ``getPhase``: a killed container exits non-zero, so ``Failed``); the status manager deletes the
  object (grace 0) only once that phase is written (status/status_manager.go ``canBeDeleted``: "Delay deletion
  of pods until the phase is terminal"), and the API server keeps it while finalizers remain. kwok v0.8.0's
  ``pod-delete`` stage handles only pods without finalizers, and no other kwok stage matches a pod that has a
  ``deletionTimestamp``, so such a pod stayed ``Running`` for good; ``TERMINATED_STAGE`` gives it the kubelet's
  end.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.fairgpu.tenancy.plugins.module_utils.common.pyyaml import require as require_yaml
from ansible_collections.fairgpu.tenancy.plugins.module_utils.common.quantity import parse_quantity

READY_TO_START = "PodReadyToStartContainers"
REFUSED_REASON = "UnexpectedAdmissionError"
TERMINAL_PHASES = ("Succeeded", "Failed")

# kwok's pod-create stage waits for the admission (a jq expression of kwok's Stage selector).
ADMITTED_EXPRESSION = {
    "key": '.status.conditions.[] | select( .type == "%s" ) | .status' % READY_TO_START,
    "operator": "In",
    "values": ["True"],
}
# A deleted pod that a finalizer keeps: its containers stop at a random time within its grace period (the
# delays of kwok's pod-delete stage), killed by SIGTERM (exit code 143, which the runtime reports as Error), and
# the pod is Failed. Its object stays until the finalizers are removed; then kwok's pod-delete deletes it.
TERMINATED_STAGE = {
    "apiVersion": "kwok.x-k8s.io/v1alpha1",
    "kind": "Stage",
    "metadata": {"name": "fairgpu-pod-terminated-with-finalizers"},
    "spec": {
        "resourceRef": {"apiGroup": "v1", "kind": "Pod"},
        "selector": {"matchExpressions": [
            {"key": ".metadata.deletionTimestamp", "operator": "Exists"},
            {"key": ".metadata.finalizers", "operator": "Exists"},
            {"key": ".status.phase", "operator": "NotIn", "values": list(TERMINAL_PHASES)},
        ]},
        "weight": 1,
        "delay": {"durationMilliseconds": 1000,
                  "jitterDurationFrom": {"expressionFrom": ".metadata.deletionTimestamp"}},
        "next": {"statusTemplate": "\n".join([
            "{{ $now := Now }}",
            "conditions:",
            "- lastTransitionTime: {{ $now | Quote }}",
            "  reason: PodFailed",
            '  status: "False"',
            "  type: Ready",
            "- lastTransitionTime: {{ $now | Quote }}",
            "  reason: PodFailed",
            '  status: "False"',
            "  type: ContainersReady",
            "containerStatuses:",
            "{{ range .spec.containers }}",
            "- image: {{ .image | Quote }}",
            "  name: {{ .name | Quote }}",
            "  ready: false",
            "  restartCount: 0",
            "  started: false",
            "  state:",
            "    terminated:",
            "      exitCode: 143",
            "      finishedAt: {{ $now | Quote }}",
            "      reason: Error",
            "{{ end }}",
            "phase: Failed",
            "",
        ])},
    },
}


def kwok_stages(text):
    """kwok's stages (``text``: the YAML documents of the pinned kwok's stage files) as the embedded cluster runs
    them: ``pod-create`` also waits for ``ADMITTED_EXPRESSION``, and ``TERMINATED_STAGE`` is added. Returns YAML
    text. Raises ValueError when there is no ``pod-create`` stage (another kwok's files)."""
    yaml = require_yaml()
    stages = [doc for doc in yaml.safe_load_all(text) if doc]
    create = [s for s in stages if s.get("kind") == "Stage" and s["metadata"]["name"] == "pod-create"]
    if len(create) != 1:
        raise ValueError("kwok's stages hold %d pod-create stages, expected one" % len(create))
    create[0]["spec"]["selector"]["matchExpressions"].append(dict(ADMITTED_EXPRESSION))

    class Dumper(yaml.SafeDumper):
        """Multi-line strings (the stages' status templates) as literal blocks, as kwok's files write them."""

    Dumper.add_representer(str, lambda dumper, value: dumper.represent_scalar(
        "tag:yaml.org,2002:str", value, style="|" if "\n" in value else None))
    return yaml.dump_all(stages + [TERMINATED_STAGE], Dumper=Dumper, default_flow_style=False, sort_keys=False,
                         width=1000)


def device_resources(allocatable):
    """The device plugin resources of a node: ``{name: devices}`` of the extended resources (a name with a ``/``
    outside ``kubernetes.io/``, v1helper ``IsExtendedResourceName``) of ``allocatable`` (the node's
    ``status.allocatable``)."""
    return dict((name, int(parse_quantity(value))) for name, value in (allocatable or {}).items()
                if "/" in name and "kubernetes.io/" not in name)


def _limits(container, resources):
    limits = (container.get("resources") or {}).get("limits") or {}
    return sorted((name, int(parse_quantity(value))) for name, value in limits.items() if name in resources)


def allocate(pod_spec, free):
    """The device manager's allocation of one pod: ``(held, refusal)``. ``free``: ``{resource: devices}`` not held
    by the node's other active pods. ``held``: ``{resource: devices}`` the pod takes (its largest init container
    or its containers, devices of finished init containers reused); ``refusal``: None, or the error of the first
    container that does not fit, as ``devicesToAllocate`` words it."""
    free, held, reusable = dict(free), {}, {}
    init = [(c, c.get("restartPolicy") != "Always") for c in pod_spec.get("initContainers") or []]
    for container, releases in init + [(c, False) for c in pod_spec.get("containers") or []]:
        for resource, wanted in _limits(container, free):
            reused = min(reusable.get(resource, 0), wanted)
            needed = wanted - reused
            if needed > free[resource]:
                return held, "requested number of devices unavailable for %s. Requested: %d, Available: %d" % (
                    resource, needed, free[resource])
            free[resource] -= needed
            held[resource] = held.get(resource, 0) + needed
            # a regular init container's devices go back to the pod's reusable set when it ends; the next
            # containers' take theirs out of it (Allocate: addContainerAllocatedResources, remove...)
            reusable[resource] = reusable.get(resource, 0) + needed if releases else reusable.get(resource, 0) - reused
    return held, None


def refusal_status(error):
    """The status patch of ``Kubelet.rejectPod`` for a device manager ``error``, and the Event's message."""
    message = "Allocate failed due to %s, which is unexpected" % error
    return {"phase": "Failed", "reason": REFUSED_REASON, "message": "Pod was rejected: " + message}, message


ADMITTED_STATUS = {"conditions": [{"type": READY_TO_START, "status": "True"}]}


def admitted(pod):
    """Whether the simulated kubelet has admitted ``pod`` (a Pod dict): the ``READY_TO_START`` condition is
    ``True``, or kwok started it already (a pod IP: a cluster created before the admission existed)."""
    status = pod.get("status") or {}
    return bool(status.get("podIP")) or any(
        c.get("type") == READY_TO_START and c.get("status") == "True" for c in status.get("conditions") or [])


class Kubelets(object):
    """The kubelets of the embedded cluster's nodes, for the device manager: which pods hold which devices.

    Feed it every version of every pod (``observe``, in the order the API server's watch gives them, which is
    the order of the writes) and every deletion (``forget``). ``observe`` returns what the node's kubelet
    does with the pod: None (nothing), or ``("admit", status_patch)``, or ``("refuse", status_patch,
    event_message)``; it counts the pod's devices as held at once, before the patch is written.
    ``allocatable``: node name -> the node's ``status.allocatable``, or None for a node that does not exist
    (no kubelet: the pod waits, as for a real node that is gone)."""

    def __init__(self, allocatable):
        self.allocatable = allocatable
        self.held = {}  # pod uid -> (node name, {resource: devices})

    def forget(self, uid):
        self.held.pop(uid, None)

    def free(self, node, allocatable):
        """``{resource: devices}`` of ``node`` no admitted active pod holds (0 when the node's devices shrank under
        running pods, as a MIG re-partition does)."""
        free = device_resources(allocatable)
        for holder, devices in self.held.values():
            if holder == node:
                for resource, count in devices.items():
                    if resource in free:
                        free[resource] -= count
        return dict((resource, max(count, 0)) for resource, count in free.items())

    def observe(self, pod):
        metadata, spec, status = pod["metadata"], pod.get("spec") or {}, pod.get("status") or {}
        uid, node = metadata["uid"], spec.get("nodeName")
        if not node or status.get("phase") in TERMINAL_PHASES:
            self.forget(uid)
            return None
        if uid in self.held:
            return None
        if admitted(pod):
            # admitted before this process knew it (a restart): its devices as the device manager counted them
            allocatable = self.allocatable(node)
            if allocatable is not None:
                unlimited = dict.fromkeys(device_resources(allocatable), float("inf"))
                self.held[uid] = (node, allocate(spec, unlimited)[0])
            return None
        if metadata.get("deletionTimestamp"):
            return None  # termination requested before admission: never admitted (HandlePodAdditions)
        allocatable = self.allocatable(node)
        if allocatable is None:
            return None
        held, error = allocate(spec, self.free(node, allocatable))
        if error:
            patch, message = refusal_status(error)
            return ("refuse", patch, message)
        self.held[uid] = (node, held)
        return ("admit", ADMITTED_STATUS)
