"""Module fairgpu.tenancy.tenants against a fake API server that speaks the part of kubernetes.core's client the
module uses (resource, get, apply, delete; server-side dry run in check mode): the first run applies every object
and waits for the ClusterQueues, a second changes nothing, a hand edit is drift that the run lists and takes back,
check mode changes nothing and says what it would, a tenant that left stops the run unless pruned, a plan error
applies nothing, and a ClusterQueue that never becomes Active fails naming it."""

import copy

from kubernetes.dynamic.exceptions import ResourceNotFoundError

from ansible_collections.fairgpu.tenancy.plugins.modules import tenants as tenants_module
from ansible_collections.fairgpu.tenancy.plugins.module_utils.cluster.node_pools import pool_gpu_nodes
from ansible_collections.fairgpu.tenancy.plugins.module_utils.common.waiter import Waiter

from fake_api import Instance, Resource, Response, not_found
from fake_clock import FakeClock

POOLS = [{"name": "gpu-node", "count": 2, "gpu_product": "NVIDIA-H100-80GB-HBM3", "gpu_count": 8, "cpu": "96",
          "memory": "1024Gi"}]
TENANTS = [{"name": "team-a", "gpus": 8, "borrowing_limit": 8}, {"name": "team-b", "gpus": 8, "borrowing_limit": 8}]


class Ended(Exception):
    pass


def selected(obj, selector):
    labels = obj["metadata"].get("labels") or {}
    return all(labels.get(k) == v for k, _sep, v in (t.partition("=") for t in filter(None, (selector or "").split(","))))


class FakeApi(object):
    """Objects by (kind, namespace, name). Kueue marks a ClusterQueue Active on the next read after it is applied
    (unless ``inactive``); the API server type-checks a ValidatingAdmissionPolicy on the next read."""

    def __init__(self, nodes, inactive=()):
        self.objects, self.inactive, self.dry_run, self.applies = {}, set(inactive), False, 0
        for node in nodes:
            self.objects[("Node", None, node["metadata"]["name"])] = dict(copy.deepcopy(node), kind="Node", apiVersion="v1")

    def resource(self, kind, api_version):
        if kind == "Missing":
            raise ResourceNotFoundError("no kind")
        return Resource(kind, api_version)

    def _settle(self):
        for (kind, _ns, name), obj in self.objects.items():
            if kind == "ClusterQueue" and name not in self.inactive:
                obj["status"] = {"conditions": [{"type": "Active", "status": "True", "reason": "Ready"}]}
            if kind == "ValidatingAdmissionPolicy":
                obj["status"] = {"observedGeneration": obj["metadata"]["generation"]}

    def get(self, resource, name=None, namespace=None, label_selector=None):
        self._settle()
        if name is not None:
            key = (resource.kind, namespace if resource.namespaced else None, name)
            if key not in self.objects:
                raise not_found()
            return Instance(self.objects[key])
        items = [o for (kind, ns, _n), o in sorted(self.objects.items(), key=lambda i: str(i[0]))
                 if kind == resource.kind and (namespace is None or ns == namespace) and selected(o, label_selector)]
        return Instance({"kind": resource.kind + "List", "items": items})

    def apply(self, resource, definition, namespace=None, serialize=False, **params):
        assert params.get("server_side") and params["field_manager"] == "fairgpu" and params["force_conflicts"]
        key = (resource.kind, namespace if resource.namespaced else None, definition["metadata"]["name"])
        if resource.namespaced and ("Namespace", None, namespace) not in self.objects:
            raise AssertionError("namespace %s not found (dry run into a namespace the run would create)" % namespace)
        before = self.objects.get(key)
        after = copy.deepcopy(before) if before else {"metadata": {"generation": 0, "resourceVersion": "0"}}
        for field, value in definition.items():
            if field == "metadata":
                after["metadata"].update(copy.deepcopy(value))
            else:
                after[field] = copy.deepcopy(value)
        if after != before:
            after["metadata"]["generation"] += 1
            after["metadata"]["resourceVersion"] = str(int(after["metadata"]["resourceVersion"]) + 1)
        if not (self.dry_run or params.get("dry_run")):
            self.objects[key] = after
            self.applies += 1
        return Response(after)

    def delete(self, resource, name=None, namespace=None, **_params):
        return Instance(self.objects.pop((resource.kind, namespace if resource.namespaced else None, name)))

    def named(self, kind):
        return sorted(n for (k, _ns, n) in self.objects if k == kind)


class Module(object):
    def __init__(self, check_mode=False, diff=False, **params):
        self.params = dict(state="present", tenants=TENANTS, nodes=None, spec_only=False, cohort="fairgpu",
                           preemption=None, queueing_strategy="BestEffortFIFO", default_container_resources=None,
                           local_queue_suffix="-queue", workload_priority_classes=None, isolation=None,
                           gpu_flavors=None, multikueue="none", prune=False, wait_timeout=60)
        self.params.update(params)
        self.check_mode, self._diff = check_mode, diff

    def fail_json(self, **result):
        raise Ended("fail", result)


def nodes():
    return pool_gpu_nodes(POOLS)


def converge(api, **params):
    clock = FakeClock()
    api.dry_run = params.get("check_mode", False)
    try:
        return "exit", tenants_module.converge(Module(**params), api, Waiter(clock.monotonic, clock.sleep, clock.time))
    except Ended as ended:
        return ended.args


