"""placement.py: where fairgpu's ServiceMonitors and rules go for the Prometheus custom resources a cluster runs
(selectors, enforcedNamespaceLabel, excludedFromEnforcement, ignoreNamespaceSelectors), and what it refuses. The
Prometheus Operator's own decisions on these objects are tested in tests/integration/test_77_prometheus_operator.py."""

import os

import pytest
import yaml

from ansible_collections.fairgpu.tenancy.plugins.module_utils.monitoring import objects
from ansible_collections.fairgpu.tenancy.plugins.module_utils.monitoring import placement

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
RULES = open(os.path.join(ROOT, "files", "monitoring", "fairgpu-alerts.rules.yml")).read()
MON, KUEUE, DCGM = "fairgpu-monitoring", "kueue-system", "gpu-operator"
LABELS = objects.object_labels("kube-prometheus-stack")
NS = placement.namespace_labels([], [MON, KUEUE, DCGM], {MON: {"app.kubernetes.io/managed-by": "fairgpu"}})
TENANTS = [{"name": "team-a", "namespaces": ["team-a"]}]


def prom(name="k8s", namespace=MON, **spec):
    base = {"serviceMonitorSelector": {}, "serviceMonitorNamespaceSelector": {}, "ruleSelector": {},
            "ruleNamespaceSelector": {}}
    base.update(spec)
    return {"metadata": {"name": name, "namespace": namespace}, "spec": base}


def plan(proms, **kw):
    args = dict(rules_text=RULES)
    args.update(kw)
    return placement.plan(proms, args.pop("namespace_labels", NS), MON, KUEUE, DCGM, args.pop("labels", LABELS),
                          **args)


def all_rule_names(text):
    return sorted(r.get("alert") or r.get("record") for g in yaml.safe_load(text)["groups"] for r in g["rules"])


def test_every_rule_has_one_source_and_the_joins_are_the_cheater_rules():
    sources = placement.rule_sources(RULES)
    assert sorted(sources) == all_rule_names(RULES)
    assert {n for n, (k, _g) in sources.items() if k == placement.CROSS} == {
        "fairgpu:tenant_gpu_devices_outside_kueue", "FairgpuTenantGpusOutsideKueue",
        # kube-state-metrics' node series live in its own namespace
        "fairgpu:gpu_allocatable_ready:sum", "FairgpuGuaranteesOverCapacity"}
    assert sources["fairgpu:gpu_nominal_quota:sum"][0] == placement.KUEUE
    assert sources["FairgpuKueueDown"][0] == sources["FairgpuTenantOverGuarantee"][0] == placement.KUEUE
    assert sources["FairgpuTenantOverGuarantee"][1] == ["fairgpu:tenant_gpu_devices_outside_kueue"]
    assert sources["FairgpuGpuPodOutsideTenants"][0] == sources["fairgpu:gpu_utilisation:ratio"][0] == placement.DCGM


def test_split_groups_keep_one_home_per_rule_and_their_order():
    groups = placement.split_groups(RULES)
    names = [r.get("alert") or r.get("record") for kind in groups for g in groups[kind] for r in g["rules"]]
    assert sorted(names) == all_rule_names(RULES) and len(names) == len(set(names))
    kueue = [(g["name"], [r.get("alert") or r.get("record") for r in g["rules"]]) for g in groups["kueue"]]
    assert kueue == [("fairgpu.tenants", ["fairgpu:cluster_queue_gpu_reserved_over_nominal:ratio",
                                          "FairgpuTenantOverGuarantee", "FairgpuTenantStarved"]),
                     ("fairgpu.kueue", ["FairgpuKueueDown"]),
                     ("fairgpu.capacity", ["fairgpu:gpu_nominal_quota:sum"])]


def test_a_rule_reading_nothing_known_is_refused():
    with pytest.raises(placement.PlacementError, match="rule Foo reads neither"):
        placement.rule_sources("groups: [{name: g, rules: [{alert: Foo, expr: vector(1)}]}]")


