"""Adopt, don't overwrite (plugins/module_utils/plan/helm_release.py): what the kueue, gpu_operator and monitoring
roles do with a release that is already there, decided on the charts' REAL default values at the pinned versions
(tests/unit/fixtures/charts/<chart>-<version>/values.yaml, each with a README naming repository, tag and commit):

- NVIDIA/gpu-operator v25.10.1 deployments/gpu-operator/values.yaml (GPU_OPERATOR_CHART_VERSION);
- prometheus-community/helm-charts kube-prometheus-stack-81.6.2 charts/kube-prometheus-stack/values.yaml
  (KUBE_PROMETHEUS_STACK_CHART_VERSION);
- kubernetes-sigs/kueue v0.19.2 charts/kueue/values.yaml (KUEUE_VERSION).

A platform team's values (the issue's field cases: a GPU Operator with driver.enabled=false, toolkit.enabled=false
and a time-slicing device plugin config; a Kueue with 2 replicas, cert-manager, more integrations and a feature
gate) are dropped by an upgrade with reset values (kubernetes.core.helm 6.2.0's default, ``--reset-values``) and so
refused by default, and kept under merge with fairgpu's owned keys winning."""

import json
import os

import pytest
import yaml

from ansible_collections.fairgpu.tenancy.plugins.module_utils.kueue import chart as kueue_chart
from ansible_collections.fairgpu.tenancy.plugins.module_utils.monitoring import objects as monitoring
from ansible_collections.fairgpu.tenancy.plugins.module_utils.plan import helm_release as hr
from ansible_collections.fairgpu.tenancy.plugins.module_utils.common.versions import versions_env
from ansible_collections.fairgpu.tenancy.plugins.module_utils.teardown import plan as teardown
from ansible_collections.fairgpu.tenancy.plugins.modules import helm_release_adoption as module

from module_main import run_main
from test_gpu_operator_values import helm_values


def gpu_operator_values(**inventory):
    """The gpu_operator role's values for helm (its defaults and vars templated), as plain JSON types."""
    return json.loads(json.dumps(helm_values(**inventory)))


ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIXTURES = os.path.join(ROOT, "tests", "unit", "fixtures", "charts")
with open(os.path.join(ROOT, "files", "lab", "toolchain", "versions.env")) as _handle:
    VERSIONS = versions_env(_handle.read())


def chart_defaults(name, version):
    with open(os.path.join(FIXTURES, "%s-%s" % (name, version), "values.yaml")) as handle:
        return yaml.safe_load(handle)


GPU_DEFAULTS = chart_defaults("gpu-operator", VERSIONS["GPU_OPERATOR_CHART_VERSION"])
KPS_DEFAULTS = chart_defaults("kube-prometheus-stack", VERSIONS["KUBE_PROMETHEUS_STACK_CHART_VERSION"])
KUEUE_DEFAULTS = chart_defaults("kueue", VERSIONS["KUEUE_VERSION"].lstrip("v"))


def status(values, name="rel", chart="chart-1", revision=1):
    """kubernetes.core.helm_info's ``status`` of a release (the fields the decision reads)."""
    return {"name": name, "chart": chart, "revision": str(revision), "status": "deployed", "values": values}


def keys(entries):
    return {e["key"] for e in entries}


# --- the GPU Operator -----------------------------------------------------------------------------------------

GPU_PLATFORM = {"driver": {"enabled": False}, "toolkit": {"enabled": False},
                "devicePlugin": {"config": {"name": "time-slicing-config", "default": "any"}}}
GPU_PLATFORM_KEYS = {"driver.enabled", "toolkit.enabled", "devicePlugin.config.name", "devicePlugin.config.default"}


def gpu(values, mode="refuse", defaults=GPU_DEFAULTS, desired=None):
    return hr.adoption(status(values, "gpu-operator", "gpu-operator-v25.10.1"), desired or gpu_operator_values(),
                       mode, "gpu-operator", "gpu_operator", defaults)


