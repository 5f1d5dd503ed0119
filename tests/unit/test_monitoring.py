"""The monitoring role's pure logic: for: overrides of the shipped rule file, the local Prometheus configuration,
the kube-prometheus-stack objects (helm mode, rendered only), and the judging of the live alert check."""

import os
import re

import pytest
import yaml

from ansible_collections.fairgpu.tenancy.plugins.module_utils.monitoring import objects as monitoring
from ansible_collections.fairgpu.tenancy.plugins.module_utils.monitoring import checks as monitoring_checks

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
with open(os.path.join(ROOT, "files", "monitoring", "fairgpu-alerts.rules.yml")) as _handle:
    RULES = _handle.read()
TENANTS = [{"name": "team-a", "namespaces": ["team-a", "team-a-dev"], "gpus": 8},
           {"name": "team-b", "namespaces": ["team-b"], "gpus": 8}]


def test_shipped_rules_say_five_minutes_for_the_over_guarantee_alert():
    assert monitoring.alerts(RULES) == {"FairgpuTenantOverGuarantee": "5m", "FairgpuTenantStarved": "5m",
                                        "FairgpuTenantGpusOutsideKueue": "2m", "FairgpuPodGpuMemoryHigh": "10m",
                                        "FairgpuGpuPodOutsideTenants": "30s", "FairgpuKueueDown": "5m",
                                        "FairgpuGuaranteesOverCapacity": "2m"}
    for group in yaml.safe_load(RULES)["groups"]:
        for rule in group["rules"]:
            if "record" in rule:
                continue
            assert rule["labels"]["severity"] in ("warning", "critical") and rule["annotations"]["summary"]
            # Never grouped by the exporter's own namespace.
            assert "by (namespace" not in rule["expr"] and ", namespace," not in rule["expr"]


def test_for_override_changes_only_that_line():
    text = monitoring.rules_with_for(RULES, {"FairgpuTenantOverGuarantee": "115s"})
    assert monitoring.alerts(text)["FairgpuTenantOverGuarantee"] == "115s"
    assert monitoring.alerts(text)["FairgpuTenantStarved"] == "5m"
    changed = [(a, b) for a, b in zip(RULES.splitlines(), text.splitlines()) if a != b]
    assert changed == [("        for: 5m", "        for: 115s")]
    assert monitoring.rules_with_for(RULES, {}) == RULES
    assert monitoring.alert_seconds(text, "FairgpuTenantOverGuarantee") == 115


def test_outside_kueue_alert_is_known_to_overrides_and_to_the_prometheus_rule():
    text = monitoring.rules_with_for(RULES, {"FairgpuTenantGpusOutsideKueue": "3m"})
    changed = [(a, b) for a, b in zip(RULES.splitlines(), text.splitlines()) if a != b]
    assert changed == [("        for: 2m", "        for: 3m")]
    assert monitoring.alert_for_errors(RULES, {"FairgpuTenantGpusOutsideKueue": "90s"}) == []
    rule = [o for o in monitoring.helm_objects(TENANTS, text, "{}", "monitoring", "kps", "kueue-system", {}, "gpu-operator", {})
            if o["kind"] == "PrometheusRule"][0]
    outside = [r for g in rule["spec"]["groups"] for r in g["rules"] if r.get("alert") == "FairgpuTenantGpusOutsideKueue"]
    assert len(outside) == 1 and outside[0]["for"] == "3m" and outside[0]["labels"] == {"severity": "critical"}
    # The condition is recorded in the same group, before the alerts that read it: Kueue's figure is the most
    # reserved in a window, the pods' the exporter's attribution by tenant.
    group = next(g for g in rule["spec"]["groups"]
                 if any(r.get("alert") == "FairgpuTenantGpusOutsideKueue" for r in g["rules"]))
    record = group["rules"][0]
    assert record["record"] == outside[0]["expr"] == "fairgpu:tenant_gpu_devices_outside_kueue"
    assert "max_over_time(" in record["expr"] and 'exported_pod!=""' in record["expr"]
    over = next(r for r in group["rules"] if r.get("alert") == "FairgpuTenantOverGuarantee")
    # Held back per cluster: a cheater on one cluster of a fleet's Prometheus holds back that cluster's alerts only.
    assert over["expr"].rstrip().endswith("unless on (cluster) fairgpu:tenant_gpu_devices_outside_kueue")


