"""Tenant spec validation, quota arithmetic and the objects built from it."""

import pytest
from hypothesis import given, settings, strategies as st

from ansible_collections.fairgpu.tenancy.plugins.module_utils.common.names import ADMISSION_POLICIES
from ansible_collections.fairgpu.tenancy.plugins.module_utils.tenants import quota
from ansible_collections.fairgpu.tenancy.plugins.module_utils.kueue.objects import flavor_name
from ansible_collections.fairgpu.tenancy.plugins.module_utils.tenants.plan import cluster_capacity, tenant_plan
from ansible_collections.fairgpu.tenancy.plugins.module_utils.tenants.spec import tenant_errors
from plan_objects import COUNTED, by_kind, gpu_quotas


def node(name, gpus=8, product="NVIDIA-H100-80GB-HBM3", cpu="96", memory="1Ti"):
    return {"metadata": {"name": name, "labels": {"nvidia.com/gpu.product": product, "nvidia.com/gpu.present": "true"}},
            "status": {"allocatable": {"cpu": cpu, "memory": memory, "nvidia.com/gpu": str(gpus), "pods": "110"}}}


NODES = [node("gpu-node-0"), node("gpu-node-1")]
TEAMS = [
    {"name": "team-a", "gpus": 8, "borrowing_limit": 8, "lending_limit": 8, "max_gpus": 16, "weight": 1},
    {"name": "team-b", "gpus": 8, "borrowing_limit": 8, "lending_limit": 8, "max_gpus": 16, "weight": 1},
]


def test_capacity_sums_gpu_nodes_only():
    cap = cluster_capacity(NODES + [{"metadata": {"name": "cpu"}, "status": {"allocatable": {"cpu": "8"}}}])
    assert cap["resources"] == {"nvidia.com/gpu": 16}
    assert cap["cpu"] == 192000 and cap["memory"] == 2 * 2 ** 40
    assert cap["products"] == {"NVIDIA-H100-80GB-HBM3": {"nvidia.com/gpu": 16}}


