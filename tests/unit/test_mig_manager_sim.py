"""The background simulated MIG manager (files/lab/mig_manager_sim.py) against a stand-in API server: it acts on the
label at start and on each change only, one request at a time per node, and plays the steps of
plugins/module_utils/lab/mig_manager.py through patches."""

import copy
import importlib.util
import os
import time
import types

import yaml

from ansible_collections.fairgpu.tenancy.plugins.module_utils.mig import nodes as mig_nodes

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SPEC = importlib.util.spec_from_file_location("mig_manager_sim", os.path.join(ROOT, "files", "lab", "mig_manager_sim.py"))
SIM = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(SIM)
STATE, CONFIG = "nvidia.com/mig.config.state", "nvidia.com/mig.config"


def merge(target, patch):
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        elif isinstance(value, dict):
            merge(target.setdefault(key, {}), value)
        else:
            target[key] = value


class FakeApi(object):
    def __init__(self, nodes, document):
        self.nodes = dict((n["metadata"]["name"], n) for n in nodes)
        self.document = document
        self.states = dict((name, []) for name in self.nodes)

    def list_node(self):
        def obj(node):
            meta = types.SimpleNamespace(name=node["metadata"]["name"], labels=dict(node["metadata"]["labels"]),
                                         annotations=dict(node["metadata"]["annotations"]))
            return types.SimpleNamespace(metadata=meta)
        return types.SimpleNamespace(items=[obj(n) for n in self.nodes.values()])

    def read_node(self, name):
        return copy.deepcopy(self.nodes[name])

    def patch_node(self, name, body):
        merge(self.nodes[name], body)
        if STATE in (body["metadata"].get("labels") or {}):
            self.states[name].append(body["metadata"]["labels"][STATE])

    def patch_node_status(self, name, body):
        merge(self.nodes[name], body)

    def read_namespaced_config_map(self, name, namespace):
        return types.SimpleNamespace(data={"config.yaml": yaml.safe_dump(self.document)})


def gpu_node(name):
    return {"metadata": {"name": name, "labels": {},
                         "annotations": {"fairgpu.io/simulated-gpu-product": "NVIDIA-H100-80GB-HBM3",
                                         "fairgpu.io/simulated-gpu-count": "2"}},
            "status": {"capacity": {"nvidia.com/gpu": "2"}, "allocatable": {"nvidia.com/gpu": "2"}}}


def wait_for(predicate, seconds=5):
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_the_background_manager_plays_each_request_once():
    api = FakeApi([gpu_node("gpu-node-0"), gpu_node("cpu-node")], mig_nodes.config_document())
    del api.nodes["cpu-node"]["metadata"]["annotations"]["fairgpu.io/simulated-gpu-product"]
    manager = SIM.SimulatedMigManager(api, "gpu-operator", "cm", "mixed", 0.01)
    manager.serialize = lambda obj: obj
    try:
        manager.poll()  # no label yet: nothing to do
        api.nodes["gpu-node-0"]["metadata"]["labels"][CONFIG] = "fairgpu-2x2g.20gb"
        manager.poll()
        wait_for(lambda: api.nodes["gpu-node-0"]["status"]["allocatable"].get("nvidia.com/mig-2g.20gb") == "4")
        assert api.states["gpu-node-0"] == ["pending", "success"]
        manager.poll()  # the label did not change: the manager does nothing (mig-parted main.go)
        api.nodes["gpu-node-0"]["metadata"]["labels"][CONFIG] = "all-disabled"
        manager.poll()
        wait_for(lambda: api.states["gpu-node-0"][-1:] == ["success"] and len(api.states["gpu-node-0"]) == 4)
        assert api.states["gpu-node-0"] == ["pending", "success", "pending", "success"]
        api.nodes["gpu-node-0"]["metadata"]["labels"][CONFIG] = "nope"
        manager.poll()
        wait_for(lambda: len(api.states["gpu-node-0"]) == 5)
        assert api.states["gpu-node-0"][-1] == "failed"
        assert "cpu-node" not in manager.workers and api.states["cpu-node"] == []
    finally:
        manager.stop.set()