def test_over_guarantee_reads_the_current_ratio_recorded_before_it():
    """Issue 14 item 8: the alert's value is what the tenant holds now (recorded earlier in the same group, so the
    alert reads this evaluation's figure); the last minute's history only bridges a dip with work pending."""
    group = next(g for g in yaml.safe_load(RULES)["groups"]
                 if any(r.get("alert") == "FairgpuTenantOverGuarantee" for r in g["rules"]))
    names = [r.get("record") or r.get("alert") for r in group["rules"]]
    ratio = "fairgpu:cluster_queue_gpu_reserved_over_nominal:ratio"
    assert names.index(ratio) < names.index("FairgpuTenantOverGuarantee")
    record = group["rules"][names.index(ratio)]
    assert "max_over_time" not in record["expr"] and "kueue_cluster_queue_resource_reservation" in record["expr"]
    expr = " ".join(group["rules"][names.index("FairgpuTenantOverGuarantee")]["expr"].split())
    assert expr.startswith("label_replace( %s > 0.9 or ( %s and on (cluster, cluster_queue, resource) max_over_time(%s[1m]) "
                           "> 0.9 and on (cluster, cluster_queue) sum by (cluster, cluster_queue) (kueue_pending_workloads"
                           % (ratio, ratio, ratio))


def test_every_rule_groups_and_joins_per_cluster():
    """One Prometheus may hold several clusters' series (a MultiKueue manager's federation): every aggregation and
    every vector match of every rule (and of the query in an annotation) keeps the cluster label, and no guard
    matches across clusters (on ()). Series without the label group as one cluster, as before (promtool tests)."""
    rules = [r for g in yaml.safe_load(RULES)["groups"] for r in g["rules"]]
    texts = [r["expr"] for r in rules] + [v for r in rules for v in (r.get("annotations") or {}).values()]
    groupings = [m for text in texts for m in re.findall(r"\b(?:by|on)\s*\(([^)]*)\)", " ".join(text.split()))]
    assert len(groupings) > 30
    assert [g for g in groupings if "cluster" not in [n.strip() for n in g.split(",")]] == []
    outside = next(r for r in rules if r.get("alert") == "FairgpuTenantGpusOutsideKueue")
    assert "cluster=%q" in outside["annotations"]["summary"] and "$labels.cluster" in outside["annotations"]["summary"]


@pytest.mark.parametrize("overrides, message", [
    ({"FairgpuTenantOverQuota": "1m"}, "monitoring_alert_for.FairgpuTenantOverQuota: no such alert in the rule file; known: "),
    ({"FairgpuTenantOverGuarantee": "five minutes"}, "monitoring_alert_for.FairgpuTenantOverGuarantee: 'five minutes' is not a Prometheus duration"),
    ({"FairgpuTenantOverGuarantee": "0s"}, "monitoring_alert_for.FairgpuTenantOverGuarantee: the duration must be above 0"),
    ({"FairgpuTenantOverGuarantee": ""}, "is not a Prometheus duration"),
    (["FairgpuTenantOverGuarantee"], "monitoring_alert_for: must be a mapping of alert name to duration"),
])
def test_bad_overrides_are_named(overrides, message):
    errors = monitoring.alert_for_errors(RULES, overrides)
    assert len(errors) == 1 and message in errors[0]
    with pytest.raises(monitoring.MonitoringError, match="monitoring_alert_for"):
        monitoring.rules_with_for(RULES, overrides)


def test_a_for_line_the_edit_cannot_change_is_refused_not_ignored():
    rules = RULES.replace("        for: 2m\n", "        for: 2m  # Kueue's reservation lags the pods\n", 1)
    assert monitoring.alerts(rules)["FairgpuTenantGpusOutsideKueue"] == "2m"
    with pytest.raises(monitoring.MonitoringError,
                       match="monitoring_alert_for.FairgpuTenantGpusOutsideKueue: the rule's for:"):
        monitoring.rules_with_for(rules, {"FairgpuTenantGpusOutsideKueue": "3m"})


