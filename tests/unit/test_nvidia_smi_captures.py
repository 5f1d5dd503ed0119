"""Whole nvidia-smi captures of drivers 535, 560 and 580 (fixtures/nvidia-smi/, each with its URL in its comment
lines) read by the project's parsers, and a GPU model the built-in catalogue lacks, the NVIDIA H100 NVL, taken
through the layout check, the wait and the result check from one machine's real -lgip, -lgipp and full table, and
its GFD labels under the single strategy from a real node (issue 13, Done when)."""

import copy
import json
import re

import pytest

from ansible_collections.fairgpu.tenancy.plugins.module_utils.mig import layout as mig_layout
from ansible_collections.fairgpu.tenancy.plugins.module_utils.mig import nodes as mig_nodes
from ansible_collections.fairgpu.tenancy.plugins.module_utils.mig import resources
from ansible_collections.fairgpu.tenancy.plugins.module_utils.mig import wait as mig_wait
from ansible_collections.fairgpu.tenancy.plugins.module_utils.mig.catalog import GPU_MODELS
from ansible_collections.fairgpu.tenancy.plugins.module_utils.mig.info import mig_info
from ansible_collections.fairgpu.tenancy.plugins.module_utils.mig.nvidia_smi import (
    NvidiaSmiParseError, mig_tree, parse_compute_instances, parse_gpu_instance_placements, parse_gpu_instance_profiles,
    parse_gpu_instances, parse_list, parse_mig_devices, parse_processes, parse_query_gpu, parse_table)
from test_mig_wait import CONFIG, STATE, real_node, relabel
from test_nvidia_smi import fixture

# NVIDIA H100 NVL on an Azure VM, driver 560.35.03: -lgip, -lgipp, then the table after -cgi 9,15,19 -C.
NVL = "NVIDIA-H100-NVL"
NVL_LGIP = fixture("mig-lgip-h100-nvl-r560.txt")
NVL_LGIPP = fixture("mig-lgipp-h100-nvl-r560.txt")
NVL_TABLE = fixture("table-r560-h100-nvl-mig-3g-1g-1g.txt")
NVL_REPORT = {"mig -lgip": NVL_LGIP, "mig -lgipp": NVL_LGIPP}
# NVIDIA A100-SXM4-40GB, driver 580.126.09: one page's -lgip, -lgi, -lci, full table and -L of GPU 0.
A100_580 = {"-L": fixture("L-a100-40gb-r580-2x1c.2g.10gb.txt"), "mig -lgi": fixture("mig-lgi-a100-40gb-r580-4g-2g-1g.txt"),
            "mig -lci": fixture("mig-lci-a100-40gb-r580-2x1c.2g.10gb.txt"), "mig -lgip": fixture("mig-lgip-a100-40gb-r580.txt"),
            "nvidia-smi": fixture("table-r580-a100-40gb-4g-2x1c.2g-1g.txt")}
TABLES = ["table-r580-rtx-pro-6000-mig-on-no-instances.txt", "table-r580-rtx-pro-6000-in-a-mig-container.txt",
          "table-r510-a100-80gb-in-a-mig-pod-excerpt.txt", "table-r535-a100-80gb-in-a-mig-pod-excerpt.txt",
          "table-r535-a800-mig-enabled.txt", "table-r535-a100-pcie-mig-on-and-off.txt",
          "table-r560-h100-nvl-mig-3g-1g-1g.txt", "table-r580-a100-40gb-4g-2x1c.2g-1g.txt",
          "table-r580-a100-mig-disabled.txt"]


def by_id(lgip):
    return dict((row["profile_id"], row) for row in parse_gpu_instance_profiles(lgip))


