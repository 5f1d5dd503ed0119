"""The fault scenarios (issue 27; docs/failures.md): the hands that take Kueue down and bring it back
(plugins/module_utils/validation/faults.py, on a real process of local_service), the kueue_restart scenario's
judges (validation/scenarios.py), FairgpuKueueDown's check and Kueue's noise (monitoring/checks.py). Each judge is
shown failing on what a wrong cluster would do: a double admission, a tenant above its reach, a Job run twice, a
Job created unsuspended while Kueue was down, an alert that fired inside its for:."""

import fcntl
import os
import signal
import subprocess
import sys
import time

import pytest

from ansible_collections.fairgpu.tenancy.plugins.module_utils.common.waiter import Waiter
from ansible_collections.fairgpu.tenancy.plugins.module_utils.lab import service as lab
from ansible_collections.fairgpu.tenancy.plugins.module_utils.monitoring import checks
from ansible_collections.fairgpu.tenancy.plugins.module_utils.validation import engine, faults, scenarios

A = {"name": "team-a", "namespaces": ["team-a"], "gpus": 8, "gpu_resource": "nvidia.com/gpu"}
B = {"name": "team-b", "namespaces": ["team-b"], "gpus": 8, "gpu_resource": "nvidia.com/gpu"}
REACH = {"team-a": 16, "team-b": 16}


def point(ts, a, b, a_workloads=None, b_workloads=None):
    """A timeline sample: team-a and team-b reserve ``a`` and ``b`` devices; their Workloads hold the given ones."""
    def queue(reserved, held):
        return {"reserved": reserved, "workloads_reserved": reserved if held is None else held, "borrowed": 0,
                "pending": 0, "admitted": 0, "running": reserved, "started": reserved, "terminating": 0}
    return {"t": ts - 1000.0, "ts": ts, "queues": {"team-a": queue(a, a_workloads), "team-b": queue(b, b_workloads)},
            "outside_kueue": []}


def test_reservation_check_tolerates_a_moment_apart_and_fails_a_double_admission():
    brief = [point(1000, 16, 0), point(1002, 16, 0, a_workloads=15), point(1004, 16, 0)]
    assert scenarios.reservation_check(brief, 10, "x")["passed"]
    doubled = [point(1000 + i, 16, 8, b_workloads=7) for i in range(0, 14, 2)]
    failed = scenarios.reservation_check(doubled, 10, "x")
    assert not failed["passed"] and "team-b: Kueue counts 8 reserved, its Workloads 7" in failed["observed"]
    assert not scenarios.reservation_check([], 10, "x")["passed"]


def test_reach_check_fails_on_one_read_above_what_a_tenant_may_reach():
    assert scenarios.reach_check([point(1000, 16, 0), point(1001, 8, 8)], REACH, "x")["passed"]
    over = scenarios.reach_check([point(1000, 16, 0), point(1001, 17, 0)], REACH, "x")
    assert not over["passed"] and "team-a: 17 reserved, may reach 16" in over["observed"]


def job(name, succeeded=1):
    return {"metadata": {"name": name}, "status": {"succeeded": succeeded}}


def pod(job_name, phase):
    return {"metadata": {"name": job_name + "-x", "labels": {"job-name": job_name}}, "status": {"phase": phase}}


def test_ran_twice_names_jobs_that_finished_twice_not_those_preempted_and_run_again():
    jobs = [job("j1"), job("j2", succeeded=2), job("j3")]
    pods = [pod("j1", "Succeeded"), pod("j3", "Succeeded"), pod("j3", "Succeeded"), pod("j1", "Failed")]
    assert scenarios.ran_twice(jobs, pods) == ["j2", "j3"]


def result(during, jobs=None, timeline=None, kueue_down=None):
    arrived = {"timeline": [point(2000, 8, 0), point(2004, 8, 8)]}
    finished = {"timeline": timeline or [point(2010, 8, 8)], "elapsed": 60.0}
    jobs = jobs if jobs is not None else [job("j%d" % i) for i in range(24)]
    return scenarios.kueue_restart_result(
        A, B, REACH, 16, {"how": "killed", "ts": 1900.0}, during, {"ts": 1999.0, "ready_seconds": 2.5}, 2000.0,
        arrived, finished, jobs, [], 15.0, 10.0, kueue_down)


def checks_of(res):
    return dict((c["check"], c["passed"]) for c in res["checks"])


REFUSED = {"refused": 'Internal error occurred: failed calling webhook "mjob.kb.io": connect: connection refused',
           "job": None, "pods": []}


def test_kueue_restart_passes_when_the_webhook_refused_and_nothing_was_lost():
    res = result(REFUSED)
    assert all(checks_of(res).values()), res["checks"]
    assert res["metrics"]["down_seconds"] == 99.0 and res["metrics"]["time_to_guarantee_seconds"] == 4.0
    assert res["metrics"]["jobs_lost"] == 0 and res["metrics"]["jobs_run_twice"] == 0


@pytest.mark.parametrize("during, passed", [
    ({"refused": None, "job": {"spec": {"suspend": True}}, "pods": []}, True),
    ({"refused": None, "job": {"spec": {"suspend": False}}, "pods": []}, False),
    ({"refused": None, "job": {"spec": {"suspend": True}}, "pods": [{"metadata": {"name": "p"}}]}, False),
    ({"refused": "403 Forbidden: quota", "job": None, "pods": []}, False),
])
def test_a_job_created_while_kueue_is_down_must_be_refused_by_its_webhook_or_stay_suspended(during, passed):
    res = result(during, jobs=[job("j%d" % i) for i in range(24 + (during["job"] is not None))])
    assert checks_of(res)["a Job team-b created while Kueue was down"] is passed


