"""Module fairgpu.tenancy.mig_layout against a fake API server (the part of kubernetes.core's client the module uses:
resource, get, create, apply, patch; server-side dry run in check mode) and the lab's MIG manager, which plays
NVIDIA mig-parted's state sequences (plugins/module_utils/lab/mig_manager.py) on the fake clock's sleeps: the first
run writes the ConfigMap, labels the nodes and waits for the manager, a second changes nothing; a layout that does
not fit changes nothing; check mode changes nothing and says what it would; a manager that does not answer, or
fails on a node, fails the run naming the node; the preflight's check needs no cluster."""

import copy
import json

import pytest
import yaml
from kubernetes.dynamic.exceptions import TooManyRequestsError

from ansible_collections.fairgpu.tenancy.plugins.modules import mig_layout
from ansible_collections.fairgpu.tenancy.plugins.module_utils.common.waiter import Waiter
from ansible_collections.fairgpu.tenancy.plugins.module_utils.lab import mig_manager
from ansible_collections.fairgpu.tenancy.plugins.module_utils.mig import nodes as mig_nodes

import fake_api
from fake_clock import FakeClock

H100 = "NVIDIA-H100-80GB-HBM3"
DEFAULT = "fairgpu-2x2g.20gb"
DOC = mig_nodes.config_document(layouts={"too-big": [{"devices": "all", "mig-enabled": True,
                                                      "mig-devices": {"3g.40gb": 2, "1g.10gb": 2}}]})
CONFIG, STATE = "nvidia.com/mig.config", "nvidia.com/mig.config.state"
CONFIGMAP = {"name": "fairgpu-mig-parted-config", "namespace": "gpu-operator"}


class Ended(Exception):
    pass


def gpu_node(name, annotations=None):
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"nvidia.com/gpu.present": "true"},
                         "annotations": dict({"fairgpu.io/simulated-gpu-product": H100,
                                              "fairgpu.io/simulated-gpu-count": "2"}, **(annotations or {}))},
            "status": {"capacity": {"nvidia.com/gpu": "2"}, "allocatable": {"nvidia.com/gpu": "2"}}}


class FakeApi(fake_api.FakeApi):
    """The fake API server with the MIG manager, which acts on each label change when it runs."""

    def __init__(self, nodes, manager=True):
        super(FakeApi, self).__init__(nodes)
        self.manager, self.seen = manager, {}

    def play_manager(self, _now):
        """What the MIG manager does between two reads: act on each node whose label changed (all steps at once)."""
        if not self.manager:
            return
        configmap = self.objects.get(("ConfigMap", CONFIGMAP["namespace"], CONFIGMAP["name"]))
        document = yaml.safe_load(configmap["data"]["config.yaml"]) if configmap else None
        for key, node in list(self.objects.items()):
            value = node["metadata"]["labels"].get(CONFIG) if key[0] == "Node" else None
            if value is None or self.seen.get(key) == value:
                continue
            self.seen[key] = value
            _sequence, steps, _errors = mig_manager.reconfigure(node, document, "mixed", 0)
            for kind, arg in steps:
                node = copy.deepcopy(node)
                if kind == "state":
                    node["metadata"]["labels"][STATE] = arg
                elif kind == "publish":
                    for field, changes in [("labels", arg["labels"]), ("annotations", arg["annotations"])]:
                        for k, v in changes.items():
                            node["metadata"].setdefault(field, {})
                            if v is None:
                                node["metadata"][field].pop(k, None)
                            else:
                                node["metadata"][field][k] = v
                    for field, changes in arg["status"].items():
                        for k, v in changes.items():
                            if v is None:
                                node["status"][field].pop(k, None)
                            else:
                                node["status"][field][k] = v
            self.objects[key] = node


class Module(object):
    def __init__(self, check_mode=False, diff=False, **params):
        self.params = dict(state="present", document=DOC, config=DEFAULT, strategy="mixed",
                           node_selector="nvidia.com/gpu.present=true", nodes=None, smi={}, configmap=CONFIGMAP,
                           wait_timeout=10, wait_interval=1, drain=True, drain_batch_size=1, drain_timeout=30)
        self.params.update(params)
        self.check_mode, self._diff, self.warnings = check_mode, diff, []

    def fail_json(self, **result):
        raise Ended("fail", result)

    def warn(self, message):
        self.warnings.append(message)


def converge(api, **params):
    clock = FakeClock()
    clock.on_sleep = api.play_manager
    api.dry_run = params.get("check_mode", False)
    module = Module(**params)
    try:
        return "exit", mig_layout.converge(module, api, Waiter(clock.monotonic, clock.sleep, clock.time))
    except Ended as ended:
        return ended.args