def test_r560_h100_nvl_table_agrees_with_the_same_machines_lgip():
    table = parse_table(NVL_TABLE)
    assert (table["driver_version"], table["cuda_version"]) == ("560.35.03", "12.6")
    (gpu,) = table["gpus"]
    assert (gpu["name"], gpu["mig_mode"], gpu["memory_total_mib"], gpu["bus_id"]) == (
        "NVIDIA H100 NVL", "Enabled", 95830, "00000001:00:00.0")
    assert gpu["utilization"] is None, "GPU-Util is N/A under MIG: not reported, never 0"
    devices = [(d["gpu"], d["gi_id"], d["ci_id"], d["mig_device"], d["memory_total_mib"], d["sm"])
               for d in table["mig_devices"]]
    assert devices == [(0, 1, 0, 0, 47488, 60), (0, 5, 0, 1, 22144, 26), (0, 13, 0, 2, 11008, 16)]
    # "No running processes found" is a state: no process rows.
    assert table["processes"] == []
    # -cgi 9,15,19 -C made one instance of each profile: the table's memory and SMs per instance are the very
    # figures the same machine's -lgip prints for profile IDs 9, 15 and 19 (GiB as printed, read as MiB).
    lgip = by_id(NVL_LGIP)
    assert [(lgip[i]["memory_mib"], lgip[i]["sm"]) for i in (9, 15, 19)] == [(d[4], d[5]) for d in devices]


def test_r580_shared_memory_header_and_two_compute_instances_in_one_gpu_instance():
    table = parse_table(A100_580["nvidia-smi"])
    assert table["driver_version"] == "580.126.09" and "Shared Memory-Usage" in A100_580["nvidia-smi"]
    assert [(g["name"], g["mig_mode"], g["utilization"]) for g in table["gpus"]] == [
        ("NVIDIA A100-SXM4-40GB", "Enabled", None)]
    devices = [(d["gi_id"], d["ci_id"], d["mig_device"], d["memory_total_mib"], d["sm"]) for d in table["mig_devices"]]
    assert devices == [(2, 0, 0, 20096, 56), (3, 0, 1, 9984, 14), (3, 1, 2, 9984, 14), (9, 0, 3, 4864, 14)]
    assert table["processes"] == []
    # The same GPU's -L, -lgi and -lci give the tree the table shows: GI 3 holds compute instances 0 and 1.
    tree = mig_tree(parse_list(A100_580["-L"]), parse_gpu_instances(A100_580["mig -lgi"]),
                    parse_compute_instances(A100_580["mig -lci"]))
    pairs = [(gi["id"], ci["id"], ci["profile"]) for gi in tree[0]["gpu_instances"] for ci in gi["compute_instances"]]
    assert pairs == [(2, 0, "4g.20gb"), (3, 0, "1c.2g.10gb"), (3, 1, "1c.2g.10gb"), (9, 0, "1g.5gb")]
    assert [(p[0], p[1]) for p in pairs] == [(d[0], d[1]) for d in devices]
    # Each compute instance shows its GPU instance's memory; a 1c of a 2g has half its SMs (14 of 28).
    lgip = by_id(A100_580["mig -lgip"])
    assert (lgip[5]["memory_mib"], lgip[5]["sm"]) == (20096, 56)
    assert (lgip[14]["memory_mib"], lgip[14]["sm"]) == (9984, 28)
    assert (lgip[19]["memory_mib"], lgip[19]["sm"]) == (4864, 14)


def test_r535_table_with_one_gpu_in_mig_and_one_whole():
    table = parse_table(fixture("table-r535-a100-pcie-mig-on-and-off.txt"))
    assert table["driver_version"] == "535.129.03"
    assert [(g["index"], g["mig_mode"], g["utilization"], g["memory_used_mib"]) for g in table["gpus"]] == [
        (0, "Enabled", None, 50), (1, "Disabled", 0, 4)]
    # The whole GPU's 0% is a real 0; the MIG GPU's N/A is None.
    assert [(d["gpu"], d["gi_id"], d["ci_id"], d["memory_total_mib"]) for d in table["mig_devices"]] == [
        (0, 3, 0, 9856), (0, 4, 0, 9856), (0, 5, 0, 9856), (0, 6, 0, 9856)]
    assert table["processes"] == []


