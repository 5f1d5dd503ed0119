"""simulated_gpu_node with several nodes in one run (option names, for make bench-scale's 1,000 nodes): each node is
published as a run with name would publish it, changed is true when any node changed, and the first node that
fails names itself. A stand-in for the CoreV1Api; the module's run() with a stand-in module object."""

import pytest

from ansible_collections.fairgpu.tenancy.plugins.modules import simulated_gpu_node as module


class Done(Exception):
    def __init__(self, result):
        super().__init__(result)
        self.result = result


class FakeModule:
    def __init__(self, check_mode=False, diff=False, **params):
        self.params = dict({"name": None, "names": None, "mig_strategy": "single"}, **params)
        self.check_mode, self._diff = check_mode, diff

    def exit_json(self, **result):
        raise Done(result)

    def fail_json(self, **result):
        raise Done(dict(result, failed=True))


class Answer:
    def __init__(self, node):
        self.node = node

    def to_dict(self):
        return self.node


class FakeApi:
    def __init__(self, nodes):
        self.nodes = nodes
        self.patches = []

    def read_node(self, name):
        if name not in self.nodes:
            raise module.ApiException(status=404, reason="Not Found")
        return Answer(self.nodes[name])

    def patch_node(self, name, body):
        self.patches.append((name, "metadata"))
        for key in ("labels", "annotations"):
            self.nodes[name]["metadata"].setdefault(key, {}).update(body["metadata"].get(key) or {})

    def patch_node_status(self, name, body):
        self.patches.append((name, "status"))
        for key in ("capacity", "allocatable"):
            self.nodes[name]["status"].setdefault(key, {}).update(body["status"].get(key) or {})


def node(name, gpus="8"):
    return {"metadata": {"name": name, "labels": {}, "annotations": {
        "fairgpu.io/simulated-gpu-product": "NVIDIA-H100-80GB-HBM3", "fairgpu.io/simulated-gpu-count": gpus}},
        "status": {"capacity": {"cpu": "96"}, "allocatable": {"cpu": "96"}}}


def run(mod, api):
    with pytest.raises(Done) as done:
        module.run(mod, api)
    return done.value.result


def test_names_publish_every_node_in_one_run():
    api = FakeApi({"gpu-node-0": node("gpu-node-0"), "gpu-node-1": node("gpu-node-1", "4")})
    result = run(FakeModule(names=["gpu-node-0", "gpu-node-1"]), api)
    assert result["changed"] and [n["node"] for n in result["nodes"]] == ["gpu-node-0", "gpu-node-1"]
    assert [n["resources"]["nvidia.com/gpu"] for n in result["nodes"]] == [8, 4]
    assert "diff" not in result and all("diff" not in n for n in result["nodes"])
    assert api.nodes["gpu-node-1"]["status"]["allocatable"]["nvidia.com/gpu"] == "4"
    # A second run changes nothing, as with name.
    again = run(FakeModule(names=["gpu-node-0", "gpu-node-1"]), api)
    assert not again["changed"] and not any(n["changed"] for n in again["nodes"])


def test_name_returns_what_it_returned_before():
    api = FakeApi({"gpu-node-0": node("gpu-node-0")})
    result = run(FakeModule(name="gpu-node-0", diff=True), api)
    assert result["changed"] and result["node"] == "gpu-node-0" and "nodes" not in result
    assert set(result["diff"]) == {"before", "after"}


def test_names_in_check_mode_patch_nothing_and_diff_per_node():
    api = FakeApi({"gpu-node-0": node("gpu-node-0"), "gpu-node-1": node("gpu-node-1")})
    result = run(FakeModule(names=["gpu-node-0", "gpu-node-1"], check_mode=True, diff=True), api)
    assert result["changed"] and api.patches == []
    assert set(result["diff"]["before"]) == set(result["diff"]["after"]) == {"gpu-node-0", "gpu-node-1"}


def test_the_first_failing_node_names_itself():
    api = FakeApi({"gpu-node-0": node("gpu-node-0")})
    result = run(FakeModule(names=["gpu-node-0", "gpu-node-9"]), api)
    assert result["failed"] and result["node"] == "gpu-node-9" and "gpu-node-9" in result["msg"]
    assert [n["node"] for n in result["nodes"]] == ["gpu-node-0"]
