"""MIG catalogue, mig-parted config validation, placements, device plugin resources and GFD labels."""

import itertools
import json
import os

import pytest
from hypothesis import given, settings, strategies as st

from ansible_collections.fairgpu.tenancy.plugins.module_utils.mig.catalog import GPU_MODELS
from ansible_collections.fairgpu.tenancy.plugins.module_utils.mig.layout import (
    MIG_MODELS,
    MigLayoutError,
    applied_layout,
    catalogue_from_lgip,
    device_plugin_resources,
    fairgpu_config_name,
    fairgpu_mig_config,
    free_instances,
    gfd_mig_labels,
    mig_config_errors,
    placement,
    placement_starts,
    product_label,
    profile_memory_mib,
    validate_mig_config,
)
from ansible_collections.fairgpu.tenancy.plugins.module_utils.mig.nvidia_smi import (
    parse_gpu_instance_profiles,
    parse_gpu_instances,
    parse_list,
    profile_counts,
)

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures")
H100, A100_80, A100_40, A30 = "NVIDIA-H100-80GB-HBM3", "NVIDIA-A100-SXM4-80GB", "NVIDIA-A100-SXM4-40GB", "NVIDIA-A30"


def smi(name):
    with open(os.path.join(FIXTURES, "nvidia-smi", name)) as handle:
        return "".join(line for line in handle if not line.startswith("#"))


def real_labels(name):
    with open(os.path.join(FIXTURES, name)) as handle:
        return json.load(handle)


def config(*entries, **configs):
    configs = configs or {"test": list(entries)}
    return {"version": "v1", "mig-configs": configs}


def enabled(devices="all", **mig_devices):
    return {"devices": devices, "mig-enabled": True, "mig-devices": mig_devices}


# Max instances per profile, as upstream-facts.md lists them (NVIDIA MIG User Guide).
MAX_INSTANCES = {
    A100_40: {"1g.5gb": 7, "1g.5gb+me": 1, "1g.10gb": 4, "2g.10gb": 3, "3g.20gb": 2, "4g.20gb": 1, "7g.40gb": 1},
    A100_80: {"1g.10gb": 7, "1g.10gb+me": 1, "1g.20gb": 4, "2g.20gb": 3, "3g.40gb": 2, "4g.40gb": 1, "7g.80gb": 1},
    H100: {"1g.10gb": 7, "1g.10gb+me": 1, "1g.20gb": 4, "2g.20gb": 3, "3g.40gb": 2, "4g.40gb": 1, "7g.80gb": 1},
    "NVIDIA-H100-PCIe": {"1g.10gb": 7, "1g.10gb+me": 1, "1g.20gb": 4, "2g.20gb": 3, "3g.40gb": 2, "4g.40gb": 1,
                         "7g.80gb": 1},
    "NVIDIA-H200": {"1g.18gb": 7, "1g.18gb+me": 1, "1g.35gb": 4, "2g.35gb": 3, "3g.71gb": 2, "4g.71gb": 1,
                    "7g.141gb": 1},
    A30: {"1g.6gb": 4, "1g.6gb+me": 1, "2g.12gb": 2, "2g.12gb+me": 1, "4g.24gb": 1},
}


@pytest.mark.parametrize("product", sorted(MAX_INSTANCES))
def test_catalogue_has_the_documented_profiles(product):
    model = MIG_MODELS[product]
    assert {name: p["max_instances"] for name, p in model["profiles"].items()} == MAX_INSTANCES[product]
    assert product in GPU_MODELS and product_label(model["name"]) == product
    if product == A30:
        assert (model["compute_slices"], model["memory_slices"]) == (4, 4)
        assert [p["id"] for p in model["profiles"].values()] == [14, 21, 5, 6, 0]
    else:
        assert (model["compute_slices"], model["memory_slices"]) == (7, 8)
        assert [p["id"] for p in model["profiles"].values()] == [19, 20, 15, 14, 9, 5, 0]