@pytest.mark.parametrize("name", TABLES)
def test_every_captured_table_is_recognised_by_the_other_parsers(name):
    """Four column layouts (R510's 79 columns, R535's 87, R560 and R580's 89 with different Processes and MIG headers):
    the table parser reads each, and the -L and -lgip parsers refuse each, saying it is the full table."""
    text = fixture(name)
    assert parse_table(text)["gpus"]
    for parse in (parse_list, parse_gpu_instance_profiles):
        with pytest.raises(NvidiaSmiParseError, match="this is the full nvidia-smi table"):
            parse(text)


def test_mig_info_reads_a_real_r580_node_whole():
    """nvidia_smi_mig_info's logic on five real outputs of one GPU: the two 1c.2g.10gb compute instances get no
    resource (k8s-device-plugin v0.20.0 internal/rm/rm.go advertises only profiles with C == G), and under the
    single strategy the mixed profiles give no device at all (GFD labels the node <model>-MIG-INVALID)."""
    result = mig_info(A100_580)
    assert result["product"] == "NVIDIA-A100-SXM4-40GB" and result["mig_enabled"] == [True]
    assert result["profile_counts"] == {"4g.20gb": 1, "1c.2g.10gb": 2, "1g.5gb": 1}
    assert result["resources"] == {"single": {"nvidia.com/gpu": 0}, "mixed": {
        "nvidia.com/gpu": 0, "nvidia.com/mig-4g.20gb": 1, "nvidia.com/mig-1g.5gb": 1}}
    assert result["profiles_source"] == "node report" and result["table"]["driver_version"] == "580.126.09"
    # A mig-parted 2g.10gb is one full compute instance: two 1c compute instances are not that layout.
    expected = {"version": "v1", "mig-configs": {"x": [{"devices": "all", "mig-enabled": True,
                                                       "mig-devices": {"4g.20gb": 1, "2g.10gb": 1, "1g.5gb": 1}}]}}
    checked = mig_info(A100_580, expected, "x")
    assert checked["matches"] is False and checked["mismatches"] == [
        "GPU 0: x expects 1 x 1g.5gb, 1 x 2g.10gb, 1 x 4g.20gb, nvidia-smi shows 2 x 1c.2g.10gb, 1 x 1g.5gb, "
        "1 x 4g.20gb"]


def test_a_driver_prints_other_memory_than_the_built_in_catalogue_and_the_node_wins():
    """The R580 -lgip of an A100-SXM4-40GB has the built-in catalogue's names, IDs, counts and slices, but 128 MiB
    more per instance (9.75 GiB for 1g.10gb against 9856 MiB): the node's own figures are used."""
    node = mig_layout.catalogue_from_lgip(parse_gpu_instance_profiles(A100_580["mig -lgip"]), "NVIDIA-A100-SXM4-40GB")
    built_in = mig_layout.MIG_MODELS["NVIDIA-A100-SXM4-40GB"]

    def shape(model):
        return dict((name, (p["id"], p["max_instances"], p["compute_slices"], p["memory_slices"]))
                    for name, p in model["profiles"].items())
    assert shape(node) == shape(built_in)
    assert (node["profiles"]["1g.10gb"]["memory_mib"], built_in["profiles"]["1g.10gb"]["memory_mib"]) == (9984, 9856)
    assert mig_layout.profile_memory_mib("NVIDIA-A100-SXM4-40GB", "7g.40gb", node) == 40320


