"""Issue 13 item 5: the mig_config role's wait (plugins/module_utils/mig/wait.py) against every sequence of the MIG
manager's state label (NVIDIA/mig-parted v0.13.1 pkg/mig/reconfigure/reconfigure.go Run), played step by step by
the simulated MIG manager's script (plugins/module_utils/lab/mig_manager.py)."""

import copy
import json
import os

import pytest

from ansible_collections.fairgpu.tenancy.plugins.module_utils.mig import nodes as mig_nodes
from ansible_collections.fairgpu.tenancy.plugins.module_utils.mig import wait as mig_wait
from ansible_collections.fairgpu.tenancy.plugins.module_utils.lab import mig_manager
from ansible_collections.fairgpu.tenancy.plugins.module_utils.lab import node as simulated_node

H100 = "NVIDIA-H100-80GB-HBM3"
DEFAULT = "fairgpu-2x2g.20gb"
DOC = mig_nodes.config_document(layouts={
    "two-3g": [{"devices": "all", "mig-enabled": True, "mig-devices": {"3g.40gb": 2}}],
    "copy-of-default": [{"devices": "all", "mig-enabled": True, "mig-devices": {"2g.20gb": 2}}],
})
STATE, CONFIG = "nvidia.com/mig.config.state", "nvidia.com/mig.config"
FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")


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
def test_a_waiting_node_says_where_it_stands(state, words):
    node = relabel(partitioned(), "two-3g")
    if state is None:
        del node["metadata"]["labels"][STATE]
    else:
        node["metadata"]["labels"][STATE] = state
    other = relabel(partitioned(), "two-3g")
    other["metadata"]["name"] = "gpu-node-1"
    result = mig_wait.progress([node, other], DOC, "two-3g", "mixed")
    assert not result["done"] and result["ready"] == [] and result["failed"] == []
    message = "\n".join(result["waiting"])
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


# Real GPU nodes carry no simulated annotations: the wait and the result check count GPUs and read profiles from
# what the node and its own nvidia-smi report (issue 13, items 1 and 6).
SINGLE_1G = {"version": "v1", "mig-configs": {
    "all-1g.10gb": [{"devices": "all", "mig-enabled": True, "mig-devices": {"1g.10gb": 7}}],
    "all-2g.20gb": [{"devices": "all", "mig-enabled": True, "mig-devices": {"2g.20gb": 3}}]}}


def real_node(labels, allocatable):
    return {"metadata": {"name": "gpu-node-0", "labels": dict(labels), "annotations": {}},
            "status": {"capacity": dict(allocatable), "allocatable": dict(allocatable)}}


def real_single_node():
    """The real H100 80GB HBM3 node under mig.strategy=single with all-disabled (GPU Operator labels,
    tests/unit/fixtures/h100-single-all-disabled.json): 1 GPU."""
    with open(FIXTURES + "/h100-single-all-disabled.json") as handle:
        return real_node(json.load(handle), {"nvidia.com/gpu": "1"})


def after_single(node, config, profile, count):
    """``node`` once the MIG manager applied ``config`` under single: GFD overwrites nvidia.com/gpu.{product,count,
    memory,...} to describe one MIG device (gfd_mig_labels cites k8s-device-plugin v0.20.0
    internal/lm/mig-strategy.go) and the device plugin advertises the MIG devices as nvidia.com/gpu."""
    from ansible_collections.fairgpu.tenancy.plugins.module_utils.mig import layout as mig_layout

    node = copy.deepcopy(node)
    node["metadata"]["labels"].update(mig_layout.gfd_mig_labels(H100, 1, [{profile: count}], "single", config))
    node["status"]["allocatable"]["nvidia.com/gpu"] = str(count)
    return node


