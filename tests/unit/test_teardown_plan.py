"""What teardown removes (plugins/module_utils/teardown/plan.py): the embedded cluster whole and unasked; a kind
or existing cluster only with the host's name confirmed; on an existing cluster only fairgpu's own objects, never
its CRDs, never a Helm release fairgpu did not install, and fairgpu's releases only with a second flag."""

import base64
import copy
import gzip
import json

from hypothesis import given, settings
from hypothesis import strategies as st

from ansible_collections.fairgpu.tenancy.plugins.module_utils.common.names import ADMISSION_POLICIES
from ansible_collections.fairgpu.tenancy.plugins.module_utils.teardown import plan as teardown
from ansible_collections.fairgpu.tenancy.plugins.module_utils.tenants.plan import tenant_plan

NODES = [{"metadata": {"name": "gpu-%d" % i, "labels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}},
          "status": {"allocatable": {"cpu": "96", "memory": "1Ti", "nvidia.com/gpu": "8", "pods": "110"}}}
         for i in range(2)]
TEAMS = [{"name": "team-a", "gpus": 8}, {"name": "team-b", "gpus": 8}]
EXISTING = {"host": "prod-eu", "provider": "existing", "name": "fairgpu", "kubeconfig": "/k/prod-eu.yaml",
            "context": "prod-eu-admin", "server": "https://prod-eu.example:6443"}
FAIRGPU_SSA = [{"manager": "fairgpu", "operation": "Apply", "apiVersion": "v1"}]


def applied(objects, writers=None):
    """The objects as the API server returns them after fairgpu's server-side apply (``writers``: extra field
    managers by object name)."""
    out = []
    for obj in copy.deepcopy(objects):
        managers = list(FAIRGPU_SSA) + [{"manager": m, "operation": "Update"} for m in (writers or {}).get(
            obj["metadata"]["name"], [])]
        obj["metadata"]["managedFields"] = managers
        out.append(obj)
    return out


def results(objects, cluster_queues=(), cohorts=(), secrets=()):
    """The registered k8s_info loop over ``teardown.queries()`` for a cluster holding ``objects``."""
    out = []
    for query in teardown.queries("existing"):
        if query["purpose"] == "all":
            found = list(cluster_queues if query["kind"] == "ClusterQueue" else cohorts)
        elif query["purpose"] == "helm":
            found = list(secrets)
        else:
            key = query["label_selectors"][0].split("=")[0]
            found = [o for o in objects if o["kind"] == query["kind"] and key in (o["metadata"].get("labels") or {})]
        out.append({"item": query, "resources": found})
    return out


def helm_secret(name, namespace, chart, values, version="1.0.0", manifest=""):
    release = {"name": name, "namespace": namespace, "version": 1, "info": {"status": "deployed"},
               "chart": {"metadata": {"name": chart, "version": version}}, "config": values, "manifest": manifest}
    stored = base64.b64encode(gzip.compress(json.dumps(release).encode()))
    return {"apiVersion": "v1", "kind": "Secret", "type": "helm.sh/release.v1",
            "metadata": {"name": "sh.helm.release.v1.%s.v1" % name, "namespace": namespace,
                         "labels": {"owner": "helm", "name": name, "status": "deployed", "version": "1"}},
            "data": {"release": base64.b64encode(stored).decode()}}


PRIORITY_CLASSES = [{"name": "fairgpu-low", "value": 100, "description": "low"},
                    {"name": "fairgpu-high", "value": 10000, "description": "high"}]


def fairgpu_objects(writers=None):
    return applied(tenant_plan(TEAMS, NODES, priority_classes=PRIORITY_CLASSES)["objects"], writers)


def described(plan):
    return [teardown.describe(ref) for ref in plan["delete"]]


def test_the_embedded_cluster_goes_whole_without_confirmation():
    plan = teardown.teardown_plan([], {"host": "embedded", "provider": "kwok", "name": "fairgpu"})
    assert plan["confirmed"] and plan["delete"] == [] and plan["uninstall"] == []
    assert "the embedded cluster fairgpu and everything in it" in plan["lines"][0]
    assert teardown.queries("kwok") == [] and teardown.queries("kind") == []


def test_a_kind_cluster_needs_the_hosts_name():
    target = {"host": "lab-kind", "provider": "kind", "name": "fairgpu-lab", "kubeconfig": "/k/kind.yaml"}
    plan = teardown.teardown_plan([], target)
    assert not plan["confirmed"]
    assert plan["message"].endswith("run the teardown again with -e teardown_confirm=lab-kind")
    assert "the whole kind cluster fairgpu-lab goes" in plan["lines"][0]
    assert teardown.teardown_plan([], target, confirm="lab-kind")["confirmed"]


def test_an_existing_cluster_without_confirmation_lists_and_names_the_flag():
    plan = teardown.teardown_plan(results(fairgpu_objects()), EXISTING)
    assert not plan["confirmed"]
    assert "nothing was removed from prod-eu" in plan["message"]
    assert "-e teardown_confirm=prod-eu" in plan["message"]
    assert plan["lines"][0].startswith("prod-eu: existing cluster (/k/prod-eu.yaml, context prod-eu-admin, "
                                       "API server https://prod-eu.example:6443)")
    assert "  delete Namespace team-a and everything in it" in plan["lines"]
    # a confirmation for another host is none for this one
    assert not teardown.teardown_plan(results(fairgpu_objects()), EXISTING, confirm="prod-us")["confirmed"]
    assert teardown.teardown_plan(results(fairgpu_objects()), EXISTING, confirm="prod-us, prod-eu")["confirmed"]
    assert teardown.teardown_plan(results(fairgpu_objects()), EXISTING, confirm=["prod-eu"])["confirmed"]


def test_confirmed_existing_cluster_deletes_fairgpus_objects_in_order():
    objects = fairgpu_objects()
    plan = teardown.teardown_plan(results(objects), EXISTING, confirm="prod-eu")
    assert plan["confirmed"] and plan["strip"] == [] and plan["keep"] == []
    names = described(plan)
    assert names == ["ValidatingAdmissionPolicyBinding " + name for name in sorted(ADMISSION_POLICIES)] + [
        "ValidatingAdmissionPolicy " + name for name in sorted(ADMISSION_POLICIES)] + [
        "Namespace team-a", "Namespace team-b",
        "ClusterQueue team-a", "ClusterQueue team-b",
        "ResourceFlavor nvidia-h100-80gb-hbm3", "Cohort fairgpu",
        "WorkloadPriorityClass fairgpu-high", "WorkloadPriorityClass fairgpu-low",
    ]
    # the namespaced objects go with their namespaces, and are listed as such
    assert "  delete ResourceQuota team-a/fairgpu-gpu-quota (with its namespace)" in plan["lines"]
    assert plan["message"] == "Confirmed for prod-eu: removing fairgpu's objects (%d deletions)." % len(names)


def test_a_namespace_that_existed_before_fairgpu_stays_without_fairgpus_labels():
    objects = fairgpu_objects(writers={"team-b": ["kubectl-create"]})
    plan = teardown.teardown_plan(results(objects), EXISTING, confirm="prod-eu")
    names = described(plan)
    assert "Namespace team-a" in names and "Namespace team-b" not in names
    assert [ref["metadata"]["name"] for ref in plan["strip"]] == ["team-b"]
    # what fairgpu put into team-b goes one by one
    for obj in ("LocalQueue team-b/team-b-queue", "LocalQueue team-b/default", "ResourceQuota team-b/fairgpu-gpu-quota",
                "LimitRange team-b/fairgpu-defaults", "RoleBinding team-b/fairgpu-tenant", "Role team-b/fairgpu-tenant"):
        assert obj in names
    assert names.index("Namespace team-a") < names.index("LocalQueue team-b/default") < names.index("ClusterQueue team-b")
    assert {"what": "Namespace team-b", "reason": "other field managers wrote to it (kubectl-create): it existed "
                                                  "before fairgpu or is shared"} in plan["keep"]


def test_nothing_left_says_so():
    plan = teardown.teardown_plan(results([]), EXISTING, confirm="prod-eu")
    assert plan["delete"] == [] and "  nothing of fairgpu's to remove" in plan["lines"]


def test_status_writers_and_missing_managed_fields():
    ns = {"metadata": {"name": "x", "managedFields": FAIRGPU_SSA + [{"manager": "kcm", "subresource": "status"}]}}
    assert teardown.other_writers(ns) == []
    assert teardown.other_writers({"metadata": {"name": "x"}}) is None


def test_labelled_objects_without_fairgpus_names_stay():
    objects = fairgpu_objects()
    stray = [
        {"apiVersion": "v1", "kind": "ResourceQuota",
         "metadata": {"name": "compute", "namespace": "ml", "labels": {"app.kubernetes.io/managed-by": "fairgpu"}}},
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
         "metadata": {"name": "shared", "labels": {"app.kubernetes.io/managed-by": "fairgpu", "fairgpu.io/tenant": "x"}}},
        {"apiVersion": "batch/v1", "kind": "Job",
         "metadata": {"name": "train", "namespace": "ml", "labels": {"fairgpu.io/validation": "baseline"}}},
        {"apiVersion": "batch/v1", "kind": "Job",
         "metadata": {"name": "fairgpu-val-flood-team-a-1", "namespace": "ml", "labels": {"fairgpu.io/validation": "flood"}}},
    ]
    plan = teardown.teardown_plan(results(objects + stray), EXISTING, confirm="prod-eu")
    kept = {k["what"] for k in plan["keep"]}
    assert kept == {"ResourceQuota ml/compute", "ClusterQueue shared", "Job ml/train"}
    assert "Job ml/fairgpu-val-flood-team-a-1" in described(plan)


