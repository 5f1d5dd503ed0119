"""Scenario judging and the report, on Kueue states shaped like the real ones; the validation_report module's entry
point as Ansible calls it."""

import json
import os

from ansible_collections.fairgpu.tenancy.plugins.modules import validation_report
from ansible_collections.fairgpu.tenancy.plugins.module_utils.validation.report import held_series, report_document, report_markdown
from ansible_collections.fairgpu.tenancy.plugins.module_utils.validation.scenarios import flood_result, load_jobs
from module_main import run_main

A = {"name": "team-a", "namespaces": ["team-a"], "gpu_resource": "nvidia.com/gpu", "gpus": 8, "borrowing_limit": 8,
     "lending_limit": 8, "max_gpus": 16, "weight": 1}
B = dict(A, name="team-b", namespaces=["team-b"])


def queues(a_reserved, a_borrowed, a_pending, b_reserved):
    return {"team-a": {"reserved": a_reserved, "borrowed": a_borrowed, "pending_workloads": a_pending,
                       "admitted_workloads": a_reserved, "nominal": 8},
            "team-b": {"reserved": b_reserved, "borrowed": 0, "pending_workloads": 0, "admitted_workloads": b_reserved,
                       "nominal": 8}}


def wl(name, ns, state="finished", preempted=False):
    conds = {"Finished": {"status": "True", "reason": "Succeeded"}}
    if preempted:  # as Kueue writes them while the preemption holds (kueue_status.preempted)
        conds["Preempted"] = {"status": "True", "reason": "InCohortReclamation"}
        conds["Evicted"] = {"status": "True", "reason": "Preempted"}
    return {"name": "job-" + name, "namespace": ns, "job": name, "state": state, "conditions": conds}


def job(name, succeeded=1):
    return {"metadata": {"name": name}, "status": {"succeeded": succeeded}}


def point(ts, a_reserved, a_running, b_reserved, b_running, orphans=()):
    """A sample as kueue_admission_info writes it with pods and gpu_pods: ``orphans``, the names of team-a's pods
    with no owner on the nodes (attribution.outside_kueue entries)."""
    return {"t": ts - 90.0, "ts": ts, "queues": {"team-a": {"reserved": a_reserved, "running": a_running},
                                                 "team-b": {"reserved": b_reserved, "running": b_running}},
            "outside_kueue": [{"namespace": "team-a", "pod": name, "uid": "uid-" + name, "node": "fairgpu-gpu-0",
                               "devices": {"nvidia.com/gpu": 1}, "tenant": True, "why": "no owner", "since": None}
                              for name in orphans]}


def scenario(preempted_with_event=True, ttg_ts=105.0, running_ts=130.0, lost=0, outside=None, orphaned=None):
    a_jobs = [j["name"] for j in load_jobs(A, 20, "flood", 30)]
    b_jobs = [j["name"] for j in load_jobs(B, 8, "flood", 30)]
    after = {"workloads": [wl(n, "team-a", preempted=i < 8) for i, n in enumerate(a_jobs)]}
    events = [{"reason": "Preempted", "involvedObject": {"kind": "Workload", "name": "job-" + n}}
              for n in a_jobs[:8 if preempted_with_event else 7]]
    # The arriver: reserved at ttg_ts (the preempted pods terminating), its pods Running once they are gone.
    arrived = [point(100.5, 16, 16, 0, 0), point(ttg_ts, 8, 8, 8, 0)]
    running = [point(running_ts, 8, 8, 8, 8)]
    if outside is not None:  # team-a's pods keep holding 16 GPUs, 8 of them outside Kueue's accounting
        running += [point(running_ts + s, 8, 16, 8, 8) for s in range(1, outside + 1)]
    if orphaned is not None:  # 2 pods of team-a, their Job deleted with --cascade=orphan, run on the nodes
        running += [point(running_ts + s, 8, 8, 8, 8, orphans=("orphan-0", "orphan-1")) for s in range(orphaned + 1)]
    return flood_result(
        "flood", A, B, 16, 16, 20,
        {"queues": queues(16, 8, 44, 0), "timeline": [point(90.0, 16, 16, 0, 0)]},
        {"jobs": [{"metadata": {"name": n}, "spec": {"suspend": True}} for n in a_jobs[16:]], "pods": []},
        100.0,
        {"queues": queues(8, 0, 12, 8), "elapsed": 4.0, "timeline": arrived},
        after, {"elapsed": 80.0, "timeline": []},
        [job(n) for n in a_jobs + b_jobs][lost:], events, 15.0, running={"timeline": running},
        running_bound_seconds=60, backlog=40)


