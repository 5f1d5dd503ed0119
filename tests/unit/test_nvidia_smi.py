"""nvidia-smi parsers against the real outputs in fixtures/nvidia-smi/ (copied from shared/fixtures/nvidia-smi/),
and the simulated nvidia-smi written in the same formats and read back."""

import os
import re

import pytest
from hypothesis import given, settings, strategies as st

from ansible_collections.fairgpu.tenancy.plugins.module_utils.mig.catalog import GPU_MODELS
from ansible_collections.fairgpu.tenancy.plugins.module_utils.mig.layout import (
    MIG_MODELS,
    MigLayoutError,
    catalogue_from_lgip,
    per_gpu_layout,
    placement,
)
from ansible_collections.fairgpu.tenancy.plugins.module_utils.mig.nvidia_smi import (
    NvidiaSmiParseError,
    mig_tree,
    parse_compute_instances,
    parse_gpu_instance_profiles,
    parse_gpu_instances,
    parse_list,
    parse_query_gpu,
    profile_counts,
)
from ansible_collections.fairgpu.tenancy.plugins.module_utils.lab.nvidia_smi import (
    QUERY_GPU,
    simulated_gpus,
    simulated_nvidia_smi,
)

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures", "nvidia-smi")
GPU = "GPU-00000001-0000-4000-8000-000000000001"


def fixture(name):
    """A fixture's output without its leading '#' comment lines (what ran, where it was published)."""
    with open(os.path.join(FIXTURES, name)) as handle:
        return "".join(line for line in handle if not line.startswith("#"))


def test_every_fixture_is_covered_by_a_test():
    here = os.path.dirname(__file__)
    tested = set()
    for name in os.listdir(here):
        if name.startswith("test_") and name.endswith(".py"):
            with open(os.path.join(here, name)) as handle:
                tested |= set(re.findall(r'fixture\("([^"]+)"\)', handle.read()))
    tested |= set(LGIP) | set(LIST_PROFILES)
    assert set(os.listdir(FIXTURES)) <= tested


LIST_PROFILES = {
    "L-h100-80gb-mixed-all-balanced.txt": ("NVIDIA H100 80GB HBM3", ["3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"]),
    "L-h100-80gb-single-all-1g.10gb.txt": ("NVIDIA H100 80GB HBM3", ["1g.10gb"] * 7),
    "L-h100-pcie-3g-3x1g.txt": ("NVIDIA H100 PCIe", ["3g.40gb", "1g.10gb", "1g.10gb", "1g.10gb"]),
}


@pytest.mark.parametrize("name", sorted(LIST_PROFILES))
def test_list_modern_uuids(name):
    model, profiles = LIST_PROFILES[name]
    (gpu,) = parse_list(fixture(name))
    assert (gpu["index"], gpu["name"], gpu["uuid"]) == (0, model, GPU)
    assert [d["profile"] for d in gpu["mig_devices"]] == profiles
    assert [d["index"] for d in gpu["mig_devices"]] == list(range(len(profiles)))
    # The fixtures number MIG UUIDs from 2 in listing order; modern UUIDs carry no GI/CI IDs.
    assert [d["uuid"] for d in gpu["mig_devices"]] == [
        "MIG-%08d-0000-4000-8000-%012d" % (n, n) for n in range(2, 2 + len(profiles))]
    assert {(d["gi_id"], d["ci_id"]) for d in gpu["mig_devices"]} == {(None, None)}


def test_list_legacy_uuids_carry_instance_ids():
    (gpu,) = parse_list(fixture("L-a100-40gb-legacy-r450-uuid.txt"))
    assert gpu["name"] == "A100-SXM4-40GB"
    assert [(d["index"], d["profile"], d["gi_id"], d["ci_id"]) for d in gpu["mig_devices"]] == [
        (n, "1g.5gb", 7 + n, 0) for n in range(7)]
    assert gpu["mig_devices"][3]["uuid"] == "MIG-%s/10/0" % GPU


def test_list_of_two_containers_is_merged_per_gpu():
    gpus = parse_list(fixture("L-h200-two-containers.txt"))
    assert [(g["index"], g["uuid"], [d["profile"] for d in g["mig_devices"]]) for g in gpus] == [
        (0, GPU, ["1g.18gb"]), (0, GPU, ["2g.35gb"])]
    assert profile_counts(gpus) == [
        {"index": 0, "uuid": GPU, "name": "NVIDIA H200", "profiles": {"1g.18gb": 1, "2g.35gb": 1}}]


