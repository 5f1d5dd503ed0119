"""The real Kueue controller behind the API server: its webhooks suspend queued Jobs, it admits them through
the tenant's ClusterQueue, and while it is down Job creation is refused (failurePolicy Fail). Then the drift check
(issue 25): hand edits of Kueue's live Configuration and of a ClusterQueue's quota are listed by --check --diff and
repaired, and said, by site.yml."""

import json
import os
import subprocess
import uuid

import pytest
import yaml
from kubernetes.client.exceptions import ApiException

from conftest import CLUSTER, cluster_queue, condition, load_job, playbook, wait_until, workloads

from ansible_collections.fairgpu.tenancy.plugins.module_utils.tenants.plan import tenant_plan


def job_workload(kueue, namespace, job):
    return next((w for w in workloads(kueue, namespace)
                 if any(o["name"] == job for o in w["metadata"].get("ownerReferences", []))), None)


@pytest.mark.parametrize("queue", ["team-a-queue", None])
def test_job_is_suspended_then_admitted_through_the_tenants_queue(batch, kueue, queue):
    name = "it-%s" % uuid.uuid4().hex[:6]
    created = batch.create_namespaced_job("team-a", load_job(name, "team-a", queue=queue, seconds=3))
    # Kueue's mutating webhook suspends it on creation (or its LocalQueue "default" when unlabelled).
    assert created.spec.suspend is True
    assert created.metadata.labels["kueue.x-k8s.io/queue-name"] == (queue or "default")

    def admitted():
        workload = job_workload(kueue, "team-a", name)
        admission = workload and condition(workload, "Admitted")
        return workload if admission and admission["status"] == "True" else None

    wl = wait_until(admitted, 30, what="admission")
    assert wl["status"]["admission"]["clusterQueue"] == "team-a"
    wait_until(lambda: (batch.read_namespaced_job(name, "team-a").status.succeeded or 0) == 1, 60, what="the Job to succeed")
    batch.delete_namespaced_job(name, "team-a", propagation_policy="Background")


def _kueue_process(workdir):
    with open(os.path.join(workdir, "kueue.pid")) as handle:
        pid = int(handle.read().strip())
    with open("/proc/%d/cmdline" % pid, "rb") as handle:
        return pid, [a.decode() for a in handle.read().split(b"\0") if a]


def test_job_creation_is_refused_while_kueue_is_down(batch):
    pidfile = os.path.expanduser("~/.local/share/fairgpu/kueue/%s/kueue.pid" % CLUSTER)
    subprocess.run(["start-stop-daemon", "--stop", "--pidfile", pidfile, "--remove-pidfile", "--retry", "TERM/15/KILL/5"],
                   check=True)
    try:
        with pytest.raises(ApiException) as refused:
            batch.create_namespaced_job("team-a", load_job("it-down", "team-a", queue="team-a-queue"))
        assert refused.value.status == 500
        assert "failed calling webhook" in refused.value.body and "mjob.kb.io" in refused.value.body
    finally:
        run = playbook("site.yml")
    assert run.rc == 0, run.messages()
    changed = run.changed_tasks()
    assert len(changed) == 1 and "Run the Kueue controller" in changed[0], changed


KUEUE_DIR = os.path.expanduser("~/.local/share/fairgpu/kueue/%s" % CLUSTER)


def gpu_resource(cq):
    """The index and entry of nvidia.com/gpu in the ClusterQueue's first flavor (cpu and memory come first)."""
    resources = cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"]
    return next((i, r) for i, r in enumerate(resources) if r["name"] == "nvidia.com/gpu")


def kueue_pid():
    with open(os.path.join(KUEUE_DIR, "kueue.pid")) as handle:
        return int(handle.read().strip())


def quota_manager(cq):
    """The field managers that own the ClusterQueue's quotas: spec.resourceGroups is an atomic list (Kueue's
    clusterqueue_types.go, +listType=atomic), owned whole by the manager that last wrote any of it."""
    return sorted(entry["manager"] for entry in cq["metadata"]["managedFields"]
                  if "f:resourceGroups" in ((entry.get("fieldsV1") or {}).get("f:spec") or {}))


def test_kueue_runs_with_admission_fair_sharing_and_takes_fairgpus_objects_for_it(core, kueue):
    """vars.yml's kueue_admission_fair_sharing reached the Configuration the local Kueue started with, and Kueue acts
    on it: its LocalQueue controller writes every LocalQueue's status.fairSharing.admissionFairSharingStatus
    (pkg/controller/core/localqueue_controller.go initializeAfsIfNeeded, v0.19.2). The ClusterQueue (admissionScope)
    and LocalQueues (fairSharing.weight) of a tenant with admission_fair_sharing, as fairgpu builds them, pass the
    API server's schema and Kueue's webhooks (server-side dry run: nothing is created)."""
    with open(os.path.join(KUEUE_DIR, "config.yaml")) as handle:
        assert yaml.safe_load(handle)["admissionFairSharing"] == {
            "usageHalfLifeTime": "1h", "usageSamplingInterval": "15m",
            "resourceWeights": {"cpu": 0, "memory": 0, "pods": 0}}
    wait_until(lambda: ((kueue.get_namespaced_custom_object("kueue.x-k8s.io", "v1beta2", "team-a", "localqueues",
                                                            "team-a-queue").get("status") or {}).get("fairSharing")
                        or {}).get("admissionFairSharingStatus") is not None, 90,
               what="Kueue's admission fair sharing status on LocalQueue team-a/team-a-queue")
    nodes = [core.api_client.sanitize_for_serialization(n) for n in core.list_node().items]
    probe = {"name": "afs-probe", "namespaces": ["team-a"], "gpus": 0, "admission_fair_sharing": True,
             "local_queue_weights": {"team-a": 2.5}}
    plan = tenant_plan([probe], nodes, cohort="")
    assert plan["errors"] == [], plan["errors"]
    cq = next(o for o in plan["objects"] if o["kind"] == "ClusterQueue")
    made = kueue.create_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "clusterqueues", cq, dry_run="All")
    assert made["spec"]["admissionScope"] == {"admissionMode": "UsageBasedAdmissionFairSharing"}
    lq = next(o for o in plan["objects"] if o["kind"] == "LocalQueue" and o["metadata"]["name"] != "default")
    made = kueue.create_namespaced_custom_object("kueue.x-k8s.io", "v1beta2", "team-a", "localqueues", lq,
                                                 dry_run="All")
    assert made["spec"]["fairSharing"] == {"weight": "2500m"}


