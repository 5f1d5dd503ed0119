"""The MIG manager's race on the integration cluster (issue 13 item 5): after test_80 left every GPU split into
two 2g.20gb devices (state success), the mig_config role relabels the nodes while the background simulated MIG
manager (files/lab/mig_manager_sim.py) plays NVIDIA mig-parted v0.13.1's sequences with a delay.

- An already-applied layout under another name goes stale success -> success with no pending: a wait that looks
  for a change of state would hang (here: time out and fail).
- A new layout goes stale success -> pending [-> rebooting] -> success, the device plugin's resources after the
  success: a wait that accepts the stale success fails the role's result check.
- A failed apply goes pending -> failed: the play fails at once, naming the node; the node keeps its layout."""

import json
import threading
import time

import pytest
from kubernetes import watch

from conftest import playbook

STATE, CONFIG = "nvidia.com/mig.config.state", "nvidia.com/mig.config"
LAYOUTS = {"copy-of-default": [{"devices": "all", "mig-enabled": True, "mig-devices": {"2g.20gb": 2}}],
           "two-3g": [{"devices": "all", "mig-enabled": True, "mig-devices": {"3g.40gb": 2}}]}
GPU_NODES = "nvidia.com/gpu.present=true"


class States:
    """Every value of the state label each GPU node takes while it runs (a watch on the nodes)."""

    def __init__(self, core):
        self.core, self.seen, self.stop = core, {}, threading.Event()
        for node in core.list_node(label_selector=GPU_NODES).items:
            self.seen[node.metadata.name] = [node.metadata.labels.get(STATE)]
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        while not self.stop.is_set():
            for event in watch.Watch().stream(self.core.list_node, label_selector=GPU_NODES, timeout_seconds=2):
                node = event["object"]
                states = self.seen.setdefault(node.metadata.name, [])
                if states[-1:] != [node.metadata.labels.get(STATE)]:
                    states.append(node.metadata.labels.get(STATE))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        time.sleep(0.5)
        self.stop.set()
        self.thread.join(5)


def partition(selected, timeout=120):
    started = time.monotonic()
    run = playbook("../tests/integration/mig_config.yml", "-e", json.dumps({
        "path": "mig", "mig_config_layouts": LAYOUTS, "mig_config_selected": selected,
        "mig_config_wait_timeout": timeout}))
    return run, time.monotonic() - started


def annotate(core, name, annotations):
    core.patch_node(name, {"metadata": {"annotations": annotations}})


@pytest.fixture(scope="module")
def gpu_nodes(core):
    names = sorted(n.metadata.name for n in core.list_node(label_selector=GPU_NODES).items)
    assert len(names) >= 2
    # Slow enough that the old state is still there when the role first reads the nodes.
    for name in names:
        annotate(core, name, {"fairgpu.io/simulated-mig-delay-seconds": "4"})
    yield names
    for name in names:
        annotate(core, name, {"fairgpu.io/simulated-mig-delay-seconds": None, "fairgpu.io/simulated-mig-reboot": None,
                              "fairgpu.io/simulated-mig-apply-fails": None})


def test_an_already_applied_layout_ends_the_wait_without_pending(core, gpu_nodes):
    node = core.read_node(gpu_nodes[0])
    assert node.metadata.labels[STATE] == "success" and node.status.allocatable["nvidia.com/mig-2g.20gb"] == "16"
    with States(core) as states:
        run, seconds = partition("copy-of-default", timeout=60)
    assert run.rc == 0, run.messages()
    assert seconds < 55
    for name in gpu_nodes:
        assert "pending" not in states.seen[name], states.seen
        assert core.read_node(name).metadata.labels[CONFIG] == "copy-of-default"


def test_the_stale_success_is_no_answer(core, gpu_nodes):
    annotate(core, gpu_nodes[1], {"fairgpu.io/simulated-mig-reboot": "true"})
    with States(core) as states:
        run, _seconds = partition("two-3g")
    assert run.rc == 0, run.messages()
    assert states.seen[gpu_nodes[0]] == ["success", "pending", "success"], states.seen
    assert states.seen[gpu_nodes[1]] == ["success", "pending", "rebooting", "success"], states.seen
    for name in gpu_nodes:
        node = core.read_node(name)
        assert node.status.allocatable.get("nvidia.com/mig-3g.40gb") == "16"
        assert "nvidia.com/mig-2g.20gb" not in node.status.allocatable
        assert node.metadata.labels["nvidia.com/mig-3g.40gb.count"] == "16"


def test_a_failed_apply_fails_the_play_and_keeps_the_layout(core, gpu_nodes):
    annotate(core, gpu_nodes[1], {"fairgpu.io/simulated-mig-reboot": None, "fairgpu.io/simulated-mig-apply-fails": "true"})
    with States(core) as states:
        run, seconds = partition("fairgpu-2x2g.20gb")
    assert run.rc != 0
    assert "node %s: the MIG manager could not apply 'fairgpu-2x2g.20gb'" % gpu_nodes[1] in run.messages()
    assert states.seen[gpu_nodes[1]] == ["success", "pending", "failed"], states.seen
    assert seconds < 100
    assert core.read_node(gpu_nodes[1]).status.allocatable.get("nvidia.com/mig-3g.40gb") == "16"
    assert core.read_node(gpu_nodes[0]).status.allocatable.get("nvidia.com/mig-2g.20gb") == "16"