def test_profile_counts_per_gpu():
    counts = profile_counts(parse_list(fixture("L-h100-80gb-mixed-all-balanced.txt")))
    assert counts[0]["profiles"] == {"3g.40gb": 1, "2g.20gb": 1, "1g.10gb": 2}


# profile: (ID, free, total, GiB, MiB, SM, DEC, ENC, CE, JPEG, OFA)
LGIP = {
    "mig-lgip-h100-pcie-r525.txt": {
        "1g.10gb": (19, 7, 7, 9.62, 9856, 14, 1, 0, 1, 1, 0),
        "1g.10gb+me": (20, 1, 1, 9.62, 9856, 14, 1, 0, 1, 1, 1),
        "1g.20gb": (15, 4, 4, 19.50, 19968, 14, 1, 0, 1, 1, 0),
        "2g.20gb": (14, 3, 3, 19.50, 19968, 30, 2, 0, 2, 2, 0),
        "3g.40gb": (9, 2, 2, 39.25, 40192, 46, 3, 0, 3, 3, 0),
        "4g.40gb": (5, 1, 1, 39.25, 40192, 62, 4, 0, 4, 4, 0),
        "7g.80gb": (0, 1, 1, 79.00, 80896, 114, 7, 0, 8, 7, 1),
    },
    "mig-lgip-h100-pcie-r570-wide.txt": {
        "1g.10gb": (19, 7, 7, 9.75, 9984, 14, 1, 0, 1, 1, 0),
        "1g.10gb+me": (20, 1, 1, 9.75, 9984, 14, 1, 0, 1, 1, 1),
        "1g.20gb": (15, 4, 4, 19.62, 20096, 14, 1, 0, 1, 1, 0),
        "2g.20gb": (14, 3, 3, 19.62, 20096, 30, 2, 0, 2, 2, 0),
        "3g.40gb": (9, 2, 2, 39.50, 40448, 46, 3, 0, 3, 3, 0),
        "4g.40gb": (5, 1, 1, 39.50, 40448, 62, 4, 0, 4, 4, 0),
        "7g.80gb": (0, 1, 1, 79.25, 81152, 114, 7, 0, 8, 7, 1),
    },
}
LGIP_KEYS = ("profile_id", "instances_free", "instances_total", "memory_gib", "memory_mib",
             "sm", "dec", "enc", "ce", "jpeg", "ofa")


@pytest.mark.parametrize("name", sorted(LGIP))
def test_gpu_instance_profiles_of_two_driver_generations(name):
    rows = parse_gpu_instance_profiles(fixture(name))
    assert [row["profile"] for row in rows] == list(LGIP[name])
    for row in rows:
        assert (row["gpu"], row["p2p"]) == (0, False)
        assert tuple(row[key] for key in LGIP_KEYS) == LGIP[name][row["profile"]], row["profile"]


def test_profile_memory_matches_what_gfd_reports():
    # GFD's nvidia.com/mig-<profile>.memory on a real H100 (driver 550): the -lgip GiB figures of the r570
    # layout, rounded to 64 MiB, give the same MiB.
    rows = {row["profile"]: row for row in parse_gpu_instance_profiles(fixture("mig-lgip-h100-pcie-r570-wide.txt"))}
    assert (rows["1g.10gb"]["memory_mib"], rows["2g.20gb"]["memory_mib"]) == (9984, 20096)


def squeeze(text):
    return "\n".join(re.sub(r" +", " ", line) for line in text.splitlines())


@pytest.mark.parametrize("name", sorted(LGIP) + ["mig-lgi-h100-pcie-3g-3x1g.txt", "mig-lci-a100-40gb-3x1c.3g.20gb.txt"])
def test_tables_do_not_depend_on_column_widths(name):
    parse = {"mig-lgip": parse_gpu_instance_profiles, "mig-lgi-": parse_gpu_instances,
             "mig-lci-": parse_compute_instances}[name[:8]]
    assert parse(squeeze(fixture(name))) == parse(fixture(name))


@settings(max_examples=50, deadline=None)
@given(st.lists(st.integers(min_value=1, max_value=6), min_size=200, max_size=200))
def test_any_spacing_between_values_parses_the_same(widths):
    text = fixture("mig-lgip-h100-pcie-r570-wide.txt")
    spaces = iter(widths * 20)
    respaced = re.sub(r"(?<=\S) +(?=\S)", lambda _: " " * next(spaces), text)
    assert parse_gpu_instance_profiles(respaced) == parse_gpu_instance_profiles(text)