def test_single_strategy_on_a_real_h100_ends_with_the_mig_devices_counted_as_gpus():
    from test_nvidia_smi import fixture

    before = real_single_node()
    stale = relabel(before, "all-1g.10gb")
    status, message = mig_wait.node_progress(SINGLE_1G, "all-1g.10gb", stale, "single", before)
    assert status == "waiting" and "advertises nvidia.com/gpu 1, expected 7" in message
    after = after_single(stale, "all-1g.10gb", "1g.10gb", 7)
    assert after["metadata"]["labels"]["nvidia.com/gpu.count"] == "7", "GFD counts the MIG devices now"
    # GFD's count of 7 is not 7 GPUs: the count comes from the node before its label changed, or from its -L
    # (NVIDIA's published -L of this very case); taking 7 GPUs would wait for 49 devices until the timeout.
    assert mig_wait.node_progress(SINGLE_1G, "all-1g.10gb", after, "single", before)[0] == "ready"
    listed = {"-L": fixture("L-h100-80gb-single-all-1g.10gb.txt")}
    assert mig_wait.node_progress(SINGLE_1G, "all-1g.10gb", after, "single", after, listed)[0] == "ready"
    assert mig_nodes.node_result_errors(SINGLE_1G, "all-1g.10gb", [after], "single", [before]) == []
    # A second run: before and after both count MIG devices and no -L answered. The GPU count is unknown, so the
    # product label is what tells the layout apart.
    assert mig_nodes.physical_gpus(after, None, after) == (H100, None)
    assert mig_wait.progress([after], SINGLE_1G, "all-1g.10gb", "single", [after])["ready"] == ["gpu-node-0"]


def test_single_strategy_stale_success_of_another_profile_is_waited_out():
    partitioned_1g = after_single(relabel(real_single_node(), "all-1g.10gb"), "all-1g.10gb", "1g.10gb", 7)
    stale = relabel(partitioned_1g, "all-2g.20gb")
    status, message = mig_wait.node_progress(SINGLE_1G, "all-2g.20gb", stale, "single", partitioned_1g)
    assert status == "waiting"
    assert ("label nvidia.com/gpu.product is NVIDIA-H100-80GB-HBM3-MIG-1g.10gb, expected "
            "NVIDIA-H100-80GB-HBM3-MIG-2g.20gb") in message
    done = after_single(stale, "all-2g.20gb", "2g.20gb", 3)
    assert mig_wait.node_progress(SINGLE_1G, "all-2g.20gb", done, "single", partitioned_1g)[0] == "ready"


def test_a_model_outside_the_catalogue_is_waited_for_from_its_own_report():
    """test_mig_config's FUTURE model (a real R570 -lgip and a real R560 -lgipp under a name the built-in
    catalogue lacks): the wait's resource and label checks use the node's report, not the catalogue."""
    from test_mig_config import FUTURE
    from test_nvidia_smi_full import LGIP, LGIPP

    layout = {"version": "v1", "mig-configs": {"x": [{"devices": "all", "mig-enabled": True,
                                                      "mig-devices": {"3g.40gb": 1, "1g.10gb": 3}}]}}
    before = real_node({"nvidia.com/gpu.product": FUTURE, "nvidia.com/gpu.count": "1", CONFIG: "all-disabled",
                        STATE: "success", "nvidia.com/mig.strategy": "mixed"}, {"nvidia.com/gpu": "1"})
    report = {"mig -lgip": LGIP, "mig -lgipp": LGIPP}
    after = relabel(before, "x")
    after["status"]["allocatable"] = {"nvidia.com/gpu": "0", "nvidia.com/mig-3g.40gb": "1", "nvidia.com/mig-1g.10gb": "3"}
    status, message = mig_wait.node_progress(layout, "x", after, "mixed", before, report)
    assert status == "waiting" and "label nvidia.com/mig-1g.10gb.count is None, expected 3" in message
    after["metadata"]["labels"].update({"nvidia.com/mig-3g.40gb.count": "1", "nvidia.com/mig-1g.10gb.count": "3"})
    assert mig_wait.node_progress(layout, "x", after, "mixed", before, report)[0] == "ready"
    assert mig_wait.progress([after], layout, "x", "mixed", [before], {"gpu-node-0": report})["done"]
    assert mig_nodes.node_result_errors(layout, "x", [after], "mixed", [before], {"gpu-node-0": report}) == []
    # Without the report the model is known nowhere: the wait says so instead of passing.
    status, message = mig_wait.node_progress(layout, "x", after, "mixed", before)
    assert status == "waiting" and FUTURE in message