def test_interval_errors_name_the_variable():
    assert monitoring.duration_errors({"monitoring_scrape_interval": "5s", "monitoring_retention": "2d"}) == []
    assert monitoring.duration_errors({"monitoring_scrape_interval": "often", "monitoring_retention": "0s"}) == [
        "monitoring_retention: the duration must be above 0, got '0s'",
        "monitoring_scrape_interval: 'often' is not a Prometheus duration (such as 45s, 5m, 1h30m)"]


def test_durations():
    assert monitoring.duration_seconds("1h30m") == 5400 and monitoring.duration_seconds("45s") == 45
    assert monitoring.duration_seconds("500ms") == 0.5
    for bad in ("", "5", "m5", "5min", "1.5m"):
        with pytest.raises(monitoring.MonitoringError):
            monitoring.duration_seconds(bad)


def local_config():
    return monitoring.local_prometheus_config(
        "fairgpu", "127.0.0.1:18443", "/ca.crt", "/w/token", "127.0.0.1:19400", "/w/rules/*.yml", TENANTS)


def test_local_config_scrapes_kueue_like_an_in_cluster_prometheus():
    config = local_config()
    kueue = [j for j in config["scrape_configs"] if j["job_name"] == "kueue"][0]
    assert kueue["scheme"] == "https" and kueue["tls_config"] == {"ca_file": "/ca.crt"}
    assert kueue["authorization"] == {"type": "Bearer", "credentials_file": "/w/token"}
    assert kueue["static_configs"][0]["targets"] == ["127.0.0.1:18443"]
    assert config["rule_files"] == ["/w/rules/*.yml"]
    assert config["global"]["evaluation_interval"] == "5s"


def test_local_config_gives_the_dcgm_exporter_the_labels_of_a_service_monitor_target():
    dcgm = [j for j in local_config()["scrape_configs"] if j["job_name"] == "nvidia-dcgm-exporter"][0]
    # The exporter's own namespace and pod win over the GPU's pod labels: those become exported_*.
    assert dcgm["honor_labels"] is False
    assert dcgm["static_configs"][0]["labels"]["namespace"] == "gpu-operator"
    assert {"pod", "container", "service", "endpoint"} <= set(dcgm["static_configs"][0]["labels"])
    assert dcgm["metric_relabel_configs"] == [
        {"source_labels": ["exported_namespace"], "regex": "team-a|team-a-dev", "target_label": "tenant",
         "replacement": "team-a", "action": "replace"},
        {"source_labels": ["exported_namespace"], "regex": "team-b", "target_label": "tenant",
         "replacement": "team-b", "action": "replace"}]


def test_local_config_scrapes_kube_state_metrics_as_kube_prometheus_stack_does():
    assert "kube-state-metrics" not in [j["job_name"] for j in local_config()["scrape_configs"]]
    config = monitoring.local_prometheus_config(
        "fairgpu", "127.0.0.1:18443", "/ca.crt", "/w/token", "127.0.0.1:19400", "/w/rules/*.yml", TENANTS,
        kube_state_metrics_target="127.0.0.1:19480", monitoring_namespace="fairgpu-monitoring")
    ksm = [j for j in config["scrape_configs"] if j["job_name"] == "kube-state-metrics"][0]
    # its series name their node and namespace themselves: the target's labels must not overwrite them
    assert ksm["honor_labels"] is True and ksm["static_configs"][0]["targets"] == ["127.0.0.1:19480"]
    assert ksm["static_configs"][0]["labels"]["namespace"] == "fairgpu-monitoring"


FLEET = ({"cluster": "mk-worker-1", "url": "http://127.0.0.1:24090"}, {"cluster": "mk-worker-2", "url": "http://127.0.0.1:25090"})


def fleet_config(federate=FLEET):
    return monitoring.local_prometheus_config(
        "mk-manager", "127.0.0.1:18443", "/ca.crt", "/w/token", "127.0.0.1:19400", "/w/rules/*.yml", TENANTS,
        kube_state_metrics_target="127.0.0.1:19480", federate=federate)


