"""The fault scenarios (issue 27; docs/failures.md): the hands that take Kueue down and bring it back
(plugins/module_utils/validation/faults.py, on a real process of local_service), the kueue_restart scenario's
judges (validation/scenarios.py), FairgpuKueueDown's check and Kueue's noise (monitoring/checks.py). Each judge is
shown failing on what a wrong cluster would do: a double admission, a tenant above its reach, a Job run twice, a
Job created unsuspended while Kueue was down, an alert that fired inside its for:."""

import os
import signal
import subprocess
import sys
import time

import pytest

from ansible_collections.fairgpu.tenancy.plugins.module_utils.common.waiter import Waiter
from ansible_collections.fairgpu.tenancy.plugins.module_utils.lab import service as lab
from ansible_collections.fairgpu.tenancy.plugins.module_utils.monitoring import checks
from ansible_collections.fairgpu.tenancy.plugins.module_utils.validation import faults, scenarios

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


def workload(name, uid="u1", conditions=()):
    return {"metadata": {"name": name, "uid": uid},
            "status": {"conditions": [dict(type=t, status=s, reason=r, lastTransitionTime=ts)
                                      for t, s, r, ts in conditions]}}


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


def control_plane(after=None, events=(), jobs=None, running_ts=2020, reserved_ts=2004):
    before = [workload("a1", conditions=ADMITTED)]
    arrived = {"timeline": [point(2000, 8, 0), point(reserved_ts, 8, 8)]}
    running = {"timeline": [point(running_ts, 8, 8)]}
    finished = {"timeline": [point(2030, 8, 8)], "elapsed": 60.0}
    jobs = jobs if jobs is not None else [job("j%d" % i) for i in range(24)]
    return scenarios.control_plane_restart_result(
        A, B, REACH, 16, {"how": "killed", "ts": 1900.0}, {"ts": 1990.0, "ready_seconds": 3.1}, before,
        before if after is None else after, 2000.0, arrived, running, finished, jobs, [], list(events), 15.0, 10.0,
        running_bound_seconds=60)


def test_control_plane_restart_passes_when_admissions_survive_and_fails_each_way_a_cluster_can_break():
    res = control_plane()
    assert all(checks_of(res).values()), res["checks"]
    assert res["metrics"]["down_seconds"] == 90.0 and res["metrics"]["time_to_guarantee_seconds"] == 4.0
    lost = checks_of(control_plane(after=[]))
    assert not lost["every Workload survives the outage, each admission with its conditions unchanged"]
    evicted = control_plane(events=[{"reason": "NodeNotReady", "involvedObject": {"name": "j1-x"}}])
    failed = [c for c in evicted["checks"] if not c["passed"]]
    assert [c["observed"] for c in failed] == [["NodeNotReady j1-x"]]
    assert not checks_of(control_plane(jobs=[job("j%d" % i) for i in range(23)]))[
        "every Job of both tenants succeeded (none lost)"]
    # Bounds: the scenario's own plus the controllers' relist backoff after an outage (60 s).
    assert all(checks_of(control_plane(reserved_ts=2075, running_ts=2120)).values())
    slow = checks_of(control_plane(reserved_ts=2076, running_ts=2121))
    assert [name for name, passed in slow.items() if not passed] == [
        "time-to-guarantee of team-b after the API server is back, Kueue's reservation, within 75.0 s (15.0 s and "
        "the controllers' relist backoff, 60 s)",
        "team-b's pods run on its guarantee after the API server is back (scheduled, started), within 120 s (60 s "
        "and the relist backoff)"]


@pytest.fixture
def kwok_cluster(tmp_path):
    """A stand-in of kwokctl's binary runtime on real processes: bin/etcd and bin/kube-apiserver are sleep(1)
    under those names, pids/<component>.pid as kwokctl's ForkExec writes them, and a kwokctl script whose start
    starts only the components that are not running, as kwokctl's startComponent does."""
    cluster = tmp_path / "clusters" / "c1"
    (cluster / "bin").mkdir(parents=True)
    (cluster / "pids").mkdir()
    sleep = "/bin/sleep" if os.path.exists("/bin/sleep") else "/usr/bin/sleep"
    for component in ("etcd", "kube-apiserver"):
        os.symlink(sleep, str(cluster / "bin" / component))
    kwokctl = tmp_path / "kwokctl"
    kwokctl.write_text("#!/bin/bash\n[ \"$1 $2 $3\" = 'start cluster --name=c1' ] || exit 9\n"
                       "for c in etcd kube-apiserver; do pid=$KWOK_WORKDIR/clusters/c1/pids/$c.pid\n"
                       "  kill -0 \"$(cat $pid 2>/dev/null)\" 2>/dev/null && continue\n"
                       "  setsid $KWOK_WORKDIR/clusters/c1/bin/$c 600 </dev/null >/dev/null 2>&1 & echo $! > $pid\n"
                       "done\n")
    kwokctl.chmod(0o755)
    started = subprocess.run([str(kwokctl), "start", "cluster", "--name=c1"], env=dict(os.environ, KWOK_WORKDIR=str(tmp_path)),
                             check=False)
    assert started.returncode == 0
    for component in ("etcd", "kube-apiserver"):  # until the shell has become the program (exec)
        held, _pid, _elapsed = Waiter().wait(lambda: lab.running_pid(str(cluster / "pids" / (component + ".pid")), [
            str(cluster / "bin" / component)])[0], 5, 0.05)
        assert held
    yield kwokctl, tmp_path, cluster
    for component in ("etcd", "kube-apiserver"):
        pid = lab.read_pid(str(cluster / "pids" / (component + ".pid")))
        if pid and lab.alive(pid):
            os.kill(pid, signal.SIGKILL)


def test_the_control_plane_is_killed_and_started_again_by_kwokctl(kwok_cluster):
    kwokctl, workdir, cluster = kwok_cluster
    before = dict((c, lab.read_pid(str(cluster / "pids" / (c + ".pid")))) for c in ("etcd", "kube-apiserver"))
    fault = faults.fault("control_plane", {"kwokctl": {"binary": str(kwokctl), "workdir": str(workdir),
                                                       "cluster": "c1"}}, None, Waiter())
    fault.ready = lambda: True
    stopped = fault.stop()
    assert stopped["pids"] == before and not any(lab.alive(p) for p in before.values())
    back = fault.start()
    after = dict((c, lab.read_pid(str(cluster / "pids" / (c + ".pid")))) for c in ("etcd", "kube-apiserver"))
    assert back["ready_seconds"] >= 0 and all(lab.alive(p) and p not in before.values() for p in after.values())
    with pytest.raises(faults.FaultError, match="a cluster fairgpu did not make is not its to restart"):
        faults.fault("control_plane", {}, None, Waiter())