def test_h100_nvl_is_read_from_its_own_lgip_and_lgipp():
    assert NVL not in mig_layout.MIG_MODELS and NVL not in GPU_MODELS
    memory = parse_table(NVL_TABLE)["gpus"][0]["memory_total_mib"]
    catalogue = mig_layout.catalogue_from_lgip(parse_gpu_instance_profiles(NVL_LGIP), NVL,
                                               parse_gpu_instance_placements(NVL_LGIPP), memory)
    assert (catalogue["compute_slices"], catalogue["memory_slices"]) == (7, 8)
    assert dict((name, (p["id"], p["max_instances"], p["memory_slices"], p["starts"]))
                for name, p in catalogue["profiles"].items()) == {
        "1g.12gb": (19, 7, 1, [0, 1, 2, 3, 4, 5, 6]), "1g.12gb+me": (20, 1, 1, [0, 1, 2, 3, 4, 5, 6]),
        "1g.24gb": (15, 4, 2, [0, 2, 4, 6]), "2g.24gb": (14, 3, 2, [0, 2, 4]), "3g.47gb": (9, 2, 4, [0, 4]),
        "4g.47gb": (5, 1, 4, [0]), "7g.94gb": (0, 1, 8, [0])}
    # go-nvlib's memory figures from the table's 95830 MiB are the names nvidia-smi prints (the GPU Operator's
    # H100 NVL configs use them too: NVIDIA/gpu-operator#900).
    assert dict((name, p["resource"]) for name, p in catalogue["profiles"].items()) == {
        "1g.12gb": "nvidia.com/mig-1g.12gb", "1g.12gb+me": "nvidia.com/mig-1g.12gb.me",
        "1g.24gb": "nvidia.com/mig-1g.24gb", "2g.24gb": "nvidia.com/mig-2g.24gb",
        "3g.47gb": "nvidia.com/mig-3g.47gb", "4g.47gb": "nvidia.com/mig-4g.47gb", "7g.94gb": "nvidia.com/mig-7g.94gb"}


NVL_LAYOUTS = {"version": "v1", "mig-configs": {
    # What the capture's machine did: -cgi 9,15,19 -C.
    "as-captured": [{"devices": "all", "mig-enabled": True, "mig-devices": {"3g.47gb": 1, "1g.24gb": 1, "1g.12gb": 1}}],
    # Compute slices add up to 7, but two 3g.47gb take all 8 memory slices.
    "too-much-memory": [{"devices": "all", "mig-enabled": True, "mig-devices": {"3g.47gb": 2, "1g.12gb": 1}}],
    # The H100 80GB's profile name: not one an H100 NVL offers.
    "h100-names": [{"devices": "all", "mig-enabled": True, "mig-devices": {"2g.20gb": 3}}],
    "all-1g.12gb": [{"devices": "all", "mig-enabled": True, "mig-devices": {"1g.12gb": 7}}]}}


def nvl_node(strategy="mixed"):
    """An H100 NVL node as read before fairgpu labels it: MIG disabled, GFD's whole-GPU labels (the shape of the
    real H100 label sets in fixtures/), one GPU as on the capture's Azure VM."""
    return real_node({"nvidia.com/gpu.product": NVL, "nvidia.com/gpu.count": "1", CONFIG: "all-disabled",
                      STATE: "success", "nvidia.com/mig.strategy": strategy}, {"nvidia.com/gpu": "1"})


def test_h100_nvl_layout_check_before_any_label_changes():
    before, reports = nvl_node(), {"gpu-node-0": NVL_REPORT}
    assert mig_nodes.node_errors(NVL_LAYOUTS, "as-captured", [before], "mixed", {}, reports) == []
    (error,) = mig_nodes.node_errors(NVL_LAYOUTS, "too-much-memory", [before], "mixed", {}, reports)
    assert error.startswith("node gpu-node-0 (1 x %s): " % NVL) and "cannot be placed on the 8 memory slices" in error
    (error,) = mig_nodes.node_errors(NVL_LAYOUTS, "h100-names", [before], "mixed", {}, reports)
    assert "does not offer MIG profile '2g.20gb'" in error and "2g.24gb" in error
    # The misfits of the configs not selected are warnings, not errors.
    warnings = mig_nodes.node_warnings(NVL_LAYOUTS, "as-captured", [before], "mixed", {}, reports)
    assert len(warnings) == 2 and all(w.startswith("not selected (nvidia.com/mig.config=as-captured)") for w in warnings)
    # -lgip alone names the profiles, not their placements: the message asks for -lgipp.
    (error,) = mig_nodes.node_errors(NVL_LAYOUTS, "as-captured", [before], "mixed", {},
                                     {"gpu-node-0": {"mig -lgip": NVL_LGIP}})
    assert error.startswith("node gpu-node-0 (1 x %s): " % NVL) and "no nvidia-smi mig -lgipp output" in error
    # No report at all: the model is known nowhere, and the message names it.
    (error,) = mig_nodes.node_errors(NVL_LAYOUTS, "as-captured", [before], "mixed")
    assert error.startswith("node gpu-node-0 (1 x %s): " % NVL)


