"""The simulated kubelets (plugins/module_utils/lab/kubelet.py, files/lab/kubelet_sim.py): the device
manager's admission in creation order, with its reason and message; devices held until the pod is terminal or
gone; and kwok's stages as the embedded cluster gets them."""

import copy
import importlib.util
import json
import os
import types

import pytest
import yaml

from ansible_collections.fairgpu.tenancy.plugins.module_utils.lab import kubelet

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SPEC = importlib.util.spec_from_file_location("kubelet_sim", os.path.join(ROOT, "files", "lab", "kubelet_sim.py"))
SIM = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(SIM)
GPU = "nvidia.com/gpu"
NODES = {"gpu-node-0": {"cpu": "96", "memory": "1Ti", "pods": "110", GPU: "8"},
         "cpu-node-0": {"cpu": "32", "memory": "128Gi", "pods": "110"}}
MESSAGE = ("Pod was rejected: Allocate failed due to requested number of devices unavailable for nvidia.com/gpu. "
           "Requested: %d, Available: %d, which is unexpected")


def container(name, gpus=0, **extra):
    limits = {GPU: str(gpus)} if gpus else {}
    return dict({"name": name, "image": "busybox", "resources": {"limits": limits}}, **extra)


def pod(name, gpus=1, node="gpu-node-0", containers=None, init=None, status=None, deleted=False):
    spec = {"nodeName": node, "containers": containers or [container("main", gpus)]}
    if init:
        spec["initContainers"] = init
    metadata = {"name": name, "namespace": "default", "uid": "uid-" + name, "creationTimestamp": "2026-01-01T00:00:00Z"}
    if deleted:
        metadata["deletionTimestamp"] = "2026-01-01T00:01:00Z"
    return {"metadata": metadata, "spec": spec, "status": dict({"phase": "Pending"}, **(status or {}))}


def kubelets():
    return kubelet.Kubelets(NODES.get)


def test_nine_pods_on_eight_gpus_the_ninth_refused_as_the_device_manager_does():
    lets = kubelets()
    decisions = [lets.observe(pod("p%d" % i)) for i in range(9)]
    assert [d[0] for d in decisions] == ["admit"] * 8 + ["refuse"]
    assert decisions[0][1] == {"conditions": [{"type": "PodReadyToStartContainers", "status": "True"}]}
    assert decisions[8][1] == {"phase": "Failed", "reason": "UnexpectedAdmissionError", "message": MESSAGE % (1, 0)}
    # the Event carries the message without rejectPod's prefix
    assert decisions[8][2] == MESSAGE[len("Pod was rejected: "):] % (1, 0)


def test_requested_is_what_the_container_still_needs_and_available_what_is_free():
    lets = kubelets()
    assert lets.observe(pod("a", gpus=5))[0] == "admit"
    assert lets.observe(pod("b", gpus=4))[1]["message"] == MESSAGE % (4, 3)
    assert lets.observe(pod("c", gpus=3))[0] == "admit"


def test_devices_come_back_when_the_pod_is_terminal_or_gone_not_when_it_is_only_terminating():
    lets = kubelets()
    pods = [pod("p%d" % i, gpus=4) for i in range(2)]
    for p in pods:
        assert lets.observe(p)[0] == "admit"
    terminating = copy.deepcopy(pods[0])
    terminating["metadata"]["deletionTimestamp"] = "2026-01-01T00:01:00Z"
    terminating["status"]["phase"] = "Running"
    assert lets.observe(terminating) is None
    assert lets.observe(pod("late", gpus=1))[0] == "refuse"
    failed = dict(terminating, status={"phase": "Failed"})
    assert lets.observe(failed) is None
    assert lets.observe(pod("next", gpus=4))[0] == "admit"
    lets.forget(pods[1]["metadata"]["uid"])
    assert lets.observe(pod("after-delete", gpus=4))[0] == "admit"


def test_a_pod_seen_again_is_decided_once():
    lets = kubelets()
    first = pod("a", gpus=8)
    assert lets.observe(first)[0] == "admit"
    echo = pod("a", gpus=8, status={"conditions": [{"type": "PodReadyToStartContainers", "status": "True"}]})
    assert lets.observe(echo) is None and lets.observe(first) is None


def test_after_a_restart_admitted_pods_hold_their_devices():
    lets = kubelets()
    running = pod("old", gpus=8, status={"phase": "Running", "podIP": "127.200.0.5"})
    assert lets.observe(running) is None
    assert lets.observe(pod("new"))[1]["message"] == MESSAGE % (1, 0)


def test_init_containers_lend_their_devices_to_the_next_containers_and_sidecars_keep_theirs():
    # init 6 then main 2: main reuses 2 of the init container's 6; the pod holds 6
    held, error = kubelet.allocate(pod("a", containers=[container("main", 2)], init=[container("init", 6)])["spec"],
                                   {GPU: 8})
    assert (held, error) == ({GPU: 6}, None)
    # a sidecar (restartPolicy Always) keeps its 2, the init container after it takes 6 more: 8
    spec = pod("b", containers=[container("main", 1)],
               init=[container("side", 2, restartPolicy="Always"), container("init", 6)])["spec"]
    assert kubelet.allocate(spec, {GPU: 8}) == ({GPU: 8}, None)
    assert kubelet.allocate(spec, {GPU: 7})[1] == (
        "requested number of devices unavailable for nvidia.com/gpu. Requested: 6, Available: 5")