def test_gpu_instances_a100_all_1g():
    rows = parse_gpu_instances(fixture("mig-lgi-a100-40gb-7x1g.5gb.txt"))
    assert rows == [{"gpu": 0, "profile": "1g.5gb", "profile_id": 19, "id": 7 + n,
                     "placement": {"start": n, "size": 1}} for n in range(7)]


def test_gpu_instances_h100_pcie():
    rows = parse_gpu_instances(fixture("mig-lgi-h100-pcie-3g-3x1g.txt"))
    assert [(r["profile"], r["profile_id"], r["id"], r["placement"]["start"], r["placement"]["size"])
            for r in rows] == [
        ("1g.10gb", 19, 7, 0, 1), ("1g.10gb", 19, 8, 1, 1), ("1g.10gb", 19, 9, 2, 1), ("3g.40gb", 9, 2, 4, 4)]


def test_compute_instances_without_placement_column():
    rows = parse_compute_instances(fixture("mig-lci-a100-40gb-3x1c.3g.20gb.txt"))
    assert rows == [{"gpu": 0, "gi_id": 1, "profile": "1c.3g.20gb", "profile_id": 0, "id": n, "placement": None}
                    for n in range(3)]


# The layout older drivers print (MIG User Guide, `nvidia-smi mig -lci` after `-cgi 9,9 -C`).
LCI_WITH_PLACEMENT = """\
+--------------------------------------------------------------------+
| Compute instances:                                                 |
| GPU     GPU       Name             Profile   Instance   Placement  |
|       Instance                       ID        ID       Start:Size |
|         ID                                                         |
|====================================================================|
|   0      1       MIG 3g.20gb          2         0          0:3     |
+--------------------------------------------------------------------+
|   0      2       MIG 3g.20gb          2         0          0:3     |
+--------------------------------------------------------------------+
"""


def test_compute_instances_with_placement_column():
    rows = parse_compute_instances(LCI_WITH_PLACEMENT)
    assert [(r["gi_id"], r["profile"], r["profile_id"], r["id"], r["placement"]) for r in rows] == [
        (1, "3g.20gb", 2, 0, {"start": 0, "size": 3}), (2, "3g.20gb", 2, 0, {"start": 0, "size": 3})]


@pytest.mark.parametrize("text", ["", "No MIG-enabled devices found.", "No GPU instances found: Not Found\n",
                                  "No compute instances found: Not Found"])
def test_nothing_to_list(text):
    assert parse_gpu_instances(text) == [] and parse_compute_instances(text) == []
    assert parse_gpu_instance_profiles(text) == []


def test_query_gpu_fixture():
    assert parse_query_gpu(fixture("query-gpu-mig-mode-h100-pcie.txt")) == [
        {"pci.bus_id": "00000000:01:00.0", "mig.mode.current": "Enabled"}]


def test_query_gpu_units_and_missing_values():
    text = ("index, name, memory.total [MiB], mig.mode.current, power.draw [W], clocks.max.sm [MHz]\n"
            "0, NVIDIA H100 PCIe, 81559 MiB, Enabled, 61.27 W, 1755 MHz\n"
            "1, Tesla T4, 15360 MiB, [N/A], [Not Supported], N/A\n")
    assert parse_query_gpu(text) == [
        {"index": 0, "name": "NVIDIA H100 PCIe", "memory.total": 81559, "mig.mode.current": "Enabled",
         "power.draw": 61.27, "clocks.max.sm": 1755},
        {"index": 1, "name": "Tesla T4", "memory.total": 15360, "mig.mode.current": None, "power.draw": None,
         "clocks.max.sm": None},
    ]


def test_query_gpu_nounits_and_noheader():
    nounits = "index, memory.total [MiB], mig.mode.pending\n0, 81559, Disabled\n"
    assert parse_query_gpu(nounits) == [{"index": 0, "memory.total": 81559, "mig.mode.pending": "Disabled"}]
    noheader = "0, 81559 MiB, Disabled\n1, 81559 MiB, Enabled\n"
    rows = parse_query_gpu(noheader, fields=["index", "memory.total", "mig.mode.pending"])
    assert rows[1] == {"index": 1, "memory.total": 81559, "mig.mode.pending": "Enabled"}


