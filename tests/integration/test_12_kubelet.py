"""The simulated kubelets refuse what a real kubelet refuses (plugins/module_utils/lab/kubelet.py): pods
bound by nodeName past the node's free GPUs are Failed by the device manager's admission, and a deleted pod that
a finalizer keeps stops, is Failed and frees its GPU while its object stays. As an admin, in a namespace that is
no tenant's (tenant namespaces refuse bare pods)."""

import uuid

import pytest
from kubernetes import client as k8s

from conftest import wait_until

NAMESPACE = "fairgpu-it-kubelet"
FINALIZER = "example.com/keep"
MESSAGE = ("Pod was rejected: Allocate failed due to requested number of devices unavailable for nvidia.com/gpu. "
           "Requested: 1, Available: 0, which is unexpected")


def bound_pod(name, node, finalizers=None):
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "finalizers": finalizers or []},
            "spec": {"nodeName": node, "restartPolicy": "Never", "terminationGracePeriodSeconds": 1,
                     "containers": [{"name": "c", "image": "busybox",
                                     "resources": {"requests": {"cpu": "10m", "nvidia.com/gpu": "1"},
                                                   "limits": {"nvidia.com/gpu": "1"}}}]}}


@pytest.fixture
def namespace(core):
    core.create_namespace({"metadata": {"name": NAMESPACE}})
    yield NAMESPACE
    for pod in core.list_namespaced_pod(NAMESPACE).items:
        if pod.metadata.finalizers:
            core.patch_namespaced_pod(pod.metadata.name, NAMESPACE, {"metadata": {"finalizers": None}})
    core.delete_namespace(NAMESPACE)


def idle_gpu_node(core):
    """An 8-GPU node on which no pod that is not terminal requests a GPU."""
    busy = set(p.spec.node_name for p in core.list_pod_for_all_namespaces().items
               if p.status.phase not in ("Succeeded", "Failed") and any(
                   "nvidia.com/gpu" in ((c.resources and c.resources.limits) or {}) for c in p.spec.containers))
    nodes = [n.metadata.name for n in core.list_node(label_selector="nvidia.com/gpu.present=true").items
             if n.status.allocatable.get("nvidia.com/gpu") == "8" and n.metadata.name not in busy]
    return sorted(nodes)[0] if nodes else None


def failed(core, name):
    pod = core.read_namespaced_pod(name, NAMESPACE)
    return pod if pod.status.phase == "Failed" else None


def phases(core, names):
    return dict((p.metadata.name, p.status.phase) for p in core.list_namespaced_pod(NAMESPACE).items
                if p.metadata.name in names)


def test_device_admission_and_a_deleted_pod_kept_by_a_finalizer(core, namespace):
    node = wait_until(lambda: idle_gpu_node(core), 60, what="a GPU node without GPU pods")
    suffix = uuid.uuid4().hex[:6]
    kept, extra, after = "kept-" + suffix, "ninth-" + suffix, "after-" + suffix
    first = ["pod%d-%s" % (i, suffix) for i in range(7)] + [kept]
    for name in first:
        core.create_namespaced_pod(namespace, bound_pod(name, node, [FINALIZER] if name == kept else None))
    wait_until(lambda: list(phases(core, first).values()).count("Running") == 8, 40,
               what="8 pods bound to %s to run" % node)

    # (a) the ninth GPU pod on the 8-GPU node: the kubelet's device manager refuses it
    core.create_namespaced_pod(namespace, bound_pod(extra, node))
    refused = wait_until(lambda: failed(core, extra), 20, what="the ninth pod to be refused")
    assert (refused.status.reason, refused.status.message) == ("UnexpectedAdmissionError", MESSAGE)
    assert refused.status.pod_ip is None and not refused.status.container_statuses
    events = core.list_namespaced_event(namespace, field_selector="involvedObject.name=" + extra).items
    assert [(e.type, e.reason, e.source.component, e.source.host) for e in events] == [
        ("Warning", "UnexpectedAdmissionError", "kubelet", node)]
    assert sorted(phases(core, first + [extra]).values()) == ["Failed"] + ["Running"] * 8

    # (b) deleted, kept by its finalizer: its containers stop, it is Failed, the object stays, its GPU is free
    core.delete_namespaced_pod(kept, namespace)
    stopped = wait_until(lambda: failed(core, kept), 20, what="the deleted pod to stop")
    assert stopped.metadata.deletion_timestamp is not None and stopped.metadata.finalizers == [FINALIZER]
    state = stopped.status.container_statuses[0].state.terminated
    assert (state.exit_code, state.reason) == (143, "Error")
    core.create_namespaced_pod(namespace, bound_pod(after, node))
    wait_until(lambda: phases(core, [after]).get(after) == "Running", 20, what="a new pod on the freed GPU to run")
    assert core.read_namespaced_pod(kept, namespace).metadata.deletion_timestamp is not None

    # the finalizer removed: kwok's pod-delete stage deletes the object
    core.patch_namespaced_pod(kept, namespace, {"metadata": {"finalizers": None}})

    def gone():
        try:
            core.read_namespaced_pod(kept, namespace)
        except k8s.exceptions.ApiException as exc:
            return exc.status == 404
        return False

    wait_until(gone, 20, what="the pod without its finalizer to be deleted")
