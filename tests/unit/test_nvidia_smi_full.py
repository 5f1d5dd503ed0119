"""The full nvidia-smi table, format refusals, "nothing here" states, -lgipp, and reading a node without the
built-in catalogue (issue 13, items 1 and 2). Real captures are in fixtures/nvidia-smi/ with their URLs."""

import pytest

from ansible_collections.fairgpu.tenancy.plugins.module_utils.mig.info import mig_info
from ansible_collections.fairgpu.tenancy.plugins.module_utils.mig.layout import (
    MigLayoutError, catalogue_from_lgip, mig_config_errors)
from ansible_collections.fairgpu.tenancy.plugins.module_utils.mig.nvidia_smi import (
    NvidiaSmiParseError, parse_compute_instances, parse_gpu_instance_placements, parse_gpu_instance_profiles,
    parse_gpu_instances, parse_list, parse_mig_devices, parse_query_gpu, parse_table)
from test_nvidia_smi import fixture

TABLE_R535 = fixture("table-r535-a800-mig-enabled.txt")
TABLE_R580 = fixture("table-r580-a100-mig-disabled.txt")
LGIP = fixture("mig-lgip-h100-pcie-r570-wide.txt")
# `nvidia-smi mig -lgipp` of a real 7-slice GPU (an H100 NVL, driver 560; the lines are those of the MIG User Guide's
# example): fixtures/nvidia-smi/mig-lgipp-h100-nvl-r560.txt with its URL. It was typed in from the guide before.
LGIPP = fixture("mig-lgipp-h100-nvl-r560.txt")


def test_table_r535_mig_gpu_has_no_utilisation():
    table = parse_table(TABLE_R535)
    assert (table["driver_version"], table["cuda_version"]) == ("535.86.10", "12.2")
    (gpu,) = table["gpus"]
    assert gpu["name"] == "NVIDIA A800-SXM4-80GB" and gpu["mig_mode"] == "Enabled"
    # N/A under MIG is "not reported", never 0.
    assert gpu["utilization"] is None and gpu["memory_total_mib"] == 81920 and gpu["memory_used_mib"] == 36537


def test_table_r580_two_gpus_mig_disabled():
    table = parse_table(TABLE_R580)
    assert table["driver_version"] == "580.126.09"
    assert [(g["index"], g["utilization"], g["mig_mode"], g["compute_mode"]) for g in table["gpus"]] == [
        (0, 11, "Disabled", "E. Process"), (1, 7, "Disabled", "E. Process")]


def test_mig_devices_box():
    devices = parse_mig_devices(fixture("mig-devices-box-a100-r470-era.txt"))
    assert [(d["gpu"], d["gi_id"], d["ci_id"], d["mig_device"], d["memory_total_mib"]) for d in devices] == [
        (1, 3, 0, 0, 19968), (1, 5, 0, 1, 19968), (1, 6, 0, 2, 19968)]


def test_table_with_mig_devices_and_processes():
    # Real-shaped (the R535 layout of the captures above): MIG devices and a process on GI 1 / CI 0.
    text = TABLE_R535 + """
+---------------------------------------------------------------------------------------+
| MIG devices:                                                                          |
+------------------+--------------------------------+-----------+-----------------------+
| GPU  GI  CI  MIG |                   Memory-Usage |        Vol|      Shared           |
|      ID  ID  Dev |                     BAR1-Usage | SM     Unc| CE ENC DEC OFA JPG    |
|                  |                                |        ECC|                       |
|==================+================================+===========+=======================|
|  0    1   0   0  |           36537MiB / 40192MiB  | 42      0 |  3   0    2    0    0 |
|                  |               0MiB / 65535MiB  |           |                       |
+------------------+--------------------------------+-----------+-----------------------+

+---------------------------------------------------------------------------------------+
| Processes:                                                                            |
|  GPU   GI   CI        PID   Type   Process name                            GPU Memory |
|        ID   ID                                                             Usage      |
|=======================================================================================|
|    0    1    0      12345      C   python3                                   36524MiB |
+---------------------------------------------------------------------------------------+
"""
    table = parse_table(text)
    assert table["mig_devices"][0]["gi_id"] == 1 and table["mig_devices"][0]["memory_total_mib"] == 40192
    assert table["processes"] == [{"gpu": 0, "gi_id": 1, "ci_id": 0, "pid": 12345, "type": "C", "name": "python3",
                                   "memory_mib": 36524}]
    no_processes = parse_table(TABLE_R580 + "\n+----+\n| Processes: |\n|  GPU   GI   CI   PID   Type   Process name  "
                               "GPU Memory |\n|=====|\n|  No running processes found  |\n+----+\n")
    assert no_processes["processes"] == []