def test_the_fixtures_are_the_pinned_charts_defaults():
    assert GPU_DEFAULTS["driver"]["enabled"] is True and GPU_DEFAULTS["toolkit"]["version"] == "v1.18.1"
    assert KPS_DEFAULTS["prometheus"]["prometheusSpec"]["serviceMonitorSelectorNilUsesHelmValues"] is True
    assert KUEUE_DEFAULTS["controllerManager"]["replicas"] == 1
    assert "integrations:" in KUEUE_DEFAULTS["managerConfig"]["controllerManagerConfigYaml"]


def test_a_platform_gpu_operator_is_refused_listing_what_a_reset_drops():
    result = gpu(GPU_PLATFORM)
    assert result["decision"] == "refuse" and result["values"] == {}
    assert keys(result["dropped"]) == GPU_PLATFORM_KEYS
    message = result["message"]
    assert "gpu_operator_adopt: merge" in message and "gpu_operator_extra_values" in message
    assert "Nothing was changed on the cluster" in message
    for key in GPU_PLATFORM_KEYS:
        assert "dropped by an upgrade with reset values: %s" % key in message
    # driver.enabled: false against the chart's default true.
    assert {"key": "driver.enabled", "value": False, "default": True, "from": "release"} in result["dropped"]
    # The keys fairgpu would set, old -> new (the chart's default where the release does not set them).
    assert "migManager.config.name" in keys(result["changes"])


def test_a_platform_gpu_operator_is_kept_under_merge_and_fairgpus_keys_win():
    platform = dict(GPU_PLATFORM, mig={"strategy": "mixed"}, cdi={"enabled": False},
                    toolkit={"enabled": False, "env": [{"name": "CONTAINERD_SOCKET", "value": "/run/k3s/containerd/containerd.sock"}]})
    refused = gpu(platform)
    assert {"key": "mig.strategy", "old": "mixed", "new": "single", "from": "release"} in refused["changes"]
    assert "toolkit.env[name=CONTAINERD_SOCKET]" in keys(refused["dropped"])
    result = gpu(platform, "merge")
    assert result["decision"] == "merge" and keys(result["kept"]) >= GPU_PLATFORM_KEYS
    values = result["values"]
    assert values["driver"] == {"enabled": False}
    assert values["devicePlugin"]["config"] == {"name": "time-slicing-config", "default": "any"}
    assert values["toolkit"]["enabled"] is False
    desired = gpu_operator_values()
    # fairgpu's owned keys win: CDI, the MIG strategy, its toolkit.env entries (merged by name, theirs stays first).
    assert values["cdi"] == desired["cdi"] and values["mig"] == desired["mig"]
    assert values["toolkit"]["env"] == platform["toolkit"]["env"] + desired["toolkit"]["env"]
    assert values["migManager"] == desired["migManager"] and values["dcgmExporter"] == desired["dcgmExporter"]
    # Someone else's release is never marked (teardown never uninstalls it).
    assert hr.MARKER_KEY not in values and not teardown.marked(values)
    assert "before" in result["diff"] and "time-slicing-config" in result["diff"]["after"]


def test_merging_twice_changes_nothing():
    first = gpu(GPU_PLATFORM, "merge")
    again = gpu(first["values"], "merge")
    assert again["decision"] == "merge" and again["values"] == first["values"] and again["would_change"] is False


