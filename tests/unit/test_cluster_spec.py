import pytest

from ansible_collections.fairgpu.tenancy.plugins.module_utils.cluster.node_pools import (
    node_pool_errors,
    node_pool_nodes,
)

POOL = {"name": "gpu-node", "count": 2, "gpu_product": "NVIDIA-H100-80GB-HBM3", "gpu_count": 8,
        "cpu": "96", "memory": "1Ti"}


def test_valid_pool_expands_to_named_nodes():
    assert node_pool_errors([POOL]) == []
    nodes = node_pool_nodes([POOL])
    assert [n["name"] for n in nodes] == ["gpu-node-0", "gpu-node-1"]
    assert nodes[0]["pods"] == "110" and nodes[0]["pool"] == "gpu-node"


def test_expanded_nodes_carry_canonical_quantities():
    # The kwok template writes them into the Node's status, which the API server keeps in canonical form.
    pool = dict(POOL, cpu="96000m", memory=2 ** 40, pods=1000)
    node = node_pool_nodes([pool])[0]
    assert (node["cpu"], node["memory"], node["pods"]) == ("96", "1Ti", "1k")
    node = node_pool_nodes([dict(POOL, cpu="1.5", memory="1.5Gi")])[0]
    assert (node["cpu"], node["memory"]) == ("1500m", "1536Mi")


@pytest.mark.parametrize("change, message", [
    ({"gpu_count": 0}, "lab_cluster_node_pools[0].gpu_count: must be an integer >= 1, got 0"),
    ({"count": 0}, "lab_cluster_node_pools[0].count: must be an integer >= 1, got 0"),
    ({"count": "2"}, "lab_cluster_node_pools[0].count: must be an integer >= 1, got '2'"),
    ({"gpu_product": "A100"}, "lab_cluster_node_pools[0].gpu_product: 'A100' is not a known GPU product"),
    ({"name": "GPU_Node"}, "lab_cluster_node_pools[0].name"),
    ({"memory": "lots"}, "lab_cluster_node_pools[0].memory: 'lots' is not a Kubernetes quantity"),
])
def test_bad_pools_name_the_field(change, message):
    errors = node_pool_errors([dict(POOL, **change)])
    assert any(message in e for e in errors), errors


def test_duplicate_pool_names_and_empty_list():
    assert "used by two pools" in node_pool_errors([POOL, dict(POOL)])[0]
    assert node_pool_errors([]) == ["lab_cluster_node_pools: give a non-empty list of node pools"]
    assert node_pool_errors("x")


def test_unknown_fields_are_all_named():
    errors = node_pool_errors([dict(POOL, gpu_memroy_mib=1, colour="red")])
    assert errors == [
        "lab_cluster_node_pools[0].colour: unknown field; known fields are name, count, gpu_product, gpu_count, "
        "gpu_memory_mib, cpu, memory, pods, taints, unschedulable, gpu_sharing",
        "lab_cluster_node_pools[0].gpu_memroy_mib: unknown field; known fields are name, count, gpu_product, "
        "gpu_count, gpu_memory_mib, cpu, memory, pods, taints, unschedulable, gpu_sharing",
    ]