OTHER = {"-L": fixture("L-h100-pcie-3g-3x1g.txt"), "lgip": LGIP, "lgi": fixture("mig-lgi-h100-pcie-3g-3x1g.txt"),
         "table": TABLE_R535, "lgipp": LGIPP}


@pytest.mark.parametrize("parse,expected,wrong", [
    (parse_list, "nvidia-smi -L", "table"), (parse_list, "nvidia-smi -L", "lgip"),
    (parse_gpu_instance_profiles, "nvidia-smi mig -lgip", "table"),
    (parse_gpu_instance_profiles, "nvidia-smi mig -lgip", "-L"),
    (parse_gpu_instances, "nvidia-smi mig -lgi", "lgip"), (parse_compute_instances, "nvidia-smi mig -lci", "lgi"),
    (parse_gpu_instance_placements, "nvidia-smi mig -lgipp", "lgip"),
    (parse_query_gpu, "nvidia-smi --query-gpu", "table"), (parse_query_gpu, "nvidia-smi --query-gpu", "-L"),
    (parse_table, "full nvidia-smi table", "-L"), (parse_table, "full nvidia-smi table", "lgipp"),
    (parse_mig_devices, "'MIG devices' box", "lgi"),
])
def test_every_parser_refuses_another_format_and_names_its_own(parse, expected, wrong):
    with pytest.raises(NvidiaSmiParseError, match="not (the )?%s" % expected):
        parse(OTHER[wrong])


@pytest.mark.parametrize("parse", [parse_gpu_instance_profiles, parse_gpu_instances, parse_compute_instances,
                                   parse_gpu_instance_placements])
@pytest.mark.parametrize("answer", ["No MIG-enabled devices found.", "No GPU instances found.",
                                    "No GPU instances found: Not Found"])
def test_nothing_here_is_a_state(parse, answer):
    assert parse(answer + "\n") == []


def test_no_devices_is_a_state():
    assert parse_list("No devices were found\n") == []


def test_lgipp():
    rows = parse_gpu_instance_placements(LGIPP)
    assert rows[0] == {"gpu": 0, "profile_id": 19, "starts": [0, 1, 2, 3, 4, 5, 6], "size": 1}
    assert rows[-1] == {"gpu": 0, "profile_id": 0, "starts": [0], "size": 8}


NEW_MODEL = "NVIDIA-Future-GPU"  # a model the catalogue lacks: a real 7-slice -lgip (H100 PCIe) and -lgipp (H100 NVL)


def test_model_outside_the_catalogue_is_checked_from_its_own_report():
    catalogue = catalogue_from_lgip(parse_gpu_instance_profiles(LGIP), NEW_MODEL, parse_gpu_instance_placements(LGIPP))
    assert (catalogue["compute_slices"], catalogue["memory_slices"]) == (7, 8)
    ok = {"version": "v1", "mig-configs": {"x": [{"devices": "all", "mig-enabled": True,
                                                 "mig-devices": {"3g.40gb": 1, "1g.10gb": 3}}]}}
    assert mig_config_errors(ok, NEW_MODEL, 1, "mixed", catalogue) == []
    bad = {"version": "v1", "mig-configs": {"x": [{"devices": "all", "mig-enabled": True,
                                                  "mig-devices": {"3g.40gb": 2, "1g.10gb": 1}}]}}
    (error,) = mig_config_errors(bad, NEW_MODEL, 1, "mixed", catalogue)
    assert "cannot be placed on the 8 memory slices" in error