def test_a_lost_job_a_job_run_twice_and_a_late_guarantee_fail():
    res = result(REFUSED, jobs=[job("j%d" % i) for i in range(22)] + [job("j22", succeeded=0), job("j23", succeeded=2)])
    failed = [name for name, passed in checks_of(res).items() if not passed]
    assert failed == ["every Job of both tenants succeeded (none lost)", "Jobs run to the end twice"]
    assert res["metrics"]["jobs_lost"] == 1 and res["metrics"]["jobs_run_twice"] == 1
    late = scenarios.kueue_restart_result(
        A, B, REACH, 16, {"how": "killed", "ts": 1900.0}, REFUSED, {"ts": 1999.0, "ready_seconds": 2.5}, 2000.0,
        {"timeline": [point(2000, 8, 0), point(2020, 8, 8)]}, {"timeline": [], "elapsed": 1.0},
        [job("j%d" % i) for i in range(24)], [], 15.0, 10.0)
    assert not checks_of(late)["time-to-guarantee of team-b after Kueue is back, Kueue's reservation, within 15.0 s"]


def alerts(pending, firing):
    series = []
    for state, times in (("pending", pending), ("firing", firing)):
        if times:
            series.append({"metric": {"alertname": "FairgpuKueueDown", "alertstate": state},
                           "values": [[t, "1"] for t in times]})
    return series


def test_kueue_down_must_fire_after_its_for_and_must_not_fire_inside_it():
    # Down 30 s with for: 10s at 5 s steps: pending from the first failed scrape, firing 10 s later.
    fired = checks.kueue_down_check(alerts([1005, 1010], [1015, 1020, 1025, 1030]), 1000, 1030, 10, 5)
    assert fired["passed"] and fired["observed"] == "pending 5 s after the fault, firing 15 s after the fault"
    assert not checks.kueue_down_check(alerts([1005, 1010, 1015], []), 1000, 1030, 10, 5)["passed"]
    # Down 30 s under the rule file's 5m: pending only; a firing means the for: was not in force.
    assert checks.kueue_down_check(alerts([1005, 1010, 1030], []), 1000, 1030, 300, 5)["passed"]
    assert not checks.kueue_down_check(alerts([1005], [1010]), 1000, 1030, 300, 5)["passed"]
    assert not checks.kueue_down_check([], 1000, 1030, 300, 5)["passed"]
    # An alert of an earlier outage, before this fault, is not this one's.
    assert not checks.kueue_down_check(alerts([900], [950]), 1000, 1030, 10, 5)["passed"]


def test_kueue_noise_says_what_struggled_and_nothing_when_nothing_did():
    metrics, notes = checks.kueue_noise(
        [{"metric": {"controller": "job"}, "value": [1, "182.4"]}, {"metric": {"controller": "workload"}, "value": [1, "0"]}],
        [{"metric": {"reason": "Preempted"}, "value": [1, "8"]}])
    assert metrics == {"kueue_reconcile_errors": {"job": 182}, "kueue_evictions": {"Preempted": 8}}
    assert notes == ["Kueue struggled: 182 reconciler errors (job 182), each retried by Kueue; its log says which "
                     "objects", "Kueue evicted workloads 8 times (Preempted 8)"]
    assert checks.kueue_noise([], None) == ({"kueue_reconcile_errors": {}, "kueue_evictions": {}}, [])


SLEEPER = "import time\nwhile True:\n    time.sleep(1)\n"


@pytest.fixture
def kueue_like(tmp_path):
    """A process run by local_service as the lab's Kueue is (a sleeping Python program), stopped after the test."""
    script = tmp_path / "sleeper.py"
    script.write_text(SLEEPER)
    watched = tmp_path / "config.yaml"
    watched.write_text("a: 1\n")
    workdir = str(tmp_path / "kueue")
    service = lab.LocalService("kueue", workdir, argv=[sys.executable, str(script)], restart_on=[str(watched)],
                               environment={"X": "1"}, ready_timeout=10)
    started = service.run("started")
    yield workdir, service, started["pid"]
    pid = lab.read_pid(os.path.join(workdir, "kueue.pid"))
    if pid and lab.alive(pid):
        os.kill(pid, signal.SIGKILL)


def test_the_local_kueue_is_killed_and_started_again_as_it_was_so_the_next_run_changes_nothing(kueue_like):
    workdir, service, pid = kueue_like
    fault = faults.fault("kueue", {"process": {"workdir": workdir, "ready_url": None}}, None, Waiter())
    with open(os.path.join(workdir, "kueue.service.json")) as handle:
        record = handle.read()
    assert fault.stop() == {"how": "the local Kueue process killed with SIGKILL", "pid": pid}
    assert not lab.alive(pid)
    back = fault.start()
    assert back["pid"] != pid and lab.alive(back["pid"])
    with open(os.path.join(workdir, "kueue.service.json")) as handle:
        assert handle.read() == record
    # What the lab_kueue role's task would do next: nothing.
    assert service.run("started")["action"] == "none"