def test_job_names_and_queue():
    jobs = load_jobs(A, 2, "flood_reverse", 30)
    assert [j["name"] for j in jobs] == ["fairgpu-val-flood-reverse-team-a-0", "fairgpu-val-flood-reverse-team-a-1"]
    assert jobs[0]["queue"] == "team-a-queue" and jobs[0]["gpus"] == 1


def test_a_good_flood_passes_and_measures_from_submission():
    result = scenario()
    assert all(c["passed"] for c in result["checks"]), [c for c in result["checks"] if not c["passed"]]
    assert result["metrics"]["time_to_guarantee_seconds"] == 5.0
    assert result["metrics"]["time_to_running_seconds"] == 30.0 and result["metrics"]["backlog_jobs"] == 40
    assert result["metrics"]["preemption_reasons"] == ["InCohortReclamation"]


def test_each_failure_is_caught():
    failed = {c["check"] for c in scenario(preempted_with_event=False)["checks"] if not c["passed"]}
    assert failed == {"preempted workloads without a Preempted Event"}
    failed = {c["check"] for c in scenario(ttg_ts=120.0)["checks"] if not c["passed"]}
    assert failed == {"time-to-guarantee of team-b, Kueue's reservation, within 15.0 s with 40 Jobs of team-a's "
                      "backlog queued"}
    failed = {c["check"] for c in scenario(running_ts=170.0)["checks"] if not c["passed"]}
    assert failed == {"time-to-guarantee of team-b, its pods started on 8 GPUs, within 60 s with 40 Jobs of "
                      "team-a's backlog queued"}
    failed = {c["check"] for c in scenario(lost=1)["checks"] if not c["passed"]}
    assert failed == {"every Job of both tenants succeeded (none lost)"}


def test_pods_outside_kueue_fail_the_flood_and_name_the_tenant_that_holds_them():
    # A preemption's pods may be seen Running for a moment after Kueue released them: within the grace, no failure.
    assert all(c["passed"] for c in scenario(outside=4)["checks"])
    result = scenario(outside=10)
    failed = [c for c in result["checks"] if not c["passed"]]
    assert [c["check"] for c in failed] == [
        "no tenant's Running pods hold more GPUs than Kueue reserved for it (flood)"]
    assert failed[0]["observed"].startswith("team-a: pods hold 16, Kueue reserved 8") and "team-b" not in failed[0]["observed"]


def test_orphaned_pods_on_the_nodes_fail_the_flood_and_are_named():
    # Within the grace (5 s here; a deleted Job's pods before the garbage collector marks them), no failure.
    assert all(c["passed"] for c in scenario(orphaned=4)["checks"])
    failed = [c for c in scenario(orphaned=7)["checks"] if not c["passed"]]
    assert [c["check"] for c in failed] == ["every GPU pod on the nodes belongs to an admitted Workload (flood)"]
    assert failed[0]["observed"] == ("team-a/orphan-0 on fairgpu-gpu-0 (1 nvidia.com/gpu): no owner, for 7.0 s "
                                     "(t=47.0 s); team-a/orphan-1 on fairgpu-gpu-0 (1 nvidia.com/gpu): no owner, "
                                     "for 7.0 s (t=47.0 s)")