@pytest.mark.parametrize("case", ["no devices", "cpu node", "resource the node lacks", "unbound", "no node",
                                  "deleted before admission", "already failed"])
def test_what_the_device_manager_does_not_refuse(case):
    lets = kubelets()
    lets.observe(pod("full", gpus=8))
    candidate = {
        "no devices": pod("x", gpus=0),
        "cpu node": pod("x", gpus=0, node="cpu-node-0"),
        # not a device plugin resource of the node: skipped by Allocate, removed by the predicate handler
        "resource the node lacks": pod("x", containers=[
            dict(container("main"), resources={"limits": {"example.com/fpga": "1"}})]),
        "unbound": pod("x", node=None),
        "no node": pod("x", node="gone"),
        "deleted before admission": pod("x", deleted=True),
        "already failed": pod("x", status={"phase": "Failed"}),
    }[case]
    decision = lets.observe(candidate)
    if case in ("no devices", "cpu node", "resource the node lacks"):
        assert decision[0] == "admit"
    else:
        assert decision is None


def test_a_node_that_lost_devices_under_running_pods_has_none_free():
    lets = kubelet.Kubelets({"gpu-node-0": {GPU: "8"}}.get)
    lets.observe(pod("a", gpus=8))
    lets.allocatable = {"gpu-node-0": {GPU: "4"}}.get
    assert lets.observe(pod("b"))[1]["message"] == MESSAGE % (1, 0)


KWOK_STAGES = """apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: pod-create
spec:
  resourceRef: {apiGroup: v1, kind: Pod}
  selector:
    matchExpressions:
    - key: '.metadata.deletionTimestamp'
      operator: 'DoesNotExist'
  next:
    statusTemplate: |
      {{ $now := Now }}
      phase: Pending
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: pod-delete
spec:
  resourceRef: {apiGroup: v1, kind: Pod}
  selector:
    matchExpressions:
    - key: '.metadata.finalizers'
      operator: 'DoesNotExist'
  next:
    delete: true
"""


def test_kwok_pod_create_waits_for_the_admission_and_the_finalized_pod_stage_is_added():
    stages = list(yaml.safe_load_all(kubelet.kwok_stages(KWOK_STAGES)))
    assert [s["metadata"]["name"] for s in stages] == ["pod-create", "pod-delete",
                                                       "fairgpu-pod-terminated-with-finalizers"]
    original = list(yaml.safe_load_all(KWOK_STAGES))
    assert stages[0]["spec"]["selector"]["matchExpressions"] == (
        original[0]["spec"]["selector"]["matchExpressions"] + [kubelet.ADMITTED_EXPRESSION])
    assert stages[0]["spec"]["next"] == original[0]["spec"]["next"] and stages[1] == original[1]
    terminated = stages[2]["spec"]
    assert {"key": ".metadata.finalizers", "operator": "Exists"} in terminated["selector"]["matchExpressions"]
    assert "delete" not in terminated["next"] and "phase: Failed" in terminated["next"]["statusTemplate"]
    assert "exitCode: 143" in terminated["next"]["statusTemplate"]


def test_kwok_stages_of_another_kwok_are_refused():
    with pytest.raises(ValueError, match="0 pod-create"):
        kubelet.kwok_stages(KWOK_STAGES.split("---")[1])


class FakeApi(object):
    """The API calls kubelet_sim.py makes, on dicts."""

    def __init__(self, pods):
        self.pods = dict((p["metadata"]["uid"], p) for p in pods)
        self.patches, self.events = [], []

    def read_node(self, name):
        if name not in NODES:
            raise SIM.ApiException(status=404, reason="Not Found")
        return types.SimpleNamespace(status=types.SimpleNamespace(allocatable=dict(NODES[name])))

    def list_pod_for_all_namespaces(self, _preload_content=True):
        body = {"metadata": {"resourceVersion": "7"}, "items": list(self.pods.values())}
        return types.SimpleNamespace(data=json.dumps(body).encode())

    def patch_namespaced_pod_status(self, name, namespace, body):
        self.patches.append((name, body["status"]))

    def create_namespaced_event(self, namespace, body):
        self.events.append(body)


def test_the_process_lists_admitted_pods_first_and_decides_the_others_in_creation_order():
    old = pod("old", gpus=4, status={"phase": "Running", "podIP": "127.200.0.9"})
    old["metadata"]["creationTimestamp"] = "2026-01-01T00:00:09Z"
    second = pod("second", gpus=4)
    second["metadata"]["creationTimestamp"] = "2026-01-01T00:00:02Z"
    first = pod("first", gpus=4)
    first["metadata"]["creationTimestamp"] = "2026-01-01T00:00:01Z"
    api = FakeApi([second, old, first])
    sim = SIM.SimulatedKubelets(api)
    assert sim.resync() == "7"
    assert [(name, status.get("phase")) for name, status in api.patches] == [("first", None), ("second", "Failed")]
    event, = api.events
    assert event["reason"] == "UnexpectedAdmissionError" and event["type"] == "Warning"
    assert event["involvedObject"] == {"apiVersion": "v1", "kind": "Pod", "name": "second", "namespace": "default",
                                       "uid": "uid-second"}
    assert event["source"] == {"component": "kubelet", "host": "gpu-node-0"}
    assert event["message"] == MESSAGE[len("Pod was rejected: "):] % (4, 0)