def test_tree_of_h100_pcie_from_list_and_gpu_instances():
    (gpu,) = mig_tree(parse_list(fixture("L-h100-pcie-3g-3x1g.txt")),
                      parse_gpu_instances(fixture("mig-lgi-h100-pcie-3g-3x1g.txt")))
    assert [(gi["id"], gi["profile"], gi["placement"]["start"], [ci["uuid"][-1] for ci in gi["compute_instances"]])
            for gi in gpu["gpu_instances"]] == [
        (2, "3g.40gb", 4, ["2"]), (7, "1g.10gb", 0, ["3"]), (8, "1g.10gb", 1, ["4"]), (9, "1g.10gb", 2, ["5"])]


def test_tree_legacy_uuids_agree_with_gpu_instances():
    gpus = parse_list(fixture("L-a100-40gb-legacy-r450-uuid.txt"))
    (with_lgi,) = mig_tree(gpus, parse_gpu_instances(fixture("mig-lgi-a100-40gb-7x1g.5gb.txt")))
    (alone,) = mig_tree(gpus)
    assert [gi["id"] for gi in with_lgi["gpu_instances"]] == [gi["id"] for gi in alone["gpu_instances"]] == list(
        range(7, 14))
    assert with_lgi["gpu_instances"][0]["placement"] == {"start": 0, "size": 1}
    assert alone["gpu_instances"][0]["placement"] is None
    assert with_lgi["gpu_instances"][6]["compute_instances"] == [
        {"id": 0, "profile": "1g.5gb", "profile_id": None, "uuid": "MIG-%s/13/0" % GPU}]


def test_tree_with_compute_instances_of_one_gpu_instance():
    listing = "GPU 0: NVIDIA A100-SXM4-40GB (UUID: %s)\n" % GPU + "".join(
        "  MIG 1c.3g.20gb    Device  %d: (UUID: MIG-%08d-0000-4000-8000-%012d)\n" % (n, n + 2, n + 2) for n in range(3))
    lgi = fixture("mig-lgi-h100-pcie-3g-3x1g.txt").replace("3g.40gb          9        2", "3g.20gb          9        1")
    (gpu,) = mig_tree(parse_list(listing), [r for r in parse_gpu_instances(lgi) if r["profile"] == "3g.20gb"],
                      parse_compute_instances(fixture("mig-lci-a100-40gb-3x1c.3g.20gb.txt")))
    (gi,) = gpu["gpu_instances"]
    assert (gi["id"], gi["profile"]) == (1, "3g.20gb")
    assert [(ci["id"], ci["profile"], ci["profile_id"]) for ci in gi["compute_instances"]] == [
        (n, "1c.3g.20gb", 0) for n in range(3)]


def test_tree_rejects_outputs_of_different_nodes():
    with pytest.raises(NvidiaSmiParseError, match="MIG device 1 is 2g.20gb but compute instance None of GPU "
                                                  "instance 7 is 1g.10gb"):
        mig_tree(parse_list(fixture("L-h100-80gb-mixed-all-balanced.txt")),
                 parse_gpu_instances(fixture("mig-lgi-h100-pcie-3g-3x1g.txt")))
    with pytest.raises(NvidiaSmiParseError, match="-L lists 7 MIG devices for 4 GPU instances"):
        mig_tree(parse_list(fixture("L-h100-80gb-single-all-1g.10gb.txt")),
                 parse_gpu_instances(fixture("mig-lgi-h100-pcie-3g-3x1g.txt")))


LGIP_R570 = fixture("mig-lgip-h100-pcie-r570-wide.txt")