def test_local_config_labels_every_series_with_its_cluster():
    config = fleet_config([])
    assert config["global"]["external_labels"] == {"cluster": "mk-manager"}
    assert [j["job_name"] for j in config["scrape_configs"]] == ["kueue", "nvidia-dcgm-exporter", "kube-state-metrics"]
    for job in config["scrape_configs"]:
        assert [c["labels"]["cluster"] for c in job["static_configs"]] == ["mk-manager"], job["job_name"]


def test_local_config_of_a_manager_federates_its_workers_kueue_series():
    fleet = [j for j in fleet_config()["scrape_configs"] if j["job_name"] == monitoring.FLEET_JOB]
    assert fleet == [{
        "job_name": "fairgpu-fleet", "scheme": "http", "metrics_path": "/federate", "honor_labels": True,
        "params": {"match[]": ['{job="kueue"}']},
        "static_configs": [{"targets": ["127.0.0.1:24090"], "labels": {"cluster": "mk-worker-1"}},
                           {"targets": ["127.0.0.1:25090"], "labels": {"cluster": "mk-worker-2"}}]}]


@pytest.mark.parametrize("federate, message", [
    ([{"cluster": "mk-worker-1"}], r"monitoring_federate\[0\]: give \{cluster"),
    ([{"cluster": "mk-worker-1", "url": "http://127.0.0.1:24090/federate"}], "no path"),
    ([{"cluster": "", "url": "http://127.0.0.1:24090"}], "a cluster name"),
    ([{"cluster": "mk-manager", "url": "http://127.0.0.1:24090"}], "this Prometheus's own"),
    (list(FLEET) + [FLEET[0]], r"monitoring_federate\[2\]: cluster mk-worker-1 is federated twice"),
])
def test_a_federation_target_that_cannot_be_scraped_is_named(federate, message):
    with pytest.raises(monitoring.MonitoringError, match=message):
        fleet_config(federate)


def test_bad_interval_is_named():
    with pytest.raises(monitoring.MonitoringError, match="monitoring_scrape_interval: 'often'"):
        monitoring.local_prometheus_config("c", "a:1", "ca", "t", "b:2", "r", [], scrape_interval="often")


def test_helm_objects_carry_the_same_rules_and_the_dashboard():
    objects = monitoring.helm_objects(TENANTS, RULES, '{"uid": "x"}', "monitoring", "kps", "kueue-system",
                                      {"control-plane": "controller-manager"}, "gpu-operator",
                                      {"app": "nvidia-dcgm-exporter"})
    kinds = {(o["kind"], o["metadata"]["name"]): o for o in objects}
    assert all(o["metadata"]["labels"]["release"] == "kps" for o in objects)
    rule = kinds[("PrometheusRule", "fairgpu-alerts")]
    assert rule["spec"]["groups"] == yaml.safe_load(RULES)["groups"]
    monitor = kinds[("ServiceMonitor", "fairgpu-kueue")]
    assert monitor["metadata"]["namespace"] == "kueue-system"
    kueue = monitor["spec"]
    assert kueue["namespaceSelector"] == {"matchNames": ["kueue-system"]}
    endpoint = kueue["endpoints"][0]
    assert endpoint["scheme"] == "https" and "bearerTokenFile" not in endpoint
    assert endpoint["authorization"] == {"type": "Bearer", "credentials": {
        "name": "fairgpu-kueue-metrics-reader-token", "key": "token"}}
    assert endpoint["tlsConfig"] == {"insecureSkipVerify": True}
    assert endpoint["relabelings"] == [{"action": "replace", "targetLabel": "job", "replacement": "kueue"}]
    dcgm = kinds[("ServiceMonitor", "fairgpu-dcgm-exporter")]["spec"]["endpoints"][0]
    assert dcgm["honorLabels"] is False and dcgm["port"] == "gpu-metrics"
    assert dcgm["metricRelabelings"][1] == {"sourceLabels": ["exported_namespace"], "regex": "team-b",
                                            "targetLabel": "tenant", "replacement": "team-b", "action": "replace"}
    board = kinds[("ConfigMap", "fairgpu-dashboard")]
    assert board["metadata"]["labels"]["grafana_dashboard"] == "1" and board["data"] == {"fairgpu-gpu-tenancy.json": '{"uid": "x"}'}
    values = monitoring.chart_values()
    assert values["prometheus"]["prometheusSpec"]["ruleSelectorNilUsesHelmValues"] is False


