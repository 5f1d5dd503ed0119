"""The Grafana dashboard: the shipped JSON is the builder's output, its variables and panels are what the issue
asks for, and every panel query is valid PromQL (promtool parses it) over the label names fairgpu's scrapes give."""

import json
import os
import re
import subprocess

import pytest
import yaml

from ansible_collections.fairgpu.tenancy.plugins.module_utils.monitoring import dashboard

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
SHIPPED = os.path.join(ROOT, "files", "monitoring", "fairgpu-dashboard.json")


def test_shipped_json_is_the_builders_output():
    with open(SHIPPED) as handle:
        assert handle.read() == dashboard.dashboard_json(), (
            "files/monitoring/fairgpu-dashboard.json is stale: write dashboard.dashboard_json() to it")


def test_variables_and_datasources():
    board = dashboard.dashboard()
    assert board["schemaVersion"] == 42 and board["uid"] == "fairgpu-gpu-tenancy"
    variables = {v["name"]: v for v in board["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
    assert variables["tenant"]["multi"] and variables["tenant"]["includeAll"] and variables["tenant"]["allValue"] == ".+"
    assert "cluster_queue" in variables["tenant"]["definition"]
    for panel in board["panels"]:
        assert panel["datasource"]["uid"] == "${datasource}"
        assert all(t["datasource"]["uid"] == "${datasource}" for t in panel["targets"])
    ids = [p["id"] for p in board["panels"]]
    assert len(set(ids)) == len(ids)


def test_panels_cover_the_issue():
    titles = " | ".join(p["title"] for p in dashboard.dashboard()["panels"])
    for wanted in ("GPU memory per pod", "MIG slice", "per job", "GPUs held vs guaranteed per tenant",
                   "Pending workloads", "Admissions", "Preemptions", "Evictions", "GPUs outside Kueue per tenant",
                   "GPU capacity: guaranteed vs offered by Ready nodes"):
        assert wanted in titles
    exprs = " ".join(e for _t, _r, e in dashboard.queries(dashboard.dashboard()))
    for metric in ("DCGM_FI_DEV_FB_USED", "fairgpu:gpu_utilisation:ratio", "kueue_cluster_queue_resource_reservation",
                   "kueue_cluster_queue_nominal_quota", "kueue_pending_workloads", "kueue_admitted_workloads_total",
                   "kueue_preempted_workloads_total", "kueue_evicted_workloads_total", "fairgpu:gpu_allocatable_ready:sum"):
        assert metric in exprs
    # DCGM's pod labels as scraped with honor_labels false; never the exporter's own namespace.
    assert "exported_pod" in exprs and not re.search(r"[{,(]\s*namespace\s*[=!~,)]", exprs)


def test_direct_query_replaces_grafana_variables_only():
    expr = 'label_replace(x{cluster_queue=~"$tenant"}[$__rate_interval], "j", "$1", "p", "(.+)-[^-]+")'
    assert dashboard.direct_query(expr) == 'label_replace(x{cluster_queue=~".+"}[1m], "j", "$1", "p", "(.+)-[^-]+")'
    with pytest.raises(KeyError):
        dashboard.direct_query("x[$unknown]")


def promtool():
    out = subprocess.run(["bash", os.path.join(ROOT, "files", "lab", "toolchain", "toolchain.sh"), "manifest", "prometheus"],
                         check=False, capture_output=True, text=True)
    path = json.loads(out.stdout)["binaries"]["promtool"]
    return path if out.returncode == 0 and os.path.exists(path) else None


def test_every_panel_query_is_valid_promql(tmp_path):
    tool = promtool()
    if tool is None:
        pytest.skip("promtool is not built yet (make toolchain)")
    rules = {"groups": [{"name": "dashboard", "rules": [
        {"record": "fairgpu:panel_%d" % i, "expr": dashboard.direct_query(expr)}
        for i, (_t, _r, expr) in enumerate(dashboard.queries(dashboard.dashboard()))]}]}
    path = tmp_path / "panels.yml"
    path.write_text(yaml.safe_dump(rules))
    result = subprocess.run([tool, "check", "rules", str(path)], check=False, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_utilisation_panels_fall_back_to_gpu_util_through_the_recording_rule():
    # Profiling metrics are missing on many nodes (NVIDIA/dcgm-exporter#395, #439, #707): no panel may read
    # DCGM_FI_PROF_GR_ENGINE_ACTIVE alone; the recording rule that chooses per GPU is in the shipped rule file
    # (promtool tests with, without and mixed profiling metrics: tests/rules/fairgpu-alerts.test.yml).
    util = [(t, e) for t, _r, e in dashboard.queries(dashboard.dashboard()) if "utilisation" in t]
    assert len(util) == 2 and all(dashboard.UTILISATION in e and "DCGM_FI_PROF" not in e for _t, e in util)
    with open(os.path.join(ROOT, "files", "monitoring", "fairgpu-alerts.rules.yml")) as handle:
        groups = yaml.safe_load(handle)["groups"]
    record = [r for g in groups for r in g["rules"] if r.get("record") == dashboard.UTILISATION]
    assert len(record) == 1
    expr = " ".join(record[0]["expr"].split())
    assert expr == "DCGM_FI_PROF_GR_ENGINE_ACTIVE or on (UUID) DCGM_FI_DEV_GPU_UTIL / 100"