def test_a_kueue_that_is_not_running_or_was_never_started_is_a_clear_error(kueue_like, tmp_path):
    workdir, _service, pid = kueue_like
    os.kill(pid, signal.SIGKILL)
    Waiter().wait(lambda: not lab.alive(pid), 5, 0.1)
    time.sleep(0.1)
    with pytest.raises(faults.FaultError, match="the local Kueue is not running"):
        faults.fault("kueue", {"process": {"workdir": workdir, "ready_url": None}}, None, Waiter()).stop()
    with pytest.raises(faults.FaultError, match="no record of how the local Kueue was started"):
        faults.fault("kueue", {"process": {"workdir": str(tmp_path / "none"), "ready_url": None}}, None, Waiter()).stop()
    with pytest.raises(faults.FaultError, match="validate_fault_kueue"):
        faults.fault("kueue", {}, None, Waiter())


class Pods(object):
    """Kueue's controller pods as a Deployment keeps them: a deleted pod is replaced by a new one, Ready at once."""

    def __init__(self):
        self.items, self.deleted, self.serial = [self.pod(0)], [], 1

    @staticmethod
    def pod(serial):
        return {"metadata": {"name": "kueue-controller-manager-%d" % serial, "uid": "uid-%d" % serial},
                "status": {"conditions": [{"type": "Ready", "status": "True"}]}}

    def resource(self, kind, api_version):
        return kind

    def get(self, resource, namespace=None, label_selector=None):
        assert (namespace, label_selector) == ("kueue-system", "control-plane=controller-manager")
        items = list(self.items)
        return type("List", (), {"to_dict": lambda _self: {"items": items}})()

    def delete(self, resource, name=None, namespace=None, body=None):
        assert body["gracePeriodSeconds"] == 0
        self.deleted.append(name)
        self.items = [p for p in self.items if p["metadata"]["name"] != name] + [self.pod(self.serial)]
        self.serial += 1


def test_kueue_in_the_cluster_is_taken_down_by_deleting_its_pods_and_is_back_when_a_new_one_is_ready():
    client = Pods()
    spec = {"pods": {"namespace": "kueue-system", "label_selector": "control-plane=controller-manager"}}
    fault = faults.fault("kueue", spec, client, Waiter())
    assert fault.stop() == {"how": "Kueue's pods deleted (grace period 0)",
                            "pods": ["kueue-controller-manager-0"]}
    assert fault.start()["pods"] == ["kueue-controller-manager-1"]


def test_prometheus_restart_passes_when_the_alert_fires_again_at_once_with_its_old_active_time():
    fault, back = {"how": "killed", "ts": 2000.0}, {"ts": 2021.0, "ready_seconds": 0.8}
    before = {"ts": 1990.0, "for_state": 1925.0}
    restored = checks.prometheus_restart_result(A, fault, back, before, {"ts": 2027.0, "for_state": 1925.0}, 60, 5)
    assert [c["passed"] for c in restored["checks"]] == [True, True, True], restored["checks"]
    assert restored["metrics"]["refiring_seconds"] == 6.0 and restored["metrics"]["down_seconds"] == 21.0
    # What a Prometheus that lost its data does: pending again, firing after a new for:, a new active time.
    lost = checks.prometheus_restart_result(A, fault, back, before, {"ts": 2088.0, "for_state": 2026.0}, 60, 5)
    assert [c["passed"] for c in lost["checks"]] == [True, False, False]
    assert lost["checks"][1]["observed"] == "67.0 s" and lost["checks"][1]["expected"] == "<= 15 s"
    never = checks.prometheus_restart_result(A, fault, back, before, {"ts": None, "for_state": None}, 60, 5)
    assert [c["passed"] for c in never["checks"]] == [True, False, False]


def workload(name, uid="u1", conditions=(), evictions=()):
    """A Workload as Kueue v0.19.2 writes it; ``evictions``: (reason, underlyingCause, count) rows of its
    status.schedulingStats."""
    status = {"conditions": [dict(type=t, status=s, reason=r, lastTransitionTime=ts) for t, s, r, ts in conditions]}
    if evictions:
        status["schedulingStats"] = {"evictions": [dict(reason=r, underlyingCause=c, count=n)
                                                   for r, c, n in evictions]}
    return {"metadata": {"name": name, "uid": uid}, "status": status}


ADMITTED = [("QuotaReserved", "True", "QuotaReserved", "2026-12-06T10:00:00Z"),
            ("Admitted", "True", "Admitted", "2026-12-06T10:00:00Z")]
PENDING = [("QuotaReserved", "False", "Pending", "2026-12-06T10:00:01Z")]


def test_admissions_kept_fails_a_workload_lost_replaced_or_admitted_again():
    before = [workload("a1", conditions=ADMITTED), workload("a2", conditions=PENDING)]
    kept = scenarios.admissions_kept(before, [workload("a1", conditions=ADMITTED),
                                              workload("a2", conditions=[("QuotaReserved", "False", "Pending",
                                                                          "2026-12-06T10:00:09Z")])])
    assert kept == {"lost": [], "changed": {}, "admitted": 1}  # a pending Workload's condition may be rewritten
    again = [("QuotaReserved", "True", "QuotaReserved", "2026-12-06T10:05:00Z")] + ADMITTED[1:]
    kept = scenarios.admissions_kept(before, [workload("a1", conditions=again)])
    assert kept["lost"] == ["a2"] and "QuotaReserved: True QuotaReserved since 2026-12-06T10:00:00Z -> True " \
        "QuotaReserved since 2026-12-06T10:05:00Z" in kept["changed"]["a1"]
    assert scenarios.admissions_kept(before, [workload("a1", uid="u2", conditions=ADMITTED),
                                              workload("a2", conditions=PENDING)])["lost"] == ["a1"]