def alerts_series(tenant, state, times, name="FairgpuTenantOverGuarantee"):
    return {"metric": {"alertname": name, "alertstate": state, "tenant": tenant},
            "values": [[t, "1"] for t in times]}


A = {"name": "team-a", "gpus": 8}
B = {"name": "team-b", "gpus": 8}
RULE_GROUPS = ({"rules": [{"name": "FairgpuTenantOverGuarantee", "duration": 115, "type": "alerting"}]},)


def judge(matrix, dcgm=8, groups=RULE_GROUPS):
    return monitoring_checks.alert_result("flood", A, B, 1000.0, matrix, groups, ("115s", 115),
                                          [{"metric": {}, "values": [[1010, str(dcgm)]]}], 5)


def test_alert_result_passes_when_only_the_flooder_fires_after_its_for():
    matrix = [alerts_series("team-a", "pending", range(1005, 1120, 5)),
              alerts_series("team-a", "firing", range(1120, 1140, 5)),
              alerts_series("team-b", "pending", range(1015, 1115, 5))]
    result = judge(matrix)
    assert [c["passed"] for c in result["checks"]] == [True] * 5
    assert result["metrics"]["over_guarantee_pending_after_s"] == 5.0
    assert result["metrics"]["over_guarantee_firing_after_s"] == 120.0
    assert result["metrics"]["over_90_percent_held_s"] == {"team-a": 135.0, "team-b": 100.0}
    assert monitoring_checks.alert_spans(matrix, "FairgpuTenantOverGuarantee", "team-a") == [{"start": 1120.0, "end": 1135.0}]


def test_alert_result_times_the_firing_from_the_pending_run_that_led_to_it():
    # Pending from +5 s to +60 s, a break (the condition ended: for: restarts), pending again from +100 s; firing at
    # +120 s is only 20 s after its own run began, although 115 s after the first pending sample.
    early = judge([alerts_series("team-a", "pending", list(range(1005, 1065, 5)) + list(range(1100, 1120, 5))),
                   alerts_series("team-a", "firing", [1120, 1125])])
    assert not early["checks"][1]["passed"] and early["checks"][1]["observed"] == "pending at +100.0s, firing at +120.0s"
    assert early["metrics"]["over_guarantee_pending_after_s"] == 5.0
    assert monitoring_checks.active_since([1005, 1010], [1015], 1015, 10) == 1005
    assert monitoring_checks.active_since([1005], [1100], 1200, 10) is None


def test_alert_result_fails_for_each_way_the_alert_can_go_wrong():
    never = judge([alerts_series("team-a", "pending", range(1005, 1100, 5))])
    assert not never["checks"][1]["passed"] and "never firing" in never["checks"][1]["observed"]
    both = judge([alerts_series("team-a", "pending", [1005]), alerts_series("team-a", "firing", [1120]),
                  alerts_series("team-b", "firing", [1130])])
    assert not both["checks"][2]["passed"] and both["checks"][2]["observed"] == ["FairgpuTenantOverGuarantee"]
    other = judge([alerts_series("team-a", "pending", [1005]), alerts_series("team-a", "firing", [1120]),
                   {"metric": {"alertname": "FairgpuKueueDown", "alertstate": "firing"}, "values": [[1050, "1"]]}])
    assert not other["checks"][3]["passed"] and other["checks"][3]["observed"] == ["FairgpuKueueDown"]
    wrong_for = judge([], groups=[{"rules": [{"name": "FairgpuTenantOverGuarantee", "duration": 300}]}])
    assert not wrong_for["checks"][0]["passed"] and wrong_for["checks"][0]["observed"] == "300.0s"
    blind = judge([], dcgm=0)
    assert not blind["checks"][4]["passed"]


def test_report_shows_the_scenarios_prometheus_plots():
    from ansible_collections.fairgpu.tenancy.plugins.module_utils.validation.report import report_document, report_markdown

    scenario = dict(judge([]), images=[{"file": "flood-prometheus.png", "title": "From Prometheus"}])
    page = report_markdown(report_document("c", [], [scenario], "now"), {})
    assert "![From Prometheus](flood-prometheus.png)" in page
    assert "over guarantee for = 115s (the shipped rule file says 5m" in page