def test_default_inventory_builds_the_task_objects():
    plan = tenant_plan(TEAMS, NODES)
    assert plan["errors"] == []
    objects = plan["objects"]
    kinds = [o["kind"] for o in objects]
    assert kinds[:14] == ["ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"] * 6 + ["Cohort", "ResourceFlavor"]
    assert all(o["apiVersion"] == "kueue.x-k8s.io/v1beta2" for o in objects if "kueue" in o["apiVersion"])
    flavor = by_kind(objects, "ResourceFlavor")[0]
    assert flavor["spec"]["nodeLabels"] == {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
    cq = {o["metadata"]["name"]: o for o in by_kind(objects, "ClusterQueue")}
    spec = cq["team-a"]["spec"]
    assert spec["cohortName"] == "fairgpu"
    assert spec["namespaceSelector"] == {"matchLabels": {"fairgpu.io/tenant": "team-a"}}
    assert spec["resourceGroups"][0]["coveredResources"] == ["cpu", "memory", "nvidia.com/gpu", "pods"]
    gpu = spec["resourceGroups"][0]["flavors"][0]["resources"][2]
    assert gpu == {"name": "nvidia.com/gpu", "nominalQuota": "8", "borrowingLimit": "8", "lendingLimit": "8"}
    assert spec["preemption"]["reclaimWithinCohort"] == "Any"
    assert spec["fairSharing"] == {"weight": "1"}
    # Pod slots: 2 nodes x (110 - 10 kept for the nodes' daemons), half each; the quota caps what borrowing reaches.
    assert spec["resourceGroups"][0]["flavors"][0]["resources"][3] == {"name": "pods", "nominalQuota": "100"}
    # No pod may ask for more GPUs than one node has (8), although the tenant may hold 16.
    limits = by_kind(objects, "LimitRange")[0]["spec"]["limits"]
    assert limits[0]["max"] == {"nvidia.com/gpu": "8"} and limits[1] == {"type": "Pod", "max": {"nvidia.com/gpu": "8"}}
    assert limits[0]["default"]["nvidia.com/gpu"] == limits[0]["defaultRequest"]["nvidia.com/gpu"] == "0"
    # A limit at most 4 (CPU) and 2 (memory) times its request: Kueue counts requests, a node gives limits.
    assert limits[0]["maxLimitRequestRatio"] == {"cpu": "4", "memory": "2"}
    quotas = gpu_quotas(objects)
    assert [q["spec"]["hard"] for q in quotas] == [
        dict(COUNTED, **{"requests.nvidia.com/gpu": "16", "pods": "200", "count/jobs.batch": "100"})] * 2
    # No pod of a tenant namespace may use the system PriorityClasses (kube-scheduler preempts for them).
    priority = [o for o in by_kind(objects, "ResourceQuota") if o["metadata"]["name"] == "fairgpu-denied-priority"]
    assert [q["spec"] for q in priority] == [{"hard": {"pods": "0"}, "scopeSelector": {"matchExpressions": [
        {"scopeName": "PriorityClass", "operator": "In",
         "values": ["system-node-critical", "system-cluster-critical"]}]}}] * 2
    namespace = by_kind(objects, "Namespace")[0]["metadata"]["labels"]
    assert {k: v for k, v in namespace.items() if k.startswith("pod-security")} == {
        "pod-security.kubernetes.io/enforce": "baseline", "pod-security.kubernetes.io/enforce-version": "latest",
        "pod-security.kubernetes.io/warn": "restricted", "pod-security.kubernetes.io/warn-version": "latest"}
    lqs = sorted((o["metadata"]["namespace"], o["metadata"]["name"]) for o in by_kind(objects, "LocalQueue"))
    assert lqs == [("team-a", "default"), ("team-a", "team-a-queue"), ("team-b", "default"), ("team-b", "team-b-queue")]
    # CPU and memory default to the tenant's GPU share of the cluster (half each here).
    cpu = spec["resourceGroups"][0]["flavors"][0]["resources"][0]
    assert cpu == {"name": "cpu", "nominalQuota": "96"}
    assert spec["resourceGroups"][0]["flavors"][0]["resources"][1] == {"name": "memory", "nominalQuota": "1Ti"}


def test_quantities_are_canonical_so_a_second_apply_is_a_no_op():
    tenants = [dict(TEAMS[0], cpu="1500m", memory="4096Mi"), dict(TEAMS[1], gpus=0, lending_limit=None)]
    plan = tenant_plan(tenants, NODES)
    quotas = [o["spec"]["resourceGroups"][0]["flavors"][0]["resources"] for o in by_kind(plan["objects"], "ClusterQueue")]
    assert [q[0]["nominalQuota"] for q in quotas] == ["1500m", "0"]
    assert [q[1]["nominalQuota"] for q in quotas] == ["4Gi", "0"]


def test_tenant_role_cannot_unsuspend_or_touch_quota():
    objects = tenant_plan(TEAMS, NODES)["objects"]
    role = by_kind(objects, "Role")[0]
    verbs = {(g, r): rule["verbs"] for rule in role["rules"] for g in rule["apiGroups"] for r in rule["resources"]}
    assert "update" not in verbs[("batch", "jobs")] and "patch" not in verbs[("batch", "jobs")]
    assert verbs[("kueue.x-k8s.io", "workloads")] == ["get", "list", "watch"]
    assert ("", "secrets") not in verbs
    assert by_kind(objects, "RoleBinding")[0]["subjects"][0]["name"] == "team-a"


@pytest.mark.parametrize("tenants, message", [
    (TEAMS + [dict(TEAMS[0])], "tenants_list[2] (team-a).name: 'team-a' is used by two tenants"),
    ([dict(TEAMS[0], gpus=-1), TEAMS[1]], "tenants_list[0] (team-a).gpus: the guarantee must be a whole number of GPUs >= 0, got -1"),
    ([dict(TEAMS[0], gpus=1.5), TEAMS[1]], "tenants_list[0] (team-a).gpus: the guarantee must be a whole number"),
    ([dict(TEAMS[0], gpus=12), TEAMS[1]], "the guarantees (gpus) of team-a, team-b add up to 20 nvidia.com/gpu but the cluster's nodes offer 16"),
    ([dict(TEAMS[0], gpu_resource="nvidia.com/gpus"), TEAMS[1]], "tenants_list[0] (team-a).gpu_resource: 'nvidia.com/gpus' is not an accelerator resource"),
    ([dict(TEAMS[0], weight=0), TEAMS[1]], "tenants_list[0] (team-a).weight: the fair-sharing weight must be a number > 0, got 0"),
    # apimachinery would write 1000E back as "1" (common/quantity.py)
    ([dict(TEAMS[0], max_jobs=10 ** 21), TEAMS[1]], "tenants_list[0] (team-a).max_jobs: 1000000000000000000000 is too large to be written"),
    ([dict(TEAMS[0], resource_quota={"requests.cpu": "1000E"}), TEAMS[1]],
     "tenants_list[0] (team-a).resource_quota['requests.cpu']: '1000E' is not a Kubernetes quantity >= 0"),
    ([dict(TEAMS[0], lending_limit=9), TEAMS[1]], "tenants_list[0] (team-a).lending_limit: 9 is more than the tenant's guarantee"),
    ([dict(TEAMS[0], max_gpus=4), TEAMS[1]], "tenants_list[0] (team-a).max_gpus: 4 is below the guarantee"),
    ([dict(TEAMS[0], namespaces=["team-b"]), TEAMS[1]], "'team-b' already belongs to tenant 'team-a'"),
    ([dict(TEAMS[0], namespaces=["kube-system"]), TEAMS[1]], "'kube-system' is a system namespace"),
    ([dict(TEAMS[0], name="Team_A"), TEAMS[1]], "'Team_A' is not a lower-case DNS label"),
    ([dict(TEAMS[0], gpu=8), TEAMS[1]], "tenants_list[0] (team-a).gpu: unknown field"),
    ([dict(TEAMS[0], admission_fair_sharing="yes"), TEAMS[1]],
     "tenants_list[0] (team-a).admission_fair_sharing: must be true or false, got 'yes'"),
    ([dict(TEAMS[0], local_queue_weights={"team-a": 2}), TEAMS[1]],
     "tenants_list[0] (team-a).local_queue_weights: Kueue reads a LocalQueue's weight only for admission fair sharing"),
    ([dict(TEAMS[0], admission_fair_sharing=True, local_queue_weights={"team-b": 2}), TEAMS[1]],
     "tenants_list[0] (team-a).local_queue_weights: 'team-b' is not one of the tenant's namespaces team-a"),
    # A LocalQueue of weight 0 has an infinite usage (Kueue v0.19.2 CalculateUsage), first while idle before
    # kubernetes-sigs/kueue#13479.
    ([dict(TEAMS[0], admission_fair_sharing=True, local_queue_weights={"team-a": 0}), TEAMS[1]],
     "tenants_list[0] (team-a).local_queue_weights: team-a: the weight must be a number > 0, got 0 (a 0 makes the "
     "queue's usage infinite"),
    ([dict(TEAMS[0], admission_fair_sharing=True, local_queue_weights={"team-a": float("inf")}), TEAMS[1]],
     "tenants_list[0] (team-a).local_queue_weights: team-a: inf cannot be written as a Kubernetes quantity"),
    ([dict(TEAMS[0], admission_fair_sharing=True, local_queue_weights={"team-a": 1e30}), TEAMS[1]],
     "tenants_list[0] (team-a).local_queue_weights: team-a: 1e+30 cannot be written as a Kubernetes quantity"),
    ([dict(TEAMS[0], admission_fair_sharing=True, local_queue_weights=[2]), TEAMS[1]],
     "tenants_list[0] (team-a).local_queue_weights: give a mapping of the tenant's namespace to a weight > 0"),
])
def test_bad_tenants_name_tenant_and_field(tenants, message):
    plan = tenant_plan(tenants, NODES)
    assert plan["objects"] == []
    assert any(message in e for e in plan["errors"]), plan["errors"]


def test_admission_fair_sharing_reaches_the_cluster_queue_and_its_local_queues():
    """KEP-4136: ClusterQueue spec.admissionScope.admissionMode and LocalQueue spec.fairSharing.weight (Kueue
    v0.19.2 apis/kueue/v1beta2 fairsharing_types.go, localqueue_types.go); nothing of it without the field."""
    tenants = [dict(TEAMS[0], namespaces=["team-a", "team-a-dev"], admission_fair_sharing=True,
                    local_queue_weights={"team-a": 3, "team-a-dev": 0.5}), TEAMS[1]]
    objects = tenant_plan(tenants, NODES)["objects"]
    cq = {o["metadata"]["name"]: o["spec"] for o in by_kind(objects, "ClusterQueue")}
    assert cq["team-a"]["admissionScope"] == {"admissionMode": "UsageBasedAdmissionFairSharing"}
    assert "admissionScope" not in cq["team-b"]
    weights = {(o["metadata"]["namespace"], o["metadata"]["name"]): o["spec"].get("fairSharing")
               for o in by_kind(objects, "LocalQueue")}
    assert weights == {("team-a", "team-a-queue"): {"weight": "3"}, ("team-a", "default"): {"weight": "3"},
                       ("team-a-dev", "team-a-queue"): {"weight": "500m"}, ("team-a-dev", "default"): {"weight": "500m"},
                       ("team-b", "team-b-queue"): None, ("team-b", "default"): None}
    # A namespace without a weight gets Kueue's default, written out.
    objects = tenant_plan([dict(TEAMS[0], admission_fair_sharing=True), TEAMS[1]], NODES)["objects"]
    assert by_kind(objects, "LocalQueue")[0]["spec"]["fairSharing"] == {"weight": "1"}


def test_borrowing_limit_needs_a_cohort():
    errors = tenant_plan(TEAMS, NODES, cohort="")["errors"]
    assert "tenants_list[0] (team-a).borrowing_limit: needs a cohort to borrow from" in errors[0]


def test_borrow_within_cohort_is_rejected_under_fair_sharing():
    plan = tenant_plan(TEAMS, NODES, preemption={"reclaimWithinCohort": "Any", "borrowWithinCohort": {"policy": "LowerPriority"}})
    assert "borrowWithinCohort" in plan["errors"][0]


def test_unoffered_resource_is_named():
    tenants = [dict(TEAMS[0], gpus=1, lending_limit=None, gpu_resource="nvidia.com/mig-2g.20gb"), TEAMS[1]]
    assert "of team-a add up to 1 nvidia.com/mig-2g.20gb but no node offers it" in tenant_plan(tenants, NODES)["errors"][0]
    tenants[0]["gpus"] = 0
    assert "no node offers nvidia.com/mig-2g.20gb" in tenant_plan(tenants, NODES)["errors"][0]


def test_reachable_follows_kueue_cohort_rules():
    tenants = tenant_plan(TEAMS, NODES)["tenants"]
    assert quota.reachable(tenants, "team-a") == 16
    unlimited = tenant_plan([dict(TEAMS[0], borrowing_limit=None, max_gpus=None), dict(TEAMS[1], lending_limit=2)],
                            NODES)["tenants"]
    assert quota.reachable(unlimited, "team-a") == 10
    with pytest.raises(KeyError):
        quota.reachable(tenants, "nobody")


def test_flavor_name():
    assert flavor_name("NVIDIA-H100-80GB-HBM3") == "nvidia-h100-80gb-hbm3"


anything = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 40) | st.floats(allow_nan=True) | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=5),
    max_leaves=20,
)
field_values = st.fixed_dictionaries({}, optional={
    "name": st.one_of(st.text(max_size=12), st.sampled_from(["team-a", "team-b"]), anything),
    "namespaces": anything, "gpus": anything, "borrowing_limit": anything, "lending_limit": anything,
    "weight": anything, "max_gpus": anything, "gpu_resource": anything, "groups": anything,
    "cpu": anything, "memory": anything, "priority_classes": anything, "resource_quota": anything,
    "admission_fair_sharing": anything, "local_queue_weights": anything,
})