def test_after_kueue_is_back_a_workload_may_finish_or_be_preempted_but_not_be_admitted_again_or_timed_out():
    before = [workload("a1", conditions=ADMITTED), workload("a2", conditions=PENDING)]
    preempted = [("QuotaReserved", "False", "Pending", "2026-12-06T10:06:00Z"),
                 ("Evicted", "True", "Preempted", "2026-12-06T10:06:00Z")]
    finished = ADMITTED[:1] + [("Finished", "True", "Succeeded", "2026-12-06T10:07:00Z")]
    # caught between Kueue's writes: the admission gone, the Finished condition not yet there
    between = [("QuotaReserved", "False", "Pending", "2026-12-06T10:07:00Z"),
               ("Admitted", "False", "NoReservation", "2026-12-06T10:07:00Z")]
    for conditions, count in ((ADMITTED, 0), (preempted, 1), (finished, 0), (between, 0)):
        after = scenarios.admissions_after_kueue(before, [workload("a1", conditions=conditions), before[1]])
        assert after == {"lost": [], "readmitted": {}, "evicted": {}, "preempted": count, "timed_out": 0}, after
    again = [("QuotaReserved", "True", "QuotaReserved", "2026-12-06T10:05:00Z")] + ADMITTED[1:]
    assert scenarios.admissions_after_kueue(before, [workload("a1", conditions=again)])["readmitted"] == {
        "a1": "2026-12-06T10:05:00Z"}
    # waitForPodsReady's eviction is counted for the report; any other eviction (a deactivation) fails
    timed_out = [("QuotaReserved", "False", "Pending", "2026-12-06T10:06:00Z"),
                 ("Evicted", "True", "PodsReadyTimeout", "2026-12-06T10:06:00Z")]
    after = scenarios.admissions_after_kueue(before, [workload("a1", conditions=timed_out)])
    assert after["evicted"] == {} and after["timed_out"] == 1
    # Kueue v0.19.2's reason for a deactivation after the requeuing limit (patching.ReasonWithCause)
    deactivated = [("QuotaReserved", "False", "Pending", "2026-12-06T10:06:00Z"),
                   ("Evicted", "True", "DeactivatedDueToRequeuingLimitExceeded", "2026-12-06T10:06:00Z")]
    assert scenarios.admissions_after_kueue(before, [workload("a1", conditions=deactivated)])["evicted"] == {
        "a1": "DeactivatedDueToRequeuingLimitExceeded"}
    assert scenarios.admissions_after_kueue(before, [])["lost"] == ["a1"]  # the pending one is not judged


def test_a_workload_preempted_and_admitted_again_before_the_read_is_counted_not_failed():
    """Seen in CI on 2026-12-06: the arriver preempted two of the flooder's Workloads and Kueue admitted them again
    before the read; the conditions then say QuotaReserved (Kueue's SetQuotaReservation), the counts say why."""
    before = [workload("a1", conditions=ADMITTED)]
    again = [("QuotaReserved", "True", "QuotaReserved", "2026-12-06T10:08:00Z"),
             ("Admitted", "True", "Admitted", "2026-12-06T10:08:00Z"),
             ("Evicted", "False", "QuotaReserved", "2026-12-06T10:08:00Z"),
             ("Preempted", "False", "QuotaReserved", "2026-12-06T10:08:00Z")]
    after = scenarios.admissions_after_kueue(
        before, [workload("a1", conditions=again, evictions=[("Preempted", "InCohortReclamation", 1)])])
    assert after == {"lost": [], "readmitted": {}, "evicted": {}, "preempted": 1, "timed_out": 0}, after
    after = scenarios.admissions_after_kueue(
        before, [workload("a1", conditions=again, evictions=[("PodsReadyTimeout", "", 1)])])
    assert after["timed_out"] == 1 and after["readmitted"] == {} and after["evicted"] == {}
    # the same conditions with the counts unchanged since before: admitted twice for one eviction it never had
    counted = [workload("a1", conditions=ADMITTED, evictions=[("Preempted", "InCohortReclamation", 1)])]
    after = scenarios.admissions_after_kueue(
        counted, [workload("a1", conditions=again, evictions=[("Preempted", "InCohortReclamation", 1)])])
    assert after["readmitted"] == {"a1": "2026-12-06T10:08:00Z"} and after["preempted"] == 0
    # evicted for another reason and admitted again: the counts keep the reason the conditions lost
    after = scenarios.admissions_after_kueue(
        before, [workload("a1", conditions=again, evictions=[("ClusterQueueStopped", "", 1)])])
    assert after["evicted"] == {"a1": "ClusterQueueStopped"} and after["readmitted"] == {}


SURVIVES = ("every Workload survives the outage with its admission: unchanged in etcd at the return, and once Kueue "
            "works again none admitted again or evicted but by preemption or waitForPodsReady")


def event(reason, pod, ts="2026-12-06T10:00:00Z"):
    return {"reason": reason, "involvedObject": {"kind": "Pod", "name": pod}, "lastTimestamp": ts}


def control_plane(after=None, later=None, before=None, events=(), jobs=None, running_ts=2020, reserved_ts=2004,
                  fault=None, back=None, finished_timeline=None):
    before = before if before is not None else [workload("a1", conditions=ADMITTED)]
    arrived = {"timeline": [point(2000, 8, 0), point(reserved_ts, 8, 8)]}
    running = {"timeline": [point(running_ts, 8, 8)]}
    finished = {"timeline": finished_timeline or [point(2030, 8, 8)], "elapsed": 60.0}
    jobs = jobs if jobs is not None else [job("j%d" % i) for i in range(24)]
    fault = fault or {"how": "killed", "ts": 1900.0, "pids": {"etcd": 10, "kube-apiserver": 11}, "unreachable": True}
    back = back or {"ts": 1990.0, "ready_seconds": 3.1, "pids": {"etcd": 20, "kube-apiserver": 21}}
    return scenarios.control_plane_restart_result(
        A, B, REACH, 16, fault, back, before, before if after is None else after, before if later is None else later,
        2000.0, arrived, running, finished, jobs, [], list(events), 15.0, 10.0, running_bound_seconds=60)


