"""MIG resource names as the device plugin writes them (plugins/module_utils/mig/resources.py cites the rules:
NVIDIA/k8s-device-plugin v0.20.0 internal/rm/rm.go, NVIDIA/go-nvlib v0.12.0 pkg/nvlib/device/mig_profile.go)."""

import pytest

from ansible_collections.fairgpu.tenancy.plugins.module_utils.mig import resources
from ansible_collections.fairgpu.tenancy.plugins.module_utils.mig.layout import MigLayoutError, mig_resource
from ansible_collections.fairgpu.tenancy.plugins.module_utils.mig.nvidia_smi import parse_gpu_instance_profiles
from ansible_collections.fairgpu.tenancy.plugins.module_utils.tenants.spec import is_accelerator_resource
from test_nvidia_smi import fixture

# Every attribute form go-nvlib's String() writes -> the resource the device plugin names.
FORMS = {
    "2g.20gb": "nvidia.com/mig-2g.20gb",
    "1g.10gb+me": "nvidia.com/mig-1g.10gb.me",
    "1g.10gb+me.all": "nvidia.com/mig-1g.10gb.me.all",
    "1g.24gb+gfx": "nvidia.com/mig-1g.24gb.gfx",
    "4g.96gb+gfx": "nvidia.com/mig-4g.96gb.gfx",
    "1g.24gb-me": "nvidia.com/mig-1g.24gb-me",
    "2g.48gb-me": "nvidia.com/mig-2g.48gb-me",
    "7g.141gb": "nvidia.com/mig-7g.141gb",
}


@pytest.mark.parametrize("profile", sorted(FORMS))
def test_every_attribute_form_is_named_built_and_accepted(profile):
    assert resources.resource_name(profile) == FORMS[profile]
    assert mig_resource(profile) == FORMS[profile]
    assert resources.is_mig_resource(FORMS[profile])
    # The tenant checks accept every name the builder produces.
    assert is_accelerator_resource(FORMS[profile])


@pytest.mark.parametrize("profile", ["1c.3g.20gb", "2c.4g.40gb", "3g", "mig-2g.20gb", "", None])
def test_profiles_without_a_resource(profile):
    # rm.go skips profiles whose compute-instance slices differ from the GPU instance's (C != G).
    assert resources.resource_name(profile) is None
    if isinstance(profile, str) and resources.parse_profile(profile):
        with pytest.raises(MigLayoutError, match="does not advertise|advertises"):
            mig_resource(profile)


@pytest.mark.parametrize("name", ["nvidia.com/mig-2g.20gb.me.me", "nvidia.com/mig-2g.20gb+me", "nvidia.com/mig-9g.1gb",
                                  "nvidia.com/mig-1c.3g.20gb", "example.com/mig-1g.5gb", "nvidia.com/gpu.shared"])
def test_not_mig_resources(name):
    assert not resources.is_mig_resource(name)


@pytest.mark.parametrize("printed,memory_mib,device_mib,advertised", [
    # A100-80GB: drivers print 7g.79gb (79.25 GiB) for the full profile; go-nvlib computes 80 (issue 13).
    ("7g.79gb", 81152, 81920, "7g.80gb"),
    # H100 80GB HBM3 (shared/fixtures/node-labels: gpu.memory 81559, mig-1g.10gb.memory 9984, 2g 20096, 3g 40320)
    ("1g.10gb", 9984, 81559, "1g.10gb"), ("2g.20gb", 20096, 81559, "2g.20gb"), ("3g.40gb", 40320, 81559, "3g.40gb"),
    ("1g.10gb+me", 9984, 81559, "1g.10gb+me"), ("1c.3g.40gb", 40320, 81559, "1c.3g.40gb"),
])
def test_memory_figure_as_go_nvlib_computes_it(printed, memory_mib, device_mib, advertised):
    assert resources.device_plugin_profile(printed, memory_mib, device_mib) == advertised


def test_lgip_rows_matched_by_profile_id():
    rows = parse_gpu_instance_profiles(fixture("mig-lgip-h100-pcie-r570-wide.txt"))
    # H100 PCIe: memory.total 81559 MiB (GFD label of the same model family; the printed names agree).
    names = resources.lgip_resources(rows, 81559)
    assert names[19] == "nvidia.com/mig-1g.10gb" and names[20] == "nvidia.com/mig-1g.10gb.me"
    assert names[0] == "nvidia.com/mig-7g.80gb" and names[9] == "nvidia.com/mig-3g.40gb"
    # Renaming a profile in the printout does not change the resource of its ID.
    renamed = [dict(row, profile="7g.79gb") if row["profile_id"] == 0 else row for row in rows]
    assert resources.lgip_resources(renamed, 81920)[0] == "nvidia.com/mig-7g.80gb"
    assert resources.lgip_resources([]) == {}


def test_a_node_report_names_resources_as_the_device_plugin_does():
    from ansible_collections.fairgpu.tenancy.plugins.module_utils.mig.layout import (
        catalogue_from_lgip, device_plugin_resources, gfd_mig_labels)

    # An A100-80GB whose driver prints the full profile as 7g.79gb (79.25 GiB; issue 13): the layout uses the
    # printed name, the resource and GFD's labels the device plugin's (go-nvlib: 80 GiB device -> 7g.80gb).
    lgip = fixture("mig-lgip-h100-pcie-r570-wide.txt").replace("MIG 7g.80gb ", "MIG 7g.79gb ")
    catalogue = catalogue_from_lgip(parse_gpu_instance_profiles(lgip), "NVIDIA-A100-SXM4-80GB")
    assert catalogue["profiles"]["7g.79gb"]["resource"] == "nvidia.com/mig-7g.80gb"
    assert device_plugin_resources("NVIDIA-A100-SXM4-80GB", 1, {"7g.79gb": 1}, "mixed", catalogue) == {
        "nvidia.com/gpu": 0, "nvidia.com/mig-7g.80gb": 1}
    labels = gfd_mig_labels("NVIDIA-A100-SXM4-80GB", 1, {"7g.79gb": 1}, "mixed", catalogue=catalogue)
    assert labels["nvidia.com/mig-7g.80gb.count"] == "1"
    assert labels["nvidia.com/mig-7g.80gb.product"] == "NVIDIA-A100-SXM4-80GB-MIG-7g.80gb"
    single = gfd_mig_labels("NVIDIA-A100-SXM4-80GB", 1, {"7g.79gb": 1}, "single", catalogue=catalogue)
    assert single["nvidia.com/gpu.product"] == "NVIDIA-A100-SXM4-80GB-MIG-7g.80gb"
    # +me keeps its attribute: mig-1g.10gb.me.
    assert catalogue["profiles"]["1g.10gb+me"]["resource"] == "nvidia.com/mig-1g.10gb.me"


def test_built_in_names_are_the_device_plugins():
    from ansible_collections.fairgpu.tenancy.plugins.module_utils.mig.catalog import GPU_MODELS
    from ansible_collections.fairgpu.tenancy.plugins.module_utils.mig.layout import MIG_MODELS, profile_memory_mib

    for product, model in MIG_MODELS.items():
        for profile, entry in model["profiles"].items():
            memory = profile_memory_mib(product, profile)
            computed = resources.device_plugin_profile(profile, memory, GPU_MODELS[product]["memory_mib"])
            assert resources.resource_name(computed) == entry["resource"], (product, profile, memory)