def test_h100_nvl_wait_and_result_check_mixed():
    before = nvl_node()
    stale = relabel(before, "as-captured")
    status, message = mig_wait.node_progress(NVL_LAYOUTS, "as-captured", stale, "mixed", before, NVL_REPORT)
    assert status == "waiting" and "advertises nvidia.com/mig-3g.47gb None, expected 1" in message
    after = copy.deepcopy(stale)
    after["status"]["allocatable"] = {"nvidia.com/gpu": "0", "nvidia.com/mig-3g.47gb": "1",
                                      "nvidia.com/mig-1g.24gb": "1", "nvidia.com/mig-1g.12gb": "1"}
    status, message = mig_wait.node_progress(NVL_LAYOUTS, "as-captured", after, "mixed", before, NVL_REPORT)
    assert status == "waiting" and "label nvidia.com/mig-1g.12gb.count is None, expected 1" in message
    after["metadata"]["labels"].update(dict(("nvidia.com/mig-%s.count" % p, "1") for p in ("3g.47gb", "1g.24gb", "1g.12gb")))
    assert mig_wait.node_progress(NVL_LAYOUTS, "as-captured", after, "mixed", before, NVL_REPORT)[0] == "ready"
    reports = {"gpu-node-0": NVL_REPORT}
    assert mig_nodes.node_result_errors(NVL_LAYOUTS, "as-captured", [after], "mixed", [before], reports) == []
    after["status"]["allocatable"]["nvidia.com/mig-1g.12gb"] = "0"
    assert mig_nodes.node_result_errors(NVL_LAYOUTS, "as-captured", [after], "mixed", [before], reports) == [
        "node gpu-node-0: advertises nvidia.com/mig-1g.12gb 0, expected 1"]


def real_single_nvl_labels():
    """The nvidia.com/ labels of a real H100 NVL node under single with all-1g.12gb (NVIDIA/dcgm-exporter#397; the
    excerpt begins inside the JSON object, so its opening brace is added)."""
    return json.loads("{" + fixture("../gfd-labels-h100-nvl-single-all-1g.12gb-excerpt.txt"))


def test_h100_nvl_single_strategy_labels_are_the_ones_gfd_publishes():
    """GFD's labels for one MIG device under single (k8s-device-plugin v0.20.0 internal/lm/mig-strategy.go), as
    fairgpu derives them from the node's own -lgip for a model the built-in catalogue lacks, against a real node."""
    real = real_single_nvl_labels()
    catalogue = mig_nodes.node_catalogue(nvl_node("single"), NVL, NVL_REPORT)
    derived = mig_layout._mig_labels("nvidia.com/gpu", NVL, "1g.12gb", 7, catalogue)
    shared = sorted(set(derived) & set(real))
    assert shared == ["nvidia.com/gpu.engines.decoder", "nvidia.com/gpu.engines.encoder", "nvidia.com/gpu.engines.jpeg",
                      "nvidia.com/gpu.engines.ofa", "nvidia.com/gpu.memory", "nvidia.com/gpu.multiprocessors",
                      "nvidia.com/gpu.product", "nvidia.com/gpu.replicas", "nvidia.com/gpu.slices.ci",
                      "nvidia.com/gpu.slices.gi"]
    assert dict((key, derived[key]) for key in shared) == dict((key, real[key]) for key in shared)