@settings(max_examples=300, deadline=None)
@given(st.one_of(anything, st.lists(st.one_of(field_values, anything), max_size=4)))
def test_no_input_crashes_validation(tenants):
    errors = tenant_errors(tenants, capacity={"nvidia.com/gpu": 16})
    assert isinstance(errors, list) and all(isinstance(e, str) for e in errors)
    plan = tenant_plan(tenants, NODES, priority_classes=CLASSES)
    assert bool(plan["errors"]) != bool(plan["objects"]) or tenants == []


def test_cpu_and_memory_guarantees_must_fit_the_nodes():
    errors = tenant_plan([dict(TEAMS[0], cpu="5000", memory="100Ti"), TEAMS[1]], NODES)["errors"]
    assert errors == [
        "tenants_list: the cpu guarantees add up to 5000000 millicores but the GPU nodes have 192000; lower them",
        "tenants_list: the memory guarantees add up to 109951162777600 bytes but the GPU nodes have 2199023255552; "
        "lower them",
    ]
    assert "is not a Kubernetes quantity >= 0" in tenant_errors([dict(TEAMS[0], cpu="-1")])[0]


def test_checks_before_any_cluster_from_the_node_pools():
    from ansible_collections.fairgpu.tenancy.plugins.module_utils.cluster.node_pools import pool_gpu_nodes
    from ansible_collections.fairgpu.tenancy.plugins.module_utils.tenants.plan import capacity_totals, cluster_capacity

    pools = [{"name": "gpu", "count": 2, "gpu_product": "NVIDIA-H100-80GB-HBM3", "gpu_count": 8, "cpu": "96",
              "memory": "1Ti"}]
    capacity = capacity_totals(cluster_capacity(pool_gpu_nodes(pools)))
    assert capacity == {"nvidia.com/gpu": 16, "cpu": 192000, "memory": 2 * 2 ** 40, "pods": 200,
                        "per_node": {"nvidia.com/gpu": 8}}
    assert tenant_errors(TEAMS, capacity=capacity) == []
    assert "offer 16" in tenant_errors([dict(TEAMS[0], gpus=9), TEAMS[1]], capacity=capacity)[0]