def test_h100_placements_are_the_documented_ones():
    starts = {name: (p["starts"], p["memory_slices"]) for name, p in MIG_MODELS[H100]["profiles"].items()}
    assert starts == {"1g.10gb": ([0, 1, 2, 3, 4, 5, 6], 1), "1g.10gb+me": ([0, 1, 2, 3, 4, 5, 6], 1),
                      "1g.20gb": ([0, 2, 4, 6], 2), "2g.20gb": ([0, 2, 4], 2), "3g.40gb": ([0, 4], 4),
                      "4g.40gb": ([0], 4), "7g.80gb": ([0], 8)}


@pytest.mark.parametrize("product", sorted(MIG_MODELS))
def test_the_placement_rule_reproduces_every_documented_placement(product):
    model = MIG_MODELS[product]
    for name, profile in model["profiles"].items():
        assert placement_starts(profile["compute_slices"], profile["memory_slices"], model["compute_slices"],
                                model["memory_slices"]) == profile["starts"], name


def test_catalogue_from_the_nodes_lgip_is_the_authority():
    r570 = parse_gpu_instance_profiles(smi("mig-lgip-h100-pcie-r570-wide.txt"))
    assert catalogue_from_lgip(r570, "NVIDIA-H100-PCIe") == MIG_MODELS["NVIDIA-H100-PCIe"]
    r525 = catalogue_from_lgip(parse_gpu_instance_profiles(smi("mig-lgip-h100-pcie-r525.txt")), "NVIDIA-H100-PCIe")
    assert r525["profiles"]["1g.10gb"]["memory_mib"] == 9856
    assert r525["profiles"]["7g.80gb"]["attributes"] == {"sm": 114, "dec": 7, "enc": 0, "ce": 8, "jpeg": 7, "ofa": 1}
    # A driver that names the full profile 7g.79gb: placed by profile ID, and only valid with the node's list.
    renamed = parse_gpu_instance_profiles(smi("mig-lgip-h100-pcie-r525.txt").replace("7g.80gb", "7g.79gb"))
    catalogue = catalogue_from_lgip(renamed, H100)
    assert (catalogue["profiles"]["7g.79gb"]["starts"], catalogue["profiles"]["7g.79gb"]["memory_slices"]) == ([0], 8)
    layout = config(enabled(**{"7g.79gb": 1}))
    assert validate_mig_config(layout, H100, 8, catalogue=catalogue) is None
    assert "does not offer MIG profile '7g.79gb'" in mig_config_errors(layout, H100, 8)[0]


def test_a_profile_the_builtin_catalogue_lacks_gets_derived_placements():
    text = smi("mig-lgip-h100-pcie-r570-wide.txt").replace("MIG 1g.20gb         15", "MIG 1g.20gb         99")
    profile = catalogue_from_lgip(parse_gpu_instance_profiles(text), "NVIDIA-H100-PCIe")["profiles"]["1g.20gb"]
    assert (profile["id"], profile["memory_slices"], profile["starts"]) == (99, 2, [0, 2, 4, 6])


def test_catalogue_from_lgip_needs_rows_and_a_known_product():
    with pytest.raises(MigLayoutError, match="no GPU instance profiles"):
        catalogue_from_lgip([], H100)
    with pytest.raises(MigLayoutError, match="no MIG profiles known for GPU product 'Tesla-T4'"):
        catalogue_from_lgip(parse_gpu_instance_profiles(smi("mig-lgip-h100-pcie-r525.txt")), "Tesla-T4")
    odd = parse_gpu_instance_profiles(smi("mig-lgip-h100-pcie-r525.txt").replace("MIG 4g.40gb ", "MIG gfx.40gb"))
    with pytest.raises(MigLayoutError, match="-lgip lists 'gfx.40gb', which is not a MIG profile name"):
        catalogue_from_lgip(odd, H100)


def starts(mig_devices, product=H100):
    return [(i["profile"], i["start"]) for i in placement(mig_devices, product)]


def test_placements():
    assert starts({"2g.20gb": 3, "1g.10gb": 1}) == [("2g.20gb", 0), ("2g.20gb", 2), ("2g.20gb", 4), ("1g.10gb", 6)]
    assert placement({"3g.40gb": 2, "1g.10gb": 1}, H100) is None
    assert placement({"4g.40gb": 1, "3g.40gb": 1}, H100)[1] == {"profile": "3g.40gb", "start": 4, "size": 4}
    assert placement({"1g.10gb": 8}, H100) is None
    assert placement({"1g.20gb": 4, "1g.10gb": 1}, H100) is None
    assert starts({"2g.12gb": 1, "1g.6gb": 2}, A30) == [("1g.6gb", 0), ("1g.6gb", 1), ("2g.12gb", 2)]