@pytest.mark.parametrize("selector,labels,expected", [
    (None, {"a": "1"}, False), ({}, {}, True), ({"matchLabels": {"a": "1"}}, {"a": "1"}, True),
    ({"matchLabels": {"a": "1"}}, {"a": "2"}, False),
    ({"matchExpressions": [{"key": "a", "operator": "In", "values": ["1", "2"]}]}, {"a": "2"}, True),
    ({"matchExpressions": [{"key": "a", "operator": "NotIn", "values": ["1"]}]}, {}, True),
    ({"matchExpressions": [{"key": "a", "operator": "NotIn", "values": ["1"]}]}, {"a": "1"}, False),
    ({"matchExpressions": [{"key": "a", "operator": "Exists"}]}, {}, False),
    ({"matchExpressions": [{"key": "a", "operator": "DoesNotExist"}]}, {}, True),
])
def test_label_selectors(selector, labels, expected):
    assert placement.label_selector_matches(selector, labels) is expected


def test_default_prometheus_single_layout_and_monitors_where_they_scrape():
    got = plan([prom()])
    assert got["errors"] == [] and got["layout"] == placement.SINGLE
    assert got["rules"] == [{"namespace": MON, "name": "fairgpu-alerts", "source": "all"}]
    assert got["monitors"] == [{"namespace": KUEUE, "name": "fairgpu-kueue"},
                               {"namespace": DCGM, "name": "fairgpu-dcgm-exporter"}]
    assert {"kind": "ServiceMonitor", "namespace": MON, "name": "fairgpu-dcgm-exporter"} in got["stale"]
    assert {"kind": "PrometheusRule", "namespace": KUEUE, "name": "fairgpu-kueue-alerts"} in got["stale"]


def test_enforcement_splits_and_refuses_the_joins_with_the_fix():
    got = plan([prom(enforcedNamespaceLabel="namespace")])
    assert got["layout"] == placement.SPLIT and got["enforcing"] == ["%s/k8s" % MON]
    (err,) = got["errors"]
    assert ("FairgpuGuaranteesOverCapacity, FairgpuTenantGpusOutsideKueue, fairgpu:gpu_allocatable_ready:sum, "
            "fairgpu:tenant_gpu_devices_outside_kueue join Kueue's series" in err)
    assert ("{group: monitoring.coreos.com, resource: prometheusrules, namespace: %s, name: fairgpu-alerts}" % MON
            in err and "spec.excludedFromEnforcement" in err)
    assert "monitoring_enforced_cross_namespace_rules: omit" in err and "FairgpuTenantOverGuarantee" in err


def test_enforcement_with_omit_places_each_rule_with_its_series():
    got = plan([prom(enforcedNamespaceLabel="namespace")], cross="omit")
    assert got["errors"] == []
    assert got["rules"] == [{"namespace": KUEUE, "name": "fairgpu-kueue-alerts", "source": "kueue"},
                            {"namespace": DCGM, "name": "fairgpu-gpu-alerts", "source": "dcgm"}]
    assert got["omitted"] == ["FairgpuGuaranteesOverCapacity", "FairgpuTenantGpusOutsideKueue",
                              "fairgpu:gpu_allocatable_ready:sum", "fairgpu:tenant_gpu_devices_outside_kueue"]
    assert {"kind": "PrometheusRule", "namespace": MON, "name": "fairgpu-alerts"} in got["stale"]
    made = objects.helm_objects(TENANTS, RULES, "{}", MON, "kube-prometheus-stack", KUEUE, {}, DCGM, {},
                                placement=got)
    rules = {(o["metadata"]["namespace"], o["metadata"]["name"]): o for o in made if o["kind"] == "PrometheusRule"}
    assert sorted(rules) == [(DCGM, "fairgpu-gpu-alerts"), (KUEUE, "fairgpu-kueue-alerts")]
    kueue_text = yaml.safe_dump({"groups": rules[(KUEUE, "fairgpu-kueue-alerts")]["spec"]["groups"]})
    assert "DCGM_" not in kueue_text and "FairgpuKueueDown" in kueue_text
    gpu_text = yaml.safe_dump({"groups": rules[(DCGM, "fairgpu-gpu-alerts")]["spec"]["groups"]})
    assert "kueue_" not in gpu_text and "FairgpuGpuPodOutsideTenants" in gpu_text


