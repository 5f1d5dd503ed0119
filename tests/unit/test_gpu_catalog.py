import json
import os

import pytest

from ansible_collections.fairgpu.tenancy.plugins.module_utils.mig.catalog import (
    GpuCatalogError,
    gfd_labels,
)

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures")


def real_labels(name):
    with open(os.path.join(FIXTURES, name)) as handle:
        return json.load(handle)


def test_labels_match_a_real_h100_node_under_gfd():
    real = real_labels("h100-single-all-disabled.json")
    ours = gfd_labels("NVIDIA-H100-80GB-HBM3", int(real["nvidia.com/gpu.count"]), mig_strategy="single")
    for key, value in ours.items():
        assert real[key] == value, key


def test_every_label_is_a_string_and_gfd_named():
    labels = gfd_labels("NVIDIA-A100-SXM4-40GB", 8)
    assert all(isinstance(v, str) for v in labels.values())
    assert all(k.startswith("nvidia.com/") for k in labels)
    assert labels["nvidia.com/gpu.memory"] == "40960"


def test_strategy_none_has_no_mig_strategy_label():
    assert "nvidia.com/mig.strategy" not in gfd_labels("Tesla-T4", 1, mig_strategy="none")
    assert gfd_labels("Tesla-T4", 1)["nvidia.com/mig.capable"] == "false"


def test_memory_override():
    assert gfd_labels("NVIDIA-H100-80GB-HBM3", 1, memory_mib=81920)["nvidia.com/gpu.memory"] == "81920"


@pytest.mark.parametrize("product, count, strategy, message", [
    ("Tesla-A100", 1, "single", "unknown GPU product 'Tesla-A100'"),
    ("NVIDIA-H100-80GB-HBM3", 0, "single", "GPU count must be an integer >= 1"),
    ("NVIDIA-H100-80GB-HBM3", True, "single", "GPU count must be an integer >= 1"),
    ("NVIDIA-H100-80GB-HBM3", 1, "fake", "unknown MIG strategy 'fake'"),
])
def test_bad_input_is_named(product, count, strategy, message):
    with pytest.raises(GpuCatalogError, match=message):
        gfd_labels(product, count, mig_strategy=strategy)