def test_the_first_run_partitions_every_node_and_a_second_changes_nothing():
    api = FakeApi([gpu_node("gpu-node-0"), gpu_node("gpu-node-1")])
    how, first = converge(api)
    assert how == "exit", first
    assert first["changed_objects"] == ["Namespace/gpu-operator", "ConfigMap/gpu-operator/fairgpu-mig-parted-config",
                                        "Node/gpu-node-0", "Node/gpu-node-1"]
    assert first["progress"]["ready"] == ["gpu-node-0", "gpu-node-1"] and first["elapsed"] == 2, "1 s per node"
    assert [n["status"]["allocatable"].get("nvidia.com/mig-2g.20gb") for n in first["nodes"]] == ["4", "4"]
    assert [n["metadata"]["labels"].get(STATE) for n in first["nodes_before"]] == [None, None]
    writes = len(api.writes)
    how, second = converge(api)
    assert how == "exit" and not second["changed"] and second["changed_objects"] == [] and second["elapsed"] == 0
    assert len(api.writes) == writes + 1, "only the ConfigMap's apply, which stores the same object"


def test_a_layout_that_does_not_fit_changes_nothing():
    api = FakeApi([gpu_node("gpu-node-0")])
    how, result = converge(api, config="too-big")
    assert how == "fail" and api.writes == []
    assert result["msg"].startswith("node gpu-node-0 (2 x %s): " % H100) and "too-big" in result["msg"]


def test_check_mode_changes_nothing_lists_what_it_would_and_does_not_wait():
    api = FakeApi([gpu_node("gpu-node-0")], manager=False)
    how, result = converge(api, check_mode=True, diff=True)
    assert how == "exit" and result["changed"] and api.writes == [] and result["progress"] == {}
    assert result["changed_objects"] == ["Namespace/gpu-operator", "ConfigMap/gpu-operator/fairgpu-mig-parted-config",
                                         "Node/gpu-node-0"]


def test_a_manager_that_does_not_answer_fails_naming_each_node():
    api = FakeApi([gpu_node("gpu-node-0"), gpu_node("gpu-node-1")], manager=False)
    how, result = converge(api, drain=False)
    assert how == "fail" and result["changed"]
    assert result["msg"].startswith("the MIG manager did not finish 'fairgpu-2x2g.20gb' within 10 s on 2 node(s) "
                                    "(mig_config_wait_timeout):\nnode gpu-node-0: nvidia.com/mig.config.state is None")


def test_a_node_the_manager_fails_on_fails_the_run_naming_it():
    api = FakeApi([gpu_node("gpu-node-0"), gpu_node("gpu-node-1", {"fairgpu.io/simulated-mig-apply-fails": "true"})])
    how, result = converge(api)
    assert how == "fail" and result["progress"]["ready"] == ["gpu-node-0"]
    assert result["msg"].startswith("node gpu-node-1: the MIG manager could not apply 'fairgpu-2x2g.20gb'")


def test_the_preflights_check_needs_no_cluster_and_returns_the_warnings():
    def no_cluster():
        raise AssertionError("state checked with nodes reads no cluster")
    module = Module(state="checked", nodes=[gpu_node("gpu-node-0")])
    result = mig_layout.checked(module, no_cluster)
    assert not result["changed"] and result["warnings"] == [
        "not selected (nvidia.com/mig.config=fairgpu-2x2g.20gb), so not applied; on node gpu-node-0 it would fail: "
        "mig-configs.too-big[0].mig-devices: the instances need 8 compute slices but one %s GPU has 7" % H100]
    with pytest.raises(Ended) as ended:
        mig_layout.checked(Module(state="checked", nodes=[gpu_node("gpu-node-0")], config="too-big"), no_cluster)
    assert "too-big" in ended.value.args[1]["msg"]


def test_rendered_builds_the_configmap_and_needs_its_name_and_namespace():
    (made,) = [mig_layout.configmap(Module(state="rendered"))]
    assert made["metadata"] == {"name": CONFIGMAP["name"], "namespace": CONFIGMAP["namespace"],
                                "labels": {"app.kubernetes.io/managed-by": "fairgpu"}}
    assert yaml.safe_load(made["data"]["config.yaml"]) == DOC
    with pytest.raises(Ended) as ended:
        mig_layout.configmap(Module(state="rendered", configmap=None))
    assert ended.value.args[1]["msg"].startswith("configmap: {name, namespace} of the MIG manager's ConfigMap is "
                                                 "required with state rendered")