def test_a_real_b200_is_checked_and_waited_for_from_its_own_report():
    """NVIDIA B200, which the built-in catalogue lacks: its real -lgip (gpu-operator#1242, the first four
    profiles). The capture has no -lgipp and no public B200 -lgipp was found, so the check asks for it; a real
    7-slice -lgipp of another model (H100 NVL, fixtures/nvidia-smi/mig-lgipp-h100-nvl-r560.txt) stands in for it
    here, an assumption of this test: the B200's placements are published nowhere. Then the node's report decides
    fit, resource names and the wait. The excerpt lacks 7g.180gb: the GPU's 7 compute slices come from 1g.23gb's
    7/7."""
    from test_nvidia_smi import fixture
    from test_nvidia_smi_full import LGIPP

    lgip = fixture("mig-lgip-b200-excerpt.txt")
    layout = {"version": "v1", "mig-configs": {
        "b200-mix": [{"devices": "all", "mig-enabled": True, "mig-devices": {"2g.45gb": 3, "1g.23gb": 1}}],
        "too-much-memory": [{"devices": "all", "mig-enabled": True, "mig-devices": {"1g.45gb": 4, "1g.23gb": 1}}]}}
    before = real_node({"nvidia.com/gpu.product": "NVIDIA-B200", "nvidia.com/gpu.count": "8", CONFIG: "all-disabled",
                        STATE: "success", "nvidia.com/mig.strategy": "mixed"}, {"nvidia.com/gpu": "8"})
    (error,) = mig_nodes.node_errors(layout, "b200-mix", [before], "mixed", {}, {"gpu-node-0": {"mig -lgip": lgip}})
    assert error.startswith("node gpu-node-0 (8 x NVIDIA-B200): ") and "no nvidia-smi mig -lgipp output" in error
    report = {"mig -lgip": lgip, "mig -lgipp": LGIPP}
    assert mig_nodes.node_errors(layout, "b200-mix", [before], "mixed", {}, {"gpu-node-0": report}) == []
    (error,) = mig_nodes.node_errors(layout, "too-much-memory", [before], "mixed", {}, {"gpu-node-0": report})
    assert "cannot be placed on the 8 memory slices" in error
    after = relabel(before, "b200-mix")
    after["status"]["allocatable"] = {"nvidia.com/gpu": "0", "nvidia.com/mig-2g.45gb": "24", "nvidia.com/mig-1g.23gb": "8"}
    after["metadata"]["labels"].update({"nvidia.com/mig-2g.45gb.count": "24", "nvidia.com/mig-1g.23gb.count": "8"})
    assert mig_wait.node_progress(layout, "b200-mix", after, "mixed", before, report)[0] == "ready"
    status, message = mig_wait.node_progress(layout, "b200-mix", relabel(before, "b200-mix"), "mixed", before, report)
    assert status == "waiting" and "advertises nvidia.com/mig-2g.45gb None, expected 24" in message