def test_placement_reproduces_the_fixtures():
    # `-cgi 9,19,19,19` on an H100 PCIe (mig-lgi fixture): 1g.10gb at 0, 1, 2 and 3g.40gb at 4.
    real = [(r["profile"], r["placement"]["start"]) for r in parse_gpu_instances(smi("mig-lgi-h100-pcie-3g-3x1g.txt"))]
    assert starts({"3g.40gb": 1, "1g.10gb": 3}, "NVIDIA-H100-PCIe") == real
    real = [(r["profile"], r["placement"]["start"]) for r in parse_gpu_instances(smi("mig-lgi-a100-40gb-7x1g.5gb.txt"))]
    assert starts({"1g.5gb": 7}, A100_40) == real


@pytest.mark.parametrize("product", [H100, A30])
def test_placement_finds_a_fit_exactly_when_one_exists(product):
    # Against brute force over every start of every instance.
    model = MIG_MODELS[product]
    names = list(model["profiles"])
    for combination in itertools.combinations_with_replacement(names, 3):
        wanted = {name: combination.count(name) for name in set(combination)}
        profiles = [model["profiles"][name] for name in combination]
        fits = sum(p["compute_slices"] for p in profiles) <= model["compute_slices"] and all(
            wanted[name] <= model["profiles"][name]["max_instances"] for name in wanted) and any(
            len(set(slot for p, start in zip(profiles, chosen) for slot in range(start, start + p["memory_slices"])))
            == sum(p["memory_slices"] for p in profiles)
            for chosen in itertools.product(*(p["starts"] for p in profiles)))
        assert (placement(wanted, product) is not None) == fits, wanted


def test_free_instances_as_lgip_counts_them():
    # One 3g.40gb sits on memory slices 0-3: 1g.10gb can still start at 4, 5 and 6 (7/7 becomes 3/7).
    placed = placement({"3g.40gb": 1}, H100)
    assert [free_instances(name, placed, H100) for name in ("1g.10gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb")] == [
        3, 1, 1, 0, 0]
    assert free_instances("1g.10gb", placement({"3g.40gb": 1, "1g.10gb": 3}, H100), H100) == 1
    assert free_instances("1g.10gb+me", placement({"1g.10gb+me": 1}, H100), H100) == 0


def test_profile_memory():
    assert profile_memory_mib(H100, "2g.20gb") == 20096
    # No real figure for the H200: its 143771 MiB shared by 2 of 8 memory slices, rounded down to 64 MiB.
    assert profile_memory_mib("NVIDIA-H200", "2g.35gb") == 35904


def test_default_fairgpu_config():
    assert fairgpu_config_name() == "fairgpu-2x2g.20gb"
    assert fairgpu_config_name("1g.10gb+me", 1) == "fairgpu-1x1g.10gb.me"
    layout = fairgpu_mig_config()
    assert layout == {"version": "v1", "mig-configs": {
        "fairgpu-2x2g.20gb": [{"devices": "all", "mig-enabled": True, "mig-devices": {"2g.20gb": 2}}],
        "all-disabled": [{"devices": "all", "mig-enabled": False}]}}
    for product in (H100, A100_80):
        for strategy in ("single", "mixed"):
            assert mig_config_errors(layout, product, 8, strategy) == []
    assert applied_layout(layout, "fairgpu-2x2g.20gb", H100, 2) == [{"2g.20gb": 2}, {"2g.20gb": 2}]
    assert applied_layout(layout, "all-disabled", H100, 2) == [None, None]
    assert "A100-SXM4-40GB does not offer MIG profile '2g.20gb'" in mig_config_errors(layout, A100_40, 8)[0]