def failing(res):
    return [name for name, passed in checks_of(res).items() if not passed]


def test_control_plane_restart_passes_when_admissions_survive_and_fails_each_way_a_cluster_can_break():
    res = control_plane()
    assert all(checks_of(res).values()), res["checks"]
    assert res["metrics"]["down_seconds"] == 90.0 and res["metrics"]["time_to_guarantee_seconds"] == 4.0
    assert failing(control_plane(after=[])) == [SURVIVES]
    assert failing(control_plane(later=[workload("a1", conditions=[
        ("QuotaReserved", "True", "QuotaReserved", "2026-12-06T10:05:00Z")])])) == [SURVIVES]  # Kueue admitted it again
    assert failing(control_plane(before=[workload("a1", conditions=PENDING)])) == [SURVIVES]  # nothing was admitted
    # A fault that did not take the API server down, or processes that are not new: the fault itself fails.
    taken = "etcd and the API server taken down while team-a holds every GPU it may reach, then back"
    assert failing(control_plane(fault={"how": "killed", "ts": 1900.0, "pids": {"etcd": 10, "kube-apiserver": 11},
                                        "unreachable": False})) == [taken]
    assert failing(control_plane(back={"ts": 1990.0, "ready_seconds": 3.1, "pids": {"etcd": 10, "kube-apiserver": 11}})) \
        == [taken]
    assert failing(control_plane(jobs=[job("j%d" % i) for i in range(23)])) == [
        "every Job of both tenants succeeded (none lost)"]


def test_control_plane_restart_counts_only_its_own_pods_evictions_since_the_fault():
    evictions = "no pod evicted for its node after the outage (TaintManagerEviction)"
    since = "2026-12-06T10:00:00Z"  # 1796551200, after the fault below
    fault = {"how": "killed", "ts": 1796551100.0, "pids": {"etcd": 10}, "unreachable": True}
    back = {"ts": 1796551190.0, "ready_seconds": 3.0, "pids": {"etcd": 20}}
    evicted = control_plane(fault=fault, back=back, events=[event("TaintManagerEviction", "j1-x", since)])
    assert failing(evicted) == [evictions]
    # another pod's, or one from before the fault (an earlier run's, Events live an hour), is not this outage's
    assert not failing(control_plane(fault=fault, back=back, events=[
        event("TaintManagerEviction", "other-x", since), event("TaintManagerEviction", "j1-x", "2026-12-06T09:00:00Z")]))
    # marked not ready: said in the notes and counted, not failed (the eviction comes after its toleration)
    marked = control_plane(fault=fault, back=back, events=[event("NodeNotReady", "j2-x", since)])
    assert not failing(marked) and marked["metrics"]["pods_marked_not_ready"] == 1 and "not ready" in marked["notes"][0]


def test_kueues_status_may_trail_its_workloads_after_the_outage_but_a_lasting_difference_fails():
    # team-a's ClusterQueue says 16 reserved while its Workloads hold 4: for 20 s (a run saw 18.7 s), then for 80 s.
    def apart(seconds):
        return [point(2030 + t, 16, 8, a_workloads=4) for t in range(0, seconds + 1, 2)] + [point(2031 + seconds, 4, 8)]
    assert not failing(control_plane(finished_timeline=apart(20)))
    assert failing(control_plane(finished_timeline=apart(80))) == [
        "Kueue's reserved GPUs equal its admitted Workloads' (control_plane_restart)"]


def test_control_plane_restart_bounds_add_the_relist_backoff_and_the_waits_outlast_them():
    # Bounds: the scenario's own plus the controllers' relist backoff after an outage (60 s).
    assert not failing(control_plane(reserved_ts=2075, running_ts=2120))
    assert failing(control_plane(reserved_ts=2076, running_ts=2121)) == [
        "time-to-guarantee of team-b after the API server is back, Kueue's reservation, within 75.0 s (15.0 s and "
        "the controllers' relist backoff, 60 s)",
        "team-b's pods run on its guarantee after the API server is back (scheduled, started), within 120 s (60 s "
        "and the relist backoff)"]


@pytest.fixture
def kwok_cluster(tmp_path):
    """A stand-in of kwokctl's binary runtime on real processes: bin/etcd and bin/kube-apiserver are sleep(1)
    under those names, pids/<component>.pid as kwokctl's ForkExec writes them, a kwok.yaml, and a kwokctl script
    whose start starts only the components that are not running, as kwokctl's startComponent does (and exits 9 for
    arguments it does not know)."""
    cluster = tmp_path / "clusters" / "c1"
    (cluster / "bin").mkdir(parents=True)
    (cluster / "pids").mkdir()
    (cluster / "kwok.yaml").write_text("kind: Cluster\n")
    sleep = "/bin/sleep" if os.path.exists("/bin/sleep") else "/usr/bin/sleep"
    for component in ("etcd", "kube-apiserver"):
        os.symlink(sleep, str(cluster / "bin" / component))
    kwokctl = tmp_path / "kwokctl"
    kwokctl.write_text("#!/bin/bash\n[ \"$*\" = 'start cluster --name=c1' ] || { echo \"unknown: $*\" >&2; exit 9; }\n"
                       "for c in etcd kube-apiserver; do pid=$KWOK_WORKDIR/clusters/c1/pids/$c.pid\n"
                       "  kill -0 \"$(cat $pid 2>/dev/null)\" 2>/dev/null && continue\n"
                       "  setsid $KWOK_WORKDIR/clusters/c1/bin/$c 600 </dev/null >/dev/null 2>&1 & echo $! > $pid\n"
                       "done\n")
    kwokctl.chmod(0o755)
    spec = {"kwokctl": {"binary": str(kwokctl), "workdir": str(tmp_path), "cluster": "c1",
                        "lock": str(tmp_path / "create.lock")}}
    start(spec, cluster)
    yield spec, cluster
    for pid in running(cluster).values():
        os.kill(pid, signal.SIGKILL)


