"""The entry points of replay_plan and replay_report (issue 17), called as Ansible calls them: replay_plan on a
small CSV in the Alibaba v2023 columns and on a missing file; replay_report on the Workloads and Events of a tiny
replay, writing its JSON, Markdown and plots, and changing nothing in check mode."""

import csv
import json
import os

import pytest

from ansible_collections.fairgpu.tenancy.plugins.modules import replay_plan, replay_report
from module_main import run_main
from test_replay_report import JOBS, WORKLOADS, event, UID_A

COLUMNS = ["name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli", "gpu_spec", "qos", "pod_phase",
           "creation_time", "deletion_time", "scheduled_time"]
QUEUES = {"tenant-0": {"namespace": "tenant-0", "queue": "tenant-0-queue"},
          "tenant-1": {"namespace": "tenant-1", "queue": "tenant-1-queue"}}


def trace(tmp_path):
    path = tmp_path / "openb_pod_list_default.csv"
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(COLUMNS)
        for n in range(12):
            writer.writerow(["openb-pod-%04d" % n, 8000, 30000, 1 + n % 2, 1000, "", "LS", "Succeeded",
                             n * 600, n * 600 + 7200, n * 600 + 5])
    return str(path)


def test_replay_plan_reads_the_trace_and_plans_jobs(tmp_path, capsys):
    result = run_main(replay_plan, {"path": trace(tmp_path), "queues": QUEUES, "capacity": 8, "largest": 8,
                                    "tenants": 2, "window_seconds": 7200, "compression": 60, "floor": 30,
                                    "load_factor": 1.0, "prefix": "t"}, capsys)
    assert not result.get("failed"), result
    assert not result["changed"] and result["window"]["tasks"] == len(result["jobs"]) > 0
    assert set(j["tenant"] for j in result["jobs"]) <= set(QUEUES)
    assert all(j["seconds"] >= 30 and j["name"].startswith("t-") for j in result["jobs"])
    assert result["trace_cluster"] is None


def test_replay_plan_reports_the_trace_clusters_own_load_from_its_node_list(tmp_path, capsys):
    nodes = tmp_path / "openb_node_list_gpu_node.csv"
    nodes.write_text("sn,cpu_milli,memory_mib,gpu,model\nn-0,64000,262144,8,V100M32\nn-1,64000,262144,8,G2\n")
    args = {"path": trace(tmp_path), "queues": QUEUES, "capacity": 8, "largest": 8, "tenants": 2,
            "window_seconds": 7200, "compression": 60, "floor": 30, "load_factor": 1.0, "node_list": str(nodes)}
    result = run_main(replay_plan, args, capsys)
    own = result["trace_cluster"]
    # Tasks of 1 or 2 GPUs, one every 600 s, each running 7,195 s after waiting 5 s: the busiest 7,200 s hold 11.
    assert (own["nodes"], own["gpus"]) == (2, 16), own
    assert own["waits"] == {"count": 11, "p50": 5, "p95": 5, "max": 5, "never_scheduled": 0}, own
    assert own["load"] == pytest.approx(own["mean_demand"] / 16, abs=1e-4) and 0 < own["mean_demand"] < 18
    missing = run_main(replay_plan, dict(args, node_list=str(tmp_path / "none.csv")), capsys)
    assert missing["failed"] and missing["msg"].startswith("node_list: cannot read")


def test_replay_plan_names_the_setting_when_the_trace_is_missing(tmp_path, capsys):
    result = run_main(replay_plan, {"path": str(tmp_path / "none.csv"), "queues": QUEUES, "capacity": 8,
                                    "largest": 8, "tenants": 2, "window_seconds": 7200, "compression": 60,
                                    "floor": 30, "load_factor": 1.0}, capsys)
    assert result["failed"] and result["msg"].startswith("replay_trace_dir: cannot read")


def report_args(path):
    plan = {"jobs": JOBS, "capacity": 8, "compression": {"factor": 60, "floor": 25, "raised_to_floor": 0},
            "window": {"seconds": 600, "start": 0, "chosen": "given", "tasks": 3, "wall_seconds": 10},
            "scaling": {"load_factor": 1, "trace_time_load": 1, "factor": 1, "trace_mean_demand": 8,
                        "mean_demand": 8, "achieved_load": 1, "peak_demand": 12, "capped": 0, "thinned": 0},
            "adapter": {"rows": 3, "tasks": 3}, "assignment": {"by": "hash into 2"}}
    return {"path": path, "cluster": "c", "plan": plan, "submitted": {"created": 3, "existing": 0},
            "workloads": WORKLOADS, "tenants": {"a": {"weight": 1, "gpus": 4}, "b": {"weight": 1, "gpus": 4}},
            "events": [event(UID_A, "QuotaReserved", 1)], "guarantee_bound": 15,
            "kueue_metrics": {"finished": [{"metric": {"cluster_queue": "a"}, "value": [0, "1"]}]}}


def test_replay_report_writes_the_report_and_its_plots(tmp_path, capsys):
    result = run_main(replay_report, report_args(str(tmp_path)), capsys)
    assert not result.get("failed"), result
    # The first second both tenants waited with nothing admitted yet, the only contention of this tiny replay:
    # each held 0 GPUs against its guarantee of 4, and the share check says so, naming both.
    assert result["changed"] and not result["passed"]
    assert result["failed_checks"] == [
        "contended share within its tolerance of the fair reference (guarantee first, then by weight): 1.0 s of "
        "contention; a held 0.00 GPUs, reference 4.00 +- 1; b held 0.00 GPUs, reference 4.00 +- 1"]
    assert sorted(os.listdir(tmp_path)) == ["replay.json", "replay.md", "shares.png", "waits.png"]
    with open(tmp_path / "replay.json") as handle:
        written = json.load(handle)
    assert written["kueue_metrics"] == {"a": {"finished": 1.0}} and written["guarantee"]["passed"]
    page = (tmp_path / "replay.md").read_text()
    assert "## Time-to-guarantee" in page and "## What Kueue's metrics said" in page and "waits.png" in page


def test_replay_report_in_check_mode_writes_nothing(tmp_path, capsys):
    result = run_main(replay_report, dict(report_args(str(tmp_path / "out")), _ansible_check_mode=True), capsys)
    assert not result["changed"] and not os.path.exists(tmp_path / "out")
    assert result["plot"] is None and result["waits_plot"] is None
