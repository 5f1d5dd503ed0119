"""The dashboard, defined once and written in two formats: the shipped Grafana and Perses files are the builders'
output, the Grafana file keeps to Grafana's schema (the Foundation SDK's models decode every key of it), the Perses
file passes percli lint, their variables and panels are what the issues ask for, and every panel query is valid
PromQL (promtool parses it) over the label names fairgpu's scrapes give."""

import json
import os
import re
import subprocess

import pytest
import yaml

from ansible_collections.fairgpu.tenancy.plugins.module_utils.monitoring import dashboard

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
SHIPPED = os.path.join(ROOT, "files", "monitoring", "fairgpu-dashboard.json")
SHIPPED_PERSES = os.path.join(ROOT, "files", "monitoring", "fairgpu-dashboard.perses.json")


@pytest.mark.parametrize("path, text", [(SHIPPED, dashboard.grafana_json), (SHIPPED_PERSES, dashboard.perses_json)])
def test_shipped_files_are_the_builders_output(path, text):
    with open(path) as handle:
        assert handle.read() == text(), "%s is stale: write dashboard.%s() to it" % (path, text.__name__)


def grafana_schema_round_trip(board):
    """The dashboard decoded by the Foundation SDK's models (Grafana's schema, generated from Grafana's own kinds;
    panel options, field config and queries by the timeseries and prometheus plugins' models) and encoded again:
    what no model knows at its place is dropped on the way."""
    from grafana_foundation_sdk.cog.encoder import JSONEncoder
    from grafana_foundation_sdk.cog.plugins import register_default_plugins
    from grafana_foundation_sdk.models import dashboard as dashboard_models

    register_default_plugins()
    return json.loads(JSONEncoder(sort_keys=True).encode(dashboard_models.Dashboard.from_json(board)))


def test_the_grafana_file_keeps_to_grafanas_schema():
    with open(SHIPPED) as handle:
        board = json.load(handle)
    assert grafana_schema_round_trip(board) == board
    # The check fails on a key Grafana does not know at that place (a query's legend misspelt, a field option that
    # belongs to another panel type).
    wrong = json.loads(json.dumps(board))
    wrong["panels"][0]["targets"][0]["legend_format"] = wrong["panels"][0]["targets"][0].pop("legendFormat")
    wrong["panels"][1]["fieldConfig"]["defaults"]["custom"]["displayMode"] = "gradient-gauge"
    assert grafana_schema_round_trip(wrong) != wrong


