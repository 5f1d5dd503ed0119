"""Issue 14 item 2: shared GPUs (time-slicing, MPS). Node shapes as NVIDIA documents them for the GPU Operator
("GPU sharing" / MPS page, renameByDefault false): ``nvidia.com/gpu.count`` stays the physical count,
``nvidia.com/gpu.product`` gets ``-SHARED``, ``nvidia.com/gpu.replicas`` and ``nvidia.com/gpu.sharing-strategy``
are set, and the node advertises count x replicas (their example: count 4, replicas 4, ``nvidia.com/gpu: 16``).
Labels otherwise from the captured H100 node (tests/unit/fixtures/h100-single-all-disabled.json); a non-shared
node says replicas 0 or 1 (the captured mixed H100 node says 0).
"""

import json
import os

import pytest

from ansible_collections.fairgpu.tenancy.plugins.module_utils.cluster.node_pools import node_pool_errors, pool_gpu_nodes
from ansible_collections.fairgpu.tenancy.plugins.module_utils.tenants.plan import tenant_plan
from plan_objects import gpu_quotas

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")
with open(os.path.join(FIXTURES, "h100-single-all-disabled.json")) as _handle:
    H100_LABELS = json.load(_handle)
H100 = "NVIDIA-H100-80GB-HBM3"


def node(name, replicas=4, strategy="time-slicing", rename=False, gpus=8):
    labels = dict(H100_LABELS, **{"kubernetes.io/hostname": name, "nvidia.com/gpu.count": str(gpus),
                                  "nvidia.com/gpu.replicas": str(replicas),
                                  "nvidia.com/gpu.sharing-strategy": strategy if replicas > 1 else "none"})
    resource = "nvidia.com/gpu"
    if replicas > 1 and not rename:
        labels["nvidia.com/gpu.product"] = H100 + "-SHARED"
    elif replicas > 1:
        resource = "nvidia.com/gpu.shared"
    return {"metadata": {"name": name, "labels": labels},
            "status": {"allocatable": {"cpu": "96", "memory": "1Ti", "pods": "110", resource: str(gpus * replicas)}}}


def by_kind(plan, kind):
    return [o for o in plan["objects"] if o["kind"] == kind]


def gpu_quota(plan, tenant):
    spec = next(o["spec"] for o in by_kind(plan, "ClusterQueue") if o["metadata"]["name"] == tenant)
    return spec["resourceGroups"][0]["flavors"][0]["resources"][2]


def test_two_tenants_cannot_be_guaranteed_16_each_on_8_shared_gpus():
    # The case: 8 GPUs, replicas 4, nvidia.com/gpu: 32. Guarantees are physical GPUs by default.
    plan = tenant_plan([{"name": "team-a", "gpus": 16}, {"name": "team-b", "gpus": 16}], [node("ts-0")])
    assert plan["objects"] == [] and any("add up to 128" in e for e in plan["errors"]), plan["errors"]
    plan = tenant_plan([{"name": "team-a", "gpus": 4}, {"name": "team-b", "gpus": 4}], [node("ts-0")])
    assert plan["errors"] == []
    assert gpu_quota(plan, "team-a") == {"name": "nvidia.com/gpu", "nominalQuota": "16"}  # 4 physical x 4


def test_the_shared_flavor_selects_product_and_replicas():
    plan = tenant_plan([{"name": "team-a", "gpus": 8}], [node("ts-0")])
    flavor = by_kind(plan, "ResourceFlavor")[0]
    assert flavor["metadata"]["name"] == "nvidia-h100-80gb-hbm3-shared"
    assert flavor["spec"]["nodeLabels"] == {"nvidia.com/gpu.product": H100 + "-SHARED", "nvidia.com/gpu.replicas": "4"}


def test_guarantees_in_replicas_when_the_tenant_says_so():
    plan = tenant_plan([{"name": "team-a", "gpus": 6, "gpu_units": "replicas", "borrowing_limit": 2}], [node("ts-0")])
    assert gpu_quota(plan, "team-a") == {"name": "nvidia.com/gpu", "nominalQuota": "6", "borrowingLimit": "2"}
    assert tenant_plan([{"name": "t", "gpus": 1, "gpu_units": "slices"}], [node("ts-0")])["errors"] == [
        "tenants_list[0] (t).gpu_units: 'slices' is not physical or replicas"]


def test_limits_and_maximum_are_physical_too():
    plan = tenant_plan([{"name": "a", "gpus": 2, "borrowing_limit": 2, "lending_limit": 1, "max_gpus": 4},
                        {"name": "b", "gpus": 2}], [node("ts-0")])
    assert gpu_quota(plan, "a") == {"name": "nvidia.com/gpu", "nominalQuota": "8", "borrowingLimit": "8",
                                    "lendingLimit": "4"}
    quota = next(o for o in gpu_quotas(plan["objects"]) if o["metadata"]["namespace"] == "a")["spec"]["hard"]
    assert quota["requests.nvidia.com/gpu"] == "16"


def test_shared_and_whole_gpus_of_one_model_get_a_flavor_each():
    nodes = [node("whole-0", replicas=1), node("ts-0", replicas=4)]
    tenants = [{"name": "train", "products": {H100: {"gpus": 8}}},
               {"name": "notebooks", "products": {H100 + "-SHARED": {"gpus": 8}}}]
    plan = tenant_plan(tenants, nodes)
    assert plan["errors"] == []
    assert gpu_quota(plan, "train")["nominalQuota"] == "8" and gpu_quota(plan, "notebooks")["nominalQuota"] == "32"
    names = sorted(f["metadata"]["name"] for f in by_kind(plan, "ResourceFlavor"))
    assert names == ["nvidia-h100-80gb-hbm3", "nvidia-h100-80gb-hbm3-shared"]


