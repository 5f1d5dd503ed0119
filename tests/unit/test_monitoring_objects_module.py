"""Module fairgpu.tenancy.monitoring_objects against a fake API server (tests/unit/fake_api.py): the placement is read
from the cluster's Prometheus objects and namespaces before anything changes, a refusal writes nothing, the first run
applies every object and a second changes nothing, a hand edit is drift listed and taken back, what an earlier layout
or version left is removed, and check mode writes nothing and lists what goes into a namespace not there yet. Where
the real Prometheus Operator takes the objects is tests/integration/test_77_prometheus_operator.py's."""

import copy
import os

from ansible_collections.fairgpu.tenancy.plugins.modules import monitoring_objects

import fake_api

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
RULES = open(os.path.join(ROOT, "files", "monitoring", "fairgpu-alerts.rules.yml")).read()
MON, KUEUE, DCGM = "fairgpu-monitoring", "kueue-system", "gpu-operator"
SPEC = {"rules_text": RULES, "dashboard": '{"uid": "fairgpu"}', "namespace": MON, "release": "kube-prometheus-stack",
        "labels": {}, "interval": "30s",
        "kueue": {"namespace": KUEUE, "service_labels": {"control-plane": "controller-manager"}, "metrics_ca": None,
                  "server_name": ""},
        "dcgm": {"namespace": DCGM, "service_labels": {"app": "nvidia-dcgm-exporter"}}}
TENANTS = [{"name": "team-a", "namespaces": ["team-a"], "gpus": 8}, {"name": "team-b", "namespaces": ["team-b"], "gpus": 8}]


class Ended(Exception):
    pass


class Module(object):
    def __init__(self, check_mode=False, diff=False, **params):
        self.params = dict(state="present", tenants=TENANTS, spec=SPEC, prometheus="", cross_namespace_rules="refuse",
                           install_chart=False)
        self.params.update(params)
        self.check_mode, self._diff = check_mode, diff

    def fail_json(self, **result):
        raise Ended("fail", result)


def namespace(name):
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": {"kubernetes.io/metadata.name": name}}}


def prometheus(**spec):
    base = {"serviceMonitorSelector": {}, "serviceMonitorNamespaceSelector": {}, "ruleSelector": {},
            "ruleNamespaceSelector": {}}
    base.update(spec)
    return {"apiVersion": "monitoring.coreos.com/v1", "kind": "Prometheus",
            "metadata": {"name": "k8s", "namespace": MON}, "spec": base}


def cluster(*extra, **kw):
    return fake_api.FakeApi([namespace(MON), namespace(KUEUE), namespace(DCGM), prometheus(**kw)] + list(extra))


def converge(api, **params):
    api.dry_run = params.get("check_mode", False)
    try:
        return "exit", monitoring_objects.converge(Module(**params), api)
    except Ended as ended:
        return ended.args


def test_no_prometheus_to_read_them_is_refused_before_anything_is_written():
    api = fake_api.FakeApi([namespace(MON), namespace(KUEUE), namespace(DCGM)])
    how, result = converge(api)
    assert how == "fail" and api.writes == []
    assert result["msg"].startswith("no Prometheus custom resource (monitoring.coreos.com/v1) on the cluster")
    unserved = fake_api.FakeApi([namespace(MON)], served={"Namespace"})
    how, result = converge(unserved)
    assert how == "fail" and "no Prometheus custom resource" in result["msg"]


def test_the_first_run_applies_every_object_and_a_second_changes_nothing():
    api = cluster()
    how, first = converge(api)
    assert how == "exit" and first["placement"]["layout"] == "single"
    assert len(first["changed_objects"]) == len(first["objects"]) and first["drift"] == []
    assert "PrometheusRule/%s/fairgpu-alerts" % MON in first["changed_objects"]
    assert api.named("ServiceMonitor") == [DCGM + "/fairgpu-dcgm-exporter", KUEUE + "/fairgpu-kueue"]
    how, second = converge(api)
    assert how == "exit" and not second["changed"] and second["changed_objects"] == [] and second["drift"] == []


def test_a_hand_edit_is_drift_listed_and_taken_back():
    api = cluster()
    converge(api)
    monitor = api.objects[("ServiceMonitor", KUEUE, "fairgpu-kueue")]
    monitor["spec"]["endpoints"][0]["interval"] = "5m"
    how, result = converge(api)
    assert how == "exit" and result["changed_objects"] == ["ServiceMonitor/%s/fairgpu-kueue" % KUEUE]
    assert len(result["drift"]) == 1 and result["drift"][0].startswith("ServiceMonitor/%s/fairgpu-kueue" % KUEUE)
    assert api.objects[("ServiceMonitor", KUEUE, "fairgpu-kueue")]["spec"]["endpoints"][0]["interval"] == "30s"


def test_what_an_earlier_layout_or_version_left_is_removed():
    def left(kind, ns, name):
        return {"apiVersion": "monitoring.coreos.com/v1", "kind": kind, "metadata": {"name": name, "namespace": ns}}
    api = cluster(left("PrometheusRule", KUEUE, "fairgpu-kueue-alerts"), left("ServiceMonitor", MON, "fairgpu-kueue"))
    how, result = converge(api)
    assert how == "exit"
    assert result["changed_objects"][:2] == ["ServiceMonitor/%s/fairgpu-kueue" % MON,
                                             "PrometheusRule/%s/fairgpu-kueue-alerts" % KUEUE]
    assert api.named("PrometheusRule") == [MON + "/fairgpu-alerts"]
    assert MON + "/fairgpu-kueue" not in api.named("ServiceMonitor")


def test_an_enforcing_prometheus_with_rules_across_namespaces_is_refused_with_the_fix():
    api = cluster(enforcedNamespaceLabel="namespace")
    how, result = converge(api)
    assert how == "fail" and api.writes == []
    assert "monitoring_enforced_cross_namespace_rules: omit" in result["msg"]
    how, omitted = converge(api, cross_namespace_rules="omit")
    assert how == "exit" and omitted["placement"]["layout"] == "split"
    assert api.named("PrometheusRule") == [DCGM + "/fairgpu-gpu-alerts", KUEUE + "/fairgpu-kueue-alerts"]


def test_check_mode_writes_nothing_and_lists_what_goes_into_a_namespace_not_there_yet():
    api = fake_api.FakeApi([namespace(KUEUE), namespace(DCGM), copy.deepcopy(prometheus())])
    how, result = converge(api, check_mode=True, diff=True)
    assert how == "exit" and result["changed"] and api.writes == []
    assert "ConfigMap/%s/fairgpu-dashboard" % MON in result["changed_objects"]
    assert "PrometheusRule/%s/fairgpu-alerts" % MON in result["changed_objects"]
    assert all("before_header" in d for d in result["diff"])


def test_rendered_builds_the_objects_with_no_cluster_and_no_placement():
    objects = monitoring_objects.build(Module(state="rendered"))
    assert [o["kind"] for o in objects].count("ServiceMonitor") == 2
    assert [(o["metadata"]["namespace"], o["metadata"]["name"]) for o in objects if o["kind"] == "PrometheusRule"] == [
        (MON, "fairgpu-alerts")]