def test_cohort_and_flavor_used_by_other_cluster_queues_stay():
    objects = fairgpu_objects()
    theirs = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "research"},
              "spec": {"cohortName": "fairgpu",
                       "resourceGroups": [{"flavors": [{"name": "nvidia-h100-80gb-hbm3"}]}]}}
    queues = [o for o in objects if o["kind"] == "ClusterQueue"] + [theirs]
    plan = teardown.teardown_plan(results(objects, cluster_queues=queues), EXISTING, confirm="prod-eu")
    assert {"what": "Cohort fairgpu", "reason": "used by ClusterQueues fairgpu did not make: research"} in plan["keep"]
    assert {"what": "ResourceFlavor nvidia-h100-80gb-hbm3",
            "reason": "used by ClusterQueues fairgpu did not make: research"} in plan["keep"]
    assert "ClusterQueue team-a" in described(plan) and "Cohort fairgpu" not in described(plan)
    child = {"metadata": {"name": "org"}, "spec": {"parentName": "fairgpu"}}
    plan = teardown.teardown_plan(results(objects, cohorts=[child]), EXISTING, confirm="prod-eu")
    assert {"what": "Cohort fairgpu", "reason": "used by ClusterQueues fairgpu did not make: Cohort org"} in plan["keep"]


def test_kueue_webhooks_and_crds_are_never_deleted():
    webhook = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
               "metadata": {"name": "kueue-validating-webhook-configuration",
                            "labels": {"app.kubernetes.io/managed-by": "fairgpu"}}}
    plan = teardown.teardown_plan(results(fairgpu_objects() + [webhook]), EXISTING, confirm="prod-eu")
    assert {"what": "ValidatingWebhookConfiguration kueue-validating-webhook-configuration",
            "reason": "part of Kueue's installation; never deleted on an existing cluster"} in plan["keep"]
    assert not any(ref["kind"] in ("CustomResourceDefinition", "ValidatingWebhookConfiguration")
                   for ref in plan["delete"])
    assert "  keep every CustomResourceDefinition, and every object fairgpu did not create" in plan["lines"]


