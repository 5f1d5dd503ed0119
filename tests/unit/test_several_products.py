"""Issue 14 item 3: a tenant holds quota on several GPU products. Nodes: the real GFD label set of an H100 node
(tests/unit/fixtures/h100-single-all-disabled.json) and the same set with the product of an A100-SXM4-80GB (labels
GFD writes the same way; product names as in mig/catalog.py), as in a cluster that mixes generations.

Design notes tested here (see kueue/objects.py cluster_queue):
- one ResourceFlavor per product, nodeLabels nvidia.com/gpu.product, so a Job that needs one product pins it with
  a nodeSelector on that label and Kueue assigns only the matching flavor (kubernetes-sigs/kueue#931: the flavor's
  nodeLabels reach the pods' nodeSelector);
- CPU, memory and pods stay in the accelerator's resource group, split per product: every flavor of a group lists
  all its resources (apis/kueue/v1beta2/clusterqueue_types.go ResourceGroup rule), and "typically cpu and memory
  are tied to the same flavors" (kubernetes-sigs/kueue PR #548 review, codependent resources);
- flavorFungibility TryNextFlavor for borrowing and preemption on tenants with several products.
"""

import json
import os

import pytest

from ansible_collections.fairgpu.tenancy.plugins.module_utils.tenants.plan import tenant_plan
from plan_objects import by_kind, gpu_quotas

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")
with open(os.path.join(FIXTURES, "h100-single-all-disabled.json")) as _handle:
    H100_LABELS = json.load(_handle)
H100, A100 = "NVIDIA-H100-80GB-HBM3", "NVIDIA-A100-SXM4-80GB"


def gpu_node(name, product, gpus=8):
    labels = dict(H100_LABELS, **{"nvidia.com/gpu.product": product, "nvidia.com/gpu.count": str(gpus),
                                  "kubernetes.io/hostname": name})
    return {"metadata": {"name": name, "labels": labels},
            "status": {"allocatable": {"cpu": "96", "memory": "1Ti", "nvidia.com/gpu": str(gpus), "pods": "110"},
                       "conditions": [{"type": "Ready", "status": "True"}]}}


NODES = [gpu_node("h100-0", H100), gpu_node("h100-1", H100), gpu_node("a100-0", A100)]
TEAMS = [
    {"name": "team-a", "products": {H100: {"gpus": 8, "borrowing_limit": 8, "lending_limit": 8},
                                    A100: {"gpus": 4, "borrowing_limit": 4}}},
    {"name": "team-b", "products": {A100: {"gpus": 4}, H100: {"gpus": 8, "lending_limit": 4}}},
]


def queues(plan):
    return {o["metadata"]["name"]: o["spec"] for o in by_kind(plan["objects"], "ClusterQueue")}


def test_two_products_two_flavors_and_per_product_quotas():
    plan = tenant_plan(TEAMS, NODES)
    assert plan["errors"] == []
    flavors = {o["metadata"]["name"]: o["spec"]["nodeLabels"] for o in by_kind(plan["objects"], "ResourceFlavor")}
    assert flavors == {"nvidia-a100-sxm4-80gb": {"nvidia.com/gpu.product": A100},
                       "nvidia-h100-80gb-hbm3": {"nvidia.com/gpu.product": H100}}
    team_a = queues(plan)["team-a"]
    assert team_a["flavorFungibility"] == {"whenCanBorrow": "TryNextFlavor", "whenCanPreempt": "TryNextFlavor"}
    group = team_a["resourceGroups"]
    assert len(group) == 1 and group[0]["coveredResources"] == ["cpu", "memory", "nvidia.com/gpu", "pods"]
    # The tenant's order is its preference: Kueue tries flavors in the ClusterQueue's order.
    assert [f["name"] for f in group[0]["flavors"]] == ["nvidia-h100-80gb-hbm3", "nvidia-a100-sxm4-80gb"]
    gpu = [f["resources"][2] for f in group[0]["flavors"]]
    assert gpu == [{"name": "nvidia.com/gpu", "nominalQuota": "8", "borrowingLimit": "8", "lendingLimit": "8"},
                   {"name": "nvidia.com/gpu", "nominalQuota": "4", "borrowingLimit": "4"}]
    # Every flavor lists every covered resource, in order.
    assert all([r["name"] for r in f["resources"]] == group[0]["coveredResources"] for f in group[0]["flavors"])
    team_b = queues(plan)["team-b"]["resourceGroups"][0]["flavors"]
    assert [f["name"] for f in team_b] == ["nvidia-a100-sxm4-80gb", "nvidia-h100-80gb-hbm3"]
    assert team_b[1]["resources"][2] == {"name": "nvidia.com/gpu", "nominalQuota": "8", "lendingLimit": "4"}