def test_h100_nvl_single_strategy_wait_and_result_on_the_real_labels():
    before = nvl_node("single")
    after = real_node(real_single_nvl_labels(), {"nvidia.com/gpu": "7"})
    reports = {"gpu-node-0": NVL_REPORT}
    assert mig_wait.node_progress(NVL_LAYOUTS, "all-1g.12gb", after, "single", before, NVL_REPORT)[0] == "ready"
    assert mig_nodes.node_result_errors(NVL_LAYOUTS, "all-1g.12gb", [after], "single", [before], reports) == []
    # The label changed, the device plugin still advertises the whole GPU: waited out, not taken for the answer.
    status, message = mig_wait.node_progress(NVL_LAYOUTS, "all-1g.12gb", relabel(before, "all-1g.12gb"), "single",
                                             before, NVL_REPORT)
    assert status == "waiting" and "advertises nvidia.com/gpu 1, expected 7" in message
    short = copy.deepcopy(after)
    short["status"]["allocatable"]["nvidia.com/gpu"] = "6"
    assert mig_nodes.node_result_errors(NVL_LAYOUTS, "all-1g.12gb", [short], "single", [before], reports) == [
        "node gpu-node-0: advertises nvidia.com/gpu 6, expected 7"]


POD_TABLES = {"r510": fixture("table-r510-a100-80gb-in-a-mig-pod-excerpt.txt"),
              "r535": fixture("table-r535-a100-80gb-in-a-mig-pod-excerpt.txt"),
              "r580": fixture("table-r580-rtx-pro-6000-in-a-mig-container.txt")}


@pytest.mark.parametrize("name, driver, index", [("r510", "510.108.03", 0), ("r535", "535.104.05", 3),
                                                 ("r580", "580.105.08", 0)])
def test_a_pod_given_only_mig_devices_sees_no_gpu_memory(name, driver, index):
    """Inside a pod that holds MIG devices (where fairgpu's validation and the GPU Operator's pods run nvidia-smi)
    the parent GPU's Memory-Usage is N/A (ollama/ollama#1500, NVIDIA/DCGM#152). Both real captures used to stop the
    table parser ("expected '<used>MiB / <total>MiB'"); N/A is now a value not reported, None, never 0."""
    table = parse_table(POD_TABLES[name])
    assert table["driver_version"] == driver
    (gpu,) = table["gpus"]
    assert (gpu["index"], gpu["mig_mode"], gpu["utilization"]) == (index, "Enabled", None)
    assert (gpu["memory_used_mib"], gpu["memory_total_mib"]) == (None, None)
    # A cell that is neither is still refused, naming both forms.
    broken, replaced = re.subn(r"\|(\s+)N/A(\s+)\|(\s+N/A\s+Default)", r"|\1???\2|\3", POD_TABLES[name], count=1)
    assert replaced == 1
    with pytest.raises(NvidiaSmiParseError, match="expected '<used>MiB / <total>MiB' or 'N/A'"):
        parse_table(broken)


def test_query_gpu_in_a_mig_pod_has_no_memory_figure():
    """ollama/ollama#932: in a container with a MIG device, `nvidia-smi --query-gpu=memory.free
    --format=csv,noheader,nounits` prints "[Insufficient Permissions]": not reported, None (it used to come back
    as that string, or with a unit in the header as a parse error)."""
    assert parse_query_gpu("[Insufficient Permissions]\n", fields=["memory.free"]) == [{"memory.free": None}]
    assert parse_query_gpu("memory.free [MiB]\n[Insufficient Permissions]\n") == [{"memory.free": None}]


RTX = "NVIDIA-RTX-PRO-6000-Blackwell-Max-Q-Workstation-Edition"
RTX_LGIP = fixture("mig-lgip-rtx-pro-6000-r580.txt")


def test_r580_no_mig_devices_found_is_a_state_and_graphics_processes_have_no_instance():
    """R580 prints "No MIG devices found" inside the MIG devices box when MIG is on without instances; the real
    capture used to stop the parser ("not a row of the nvidia-smi 'MIG devices' table"). Its processes are graphics
    ones outside any MIG device: GI and CI N/A, None."""
    text = fixture("table-r580-rtx-pro-6000-mig-on-no-instances.txt")
    table = parse_table(text)
    assert [(g["name"], g["mig_mode"], g["memory_total_mib"]) for g in table["gpus"]] == [
        ("NVIDIA RTX PRO 6000 Blac...", "Enabled", 97887)]
    assert table["mig_devices"] == [] and parse_mig_devices(text) == []
    assert [(p["pid"], p["type"], p["gi_id"], p["ci_id"], p["name"], p["memory_mib"]) for p in table["processes"]] == [
        (2019, "G", None, None, "/usr/lib/xorg/Xorg", 10), (2154, "G", None, None, "/usr/bin/gnome-shell", 17)]
    # The same machine in a container given the 1g.24gb it then created: one device, 24192 MiB, as -lgip says.
    (device,) = parse_table(fixture("table-r580-rtx-pro-6000-in-a-mig-container.txt"))["mig_devices"]
    lgip = by_id(RTX_LGIP)
    assert (device["gi_id"], device["memory_total_mib"], device["sm"]) == (3, lgip[14]["memory_mib"], lgip[14]["sm"])