def test_variables_and_datasources():
    board = dashboard.grafana_dashboard()
    assert board["schemaVersion"] == 41 and board["uid"] == "fairgpu-gpu-tenancy"
    variables = {v["name"]: v for v in board["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
    assert variables["tenant"]["multi"] and variables["tenant"]["includeAll"] and variables["tenant"]["allValue"] == ".+"
    # The tenants of the clusters chosen; the cluster variable comes first, All matching series without the label too.
    assert variables["tenant"]["query"] == 'label_values(kueue_cluster_queue_nominal_quota{cluster=~"$cluster"}, cluster_queue)'
    assert [v["name"] for v in board["templating"]["list"]] == ["datasource", "cluster", "tenant"]
    assert variables["cluster"]["multi"] and variables["cluster"]["includeAll"] and variables["cluster"]["allValue"] == ".*"
    assert variables["cluster"]["query"] == "label_values(kueue_cluster_queue_nominal_quota, cluster)"
    for panel in board["panels"]:
        assert panel["datasource"]["uid"] == "${datasource}"
        assert all(t["datasource"]["uid"] == "${datasource}" for t in panel["targets"])
    ids = [p["id"] for p in board["panels"]]
    assert len(set(ids)) == len(ids)


def test_panels_cover_the_issue():
    titles = " | ".join(p["title"] for p in dashboard.panels())
    for wanted in ("GPU memory per pod and device", "GPU utilisation per GPU and MIG device, with its pod", "per job",
                   "GPUs held vs guaranteed per tenant", "Pending workloads", "Admissions", "Preemptions", "Evictions",
                   "Over-guarantee alert per tenant", "GPUs outside Kueue per tenant",
                   "GPU capacity: guaranteed vs offered by Ready nodes"):
        assert wanted in titles
    exprs = " ".join(e for _t, _r, e in dashboard.queries())
    for metric in ("DCGM_FI_DEV_FB_USED", "fairgpu:gpu_utilisation:ratio", "kueue_cluster_queue_resource_reservation",
                   "kueue_cluster_queue_nominal_quota", "kueue_pending_workloads", "kueue_admitted_workloads_total",
                   "kueue_preempted_workloads_total", "kueue_evicted_workloads_total", "fairgpu:gpu_allocatable_ready:sum",
                   'ALERTS{alertname="FairgpuTenantOverGuarantee"'):
        assert metric in exprs
    # Each device's memory and utilisation name the pod bound to it (the task: each pod on its own GPU or MIG device).
    by_title = {p["title"]: p["targets"][0] for p in dashboard.panels()}
    for title in ("GPU memory per pod and device (MiB)", "GPU utilisation per GPU and MIG device, with its pod"):
        target = by_title[title]
        assert all(label in target["expr"] for label in ("Hostname", "gpu", "GPU_I_ID", "exported_pod")), title
        assert "{{GPU_I_ID}}" in target["legend"] and "pod" in target["legend"].replace("bound_to", "pod"), title
    # DCGM's pod labels as scraped with honor_labels false; never the exporter's own namespace.
    assert "exported_pod" in exprs and not re.search(r"[{,(]\s*namespace\s*[=!~,)]", exprs)


def test_every_panel_keeps_the_clusters_apart():
    """One Prometheus may hold several clusters' series (a MultiKueue manager's federation): every selector of every
    query is filtered by the cluster variable, every aggregation and vector match keeps ``cluster``, and every legend
    names it first, so two clusters' series (the same ClusterQueue names) are never summed into one line."""
    for title, _ref, expr in dashboard.queries():
        selectors = re.findall(r"\{[^}]*\}", expr)
        assert selectors and all('cluster=~"$cluster"' in sel for sel in selectors), (title, expr)
        # No series read without a selector (a metric name not followed by its matchers).
        metrics = re.findall(r"\b(?:kueue_|DCGM_|fairgpu:|ALERTS)[A-Za-z0-9_:]*(.?)", expr)
        assert metrics and all(after == "{" for after in metrics), (title, expr)
        for grouping in re.findall(r"\b(?:by|on)\s*\(([^)]*)\)", expr):
            assert "cluster" in [n.strip() for n in grouping.split(",")], (title, grouping)
    for panel in dashboard.panels():
        assert all(t["legend"].startswith("{{cluster}} ") for t in panel["targets"]), panel["title"]
    assert dashboard.direct_query('x{cluster=~"$cluster"}') == 'x{cluster=~".*"}'


def test_direct_query_replaces_grafana_variables_only():
    expr = 'label_replace(x{cluster_queue=~"$tenant"}[$__rate_interval], "j", "$1", "p", "(.+)-[^-]+")'
    assert dashboard.direct_query(expr) == 'label_replace(x{cluster_queue=~".+"}[1m], "j", "$1", "p", "(.+)-[^-]+")'
    with pytest.raises(KeyError):
        dashboard.direct_query("x[$unknown]")


def built_binary(component, binary):
    """The toolchain's ``binary`` of ``component`` where it is built (toolchain.sh manifest), else None."""
    out = subprocess.run(["bash", os.path.join(ROOT, "files", "lab", "toolchain", "toolchain.sh"), "manifest", component],
                         check=False, capture_output=True, text=True)
    path = json.loads(out.stdout)["binaries"][binary]
    return path if out.returncode == 0 and os.path.exists(path) else None


def promtool():
    return built_binary("prometheus", "promtool")


def test_every_panel_query_is_valid_promql(tmp_path):
    tool = promtool()
    if tool is None:
        pytest.skip("promtool is not built yet (make toolchain)")
    rules = {"groups": [{"name": "dashboard", "rules": [
        {"record": "fairgpu:panel_%d" % i, "expr": dashboard.direct_query(expr)}
        for i, (_t, _r, expr) in enumerate(dashboard.queries())]}]}
    path = tmp_path / "panels.yml"
    path.write_text(yaml.safe_dump(rules))
    result = subprocess.run([tool, "check", "rules", str(path)], check=False, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_utilisation_panels_fall_back_to_gpu_util_through_the_recording_rule():
    # Profiling metrics are missing on many nodes (NVIDIA/dcgm-exporter#395, #439, #707): no panel may read
    # DCGM_FI_PROF_GR_ENGINE_ACTIVE alone; the recording rule that chooses per GPU is in the shipped rule file
    # (promtool tests with, without and mixed profiling metrics: tests/rules/fairgpu-alerts.test.yml).
    util = [(t, e) for t, _r, e in dashboard.queries() if "utilisation" in t]
    assert len(util) == 2 and all(dashboard.UTILISATION in e and "DCGM_FI_PROF" not in e for _t, e in util)
    with open(os.path.join(ROOT, "files", "monitoring", "fairgpu-alerts.rules.yml")) as handle:
        groups = yaml.safe_load(handle)["groups"]
    record = [r for g in groups for r in g["rules"] if r.get("record") == dashboard.UTILISATION]
    assert len(record) == 1
    expr = " ".join(record[0]["expr"].split())
    assert expr == "DCGM_FI_PROF_GR_ENGINE_ACTIVE or on (cluster, UUID) DCGM_FI_DEV_GPU_UTIL / 100"


def test_both_formats_carry_the_same_panels_queries_units_and_places():
    grafana = dashboard.grafana_dashboard()
    perses = dashboard.perses_dashboard()
    spec = perses["spec"]
    places = {item["content"]["$ref"].rsplit("/", 1)[1]: item for item in spec["layouts"][0]["spec"]["items"]}
    assert len(grafana["panels"]) == len(spec["panels"]) == len(places) == len(dashboard.panels())
    for panel in grafana["panels"]:
        key = "panel%d" % panel["id"]
        chart = spec["panels"][key]["spec"]
        assert chart["display"]["name"] == panel["title"]
        assert [(q["spec"]["plugin"]["spec"]["query"], q["spec"]["plugin"]["spec"]["seriesNameFormat"])
                for q in chart["queries"]] == [(t["expr"], t["legendFormat"]) for t in panel["targets"]]
        unit = [u for u, (g, _p) in dashboard.UNITS.items() if g == panel["fieldConfig"]["defaults"]["unit"]]
        assert chart["plugin"]["spec"]["yAxis"]["format"]["unit"] == dashboard.UNITS[unit[0]][1]
        assert (places[key]["x"], places[key]["y"], places[key]["width"], places[key]["height"]) == (
            panel["gridPos"]["x"], panel["gridPos"]["y"], panel["gridPos"]["w"], panel["gridPos"]["h"])
    cluster, tenant = (v["spec"] for v in spec["variables"])
    assert (cluster["name"], cluster["allowMultiple"], cluster["allowAllValue"], cluster["customAllValue"]) == (
        "cluster", True, True, ".*")
    assert cluster["plugin"]["spec"] == {"labelName": "cluster", "matchers": ["kueue_cluster_queue_nominal_quota"]}
    assert (tenant["name"], tenant["allowMultiple"], tenant["allowAllValue"], tenant["customAllValue"]) == (
        "tenant", True, True, ".+")
    assert tenant["plugin"]["spec"] == {"labelName": "cluster_queue",
                                        "matchers": ['kueue_cluster_queue_nominal_quota{cluster=~"$cluster"}']}
    # The file names no datasource: a Perses instance's default Prometheus serves it (the page gives its run's).
    assert "datasources" not in spec


def test_a_unit_the_formats_cannot_show_is_refused():
    with pytest.raises(ValueError, match="unit 'GiB' is none of"):
        dashboard._panel(99, "x", "x", "GiB", [("up", "{{job}}")], 0, 0)


def percli():
    path = built_binary("perses", "percli")
    if path:
        return path
    if os.environ.get("FAIRGPU_MAKE_TEST") is not None:
        pytest.fail("make test builds percli first (make toolchain-perses), but the toolchain has none")
    pytest.skip("percli is not built yet (make toolchain-perses)")


def test_the_perses_file_passes_percli_lint(tmp_path):
    tool = percli()
    lint = subprocess.run([tool, "lint", "-f", SHIPPED_PERSES], check=False, capture_output=True, text=True)
    assert lint.returncode == 0, lint.stdout + lint.stderr
    # The lint fails a layout that places a panel the dashboard does not have.
    wrong = dashboard.perses_dashboard()
    wrong["spec"]["layouts"][0]["spec"]["items"][0]["content"]["$ref"] = "#/spec/panels/panel99"
    path = tmp_path / "wrong.json"
    path.write_text(json.dumps(wrong))
    lint = subprocess.run([tool, "lint", "-f", str(path)], check=False, capture_output=True, text=True)
    assert lint.returncode != 0 and "panel99" in lint.stdout + lint.stderr
