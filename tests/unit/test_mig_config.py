"""The MIG path's logic around mig_layout: the mig_config role's document and node checks, the simulated MIG
manager, nvidia_smi_mig_info's summary, the MIG capacity of node pools and the MIG scenario's judge."""

import json
import os

import pytest

from ansible_collections.fairgpu.tenancy.plugins.module_utils.cluster import node_pools as cluster_spec
from ansible_collections.fairgpu.tenancy.plugins.module_utils.mig import info as mig_info
from ansible_collections.fairgpu.tenancy.plugins.module_utils.mig import nodes as mig_nodes
from ansible_collections.fairgpu.tenancy.plugins.module_utils.tenants import plan as tenant_plan
from ansible_collections.fairgpu.tenancy.plugins.module_utils.lab import node as simulated_node
from ansible_collections.fairgpu.tenancy.plugins.module_utils.lab.nvidia_smi import simulated_nvidia_smi
from ansible_collections.fairgpu.tenancy.plugins.module_utils.validation.scenarios import mig_result

H100 = "NVIDIA-H100-80GB-HBM3"
DOC = mig_nodes.config_document()
NAME = "fairgpu-2x2g.20gb"
FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures", "nvidia-smi")


def node(name="gpu-node-0", labels=None, product=H100, count=8, allocatable=None):
    return {"metadata": {"name": name, "labels": dict(labels or {}),
                         "annotations": {"fairgpu.io/simulated-gpu-product": product,
                                         "fairgpu.io/simulated-gpu-count": str(count)}},
            "status": {"allocatable": dict(allocatable or {})}}


def test_document_holds_the_tasks_layout_and_more():
    assert DOC["version"] == "v1"
    assert DOC["mig-configs"][NAME] == [{"devices": "all", "mig-enabled": True, "mig-devices": {"2g.20gb": 2}}]
    assert DOC["mig-configs"]["all-disabled"] == [{"devices": "all", "mig-enabled": False}]
    more = mig_nodes.config_document(layouts={"one-big": [{"devices": "all", "mig-enabled": True,
                                                           "mig-devices": {"7g.80gb": 1}}]})
    assert sorted(more["mig-configs"]) == ["all-disabled", "fairgpu-2x2g.20gb", "one-big"]
    assert mig_nodes.configmap(DOC, "cm", "gpu-operator")["data"]["config.yaml"].startswith("mig-configs:\n")


@pytest.mark.parametrize("layout, message", [
    # The original task's format: mig-devices keyed by GPU index with gi-profile.
    ([{"devices": "all", "mig-enabled": True, "mig-devices": {"0": {"gi-profile": "2g.20gb"}}}], "mig-devices"),
    ([{"devices": 7, "mig-enabled": True, "mig-devices": {"2g.20gb": 2}}], "devices"),
    ([{"devices": "all", "mig-enabled": True, "mig-devices": {"2g.10gb": 2}}],
     "does not offer MIG profile '2g.10gb'; valid profiles are 1g.10gb, 1g.10gb+me, 1g.20gb, 2g.20gb"),
    ([{"devices": [8], "mig-enabled": True, "mig-devices": {"2g.20gb": 2}}], "8"),
    ([{"devices": "all", "mig-enabled": True, "mig-devices": {"3g.40gb": 2, "1g.10gb": 1}}], "3g.40gb"),
    ([{"devices": "all", "mig-enabled": True, "mig-devices": {}}], "no"),
])
def test_bad_layouts_name_node_model_and_reason(layout, message):
    document = mig_nodes.config_document(layouts={"bad": layout})
    errors = mig_nodes.node_errors(document, "bad", [node()], "mixed")
    assert errors and all(e.startswith("node gpu-node-0 (8 x NVIDIA-H100-80GB-HBM3): ") for e in errors)
    assert any(message in e for e in errors), errors