def test_rename_by_default_gives_the_shared_resource():
    # renameByDefault: the resource is nvidia.com/gpu.shared and the product keeps its name.
    plan = tenant_plan([{"name": "team-a", "gpus": 2, "gpu_resource": "nvidia.com/gpu.shared"}],
                       [node("ts-0", rename=True)])
    assert plan["errors"] == []
    assert gpu_quota(plan, "team-a") == {"name": "nvidia.com/gpu.shared", "nominalQuota": "8"}
    # A pod asking for the shared resource is an accelerator pod for the admission policy too.
    policy = next(o for o in by_kind(plan, "ValidatingAdmissionPolicy") if o["metadata"]["name"] == "fairgpu-tenant-gpu-pods")
    assert "nvidia.com/gpu.shared" in policy["spec"]["variables"][0]["expression"]


def test_one_product_shared_two_ways_is_refused_with_the_fix():
    nodes = [node("ts-0", replicas=4, rename=True), node("ts-1", replicas=2, rename=True)]
    plan = tenant_plan([{"name": "team-a", "gpus": 1, "gpu_resource": "nvidia.com/gpu.shared"}], nodes)
    assert len(plan["errors"]) == 1 and "shared differently" in plan["errors"][0]
    assert "time-slicing x2 on ts-1; time-slicing x4 on ts-0" in plan["errors"][0]


def test_the_report_shows_replicas_and_physical_gpus():
    from ansible_collections.fairgpu.tenancy.plugins.module_utils.validation.report import report_document, report_markdown

    plan = tenant_plan([{"name": "team-a", "gpus": 2}], [node("ts-0")])
    page = report_markdown(report_document("c", plan["tenants"], [], "now", capacity=plan["capacity"]), {})
    assert "| 8 replicas = 2 physical GPUs (time-slicing x4) |" in page
    # The capacity table counts as Kueue does (replicas) and names the sharing.
    assert "| %s-SHARED | nvidia.com/gpu | 32 | 32 | 8 | time-slicing x4 | none |" % H100 in page


POOL = {"name": "ts", "count": 1, "gpu_product": H100, "gpu_count": 8, "cpu": "96", "memory": "1Ti",
        "gpu_sharing": {"strategy": "time-slicing", "replicas": 4}}


def test_node_pools_publish_what_the_gpu_operator_would():
    assert node_pool_errors([POOL]) == []
    shared = pool_gpu_nodes([POOL])[0]
    labels = shared["metadata"]["labels"]
    assert labels["nvidia.com/gpu.product"] == H100 + "-SHARED" and labels["nvidia.com/gpu.count"] == "8"
    assert labels["nvidia.com/gpu.replicas"] == "4" and labels["nvidia.com/gpu.sharing-strategy"] == "time-slicing"
    assert shared["status"]["allocatable"]["nvidia.com/gpu"] == "32"
    assert tenant_plan([{"name": "a", "gpus": 4}, {"name": "b", "gpus": 4}], [shared])["errors"] == []


@pytest.mark.parametrize("sharing, message", [
    ({"strategy": "mig", "replicas": 4}, "gpu_sharing.strategy: 'mig' is not one of time-slicing, mps"),
    ({"strategy": "mps", "replicas": 1}, "gpu_sharing.replicas: must be an integer >= 2"),
    ({"strategy": "mps", "replicas": 2, "rename": True}, "gpu_sharing.rename: unknown field"),
    ("time-slicing", "gpu_sharing: give {strategy"),
])
def test_bad_pool_sharing_is_named(sharing, message):
    errors = node_pool_errors([dict(POOL, gpu_sharing=sharing)])
    assert any(message in e for e in errors), errors


def test_one_gpu_with_twelve_replicas_as_reported_in_the_field():
    # https://github.com/NVIDIA/gpu-operator/issues/684: one physical GPU, time-slicing replicas 12, the node
    # advertises nvidia.com/gpu: 12. One physical GPU is the whole node: 12 replicas in Kueue's units.
    plan = tenant_plan([{"name": "team-a", "gpus": 1}], [node("g4dn-0", replicas=12, gpus=1)])
    assert plan["errors"] == [] and gpu_quota(plan, "team-a")["nominalQuota"] == "12"
    assert tenant_plan([{"name": "team-a", "gpus": 2}], [node("g4dn-0", replicas=12, gpus=1)])["errors"]


def test_a_node_has_one_replica_count():
    # The device plugin gives every GPU of a node the same replicas (per-GPU counts were asked for and not added:
    # https://github.com/NVIDIA/k8s-device-plugin/issues/1786), so one nvidia.com/gpu.replicas label per node is
    # the whole story; two replicas asked for can be two slices of one GPU
    # (https://github.com/NVIDIA/gpu-operator/issues/386), which is why the guarantee is stated in physical GPUs.
    plan = tenant_plan([{"name": "team-a", "gpus": 3}], [node("ts-0", replicas=2, gpus=4), node("ts-1", replicas=2, gpus=4)])
    assert gpu_quota(plan, "team-a")["nominalQuota"] == "6"