CLASSES = [{"name": "fairgpu-low", "value": 100}, {"name": "fairgpu-normal", "value": 1000},
           {"name": "fairgpu-high", "value": 10000, "description": "platform only"}]


def test_priority_classes_are_objects_and_a_namespace_annotation():
    tenants = [dict(TEAMS[0], priority_classes=["fairgpu-low", "fairgpu-normal"]), TEAMS[1]]
    plan = tenant_plan(tenants, NODES, priority_classes=CLASSES)
    assert plan["errors"] == []
    assert [(o["metadata"]["name"], o["value"]) for o in by_kind(plan["objects"], "WorkloadPriorityClass")] == [
        ("fairgpu-low", 100), ("fairgpu-normal", 1000), ("fairgpu-high", 10000)]
    annotations = {n["metadata"]["name"]: n["metadata"]["annotations"] for n in by_kind(plan["objects"], "Namespace")}
    assert annotations == {"team-a": {"fairgpu.io/workload-priority-classes": "fairgpu-low,fairgpu-normal"},
                           "team-b": {"fairgpu.io/workload-priority-classes": "fairgpu-low,fairgpu-normal,fairgpu-high"}}


@pytest.mark.parametrize("classes, tenant, message", [
    (CLASSES, {"priority_classes": ["fairgpu-urgent"]},
     "tenants_list[0] (team-a).priority_classes: fairgpu-urgent: not a WorkloadPriorityClass of the platform; use some "
     "of fairgpu-low, fairgpu-normal, fairgpu-high (tenants_workload_priority_classes)"),
    (CLASSES, {"priority_classes": "fairgpu-low"}, "tenants_list[0] (team-a).priority_classes: give a list"),
    (CLASSES + [{"name": "fairgpu-low", "value": 1}], {}, "tenants_workload_priority_classes[3].name: 'fairgpu-low' is defined twice"),
    ([{"name": "top", "value": 2 ** 31}], {}, "tenants_workload_priority_classes[0].value: the priority must be a 32-bit integer"),
    ({"name": "top"}, {}, "tenants_workload_priority_classes: give a list"),
])
def test_bad_priority_classes(classes, tenant, message):
    plan = tenant_plan([dict(TEAMS[0], **tenant), TEAMS[1]], NODES, priority_classes=classes)
    assert plan["objects"] == [] and any(message in e for e in plan["errors"]), plan["errors"]


