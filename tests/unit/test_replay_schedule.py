"""The replay's schedule (issue 17): scaling to a load factor, tenants to their LocalQueues, the Jobs and when
each is due, the whole plan from the real trace, and the module that submits on a clock."""

import csv
import os

import pytest

from ansible_collections.fairgpu.tenancy.plugins.module_utils.replay import schedule, trace

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TRACE_DIR = os.environ.get("FAIRGPU_TRACE_DIR", os.path.join(ROOT, "..", "shared", "traces"))
POD_LIST = os.path.join(TRACE_DIR, "alibaba-gpu-v2023", "openb_pod_list_default.csv")
QUEUES = dict(("tenant-%d" % n, {"namespace": "tenant-%d" % n, "queue": "tenant-%d-queue" % n}) for n in range(3))


def task(name, submit, start, end, gpus=1, tenant="tenant-0"):
    return {"name": name, "submit": submit, "start": start, "end": end, "gpus": gpus, "tenant": tenant}


def test_scaling_up_multiplies_gpus_and_caps_at_a_node():
    tasks = [task("a", 0, 0, 100, gpus=2), task("b", 0, 0, 100, gpus=4)]   # mean demand 6 over 100 s
    scaled, facts = schedule.scale_to_load(tasks, capacity=8, load_factor=1.5, length=100, largest=8)
    assert [t["gpus"] for t in scaled] == [4, 8]                            # factor 2
    assert facts["factor"] == 2 and facts["achieved_load"] == 1.5 and facts["capped"] == 0
    scaled, facts = schedule.scale_to_load(tasks, capacity=8, load_factor=3, length=100, largest=8)
    assert [t["gpus"] for t in scaled] == [8, 8] and facts["capped"] == 1
    assert [t["trace_gpus"] for t in scaled] == [2, 4]


def test_scaling_down_thins_tasks_stably_since_one_gpu_cannot_shrink():
    tasks = [task("t%03d" % n, n, n, n + 10) for n in range(400)]           # mean demand 10 over 400 s
    scaled, facts = schedule.scale_to_load(tasks, capacity=10, load_factor=0.5, length=400, largest=8)
    assert all(t["gpus"] == 1 for t in scaled)
    assert facts["thinned"] == 400 - len(scaled) and 0.4 < facts["achieved_load"] < 0.6, facts
    again, _facts = schedule.scale_to_load(tasks, capacity=10, load_factor=0.5, length=400, largest=8)
    assert [t["name"] for t in again] == [t["name"] for t in scaled], "the same tasks on every run"


def test_scaling_refuses_bad_input_naming_the_setting():
    with pytest.raises(schedule.ScheduleError, match="replay_load_factor: must be above 0"):
        schedule.scale_to_load([task("a", 0, 0, 1)], 8, 0, 1, 8)
    with pytest.raises(schedule.ScheduleError, match="no GPU capacity"):
        schedule.scale_to_load([task("a", 0, 0, 1)], 0, 1, 1, 8)


def test_submissions_in_submit_order_with_run_times_and_queues():
    tasks = [task("late", 50, 60, 90, tenant="tenant-1"), task("early", 5, 5, 40, gpus=2)]
    jobs = schedule.submissions(tasks, QUEUES, "r")
    assert jobs == [
        {"name": "r-0000", "namespace": "tenant-0", "queue": "tenant-0-queue", "tenant": "tenant-0", "gpus": 2,
         "seconds": 35, "at": 5, "trace_name": "early"},
        {"name": "r-0001", "namespace": "tenant-1", "queue": "tenant-1-queue", "tenant": "tenant-1", "gpus": 1,
         "seconds": 30, "at": 50, "trace_name": "late"}]


def test_a_tenant_without_a_queue_is_named_with_the_fix():
    with pytest.raises(schedule.ScheduleError, match="tenant-7 have no LocalQueue; add them to tenants_list"):
        schedule.submissions([task("x", 0, 0, 1, tenant="tenant-7")], QUEUES, "r")


def test_job_manifest_is_suspended_queued_and_timed_by_kwok():
    job = schedule.submissions([task("early", 5, 5, 40, gpus=2)], QUEUES, "r")[0]
    manifest = schedule.job_manifest(job, "run-1", "busybox:1.37", simulated=True)
    assert manifest["spec"]["suspend"] is True
    assert manifest["metadata"]["labels"] == {"kueue.x-k8s.io/queue-name": "tenant-0-queue",
                                              "fairgpu.io/replay": "run-1", "fairgpu.io/tenant": "tenant-0"}
    pod = manifest["spec"]["template"]
    assert pod["metadata"]["annotations"]["pod-complete.stage.kwok.x-k8s.io/delay"] == "35s"
    assert pod["metadata"]["annotations"]["pod-complete.stage.kwok.x-k8s.io/jitter-delay"] == "35s"
    container = pod["spec"]["containers"][0]
    assert container["resources"]["requests"]["nvidia.com/gpu"] == "2"
    assert container["command"] == ["sleep", "35"]
    real = schedule.job_manifest(job, "run-1", "busybox:1.37", simulated=False)
    assert not any(k.startswith("pod-complete") for k in real["spec"]["template"]["metadata"]["annotations"])


