"""Bad input stops a playbook with one message naming the field, before anything changes on a cluster."""

import json

import pytest

from conftest import playbook

TEAM = {"name": "team-a", "gpus": 8, "borrowing_limit": 8, "lending_limit": 8, "max_gpus": 16}


def snapshot(core, kueue):
    """Names and resourceVersions (quotas and LocalQueues: spec) of every object the tenants role manages."""
    state = {"ns": sorted((n.metadata.name, n.metadata.resource_version) for n in core.list_namespace().items)}
    for plural in ("clusterqueues", "resourceflavors", "cohorts", "workloadpriorityclasses"):
        items = kueue.list_cluster_custom_object("kueue.x-k8s.io", "v1beta2", plural)["items"]
        state[plural] = sorted((o["metadata"]["name"], o["metadata"]["resourceVersion"]) for o in items)
    # A LocalQueue's status moves by itself: with admission fair sharing in Kueue's Configuration (vars.yml) its
    # LocalQueue controller writes every LocalQueue's usage each usageSamplingInterval
    # (pkg/controller/core/localqueue_controller.go, v0.19.2), so its resourceVersion too; its spec and labels are
    # what a playbook could change.
    items = kueue.list_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "localqueues")["items"]
    state["localqueues"] = sorted((o["metadata"]["namespace"], o["metadata"]["name"], json.dumps(o["spec"], sort_keys=True),
                                   json.dumps(o["metadata"].get("labels") or {}, sort_keys=True)) for o in items)
    # A quota's status (usage) moves with the pods; its spec is what a playbook could change.
    state["quotas"] = sorted((q.metadata.namespace, q.metadata.name, sorted(q.spec.hard.items()))
                             for q in core.list_resource_quota_for_all_namespaces().items)
    return state


@pytest.mark.parametrize("tenants, message", [
    ([dict(TEAM, gpus=-1), dict(TEAM, name="team-b")], "tenants_list[0] (team-a).gpus: the guarantee must be a whole number of GPUs >= 0, got -1"),
    ([TEAM, dict(TEAM)], "tenants_list[1] (team-a).name: 'team-a' is used by two tenants"),
    ([dict(TEAM, gpus=12), dict(TEAM, name="team-b")], "the guarantees (gpus) of team-a, team-b add up to 20 nvidia.com/gpu but the cluster's nodes offer 16"),
    ([dict(TEAM, gpu_resource="nvidia.com/gpus")], "tenants_list[0] (team-a).gpu_resource: 'nvidia.com/gpus' is not an accelerator resource"),
    ([dict(TEAM, weight=0)], "tenants_list[0] (team-a).weight: the fair-sharing weight must be a number > 0, got 0"),
    ([TEAM, dict(TEAM, name="team-b", namespaces=["team-a"])],
     "tenants_list[1] (team-b).namespaces: 'team-a' already belongs to tenant 'team-a'"),
    ([dict(TEAM, resource_quota={"nvidia.com/gpu": 4}), dict(TEAM, name="team-b")],
     "tenants_list[0] (team-a).resource_quota['nvidia.com/gpu']: Kubernetes never enforces an extended resource "
     "under this key (it accepts it silently); write requests.nvidia.com/gpu"),
    ([dict(TEAM, priority_classes=["fairgpu-urgent"]), dict(TEAM, name="team-b")],
     "tenants_list[0] (team-a).priority_classes: fairgpu-urgent: not a WorkloadPriorityClass of the platform"),
    ([dict(TEAM, cpu="500m"), dict(TEAM, name="team-b")],
     "tenants_list[0] (team-a).cpu: the guarantee 500m is below one container's default request 1"),
    ({"tenants_preemption": {"reclaimWithinCohort": "Any", "borrowWithinCohort": {"policy": "LowerPriority"}}},
     "tenants_preemption.borrowWithinCohort: Kueue ignores it under fair sharing; remove it"),
])
def test_bad_tenants_change_nothing(core, kueue, tenants, message):
    before = snapshot(core, kueue)
    extra = tenants if isinstance(tenants, dict) else {"tenants_list": tenants}
    run = playbook("site.yml", "-e", json.dumps(extra))
    assert run.rc != 0
    assert message in run.messages()
    assert snapshot(core, kueue) == before


def test_borrowing_limit_without_cohort(core, kueue):
    before = snapshot(core, kueue)
    run = playbook("site.yml", "-e", json.dumps({"tenants_cohort": "", "tenants_list": [TEAM]}))
    assert run.rc != 0 and "borrowing_limit: needs a cohort to borrow from" in run.messages()
    assert snapshot(core, kueue) == before