def test_resource_quota_entries_join_the_gpu_maximum():
    plan = tenant_plan([dict(TEAMS[0], resource_quota={"requests.cpu": "64"}, max_jobs=50), TEAMS[1]], NODES)
    hard = [q["spec"]["hard"] for q in gpu_quotas(plan["objects"])]
    assert hard == [dict(COUNTED, **{"count/jobs.batch": "50", "pods": "200", "requests.cpu": "64",
                                     "requests.nvidia.com/gpu": "16"}),
                    dict(COUNTED, **{"count/jobs.batch": "100", "pods": "200", "requests.nvidia.com/gpu": "16"})]


@pytest.mark.parametrize("hard, message", [
    ({"nvidia.com/gpu": 4}, "resource_quota['nvidia.com/gpu']: Kubernetes never enforces an extended resource under "
                            "this key (it accepts it silently); write requests.nvidia.com/gpu"),
    ({"limits.nvidia.com/mig-2g.20gb": 4}, "write requests.nvidia.com/mig-2g.20gb"),
    ({"requests.nvidia.com/gpu": 4}, "the tenant's own accelerator is limited by max_gpus; set max_gpus instead"),
    ({"requests.cpu": "lots"}, "resource_quota['requests.cpu']: 'lots' is not a Kubernetes quantity >= 0"),
    (["requests.cpu"], "resource_quota: give a mapping"),
])
def test_bad_resource_quota_entries(hard, message):
    errors = tenant_errors([dict(TEAMS[0], resource_quota=hard)])
    assert any(message in e for e in errors), errors


def test_gpu_guarantee_needs_room_for_one_default_pod():
    small = [dict(TEAMS[0], cpu="500m"), TEAMS[1]]
    errors = tenant_plan(small, NODES, limit_range={"cpu": "1", "memory": "4Gi"})["errors"]
    assert errors == ["tenants_list[0] (team-a).cpu: the guarantee 500m is below one container's default request 1 "
                      "(tenants_default_container_resources.cpu), so not even one pod fits in it; raise cpu or lower "
                      "the default"]
    assert tenant_plan(small, NODES, limit_range={"cpu": "250m", "memory": "4Gi"})["errors"] == []
    # A tenant with no GPUs guaranteed only borrows: no guarantee to fit in.
    assert tenant_plan([dict(TEAMS[0], gpus=0, cpu="0", lending_limit=None), TEAMS[1]], NODES)["errors"] == []


@pytest.mark.parametrize("selector, reads_as", [(None, "no namespace"), ({}, "every namespace")])
def test_cluster_queue_selecting_no_or_every_namespace_is_refused(selector, reads_as):
    from ansible_collections.fairgpu.tenancy.plugins.module_utils.kueue.objects import object_errors

    objects = tenant_plan(TEAMS, NODES)["objects"]
    assert object_errors(objects) == []
    by_kind(objects, "ClusterQueue")[0]["spec"]["namespaceSelector"] = selector
    assert object_errors(objects) == ["ClusterQueue team-a: namespaceSelector %s would admit workloads from %s; it must "
                                      "select the tenant's namespaces by label" % ("null" if selector is None else "{}", reads_as)]