# The shape of the GPU Operator's default-mig-parted-config: entries for other models carry a device-filter.
ALL_BALANCED = config(all_balanced=[
    dict(enabled(**{"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}),
         **{"device-filter": ["0x233010DE", "0x233110DE", "0x232210DE", "0x20B210DE", "0x20B510DE"]}),
    dict(enabled(**{"1g.5gb": 2, "2g.10gb": 1, "3g.20gb": 1}),
         **{"device-filter": ["0x20B010DE", "0x20B110DE", "0x20F110DE", "0x20F610DE"]}),
    dict(enabled(**{"1g.6gb": 2, "2g.12gb": 1}), **{"device-filter": "0x20B710DE"}),
])


@pytest.mark.parametrize("product, layout", [
    (H100, {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}),
    (A100_40, {"1g.5gb": 2, "2g.10gb": 1, "3g.20gb": 1}),
    (A30, {"1g.6gb": 2, "2g.12gb": 1}),
])
def test_device_filter_picks_the_models_entry(product, layout):
    assert mig_config_errors(ALL_BALANCED, product, 4, "mixed") == []
    assert applied_layout(ALL_BALANCED, "all_balanced", product, 4) == [layout] * 4


def test_entries_for_some_gpus():
    layout = config(enabled([0, 1], **{"1g.10gb": 7}), {"devices": [2], "mig-enabled": False})
    assert mig_config_errors(layout, H100, 4, "mixed") == []
    assert applied_layout(layout, "test", H100, 4) == [{"1g.10gb": 7}, {"1g.10gb": 7}, None, None]
    with pytest.raises(MigLayoutError, match="the mig-parted config has no config 'other'; it has test"):
        applied_layout(layout, "other", H100, 4)


PREFIX = "mig-configs.test[0]"


@pytest.mark.parametrize("layout, product, strategy, message", [
    (config(enabled(**{"0": {"gi-profile": "2g.20gb", "count": 2}})), H100, "single",
     PREFIX + '.mig-devices: maps a profile name to a count, e.g. {"2g.20gb": 2}; it is not keyed by GPU index and '
     "has no gi-profile field: put the GPU indices in devices"),
    (config(dict(enabled(), **{"gi-profile": "2g.20gb"})), H100, "single",
     PREFIX + ".mig-devices: maps a profile name to a count"),
    (config(enabled(7, **{"2g.20gb": 2})), H100, "single",
     PREFIX + '.devices: 7 is neither "all" nor a non-empty list of GPU indices (write devices: all or devices: [7])'),
    (config(enabled(**{"2g.10gb": 3})), A100_80, "single",
     PREFIX + ".mig-devices: NVIDIA-A100-SXM4-80GB does not offer MIG profile '2g.10gb'; valid profiles are "
              "1g.10gb, 1g.10gb+me, 1g.20gb, 2g.20gb, 3g.40gb, 4g.40gb, 7g.80gb"),
    (config(enabled([0, 8], **{"2g.20gb": 2})), H100, "single",
     PREFIX + ".devices: GPU index 8 does not exist; the node has 8 GPUs (indices 0-7)"),
    (config(enabled(**{"2g.20gb": 4})), H100, "single",
     PREFIX + ".mig-devices: 4 x 2g.20gb, but one NVIDIA-H100-80GB-HBM3 GPU holds at most 3 of that profile"),
    (config(enabled(**{"4g.40gb": 1, "2g.20gb": 2})), H100, "mixed",
     PREFIX + ".mig-devices: the instances need 8 compute slices but one NVIDIA-H100-80GB-HBM3 GPU has 7"),
    (config(enabled(**{"3g.40gb": 2, "1g.10gb": 1})), H100, "mixed",
     PREFIX + ".mig-devices: the instances cannot be placed on the 8 memory slices of one NVIDIA-H100-80GB-HBM3 GPU: "
              "they need 9, and a GPU instance may start only at its profile's allowed slices (3g.40gb at {0,4} "
              "size 4, 1g.10gb at {0,1,2,3,4,5,6} size 1)"),
    (config(enabled(**{"4g.24gb": 1, "1g.6gb": 1})), A30, "mixed",
     PREFIX + ".mig-devices: the instances need 5 compute slices but one NVIDIA-A30 GPU has 4"),
    (dict(config(enabled(**{"2g.20gb": 2})), version="v2"), H100, "single",
     "version: 'v2' is not supported; mig-parted reads version: v1"),
    (config(enabled()), H100, "single",
     PREFIX + ".mig-devices: MIG is enabled but no instances are listed; such a GPU serves no pods"),
    (config({"devices": "all", "mig-enabled": True}), H100, "single", PREFIX + ".mig-devices: MIG is enabled but no"),
    (config(enabled(**{"2g.20gb": 0})), H100, "single", PREFIX + ".mig-devices: MIG is enabled but no instances"),
    (config(enabled(**{"2g.20gb": 2}), enabled([3], **{"2g.20gb": 1})), H100, "single",
     "mig-configs.test: GPU 3 set by both entry 0 and entry 1; each GPU may be covered by one entry"),
    (config(enabled([0, 1], **{"2g.20gb": 3}), enabled([2, 3], **{"3g.40gb": 2})), H100, "single",
     "mig-configs.test: the single MIG strategy needs one profile on the whole node but this config creates "
     "2g.20gb, 3g.40gb; GFD would label the node NVIDIA-H100-80GB-HBM3-MIG-INVALID"),
    (config(enabled(**{"2g.20gb": 3, "1g.10gb": 1})), H100, "single",
     "mig-configs.test: the single MIG strategy needs one profile on the whole node but this config creates "
     "1g.10gb, 2g.20gb"),
    (config(enabled([0], **{"2g.20gb": 3}), {"devices": [1], "mig-enabled": False}), H100, "single",
     "mig-configs.test: the single MIG strategy needs MIG on every GPU but it is disabled on GPU 1"),
    (config({"devices": "all", "mig-enabled": False, "mig-devices": {"2g.20gb": 1}}), H100, "single",
     PREFIX + ".mig-devices: given although mig-enabled is false; mig-parted rejects that"),
    (config({"devices": "all", "mig-enabled": "yes"}), H100, "single", PREFIX + ".mig-enabled: must be true or false"),
    (config(dict(enabled(**{"2g.20gb": 1}), profile="x")), H100, "single",
     PREFIX + ".profile: unknown field; mig-parted knows devices, mig-enabled, mig-devices, device-filter"),
    (config({"mig-enabled": False}), H100, "single", PREFIX + ": the required field devices is missing"),
    (config(dict(enabled(**{"2g.20gb": 1}), **{"device-filter": 0x2330})), H100, "single",
     PREFIX + ".device-filter: give a PCI device ID such as 0x233010DE or a list of them, got 9008"),
    (config(enabled(**{"2g.20gb": -1})), H100, "single",
     PREFIX + ".mig-devices: '2g.20gb': the count must be a whole number >= 0, got -1"),
    (config(test=[]), H100, "single", "mig-configs.test: give a non-empty list of entries"),
    ({"version": "v1", "mig-configs": {}}, H100, "single", "mig-configs: give a mapping of config name -> list"),
    ({"version": "v1", "configs": {}}, H100, "single", "configs: unknown top-level field"),
    ([], H100, "single", "the mig-parted config must be a mapping with version: v1 and mig-configs, got []"),
    (fairgpu_mig_config(), "Tesla-T4", "single", "no MIG profiles known for GPU product 'Tesla-T4'"),
    (fairgpu_mig_config(), H100, "many", "unknown MIG strategy 'many'"),
])
def test_bad_configs_are_named(layout, product, strategy, message):
    errors = mig_config_errors(layout, product, 8, strategy)
    assert any(error.startswith(message) for error in errors), errors
    with pytest.raises(MigLayoutError) as raised:
        validate_mig_config(layout, product, 8, strategy)
    assert raised.value.errors == errors and str(raised.value) == "\n".join(errors)


def test_all_errors_are_collected():
    layout = {"version": "v0", "mig-configs": {
        "a": [enabled(7, **{"2g.10gb": 1}), enabled([9], **{"3g.40gb": 2, "1g.10gb": 1})],
        "b": [enabled(**{"7g.80gb": 2})],
    }}
    errors = mig_config_errors(layout, H100, 8)
    assert [error.split(":")[0] for error in errors] == [
        "version", "mig-configs.a[0].devices", "mig-configs.a[0].mig-devices", "mig-configs.a[1].devices",
        "mig-configs.a[1].mig-devices", "mig-configs.b[0].mig-devices"]


def test_gpu_count_is_checked():
    assert mig_config_errors(fairgpu_mig_config(), H100, 0) == [
        "the node's GPU count must be a whole number >= 1, got 0"]


KEYWORDS = ["version", "mig-configs", "devices", "mig-enabled", "mig-devices", "device-filter", "gi-profile", "all",
            "v1", "2g.20gb", "3g.40gb", "1g.10gb", "0", "0x233010DE"]
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8) | st.sampled_from(KEYWORDS),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
        st.sampled_from(KEYWORDS) | st.text(max_size=4) | st.integers(-1, 9), inner, max_size=5),
    max_leaves=25)