def test_a_release_fairgpu_installed_is_upgraded_without_a_prompt():
    installed = hr.adoption({}, gpu_operator_values(), "refuse", "gpu-operator", "gpu_operator", GPU_DEFAULTS)
    assert installed["decision"] == "install" and teardown.marked(installed["values"])
    again = gpu(installed["values"])
    assert again["decision"] == "upgrade" and again["would_change"] is False
    assert again["values"] == installed["values"]
    # The inventory changed (no DCGM exporter now): still fairgpu's own, upgraded, the change listed.
    changed = gpu(installed["values"], desired=gpu_operator_values(gpu_operator_dcgm_exporter_enabled=False))
    assert changed["decision"] == "upgrade" and changed["would_change"] is True
    # (from: the chart's default, which the value fairgpu set before equals)
    assert {"key": "dcgmExporter.enabled", "old": True, "new": False, "from": "chart default"} in changed["changes"]
    # An extra value fairgpu set before and no longer sets was fairgpu's own: dropped without a prompt.
    extra = gpu_operator_values(gpu_operator_extra_values={"nfd": {"enabled": False}})
    with_extra = hr.adoption({}, extra, "refuse", "gpu-operator", "gpu_operator", GPU_DEFAULTS)["values"]
    removed = gpu(with_extra)
    assert removed["decision"] == "upgrade" and keys(removed["dropped"]) == {"nfd.enabled"}


def test_a_fairgpu_release_changed_by_hand_is_refused_and_listed():
    installed = hr.adoption({}, gpu_operator_values(), "refuse", "gpu-operator", "gpu_operator", GPU_DEFAULTS)["values"]
    by_hand = dict(installed, driver={"enabled": False})        # helm upgrade --reuse-values --set driver.enabled=false
    result = gpu(by_hand)
    assert result["decision"] == "refuse" and "changed since fairgpu set them" in result["message"]
    assert keys(result["dropped"]) == {"driver.enabled"}
    merged = gpu(by_hand, "merge")
    assert merged["decision"] == "merge" and merged["values"]["driver"] == {"enabled": False}
    assert hr.marker_of(merged["values"]) == dict(hr.marker(hr.without_marker(merged["values"]), merged=True)[hr.MARKER_KEY])
    # Idempotent under merge, and refused again under refuse: the kept value would be lost.
    assert gpu(merged["values"], "merge")["would_change"] is False
    back = gpu(merged["values"])
    assert back["decision"] == "refuse" and keys(back["dropped"]) == {"driver.enabled"}
    assert "earlier gpu_operator_adopt: merge" in back["message"]


def test_a_marker_of_an_earlier_fairgpu_without_digest():
    old = dict(gpu_operator_values(), **teardown.RELEASE_MARKER)
    assert gpu(old)["decision"] == "upgrade"
    assert gpu(dict(old, driver={"enabled": False}))["decision"] == "refuse"


def test_the_charts_default_values_make_no_false_dropped_entries():
    """A release installed with a copy of values.yaml (a common practice) sets every key to its default: a reset
    loses none of them, and fairgpu setting one of them overwrites nothing the release chose."""
    for mode in ("refuse", "merge"):
        result = gpu(GPU_DEFAULTS, mode)
        assert result["dropped"] == [], result["dropped"]
        assert [c for c in result["changes"] if c["from"] == "release"] == []
    assert gpu(GPU_DEFAULTS)["decision"] == "upgrade"
    # With their own changes in that copy, exactly those are listed.
    copy = yaml.safe_load(yaml.safe_dump(GPU_DEFAULTS))
    copy["driver"]["enabled"] = False
    copy["devicePlugin"]["config"].update(name="time-slicing-config", default="any")
    assert keys(gpu(copy)["dropped"]) == {"driver.enabled", "devicePlugin.config.name", "devicePlugin.config.default"}
    # Without the chart's defaults (helm show values not readable) every value counts.
    assert keys(gpu({"driver": {"enabled": True}}, defaults=None)["dropped"]) == {"driver.enabled"}
    assert gpu({"driver": {"enabled": True}})["decision"] == "upgrade"


def test_an_empty_release_is_upgraded_and_a_fresh_install_gets_the_marker():
    assert gpu({})["decision"] == "upgrade"
    fresh = hr.adoption(None, {"a": 1}, "refuse", "gpu-operator", "gpu_operator")
    assert fresh["decision"] == "install" and fresh["values"]["a"] == 1 and teardown.marked(fresh["values"])