def test_report_document_and_markdown():
    good, bad = scenario(), scenario(lost=2)
    bad["name"] = "flood_reverse"
    doc = report_document("embedded", [A, B], [good, bad], "2026-11-30T00:00:00Z")
    assert doc["passed"] is False
    assert doc["failed_checks"] == ["flood_reverse: every Job of both tenants succeeded (none lost) (expected 28, observed 26)"]
    md = report_markdown(doc, {"flood": "flood.png"})
    assert "Result: **FAILED**" in md and "![GPUs held per tenant: flood](flood.png)" in md
    assert "| team-a | team-a | nvidia.com/gpu | 8 | 8 | 8 | 16 | 1 |" in md
    assert report_document("x", [A], [], "t")["passed"] is False
    # A scenario that measured nothing (the noisy neighbour on simulated GPUs) passes nothing and fails nothing: its
    # section has its note and no table.
    quiet = {"name": "noisy_neighbour", "title": "Noisy neighbour: team-a beside team-b", "checks": [], "metrics": {},
             "notes": ["Not measured: the GPUs are simulated. Nothing here passes or fails."]}
    doc = report_document("embedded", [A, B], [good, quiet], "t")
    assert doc["passed"] is True and doc["failed_checks"] == []
    section = report_markdown(doc, {}).split("## Noisy neighbour: team-a beside team-b")[1]
    assert "- Not measured: the GPUs are simulated." in section and "| check |" not in section


def test_held_series_orders_and_dedups():
    timeline = [{"ts": 12.0, "queues": {"a": {"reserved": 2}}}, {"ts": 10.0, "queues": {"a": {"reserved": 1}}},
                {"ts": 12.0, "queues": {"a": {"reserved": 2}}}]
    assert held_series(timeline) == {"a": [(0.0, 1), (2.0, 2)]}


def test_a_guarantee_is_in_use_once_its_pods_started_even_if_the_first_finished():
    """What a CI run saw with 30 s Jobs: 7 of team-b's 8 pods Running at once, the eighth starting after the first
    Succeeded. The guarantee was put to work; the time counts from the sample where Running and Succeeded pods
    cover it (``started``)."""
    from ansible_collections.fairgpu.tenancy.plugins.module_utils.validation.scenarios import guarantee_times

    def point(ts, reserved, running, started):
        return {"ts": ts, "queues": {"team-b": {"reserved": reserved, "running": running, "started": started}}}

    timeline = [point(100.0, 8, 2, 2), point(118.7, 8, 7, 7), point(131.6, 6, 6, 8)]
    assert guarantee_times(timeline, "team-b", 8, 99.0) == (1.0, 32.6)
    # Samples of an older module without "started" still count Running pods.
    assert guarantee_times([{"ts": 105.0, "queues": {"team-b": {"reserved": 8, "running": 8}}}], "team-b", 8, 99.0) == (
        6.0, 6.0)


def module_args(path, **extra):
    return dict({"path": path, "cluster": "embedded", "tenants": [A, B], "scenarios": [scenario()]}, **extra)


def test_the_module_writes_the_report_and_a_plot_per_scenario_with_a_timeline(tmp_path, capsys):
    result = run_main(validation_report, module_args(str(tmp_path)), capsys)
    assert not result.get("failed"), result
    assert result["changed"] and result["passed"] and result["failed_checks"] == []
    assert sorted(os.listdir(tmp_path)) == ["flood.png", "report.json", "report.md"]
    assert result["images"] == {"flood": str(tmp_path / "flood.png")}
    with open(tmp_path / "flood.png", "rb") as handle:
        assert handle.read(8) == b"\x89PNG\r\n\x1a\n"
    with open(tmp_path / "report.json") as handle:
        assert json.load(handle)["scenarios"][0]["name"] == "flood"
    assert "flood.png" in (tmp_path / "report.md").read_text()


def test_the_module_in_check_mode_writes_nothing(tmp_path, capsys):
    result = run_main(validation_report, dict(module_args(str(tmp_path / "out")), _ansible_check_mode=True), capsys)
    assert not result["changed"] and result["images"] == {} and not os.path.exists(tmp_path / "out")