def test_every_resource_name_form_from_a_real_lgip():
    """The RTX PRO 6000's -lgip prints every profile suffix there is: the device plugin's names for them
    (k8s-device-plugin v0.20.0 internal/rm/rm.go, go-nvlib v0.12.0 mig_profile.go), matched by profile ID, with
    go-nvlib's memory figures from the GPU's 97887 MiB equal to the printed ones."""
    rows = parse_gpu_instance_profiles(RTX_LGIP)
    names = resources.lgip_resources(rows, 97887)
    assert names == {
        14: "nvidia.com/mig-1g.24gb", 21: "nvidia.com/mig-1g.24gb.me", 47: "nvidia.com/mig-1g.24gb.gfx",
        65: "nvidia.com/mig-1g.24gb.me.all", 67: "nvidia.com/mig-1g.24gb-me", 5: "nvidia.com/mig-2g.48gb",
        35: "nvidia.com/mig-2g.48gb.gfx", 64: "nvidia.com/mig-2g.48gb.me.all", 66: "nvidia.com/mig-2g.48gb-me",
        0: "nvidia.com/mig-4g.96gb", 32: "nvidia.com/mig-4g.96gb.gfx"}
    assert names == resources.lgip_resources(rows)
    assert all(resources.is_mig_resource(name) for name in names.values())


def test_rtx_pro_6000_without_lgipp_is_asked_for_it():
    """No public -lgipp of an RTX PRO 6000 was found: from its -lgip alone the layout check cannot place its
    instances, and says so instead of guessing."""
    before = real_node({"nvidia.com/gpu.product": RTX, "nvidia.com/gpu.count": "1", CONFIG: "all-disabled",
                        STATE: "success", "nvidia.com/mig.strategy": "mixed"}, {"nvidia.com/gpu": "1"})
    layout = {"version": "v1", "mig-configs": {
        "all-1g.24gb": [{"devices": "all", "mig-enabled": True, "mig-devices": {"1g.24gb": 4}}]}}
    (error,) = mig_nodes.node_errors(layout, "all-1g.24gb", [before], "mixed", {},
                                     {"gpu-node-0": {"mig -lgip": RTX_LGIP}})
    assert error.startswith("node gpu-node-0 (1 x %s): " % RTX) and "no nvidia-smi mig -lgipp output" in error


def test_capacity_and_flavor_under_single_read_the_mig_product_gfd_publishes():
    """Issue 13 item 6, the tenants' side: under single with MIG on, GFD's nvidia.com/gpu.product is the MIG device's
    (real H100 NVL node, NVIDIA/dcgm-exporter#397) and the MIG devices are nvidia.com/gpu. The capacity is read per
    that label, and the ResourceFlavor selects the nodes by the very value the node carries, so the nodeSelector
    Kueue adds to admitted pods matches it."""
    from ansible_collections.fairgpu.tenancy.plugins.module_utils.kueue.objects import flavor_object, gpu_flavors
    from ansible_collections.fairgpu.tenancy.plugins.module_utils.tenants.plan import cluster_capacity

    labels = real_single_nvl_labels()
    node = {"metadata": {"name": "gpu-node-0", "labels": labels},
            "status": {"allocatable": {"cpu": "40", "memory": "320Gi", "nvidia.com/gpu": "7", "pods": "110"},
                       "conditions": [{"type": "Ready", "status": "True"}]}}
    capacity = cluster_capacity([node])
    assert capacity["products"] == {"NVIDIA-H100-NVL-MIG-1g.12gb": {"nvidia.com/gpu": 7}}
    assert "NVIDIA-H100-NVL-MIG-1g.12gb" not in capacity["sharing"], "replicas 1: not a shared GPU"
    (flavor,) = gpu_flavors(capacity["products"])
    selector = flavor_object(flavor)["spec"]["nodeLabels"]
    assert all(labels.get(key) == value for key, value in selector.items())