def test_a_bad_mode_names_the_variable():
    with pytest.raises(ValueError, match="gpu_operator_adopt: 'replace' is not one of refuse, merge"):
        hr.adoption({}, {}, "replace", "gpu-operator", "gpu_operator")


# --- kube-prometheus-stack -------------------------------------------------------------------------------------

KPS_PLATFORM = {"alertmanager": {"enabled": False},
                "grafana": {"adminPassword": "s3cret", "sidecar": {"dashboards": {"searchNamespace": "monitoring"}}},
                "prometheus": {"prometheusSpec": {"retention": "30d", "scrapeInterval": "60s",
                                                  "externalLabels": {"cluster": "prod-1"}}}}


def kps(values, mode="refuse", defaults=KPS_DEFAULTS):
    return hr.adoption(status(values, "kube-prometheus-stack", "kube-prometheus-stack-81.6.2"),
                       monitoring.chart_values("30s", "30s"), mode, "kube-prometheus-stack", "monitoring", defaults)


def test_a_platform_kube_prometheus_stack_is_refused_then_kept_under_merge():
    result = kps(KPS_PLATFORM)
    assert result["decision"] == "refuse"
    assert keys(result["dropped"]) == {"alertmanager.enabled", "grafana.adminPassword",
                                       "prometheus.prometheusSpec.retention",
                                       "prometheus.prometheusSpec.externalLabels.cluster"}
    assert {"key": "prometheus.prometheusSpec.scrapeInterval", "old": "60s", "new": "30s", "from": "release"} \
        in result["changes"]
    assert {"key": "grafana.sidecar.dashboards.searchNamespace", "old": "monitoring", "new": "ALL",
            "from": "release"} in result["changes"]
    merged = kps(KPS_PLATFORM, "merge")["values"]
    assert merged["alertmanager"] == {"enabled": False} and merged["grafana"]["adminPassword"] == "s3cret"
    spec = merged["prometheus"]["prometheusSpec"]
    assert spec["retention"] == "30d" and spec["externalLabels"] == {"cluster": "prod-1"}
    # fairgpu's owned keys win: its intervals, its selectors, its dashboard sidecar.
    assert spec["scrapeInterval"] == "30s" and spec["serviceMonitorSelectorNilUsesHelmValues"] is False
    assert merged["grafana"]["sidecar"]["dashboards"]["searchNamespace"] == "ALL"
    assert kps(merged, "merge")["would_change"] is False


def test_kube_prometheus_stack_defaults_make_no_false_dropped_entries():
    result = kps(KPS_DEFAULTS)
    assert result["dropped"] == [] and result["decision"] == "upgrade"


# --- Kueue ----------------------------------------------------------------------------------------------------

# fairgpu's in-cluster Configuration as the kueue role computes it (roles/kueue/vars/main.yml
# kueue_configuration_incluster with the defaults), then kueue_release_configuration and kueue_chart_values.
FAIRGPU_CONFIGURATION = {
    "apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration", "namespace": "kueue-system",
    "manageJobsWithoutQueueName": False, "integrations": {"frameworks": ["batch/job"]},
    "metrics": {"enableClusterQueueResources": True, "bindAddress": ":8443"},
    "waitForPodsReady": {"timeout": "10m", "recoveryTimeout": "10m", "blockAdmission": False},
    "fairSharing": {"preemptionStrategies": ["LessThanOrEqualToFinalShare", "LessThanInitialShare"]},
    "leaderElection": {"leaderElect": True}, "internalCertManagement": {"enable": True},
    "webhook": {"port": 9443}, "health": {"healthProbeBindAddress": ":8081"},
}