@settings(max_examples=500, deadline=None)
@given(json_values, st.one_of(st.integers(-2, 16), json_values),
       st.one_of(st.sampled_from(["single", "mixed"]), json_values))
def test_any_input_gives_messages_or_mig_layout_error(value, gpu_count, strategy):
    errors = mig_config_errors(value, H100, gpu_count, strategy)
    assert isinstance(errors, list) and all(isinstance(error, str) and error for error in errors)
    if errors:
        with pytest.raises(MigLayoutError) as raised:
            validate_mig_config(value, H100, gpu_count, strategy)
        assert raised.value.errors == errors
    else:
        assert validate_mig_config(value, H100, gpu_count, strategy) is None


# Instance lists drawn mostly from small profiles, so that many fit and reach the placement checks.
SMALL_FIRST = ["1g.10gb"] * 4 + ["2g.20gb"] * 2 + sorted(MIG_MODELS[H100]["profiles"])
profile_counts_st = st.lists(st.sampled_from(SMALL_FIRST), max_size=6).map(
    lambda names: {name: names.count(name) for name in names})
entries_st = st.lists(st.fixed_dictionaries({
    "devices": st.one_of(st.just("all"), st.lists(st.integers(0, 3), min_size=1, max_size=2, unique=True)),
    "mig-enabled": st.booleans(),
    "mig-devices": profile_counts_st,
}), min_size=1, max_size=2)