def local_webhook(kind, port=19443, extra_url=None):
    hooks = [{"name": "mjob.kb.io", "clientConfig": {"url": "https://127.0.0.1:%d/mutate-batch-v1-job" % port}},
             {"name": "mclusterqueue.kb.io",
              "clientConfig": {"url": extra_url or "https://127.0.0.1:%d/mutate-kueue-x-k8s-io-v1beta2-clusterqueue" % port}}]
    return {"apiVersion": "admissionregistration.k8s.io/v1", "kind": kind,
            "metadata": {"name": "kueue-%s-webhook-configuration" % ("mutating" if kind.startswith("M") else "validating"),
                         "labels": {"app.kubernetes.io/managed-by": "fairgpu"}},
            "webhooks": hooks}


def test_the_local_kueues_webhooks_go_last_since_teardown_stops_it():
    # kueue_mode local on an existing cluster: left behind, the webhooks (failurePolicy Fail) would call a stopped
    # process and the API server would refuse every Job of the cluster.
    hooks = [local_webhook("MutatingWebhookConfiguration"), local_webhook("ValidatingWebhookConfiguration")]
    target = dict(EXISTING, local_webhook=teardown.local_webhook_prefix(19443))
    plan = teardown.teardown_plan(results(fairgpu_objects() + hooks), target, confirm="prod-eu")
    assert described(plan)[-2:] == ["MutatingWebhookConfiguration kueue-mutating-webhook-configuration",
                                    "ValidatingWebhookConfiguration kueue-validating-webhook-configuration"]
    assert ("  delete ValidatingWebhookConfiguration kueue-validating-webhook-configuration: it calls the local Kueue "
            "(https://127.0.0.1:19443), which teardown stops; left behind (failurePolicy Fail) it would refuse every "
            "Job of the cluster") in plan["lines"]
    assert not any("WebhookConfiguration" in k["what"] for k in plan["keep"])
    # The removal needs that process up: it releases the finalizers, and its webhooks refuse changes while down.
    assert plan["needs_local_kueue"] is True
    # Another port (another embedded cluster's Kueue), one webhook elsewhere, or no local Kueue: kept.
    for other, prefix in (([local_webhook("MutatingWebhookConfiguration", 29443)], target["local_webhook"]),
                          ([local_webhook("MutatingWebhookConfiguration", extra_url="https://kueue.example/x")],
                           target["local_webhook"]),
                          (hooks, "")):
        plan = teardown.teardown_plan(results(other), dict(EXISTING, local_webhook=prefix), confirm="prod-eu")
        assert not any("WebhookConfiguration" in d for d in described(plan)), plan["lines"]
        assert plan["needs_local_kueue"] is False
        assert any(k["reason"] == "part of Kueue's installation; never deleted on an existing cluster"
                   for k in plan["keep"])
    assert teardown.calls_local_kueue({"webhooks": []}, target["local_webhook"]) is False


