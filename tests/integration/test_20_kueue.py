"""The real Kueue controller behind the API server: its webhooks suspend queued Jobs, it admits them through
the tenant's ClusterQueue, and while it is down Job creation is refused (failurePolicy Fail)."""

import json
import os
import subprocess
import uuid

import pytest
import yaml
from kubernetes.client.exceptions import ApiException

from conftest import CLUSTER, condition, load_job, playbook, wait_until, workloads


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


def test_a_changed_configuration_restarts_the_local_kueue(kueue):
    """Kueue reads its Configuration and flags only at start: the role restarts the process when config.yaml or its
    command line changed (nothing changed: the same pid, test_10's second run). A Configuration setting and a
    feature gate, then back to the inventory's settings."""
    workdir = os.path.expanduser("~/.local/share/fairgpu/kueue/%s" % CLUSTER)
    before, _args = _kueue_process(workdir)
    changed = {"kueue_fair_sharing_preemption_strategies": ["LessThanInitialShare"],
               "kueue_feature_gates": {"LocalQueueMetrics": True}}
    # --skip-tags tenants: the tenants are as they were, only Kueue's settings differ.
    run = playbook("site.yml", "--skip-tags", "tenants", "-e", json.dumps(changed))
    assert run.rc == 0, run.messages()
    restarted = [t for t in run.changed_tasks() if "Kueue" in t]
    assert [t.split(" : ", 1)[-1] for t in restarted] == [
        "Write Kueue's configuration", "Write the Kueue process's command line",
        "Stop the local Kueue controller", "Start the Kueue controller, logging to kueue.log in %s" % workdir], restarted
    after, args = _kueue_process(workdir)
    assert after != before
    assert "--feature-gates=LocalQueueMetrics=true,VisibilityOnDemand=false" in args, args
    with open(os.path.join(workdir, "config.yaml")) as handle:
        assert yaml.safe_load(handle)["fairSharing"]["preemptionStrategies"] == ["LessThanInitialShare"]
    # And back: restarted again with the inventory's settings.
    run = playbook("site.yml", "--skip-tags", "tenants")
    assert run.rc == 0, run.messages()
    again, args = _kueue_process(workdir)
    assert again != after
    assert "--feature-gates=VisibilityOnDemand=false" in args, args


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
    assert len(changed) == 1 and "Start the Kueue controller" in changed[0], changed
