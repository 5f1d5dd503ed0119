"""Issue 13 item 5: the mig_config role's wait (plugins/module_utils/mig/wait.py) against every sequence of the MIG
manager's state label (NVIDIA/mig-parted v0.13.1 pkg/mig/reconfigure/reconfigure.go Run), played step by step by
the simulated MIG manager's script (plugins/module_utils/simulated/mig_manager.py)."""

import copy
import json

import pytest

from ansible_collections.fairgpu.tenancy.plugins.module_utils.mig import nodes as mig_nodes
from ansible_collections.fairgpu.tenancy.plugins.module_utils.mig import wait as mig_wait
from ansible_collections.fairgpu.tenancy.plugins.module_utils.simulated import mig_manager
from ansible_collections.fairgpu.tenancy.plugins.module_utils.simulated import node as simulated_node

H100 = "NVIDIA-H100-80GB-HBM3"
DEFAULT = "fairgpu-2x2g.20gb"
DOC = mig_nodes.config_document(layouts={
    "two-3g": [{"devices": "all", "mig-enabled": True, "mig-devices": {"3g.40gb": 2}}],
    "copy-of-default": [{"devices": "all", "mig-enabled": True, "mig-devices": {"2g.20gb": 2}}],
})
STATE, CONFIG = "nvidia.com/mig.config.state", "nvidia.com/mig.config"


def play(node, steps):
    """Apply one step to a Node dict as the background process does through the API server."""
    kind, arg = steps
    node = copy.deepcopy(node)
    if kind == "state":
        node["metadata"]["labels"][STATE] = arg
    elif kind == "publish":
        for key, value in arg["labels"].items():
            if value is None:
                node["metadata"]["labels"].pop(key, None)
            else:
                node["metadata"]["labels"][key] = value
        node["metadata"]["annotations"].update(arg["annotations"])
        for field, changes in arg["status"].items():
            for key, value in changes.items():
                if value is None:
                    node["status"][field].pop(key, None)
                else:
                    node["status"][field][key] = value
    return node


def partitioned(config=DEFAULT, annotations=None):
    """A 2-GPU simulated node on which ``config`` was applied (state success), as after an earlier run."""
    node = {"metadata": {"name": "gpu-node-0", "labels": {},
                         "annotations": {"fairgpu.io/simulated-gpu-product": H100, "fairgpu.io/simulated-gpu-count": "2"}},
            "status": {"capacity": {"nvidia.com/gpu": "2"}, "allocatable": {"nvidia.com/gpu": "2"}}}
    node["metadata"]["labels"][CONFIG] = config
    _sequence, steps, _errors = mig_manager.reconfigure(node, DOC, "mixed", 0)
    for step in steps:
        node = play(node, step)
    assert node["metadata"]["labels"][STATE] == "success"
    node["metadata"]["annotations"].update(annotations or {})
    return node


def relabel(node, config):
    node = copy.deepcopy(node)
    node["metadata"]["labels"][CONFIG] = config
    return node


def run(before, config):
    """Label the node, then after every step of the manager ask the wait. Returns (sequence, [(status, message)])
    with the answer right after the label changed first."""
    node = relabel(before, config)
    sequence, steps, _errors = mig_manager.reconfigure(node, DOC, "mixed", 3)
    answers = [mig_wait.node_progress(DOC, config, node, "mixed", before)]
    for step in steps:
        node = play(node, step)
        answers.append(mig_wait.node_progress(DOC, config, node, "mixed", before))
    return sequence, answers


def test_stale_success_then_pending_then_success_is_waited_out():
    sequence, answers = run(partitioned(), "two-3g")
    assert sequence == "pending-success"
    statuses = [status for status, _message in answers]
    # The stale success (old layout) while the manager checks, pending, the fresh success before the device plugin
    # republished: all waiting; ready only at the end.
    assert statuses[:-1] == ["waiting"] * (len(statuses) - 1) and statuses[-1] == "ready"
    assert "state is the previous config's" in answers[0][1]
    assert "advertises nvidia.com/mig-3g.40gb None, expected 4" in answers[0][1]


def test_already_applied_ends_at_once():
    # Same layout under another name: stale success, then success without pending (reconfigure.go: already applied).
    sequence, answers = run(partitioned(), "copy-of-default")
    assert sequence == "stale-success"
    assert [status for status, _message in answers] == ["ready", "ready", "ready"]
    # The same label again (a second site.yml run): the manager does nothing at all; the wait ends at once.
    node = partitioned()
    assert mig_wait.node_progress(DOC, DEFAULT, node, "mixed", node)[0] == "ready"


def test_stale_then_failed_without_pending():
    sequence, answers = run(partitioned(), "not-in-the-file")
    assert sequence == "stale-failed"
    assert [status for status, _message in answers] == ["waiting", "waiting", "failed"]
    assert "could not apply 'not-in-the-file'" in answers[-1][1] and "keeps its previous layout" in answers[-1][1]