def kueue_values(release="platform-kueue"):
    config = kueue_chart.release_configuration(FAIRGPU_CONFIGURATION, release)
    return kueue_chart.chart_values(yaml.safe_dump(config, default_flow_style=False, indent=2), VERSIONS["KUEUE_VERSION"])


def platform_kueue():
    """The platform team's values: 2 replicas, cert-manager, a feature gate, and the chart's Configuration with the
    PyTorchJob and RayJob integrations (their own copy of the chart's default document)."""
    config = yaml.safe_load(KUEUE_DEFAULTS["managerConfig"]["controllerManagerConfigYaml"])
    config["integrations"]["frameworks"] = ["batch/job", "kubeflow.org/pytorchjob", "ray.io/rayjob"]
    return {"controllerManager": {"replicas": 2, "featureGates": [{"name": "TopologyAwareScheduling", "enabled": True}]},
            "enableCertManager": True,
            "managerConfig": {"controllerManagerConfigYaml": yaml.safe_dump(config)}}


def kueue(values, mode="refuse", defaults=KUEUE_DEFAULTS):
    return hr.adoption(status(values, "platform-kueue", "kueue-0.19.2"), kueue_values(), mode, "kueue", "kueue",
                       defaults)


def test_a_platform_kueue_is_refused_listing_replicas_cert_manager_integrations_and_the_gate():
    result = kueue(platform_kueue())
    assert result["decision"] == "refuse"
    dropped = keys(result["dropped"])
    assert {"controllerManager.replicas", "enableCertManager",
            "controllerManager.featureGates[name=TopologyAwareScheduling]",
            "managerConfig.controllerManagerConfigYaml: integrations.frameworks[kubeflow.org/pytorchjob]",
            "managerConfig.controllerManagerConfigYaml: integrations.frameworks[ray.io/rayjob]"} <= dropped
    assert "kueue_adopt: merge" in result["message"] and "kueue_extra_values" in result["message"]
    assert "dropped by an upgrade with reset values: controllerManager.replicas = 2 (chart default 1)" in result["message"]


def test_a_platform_kueue_is_kept_under_merge_with_fairgpus_configuration():
    result = kueue(platform_kueue(), "merge")
    values = result["values"]
    assert values["controllerManager"]["replicas"] == 2 and values["enableCertManager"] is True
    assert values["controllerManager"]["featureGates"] == [{"name": "TopologyAwareScheduling", "enabled": True}]
    assert values["controllerManager"]["manager"]["image"]["repository"] == kueue_chart.RELEASE_IMAGE_REPOSITORY
    config = yaml.safe_load(values["managerConfig"]["controllerManagerConfigYaml"])
    # Their integrations stay (a union), fairgpu's Configuration wins everywhere else it sets a key.
    assert config["integrations"]["frameworks"] == ["batch/job", "kubeflow.org/pytorchjob", "ray.io/rayjob"]
    assert config["fairSharing"] == FAIRGPU_CONFIGURATION["fairSharing"]
    assert config["waitForPodsReady"] == FAIRGPU_CONFIGURATION["waitForPodsReady"]
    assert config["metrics"]["enableClusterQueueResources"] is True
    # Their certificates come from cert-manager (enableCertManager): internal certificate management stays off, as
    # the chart sets it then; without cert-manager fairgpu's section names the release's own objects.
    assert config["internalCertManagement"] == {"enable": False}
    plain = dict(platform_kueue(), enableCertManager=False)
    config = yaml.safe_load(kueue(plain, "merge")["values"]["managerConfig"]["controllerManagerConfigYaml"])
    assert config["internalCertManagement"]["webhookServiceName"] == "platform-kueue-webhook-service"
    # Their other keys of the document stay (the chart's controller concurrency, say).
    assert config["controller"]["groupKindConcurrency"]["Job.batch"] == 5
    assert kueue(values, "merge")["would_change"] is False