def running(cluster):
    return dict((c, p) for c, p in ((c, lab.running_pid(str(cluster / "pids" / (c + ".pid")),
                                                        [str(cluster / "bin" / c)])[0])
                                    for c in ("etcd", "kube-apiserver")) if p is not None)


def start(spec, cluster):
    """Start the stand-in's components with its kwokctl, and wait until both run their program (after exec)."""
    given = spec["kwokctl"]
    done = subprocess.run([given["binary"], "start", "cluster", "--name=c1"],
                          env=dict(os.environ, KWOK_WORKDIR=given["workdir"]), check=False)
    assert done.returncode == 0
    held, _found, _elapsed = Waiter().wait(lambda: len(running(cluster)) == 2, 5, 0.05)
    assert held


def control_plane_fault(spec, ready=lambda: True):
    fault = faults.fault("control_plane", spec, None, Waiter())
    fault.ready = ready
    return fault


def test_the_control_plane_is_killed_and_started_again_by_kwokctl_under_the_creation_lock(kwok_cluster):
    spec, cluster = kwok_cluster
    before = running(cluster)
    answers = iter([False, True])  # the API server: gone once killed, serving again once started
    fault = control_plane_fault(spec, ready=lambda: next(answers))
    stopped = fault.stop()
    assert stopped["pids"] == before and stopped["unreachable"] and not any(lab.alive(p) for p in before.values())
    # While it is down, the lock of the clusters' creation is held: no other kwokctl run takes the freed ports.
    with open(spec["kwokctl"]["lock"]) as other:
        with pytest.raises(BlockingIOError):
            fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
    back = fault.start()
    assert sorted(back["pids"]) == ["etcd", "kube-apiserver"] and not set(back["pids"].values()) & set(before.values())
    with open(spec["kwokctl"]["lock"]) as other:
        fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)  # released


def test_the_control_plane_fault_refuses_before_it_kills_anything(kwok_cluster, tmp_path):
    spec, cluster = kwok_cluster
    before = running(cluster)
    with pytest.raises(faults.FaultError, match="a cluster fairgpu did not make is not its to restart"):
        faults.fault("control_plane", {}, None, Waiter())
    with pytest.raises(faults.FaultError, match="lacks cluster"):
        faults.fault("control_plane", {"kwokctl": {"binary": "/bin/true", "workdir": str(tmp_path)}}, None, Waiter())
    for broken, words in (({"binary": str(tmp_path / "no-kwokctl")}, "is not an executable file"),
                          ({"cluster": "c2"}, "is no kwokctl cluster")):
        given = dict(spec["kwokctl"], **broken)
        with pytest.raises(faults.FaultError, match=words + ".*nothing was stopped"):
            control_plane_fault({"kwokctl": given}).stop()
    os.kill(before["etcd"], signal.SIGKILL)
    Waiter().wait(lambda: not lab.alive(before["etcd"]), 5, 0.05)
    fault = control_plane_fault(spec)
    with pytest.raises(faults.FaultError, match="etcd of the embedded cluster c1 not running.*nothing was stopped"):
        fault.stop()
    assert lab.alive(before["kube-apiserver"]) and not fault.touched


def test_a_control_plane_that_does_not_come_back_is_named_with_its_logs_and_the_way_to_start_it(kwok_cluster):
    spec, cluster = kwok_cluster
    fault = control_plane_fault(spec, ready=lambda: False)
    fault.ready_timeout = 1
    fault.stop()
    with pytest.raises(faults.FaultError, match=r"did not serve within 1 s of kwokctl's start; start them with: "
                                                r"KWOK_WORKDIR=.* start cluster --name=c1 \(or run site.yml\); logs: "):
        fault.start()
    given = dict(spec["kwokctl"], binary="/bin/false")
    fault = control_plane_fault({"kwokctl": given})
    fault.stop()
    with pytest.raises(faults.FaultError, match="kwokctl start cluster c1 exited 1"):
        fault.start()


def test_api_ready_is_true_only_when_the_api_server_serves_a_read():
    class Client(object):
        def __init__(self, answers):
            self.answers = iter(answers)

        def resource(self, kind, api_version):
            return (kind, api_version)

        def get(self, resource, name):
            answer = next(self.answers)
            if isinstance(answer, Exception):
                raise answer
            return answer

    ready = faults.api_ready(Client([ConnectionRefusedError("refused"), {"metadata": {"name": "default"}}]))
    assert ready() is False and ready() is True