# --- the drain (issue 27, scenario 6): one batch at a time, cordon, evict, relabel, wait, uncordon --------------

DRAINED = "fairgpu.io/mig-drain-cordoned"
PDB_REFUSAL = "Cannot evict pod as it would violate the pod's disruption budget."


def refused():
    return TooManyRequestsError(type("E", (), {"status": 429, "reason": "TooManyRequests", "headers": {},
                                               "body": json.dumps({"kind": "Status", "message": PDB_REFUSAL})})())


def mig_pod(name, node, phase="Running", owner="Job", namespace="team-a", annotations=None):
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "uid": "uid-" + name,
                         "annotations": dict(annotations or {}),
                         "ownerReferences": [{"kind": owner, "name": name + "-owner", "controller": True}]},
            "spec": {"nodeName": node, "containers": [{"name": "c", "resources": {
                "requests": {"nvidia.com/mig-2g.20gb": "1"}, "limits": {"nvidia.com/mig-2g.20gb": "1"}}}]},
            "status": {"phase": phase}}


class DrainApi(FakeApi):
    """The fake API server with a MIG manager, pods, a kubelet that removes each evicted pod at the next sleep
    (unless annotated ``test/stuck``), PodDisruptionBudgets that refuse a pod's first evictions (``pdb``: pod name
    to the number of refusals, -1 for always), and ``log``: what the module did, in order."""

    def __init__(self, nodes, pods=(), pdb=None, manager=True):
        namespaces = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}}]
        super(DrainApi, self).__init__(list(nodes) + list(pods) + namespaces, manager)
        self.pdb, self.log, self.attempts = dict(pdb or {}), [], 0

    def patch(self, resource, definition, name=None, **params):
        spec, annotations = definition.get("spec") or {}, definition["metadata"].get("annotations") or {}
        if "unschedulable" in spec:
            self.log.append(("cordon" if spec["unschedulable"] else "uncordon", name))
            assert (annotations[DRAINED] is not None) == bool(spec["unschedulable"])
        if CONFIG in (definition["metadata"].get("labels") or {}):
            self.log.append(("label", name))
        return super(DrainApi, self).patch(resource, definition, name=name, **params)

    def evict(self, name, namespace, params):
        self.attempts += 1
        if self.pdb.get(name):
            self.pdb[name] -= 1
            raise refused()
        self.log.append(("evict", name))
        return super(DrainApi, self).evict(name, namespace, params)

    def create(self, resource, definition, namespace=None, **params):
        if definition.get("kind") == "Event":
            self.log.append(("event", definition["involvedObject"]["name"]))
        return super(DrainApi, self).create(resource, definition, namespace=namespace, **params)

    def play(self, now):
        for key, obj in list(self.objects.items()):
            if key[0] == "Pod" and obj["metadata"].get("deletionTimestamp") \
                    and "test/stuck" not in obj["metadata"]["annotations"]:
                del self.objects[key]
        self.play_manager(now)

    def node(self, name):
        return self.objects[("Node", None, name)]


def drain_converge(api, **params):
    clock = FakeClock()
    clock.on_sleep = api.play
    api.dry_run = params.get("check_mode", False)
    try:
        return "exit", mig_layout.converge(Module(**params), api, Waiter(clock.monotonic, clock.sleep, clock.time))
    except Ended as ended:
        return ended.args


def two_nodes_with_work(**node_annotations):
    nodes = [gpu_node("gpu-node-0"), gpu_node("gpu-node-1", node_annotations or None)]
    pods = [mig_pod("train-0", "gpu-node-0"), mig_pod("train-1", "gpu-node-1"),
            mig_pod("done-0", "gpu-node-0", phase="Succeeded"),
            mig_pod("device-plugin-0", "gpu-node-0", owner="DaemonSet", namespace="gpu-operator")]
    return nodes, pods


