"""Module fairgpu.tenancy.mig_layout against a fake API server (the part of kubernetes.core's client the module uses:
resource, get, create, apply, patch; server-side dry run in check mode) and the lab's MIG manager, which plays
NVIDIA mig-parted's state sequences (plugins/module_utils/lab/mig_manager.py) on the fake clock's sleeps: the first
run writes the ConfigMap, labels the nodes and waits for the manager, a second changes nothing; a layout that does
not fit changes nothing; check mode changes nothing and says what it would; a manager that does not answer, or
fails on a node, fails the run naming the node; the preflight's check needs no cluster."""

import copy

import pytest
import yaml

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
                           wait_timeout=10, wait_interval=1)
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
    assert first["progress"]["ready"] == ["gpu-node-0", "gpu-node-1"] and first["elapsed"] == 1
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
    how, result = converge(api)
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
