"""The isolation probe's executor (validation/probe.py, through module validation_scenario) running the attempts table
(validation/attempts.py) against a fake cluster on a fake clock (fake_cluster.py): every attempt held where the
cluster isolates, exactly the attempts a hole lets through judged as not held, waits on the given clock, and the
probe's objects gone at the end."""

import pytest

from ansible_collections.fairgpu.tenancy.plugins.modules import validation_scenario as probe
from ansible_collections.fairgpu.tenancy.plugins.module_utils.common.waiter import Waiter
from ansible_collections.fairgpu.tenancy.plugins.module_utils.validation import attempts
from ansible_collections.fairgpu.tenancy.plugins.module_utils.validation import engine
from ansible_collections.fairgpu.tenancy.plugins.module_utils.validation import isolation
from ansible_collections.fairgpu.tenancy.plugins.module_utils.tenants.spec import is_dns_label

import fake_cluster
from fake_clock import FakeClock

ACCOUNTING = "no tenant's Running pods hold more GPUs than Kueue reserved for it (isolation)"
GPU_PODS = "every GPU pod on the nodes belongs to an admitted Workload (isolation)"


class Ended(Exception):
    pass


class Module(object):
    """Module validation_scenario's parameters for the isolation scenario (its other settings unused there)."""

    def __init__(self, tenants, timeout=60):
        settings = dict.fromkeys(engine.SETTING_NAMES, 0)
        settings.update(probe_timeout=timeout, running_bound_seconds=60, accounting_grace_seconds=5, prometheus_step="5s")
        self.params = dict(name="isolation", settings=settings, pod={"simulated": True}, load_script="",
                           prometheus_url="", alert_for="5m", results_dir=".",
                           plan={"tenants": tenants, "errors": [], "priority_classes": fake_cluster.PRIORITY_CLASSES,
                                 "local_queue_suffix": "-queue",
                                 "isolation": {"termination_grace_max_seconds": 30, "max_object_kib": 256}})

    def exit_json(self, **result):
        raise Ended("exit", result)

    def fail_json(self, **result):
        raise Ended("fail", result)


def run_probe(monkeypatch, leaks=(), judge_after=0.0, quota_conflicts=None, **params):
    """Run module validation_scenario's run() for the isolation scenario against a fake cluster; returns (how it
    ended, its result with the scenario's entry as "scenario", the cluster, the clock)."""
    clock = FakeClock()
    tenants = fake_cluster.tenants()
    cluster = fake_cluster.FakeCluster(tenants, clock, judge_after=judge_after, leaks=leaks,
                                       quota_conflicts=quota_conflicts)
    clients = []

    def get_api_client(module, impersonate_user=None, impersonate_groups=None):
        clients.append((impersonate_user, impersonate_groups))
        return cluster.client(impersonate_user, impersonate_groups or ())
    monkeypatch.setattr(probe, "get_api_client", get_api_client)
    with pytest.raises(Ended) as ended:
        probe.run(Module(tenants, **params), cluster.client(), Waiter(clock.monotonic, clock.sleep, clock.time))
    assert clients == [(None, None), ("fairgpu-probe@team-a", ["team-a"]), ("fairgpu-probe@team-b", ["team-b"]),
                       ("fairgpu-probe@team-a", ["team-a", "fairgpu-probe-editors"])]
    how, result = ended.value.args
    if how == "exit":
        (result["scenario"],) = result["results"]
    return how, result, cluster, clock


def failed(result):
    return [c["check"] for c in result["scenario"]["checks"] if not c["passed"]]


def leftovers(cluster):
    return [key for key, obj in cluster.objects.items() if obj["metadata"]["name"].startswith(("fairgpu-probe-", "job-fairgpu-probe-"))]