@pytest.mark.parametrize("exclusion", [
    {"excludedFromEnforcement": [{"group": "monitoring.coreos.com", "resource": "prometheusrules",
                                  "namespace": MON, "name": "fairgpu-alerts"}]},
    {"excludedFromEnforcement": [{"resource": "prometheusrules", "namespace": MON}]},  # every rule there, group default
    {"prometheusRulesExcludedFromEnforce": [{"ruleNamespace": MON, "ruleName": "fairgpu-alerts"}]},  # deprecated
])
def test_excluded_from_enforcement_keeps_the_single_rule_file(exclusion):
    got = plan([prom(enforcedNamespaceLabel="namespace", **exclusion)])
    assert got["errors"] == [] and got["layout"] == placement.SINGLE and got["omitted"] == []


def test_an_exclusion_of_something_else_does_not_count():
    got = plan([prom(enforcedNamespaceLabel="namespace", excludedFromEnforcement=[
        {"resource": "servicemonitors", "namespace": MON, "name": "fairgpu-alerts"},
        {"resource": "prometheusrules", "namespace": "other", "name": "fairgpu-alerts"}])], cross="omit")
    assert got["layout"] == placement.SPLIT


def test_an_enforced_label_fairgpus_rules_read_is_refused():
    got = plan([prom(enforcedNamespaceLabel="tenant")], cross="omit")
    assert any("enforcedNamespaceLabel 'tenant' is a label fairgpu's rules read" in e for e in got["errors"])


def test_openshift_user_workload_like_prometheus():
    """OpenShift user workload monitoring: enforcement, ignoreNamespaceSelectors, and namespace selectors that leave
    out the platform's namespaces (openshift.io/cluster-monitoring=true; openshift/managed-cluster-config#513)."""
    not_platform = {"matchExpressions": [{"key": "openshift.io/cluster-monitoring", "operator": "NotIn",
                                          "values": ["true"]}]}
    uwm = prom("user-workload", "openshift-user-workload-monitoring", enforcedNamespaceLabel="namespace",
               ignoreNamespaceSelectors=True, serviceMonitorNamespaceSelector=not_platform,
               ruleNamespaceSelector=not_platform)
    labels = dict(NS, **{DCGM: {"openshift.io/cluster-monitoring": "true"}})
    got = plan([uwm], cross="omit", namespace_labels=labels)
    assert got["layout"] == placement.SPLIT
    (sm_err, rule_err) = got["errors"]
    assert sm_err.startswith("no Prometheus selects fairgpu's ServiceMonitor %s/fairgpu-dcgm-exporter" % DCGM)
    assert "label namespace %s as its matchExpressions take" % DCGM in sm_err
    assert rule_err.startswith("no Prometheus selects fairgpu's PrometheusRule %s/fairgpu-gpu-alerts" % DCGM)
    assert plan([uwm], cross="omit")["errors"] == []


def test_no_prometheus_selects_names_the_selector_and_the_labels_to_add():
    team = prom("team", ruleSelector={"matchLabels": {"role": "alert-rules"}},
                serviceMonitorSelector={"matchLabels": {"team": "gpu"}})
    got = plan([team])
    assert len(got["errors"]) == 3
    assert ("no Prometheus selects fairgpu's ServiceMonitor %s/fairgpu-kueue; %s/team: serviceMonitorSelector "
            "{matchLabels: {team: gpu}}: add {team: gpu} to monitoring_labels" % (KUEUE, MON)) == got["errors"][0]
    assert "ruleSelector {matchLabels: {role: alert-rules}}: add {role: alert-rules} to monitoring_labels" in got["errors"][2]
    fixed = plan([team], labels=objects.object_labels("kube-prometheus-stack", {"team": "gpu", "role": "alert-rules"}))
    assert fixed["errors"] == []