@settings(max_examples=400, deadline=None)
@given(entries_st, st.sampled_from(["single", "mixed"]))
def test_accepted_layouts_have_a_valid_placement(entries, strategy):
    for entry in entries:
        if not entry["mig-enabled"]:
            entry["mig-devices"] = {}
    layout = config(*entries)
    if mig_config_errors(layout, H100, 4, strategy):
        return
    model = MIG_MODELS[H100]
    for gpu in applied_layout(layout, "test", H100, 4):
        if gpu is None:
            continue
        placed = placement(gpu, H100)
        assert sorted(i["profile"] for i in placed) == sorted(p for p, n in gpu.items() for _copy in range(n))
        assert sum(model["profiles"][i["profile"]]["compute_slices"] for i in placed) <= model["compute_slices"]
        slots = [slot for i in placed for slot in range(i["start"], i["start"] + i["size"])]
        assert len(slots) == len(set(slots)) and max(slots) < model["memory_slices"]
        assert all(i["start"] in model["profiles"][i["profile"]]["starts"] for i in placed)
    assert device_plugin_resources(H100, 4, applied_layout(layout, "test", H100, 4), strategy)


BALANCED = {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}


@pytest.mark.parametrize("layout, strategy, resources", [
    (None, "single", {"nvidia.com/gpu": 2}),
    ({"2g.20gb": 2}, "single", {"nvidia.com/gpu": 4}),
    ({"2g.20gb": 2}, "none", {"nvidia.com/gpu": 2}),
    (BALANCED, "single", {"nvidia.com/gpu": 0}),
    ([{"2g.20gb": 2}, None], "single", {"nvidia.com/gpu": 0}),
    ([{"2g.20gb": 2}, {}], "single", {"nvidia.com/gpu": 0}),
    (BALANCED, "mixed", {"nvidia.com/gpu": 0, "nvidia.com/mig-1g.10gb": 4, "nvidia.com/mig-2g.20gb": 2,
                         "nvidia.com/mig-3g.40gb": 2}),
    ([{"1g.10gb+me": 1, "1g.10gb": 6}, None], "mixed",
     {"nvidia.com/gpu": 1, "nvidia.com/mig-1g.10gb": 6, "nvidia.com/mig-1g.10gb.me": 1}),
    ([{}, {"2g.20gb": 2}], "mixed", {"nvidia.com/gpu": 0, "nvidia.com/mig-2g.20gb": 2}),
])
def test_device_plugin_resources(layout, strategy, resources):
    assert device_plugin_resources(H100, 2, layout, strategy) == resources