def test_cpu_memory_and_pods_are_split_in_proportion_and_add_up():
    plan = tenant_plan(TEAMS, NODES)
    tenant = next(t for t in plan["tenants"] if t["name"] == "team-a")
    flavors = queues(plan)["team-a"]["resourceGroups"][0]["flavors"]
    # team-a holds 12 of the 24 GPUs: half of 288 CPUs = 144, split 8:4 between H100 and A100.
    assert tenant["cpu"] == "144" and [f["resources"][0]["nominalQuota"] for f in flavors] == ["96", "48"]
    assert [f["resources"][1]["nominalQuota"] for f in flavors] == ["1Ti", "512Gi"]
    pods = [int(f["resources"][3]["nominalQuota"]) for f in flavors]
    assert sum(pods) == tenant["pods"] and pods[0] == 2 * pods[1]
    # The namespace quota is the tenant's total over its products.
    quota = gpu_quotas(plan["objects"])[0]["spec"]["hard"]
    assert quota["requests.nvidia.com/gpu"] == "24"  # 12 + borrowing 8 + 4


def test_simple_form_on_one_product_is_unchanged():
    one = [gpu_node("h100-0", H100), gpu_node("h100-1", H100)]
    plan = tenant_plan([{"name": "team-a", "gpus": 8}, {"name": "team-b", "gpus": 8}], one)
    spec = queues(plan)["team-a"]
    assert "flavorFungibility" not in spec
    assert len(spec["resourceGroups"][0]["flavors"]) == 1
    same = tenant_plan([{"name": "team-a", "products": {H100: {"gpus": 8}}}, {"name": "team-b", "gpus": 8}], one)
    assert same["objects"] == plan["objects"], "products with one product is the simple form"


def test_simple_form_on_two_products_says_how_to_choose():
    plan = tenant_plan([{"name": "team-a", "gpus": 8}], NODES)
    assert plan["errors"] == ["tenants_list (team-a).gpu_resource: nvidia.com/gpu is offered by several GPU products "
                              "(NVIDIA-A100-SXM4-80GB, NVIDIA-H100-80GB-HBM3); say which the tenant's guarantee is on "
                              "with products: {<product>: {gpus: N}, ...}"]


def test_guarantees_per_product_must_fit_that_products_nodes():
    tenants = [{"name": "team-a", "products": {A100: {"gpus": 6}}}, {"name": "team-b", "products": {A100: {"gpus": 4}}}]
    plan = tenant_plan(tenants, NODES)
    assert plan["errors"] == ["tenants_list: the guarantees of team-a, team-b on NVIDIA-A100-SXM4-80GB add up to 10 "
                              "nvidia.com/gpu but its nodes offer 8; lower them"]


@pytest.mark.parametrize("tenant, message", [
    ({"name": "t", "products": {"NVIDIA-B200": {"gpus": 1}}}, "products[NVIDIA-B200]: no GPU node has this product"),
    ({"name": "t", "gpus": 4, "products": {H100: {"gpus": 4}}}, "give gpus per product, not also for the tenant"),
    ({"name": "t", "products": {H100: {"gpus": -1}}}, "products[NVIDIA-H100-80GB-HBM3].gpus: the guarantee must be"),
    ({"name": "t", "products": {H100: {"gpus": 2, "lending_limit": 3}}}, "lending_limit: 3 is more than"),
    ({"name": "t", "products": {H100: {"gpus": 2, "borrow": 3}}}, ".borrow: unknown field"),
    ({"name": "t", "products": []}, "products: give a mapping of GPU product"),
])
def test_bad_products_are_named(tenant, message):
    plan = tenant_plan([tenant], NODES)
    assert any(message in e for e in plan["errors"]), plan["errors"]


def test_per_product_borrowing_needs_a_cohort():
    plan = tenant_plan([{"name": "t", "products": {H100: {"gpus": 2, "borrowing_limit": 2}}}], NODES, cohort="")
    assert any("borrowing_limit" in e and "cohort" in e for e in plan["errors"]), plan["errors"]


def test_second_plan_is_the_same():
    assert tenant_plan(TEAMS, NODES)["objects"] == tenant_plan(TEAMS, list(reversed(NODES)))["objects"]


def test_the_report_shows_the_split_over_products():
    from ansible_collections.fairgpu.tenancy.plugins.module_utils.validation.report import report_document, report_markdown

    plan = tenant_plan(TEAMS, NODES)
    page = report_markdown(report_document("c", plan["tenants"], [], "now"), {})
    assert "| 12 (NVIDIA-H100-80GB-HBM3: 8, NVIDIA-A100-SXM4-80GB: 4) |" in page