def test_every_attempt_is_held_where_the_cluster_isolates(monkeypatch):
    how, result, cluster, _clock = run_probe(monkeypatch)
    assert how == "exit" and result["passed"] and result["changed"]
    scenario = result["scenario"]
    checks = scenario["checks"]
    assert scenario["name"] == "isolation" and scenario["title"] == "A tenant that tries to cheat: team-a against team-b"
    assert sorted({int(c["check"].split(".")[0]) for c in checks[:-2]}) == list(range(1, 23))
    assert [int(c["check"].split(".")[0]) for c in checks[:-2]] == sorted(int(c["check"].split(".")[0]) for c in checks[:-2])
    assert checks[-2]["check"] == ACCOUNTING and checks[-2]["observed"] == "never (27 samples)"
    # The fake's pods are never bound to a node (no spec.nodeName): the cluster-wide read lists none.
    assert checks[-1]["check"] == GPU_PODS and checks[-1]["observed"] == "none (27 samples)" and checks[-1]["passed"]
    rows = {c["check"]: c for c in checks}
    assert rows["2. Job labelled with team-b's LocalQueue team-b-queue"]["observed"] == (
        "QuotaReserved=False (Inadmissible): LocalQueue team-b-queue doesn't exist; pods: 0")
    assert rows["5. lift Kueue's suspension of its own Job, edit its Workload"]["observed"].endswith(
        "; afterwards Job suspended=True, pods: 0")
    assert rows["6. a pod past Kueue (forged Job owner) asking for 18 nvidia.com/gpu"]["expected"] == "LimitRange refuses create Pod"
    assert rows["7. priority fairgpu-normal for 9 nvidia.com/gpu while team-b holds its guarantee of 8"]["observed"] == (
        "fairgpu-probe-jump: QuotaReserved=False (Pending); team-b kept 8 of 8 guaranteed Jobs admitted, evicted: none")
    assert "(16 pods of 1 nvidia.com/gpu)" in next(name for name in rows if name.startswith("8. "))
    reclaim = rows["9. team-a holds 200 pod slots (100 borrowed); team-b submits its guarantee of 8"]
    assert reclaim["observed"].startswith("team-b's pods Running after 0.0 s; team-a's workloads evicted: job-fairgpu-probe-slots-1-")
    burst = rows["10. a burst of Jobs past its Job quota (count/jobs.batch 100, 0 in use)"]
    assert burst["observed"].startswith("100 created (0 past the quota), then 1 of 1 refused by ResourceQuota fairgpu-gpu-quota")
    assert rows["11. Jobs with no GPU request that reach for the node's devices or host"]["observed"].startswith(
        "13 of 13 refused by ValidatingAdmissionPolicy fairgpu-tenant-jobs")
    assert scenario["metrics"] == {"user": "fairgpu-probe@team-a", "groups": "team-a",
                                   "pod_slots_time_to_running_seconds": 0.0, "guarantee_time_to_running_seconds": 0.0}
    assert len(scenario["timeline"]) == 27
    assert leftovers(cluster) == []


@pytest.mark.parametrize("leak, attempts_let_through", [
    ("gpu-pods", ["1. bare GPU Pod by a user allowed to create pods"]),
    ("child-jobs", ["8. a Job with no queue claiming its own admitted Job as controller (16 pods of 1 nvidia.com/gpu)"]),
    ("device-door", ["11. Jobs with no GPU request that reach for the node's devices or host"]),
    ("pod-security", ["11. a privileged pod by a user allowed to create pods"]),
    ("job-quota", ["10. a burst of Jobs past its Job quota (count/jobs.batch 100, 0 in use)"]),
    ("kueue", ["5. lift Kueue's suspension of its own Job, edit its Workload",
               "6. one pod asking for 17 nvidia.com/gpu (hard maximum 16)",
               "6. 17 pods of 1 nvidia.com/gpu (hard maximum 16)",
               "7. priority fairgpu-normal for 9 nvidia.com/gpu while team-b holds its guarantee of 8",
               "9. one Job of 224 pods of 10m CPU and 16Mi (the GPU nodes have 220 pod slots)",
               "12. one pod of 2 containers x 8 nvidia.com/gpu (a node has at most 8)",
               "20. with the edit role: change its own waiting Job (lift Kueue's suspension, scale it up)"]),
    ("round-three", ["13. delete its admitted Jobs leaving their pods running (orphaning deletes)",
                     "14. Jobs whose Job or pods carry a finalizer (they outlive their deletion)",
                     "15. tiny Jobs whose pod affinity or anti-affinity reaches team-b's namespace team-b",
                     "16. Jobs Kueue would admit and nothing would run (nodeName, schedulerName, schedulingGates, "
                     "managedBy)",
                     "17. Jobs whose limits are far above the requests Kueue counts",
                     "17. a pod of 10m CPU limited to 96 by a user allowed to create pods",
                     "18. Jobs far larger than a Job needs (the Job quota counts objects, not bytes)",
                     "18. a ConfigMap of 257 KiB (edit role)",
                     "19. Jobs whose pods Pod Security baseline refuses (seccomp, sysctls, AppArmor, SELinux, probe hosts)",
                     "20. with the edit role: pods of its own (95 CPUs; a GPU pod with a forged Job owner)",
                     "20. with the edit role: Deployments and StatefulSets",
                     "20. with the edit role: change its own waiting Job (lift Kueue's suspension, scale it up)",
                     "20. with the edit role: relabel its own running pod off its Job (the Job controller releases it)",
                     "20. a pod of PriorityClass system-node-critical by a user allowed to create pods",
                     "21. Jobs that would fill a GPU node's CPU or memory while its GPUs stay free"]),
])
def test_a_hole_fails_exactly_its_attempts(monkeypatch, leak, attempts_let_through):
    how, result, cluster, _clock = run_probe(monkeypatch, leaks=[leak])
    assert how == "exit" and not result["passed"]
    assert failed(result) == attempts_let_through
    assert leftovers(cluster) == []


def test_a_hole_is_named_in_the_row(monkeypatch):
    _how, result, _cluster, _clock = run_probe(monkeypatch, leaks=["device-door", "job-quota"])
    rows = {c["check"]: c for c in result["scenario"]["checks"]}
    door = rows["11. Jobs with no GPU request that reach for the node's devices or host"]["observed"]
    assert door.startswith("accepted: CDI device annotation, NVIDIA_VISIBLE_DEVICES in an init container")
    burst = rows["10. a burst of Jobs past its Job quota (count/jobs.batch 100, 0 in use)"]
    assert burst["observed"] == "106 created (6 past the quota), then accepted: create Job 107"


