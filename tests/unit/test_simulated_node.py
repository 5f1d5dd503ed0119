import pytest

from ansible_collections.fairgpu.tenancy.plugins.module_utils.lab.node import (
    SimulatedNodeError,
    desired_gpu_state,
    node_patches,
)

HW = {"fairgpu.io/simulated-gpu-product": "NVIDIA-H100-80GB-HBM3", "fairgpu.io/simulated-gpu-count": "8"}


def test_desired_state_from_annotations():
    labels, resources = desired_gpu_state(HW, "single")
    assert resources == {"nvidia.com/gpu": 8}
    assert labels["nvidia.com/gpu.count"] == "8"
    assert labels["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3"


@pytest.mark.parametrize("annotations, message", [
    ({}, "simulated-gpu-product is missing"),
    ({"fairgpu.io/simulated-gpu-product": "NVIDIA-H100-80GB-HBM3"}, "simulated-gpu-count is missing"),
    (dict(HW, **{"fairgpu.io/simulated-gpu-count": "eight"}), "must be an integer"),
    (dict(HW, **{"fairgpu.io/simulated-gpu-product": "H100"}), "unknown GPU product"),
])
def test_bad_annotations(annotations, message):
    with pytest.raises(SimulatedNodeError, match=message):
        desired_gpu_state(annotations, "single")


def test_patches_only_what_differs_and_nothing_when_equal():
    labels, resources = desired_gpu_state(HW, "single")
    status = {"capacity": {"cpu": "96"}, "allocatable": {"cpu": "96"}}
    label_patch, status_patch, diff = node_patches({"other": "x"}, status, labels, resources)
    assert label_patch == labels
    assert status_patch == {"capacity": {"nvidia.com/gpu": "8"}, "allocatable": {"nvidia.com/gpu": "8"}}
    assert diff["before"]["capacity"] == {"nvidia.com/gpu": None}
    done = {"capacity": {"cpu": "96", "nvidia.com/gpu": "8"}, "allocatable": {"nvidia.com/gpu": "8"}}
    assert node_patches(dict(labels), done, labels, resources)[:2] == ({}, {})


def test_a_shared_node_publishes_replicas_as_the_gpu_operator_does():
    import json

    from ansible_collections.fairgpu.tenancy.plugins.module_utils.lab.node import desired_node

    sharing = {"strategy": "time-slicing", "replicas": 4}
    desired = desired_node("ts-0", dict(HW, **{"fairgpu.io/simulated-gpu-sharing": json.dumps(sharing)}), {}, "single")
    assert desired["resources"] == {"nvidia.com/gpu": 32}
    labels = desired["labels"]
    assert labels["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3-SHARED" and labels["nvidia.com/gpu.count"] == "8"
    assert labels["nvidia.com/gpu.replicas"] == "4" and labels["nvidia.com/gpu.sharing-strategy"] == "time-slicing"
    plain = desired_node("gpu-0", HW, {}, "single")
    assert plain["resources"] == {"nvidia.com/gpu": 8} and plain["labels"]["nvidia.com/gpu.replicas"] == "1"