def test_admission_policies_cover_tenant_namespaces():
    objects = tenant_plan(TEAMS, NODES)["objects"]
    policies = {o["metadata"]["name"]: o["spec"] for o in by_kind(objects, "ValidatingAdmissionPolicy")}
    bindings = by_kind(objects, "ValidatingAdmissionPolicyBinding")
    assert list(policies) == list(ADMISSION_POLICIES)
    assert all(p["failurePolicy"] == "Fail" for p in policies.values())
    assert [b["spec"]["policyName"] for b in bindings] == list(ADMISSION_POLICIES)
    assert all(b["spec"]["validationActions"] == ["Deny"] and b["spec"]["matchResources"]["namespaceSelector"] ==
               {"matchExpressions": [{"key": "fairgpu.io/tenant", "operator": "Exists"}]} for b in bindings)


@pytest.mark.parametrize("change, message", [
    ({"pods": -1}, "tenants_list[0] (team-a).pods: the guarantee must be a whole number of pods >= 0, got -1"),
    ({"pods": 4}, "tenants_list[0] (team-a).pods: 4 pod slots cannot hold the guarantee of 8 GPUs"),
    ({"pods": 20, "max_pods": 10}, "tenants_list[0] (team-a).max_pods: 10 is below the guarantee pods=20"),
    ({"max_jobs": 0}, "tenants_list[0] (team-a).max_jobs: must be a whole number of Jobs >= 1, got 0"),
    ({"resource_quota": {"pods": "10"}}, "resource_quota['pods']: fairgpu sets this entry from the tenant's max_pods"),
    ({"resource_quota": {"count/jobs.batch": "10"}}, "set max_jobs instead"),
    ({"pods": 150}, "tenants_list: the pods guarantees (defaults included: at least one slot per guaranteed GPU) "
                    "add up to 250 but the GPU nodes have 200 pod slots"),
])
def test_pod_and_job_fields_are_checked(change, message):
    tenants = [dict(TEAMS[0], **change), dict(TEAMS[1], pods=100)]
    errors = tenant_plan(tenants, NODES)["errors"]
    assert any(message in e for e in errors), errors


def test_explicit_pods_and_jobs_reach_the_objects():
    plan = tenant_plan([dict(TEAMS[0], pods=40, max_pods=60, max_jobs=30), TEAMS[1]], NODES)
    assert plan["errors"] == []
    team_a = plan["tenants"][0]
    assert (team_a["pods"], team_a["max_pods"], team_a["max_jobs"], team_a["max_gpus_per_pod"]) == (40, 60, 30, 8)
    hard = gpu_quotas(plan["objects"])[0]["spec"]["hard"]
    assert (hard["pods"], hard["count/jobs.batch"]) == ("60", "30")


def test_a_tenant_without_guarantee_borrows_pod_slots_too():
    plan = tenant_plan([TEAMS[0], dict(TEAMS[1], gpus=0, lending_limit=None)], NODES)
    assert [t["pods"] for t in plan["tenants"]] == [100, 0]
    assert [t["max_pods"] for t in plan["tenants"]] == [200, 200]


@pytest.mark.parametrize("isolation, message", [
    ({"pod_security_enforce": "privileged"}, "tenants_isolation.pod_security_enforce: 'privileged' is not a level"),
    ({"max_jobs": 0}, "tenants_isolation.max_jobs: must be a whole number from 1 to 1000000, got 0"),
    ({"pods_reserved_per_node": -1}, "tenants_isolation.pods_reserved_per_node: must be a whole number from 0"),
    ({"termination_grace_max_seconds": "30"}, "tenants_isolation.termination_grace_max_seconds: must be a whole"),
    # Below Kubernetes' default grace period (30 s, which the API server writes into every pod template that sets
    # none) the policy would refuse nearly every Job; above a day, nothing is bounded.
    ({"termination_grace_max_seconds": 10}, "termination_grace_max_seconds: must be a whole number from 30 to 86400"),
    ({"termination_grace_max_seconds": 10 ** 20}, "termination_grace_max_seconds: must be a whole number from 30"),
    ({"maxJobs": 3}, "tenants_isolation.maxJobs: unknown key"),
    ("baseline", "tenants_isolation: give a mapping"),
    # A ratio below 1 would refuse every container: a limit is never below its request.
    ({"cpu_limit_request_ratio": 0}, "tenants_isolation.cpu_limit_request_ratio: must be a whole number from 1 to 1000"),
    ({"memory_limit_request_ratio": 1.5}, "tenants_isolation.memory_limit_request_ratio: must be a whole number"),
    ({"max_object_kib": 4096}, "tenants_isolation.max_object_kib: must be a whole number from 16 to 1024"),
    ({"max_objects": 0}, "tenants_isolation.max_objects: must be a whole number from 1"),
    ({"scheduler_names": []}, "tenants_isolation.scheduler_names: give a list of at least one names"),
    ({"scheduler_names": "default-scheduler"}, "tenants_isolation.scheduler_names: give a list"),
    ({"denied_pod_priority_classes": ["System Critical"]}, "tenants_isolation.denied_pod_priority_classes: give a list"),
])
def test_isolation_policy_is_checked_before_anything(isolation, message):
    plan = tenant_plan(TEAMS, NODES, isolation=isolation)
    assert plan["objects"] == [] and any(message in e for e in plan["errors"]), plan["errors"]