def test_a_layout_named_for_another_sku_is_refused_by_name_from_lgip_alone():
    """NVIDIA/mig-parted#227: on some GB200s mig-parted fails because their profiles are named 1g.23gb where the
    GPU Operator's GB200 configs (NVIDIA/gpu-operator#1303) say 1g.24gb. Without -lgipp the placements are unknown,
    but a profile the node's own -lgip does not list is what is wrong, and the message says so and what it offers;
    a layout the -lgip does name still asks for -lgipp."""
    gb200 = real_node({"nvidia.com/gpu.product": "NVIDIA-GB200", "nvidia.com/gpu.count": "4", CONFIG: "all-disabled",
                       STATE: "success", "nvidia.com/mig.strategy": "mixed"}, {"nvidia.com/gpu": "4"})
    reports = {"gpu-node-0": {"mig -lgip": fixture("mig-lgip-gb200-excerpt.txt")}}
    layouts = {"version": "v1", "mig-configs": {
        "all-1g.24gb": [{"devices": "all", "mig-enabled": True, "mig-devices": {"1g.24gb": 7}}],
        "all-1g.23gb": [{"devices": "all", "mig-enabled": True, "mig-devices": {"1g.23gb": 7}}],
        # An entry for another model (its PCI device ID) is not judged by this node's names.
        "filtered": [{"device-filter": "0x2B8510DE", "devices": "all", "mig-enabled": True,
                      "mig-devices": {"1g.24gb": 7}}]}}
    assert mig_nodes.node_errors(layouts, "all-1g.24gb", [gb200], "mixed", {}, reports) == [
        "node gpu-node-0 (4 x NVIDIA-GB200): mig_config_selected 'all-1g.24gb' asks for MIG profile '1g.24gb', which "
        "the node's nvidia-smi mig -lgip does not list; it offers 1g.23gb, 1g.23gb+me, 1g.47gb"]
    for name in ("all-1g.23gb", "filtered"):
        (error,) = mig_nodes.node_errors(layouts, name, [gb200], "mixed", {}, reports)
        assert "no nvidia-smi mig -lgipp output" in error


def test_a_real_processes_box_with_gpu_and_compute_instance_ids():
    """No public 5xx table shows processes on MIG devices (every capture found says "No running processes found" or
    lists graphics processes outside MIG); this R510 box does: GPU 0 is whole (GI/CI N/A, None), the others run
    processes on GPU instances 3, 4 and 5."""
    rows = parse_processes(fixture("processes-box-a100-80gb-r510-mig.txt"))
    assert [(r["gpu"], r["gi_id"], r["ci_id"], r["pid"], r["type"], r["name"], r["memory_mib"]) for r in rows] == [
        (0, None, None, 23824, "C", "python", 10725), (0, None, None, 33724, "C", "tritonserver", 12247),
        (1, 3, 0, 34965, "C", "python", 14195), (1, 3, 0, 56016, "C", "python3", 149),
        (1, 5, 0, 46505, "C", "python", 9807), (2, 3, 0, 26294, "C", "python", 15191),
        (3, 4, 0, 46064, "C", "python", 9833)]
    # The same parser reads the box inside a whole table, and refuses text without one, naming what it got.
    assert parse_processes(fixture("table-r580-rtx-pro-6000-mig-on-no-instances.txt"))[0]["name"] == "/usr/lib/xorg/Xorg"
    with pytest.raises(NvidiaSmiParseError, match="not the 'Processes' box .*this is nvidia-smi mig -lgip output"):
        parse_processes(RTX_LGIP)