def test_a_kueue_on_the_charts_default_configuration_lists_what_fairgpus_document_replaces():
    """A release that does not set the Configuration runs with the chart's: fairgpu's document replaces it whole,
    so its keys are listed (the chart's default integrations, MPIJob and RayJob among them), and merge keeps them."""
    result = kueue({"controllerManager": {"replicas": 2}})
    assert result["decision"] == "refuse"
    assert {"managerConfig.controllerManagerConfigYaml: integrations.frameworks[kubeflow.org/mpijob]",
            "managerConfig.controllerManagerConfigYaml: integrations.frameworks[ray.io/rayjob]"} <= keys(result["dropped"])
    assert {d["from"] for d in result["dropped"] if "frameworks" in d["key"]} == {"chart default"}
    config = yaml.safe_load(kueue({"controllerManager": {"replicas": 2}}, "merge")["values"]["managerConfig"][
        "controllerManagerConfigYaml"])
    assert {"kubeflow.org/mpijob", "ray.io/rayjob"} <= set(config["integrations"]["frameworks"])
    assert config["fairSharing"] == FAIRGPU_CONFIGURATION["fairSharing"]


def test_kueue_defaults_make_no_false_dropped_entries_outside_the_configuration():
    result = kueue({k: v for k, v in KUEUE_DEFAULTS.items() if k != "managerConfig"})
    assert [d for d in result["dropped"] if not d["key"].startswith("managerConfig.")] == []


def test_owned_keys_name_what_fairgpu_sets():
    owned = hr.owned_keys("gpu-operator", gpu_operator_values())
    assert owned == ["cdi.enabled", "dcgmExporter.enabled", "mig.strategy", "migManager.config.default",
                     "migManager.config.name", "migManager.enabled",
                     "toolkit.env[name=ACCEPT_NVIDIA_VISIBLE_DEVICES_AS_VOLUME_MOUNTS]",
                     "toolkit.env[name=ACCEPT_NVIDIA_VISIBLE_DEVICES_ENVVAR_WHEN_UNPRIVILEGED]"]
    assert hr.owned_keys("kube-prometheus-stack", monitoring.chart_values()) == [
        "grafana.sidecar.dashboards.enabled", "grafana.sidecar.dashboards.label",
        "grafana.sidecar.dashboards.labelValue", "grafana.sidecar.dashboards.searchNamespace",
        "prometheus.prometheusSpec.evaluationInterval", "prometheus.prometheusSpec.ruleSelectorNilUsesHelmValues",
        "prometheus.prometheusSpec.scrapeInterval",
        "prometheus.prometheusSpec.serviceMonitorSelectorNilUsesHelmValues"]
    kueue_owned = hr.owned_keys("kueue", kueue_values())
    assert "managerConfig.controllerManagerConfigYaml: integrations.frameworks[batch/job]" in kueue_owned
    assert "controllerManager.manager.image.tag" in kueue_owned


# --- repositories -----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("ref, url, expected", [
    ("oci://ghcr.io/prometheus-community/charts/kube-prometheus-stack", "",
     {"chart_ref": "oci://ghcr.io/prometheus-community/charts/kube-prometheus-stack", "chart_repo_url": None}),
    # An old inventory's named repository form with its URL: no named repository, helm --repo reads the index.
    ("prometheus-community/kube-prometheus-stack", "https://prometheus-community.github.io/helm-charts",
     {"chart_ref": "kube-prometheus-stack", "chart_repo_url": "https://prometheus-community.github.io/helm-charts"}),
    ("kube-prometheus-stack", "http://127.0.0.1:27150",
     {"chart_ref": "kube-prometheus-stack", "chart_repo_url": "http://127.0.0.1:27150"}),
    ("/srv/charts/kube-prometheus-stack-81.6.2.tgz", "",
     {"chart_ref": "/srv/charts/kube-prometheus-stack-81.6.2.tgz", "chart_repo_url": None}),
    ("./charts/kps", "", {"chart_ref": "./charts/kps", "chart_repo_url": None}),
])
def test_chart_source_needs_no_named_repository(ref, url, expected):
    assert hr.chart_source(ref, url) == expected


