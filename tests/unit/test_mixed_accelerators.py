"""Issue 14 item 4: MIG devices next to whole GPUs on one node (a mig-parted config per GPU under the mixed strategy).
Every accelerator resource of the nodes is allotted to tenants or closed to them (ResourceQuota 0).

Node shapes: the real GFD label set of an H100 under MIG mixed ``all-balanced``
(tests/unit/fixtures/h100-mixed-all-balanced.json: 1g.10gb x2, 2g.20gb x1, 3g.40gb x1 on its GPU), and node pools
with a mig-parted config whose entries select GPUs by index (``devices: [0, 1, 2, 3]``; NVIDIA mig-parted README,
"per-GPU configs"), which the device plugin publishes as ``nvidia.com/gpu`` for the MIG-disabled GPUs plus
``nvidia.com/mig-<profile>`` (upstream-facts: resources under mixed).
"""

import json
import os

from ansible_collections.fairgpu.tenancy.plugins.module_utils.cluster.node_pools import pool_gpu_nodes
from ansible_collections.fairgpu.tenancy.plugins.module_utils.tenants.plan import tenant_plan
from plan_objects import COUNTED, gpu_quotas

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")
with open(os.path.join(FIXTURES, "h100-mixed-all-balanced.json")) as _handle:
    MIXED_LABELS = json.load(_handle)

HALF = {"version": "v1", "mig-configs": {"half": [
    {"devices": [0, 1, 2, 3], "mig-enabled": True, "mig-devices": {"2g.20gb": 3}},
    {"devices": [4, 5, 6, 7], "mig-enabled": False}]}}
POOL = {"name": "gpu", "count": 2, "gpu_product": "NVIDIA-H100-80GB-HBM3", "gpu_count": 8, "cpu": "96", "memory": "1Ti"}


def quotas(plan):
    return {o["metadata"]["namespace"]: o["spec"]["hard"] for o in gpu_quotas(plan["objects"])}


def test_whole_gpus_and_mig_devices_of_one_node_each_go_to_a_tenant_and_are_closed_to_the_other():
    nodes = pool_gpu_nodes([POOL], "mixed", HALF, "half")
    assert nodes[0]["status"]["allocatable"]["nvidia.com/gpu"] == "4"
    assert nodes[0]["status"]["allocatable"]["nvidia.com/mig-2g.20gb"] == "12"
    # Explicit pods: the default pods (and CPU, memory) share is taken per accelerator resource, so two resources'
    # tenants would each default to all of the nodes' pod slots.
    tenants = [{"name": "whole", "gpus": 8, "pods": 50},
               {"name": "sliced", "gpus": 24, "gpu_resource": "nvidia.com/mig-2g.20gb", "pods": 100}]
    plan = tenant_plan(tenants, nodes)
    assert plan["errors"] == []
    hard = quotas(plan)
    assert hard["whole"]["requests.nvidia.com/gpu"] == "8" and hard["whole"]["requests.nvidia.com/mig-2g.20gb"] == "0"
    assert hard["sliced"]["requests.nvidia.com/mig-2g.20gb"] == "24" and hard["sliced"]["requests.nvidia.com/gpu"] == "0"
    assert plan["accelerators"] == [
        {"resource": "nvidia.com/gpu", "devices": 8, "allotted_to": ["whole"], "closed_to": ["sliced"]},
        {"resource": "nvidia.com/mig-2g.20gb", "devices": 24, "allotted_to": ["sliced"], "closed_to": ["whole"]}]


def test_a_resource_no_tenant_is_given_is_closed_to_all_of_them():
    # The real mixed node: its GPU is split 1g.10gb x2 + 2g.20gb + 3g.40gb; a second GPU stays whole.
    node = {"metadata": {"name": "h100-0", "labels": MIXED_LABELS},
            "status": {"allocatable": {"cpu": "96", "memory": "1Ti", "pods": "110", "nvidia.com/gpu": "1",
                                       "nvidia.com/mig-1g.10gb": MIXED_LABELS["nvidia.com/mig-1g.10gb.count"],
                                       "nvidia.com/mig-2g.20gb": MIXED_LABELS["nvidia.com/mig-2g.20gb.count"],
                                       "nvidia.com/mig-3g.40gb": MIXED_LABELS["nvidia.com/mig-3g.40gb.count"]}}}
    plan = tenant_plan([{"name": "team-a", "gpus": 2, "gpu_resource": "nvidia.com/mig-1g.10gb"}], [node])
    assert plan["errors"] == []
    assert quotas(plan)["team-a"] == dict(COUNTED, **{
        "count/jobs.batch": "100", "pods": "100", "requests.nvidia.com/gpu": "0",
        "requests.nvidia.com/mig-1g.10gb": "2", "requests.nvidia.com/mig-2g.20gb": "0",
        "requests.nvidia.com/mig-3g.40gb": "0"})
    closed = [a["resource"] for a in plan["accelerators"] if not a["allotted_to"]]
    assert closed == ["nvidia.com/gpu", "nvidia.com/mig-2g.20gb", "nvidia.com/mig-3g.40gb"]


def test_an_explicit_resource_quota_entry_wins_and_one_resource_clusters_are_unchanged():
    nodes = pool_gpu_nodes([POOL], "mixed", HALF, "half")
    tenants = [{"name": "whole", "gpus": 8, "resource_quota": {"requests.nvidia.com/mig-2g.20gb": "2"}}]
    assert quotas(tenant_plan(tenants, nodes))["whole"]["requests.nvidia.com/mig-2g.20gb"] == "2"
    plain = tenant_plan([{"name": "team-a", "gpus": 8}], pool_gpu_nodes([POOL]))
    assert quotas(plain)["team-a"] == dict(COUNTED, **{"count/jobs.batch": "100", "pods": "200",
                                                       "requests.nvidia.com/gpu": "16"})