def test_helm_releases_fairgpu_did_not_install_are_never_uninstalled():
    secrets = [helm_secret("kueue", "kueue-system", "kueue", {"replicaCount": 2}, "0.19.2"),
               helm_secret("gpu-operator", "gpu-operator", "gpu-operator", dict(teardown.RELEASE_MARKER), "v25.10.1"),
               helm_secret("cert-manager", "cert-manager", "cert-manager", {})]
    plan = teardown.teardown_plan(results([], secrets=secrets), EXISTING, confirm="prod-eu")
    keep = {k["what"]: k["reason"] for k in plan["keep"]}
    assert plan["uninstall"] == []
    assert keep["Helm release kueue-system/kueue (chart kueue 0.19.2)"].startswith("not installed by fairgpu")
    assert "teardown_uninstall_releases=true" in keep["Helm release gpu-operator/gpu-operator (chart gpu-operator v25.10.1)"]
    assert "driver" in keep["Helm release gpu-operator/gpu-operator (chart gpu-operator v25.10.1)"]
    assert not any("cert-manager" in what for what in keep)
    plan = teardown.teardown_plan(results([], secrets=secrets), EXISTING, confirm="prod-eu", uninstall_releases=True)
    assert plan["uninstall"] == [{"name": "gpu-operator", "namespace": "gpu-operator", "chart": "gpu-operator",
                                  "objects": []}]
    assert "Helm release kueue-system/kueue (chart kueue 0.19.2)" in {k["what"] for k in plan["keep"]}
    assert plan["message"] == "Confirmed for prod-eu: removing fairgpu's objects (0 deletions, 1 Helm releases)."
    # not confirmed: nothing at all, whatever the second flag says
    assert not teardown.teardown_plan(results([], secrets=secrets), EXISTING, uninstall_releases=True)["confirmed"]