def test_a_named_repository_without_its_url_is_refused_with_the_fix():
    with pytest.raises(ValueError, match="monitoring_chart_ref: prometheus-community/kube-prometheus-stack names a "
                                         "chart of a local helm repository"):
        hr.chart_source("prometheus-community/kube-prometheus-stack", "", "monitoring_chart_ref")


def test_the_monitoring_role_defaults_to_the_oci_chart():
    with open(os.path.join(ROOT, "roles", "monitoring", "defaults", "main.yml")) as handle:
        defaults = yaml.safe_load(handle)
    assert defaults["monitoring_chart_ref"] == "oci://ghcr.io/prometheus-community/charts/kube-prometheus-stack"
    assert defaults["monitoring_chart_repo_url"] == ""
    for role in ("kueue", "gpu_operator", "monitoring"):
        with open(os.path.join(ROOT, "roles", role, "defaults", "main.yml")) as handle:
            assert yaml.safe_load(handle)["%s_adopt" % role] == "refuse"


# --- the module ---------------------------------------------------------------------------------------------------

def test_the_module_fails_on_refuse_and_shows_the_diff_on_merge(capsys):
    args = {"chart": "gpu-operator", "role": "gpu_operator", "values": gpu_operator_values(),
            "status": status(GPU_PLATFORM, "gpu-operator", "gpu-operator-v25.10.1"),
            "defaults": yaml.safe_dump(GPU_DEFAULTS)}
    refused = run_main(module, args, capsys)
    assert refused["failed"] is True and refused["decision"] == "refuse"
    assert "dropped by an upgrade with reset values: driver.enabled = false (chart default true)" in refused["msg"]
    merged = run_main(module, dict(args, mode="merge"), capsys)
    assert merged["decision"] == "merge" and merged["changed"] is True
    assert merged["helm_values"]["driver"] == {"enabled": False}
    assert yaml.safe_load(merged["diff"]["before"]) == GPU_PLATFORM
    assert yaml.safe_load(merged["diff"]["after"]) == merged["helm_values"]
    fresh = run_main(module, dict(args, status={}), capsys)
    assert fresh["decision"] == "install" and teardown.marked(fresh["helm_values"])


# --- the roles' helm tasks ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("role, tasks", [("kueue", "helm.yml"), ("gpu_operator", "helm.yml"),
                                         ("monitoring", "helm_chart.yml")])
def test_each_helm_install_passes_the_adoption_and_no_named_repository(role, tasks):
    """Each role's install gets what adopt.yml decided, with kubernetes.core.helm's reset values (so the stored
    values are exactly what was passed, and its check without helm-diff compares them), after adopt.yml ran; and no
    role adds a named helm repository."""
    with open(os.path.join(ROOT, "roles", role, "tasks", tasks)) as handle:
        plays = yaml.safe_load(handle)
    names = [next(iter(t)) if "name" not in t else t["name"] for t in plays]
    (index,) = [i for i, t in enumerate(plays) if "kubernetes.core.helm" in t]
    adopt = [i for i, t in enumerate(plays) if t.get("ansible.builtin.include_tasks") == "adopt.yml"]
    assert adopt and adopt[0] < index, names
    helm = plays[index]["kubernetes.core.helm"]
    assert helm["values"] == "{{ %s_adoption.helm_values }}" % role
    assert not {"reuse_values", "reset_then_reuse_values", "reset_values", "update_repo_cache"} & set(helm)
    for directory, _dirs, files in os.walk(os.path.join(ROOT, "roles")):
        for name in files:
            if name.endswith(".yml"):
                with open(os.path.join(directory, name)) as handle:
                    assert "kubernetes.core.helm_repository" not in handle.read(), os.path.join(directory, name)