def test_a_prometheus_without_namespace_selectors_looks_only_in_its_own_namespace():
    """prometheus-operator/prometheus-operator#5917: null namespace selectors select the Prometheus's namespace."""
    own = {"metadata": {"name": "own", "namespace": MON}, "spec": {"serviceMonitorSelector": {}, "ruleSelector": {}}}
    got = plan([own])
    assert [e.split(";")[0] for e in got["errors"]] == [
        "no Prometheus selects fairgpu's ServiceMonitor %s/fairgpu-kueue" % KUEUE,
        "no Prometheus selects fairgpu's ServiceMonitor %s/fairgpu-dcgm-exporter" % DCGM]
    assert "serviceMonitorNamespaceSelector is null (its own namespace only): set it to select %s" % KUEUE in got["errors"][0]


def test_no_prometheus_at_all_is_refused_but_an_unknown_one_is_not():
    assert "no Prometheus custom resource" in plan([])["errors"][0]
    unknown = plan(None)
    assert unknown["errors"] == [] and unknown["layout"] == placement.SINGLE


def test_a_chosen_prometheus_alone_counts():
    proms = [prom(), prom("uwm", enforcedNamespaceLabel="namespace")]
    assert plan(proms, chosen="%s/k8s" % MON)["layout"] == placement.SINGLE
    assert plan(proms, cross="omit")["layout"] == placement.SPLIT
    assert "monitoring_prometheus: no Prometheus x/y on the cluster" in plan(proms, chosen="x/y")["errors"][0]
    assert "monitoring_enforced_cross_namespace_rules: must be one of" in plan(proms, cross="drop")["errors"][0]


def test_namespace_labels_of_namespaces_not_there_yet():
    found = [{"metadata": {"name": KUEUE, "labels": {"team": "platform"}}}]
    got = placement.namespace_labels(found, [MON, KUEUE], {MON: {"app.kubernetes.io/managed-by": "fairgpu"}})
    assert got == {KUEUE: {"team": "platform"},
                   MON: {"app.kubernetes.io/managed-by": "fairgpu", "kubernetes.io/metadata.name": MON}}


def test_extra_labels_reach_every_object_and_do_not_replace_fairgpus():
    made = objects.helm_objects(TENANTS, RULES, "{}", MON, "kps", KUEUE, {}, DCGM, {},
                                labels={"team": "gpu", "release": "not-this"})
    for obj in made:
        labels = obj["metadata"]["labels"]
        assert labels["team"] == "gpu" and labels["release"] == "kps", obj["metadata"]


def test_a_release_selector_is_fixed_with_the_release_name_not_extra_labels():
    """kube-prometheus-stack's default selector under another release (prometheus-community/helm-charts#1631):
    fairgpu sets release itself, so the fix is monitoring_release_name."""
    other = prom("other", ruleSelector={"matchLabels": {"release": "other"}},
                 serviceMonitorSelector={"matchLabels": {"release": "other", "team": "gpu"}})
    got = plan([other])
    assert ("serviceMonitorSelector {matchLabels: {release: other, team: gpu}}: set monitoring_release_name: other "
            "and add {team: gpu} to monitoring_labels") in got["errors"][0]
    assert got["errors"][2].endswith("ruleSelector {matchLabels: {release: other}}: set monitoring_release_name: other")


class _Tagged(dict):
    """Stands in for the dict and str subclasses Ansible hands a filter (YAML's safe dumper refuses them)."""


class _TaggedStr(str):
    pass


def test_selectors_as_ansible_passes_them_are_named_in_the_refusal():
    """test_77 found it: a selector read by k8s_info reached the message as Ansible's own dict type."""
    other = prom("other", serviceMonitorSelector=_Tagged(matchLabels=_Tagged(team=_TaggedStr("gpu"))))
    got = plan([other])
    assert "serviceMonitorSelector {matchLabels: {team: gpu}}: add {team: gpu} to monitoring_labels" in got["errors"][0]