def test_isolation_policy_reaches_the_namespaces_and_the_job_policy():
    plan = tenant_plan(TEAMS, NODES, isolation={"pod_security_enforce": "restricted", "max_jobs": 7,
                                                "termination_grace_max_seconds": 90, "pods_reserved_per_node": 0})
    labels = by_kind(plan["objects"], "Namespace")[0]["metadata"]["labels"]
    assert labels["pod-security.kubernetes.io/enforce"] == "restricted"
    assert gpu_quotas(plan["objects"])[0]["spec"]["hard"]["count/jobs.batch"] == "7"
    assert plan["tenants"][0]["pods"] == 110
    jobs = next(o for o in by_kind(plan["objects"], "ValidatingAdmissionPolicy")
                if o["metadata"]["name"] == "fairgpu-tenant-jobs")
    expressions = " ".join(v["expression"] for v in jobs["spec"]["validations"])
    assert "terminationGracePeriodSeconds <= 90" in expressions
    for field in ("hostNetwork", "hostPID", "hostIPC", "privileged", "capabilities.add", "hostPath", "hostPort",
                  "runtimeClassName", "startsWith('NVIDIA_')", "ownerReferences", "hostProcess"):
        assert field in expressions, field
    # Every added capability the baseline profile does not allow is refused; SYS_ADMIN is not among them.
    assert "'SYS_ADMIN'" not in expressions and "'NET_BIND_SERVICE'" in expressions
    # Enforcing restricted, the Job policy also refuses what restricted refuses in the pods.
    for field in ("allowPrivilegeEscalation", "runAsNonRoot", "runAsUser", "'ALL' in", "has(v.persistentVolumeClaim)"):
        assert field in expressions, field
    baseline = next(o for o in by_kind(tenant_plan(TEAMS, NODES)["objects"], "ValidatingAdmissionPolicy")
                    if o["metadata"]["name"] == "fairgpu-tenant-jobs")
    assert "allowPrivilegeEscalation" not in " ".join(v["expression"] for v in baseline["spec"]["validations"])