def test_a_scenario_that_stops_while_a_component_is_down_brings_it_back_first():
    class Injector(object):
        def __init__(self, error=None):
            self.error, self.started = error, 0

        def start(self):
            self.started += 1
            if self.error:
                raise faults.FaultError(self.error)

    run = engine.Run(None, Waiter(), [], [], {}, "", {}, {}, "")
    back, stuck = Injector(), Injector("control_plane: kwokctl start cluster c1 exited 1; start them with: ...")
    run.broken = {"kueue": back, "control_plane": stuck}
    assert run.repair() == ("; control_plane: kwokctl start cluster c1 exited 1; start them with: ...; "
                            "Kueue started again")
    assert back.started == 1 and stuck.started == 1 and run.broken == {} and run.repair() == ""


# --- a GPU node goes away (gpu_node_loss) ---------------------------------------------------------------------------

class Cluster(object):
    """What GpuNode touches of a cluster: two GPU nodes, the scenario's pods on them, the nodes' Leases and the
    admission policies; a node created again loses the GPUs of its status as an API server that drops the status of
    a create would, so that only the status patch (the device plugin's part) gives them back."""

    def __init__(self):
        self.nodes = dict((n, self.node(n)) for n in ("gpu-node-0", "gpu-node-1"))
        self.pods = [self.pod("team-a", "j-%d-x" % i, "gpu-node-%d" % (i % 2 or i > 4)) for i in range(6)]
        self.leases = dict((n, {"spec": {"holderIdentity": "kwok"}}) for n in self.nodes)
        self.policies, self.calls = {}, []

    @staticmethod
    def node(name, gpus="8"):
        return {"metadata": {"name": name, "labels": {"fairgpu.io/node-pool": "gpu"},
                             "annotations": {"kwok.x-k8s.io/node": "fake"}, "uid": "u-" + name},
                "spec": {"taints": [{"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"},
                                    {"key": "nvidia.com/gpu", "effect": "NoSchedule"}]},
                "status": {"allocatable": {"nvidia.com/gpu": gpus, "cpu": "32"}, "capacity": {"nvidia.com/gpu": gpus},
                           "conditions": [{"type": "Ready", "status": "True"}]}}

    @staticmethod
    def pod(namespace, name, node, phase="Running"):
        return {"metadata": {"name": name, "namespace": namespace}, "spec": {"nodeName": node},
                "status": {"phase": phase}}

    def resource(self, kind, api_version):
        return type("Resource", (), {"kind": kind, "subresources": {"status": kind + "/status"}})()

    def get(self, resource, name=None, namespace=None, label_selector=None):
        kind = resource.kind
        if name is not None:
            if name not in self.nodes:
                raise faults.NotFoundError("gone")
            found = self.nodes[name]
            return type("One", (), {"to_dict": lambda _self: found})()
        items = list(self.nodes.values()) if kind == "Node" else list(self.pods)
        return type("List", (), {"to_dict": lambda _self: {"items": items}})()

    def apply(self, resource, body, namespace, **params):
        self.calls.append(("apply", body["kind"], body["metadata"]["name"]))
        if body["kind"] == "Lease":
            self.leases[body["metadata"]["name"]] = body
        else:
            self.policies[body["kind"]] = body

    def patch(self, resource, body, name=None, **params):
        self.calls.append(("patch", resource, name))
        status = self.nodes[name]["status"]
        for condition in body["status"].get("conditions") or []:
            status["conditions"] = [c for c in status["conditions"] if c["type"] != condition["type"]] + [condition]
        status.update(dict((k, v) for k, v in body["status"].items() if k != "conditions"))

    def delete(self, resource, name=None, namespace=None):
        self.calls.append(("delete", resource.kind, name))
        store = {"Node": self.nodes, "Lease": self.leases}.get(resource.kind, self.policies)
        key = name if resource.kind in ("Node", "Lease") else resource.kind
        if key not in store:
            raise faults.NotFoundError("gone")
        del store[key]

    def create(self, resource, body):
        self.calls.append(("create", resource.kind, body["metadata"]["name"]))
        created = dict(body, status={"conditions": [{"type": "Ready", "status": "True"}]})  # kwok's Ready, no GPUs
        self.nodes[body["metadata"]["name"]] = created


def test_the_gpu_node_fault_refuses_any_cluster_but_the_embedded_one():
    with pytest.raises(faults.FaultError, match="validate_fault_gpu_node.kwok"):
        faults.fault("gpu_node", {}, Cluster(), Waiter())
    assert isinstance(faults.fault("gpu_node", {"kwok": True}, Cluster(), Waiter()), faults.GpuNode)


def test_the_gpu_node_running_most_pods_is_lost_silenced_and_joins_again_as_it_was():
    cluster = Cluster()
    node = faults.fault("gpu_node", {"kwok": True}, cluster, Waiter(), pod_selector="v=s", resources=["nvidia.com/gpu"])
    stopped = node.stop()
    # gpu-node-1 runs four of the six pods; the policy is in place before the node is reported not ready
    assert stopped["node"] == "gpu-node-1" and stopped["gpus"] == 8 and stopped["offered_before"] == 16
    assert stopped["pods"] == ["team-a/j-1-x", "team-a/j-3-x", "team-a/j-5-x", "team-a/j-6-x"][:len(stopped["pods"])]
    assert [c[:2] for c in cluster.calls[:4]] == [("apply", "ValidatingAdmissionPolicy"),
                                                  ("apply", "ValidatingAdmissionPolicyBinding"), ("apply", "Lease"),
                                                  ("patch", "Node/status")]
    assert cluster.leases["gpu-node-1"]["spec"]["holderIdentity"] == faults.LEASE_HOLDER
    ready = [c for c in cluster.nodes["gpu-node-1"]["status"]["conditions"] if c["type"] == "Ready"][0]
    assert (ready["status"], ready["reason"]) == ("False", "KubeletNotReady") and node.offered() == 8
    # the policy refuses what only the lost kubelet writes: its pods' Running and Succeeded
    expression = cluster.policies["ValidatingAdmissionPolicy"]["spec"]["validations"][0]["expression"]
    assert "'gpu-node-1'" in expression and "['Running', 'Succeeded']" in expression
    node.delete()
    assert "gpu-node-1" not in cluster.nodes
    back = node.start()
    assert back["gpus"] == 8 and cluster.policies == {} and "gpu-node-1" not in cluster.leases
    again = cluster.nodes["gpu-node-1"]
    # the node the lab made, without the controller's not-ready taint; its GPUs from the status patch
    assert again["metadata"]["labels"] == {"fairgpu.io/node-pool": "gpu"} and "uid" not in again["metadata"]
    assert again["spec"]["taints"] == [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}]
    assert again["status"]["allocatable"]["nvidia.com/gpu"] == "8" and node.offered() == 16