@pytest.mark.parametrize("parse, text, message", [
    (parse_list, "GPU 0: NVIDIA H100 PCIe (UUID: %s)\n  MIG 1g.10gb Device 0: UUID\n" % GPU,
     r"line 2: not nvidia-smi -L output: expected .*: '  MIG 1g.10gb Device 0: UUID'"),
    (parse_list, "  MIG 1g.10gb     Device  0: (UUID: MIG-00000002-0000-4000-8000-000000000002)",
     "line 1: MIG device before any GPU line"),
    (parse_list, fixture("L-a100-40gb-legacy-r450-uuid.txt").replace("00000001/9/0", "00000009/9/0"),
     "line 4: legacy MIG UUID names another GPU"),
    (parse_gpu_instance_profiles, LGIP_R570.replace("7/7        9.75", "7/7"),
     r"line 6: expected 9 values, found 8: '\|   0  MIG 1g.10gb         19     7/7       No"),
    (parse_gpu_instance_profiles, LGIP_R570.replace("7/7", "7of7"), "line 6: a value does not have its column's"),
    (parse_gpu_instance_profiles, LGIP_R570.replace("P2P", "NVL"), r"line 3: header without columns \['P2P'\] or "
                                                                   r"with unknown columns \['NVL'\]"),
    (parse_gpu_instance_profiles, LGIP_R570.replace("JPEG  OFA", "JPEG  NVJ"), "line 4: the second header line"),
    (parse_gpu_instance_profiles, "\n".join(LGIP_R570.splitlines()[:7]) + "\n" + "\n".join(
        LGIP_R570.splitlines()[8:]), "line 6: a record has 4 lines, expected 2"),
    (parse_gpu_instances, fixture("mig-lgip-h100-pcie-r570-wide.txt"),
        r"line 1: not nvidia-smi mig -lgi output: expected its box table titled 'GPU instances:' \(this is nvidia-smi "
        r"mig -lgip output\)"),
    (parse_gpu_instances, fixture("mig-lgi-h100-pcie-3g-3x1g.txt").replace("0:1 ", "0-1 "),
     "line 6: a value does not have its column's format"),
    (parse_compute_instances, "nvidia-smi: command not found", "line 1: not nvidia-smi mig -lci output: expected its box table titled"),
    (parse_query_gpu, "index, memory.total [MiB]\n0, 81559 MiB, Enabled\n",
     "line 2: expected 2 comma-separated values, found 3: '0, 81559 MiB, Enabled'"),
    (parse_query_gpu, "index, memory.total [MiB]\n0, lots\n", "line 2: a value is not a number"),
    (parse_query_gpu, "", "no header line"),
])
def test_bad_output_names_the_line(parse, text, message):
    with pytest.raises(NvidiaSmiParseError, match=message):
        parse(text)


# Simulated nvidia-smi: written in the real formats, read back by the parsers.

def test_simulated_outputs_are_the_real_ones():
    # The node behind the H100 PCIe fixtures: `-cgi 9,19,19,19 -C`, and MIG enabled without instances.
    out = simulated_nvidia_smi("gpu-node-1", "NVIDIA-H100-PCIe", 1, {"3g.40gb": 1, "1g.10gb": 3})
    assert out["mig -lgi"] == fixture("mig-lgi-h100-pcie-3g-3x1g.txt")
    uuids = iter("GPU-00000001-0000-4000-8000-000000000001 MIG-00000002-0000-4000-8000-000000000002 "
                 "MIG-00000003-0000-4000-8000-000000000003 MIG-00000004-0000-4000-8000-000000000004 "
                 "MIG-00000005-0000-4000-8000-000000000005".split())
    assert re.sub(r"(GPU|MIG)-[0-9a-f-]{36}", lambda _: next(uuids), out["-L"]) == fixture("L-h100-pcie-3g-3x1g.txt")
    empty = simulated_nvidia_smi("gpu-node-1", "NVIDIA-H100-PCIe", 1, {})
    assert empty["mig -lgip"] == fixture("mig-lgip-h100-pcie-r570-wide.txt")
    assert empty["mig -lgi"] == "No GPU instances found: Not Found\n"
    lci = out["mig -lci"].splitlines()
    assert lci[:6] == fixture("mig-lci-a100-40gb-3x1c.3g.20gb.txt").splitlines()[:6]
    assert lci[6] == "|   0      2       MIG 3g.40gb          2         0     |"


def round_trip(out):
    return mig_tree(parse_list(out["-L"]), parse_gpu_instances(out["mig -lgi"]),
                    parse_compute_instances(out["mig -lci"]))


def without_hardware(gpus):
    return [{key: gpu[key] for key in ("index", "name", "uuid", "gpu_instances")} for gpu in gpus]