def test_a_quota_conflict_is_sent_again_not_taken_for_the_quota_s_answer(monkeypatch):
    # What failed a CI run: the burst's 11th Job answered 409 "Operation cannot be fulfilled on resourcequotas".
    _how, result, cluster, _clock = run_probe(monkeypatch, quota_conflicts={"fairgpu-probe-burst-10": 2})
    burst = {c["check"]: c for c in result["scenario"]["checks"]}[
        "10. a burst of Jobs past its Job quota (count/jobs.batch 100, 0 in use)"]
    assert burst["passed"] and burst["observed"].startswith("100 created (0 past the quota), then 1 of 1 refused by "
                                                            "ResourceQuota fairgpu-gpu-quota")
    assert cluster.quota_conflicts == {"fairgpu-probe-burst-10": 0}
    # Past the retries the conflict is the answer, and the row says so rather than passing.
    _how, result, _cluster, _clock = run_probe(monkeypatch, quota_conflicts={"fairgpu-probe-burst-10": 9})
    burst = {c["check"]: c for c in result["scenario"]["checks"]}[
        "10. a burst of Jobs past its Job quota (count/jobs.batch 100, 0 in use)"]
    assert not burst["passed"] and "10 created" in burst["observed"] and "409" in burst["observed"]


def test_quota_conflict_is_told_from_a_refusal():
    conflict = ('Operation cannot be fulfilled on resourcequotas "fairgpu-gpu-quota": the object has been modified; '
                'please apply your changes to the latest version and try again')
    assert isolation.quota_conflict(409, conflict)
    assert not isolation.quota_conflict(409, 'jobs.batch "x" already exists')
    assert not isolation.quota_conflict(403, 'exceeded quota: fairgpu-gpu-quota, requested: count/jobs.batch=1')


def test_waits_run_on_the_given_clock(monkeypatch):
    how, result, _cluster, clock = run_probe(monkeypatch, judge_after=3)
    assert how == "exit" and result["passed"]
    assert result["scenario"]["metrics"]["pod_slots_time_to_running_seconds"] == 3.0
    assert set(clock.slept) == {0.5, 5} and clock.slept.count(5) == 1  # polls every 0.5 s; the priority hold once
    times = [s["t"] for s in result["scenario"]["timeline"]]
    assert times == sorted(times) and times[-1] == clock.now - 1000.0


def test_kueue_never_judging_fails_the_module_and_still_cleans_up(monkeypatch):
    how, result, cluster, clock = run_probe(monkeypatch, judge_after=10 ** 6, timeout=20)
    assert how == "fail"
    assert result["msg"] == "isolation: Kueue judged no Workload of Job team-a/fairgpu-probe-other-queue: not within 20 s"
    assert leftovers(cluster) == [] and clock.now == 1020.0


def context(**kwargs):
    tenants = fake_cluster.tenants()
    return attempts.Context(tenants[0], tenants[1], "-queue", {"nvidia.com/gpu": 16, "pods": 220}, "uid-1",
                            priority_classes=fake_cluster.PRIORITY_CLASSES, per_gpu={"cpu": 8000, "memory": 64 * 2 ** 30},
                            node="gpu-node-0", **kwargs)


def test_the_table_names_a_rule_for_each_attempt_and_only_dry_runs_what_must_be_refused():
    table = attempts.attempts(context(simulated=True))
    assert sorted({a.number for a in table}) == list(range(1, 23))
    for attempt in table:
        assert attempt.rule and attempt.check and type(attempt.held) in (
            attempts.Refused, attempts.Pending, attempts.KeepsGuarantee, attempts.Reclaimed, attempts.QuotaStops)
        if isinstance(attempt.held, attempts.Refused):
            assert attempt.sends and all(r.dry_run for r in attempt.sends
                                         if r.verb in ("create", "patch", "delete", "deletecollection"))
        if isinstance(attempt.held, attempts.Pending):
            assert len(attempt.sends) == 1 and not attempt.sends[0].dry_run and attempt.sends[0].who == attempts.TENANT


def test_the_table_s_jobs_are_valid_objects():
    parent = {"metadata": {"name": "fairgpu-probe-parent", "uid": "u"}}
    for attempt in attempts.attempts(context(simulated=True)):
        bodies = [r.body(lambda name: parent) if callable(r.body) else r.body for r in attempt.sends]
        bodies += [job for run in attempt.runs for job in run.jobs]
        if isinstance(attempt.held, attempts.QuotaStops):
            bodies.append(attempt.held.job(99))
        for body in bodies:
            if body and body.get("kind") in ("Job", "Pod"):
                assert is_dns_label(body["metadata"]["name"]), body["metadata"]["name"]
                assert body["metadata"]["name"].startswith("fairgpu-probe-")
                assert body["metadata"]["labels"]["fairgpu.io/probe"] == "isolation"