@pytest.mark.parametrize("layout, message", [
    ({"3g.40gb": 2, "1g.10gb": 1}, r"GPU 0: \{'3g.40gb': 2, '1g.10gb': 1\} does not fit a NVIDIA-H100-80GB-HBM3"),
    ([None], "a layout is None, {profile: count} or a list of 2 of those"),
    ({"2g.10gb": 1}, "NVIDIA-H100-80GB-HBM3 does not offer MIG profile '2g.10gb'"),
    ([{"2g.20gb": "2"}, None], r"GPU 0: \{'2g.20gb': '2'\} is not \{profile: whole count\}"),
])
def test_layouts_that_do_not_fit_are_refused(layout, message):
    with pytest.raises(MigLayoutError, match=message):
        device_plugin_resources(H100, 2, layout, "mixed")


GFD_LABELS = "nvidia.com/"
NOT_FROM_GFD = ("nvidia.com/gpu.deploy.", "nvidia.com/cuda.", "nvidia.com/gpu.machine", "nvidia.com/gfd.",
                "nvidia.com/gpu-driver", "nvidia.com/mps.")


def gfd_part(labels):
    return {k: v for k, v in labels.items() if k.startswith(GFD_LABELS) and not k.startswith(NOT_FROM_GFD)}


def test_labels_of_the_real_mixed_all_balanced_node():
    real = real_labels("h100-mixed-all-balanced.json")
    layout = profile_counts(parse_list(smi("L-h100-80gb-mixed-all-balanced.txt")))[0]["profiles"]
    ours = gfd_mig_labels(H100, int(real["nvidia.com/gpu.count"]), layout, "mixed", mig_config="all-balanced")
    assert ours == gfd_part(real)


def test_labels_of_the_real_single_all_disabled_node():
    real = real_labels("h100-single-all-disabled.json")
    assert gfd_mig_labels(H100, 1, None, "single", mig_config="all-disabled") == gfd_part(real)


def test_labels_of_single_all_1g():
    (gpu,) = profile_counts(parse_list(smi("L-h100-80gb-single-all-1g.10gb.txt")))
    product = product_label(gpu["name"])
    labels = gfd_mig_labels(product, 1, gpu["profiles"], "single")
    assert (labels["nvidia.com/gpu.product"], labels["nvidia.com/gpu.count"], labels["nvidia.com/gpu.memory"],
            labels["nvidia.com/gpu.replicas"], labels["nvidia.com/gpu.multiprocessors"]) == (
        "NVIDIA-H100-80GB-HBM3-MIG-1g.10gb", "7", "9984", "1", "16")
    assert not any(key.startswith("nvidia.com/mig-") for key in labels)


def test_labels_of_an_invalid_single_layout():
    labels = gfd_mig_labels(H100, 2, BALANCED, "single")
    assert {k: labels[k] for k in ("nvidia.com/gpu.product", "nvidia.com/gpu.count", "nvidia.com/gpu.replicas",
                                   "nvidia.com/gpu.memory")} == {
        "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3-MIG-INVALID", "nvidia.com/gpu.count": "0",
        "nvidia.com/gpu.replicas": "0", "nvidia.com/gpu.memory": "0"}


def test_mixed_labels_without_known_attributes():
    labels = gfd_mig_labels("NVIDIA-H200", 1, {"2g.35gb": 3}, "mixed")
    assert labels["nvidia.com/mig-2g.35gb.count"] == "3" and labels["nvidia.com/mig-2g.35gb.memory"] == "35904"
    assert "nvidia.com/mig-2g.35gb.multiprocessors" not in labels
    labels = gfd_mig_labels(H100, 1, {"1g.10gb+me": 1}, "mixed")
    assert labels["nvidia.com/mig-1g.10gb.me.product"] == "NVIDIA-H100-80GB-HBM3-MIG-1g.10gb.me"