def test_a_batch_of_one_drains_relabels_and_uncordons_each_node_before_the_next():
    nodes, pods = two_nodes_with_work()
    api = DrainApi(nodes, pods)
    how, result = drain_converge(api)
    assert how == "exit", result
    assert api.log == [("cordon", "gpu-node-0"), ("evict", "train-0"), ("event", "train-0"), ("label", "gpu-node-0"),
                       ("uncordon", "gpu-node-0"),
                       ("cordon", "gpu-node-1"), ("evict", "train-1"), ("event", "train-1"), ("label", "gpu-node-1"),
                       ("uncordon", "gpu-node-1")], "the finished pod and the DaemonSet's are not evicted"
    assert result["drain"] == [{"node": "gpu-node-0", "pods": ["team-a/train-0"]},
                               {"node": "gpu-node-1", "pods": ["team-a/train-1"]}]
    assert [(d["node"], d["pods"]) for d in result["drained"]] == [("gpu-node-0", ["team-a/train-0"]),
                                                                   ("gpu-node-1", ["team-a/train-1"])]
    assert result["progress"]["ready"] == ["gpu-node-0", "gpu-node-1"]
    for name in ("gpu-node-0", "gpu-node-1"):
        node = api.node(name)
        assert not node.get("spec", {}).get("unschedulable") and DRAINED not in node["metadata"]["annotations"]
    (event,) = [o for k, o in api.objects.items() if k[0] == "Event" and o["involvedObject"]["name"] == "train-0"]
    assert event["reason"] == "FairgpuMigDrain" and event["involvedObject"]["uid"] == "uid-train-0"
    assert "gpu-node-0" in event["message"] and DEFAULT in event["message"]
    assert event["source"] == {"component": "fairgpu"}


def test_a_batch_of_two_cordons_both_before_it_evicts_and_leaves_the_third_running():
    nodes = [gpu_node("gpu-node-%d" % i) for i in range(3)]
    pods = [mig_pod("train-%d" % i, "gpu-node-%d" % i) for i in range(3)]
    api = DrainApi(nodes, pods)
    how, result = drain_converge(api, drain_batch_size=2)
    assert how == "exit", result
    assert api.log[:9] == [("cordon", "gpu-node-0"), ("cordon", "gpu-node-1"), ("evict", "train-0"),
                           ("event", "train-0"), ("evict", "train-1"), ("event", "train-1"),
                           ("label", "gpu-node-0"), ("label", "gpu-node-1"), ("uncordon", "gpu-node-0")]
    assert api.log[9:] == [("uncordon", "gpu-node-1"), ("cordon", "gpu-node-2"), ("evict", "train-2"),
                           ("event", "train-2"), ("label", "gpu-node-2"), ("uncordon", "gpu-node-2")]


def test_a_node_another_party_cordoned_is_drained_and_stays_cordoned():
    nodes, pods = two_nodes_with_work()
    nodes[0]["spec"] = {"unschedulable": True}
    api = DrainApi(nodes, pods)
    how, result = drain_converge(api)
    assert how == "exit", result
    assert api.log[:3] == [("evict", "train-0"), ("event", "train-0"), ("label", "gpu-node-0")]
    assert ("uncordon", "gpu-node-0") not in api.log and ("cordon", "gpu-node-0") not in api.log
    assert api.node("gpu-node-0")["spec"]["unschedulable"] is True
    assert api.log[3:] == [("cordon", "gpu-node-1"), ("evict", "train-1"), ("event", "train-1"),
                           ("label", "gpu-node-1"), ("uncordon", "gpu-node-1")]


def test_an_interrupted_run_is_repaired_first_and_a_node_not_yet_relabelled_is_drained_again():
    api = DrainApi([gpu_node("gpu-node-0"), gpu_node("gpu-node-1")])
    how, result = drain_converge(api)
    assert how == "exit"
    # Interrupted: node 0 after its relabel (cordoned, success), node 1 after its cordon (another config still).
    for name, config in [("gpu-node-0", DEFAULT), ("gpu-node-1", "copy-of-default")]:
        api.node(name)["spec"] = {"unschedulable": True}
        api.node(name)["metadata"]["annotations"][DRAINED] = DEFAULT
        api.node(name)["metadata"]["labels"][CONFIG] = config
    api.seen[("Node", None, "gpu-node-1")] = "copy-of-default"
    api.objects[("Pod", "team-a", "late-1")] = mig_pod("late-1", "gpu-node-1")
    api.log = []
    how, result = drain_converge(api)
    assert how == "exit", result
    assert api.log == [("uncordon", "gpu-node-0"), ("evict", "late-1"), ("event", "late-1"), ("label", "gpu-node-1"),
                       ("uncordon", "gpu-node-1")], "node 1 keeps fairgpu's cordon: no second cordon"
    assert result["drain"] == [{"node": "gpu-node-1", "pods": ["team-a/late-1"]}]
    for name in ("gpu-node-0", "gpu-node-1"):
        assert not api.node(name)["spec"].get("unschedulable") and DRAINED not in api.node(name)["metadata"]["annotations"]