def test_single_strategy_refuses_mixed_profiles_and_unknown_names():
    document = mig_nodes.config_document(layouts={"mixed-sizes": [
        {"devices": "all", "mig-enabled": True, "mig-devices": {"3g.40gb": 1, "2g.20gb": 2}}]})
    assert any("single" in e for e in mig_nodes.node_errors(document, "mixed-sizes", [node()], "single"))
    assert mig_nodes.node_errors(DOC, "nope", [node()], "mixed") == [
        "node gpu-node-0 (8 x NVIDIA-H100-80GB-HBM3): mig_config_selected: 'nope' is not a config of the document; "
        "it has all-disabled, fairgpu-2x2g.20gb"]
    assert mig_nodes.node_errors(DOC, NAME, [], "mixed")[0].startswith("mig_config_node_selector: no node matches")
    assert mig_nodes.node_errors(DOC, NAME, [node(), node("gpu-node-1")], "mixed") == []


def test_simulated_mig_manager_applies_or_fails_and_keeps_the_old_layout():
    applied = simulated_node.desired_node("gpu-node-0", node()["metadata"]["annotations"],
                                          {"nvidia.com/mig.config": NAME}, "mixed", DOC)
    assert applied["mig_state"] == "success" and applied["errors"] == []
    assert applied["resources"] == {"nvidia.com/gpu": 0, "nvidia.com/mig-2g.20gb": 16}
    assert applied["labels"]["nvidia.com/mig-2g.20gb.count"] == "16"
    assert applied["labels"]["nvidia.com/mig.config.state"] == "success"
    annotations = dict(node()["metadata"]["annotations"], **applied["annotations"])
    bad = mig_nodes.config_document(layouts={"bad": [{"devices": "all", "mig-enabled": True,
                                                      "mig-devices": {"2g.10gb": 3}}]})
    failed = simulated_node.desired_node("gpu-node-0", annotations, {"nvidia.com/mig.config": "bad"}, "mixed", bad)
    assert failed["mig_state"] == "failed" and "2g.10gb" in failed["errors"][0]
    assert failed["resources"] == applied["resources"], "a failed layout leaves the GPUs as they were"
    # Without the MIG manager's document (the gpu_operator role's pass) the layout and the state stay.
    again = simulated_node.desired_node("gpu-node-0", annotations, {"nvidia.com/mig.config.state": "success"}, "mixed")
    assert again["resources"] == applied["resources"] and again["labels"]["nvidia.com/mig.config.state"] == "success"


def test_node_patches_remove_what_an_old_layout_left():
    labels, status, _diff = simulated_node.node_patches(
        {"nvidia.com/mig-1g.10gb.count": "56", "nvidia.com/mig.config": NAME, "other": "x"},
        {"allocatable": {"nvidia.com/mig-1g.10gb": "56", "cpu": "96"}},
        {"nvidia.com/mig-2g.20gb.count": "16"}, {"nvidia.com/mig-2g.20gb": 16})
    assert labels == {"nvidia.com/mig-2g.20gb.count": "16", "nvidia.com/mig-1g.10gb.count": None}
    assert status["allocatable"] == {"nvidia.com/mig-2g.20gb": "16", "nvidia.com/mig-1g.10gb": None}


def test_nvidia_smi_summary_matches_the_applied_layout():
    layout = [{"2g.20gb": 2}] * 8
    info = mig_info.mig_info(simulated_nvidia_smi("gpu-node-0", H100, 8, layout), DOC, NAME)
    assert info["product"] == H100 and info["matches"] and info["mismatches"] == []
    assert info["profile_counts"] == {"2g.20gb": 16} and info["mig_enabled"] == [True] * 8
    assert info["resources"] == {"single": {"nvidia.com/gpu": 16},
                                 "mixed": {"nvidia.com/gpu": 0, "nvidia.com/mig-2g.20gb": 16}}
    assert sum(len(g["gpu_instances"]) for g in info["gpus"]) == 16
    off = mig_info.mig_info(simulated_nvidia_smi("gpu-node-0", H100, 8, None), DOC, NAME)
    assert not off["matches"] and off["mismatches"][0] == (
        "GPU 0: fairgpu-2x2g.20gb expects 2 x 2g.20gb, nvidia-smi shows MIG disabled")


def test_nvidia_smi_summary_of_a_real_node():
    with open(os.path.join(FIXTURES, "L-h100-80gb-mixed-all-balanced.txt")) as handle:
        listing = "".join(line for line in handle if not line.startswith("#"))
    info = mig_info.mig_info({"-L": listing})
    assert info["product"] == H100
    assert info["resources"]["mixed"]["nvidia.com/gpu"] == 0
    assert all(count > 0 for count in info["profile_counts"].values())