@pytest.mark.parametrize("extra, message", [
    ({"lab_cluster_node_pools": [{"name": "gpu", "count": 1, "gpu_product": "NVIDIA-H100-80GB-HBM3", "gpu_count": 0,
                                  "cpu": "8", "memory": "8Gi"}]},
     "lab_cluster_node_pools[0].gpu_count: must be an integer >= 1, got 0"),
    ({"lab_cluster_node_pools": [{"name": "gpu", "count": 0, "gpu_product": "NVIDIA-H100-80GB-HBM3", "gpu_count": 8,
                                  "cpu": "8", "memory": "8Gi"}]},
     "lab_cluster_node_pools[0].count: must be an integer >= 1, got 0"),
    ({"cluster_provider": "docker"}, "cluster_provider: 'docker' is not a provider; use one of kwok, kind, existing"),
    # Loopback only on the embedded cluster (resolve.loopback_errors): helm would dial a chart repository or registry.
    ({"gpu_operator_mode": "helm"}, "gpu_operator_mode: 'helm' installs the NVIDIA GPU Operator chart from its repository"),
    ({"monitoring_mode": "helm"}, "monitoring_mode: 'helm' with monitoring_install_chart: true installs kube-prometheus-stack"),
    ({"kueue_mode": "helm", "kueue_chart_ref": "oci://registry.k8s.io/kueue/charts/kueue"},
     "kueue_chart_ref: 'oci://registry.k8s.io/kueue/charts/kueue' is a remote chart, which helm would fetch"),
    ({"lab_cluster_pod_security_defaults": {"enforce": "strict"}},
     "lab_cluster_pod_security_defaults.enforce: 'strict' is not a Pod Security level"),
    # Admission fair sharing that would not act (kubernetes-sigs/kueue#11134: a half-life of 0 is a silent FIFO).
    ({"kueue_admission_fair_sharing": {"usageHalfLifeTime": "0s", "usageSamplingInterval": "5m"}},
     "kueue_admission_fair_sharing.usageHalfLifeTime: '0s'; give a Go duration above 0"),
    ({"kueue_admission_fair_sharing": None,
      "tenants_list": [dict(TEAM, namespaces=["team-a", "team-a-dev"], admission_fair_sharing=True)]},
     "tenants_list: team-a set admission_fair_sharing but kueue_admission_fair_sharing is off"),
])
def test_bad_cluster_input_starts_nothing(tmp_path, extra, message):
    extra = dict(extra, cluster_name="fairgpu-bad", run_state_dir=str(tmp_path))
    run = playbook("site.yml", "-e", json.dumps(extra))
    assert run.rc != 0 and message in run.messages()
    assert not (tmp_path / "kwok").exists(), "nothing may be created before the input is checked"


def test_kubeconfig_that_does_not_answer(tmp_path):
    missing = playbook("site.yml", "-e", json.dumps({"cluster_provider": "existing",
                                                     "cluster_kubeconfig": str(tmp_path / "none.yaml")}))
    assert missing.rc != 0 and "cluster_kubeconfig: %s does not exist" % (tmp_path / "none.yaml") in missing.messages()
    dead = tmp_path / "dead.yaml"
    dead.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "dead",
        "clusters": [{"name": "dead", "cluster": {"server": "https://127.0.0.1:1", "insecure-skip-tls-verify": True}}],
        "contexts": [{"name": "dead", "context": {"cluster": "dead", "user": "dead"}}],
        "users": [{"name": "dead", "user": {"token": "x"}}]}))
    run = playbook("site.yml", "-e", json.dumps({"cluster_provider": "existing", "cluster_kubeconfig": str(dead),
                                                 "cluster_api_timeout": 4}))
    assert run.rc != 0 and "cluster_kubeconfig: the API server of %s" % dead in run.messages()
    assert "did not answer within 4 s" in run.messages()
    # tenants.yml and validate.yml read the cluster's record first: that read is their check that it answers.
    for name in ("tenants.yml", "validate.yml"):
        missing = playbook(name, "-e", json.dumps({"cluster_provider": "existing",
                                                  "cluster_kubeconfig": str(tmp_path / "none.yaml")}))
        assert missing.rc != 0 and "cluster_kubeconfig: %s does not exist" % (tmp_path / "none.yaml") in missing.messages()
        run = playbook(name, "-e", json.dumps({"cluster_provider": "existing", "cluster_kubeconfig": str(dead)}))
        assert run.rc != 0 and "cluster_kubeconfig: the API server of %s did not answer" % dead in run.messages()


def test_unknown_path(cluster):
    run = playbook("site.yml", "-e", "path=gpu")
    assert run.rc != 0 and "path: 'gpu' is not a fairgpu path; use -e path=kueue or -e path=mig" in run.messages()


def test_api_server_port_in_use_is_reported_before_starting(tmp_path):
    import socket

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        run = playbook("site.yml", "-e", json.dumps({"cluster_name": "fairgpu-busy", "lab_cluster_apiserver_port": port,
                                                     "run_state_dir": str(tmp_path)}))
    assert run.rc != 0
    assert "lab_cluster_apiserver_port: 127.0.0.1:%d is already in use" % port in run.messages()
    assert not (tmp_path / "kwok" / "clusters" / "fairgpu-busy").exists()


def test_bad_tenants_are_refused_before_a_cluster_starts(tmp_path):
    run = playbook("site.yml", "-e", json.dumps({"cluster_name": "fairgpu-never", "run_state_dir": str(tmp_path),
                                                 "tenants_list": [dict(TEAM, gpus=20)]}))
    assert run.rc != 0
    assert "the guarantees (gpus) of team-a add up to 20 nvidia.com/gpu but the cluster's nodes offer 16" in run.messages()
    assert not (tmp_path / "kwok").exists()


def test_a_removed_tenant_stops_the_play_until_pruned(core, kueue):
    before = snapshot(core, kueue)
    run = playbook("tenants.yml", "-e", json.dumps({"tenants_list": [TEAM]}))
    assert run.rc != 0
    assert "Tenant(s) team-b are on the cluster but not in tenants_list" in run.messages()
    assert "set tenants_prune: true" in run.messages()
    assert snapshot(core, kueue) == before
