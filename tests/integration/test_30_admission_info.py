"""Module fairgpu.tenancy.kueue_admission_info against the real Kueue, compared with the raw objects."""

import json
import os
import subprocess
import sys
import uuid

from conftest import KUBECONFIG, ROOT, cluster_queue, delete_jobs, load_job, reserved_gpus, wait_until


def module(**args):
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_LOAD_CALLBACK_PLUGINS="1",
               ANSIBLE_STDOUT_CALLBACK="ansible.posix.json")
    proc = subprocess.run(
        [os.path.join(os.path.dirname(sys.executable), "ansible"), "localhost", "-m", "fairgpu.tenancy.kueue_admission_info",
         "-a", json.dumps(dict(kubeconfig=KUBECONFIG, **args))],
        cwd=ROOT, env=env, check=False, capture_output=True, text=True, timeout=300)
    out = json.loads(proc.stdout)
    return next(iter(out["plays"][0]["tasks"][0]["hosts"].values()))


def test_reports_what_kueue_holds(batch, kueue):
    label = "it-info=%s" % uuid.uuid4().hex[:6]
    for i in range(3):
        batch.create_namespaced_job("team-b", load_job("it-info-%d-%s" % (i, label[-6:]), "team-b", queue="team-b-queue",
                                                       gpus=2, seconds=60, labels=dict([label.split("=")])))
    try:
        wait_until(lambda: reserved_gpus(cluster_queue(kueue, "team-b")) == 6, 30, what="6 GPUs reserved")
        result = module(namespaces=["team-b"], wait_for={"queue": "team-b", "admitted_at_least": 3}, wait_timeout=30)
        assert not result.get("failed"), result
        queue = result["queues"]["team-b"]
        raw = cluster_queue(kueue, "team-b")
        assert queue["reserved"] == reserved_gpus(raw) == 6
        assert (queue["nominal"], queue["borrowed"], queue["cohort"]) == (8, 0, "fairgpu")
        assert queue["admitted_workloads"] == raw["status"]["admittedWorkloads"] == 3
        mine = [w for w in result["workloads"] if w["job"] and w["job"].endswith(label[-6:])]
        assert len(mine) == 3
        assert all(w["gpus"] == 2 and w["state"] == "admitted" and w["cluster_queue"] == "team-b" for w in mine)
        assert all(w["conditions"]["Admitted"]["status"] == "True" for w in mine)
        assert result["timeline"] and result["elapsed"] >= 0
    finally:
        delete_jobs(batch, "team-b", label)


def test_unknown_queue_and_bad_wait_are_clear_errors(cluster):
    result = module(cluster_queues=["nope"])
    assert result["failed"] and "ClusterQueue(s) nope do not exist" in result["msg"]
    result = module(namespaces=["team-a"], wait_for={"queue": "team-a"})
    assert result["failed"] and "give one or more of" in result["msg"]