def test_pending_spans_and_the_plot(tmp_path):
    from ansible_collections.fairgpu.tenancy.plugins.module_utils.monitoring.plot import draw

    matrix = [alerts_series("team-a", "pending", range(1005, 1120, 5)), alerts_series("team-a", "firing", [1120, 1125])]
    pending = monitoring_checks.alert_spans(matrix, "FairgpuTenantOverGuarantee", "team-a", "5s", "pending")
    assert pending == [{"start": 1005.0, "end": 1115.0}]
    path = tmp_path / "flood-prometheus.png"
    assert draw(str(path), "flood", 1000.0, [
        {"title": "held", "ylabel": "GPUs", "series": {"team-a": [[1000, 0], [1005, 16]]}, "dashed": {"team-a": 8}},
        {"title": "pending", "series": {"team-a": [[1000, "4"]]}}],
        [dict(pending[0], label="pending", color="orange"), {"start": 1120, "end": 1125, "label": "firing"}])
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def _no_file_access(endpoint):
    """What a Prometheus with arbitraryFSAccessThroughSMs.deny refuses in a ServiceMonitor endpoint (Prometheus
    Operator, testForArbitraryFSAccess): bearerTokenFile, and tlsConfig caFile, certFile or keyFile."""
    tls = endpoint.get("tlsConfig") or {}
    return "bearerTokenFile" not in endpoint and not any(k in tls for k in ("caFile", "certFile", "keyFile"))


@pytest.mark.parametrize("ca, tls", [
    ({}, {"insecureSkipVerify": True}),
    ({"secret": {"name": "kueue-metrics-server-cert", "key": "ca.crt"}},
     {"ca": {"secret": {"name": "kueue-metrics-server-cert", "key": "ca.crt"}},
      "serverName": "kueue-controller-manager-metrics-service.kueue-system.svc"}),
    ({"configMap": {"name": "kueue-ca", "key": "ca.crt"}},
     {"ca": {"configMap": {"name": "kueue-ca", "key": "ca.crt"}},
      "serverName": "kueue-controller-manager-metrics-service.kueue-system.svc"}),
])
def test_kueue_service_monitor_uses_a_token_secret_and_a_ca_reference_never_files(ca, tls):
    objects = monitoring.helm_objects(TENANTS, RULES, "{}", "monitoring", "kps", "kueue-system", {}, "gpu-operator", {},
                                      "30s", ca, "kueue-controller-manager-metrics-service.kueue-system.svc")
    monitors = [o for o in objects if o["kind"] == "ServiceMonitor"]
    assert all(_no_file_access(e) for m in monitors for e in m["spec"]["endpoints"])
    kueue = next(m for m in monitors if m["metadata"]["name"] == "fairgpu-kueue")["spec"]["endpoints"][0]
    assert kueue["tlsConfig"] == tls
    # The reader comes first (ServiceAccount before its token Secret), all in Kueue's namespace or cluster-wide.
    reader = [(o["kind"], o["metadata"]["name"], o["metadata"].get("namespace")) for o in objects[:4]]
    assert reader == [("ServiceAccount", "fairgpu-kueue-metrics-reader", "kueue-system"),
                      ("ClusterRole", "fairgpu-kueue-metrics-reader", None),
                      ("ClusterRoleBinding", "fairgpu-kueue-metrics-reader", None),
                      ("Secret", "fairgpu-kueue-metrics-reader-token", "kueue-system")]
    role, binding, secret = objects[1], objects[2], objects[3]
    assert role["rules"] == [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "fairgpu-kueue-metrics-reader",
                                    "namespace": "kueue-system"}]
    assert secret["type"] == "kubernetes.io/service-account-token"
    assert secret["metadata"]["annotations"] == {"kubernetes.io/service-account.name": "fairgpu-kueue-metrics-reader"}
    assert "data" not in secret and "stringData" not in secret  # the token controller fills it in
    assert all(o["metadata"]["labels"]["release"] == "kps" for o in objects)


