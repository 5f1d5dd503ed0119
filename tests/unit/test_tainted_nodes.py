"""Issue 14 item 1: tainted, cordoned and NotReady GPU nodes. Nodes are built from the real GFD label set of an H100
node (tests/unit/fixtures/h100-single-all-disabled.json) with the taints managed GPU pools carry:

- GKE adds ``nvidia.com/gpu=present:NoSchedule`` to every GPU node pool
  (https://cloud.google.com/kubernetes-engine/docs/how-to/gpus, "GKE automatically adds the taint");
- a provider's own pool taint, such as ``sku=gpu:NoSchedule`` (AKS' GPU node pool guide) or a
  ``dedicated=gpu:NoExecute``;
- ``kubectl cordon`` sets ``spec.unschedulable`` and the node lifecycle controller adds
  ``node.kubernetes.io/unschedulable:NoSchedule``; a NotReady node gets ``node.kubernetes.io/not-ready:NoExecute``
  with a ``timeAdded`` (https://kubernetes.io/docs/reference/labels-annotations-taints/).
"""

import json
import os

import pytest

from ansible_collections.fairgpu.tenancy.plugins.module_utils.cluster.node_pools import (
    node_pool_errors,
    pool_gpu_nodes,
)
from ansible_collections.fairgpu.tenancy.plugins.module_utils.kueue import taints
from ansible_collections.fairgpu.tenancy.plugins.module_utils.tenants.plan import cluster_capacity, tenant_plan
from ansible_collections.fairgpu.tenancy.plugins.module_utils.validation.report import (
    capacity_rows,
    report_document,
    report_markdown,
)

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")
with open(os.path.join(FIXTURES, "h100-single-all-disabled.json")) as _handle:
    H100_LABELS = json.load(_handle)