def test_a_fresh_b200_is_judged_by_the_mig_manager_first_then_from_its_report():
    """A fresh node: the GPU Operator's default config is all-disabled, so nvidia-smi mig -lgip answers "No
    MIG-enabled devices found." and a model the catalogue lacks has no profiles anywhere before the MIG manager
    enables MIG. The check before labelling leaves it to the MIG manager (with a warning), the wait ends when MIG
    devices appear, and the result is checked from the report read again once MIG is on."""
    from test_nvidia_smi import fixture
    from test_nvidia_smi_full import LGIPP

    layout = {"version": "v1", "mig-configs": {
        "all-1g.23gb": [{"devices": "all", "mig-enabled": True, "mig-devices": {"1g.23gb": 7}}]}}
    listed = "".join("GPU %d: NVIDIA B200 (UUID: GPU-0000000%d-0000-4000-8000-000000000001)\n" % (i, i)
                     for i in range(8))
    fresh = {"-L": listed, "mig -lgip": "No MIG-enabled devices found.", "mig -lgipp": "No MIG-enabled devices found."}
    before = real_node({"nvidia.com/gpu.product": "NVIDIA-B200", "nvidia.com/gpu.count": "8", CONFIG: "all-disabled",
                        STATE: "success", "nvidia.com/mig.strategy": "mixed"}, {"nvidia.com/gpu": "8"})
    reports = {"gpu-node-0": fresh}
    assert mig_nodes.node_errors(layout, "all-1g.23gb", [before], "mixed", {}, reports) == []
    (warning,) = mig_nodes.node_unchecked([before], {}, reports)
    assert warning.startswith("node gpu-node-0 (8 x NVIDIA-B200): the built-in catalogue lacks the model and MIG is off")
    # Without any report the model is still refused: nothing says what it can do.
    assert mig_nodes.node_errors(layout, "all-1g.23gb", [before], "mixed")[0].startswith("node gpu-node-0 (8 x NVIDIA-B200)")
    stale = relabel(before, "all-1g.23gb")
    status, message = mig_wait.node_progress(layout, "all-1g.23gb", stale, "mixed", before, fresh)
    assert status == "waiting" and "publishes no MIG device yet" in message
    after = copy.deepcopy(stale)
    after["status"]["allocatable"] = {"nvidia.com/mig-1g.23gb": "56"}  # no nvidia.com/gpu: no whole GPU is left
    after["metadata"]["labels"]["nvidia.com/mig-1g.23gb.count"] = "56"
    assert mig_wait.node_progress(layout, "all-1g.23gb", after, "mixed", before, fresh)[0] == "ready"
    # The result check, from the report read with MIG on (the real B200 -lgip; the H100 NVL's -lgipp stands in).
    again = {"gpu-node-0": {"-L": listed, "mig -lgip": fixture("mig-lgip-b200-excerpt.txt"), "mig -lgipp": LGIPP}}
    assert mig_nodes.node_result_errors(layout, "all-1g.23gb", [after], "mixed", [before], again) == []
    after["status"]["allocatable"]["nvidia.com/mig-1g.23gb"] = "48"
    assert mig_nodes.node_result_errors(layout, "all-1g.23gb", [after], "mixed", [before], again) == [
        "node gpu-node-0: advertises nvidia.com/mig-1g.23gb 48, expected 56"]


def test_a_node_without_whole_gpus_has_no_nvidia_com_gpu_at_all():
    """The device plugin registers no resource it has no device for (k8s-device-plugin v0.20.0
    internal/rm/nvml_manager.go), and a node partitioned before its kubelet registered carries only MIG resources
    (a real MIG node's allocatable: BMI-Group/prem-operator#39): nvidia.com/gpu absent counts as 0."""
    node = partitioned(config="two-3g")
    del node["status"]["allocatable"]["nvidia.com/gpu"]
    assert mig_nodes.node_result_errors(DOC, "two-3g", [node], "mixed") == []
    assert mig_wait.node_progress(DOC, "two-3g", node, "mixed", node)[0] == "ready"


def test_a_node_with_two_gpu_models_counts_the_labelled_models_gpus():
    """One H100 PCIe and three RTX A6000 in one server (the case of NVIDIA/gpu-operator#256). GFD labels one
    model; mig-parted's devices: all skips GPUs that cannot do MIG, which the device plugin advertises whole."""
    from test_nvidia_smi import fixture

    h100 = fixture("L-h100-pcie-3g-3x1g.txt").splitlines()[0] + "\n"
    listed = h100 + "".join("GPU %d: NVIDIA RTX A6000 (UUID: GPU-0000000%d-0000-4000-8000-00000000000a)\n" % (i, i)
                            for i in (1, 2, 3))
    layout = {"version": "v1", "mig-configs": {
        "h100-3x2g": [{"devices": "all", "mig-enabled": True, "mig-devices": {"2g.20gb": 3}}]}}
    before = real_node({"nvidia.com/gpu.product": "NVIDIA-H100-PCIe", "nvidia.com/gpu.count": "1",
                        CONFIG: "all-disabled", STATE: "success"}, {"nvidia.com/gpu": "4"})
    report = {"-L": listed}
    assert mig_nodes.node_gpus(before, report) == ("NVIDIA-H100-PCIe", 1) and mig_nodes.other_gpus(before, report) == 3
    assert mig_nodes.expected_resources(layout, "h100-3x2g", before, "mixed", report) == {
        "nvidia.com/gpu": 3, "nvidia.com/mig-2g.20gb": 3}
    after = relabel(before, "h100-3x2g")
    after["status"]["allocatable"] = {"nvidia.com/gpu": "3", "nvidia.com/mig-2g.20gb": "3"}
    after["metadata"]["labels"]["nvidia.com/mig-2g.20gb.count"] = "3"
    assert mig_wait.node_progress(layout, "h100-3x2g", after, "mixed", before, report)[0] == "ready"