def test_the_first_run_applies_every_object_and_a_second_changes_nothing():
    api = FakeApi(nodes())
    how, first = converge(api)
    assert how == "exit" and first["changed"] and first["drift"] == [] and first["stale"] == []
    planned = first["plan"]["objects"]
    assert len(first["changed_objects"]) == len(planned)
    assert api.named("ClusterQueue") == ["team-a", "team-b"] and "team-a" in api.named("Namespace")
    assert [t["name"] for t in first["plan"]["tenants"]] == ["team-a", "team-b"]
    how, second = converge(api)
    assert how == "exit" and not second["changed"] and second["changed_objects"] == [] and second["drift"] == []


def test_a_cluster_that_becomes_a_multikueue_worker_loses_the_tenants_access_and_a_second_run_changes_nothing():
    api = FakeApi(nodes())
    converge(api)
    assert api.named("RoleBinding") and api.named("Role")
    how, result = converge(api, multikueue="worker")
    assert how == "exit" and "RoleBinding/team-a/fairgpu-tenant" in result["changed_objects"]
    assert api.named("RoleBinding") == [] and api.named("Role") == []
    how, again = converge(api, multikueue="worker")
    assert how == "exit" and not again["changed"], again["changed_objects"]


def test_a_hand_edit_is_drift_listed_and_taken_back():
    api = FakeApi(nodes())
    converge(api)
    queue = api.objects[("ClusterQueue", None, "team-a")]
    resources = queue["spec"]["resourceGroups"][0]["flavors"][0]["resources"]
    gpu = next(r for r in resources if r["name"] == "nvidia.com/gpu")
    gpu["nominalQuota"] = 12
    how, result = converge(api)
    assert how == "exit" and result["changed"] and result["changed_objects"] == ["ClusterQueue/team-a"]
    assert len(result["drift"]) == 1 and result["drift"][0].startswith("ClusterQueue/team-a spec.resourceGroups[0]")
    assert result["drift"][0].endswith('nominalQuota: live 12, fairgpu "8"'), result["drift"]
    repaired = api.objects[("ClusterQueue", None, "team-a")]["spec"]["resourceGroups"][0]["flavors"][0]["resources"]
    assert next(r for r in repaired if r["name"] == "nvidia.com/gpu")["nominalQuota"] == "8"


def test_check_mode_changes_nothing_and_lists_what_it_would_create():
    api = FakeApi(nodes())
    how, result = converge(api, check_mode=True, diff=True)
    assert how == "exit" and result["changed"]
    assert api.applies == 0 and api.named("ClusterQueue") == []
    # Objects in the tenants' namespaces, which the run would create, are listed without a dry run.
    assert "LocalQueue/team-a/team-a-queue" in result["changed_objects"]
    assert all("before_header" in d for d in result["diff"])


def test_a_tenant_that_left_stops_the_run_unless_pruned():
    api = FakeApi(nodes())
    converge(api, tenants=TENANTS + [{"name": "team-c", "gpus": 0}])
    assert "team-c" in api.named("ClusterQueue") and "team-c-queue" in api.named("LocalQueue") and api.named("Role")
    applies = api.applies
    how, refused = converge(api)
    assert how == "fail" and refused["stale"] == ["team-c"] and api.applies == applies
    assert refused["msg"].startswith("Tenant(s) team-c are on the cluster but not in tenants_list")
    assert "set tenants_prune: true" in refused["msg"]
    how, pruned = converge(api, prune=True)
    assert how == "exit" and pruned["stale"] == ["team-c"] and "ClusterQueue/team-c" in pruned["changed_objects"]
    assert api.named("ClusterQueue") == ["team-a", "team-b"] and "team-c-queue" not in api.named("LocalQueue")
    assert "team-c" in api.named("Namespace"), "its namespace and what runs there stay"


def test_a_plan_error_applies_nothing():
    api = FakeApi(nodes())
    how, result = converge(api, tenants=[{"name": "team-a", "gpus": 20}, {"name": "team-b", "gpus": 1}])
    assert how == "fail" and api.applies == 0
    assert "the guarantees (gpus) of team-a, team-b add up to 21 nvidia.com/gpu but the cluster's nodes offer 16" in result["msg"]
    assert result["msg"] == "\n".join(result["plan"]["errors"])


def test_a_cluster_queue_that_never_becomes_active_fails_naming_it():
    api = FakeApi(nodes(), inactive={"team-b"})
    how, result = converge(api, wait_timeout=10)
    assert how == "fail" and result["changed"]
    assert result["msg"].startswith("tenants: the ClusterQueues of team-b did not become Active within 10 s")
    assert "team-b: not found" not in result["msg"]


def test_rendered_plans_against_given_nodes_without_a_cluster():
    def no_cluster():
        raise AssertionError("rendered with nodes needs no cluster")

    result = tenants_module.rendered(Module(state="rendered", nodes=nodes()), no_cluster)
    assert not result["changed"] and result["plan"]["capacity"]["resources"] == {"nvidia.com/gpu": 16}
    spec = tenants_module.rendered(Module(state="rendered", spec_only=True), no_cluster)
    assert spec["plan"]["capacity"] is None and spec["plan"]["objects"] == []