def test_pool_capacity_on_the_mig_path():
    pools = [{"name": "gpu", "count": 2, "gpu_product": H100, "gpu_count": 8, "cpu": "96", "memory": "1Ti"}]

    def capacity(*mig):
        return tenant_plan.cluster_capacity(cluster_spec.pool_gpu_nodes(pools, *mig))["resources"]

    assert capacity("mixed", DOC, NAME)["nvidia.com/mig-2g.20gb"] == 32
    assert "nvidia.com/gpu" not in capacity("mixed", DOC, NAME)
    assert capacity()["nvidia.com/gpu"] == 16
    nodes = cluster_spec.pool_gpu_nodes(pools, "mixed", DOC, NAME)
    assert nodes[0]["status"]["allocatable"]["nvidia.com/mig-2g.20gb"] == "16"
    assert mig_nodes.node_result_errors(DOC, NAME, [node(labels={"nvidia.com/mig.config.state": "success"},
                                                         allocatable=nodes[0]["status"]["allocatable"])], "mixed") == []
    assert mig_nodes.node_result_errors(DOC, NAME, [node(labels={"nvidia.com/mig.config.state": "failed"})], "mixed") == [
        "node gpu-node-0: nvidia.com/mig.config.state is 'failed', not success"]


def test_mig_scenario_judge():
    tenants = [{"name": t, "namespaces": [t], "gpu_resource": "nvidia.com/mig-2g.20gb"} for t in ("team-a", "team-b")]
    admitted = {t["name"]: {"queues": {t["name"]: {"admitted_workloads": 2, "admitted_or_finished_workloads": 2}}}
                for t in tenants}
    waiting = {"name": "job-fairgpu-val-mig-team-a-2", "job": "fairgpu-val-mig-team-a-2", "cluster_queue": "team-a",
               "state": "pending", "conditions": {"QuotaReserved": {"message": "insufficient unused quota"}}}
    pod = {"metadata": {"name": "p", "namespace": "team-a"}, "spec": {"nodeName": "n", "containers": [
        {"resources": {"requests": {"nvidia.com/mig-2g.20gb": "1", "nvidia.com/gpu": "0"}}}]}}
    pods = [pod, pod, dict(pod, metadata={"name": "q", "namespace": "team-b"}),
            dict(pod, metadata={"name": "r", "namespace": "team-b"})]
    result = mig_result(tenants, {"team-a": 2, "team-b": 2}, 1, admitted, {"workloads": [waiting]},
                        {"workloads": []}, pods)
    assert all(c["passed"] for c in result["checks"]), result["checks"]
    whole_gpu = json.loads(json.dumps(pod))
    whole_gpu["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] = "1"
    result = mig_result(tenants, {"team-a": 2, "team-b": 2}, 1, admitted, {"workloads": [waiting]},
                        {"workloads": []}, [pod, whole_gpu] + pods[2:])
    assert not result["checks"][1]["passed"]
    smi = {"p": [{"mig_devices": [{"uuid": "MIG-1"}]}], "q": [{"mig_devices": [{"uuid": "MIG-1"}]}]}
    result = mig_result(tenants, {"team-a": 2, "team-b": 2}, 1, admitted, {"workloads": [waiting]},
                        {"workloads": []}, pods, smi)
    assert not result["checks"][-1]["passed"], "two pods seeing one MIG device is a failure"
    # Short Jobs: the second tenant's read came after its Jobs finished (a CI run) and, once a guaranteed Job
    # finished, an extra Job started; both are still a pass.
    done = {"team-a": admitted["team-a"],
            "team-b": {"queues": {"team-b": {"admitted_workloads": 0, "admitted_or_finished_workloads": 2}}}}
    extra = dict(pod, metadata={"name": "s", "namespace": "team-a"})
    result = mig_result(tenants, {"team-a": 2, "team-b": 2}, 1, done, {"workloads": [waiting]},
                        {"workloads": []}, pods + [extra])
    assert all(c["passed"] for c in result["checks"]), result["checks"]
    result = mig_result(tenants, {"team-a": 2, "team-b": 2}, 1, done, {"workloads": [waiting]},
                        {"workloads": []}, pods[:1] + pods[2:])
    assert not result["checks"][1]["passed"], "fewer started pods than the guarantee is a failure"


def test_the_nodes_own_profile_list_is_the_authority():
    with open(os.path.join(FIXTURES, "mig-lgip-h100-pcie-r570-wide.txt")) as handle:
        lgip = "".join(line for line in handle if not line.startswith("#"))
    pcie = node(product="NVIDIA-H100-PCIe", count=1)
    # A driver that names the profile otherwise (as 7g.79gb / 7g.80gb differ between drivers): its list wins.
    renamed = lgip.replace("2g.20gb", "2g.24gb")
    document = {"version": "v1", "mig-configs": {"renamed": [{"devices": "all", "mig-enabled": True,
                                                              "mig-devices": {"2g.24gb": 2}}]}}
    assert mig_nodes.node_errors(document, "renamed", [pcie], "mixed", {"gpu-node-0": renamed}) == []
    assert "does not offer MIG profile '2g.24gb'" in mig_nodes.node_errors(document, "renamed", [pcie], "mixed")[0]
    assert mig_nodes.node_catalogue(pcie, "NVIDIA-H100-PCIe", lgip) is not None
    assert mig_nodes.node_catalogue(pcie, "NVIDIA-H100-PCIe") is None, "no -lgip known: the built-in catalogue"
    assert mig_nodes.node_errors(DOC, NAME, [pcie], "mixed", {"gpu-node-0": "garbage"})[0].startswith(
        "node gpu-node-0: its nvidia-smi MIG report cannot be read")


# The GPU model of test_nvidia_smi_full (real 7-slice -lgip of an H100 PCIe, driver R570, and the real -lgipp of an
# H100 NVL, driver 560) under a product name the built-in catalogue lacks: the node's discovered report decides. A
# real model the catalogue lacks, from one machine's own outputs: test_nvidia_smi_captures (H100 NVL).
FUTURE = "NVIDIA-Future-GPU"


def test_a_model_outside_the_catalogue_is_checked_from_its_discovered_report():
    from test_nvidia_smi_full import LGIP, LGIPP

    future = node(product=FUTURE, count=1)
    fits = {"version": "v1", "mig-configs": {"x": [{"devices": "all", "mig-enabled": True,
                                                   "mig-devices": {"3g.40gb": 1, "1g.10gb": 3}}]}}
    report = {"gpu-node-0": {"mig -lgip": LGIP, "mig -lgipp": LGIPP}}
    assert mig_nodes.node_errors(fits, "x", [future], "mixed", {}, report) == []
    # The user's own -lgip (mig_config_node_lgip) is taken over the discovered one; the placements stay.
    assert mig_nodes.node_errors(fits, "x", [future], "mixed", {"gpu-node-0": LGIP}, report) == []
    too_big = {"version": "v1", "mig-configs": {"x": [{"devices": "all", "mig-enabled": True,
                                                      "mig-devices": {"3g.40gb": 2, "1g.10gb": 1}}]}}
    (error,) = mig_nodes.node_errors(too_big, "x", [future], "mixed", {}, report)
    assert error.startswith("node gpu-node-0 (1 x %s): " % FUTURE) and "cannot be placed" in error
    # Without -lgipp its slices and placements are known nowhere: the message says that, not "cannot be read".
    (error,) = mig_nodes.node_errors(fits, "x", [future], "mixed", {"gpu-node-0": LGIP})
    assert error.startswith("node gpu-node-0 (1 x %s): " % FUTURE) and "cannot be read" not in error
    assert "lgipp" in error


# Issue 13 item 3: only the selected config must fit (mig-parted v0.13.1 pkg/mig/reconfigure/reconfigure.go Run
# applies only the config the node's label names), every config must parse (api/spec/v1/spec.go parses the whole
# file first), and the others' misfits are warnings.
A30 = "NVIDIA-A30"
ONE_BIG = {"one-big": [{"devices": "all", "mig-enabled": True, "mig-devices": {"4g.24gb": 1}}]}


def test_the_unselected_default_does_not_block_a_layout_that_fits():
    # fairgpu's own 2 x 2g.20gb does not exist on an A30; the user selects a layout the A30 can take.
    document = mig_nodes.config_document(layouts=ONE_BIG)
    a30 = node(product=A30, count=4)
    assert mig_nodes.node_errors(document, "one-big", [a30], "mixed") == []
    warnings = mig_nodes.node_warnings(document, "one-big", [a30], "mixed")
    assert len(warnings) == 1 and warnings[0].startswith(
        "not selected (nvidia.com/mig.config=one-big), so not applied; on node gpu-node-0 it would fail: "
        "mig-configs.fairgpu-2x2g.20gb[0].mig-devices: NVIDIA-A30 does not offer MIG profile '2g.20gb'")
    # Selected, the default is judged against the node: an error.
    assert "does not offer MIG profile '2g.20gb'" in mig_nodes.node_errors(document, NAME, [a30], "mixed")[0]


def test_a_stock_config_for_other_models_is_no_error_and_warnings_name_every_node():
    document = mig_nodes.config_document(layouts={"all-1g.5gb": [
        {"devices": "all", "mig-enabled": True, "mig-devices": {"1g.5gb": 7}}]})
    nodes = [node(), node("gpu-node-1")]
    assert mig_nodes.node_errors(document, NAME, nodes, "mixed") == []
    assert mig_nodes.node_warnings(document, NAME, nodes, "mixed") == [
        "not selected (nvidia.com/mig.config=fairgpu-2x2g.20gb), so not applied; on node gpu-node-0, gpu-node-1 it "
        "would fail: mig-configs.all-1g.5gb[0].mig-devices: NVIDIA-H100-80GB-HBM3 does not offer MIG profile "
        "'1g.5gb'; valid profiles are " + ", ".join(
            ["1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"])]
    # Too many GPUs, too many instances, no placement: fit problems too, so warnings only when not selected.
    for entry in ({"devices": [9], "mig-enabled": True, "mig-devices": {"2g.20gb": 1}},
                  {"devices": "all", "mig-enabled": True, "mig-devices": {"2g.20gb": 4}},
                  {"devices": "all", "mig-enabled": True, "mig-devices": {"3g.40gb": 2, "1g.10gb": 1}}):
        other = mig_nodes.config_document(layouts={"other": [entry]})
        assert mig_nodes.node_errors(other, NAME, nodes, "single") == []
        assert len(mig_nodes.node_warnings(other, NAME, nodes, "single")) == 1
        assert mig_nodes.node_errors(other, "other", nodes, "single")


@pytest.mark.parametrize("entry, message", [
    ({"devices": "all", "mig-enabled": True, "mig-devices": {"0": {"gi-profile": "2g.20gb"}}}, "mig-devices"),
    ({"devices": 7, "mig-enabled": True, "mig-devices": {"2g.20gb": 2}}, "devices"),
    ({"devices": "all", "mig-enabled": "yes", "mig-devices": {"2g.20gb": 2}}, "mig-enabled"),
    ({"devices": "all", "mig-enabled": True, "mig-devices": {"big": 1}}, "'big' is not a MIG profile name"),
    ({"devices": "all", "mig-enabled": True, "mig-devices": {"2g.20gb": -1}}, "whole number"),
    ({"devices": "all", "mig-enabled": False, "mig-devices": {"2g.20gb": 1}}, "mig-enabled is false"),
    ({"devices": "all", "mig-enabled": True, "mig-devices": {"2g.20gb": 1}, "gpus": 2}, "unknown field"),
    ({"mig-enabled": True, "mig-devices": {"2g.20gb": 1}}, "devices is missing"),
    ({"devices": [0, 0], "mig-enabled": False}, "twice"),
])
def test_a_malformed_unselected_config_is_an_error(entry, message):
    # mig-parted cannot read the file at all (spec.go), so the selected config would fail as well.
    document = mig_nodes.config_document(layouts={"broken": [entry]})
    errors = mig_nodes.node_errors(document, NAME, [node()], "mixed")
    assert errors and all(e.startswith("node gpu-node-0 (8 x NVIDIA-H100-80GB-HBM3): mig-configs.broken[0]")
                          for e in errors), errors
    assert any(message in e for e in errors), errors
    assert mig_nodes.node_warnings(document, NAME, [node()], "mixed") == []


def test_the_simulated_manager_applies_the_selected_config_beside_a_misfit_one():
    document = mig_nodes.config_document(layouts=ONE_BIG)
    a30 = node(product=A30, count=4)["metadata"]["annotations"]
    applied = simulated_node.desired_node("gpu-node-0", a30, {"nvidia.com/mig.config": "one-big"}, "mixed", document)
    assert applied["mig_state"] == "success", applied["errors"]
    assert applied["resources"]["nvidia.com/mig-4g.24gb"] == 4


def test_a_simulated_node_is_judged_from_its_own_lgip_and_lgipp():
    """The embedded cluster's nodes report -lgip and -lgipp like real ones (simulated/nvidia_smi.py): once
    partitioned, their own rows and placements decide, and fairgpu's layout still fits."""
    from ansible_collections.fairgpu.tenancy.plugins.module_utils.lab.node import NVIDIA_SMI_ANNOTATION
    from ansible_collections.fairgpu.tenancy.plugins.module_utils.lab.nvidia_smi import simulated_nvidia_smi

    for layout in ({"2g.20gb": 2}, None):
        outputs = simulated_nvidia_smi("gpu-node-0", H100, 8, layout) if layout else simulated_nvidia_smi("gpu-node-0", H100, 8)
        simulated = node()
        simulated["metadata"]["annotations"][NVIDIA_SMI_ANNOTATION] = json.dumps(outputs)
        catalogue = mig_nodes.node_catalogue(simulated, H100)
        assert (catalogue is None) == (layout is None), "MIG disabled: no rows, the built-in catalogue"
        assert mig_nodes.node_errors(DOC, NAME, [simulated], "mixed") == []


def test_the_nodes_own_gpu_list_counts_its_gpus_under_the_single_strategy():
    """Under mig.strategy=single with MIG active GFD's nvidia.com/gpu.count counts MIG devices (k8s-device-plugin
    v0.20.0 internal/lm/mig-strategy.go): one H100 in all-1g.10gb is labelled 7. The node's -L (NVIDIA's
    published output of that very case) says 1 GPU; output gathered from two containers lists a GPU twice."""
    from test_nvidia_smi import fixture

    labelled = {"metadata": {"name": "gpu-node-0", "labels": {"nvidia.com/gpu.product": H100 + "-MIG-1g.10gb",
                                                              "nvidia.com/gpu.count": "7"}}}
    assert mig_nodes.node_gpus(labelled) == (H100, 7), "GFD's count alone: an upper bound"
    single = {"-L": fixture("L-h100-80gb-single-all-1g.10gb.txt")}
    assert mig_nodes.node_gpus(labelled, single) == (H100, 1)
    assert mig_nodes.node_gpus(labelled, {"-L": fixture("L-h200-two-containers.txt")})[1] == 1
    # The layout is judged on the one GPU the node has: a config for GPU index 3 fits GFD's count, not the node.
    third = {"version": "v1", "mig-configs": {"x": [{"devices": [3], "mig-enabled": True, "mig-devices": {"3g.40gb": 1}}]}}
    assert mig_nodes.node_errors(third, "x", [labelled], "single") == []
    (error,) = mig_nodes.node_errors(third, "x", [labelled], "single", {}, {"gpu-node-0": single})
    assert error.startswith("node gpu-node-0 (1 x %s): " % H100) and "GPU index 3 does not exist" in error
    one = {"version": "v1", "mig-configs": {"x": [{"devices": [0], "mig-enabled": True, "mig-devices": {"3g.40gb": 1}}]}}
    assert mig_nodes.node_errors(one, "x", [labelled], "single", {}, {"gpu-node-0": single}) == []
    garbled = mig_nodes.node_errors(one, "x", [labelled], "single", {}, {"gpu-node-0": {"-L": "not nvidia-smi"}})
    assert garbled[0].startswith("node gpu-node-0: its nvidia-smi MIG report cannot be read")