@pytest.mark.parametrize("ca, message", [
    ({"caFile": "/etc/prometheus/secrets/kueue/ca.crt"}, "caFile name a file in the Prometheus container"),
    ({"secret": {"name": "x"}}, "monitoring_kueue_metrics_ca.secret: needs name and key"),
    ({"secret": {"name": "x", "key": "ca.crt"}, "configMap": {"name": "y", "key": "ca.crt"}}, "exactly one of"),
    ("kueue-metrics-server-cert", "must be a mapping"),
])
def test_a_kueue_ca_that_cannot_be_used_is_named(ca, message):
    errors = monitoring.kueue_metrics_tls_errors(ca)
    assert len(errors) == 1 and message in errors[0]
    with pytest.raises(monitoring.MonitoringError, match="monitoring_kueue_metrics_ca"):
        monitoring.helm_objects(TENANTS, RULES, "{}", "monitoring", "kps", "kueue-system", {}, "gpu-operator", {},
                                "30s", ca)


# kube-prometheus-stack's template (templates/prometheus/prometheus.yaml) with its values.yaml defaults: what the
# Prometheus resource selects, as the test against the real Prometheus Operator builds it.
def test_chart_selectors_with_the_charts_defaults_take_the_release_label_in_every_namespace():
    assert monitoring.chart_prometheus_selectors({}, "kps") == {
        "serviceMonitorSelector": {"matchLabels": {"release": "kps"}}, "serviceMonitorNamespaceSelector": {},
        "ruleSelector": {"matchLabels": {"release": "kps"}}, "ruleNamespaceSelector": {}}


def test_chart_selectors_with_fairgpus_values_take_everything():
    assert monitoring.chart_prometheus_selectors(monitoring.chart_values(), "kps") == {
        "serviceMonitorSelector": {}, "serviceMonitorNamespaceSelector": {},
        "ruleSelector": {}, "ruleNamespaceSelector": {}}


def test_chart_selectors_given_ones_win_and_empty_ones_count_as_unset():
    given = {"matchLabels": {"team": "gpu"}}
    spec = {"serviceMonitorSelector": given, "ruleSelector": {}, "ruleSelectorNilUsesHelmValues": True,
            "serviceMonitorNamespaceSelector": {"matchLabels": {"monitored": "yes"}}, "ruleNamespaceSelector": None}
    selectors = monitoring.chart_prometheus_selectors({"prometheus": {"prometheusSpec": spec}}, "kps")
    assert selectors["serviceMonitorSelector"] == given
    assert selectors["ruleSelector"] == {"matchLabels": {"release": "kps"}}
    assert selectors["serviceMonitorNamespaceSelector"] == {"matchLabels": {"monitored": "yes"}}
    assert selectors["ruleNamespaceSelector"] == {}


def test_fairgpus_helm_objects_carry_the_release_label_the_charts_default_selects():
    objs = monitoring.helm_objects(TENANTS, RULES, "{}", "fairgpu-monitoring", "kps", "kueue-system",
                                   {"control-plane": "controller-manager"}, "gpu-operator",
                                   {"app": "nvidia-dcgm-exporter"})
    wanted = monitoring.chart_prometheus_selectors({}, "kps")["serviceMonitorSelector"]["matchLabels"]
    for obj in objs:
        if obj["kind"] in ("ServiceMonitor", "PrometheusRule"):
            assert wanted.items() <= obj["metadata"]["labels"].items(), obj["metadata"]


def test_the_fleets_federation_targets_do_not_follow_the_groups_order():
    """group_by lists a group's hosts in the order they ran it, which differs between runs: the targets are sorted, so
    a second site.yml writes the same configuration (seen: the two workers swapped between two runs)."""
    from ansible_collections.fairgpu.tenancy.plugins.module_utils.monitoring.objects import fleet_federation
    worker = {"modes": {"monitoring": "local"}}
    one = dict(worker, cluster_name="mk-worker-1", local={"ports": {"prometheus": 15090}})
    two = dict(worker, cluster_name="mk-worker-2", local={"ports": {"prometheus": 16090}})
    assert fleet_federation([two, one]) == fleet_federation([one, two]) == [
        {"cluster": "mk-worker-1", "url": "http://127.0.0.1:15090"}, {"cluster": "mk-worker-2", "url": "http://127.0.0.1:16090"}]