def test_observed_state_with_driver_names_needs_no_catalogue():
    # A100-80GB drivers print the full profile as 7g.79gb; the device plugin names it mig-7g.80gb (go-nvlib): seen in
    # the field, nebuly-ai/nos#51 (the plugin's log "Starting GRPC server for 'nvidia.com/mig-7g.80gb'" while the
    # profile asked for was 7g.79gb). No public -lgip printing 7g.79gb was found, so a real R570 -lgip is renamed.
    outputs = {"-L": "GPU 0: NVIDIA Future GPU (UUID: GPU-00000001-0000-4000-8000-000000000001)\n"
                     "  MIG 7g.79gb     Device  0: (UUID: MIG-00000002-0000-4000-8000-000000000002)\n",
               "mig -lgi": "+----------------------------------------------------+\n"
                           "| GPU instances:                                     |\n"
                           "| GPU   Name             Profile  Instance   Placement  |\n"
                           "|                          ID       ID       Start:Size |\n"
                           "|====================================================|\n"
                           "|   0  MIG 7g.79gb          0        0          0:8     |\n"
                           "+----------------------------------------------------+\n",
               "mig -lgip": LGIP.replace("MIG 7g.80gb ", "MIG 7g.79gb "),
               "mig -lgipp": LGIPP,
               "nvidia-smi": TABLE_R535.replace("NVIDIA A800-SXM4-80GB", "NVIDIA Future GPU        ")}
    result = mig_info(outputs)
    assert result["product"] == "NVIDIA-Future-GPU" and result["profile_counts"] == {"7g.79gb": 1}
    assert result["mig_enabled"] == [True] and result["profiles_source"] == "node report"
    assert result["resources"]["mixed"] == {"nvidia.com/gpu": 0, "nvidia.com/mig-7g.80gb": 1}
    assert result["resources"]["single"] == {"nvidia.com/gpu": 1}
    config = {"version": "v1", "mig-configs": {"full": [{"devices": "all", "mig-enabled": True,
                                                        "mig-devices": {"7g.79gb": 1}}]}}
    assert mig_info(outputs, config, "full")["matches"] is True


def test_unknown_model_without_its_report_says_what_is_missing():
    outputs = {"-L": "GPU 0: NVIDIA Future GPU (UUID: GPU-00000001-0000-4000-8000-000000000001)\n"}
    assert mig_info(outputs)["layout"] == [None]
    config = {"version": "v1", "mig-configs": {"off": [{"devices": "all", "mig-enabled": False}]}}
    with pytest.raises(MigLayoutError, match="no MIG profiles known for GPU product 'NVIDIA-Future-GPU'"):
        mig_info(outputs, config, "off")


def test_simulated_lgipp_reads_back_as_the_catalogue_placements():
    from ansible_collections.fairgpu.tenancy.plugins.module_utils.mig.layout import MIG_MODELS
    from ansible_collections.fairgpu.tenancy.plugins.module_utils.lab.nvidia_smi import simulated_nvidia_smi

    outputs = simulated_nvidia_smi("gpu-node-0", "NVIDIA-H100-80GB-HBM3", 2, {"2g.20gb": 2})
    rows = parse_gpu_instance_placements(outputs["mig -lgipp"])
    model = MIG_MODELS["NVIDIA-H100-80GB-HBM3"]
    assert [(r["gpu"], r["profile_id"], r["starts"], r["size"]) for r in rows] == [
        (gpu, p["id"], p["starts"], p["memory_slices"]) for gpu in (0, 1) for p in model["profiles"].values()]
    # The real -lgipp of a 7-slice GPU (H100 NVL, driver 560) is what the simulation prints for the H100.
    assert outputs["mig -lgipp"].splitlines()[:7] == [line for line in LGIPP.splitlines() if line]
    assert simulated_nvidia_smi("gpu-node-0", "NVIDIA-H100-80GB-HBM3", 1)["mig -lgipp"] == "No MIG-enabled devices found.\n"
    result = mig_info(outputs)
    assert result["profiles_source"] == "node report"
    assert result["resources"]["mixed"] == {"nvidia.com/gpu": 0, "nvidia.com/mig-2g.20gb": 4}