def test_a_changed_setting_restarts_kueue_and_hand_edits_are_listed_then_repaired_and_said(kueue):
    """Kueue reads its Configuration and flags only at start: the role restarts the process when config.yaml or its
    command line changed (nothing changed: the same pid, test_10's second run). A Configuration setting and a feature
    gate from -e first. Then a platform engineer's 2 a.m. edits: fair sharing taken out of the Configuration file the
    local Kueue reads, team-a's guarantee raised to 12 GPUs with another field manager (a JSON patch as kubectl edit
    sends one; Kueue's webhook refuses a guarantee below its lendingLimit of 8). --check --diff lists both against
    the inventory's settings and changes nothing; site.yml repairs both, says so, and restarts Kueue with the
    inventory's settings again; a last run changes nothing. (One test, so that the run that puts the inventory's
    settings back is also the repair: a site.yml run fewer.)"""
    config_path = os.path.join(KUEUE_DIR, "config.yaml")
    before = kueue_pid()
    changed = {"kueue_fair_sharing_preemption_strategies": ["LessThanInitialShare"],
               "kueue_feature_gates": {"LocalQueueMetrics": True}}
    # --skip-tags tenants: the tenants are as they were, only Kueue's settings differ.
    run = playbook("site.yml", "--skip-tags", "tenants", "-e", json.dumps(changed))
    assert run.rc == 0, run.messages()
    restarted = [t for t in run.changed_tasks() if "Kueue" in t]
    assert [t.split(" : ", 1)[-1] for t in restarted] == [
        "Write Kueue's configuration", "Say what differed in Kueue's Configuration (repaired)",
        "Run the Kueue controller, restarted when its command line, Configuration, kubeconfig or certificates change "
        "(log kueue.log in %s)" % KUEUE_DIR], restarted
    after, args = _kueue_process(KUEUE_DIR)
    assert after != before
    assert "--feature-gates=LocalQueueMetrics=true,VisibilityOnDemand=false" in args, args
    with open(config_path) as handle:
        config = yaml.safe_load(handle)
    assert config["fairSharing"]["preemptionStrategies"] == ["LessThanInitialShare"]

    index, resource = gpu_resource(cluster_queue(kueue, "team-a"))
    guaranteed = resource["nominalQuota"]
    del config["fairSharing"]
    with open(config_path, "w") as handle:
        # Another key order too: that alone is no drift.
        yaml.safe_dump(dict(reversed(list(config.items()))), handle, sort_keys=False)
    kueue.patch_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "clusterqueues", "team-a",
                                      [{"op": "replace", "value": "12", "path": "/spec/resourceGroups/0/flavors/0/"
                                        "resources/%d/nominalQuota" % index}], field_manager="kubectl-edit",
                                      _content_type="application/json-patch+json")
    edited = cluster_queue(kueue, "team-a")
    assert gpu_resource(edited)[1]["nominalQuota"] in ("12", 12)
    assert "kubectl-edit" in quota_manager(edited), "the quota is another field manager's now"
    pid = kueue_pid()

    check = playbook("site.yml", "--diff", check=True)
    assert check.rc == 0, check.messages()
    assert check.drift_lines("Kueue's Configuration (would repair)") == [
        config_path + ' fairSharing: live (absent), fairgpu '
        '{"preemptionStrategies": ["LessThanOrEqualToFinalShare", "LessThanInitialShare"]}']
    quota_line = ('ClusterQueue/team-a spec.resourceGroups[0].flavors[name=%s].resources[name=nvidia.com/gpu].'
                  'nominalQuota: live "12", fairgpu ' % edited["spec"]["resourceGroups"][0]["flavors"][0]["name"])
    assert [line for line in check.drift_lines("tenants (would repair)") if line.startswith(quota_line)], \
        check.drift_lines("tenants")
    assert "fairSharing" not in yaml.safe_load(open(config_path)) and kueue_pid() == pid, "--check changed nothing"

    repair = playbook("site.yml")
    assert repair.rc == 0, repair.messages()
    assert repair.drift_lines("Kueue's Configuration (repaired)") == check.drift_lines("Kueue's Configuration (would repair)")
    assert [line for line in repair.drift_lines("tenants (repaired)") if line.startswith(quota_line)]
    assert "fairSharing" in yaml.safe_load(open(config_path))
    again_pid, args = _kueue_process(KUEUE_DIR)
    assert again_pid != pid, "the local Kueue restarted to read its repaired Configuration"
    assert "--feature-gates=VisibilityOnDemand=false" in args, "and the inventory's feature gates: %s" % args
    repaired = cluster_queue(kueue, "team-a")
    assert gpu_resource(repaired)[1]["nominalQuota"] == guaranteed
    assert quota_manager(repaired) == ["fairgpu"], "server-side apply took the field back"

    again = playbook("site.yml")
    assert again.rc == 0 and again.stats["changed"] == 0, again.changed_tasks()