def test_a_pods_cpu_and_memory_are_bounded_by_its_gpus_share_of_the_nodes():
    """The GPU nodes' least CPU and memory per GPU (NODES: 96 CPUs, 1Ti, 8 GPUs each) bounds a pod's requests per
    device it asks for, one GPU's share without devices; a node pin is refused with it."""
    plan = tenant_plan(TEAMS, NODES)
    assert plan["capacity"]["per_gpu"] == {"cpu": 12000, "memory": 2 ** 40 // 8}
    jobs = next(o for o in by_kind(plan["objects"], "ValidatingAdmissionPolicy")
                if o["metadata"]["name"] == "fairgpu-tenant-jobs")
    messages = [v["message"] for v in jobs["spec"]["validations"] if "message" in v]
    assert any(m.startswith("a tenant pod may request at most 12 CPUs of cpu per device") for m in messages)
    assert any(m.startswith("a tenant pod may request at most 131072 MiB of memory per device") for m in messages)
    assert any(m.startswith("tenant Jobs may not choose their node") for m in messages)
    # A GFD GPU count wins over the devices (a MIG node's 28 slices are 4 GPUs' worth).
    mig = [dict(n, metadata=dict(n["metadata"], labels=dict(n["metadata"]["labels"], **{"nvidia.com/gpu.count": "4"})),
                status={"allocatable": {"cpu": "96", "memory": "1Ti", "pods": "110", "nvidia.com/mig-1g.10gb": "28"}})
           for n in NODES]
    assert cluster_capacity(mig)["per_gpu"] == {"cpu": 24000, "memory": 2 ** 40 // 4}


def test_isolation_policy_reaches_the_limit_range_quotas_and_policies():
    plan = tenant_plan(TEAMS, NODES, isolation={"cpu_limit_request_ratio": 8, "memory_limit_request_ratio": 1,
                                                "max_object_kib": 64, "max_objects": 20,
                                                "scheduler_names": ["default-scheduler", "volcano"],
                                                "denied_pod_priority_classes": []})
    objects = plan["objects"]
    assert by_kind(objects, "LimitRange")[0]["spec"]["limits"][0]["maxLimitRequestRatio"] == {"cpu": "8", "memory": "1"}
    assert all(gpu_quotas(objects)[0]["spec"]["hard"][key] == "20"
               for key in ("count/configmaps", "count/secrets", "services", "persistentvolumeclaims"))
    # An empty list of denied classes: no PriorityClass quota at all (a quota scoped to nothing is invalid).
    assert [q["metadata"]["name"] for q in by_kind(objects, "ResourceQuota")] == ["fairgpu-gpu-quota"] * 2
    policies = {o["metadata"]["name"]: o["spec"] for o in by_kind(objects, "ValidatingAdmissionPolicy")}
    jobs = " ".join(v["expression"] for v in policies["fairgpu-tenant-jobs"]["validations"])
    assert "<= 8.0 *" in jobs and "<= 1.0 *" in jobs and "<= 65536" in jobs and "['default-scheduler', 'volcano']" in jobs
    assert "<= 65536" in policies["fairgpu-tenant-object-size"]["validations"][0]["expression"]
    # The defaults a container gets from the LimitRange are what the Job policy assumes for an unset limit.
    assert "quantity('1')" in jobs and "quantity('4Gi')" in jobs


@pytest.mark.parametrize("pools_pods, tenants, message", [
    # Fewer pod slots than the nodes keep for their daemons: none left for the tenants' guarantees.
    (5, TEAMS, "the pods guarantees (defaults included: at least one slot per guaranteed GPU) add up to 16 but the "
               "GPU nodes have 0 pod slots for tenants"),
    # An explicit guarantee with the other tenant's default: 190 + 100 > 200.
    (110, [dict(TEAMS[0], pods=190), TEAMS[1]], "add up to 290 but the GPU nodes have 200 pod slots"),
    # A hard maximum below the default guarantee: Kueue would admit pods the ResourceQuota refuses.
    (110, [dict(TEAMS[0], max_pods=3), TEAMS[1]], "tenants_list[0] (team-a).max_pods: 3 is below the pods guarantee 100"),
])
def test_pod_slots_are_checked_with_the_defaults(pools_pods, tenants, message):
    nodes = [node("gpu-node-%d" % i) for i in range(2)]
    for n in nodes:
        n["status"]["allocatable"]["pods"] = str(pools_pods)
    errors = tenant_plan(tenants, nodes)["errors"]
    assert any(message in e for e in errors), errors


def test_large_counts_reach_the_objects_in_canonical_form():
    plan = tenant_plan([dict(TEAMS[0], max_jobs=2000), TEAMS[1]], NODES)
    assert gpu_quotas(plan["objects"])[0]["spec"]["hard"]["count/jobs.batch"] == "2k"


def test_fractional_weights_and_large_quantities_reach_every_object_in_canonical_form():
    # Issue 14 item 6: a weight of 0.5 was written "0.5"; Kueue's webhook writes it back "500m" when the
    # ClusterQueue is created, and later applies keep "0.5", so every run after the first reported a change.
    tenants = [dict(TEAMS[0], weight=0.5, max_pods=1000, max_jobs=1500, cpu=95.5, memory="0.5Ti",
                    resource_quota={"requests.cpu": "0.5", "limits.memory": "1024Mi", "requests.storage": "1e3",
                                    "limits.cpu": "100u"}),
               dict(TEAMS[1], weight=1.5, max_jobs=1000)]
    objects = tenant_plan(tenants, NODES, limit_range={"cpu": "0.25", "memory": "4096Mi"})["objects"]
    cq = {o["metadata"]["name"]: o["spec"] for o in by_kind(objects, "ClusterQueue")}
    assert cq["team-a"]["fairSharing"] == {"weight": "500m"} and cq["team-b"]["fairSharing"] == {"weight": "1500m"}
    resources = {r["name"]: r["nominalQuota"] for r in cq["team-a"]["resourceGroups"][0]["flavors"][0]["resources"]}
    assert resources["cpu"] == "95500m" and resources["memory"] == "512Gi"
    hard = {o["metadata"]["namespace"]: o["spec"]["hard"] for o in gpu_quotas(objects)}
    assert hard["team-a"] == dict(COUNTED, **{"requests.nvidia.com/gpu": "16", "pods": "1k", "count/jobs.batch": "1500",
                                              "requests.cpu": "500m", "limits.memory": "1Gi", "requests.storage": "1e3",
                                              "limits.cpu": "1m"})  # a ResourceQuota is rounded up to milli units
    assert hard["team-b"]["count/jobs.batch"] == "1k"
    limits = by_kind(objects, "LimitRange")[0]["spec"]["limits"][0]
    assert limits["defaultRequest"] == limits["default"] == {"cpu": "250m", "memory": "4Gi", "nvidia.com/gpu": "0"}