GKE_GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
POOL_TAINT = {"key": "sku", "value": "gpu", "effect": "NoSchedule"}
CORDON_TAINT = {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule", "timeAdded": "2026-11-30T10:00:00Z"}
NOT_READY_TAINT = {"key": "node.kubernetes.io/not-ready", "effect": "NoExecute", "timeAdded": "2026-11-30T10:00:00Z"}
TEAMS = [{"name": "team-a", "gpus": 8}, {"name": "team-b", "gpus": 8}]


def h100(name, taints_=(), unschedulable=None, ready="True"):
    """An H100 node as the API returns it: the captured GFD labels (of a 1-GPU machine, so gpu.count says 8 here),
    8 GPUs, spec taints, a Ready condition."""
    labels = dict(H100_LABELS, **{"kubernetes.io/hostname": name, "nvidia.com/gpu.count": "8"})
    node = {"metadata": {"name": name, "labels": labels},
            "spec": {"taints": [dict(t) for t in taints_]},
            "status": {"allocatable": {"cpu": "96", "memory": "1Ti", "nvidia.com/gpu": "8",
                                       "pods": "110"},
                       "conditions": [{"type": "MemoryPressure", "status": "False"}, {"type": "Ready", "status": ready}]}}
    if unschedulable is not None:
        node["spec"]["unschedulable"] = unschedulable
    return node


def flavor(plan):
    return next(o for o in plan["objects"] if o["kind"] == "ResourceFlavor")


def test_the_fixture_is_a_gfd_h100():
    assert H100_LABELS["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3" and H100_LABELS["nvidia.com/gpu.present"] == "true"


def test_flavor_declares_and_tolerates_the_pools_taints():
    # Without the flavor's tolerations, Kueue would refuse to assign the tainted flavor to Jobs that do not tolerate
    # it, and without nodeTaints it would admit Jobs whose pods then stay Pending. When the flavor's tolerations match
    # its nodeTaints, Kueue admits and adds them to the pods (kubernetes-sigs/kueue#3721, #4646 / PR #4704).
    nodes = [h100("gpu-0", [GKE_GPU_TAINT, POOL_TAINT]), h100("gpu-1", [POOL_TAINT, GKE_GPU_TAINT])]
    plan = tenant_plan(TEAMS, nodes)
    assert plan["errors"] == [] and plan["warnings"] == []
    spec = flavor(plan)["spec"]
    assert spec["nodeLabels"] == {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
    assert spec["nodeTaints"] == [GKE_GPU_TAINT, POOL_TAINT]
    assert spec["tolerations"] == [
        {"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"},
        {"key": "sku", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}]
    # The same nodes give the same objects: a second run changes nothing.
    assert tenant_plan(TEAMS, list(reversed(nodes)))["objects"] == plan["objects"]


def test_untainted_nodes_keep_the_flavor_as_before():
    spec = flavor(tenant_plan(TEAMS, [h100("gpu-0"), h100("gpu-1")]))["spec"]
    assert spec == {"nodeLabels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}}


def test_only_the_taints_common_to_the_schedulable_nodes_and_no_lifecycle_taints():
    nodes = [h100("gpu-0", [GKE_GPU_TAINT, POOL_TAINT]), h100("gpu-1", [GKE_GPU_TAINT]),
             # A cordoned node without the pool taint does not narrow what the others have in common.
             h100("gpu-2", [CORDON_TAINT], unschedulable=True)]
    cap = cluster_capacity(nodes)
    assert cap["taints"] == {"NVIDIA-H100-80GB-HBM3": [GKE_GPU_TAINT]}
    # Lifecycle taints never reach a flavor, even when every node has them.
    assert taints.common_taints([h100("a", [CORDON_TAINT, GKE_GPU_TAINT]), h100("b", [GKE_GPU_TAINT, CORDON_TAINT])]) \
        == [GKE_GPU_TAINT]


def test_a_taint_without_value_is_tolerated_with_exists_and_prefer_no_schedule_is_not_tolerated():
    # Kueue evaluates only NoSchedule and NoExecute at admission (kubernetes-sigs/kueue#4257).
    found = taints.tolerations_for([{"key": "dedicated", "effect": "NoExecute"},
                                    {"key": "spot", "value": "true", "effect": "PreferNoSchedule"}])
    assert found == [{"key": "dedicated", "operator": "Exists", "effect": "NoExecute"}]


def test_cordoned_and_not_ready_nodes_are_not_schedulable_capacity():
    nodes = [h100("gpu-0", [GKE_GPU_TAINT]), h100("gpu-1", [GKE_GPU_TAINT, CORDON_TAINT], unschedulable=True),
             h100("gpu-2", [GKE_GPU_TAINT, NOT_READY_TAINT], ready="Unknown")]
    cap = cluster_capacity(nodes)
    assert cap["resources"] == {"nvidia.com/gpu": 24}, "installed: quotas are planned on it"
    assert cap["schedulable"] == {"nvidia.com/gpu": 8}
    assert [(u["name"], u["reason"]) for u in cap["unavailable"]] == [("gpu-1", "cordoned"), ("gpu-2", "NotReady")]


def test_a_drain_below_the_guarantees_warns_with_the_node_names_and_does_not_fail():
    healthy = [h100("gpu-0", [GKE_GPU_TAINT]), h100("gpu-1", [GKE_GPU_TAINT])]
    drained = [healthy[0], h100("gpu-1", [GKE_GPU_TAINT, CORDON_TAINT], unschedulable=True)]
    before, after = tenant_plan(TEAMS, healthy), tenant_plan(TEAMS, drained)
    assert after["errors"] == []
    assert len(after["warnings"]) == 1
    assert "guaranteed 16" in after["warnings"][0] and "offer 8 of the 16 installed" in after["warnings"][0]
    assert "gpu-1 (cordoned)" in after["warnings"][0]
    # The objects do not change with the drain (a second run against the drained cluster is changed=0 too).
    assert after["objects"] == before["objects"]


def test_guarantees_within_the_schedulable_nodes_do_not_warn():
    nodes = [h100("gpu-0"), h100("gpu-1"), h100("gpu-2", unschedulable=True)]
    assert tenant_plan(TEAMS, nodes)["warnings"] == []


def test_inventory_replaces_the_flavors_taints_and_tolerations():
    nodes = [h100("gpu-0", [GKE_GPU_TAINT, POOL_TAINT])]
    settings = {"NVIDIA-H100-80GB-HBM3": {"node_taints": [GKE_GPU_TAINT],
                                          "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}]}}
    plan = tenant_plan([{"name": "team-a", "gpus": 8}], nodes, gpu_flavors=settings)
    assert plan["errors"] == []
    assert flavor(plan)["spec"]["nodeTaints"] == [GKE_GPU_TAINT]
    assert flavor(plan)["spec"]["tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Exists"}]
    absent = tenant_plan([{"name": "team-a", "gpus": 8}], nodes, gpu_flavors={"NVIDIA-A100-SXM4-40GB": {}})
    assert absent["errors"] == [] and "no GPU node has this product" in absent["warnings"][0]


@pytest.mark.parametrize("settings, message", [
    ("x", "give a mapping of GPU product"),
    ({"P": {"colour": []}}, "tenants_gpu_flavors[P].colour: unknown field"),
    ({"P": {"node_taints": [{"key": "a", "effect": "Sometimes"}]}}, "effect: 'Sometimes' is not one of"),
    ({"P": {"node_taints": [{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}]}},
     "is a node's state, not its pool's"),
    ({"P": {"node_taints": [{"key": "k%d" % i, "effect": "NoSchedule"} for i in range(9)]}}, "at most 8"),
    ({"P": {"node_taints": [{"key": "a", "effect": "NoSchedule"}, {"key": "a", "value": "b", "effect": "NoSchedule"}]}},
     "unique by key and effect"),
    ({"P": {"tolerations": [{"operator": "Equal", "value": "x"}]}}, "must be Exists when key is empty"),
    ({"P": {"tolerations": [{"key": "a", "operator": "Exists", "value": "x"}]}}, "must be left out with operator Exists"),
    ({"P": {"tolerations": [{"key": "a", "effect": "NoSchedule", "tolerationSeconds": 30}]}}, "only with effect NoExecute"),
])
def test_bad_flavor_settings_stop_the_plan(settings, message):
    plan = tenant_plan(TEAMS, [h100("gpu-0"), h100("gpu-1")], gpu_flavors=settings)
    assert any(message in e for e in plan["errors"]), plan["errors"]
    assert plan["objects"] == []


def test_more_than_eight_common_taints_are_refused_with_the_fix():
    many = [{"key": "example.com/t%d" % i, "value": "x", "effect": "NoSchedule"} for i in range(9)]
    plan = tenant_plan(TEAMS, [h100("gpu-0", many), h100("gpu-1", many)])
    assert any("takes at most 8" in e and "tenants_gpu_flavors[NVIDIA-H100-80GB-HBM3]" in e for e in plan["errors"])


POOL = {"name": "gpu", "count": 2, "gpu_product": "NVIDIA-H100-80GB-HBM3", "gpu_count": 8, "cpu": "96", "memory": "1Ti"}


def test_node_pools_take_taints_and_cordon():
    drained = dict(POOL, name="drained", count=1, taints=[GKE_GPU_TAINT], unschedulable=True)
    pools = [dict(POOL, taints=[GKE_GPU_TAINT]), drained]
    assert node_pool_errors(pools) == []
    nodes = pool_gpu_nodes(pools)
    assert nodes[0]["spec"] == {"taints": [GKE_GPU_TAINT]}
    assert nodes[2]["spec"] == {"unschedulable": True, "taints": [
        GKE_GPU_TAINT, {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}]}
    plan = tenant_plan([{"name": "team-a", "gpus": 16}, {"name": "team-b", "gpus": 8}], nodes)
    assert plan["errors"] == [] and "drained-0 (cordoned)" in plan["warnings"][0]
    assert flavor(plan)["spec"]["nodeTaints"] == [GKE_GPU_TAINT]


@pytest.mark.parametrize("change, message", [
    ({"taints": "nvidia.com/gpu=present:NoSchedule"}, "taints: give a list of taints"),
    ({"taints": [{"key": "nvidia.com/gpu", "value": "present"}]}, "taints[0].effect: None is not one of"),
    ({"taints": [{"key": "bad key", "effect": "NoSchedule"}]}, "taints[0].key: 'bad key' is not a label name"),
    ({"taints": [{"key": "a", "effect": "NoSchedule", "time": 1}]}, "taints[0].time: unknown field"),
    ({"unschedulable": "yes"}, "unschedulable: must be true or false"),
])
def test_bad_pool_taints_are_named(change, message):
    errors = node_pool_errors([dict(POOL, **change)])
    assert any(message in e for e in errors), errors


def test_the_report_shows_the_plans_warnings_without_failing():
    from ansible_collections.fairgpu.tenancy.plugins.module_utils.validation.report import report_document, report_markdown

    drained = [h100("gpu-0"), h100("gpu-1", [CORDON_TAINT], unschedulable=True)]
    plan = tenant_plan(TEAMS, drained)
    scenario = {"name": "s", "title": "S", "checks": [{"check": "c", "expected": 1, "observed": 1, "passed": True}]}
    document = report_document("embedded", plan["tenants"], [scenario], "now", plan["warnings"])
    assert document["passed"] is True and document["warnings"] == plan["warnings"]
    assert "## Warnings\n\n- nvidia.com/gpu on NVIDIA-H100-80GB-HBM3: the tenants are guaranteed 16" \
        in report_markdown(document, {})
    assert "gpu-1 (cordoned)" in report_markdown(document, {})


def test_a_short_product_warns_although_another_product_has_room():
    # Per product: a flavor's quota is only good on its own product's nodes.
    a100 = dict(h100("a100-0"))
    a100["metadata"] = {"name": "a100-0", "labels": dict(h100("a100-0")["metadata"]["labels"],
                                                         **{"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"})}
    nodes = [h100("gpu-0"), h100("gpu-1", [CORDON_TAINT], unschedulable=True), a100]
    tenants = [{"name": "team-a", "products": {"NVIDIA-H100-80GB-HBM3": {"gpus": 16}, "NVIDIA-A100-SXM4-80GB": {"gpus": 0}}}]
    plan = tenant_plan(tenants, nodes)
    assert plan["errors"] == []
    assert plan["warnings"] == [
        "nvidia.com/gpu on NVIDIA-H100-80GB-HBM3: the tenants are guaranteed 16 but the schedulable nodes offer 8 of "
        "the 16 installed; not counted: gpu-1 (cordoned). Kueue admits up to the guarantees and pods beyond what the "
        "nodes hold stay Pending until the nodes return (uncordon them or lower the guarantees)"]


def test_the_report_shows_capacity_per_product_with_the_nodes_not_counted():
    nodes = [h100("gpu-0", [GKE_GPU_TAINT]), h100("gpu-1", [GKE_GPU_TAINT, CORDON_TAINT], unschedulable=True)]
    plan = tenant_plan(TEAMS, nodes)
    rows = capacity_rows(plan["capacity"], plan["tenants"])
    assert rows == [{"product": "NVIDIA-H100-80GB-HBM3", "resource": "nvidia.com/gpu", "installed": 16,
                     "schedulable": 8, "guaranteed": 16, "sharing": None, "not_counted": ["gpu-1 (cordoned)"]}]
    page = report_markdown(report_document("embedded", plan["tenants"], [], "t", plan["warnings"], plan["capacity"]),
                           {})
    assert "| NVIDIA-H100-80GB-HBM3 | nvidia.com/gpu | 16 | 8 | 16 | none | gpu-1 (cordoned) |" in page
    assert capacity_rows(None, plan["tenants"]) == []
    assert "Capacity per GPU product" not in report_markdown(report_document("x", plan["tenants"], [], "t"), {})