def test_a_release_secret_that_cannot_be_read_is_kept():
    bad = helm_secret("kueue", "kueue-system", "kueue", {})
    bad["data"]["release"] = base64.b64encode(b"not a release").decode()
    release = teardown.helm_release(bad)
    assert release["error"].startswith("cannot read the release") and not release["marked"]
    plan = teardown.teardown_plan(results([], secrets=[bad]), EXISTING, confirm="prod-eu", uninstall_releases=True)
    assert plan["uninstall"] == [] and plan["keep"][0]["what"].startswith("Helm release kueue-system/kueue")


def test_kubeconfig_server():
    kubeconfig = {"current-context": "a",
                  "contexts": [{"name": "a", "context": {"cluster": "ca"}}, {"name": "b", "context": {"cluster": "cb"}}],
                  "clusters": [{"name": "ca", "cluster": {"server": "https://a:6443"}},
                               {"name": "cb", "cluster": {"server": "https://b:6443"}}]}
    assert teardown.kubeconfig_server(kubeconfig) == "https://a:6443"
    assert teardown.kubeconfig_server(kubeconfig, "b") == "https://b:6443"
    assert teardown.kubeconfig_server(kubeconfig, "c") == "" and teardown.kubeconfig_server(None) == ""


_JSONISH = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=8),
                        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
                        max_leaves=12)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.fixed_dictionaries({"item": st.sampled_from(teardown.queries("existing")),
                                       "resources": st.lists(st.dictionaries(
                                           st.sampled_from(["metadata", "spec", "data", "kind"]), _JSONISH,
                                           max_size=4), max_size=3)}), max_size=4),
       st.sampled_from(["kwok", "kind", "existing"]), _JSONISH)
def test_any_cluster_content_gives_a_plan(found, provider, confirm):
    plan = teardown.teardown_plan(found, dict(EXISTING, provider=provider), confirm=confirm)
    assert isinstance(plan["lines"], list) and plan["message"]


def test_monitoring_helm_objects_are_all_removed_including_the_kueue_metrics_reader():
    """The helm-mode monitoring objects (the Kueue metrics reader ServiceAccount, its ClusterRole and binding, its
    token Secret and ServiceMonitor in Kueue's namespace, the DCGM ServiceMonitor, rules and dashboard) are
    fairgpu's: teardown deletes each, and the reader's token Secret before its ServiceAccount."""
    import os

    from ansible_collections.fairgpu.tenancy.plugins.module_utils.monitoring import objects as monitoring

    rules = open(os.path.join(os.path.dirname(__file__), "..", "..", "files", "monitoring",
                              "fairgpu-alerts.rules.yml")).read()
    made = monitoring.helm_objects([{"name": "team-a", "namespaces": ["team-a"]}], rules, "{}", "fairgpu-monitoring",
                                   "kps", "kueue-system", {}, "gpu-operator", {})
    plan = teardown.teardown_plan(results(applied(made)), EXISTING, confirm="prod-eu")
    deleted = [teardown.describe(ref) for ref in plan["delete"]]
    for obj in made:
        assert teardown.describe(teardown._ref(obj["apiVersion"], obj["kind"], obj)) in deleted
    assert (deleted.index("Secret kueue-system/fairgpu-kueue-metrics-reader-token")
            < deleted.index("ServiceAccount kueue-system/fairgpu-kueue-metrics-reader"))
    assert plan["keep"] == []