def test_pending_then_failed_keeps_the_old_layout():
    before = partitioned(annotations={mig_manager.APPLY_FAILS_ANNOTATION: "true"})
    sequence, answers = run(before, "two-3g")
    assert sequence == "pending-failed"
    assert [status for status, _message in answers][-1] == "failed"
    assert all(status == "waiting" for status, _message in answers[:-1])


def test_rebooting_is_waited_out():
    before = partitioned(annotations={mig_manager.REBOOT_ANNOTATION: "true"})
    sequence, answers = run(before, "two-3g")
    assert sequence == "pending-rebooting-success"
    assert any("is rebooting" in message for _status, message in answers)
    assert [status for status, _message in answers][-1] == "ready"


def test_a_stale_failed_of_another_config_is_no_answer():
    failed = relabel(partitioned(), "not-in-the-file")
    for step in mig_manager.reconfigure(failed, DOC, "mixed", 0)[1]:
        failed = play(failed, step)
    assert failed["metadata"]["labels"][STATE] == "failed"
    sequence, answers = run(failed, "two-3g")
    assert sequence == "pending-success"
    assert answers[0][0] == "waiting" and "the state of the previous config 'not-in-the-file'" in answers[0][1]
    assert answers[-1][0] == "ready"
    # Asked again for the config that failed, the label does not change: the failure is the answer.
    assert mig_wait.node_progress(DOC, "not-in-the-file", failed, "mixed", failed)[0] == "failed"


def test_success_with_the_old_resources_never_ends_the_wait():
    # NVIDIA/gpu-operator#1607: state success, the node still advertises the previous profile.
    node = relabel(partitioned(), "two-3g")
    status, message = mig_wait.node_progress(DOC, "two-3g", node, "mixed", None)
    assert status == "waiting" and "nvidia.com/mig-2g.20gb 4, expected" not in message
    assert "advertises nvidia.com/mig-3g.40gb None, expected 4" in message


@pytest.mark.parametrize("state, words", [
    ("pending", "the manager may have aborted"),  # NVIDIA/mig-parted#485: stuck at pending
    (None, "has not yet answered (is it running on the node?)"),
    ("rebooting", "needs a reboot"),
])
def test_timeout_message_says_where_each_node_stands(state, words):
    node = relabel(partitioned(), "two-3g")
    if state is None:
        del node["metadata"]["labels"][STATE]
    else:
        node["metadata"]["labels"][STATE] = state
    other = relabel(partitioned(), "two-3g")
    other["metadata"]["name"] = "gpu-node-1"
    result = mig_wait.progress([node, other], DOC, "two-3g", "mixed")
    assert not result["done"] and result["ready"] == [] and result["failed"] == []
    message = mig_wait.timeout_message(result, 600, "two-3g")
    assert message.startswith("the MIG manager did not finish 'two-3g' within 600 s on 2 node(s)")
    assert "node gpu-node-0: nvidia.com/mig.config.state is" in message and words in message
    assert "node gpu-node-1: nvidia.com/mig.config.state is success but" in message


def test_label_not_yet_set_and_mixed_outcomes():
    node = partitioned()
    assert mig_wait.node_progress(DOC, "two-3g", node, "mixed", node)[1] == (
        "node gpu-node-0: nvidia.com/mig.config is 'fairgpu-2x2g.20gb', not yet 'two-3g'")
    ready = partitioned()
    failed = relabel(partitioned(), DEFAULT)
    failed["metadata"]["name"] = "gpu-node-1"
    failed["metadata"]["labels"][STATE] = "failed"
    result = mig_wait.progress([failed, ready], DOC, DEFAULT, "mixed", [ready, failed])
    assert result["done"] and result["ready"] == ["gpu-node-0"] and len(result["failed"]) == 1


def test_the_manager_publishes_what_the_device_plugin_and_gfd_would():
    node = partitioned(config="two-3g")
    assert node["status"]["allocatable"]["nvidia.com/mig-3g.40gb"] == "4"
    assert node["metadata"]["labels"]["nvidia.com/mig-3g.40gb.count"] == "4"
    assert json.loads(node["metadata"]["annotations"][simulated_node.LAYOUT_ANNOTATION]) == [{"3g.40gb": 2}] * 2
    assert mig_manager.node_delay({"metadata": {"annotations": {mig_manager.DELAY_ANNOTATION: "0.5"}}}, 2) == 0.5
    assert mig_manager.node_delay({"metadata": {"annotations": {mig_manager.DELAY_ANNOTATION: "x"}}}, 2) == 2
    assert mig_manager.reconfigure(node, None, "mixed", 1)[0] == "stale-failed"