def test_a_pod_that_does_not_go_fails_the_drain_naming_it_and_the_node_is_uncordoned_unlabelled():
    nodes, pods = two_nodes_with_work()
    pods[0]["metadata"]["annotations"]["test/stuck"] = "true"
    api = DrainApi(nodes, pods)
    how, result = drain_converge(api, drain_timeout=5)
    assert how == "fail"
    assert result["msg"] == (
        "the drain of node(s) gpu-node-0 for MIG config 'fairgpu-2x2g.20gb' did not finish within 5 s "
        "(mig_config_drain_timeout): 1 pod(s) still hold devices on them:\n"
        "team-a/train-0 on node gpu-node-0: nvidia.com/mig-2g.20gb=1, phase Running, terminating\n"
        "The node(s) keep their layout and were uncordoned.")
    assert api.log == [("cordon", "gpu-node-0"), ("evict", "train-0"), ("event", "train-0"),
                       ("uncordon", "gpu-node-0")], "evicted once, never relabelled, node 1 untouched"
    assert CONFIG not in api.node("gpu-node-0")["metadata"]["labels"]


def test_an_eviction_a_disruption_budget_refuses_is_retried_and_named_when_the_time_runs_out():
    nodes, pods = two_nodes_with_work()
    api = DrainApi(nodes, pods, pdb={"train-0": 2})
    how, result = drain_converge(api)
    assert how == "exit", result
    assert api.log[:3] == [("cordon", "gpu-node-0"), ("evict", "train-0"), ("event", "train-0")]
    assert api.attempts == 4, "train-0 refused twice, then evicted; train-1 at once"
    assert result["drained"][0]["seconds"] == 3, "one attempt per wait_interval"

    nodes, pods = two_nodes_with_work()
    api = DrainApi(nodes, pods, pdb={"train-0": -1})
    how, result = drain_converge(api, drain_timeout=4)
    assert how == "fail" and api.log == [("cordon", "gpu-node-0"), ("uncordon", "gpu-node-0")]
    assert ("team-a/train-0 on node gpu-node-0: nvidia.com/mig-2g.20gb=1, phase Running; eviction refused: "
            + PDB_REFUSAL) in result["msg"]
    assert not any(k[0] == "Event" for k in api.objects), "no Event for a pod not evicted"


def test_check_mode_drains_nothing_and_lists_the_nodes_and_pods_it_would():
    nodes, pods = two_nodes_with_work()
    api = DrainApi(nodes, pods, manager=False)
    how, result = drain_converge(api, check_mode=True)
    assert how == "exit" and api.writes == [] and api.log == [("label", "gpu-node-0"), ("label", "gpu-node-1")]
    assert result["drain"] == [{"node": "gpu-node-0", "pods": ["team-a/train-0"]},
                               {"node": "gpu-node-1", "pods": ["team-a/train-1"]}]
    assert result["drained"] == [] and result["changed"]
    assert result["warnings"][-2:] == [
        "check mode: would cordon and drain node gpu-node-0 before relabelling it (evicting team-a/train-0)",
        "check mode: would cordon and drain node gpu-node-1 before relabelling it (evicting team-a/train-1)"]
    assert all(not api.node(n).get("spec") for n in ("gpu-node-0", "gpu-node-1"))


def test_a_run_with_nothing_to_change_drains_nothing():
    nodes, pods = two_nodes_with_work()
    api = DrainApi(nodes, pods[2:])
    assert drain_converge(api)[0] == "exit"
    api.objects.update((("Pod", "team-a", p["metadata"]["name"]), p) for p in pods[:2])
    api.log = []
    how, result = drain_converge(api)
    assert how == "exit" and not result["changed"] and api.log == []
    assert result["drain"] == [] and result["drained"] == []


def test_a_node_the_manager_fails_on_is_uncordoned_and_the_run_fails_saying_so():
    nodes, pods = two_nodes_with_work(**{"fairgpu.io/simulated-mig-apply-fails": "true"})
    api = DrainApi(nodes, pods)
    how, result = drain_converge(api)
    assert how == "fail" and result["progress"]["ready"] == ["gpu-node-0"]
    assert result["msg"] == ("node gpu-node-1: the MIG manager could not apply 'fairgpu-2x2g.20gb' "
                             "(nvidia.com/mig.config.state=failed); the node keeps its previous layout; the "
                             "nvidia-mig-manager pod's log on that node says why\nThe batch's node(s) gpu-node-1 were "
                             "uncordoned; a node the MIG manager failed on keeps its previous layout.")
    assert api.log[-1] == ("uncordon", "gpu-node-1")
    assert not api.node("gpu-node-1")["spec"].get("unschedulable")


def test_a_batch_size_below_one_is_refused_before_anything_changes():
    api = DrainApi([gpu_node("gpu-node-0")])
    how, result = drain_converge(api, drain_batch_size=0)
    assert how == "fail" and api.writes == [] and "drain_batch_size must be at least 1" in result["msg"]