def test_a_gpu_node_that_was_not_deleted_is_handed_back_to_its_kubelet():
    cluster = Cluster()
    node = faults.GpuNode(cluster, Waiter(), "v=s", ["nvidia.com/gpu"])
    node.stop()
    cluster.nodes["gpu-node-1"]["status"]["conditions"] = [{"type": "Ready", "status": "True"}]  # kwok, once free
    node.start()
    assert ("create", "Node", "gpu-node-1") not in cluster.calls and "gpu-node-1" not in cluster.leases


def test_a_gpu_node_is_not_lost_when_no_pod_of_the_scenario_runs_on_one():
    cluster = Cluster()
    cluster.pods = []
    with pytest.raises(faults.FaultError, match="no pod of the scenario"):
        faults.GpuNode(cluster, Waiter(), "v=s", ["nvidia.com/gpu"]).stop()
    assert cluster.calls == [] and not faults.GpuNode.touched


def lost(**changes):
    """gpu_node_loss_result's arguments for a node lost with two pods of team-a and one of team-b, everything as it
    should be; ``changes`` replaces any of them."""
    jobs = [job("j-a-%d" % i) for i in range(8)] + [job("j-b-%d" % i) for i in range(8)]
    pods = [pod("j-a-%d" % i, "Succeeded") for i in range(8)] + [pod("j-b-%d" % i, "Succeeded") for i in range(8)]
    for p in pods:
        p["metadata"]["name"] = p["metadata"]["labels"]["job-name"] + "-new"
    values = dict(
        tenants=[A, B], fault={"how": "lost", "ts": 1000.0, "node": "gpu-node-1", "gpus": 8,
                               "pods": ["team-a/j-a-0-old", "team-a/j-a-1-old", "team-b/j-b-0-old"],
                               "offered_before": 16},
        tainted={"held": True, "seconds": 1.2, "taints": ["node.kubernetes.io/not-ready"]},
        deleted={"ts": 1020.0}, gone={"held": True, "seconds": 55.0, "left": []},
        back={"ready_seconds": 1.0, "gpus": 8},
        capacity_alert={"fired_ts": 1019.0, "offered": 8.0, "guaranteed": 16.0, "for": "15s"},
        before=[workload("j-a-0"), workload("j-a-1"), workload("j-b-0")],
        after=[workload("j-a-0", evictions=[("PodsReadyTimeout", "RecoveryTimeout", 1)]), workload("j-a-1"),
               workload("j-b-0")],
        jobs=jobs, pods=pods, finished={"elapsed": 70.0, "timeline": []}, guaranteed=16)
    values.update(changes)
    return values


def test_gpu_node_loss_passes_when_the_lost_jobs_ran_again_and_fails_each_way_a_cluster_can_break():
    good = scenarios.gpu_node_loss_result(**lost())
    assert failing(good) == [], good["checks"]
    assert good["metrics"]["gpus_offered_during"] == 8 and good["metrics"]["evicted_pods_ready_timeout"] == 1
    # the node lifecycle controller never tainted the node: the node was not seen lost
    assert failing(scenarios.gpu_node_loss_result(**lost(tainted={"held": False, "seconds": 120.0, "taints": []})))
    # a lost pod that completed all the same (the Job's only Succeeded pod is the lost one)
    args = lost()
    args["pods"][0]["metadata"]["name"] = "j-a-0-old"
    (check,) = failing(scenarios.gpu_node_loss_result(**args))
    assert check.startswith("every Job that lost its pod")
    # the lost pod counted as a failure (no podFailurePolicy): the Job failed
    args = lost()
    args["jobs"][1]["status"] = {"failed": 1}
    assert any(c.startswith("every Job that lost its pod") for c in failing(scenarios.gpu_node_loss_result(**args)))
    # deactivated after the requeuing limit: its Job stays suspended, lost
    args = lost(after=[workload("j-a-0", evictions=[("Deactivated", "RequeuingLimitExceeded", 1)]),
                       workload("j-a-1"), workload("j-b-0")])
    assert any(c.startswith("every Workload requeued") for c in failing(scenarios.gpu_node_loss_result(**args)))
    # the capacity alert never fired
    args = lost(capacity_alert={"fired_ts": None, "offered": 16.0, "guaranteed": 16.0, "for": "15s"})
    assert failing(scenarios.gpu_node_loss_result(**args)) == [
        "FairgpuGuaranteesOverCapacity fires while the node is away (guarantees above what the Ready nodes offer)"]
    # without Prometheus there is no alert to judge
    assert len(scenarios.gpu_node_loss_result(**lost(capacity_alert=None))["checks"]) == 5