@pytest.mark.parametrize("product, count, layout", [
    ("NVIDIA-H100-80GB-HBM3", 2, {"2g.20gb": 2}),
    ("NVIDIA-H100-80GB-HBM3", 3, [{"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}, None, {}]),
    ("NVIDIA-A100-SXM4-40GB", 1, {"1g.5gb": 7}),
    ("NVIDIA-H200", 2, [{"7g.141gb": 1}, {"1g.18gb+me": 1, "1g.35gb": 3}]),
    ("NVIDIA-A30", 4, {"2g.12gb": 1, "1g.6gb": 2}),
    ("NVIDIA-A30", 2, None),
])
def test_simulated_outputs_read_back(product, count, layout):
    gpus = simulated_gpus("gpu-node-3", product, count, layout)
    out = simulated_nvidia_smi("gpu-node-3", product, count, layout)
    assert round_trip(out) == without_hardware(gpus)
    wanted = per_gpu_layout(layout, product, count)
    assert [c["profiles"] for c in profile_counts(parse_list(out["-L"]))] == [gpu or {} for gpu in wanted]
    assert [(row["index"], row["name"], row["mig.mode.current"], row["memory.total"])
            for row in parse_query_gpu(out[QUERY_GPU])] == [
        (n, MIG_MODELS[product]["name"], "Enabled" if gpu is not None else "Disabled",
         GPU_MODELS[product]["memory_mib"]) for n, gpu in enumerate(wanted)]
    profiles = parse_gpu_instance_profiles(out["mig -lgip"])
    assert len(profiles) == len(MIG_MODELS[product]["profiles"]) * sum(gpu is not None for gpu in wanted)


@pytest.mark.parametrize("product", ["NVIDIA-H100-PCIe", "NVIDIA-A100-SXM4-40GB"])
def test_simulated_lgip_gives_back_the_catalogue(product):
    out = simulated_nvidia_smi("gpu-node-0", product, 1, {})
    assert catalogue_from_lgip(parse_gpu_instance_profiles(out["mig -lgip"]), product) == MIG_MODELS[product]


def test_simulated_uuids_are_stable_and_distinct():
    one = simulated_gpus("gpu-node-1", "NVIDIA-H100-80GB-HBM3", 2, {"1g.10gb": 7})
    assert one == simulated_gpus("gpu-node-1", "NVIDIA-H100-80GB-HBM3", 2, {"1g.10gb": 7})
    other = simulated_gpus("gpu-node-2", "NVIDIA-H100-80GB-HBM3", 2, {"1g.10gb": 7})
    uuids = [gpu["uuid"] for gpu in one + other] + [
        ci["uuid"] for gpu in one + other for gi in gpu["gpu_instances"] for ci in gi["compute_instances"]]
    assert len(set(uuids)) == len(uuids) == 32
    assert re.match(r"^GPU-[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$", one[0]["uuid"])


def test_simulated_node_without_mig():
    out = simulated_nvidia_smi("gpu-node-1", "NVIDIA-A100-SXM4-80GB", 2)
    assert {out[command] for command in ("mig -lgip", "mig -lgi", "mig -lci")} == {"No MIG-enabled devices found.\n"}
    assert parse_gpu_instance_profiles(out["mig -lgip"]) == [] and parse_gpu_instances(out["mig -lgi"]) == []
    assert [gpu["mig_devices"] for gpu in parse_list(out["-L"])] == [[], []]


def test_simulated_layout_must_fit():
    with pytest.raises(MigLayoutError, match="GPU 0: .* does not fit a NVIDIA-H100-80GB-HBM3"):
        simulated_nvidia_smi("gpu-node-1", "NVIDIA-H100-80GB-HBM3", 1, {"3g.40gb": 2, "1g.10gb": 1})


fitting_gpu = st.one_of(st.none(), st.lists(
    st.sampled_from(sorted(MIG_MODELS["NVIDIA-H100-80GB-HBM3"]["profiles"])), max_size=7).map(
    lambda names: {name: names.count(name) for name in names}).filter(
    lambda gpu: placement(gpu, "NVIDIA-H100-80GB-HBM3") is not None))


@settings(max_examples=100, deadline=None)
@given(st.lists(fitting_gpu, min_size=1, max_size=4), st.text("abcdefgh-", min_size=1, max_size=12))
def test_any_fitting_layout_reads_back(layout, node):
    out = simulated_nvidia_smi(node, "NVIDIA-H100-80GB-HBM3", len(layout), layout)
    gpus = simulated_gpus(node, "NVIDIA-H100-80GB-HBM3", len(layout), layout)
    assert round_trip(out) == without_hardware(gpus)
    for gpu, tree in zip(layout, gpus):
        placed = sorted((gi["placement"]["start"], gi["profile"]) for gi in tree["gpu_instances"])
        expected = [(i["start"], i["profile"]) for i in placement(gpu, "NVIDIA-H100-80GB-HBM3")] if gpu else []
        assert placed == expected