# As helm renders a manifest: "---" and a "# Source:" comment before each document.
KUEUE_MANIFEST = """---
# Source: kueue/templates/rbac/batch_admin_role.yaml
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: kueue-batch-admin-role
aggregationRule:
  clusterRoleSelectors:
  - matchLabels:
      rbac.kueue.x-k8s.io/batch-admin: "true"
---
# Source: kueue/templates/manager/manager-config.yaml
apiVersion: v1
kind: ConfigMap
metadata:
  name: kueue-manager-config
  namespace: 'kueue-system'
---
# Source: kueue/templates/webhook/service.yaml
apiVersion: v1
kind: Service
metadata:
  name: kueue-webhook-service
---
# Source: kueue/templates/empty.yaml
"""


def test_an_uninstall_deletes_every_object_of_the_releases_manifest_again():
    """helm uninstall --wait of Kueue's chart hangs: the clusterrole-aggregation controller re-creates the aggregated
    ClusterRoles helm just deleted. The plan names every object of the manifest for a delete after the uninstall."""
    secret = helm_secret("kueue", "kueue-system", "kueue", dict(teardown.RELEASE_MARKER), "0.19.2", KUEUE_MANIFEST)
    plan = teardown.teardown_plan(results([], secrets=[secret]), EXISTING, confirm="prod-eu", uninstall_releases=True)
    assert plan["uninstall"][0]["objects"] == [
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
         "metadata": {"name": "kueue-batch-admin-role", "namespace": "kueue-system"}},
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "kueue-manager-config", "namespace": "kueue-system"}},
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "kueue-webhook-service", "namespace": "kueue-system"}},
    ]
    assert teardown.release_objects("", "x") == [] and teardown.release_objects("--- 3\n--- {kind: A}", "x") == []


def test_a_multikueue_managers_and_workers_objects_go_after_the_cluster_queues():
    """The objects the multikueue role applies (kueue/multikueue.py), as a manager and a worker hold them: the
    admission check after the ClusterQueues that name it (Kueue's resource-in-use finalizer), the MultiKueueClusters,
    named after the workers' inventory hosts, found by fairgpu's label."""
    from ansible_collections.fairgpu.tenancy.plugins.module_utils.kueue import multikueue
    manager = applied(multikueue.manager_objects("kueue-system", [{"name": "gpu-west", "kubeconfig": "K", "expires": 1}]))
    plan = teardown.teardown_plan(results(fairgpu_objects() + manager), EXISTING, confirm="prod-eu")
    names = described(plan)
    queues = names.index("ClusterQueue team-b")
    assert names.index("Secret kueue-system/fairgpu-worker-gpu-west") < queues
    assert names[queues + 1:queues + 4] == ["AdmissionCheck fairgpu-multikueue", "MultiKueueConfig fairgpu-workers",
                                            "MultiKueueCluster gpu-west"]
    worker = applied(multikueue.worker_identity("kueue-system"))
    names = described(teardown.teardown_plan(results(worker), EXISTING, confirm="prod-eu"))
    assert names == ["ServiceAccount kueue-system/fairgpu-manager", "ClusterRoleBinding fairgpu-manager",
                     "ClusterRole fairgpu-manager"]