def test_due_gives_the_jobs_whose_time_came_and_the_wait_for_the_next():
    jobs = [{"at": 0}, {"at": 0}, {"at": 5}, {"at": 9}]
    assert schedule.due(jobs, 0.2, 0) == ([{"at": 0}, {"at": 0}], 4.8)
    assert schedule.due(jobs, 6, 2) == ([{"at": 5}], 3)
    assert schedule.due(jobs, 20, 3) == ([{"at": 9}], None)
    assert schedule.due(jobs, 20, 4) == ([], None)


def test_lateness():
    assert schedule.lateness([{"late": 0.5}, {"late": 1.5}]) == {"count": 2, "max": 1.5, "mean": 1.0}
    assert schedule.lateness([]) == {"count": 0, "max": 0.0, "mean": 0.0}


def test_tenant_queues_from_the_tenants_plan():
    tenants = [{"name": "a", "namespaces": ["a-ns", "a-2"], "weight": 2, "gpus": 4, "max_jobs": 100}]
    assert schedule.tenant_queues(tenants, "-queue") == {
        "a": {"namespace": "a-ns", "queue": "a-queue", "weight": 2, "gpus": 4, "borrowing_limit": None,
              "lending_limit": None, "max_jobs": 100, "cluster_queue": "a", "admission_fair_sharing": False}}


def test_namespace_groups_share_their_tenants_cluster_queue():
    tenants = [{"name": "shared", "namespaces": ["tenant-0", "tenant-1"], "weight": 1, "gpus": 16, "max_jobs": 400,
                "admission_fair_sharing": True, "local_queue_weights": {"tenant-0": 2}}]
    assert schedule.tenant_queues(tenants, "-queue", "namespaces") == {
        "tenant-0": {"namespace": "tenant-0", "queue": "shared-queue", "weight": 2, "gpus": 0, "borrowing_limit": None,
                     "lending_limit": None, "max_jobs": 400, "cluster_queue": "shared", "admission_fair_sharing": True,
                     "cluster_queue_gpus": 16},
        "tenant-1": {"namespace": "tenant-1", "queue": "shared-queue", "weight": 1, "gpus": 0, "borrowing_limit": None,
                     "lending_limit": None, "max_jobs": 400, "cluster_queue": "shared", "admission_fair_sharing": True,
                     "cluster_queue_gpus": 16}}
    with pytest.raises(schedule.ScheduleError, match="replay_groups: 'users' is not tenants or namespaces"):
        schedule.tenant_queues(tenants, "-queue", "users")


def test_a_floor_below_the_pod_start_delay_is_refused():
    with pytest.raises(schedule.ScheduleError, match="replay_run_floor: 10 s is not well above"):
        schedule.plan([], QUEUES, 16, 8, 3600, 60, 10, 1.0, tenants=3)


@pytest.mark.skipif(not os.path.exists(POD_LIST), reason="the trace is not here (FAIRGPU_TRACE_DIR)")
def test_plan_of_the_real_trace_busiest_six_hours():
    with open(POD_LIST) as handle:
        rows = list(csv.DictReader(handle))
    result = schedule.plan(rows, QUEUES, 16, 8, 21600, 180, 25, 1.3, tenants=3)
    jobs = result["jobs"]
    assert result["window"]["chosen"] == "busiest" and result["window"]["wall_seconds"] == 120
    assert result["adapter"]["no_gpu"] == 1088 and result["adapter"]["never_scheduled"] == 861
    assert all(j["seconds"] >= 25 for j in jobs) and [j["at"] for j in jobs] == sorted(j["at"] for j in jobs)
    assert set(j["tenant"] for j in jobs) == set(QUEUES)
    assert abs(result["scaling"]["achieved_load"] - 1.3) < 0.3, result["scaling"]
    assert result["scaling"]["thinned"] + len(jobs) == 94                 # the window's own tasks
    assert sum(v["jobs"] for v in result["assignment"]["replayed"].values()) == len(jobs)
    assert result["assignment"]["by"] == "hash into 3"


def test_plan_refuses_an_empty_window():
    rows = [{"name": "a", "cpu_milli": "1000", "memory_mib": "1024", "num_gpu": "1", "gpu_milli": "1000",
             "gpu_spec": "", "qos": "LS", "pod_phase": "Succeeded", "creation_time": "0", "deletion_time": "100",
             "scheduled_time": "0"}]
    with pytest.raises(schedule.ScheduleError, match="replay_window_start/replay_window_seconds: no task"):
        schedule.plan(rows, QUEUES, 16, 8, 50, 1, 30, 1, tenants=3, window_start=500)
    assert trace.TraceError  # the trace's own errors pass through plan unchanged
