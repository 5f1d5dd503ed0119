"""One meaning per Kueue setting in every mode (plugins/module_utils/kueue/settings.py): from ONE inventory, the local
process's config.yaml and command line, the chart's values (mode helm) and render.yml's real tree (its kustomize
Component for Kueue's released manifests and its values.yaml) all make Kueue run with the same Configuration,
feature gates and integrations; what a mode cannot take is refused naming the variable and the mode.

Kueue v0.19.2 read for this: charts/kueue/templates/_helpers.tpl (kueue.featureGates), templates/manager/
manager-config.yaml and manager.yaml (the config-checksum annotation), config/components/manager (the ConfigMap
manager-config, prefixed kueue- by config/default), cmd/kueue/main.go (--feature-gates, component-base featuregate).
"""

import json
import os
import subprocess
import sys

import pytest
import yaml

from ansible_collections.fairgpu.tenancy.plugins.module_utils.kueue import settings
from ansible_collections.fairgpu.tenancy.plugins.module_utils.kueue.chart import chart_values
from ansible_collections.fairgpu.tenancy.plugins.module_utils.plan.manifests import kueue_component

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# The args of the manager container in Kueue's released manifests (config/components/manager/manager.yaml at v0.19.2,
# as `kustomize build config/default` leaves them): what the Component's JSON patch appends to.
RELEASE_ARGS = ["--config=/controller_manager_config.yaml", "--zap-log-level=2"]
# One inventory: every kueue_* setting away from its default.
INVENTORY = {
    "kueue_integrations": ["batch/job", "kubeflow.org/pytorchjob", "ray.io/rayjob"],
    "kueue_manage_jobs_without_queue_name": True,
    "kueue_fair_sharing_preemption_strategies": ["LessThanInitialShare"],
    "kueue_admission_fair_sharing": {"usageHalfLifeTime": "1h", "usageSamplingInterval": "5m",
                                     "resourceWeights": {"nvidia.com/gpu": 1, "cpu": 0}},
    "kueue_wait_for_pods_ready": {"timeout": "5m", "blockAdmission": True,
                                  "requeuingStrategy": {"timestamp": "Creation", "backoffLimitCount": 2}},
    "kueue_feature_gates": {"PartialAdmission": False, "TASProfileMixed": True},
}
EXPECTED = {
    "configuration": {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration", "namespace": "kueue-system",
        "manageJobsWithoutQueueName": True,
        "integrations": {"frameworks": ["batch/job", "kubeflow.org/pytorchjob", "ray.io/rayjob"]},
        "metrics": {"enableClusterQueueResources": True},
        "waitForPodsReady": INVENTORY["kueue_wait_for_pods_ready"],
        "fairSharing": {"preemptionStrategies": ["LessThanInitialShare"]},
        "admissionFairSharing": INVENTORY["kueue_admission_fair_sharing"],
    },
    "featureGates": {"PartialAdmission": False, "TASProfileMixed": True},
    "integrations": ["batch/job", "kubeflow.org/pytorchjob", "ray.io/rayjob"],
}


def ansible_playbook(path, *args):
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"))
    return subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), path] + list(args),
                          cwd=ROOT, env=env, check=False, capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def inventory(tmp_path_factory):
    path = tmp_path_factory.mktemp("inventory") / "kueue.json"
    path.write_text(json.dumps(INVENTORY))
    return str(path)


@pytest.fixture(scope="module")
def record(inventory, tmp_path_factory):
    out = tmp_path_factory.mktemp("record") / "record.json"
    run = ansible_playbook(os.path.join(ROOT, "tests", "unit", "fixtures", "kueue_modes", "record.yml"),
                           "-e", "@" + inventory, "-e", "kueue_modes_record=%s" % out)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr
    return json.loads(out.read_text())


@pytest.fixture(scope="module")
def rendered(inventory, tmp_path_factory):
    out = tmp_path_factory.mktemp("rendered")
    run = ansible_playbook(os.path.join(ROOT, "playbooks", "render.yml"), "-e", "@" + inventory,
                           "-e", "render_output_dir=%s" % out)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr
    return os.path.join(str(out), "embedded", "kueue")


def component_effective(files):
    """What Kueue runs with once the Component is applied to Kueue's released manifests: the ConfigMap patch's
    Configuration, the release's args plus what the JSON patch appends (test_70 builds it with real kustomize)."""
    config_map = yaml.safe_load(files["configmap-kueue-manager-config.yaml"])
    ops = yaml.safe_load(files["deployment-kueue-controller-manager.yaml"])
    args = RELEASE_ARGS + [op["value"] for op in ops if op["op"] == "add" and op["path"].endswith("/args/-")]
    return settings.effective_from_args(config_map["data"]["controller_manager_config.yaml"], args)


def read_tree(directory):
    files = {}
    for name in sorted(os.listdir(directory)):
        with open(os.path.join(directory, name)) as handle:
            files[name] = handle.read()
    return files


def test_every_mode_runs_with_what_the_inventory_says(record, rendered):
    local = settings.effective_from_args(record["local_config"], record["local_argv"][1:])
    helm = settings.effective_from_chart_values(record["chart_values"])
    tree = read_tree(rendered)
    render_component = component_effective(tree)
    render_values = settings.effective_from_chart_values(yaml.safe_load(tree["values.yaml"]))
    assert local == EXPECTED
    assert helm == EXPECTED
    assert render_component == EXPECTED
    assert render_values == EXPECTED
    assert record["render_chart_values"] == record["chart_values"]
    # The one difference, by design: only the local process turns the visibility server off.
    gates = [a for a in record["local_argv"] if a.startswith("--feature-gates=")]
    assert gates == ["--feature-gates=PartialAdmission=false,TASProfileMixed=true,VisibilityOnDemand=false"]
    assert record["errors"] == {"local": [], "helm": []}


def test_the_local_process_keeps_its_own_listeners_and_the_chart_its_own(record):
    local = yaml.safe_load(record["local_config"])
    assert local["leaderElection"] == {"leaderElect": False}
    assert local["internalCertManagement"] == {"enable": False}
    assert local["webhook"]["host"] == "127.0.0.1" and local["metrics"]["bindAddress"].startswith("127.0.0.1:")
    chart = yaml.safe_load(record["chart_values"]["managerConfig"]["controllerManagerConfigYaml"])
    assert chart["leaderElection"] == {"leaderElect": True}
    assert chart["internalCertManagement"] == {"enable": True, "webhookServiceName": "kueue-webhook-service",
                                               "webhookSecretName": "kueue-webhook-server-cert"}
    assert record["chart_values"]["controllerManager"]["featureGates"] == [
        {"name": "PartialAdmission", "enabled": False}, {"name": "TASProfileMixed", "enabled": True}]


def test_the_rendered_component_holds_no_object_of_its_own(rendered):
    tree = read_tree(rendered)
    kustomization = yaml.safe_load(tree["kustomization.yaml"])
    assert (kustomization["apiVersion"], kustomization["kind"]) == ("kustomize.config.k8s.io/v1alpha1", "Component")
    assert "resources" not in kustomization
    assert sorted(p["path"] for p in kustomization["patches"]) == [
        "configmap-kueue-manager-config.yaml", "deployment-kueue-controller-manager.yaml"]
    ops = yaml.safe_load(tree["deployment-kueue-controller-manager.yaml"])
    # The patch appends to args (a replaced args list loses --config: kubernetes-sigs/kueue#1427), after checking
    # that the first container is the manager.
    assert ops[0] == {"op": "test", "path": "/spec/template/spec/containers/0/name", "value": "manager"}
    assert not any(op["op"] == "replace" or op["path"].endswith("/args") for op in ops)
    annotation = [op for op in ops if "annotations" in op["path"]]
    assert [op["path"] for op in annotation] == [
        "/spec/template/metadata/annotations/fairgpu.io~1kueue-configuration-checksum"]


@pytest.mark.parametrize("mode", settings.MODES)
def test_fair_sharing_off_leaves_the_section_out_in_every_mode(mode):
    config = settings.configuration({"kueue_fair_sharing": False}, "kueue-system", mode)
    assert "fairSharing" not in config
    assert "fairSharing" in settings.configuration({"kueue_fair_sharing": True}, "kueue-system", mode)
    # From the command line (-e kueue_fair_sharing=false) it is a string.
    assert "fairSharing" not in settings.configuration({"kueue_fair_sharing": "false"}, "kueue-system", mode)


@pytest.mark.parametrize("mode", settings.MODES)
def test_admission_fair_sharing_is_there_only_when_set(mode):
    for off in (None, {}):
        assert "admissionFairSharing" not in settings.configuration({"kueue_admission_fair_sharing": off},
                                                                    "kueue-system", mode)
    assert "admissionFairSharing" not in settings.configuration({}, "kueue-system", mode)
    # Without resourceWeights the accelerators alone make the usage: memory counts in bytes (a Job's 2Gi would
    # outweigh its GPUs a billion times) and cpu and pods would count beside them.
    on = {"usageHalfLifeTime": "30s", "usageSamplingInterval": "5s"}
    assert settings.configuration({"kueue_admission_fair_sharing": on}, "kueue-system", mode)[
        "admissionFairSharing"] == dict(on, resourceWeights={"cpu": 0, "memory": 0, "pods": 0})
    # An interval left out is Kueue's default, written out; weights given are the inventory's.
    given = {"usageHalfLifeTime": "1h", "resourceWeights": {"nvidia.com/gpu": 2}}
    assert settings.configuration({"kueue_admission_fair_sharing": given}, "kueue-system", mode)[
        "admissionFairSharing"] == dict(given, usageSamplingInterval="5m")


@pytest.mark.parametrize("value, expected", [
    # kubernetes-sigs/kueue#11134: no half-life (Kueue leaves it 0s) or 0 is a silent FIFO.
    ({"usageSamplingInterval": "5m"}, ["kueue_admission_fair_sharing.usageHalfLifeTime: None; give a Go duration"]),
    ({"usageHalfLifeTime": "0s", "usageSamplingInterval": "5m"},
     ["kueue_admission_fair_sharing.usageHalfLifeTime: '0s'"]),
    ({"usageHalfLifeTime": "-1h", "usageSamplingInterval": "5m"},
     ["kueue_admission_fair_sharing.usageHalfLifeTime: '-1h'"]),
    ({"usageHalfLifeTime": "1h"}, []),
    ({"usageHalfLifeTime": "10m"},
     ["kueue_admission_fair_sharing.usageSamplingInterval: 5m is more than a quarter of usageHalfLifeTime 10m"]),
    ({"usageHalfLifeTime": "1h", "usageSamplingInterval": "0s"},
     ["kueue_admission_fair_sharing.usageSamplingInterval: '0s'; give a Go duration above 0"]),
    ({"usageHalfLifeTime": "1h", "usageSamplingInterval": "5 minutes"},
     ["kueue_admission_fair_sharing.usageSamplingInterval: '5 minutes'"]),
    # Sampling not well below the half-life: the usage would be the last sample's.
    ({"usageHalfLifeTime": "10m", "usageSamplingInterval": "5m"},
     ["kueue_admission_fair_sharing.usageSamplingInterval: 5m is more than a quarter of usageHalfLifeTime 10m"]),
    ({"usageHalfLifeTime": "20m", "usageSamplingInterval": "5m"}, []),
    # kubernetes-sigs/kueue#13596: a step below Kueue's 9 decimal places never enters the usage.
    ({"usageHalfLifeTime": "100000h", "usageSamplingInterval": "100ms"},
     ["kueue_admission_fair_sharing: usageSamplingInterval 100ms against usageHalfLifeTime 100000h moves the usage by"]),
    ({"usageHalfLifeTime": "168h", "usageSamplingInterval": "5m"}, []),
    ({"usageHalfLifeTime": "1h", "usageSamplingInterval": "5m", "resourceWeights": {"cpu": -1}},
     ["kueue_admission_fair_sharing.resourceWeights.cpu: -1 is not a finite number >= 0"]),
    ({"usageHalfLifeTime": "1h", "usageSamplingInterval": "5m", "resourceWeights": {"cpu": float("nan")}},
     ["kueue_admission_fair_sharing.resourceWeights.cpu: nan is not a finite number >= 0"]),
    ({"usageHalfLifeTime": "1h", "usageSamplingInterval": "5m", "halfLife": "1h"},
     ["kueue_admission_fair_sharing.halfLife: unknown key"]),
    ("1h", ["kueue_admission_fair_sharing: '1h' is not a mapping"]),
])
def test_admission_fair_sharing_that_would_not_act_is_refused(value, expected):
    for mode in settings.MODES:
        errors = settings.setting_errors({"kueue_admission_fair_sharing": value}, mode)
        assert len(errors) == len(expected), errors
        for error, start in zip(errors, expected):
            assert error.startswith(start), error


def test_admission_fair_sharing_with_its_gate_off_is_refused():
    value = {"usageHalfLifeTime": "1h", "usageSamplingInterval": "5m"}
    errors = settings.setting_errors({"kueue_admission_fair_sharing": value,
                                      "kueue_feature_gates": {"AdmissionFairSharing": False}}, "helm")
    assert len(errors) == 1 and "turns AdmissionFairSharing off" in errors[0], errors
    assert settings.setting_errors({"kueue_feature_gates": {"AdmissionFairSharing": False}}, "helm") == []


def test_usage_alpha_is_kueues_rate():
    """pkg/util/admissionfairsharing calculateAlphaRate: 1 - 0.5^(interval/half-life), 0 for a half-life of 0."""
    assert settings.usage_alpha(60, 60) == 0.5
    assert settings.usage_alpha(5, 0) == 0.0
    assert abs(settings.usage_alpha(15, 60) - (1 - 0.5 ** 0.25)) < 1e-12


@pytest.mark.parametrize("gates, mode, expected", [
    ({"VisibilityOnDemand": True}, "local",
     ["kueue_feature_gates.VisibilityOnDemand: true cannot run in kueue_mode local"]),
    ({"VisibilityOnDemand": True}, "helm", []),
    ({"VisibilityOnDemand": True}, "render", []),
    ({"PartialAdmission": "true"}, "helm", ["kueue_feature_gates.PartialAdmission: 'true' is not true or false (mode helm)"]),
    ({"partial-admission": True}, "render", ["kueue_feature_gates: 'partial-admission' is not a Kueue feature gate name"]),
])
def test_gates_a_mode_cannot_take_are_refused_naming_the_variable_and_the_mode(gates, mode, expected):
    errors = settings.setting_errors({"kueue_feature_gates": gates}, mode)
    assert len(errors) == len(expected), errors
    for error, start in zip(errors, expected):
        assert error.startswith(start), error


@pytest.mark.parametrize("extra, variable", [
    ({"controllerManager": {"featureGates": [{"name": "PartialAdmission", "enabled": True}]}},
     "kueue_extra_values.controllerManager.featureGates"),
    ({"managerConfig": {"controllerManagerConfigYaml": "kind: Configuration"}},
     "kueue_extra_values.managerConfig.controllerManagerConfigYaml"),
])
@pytest.mark.parametrize("mode", ["helm", "render"])
def test_chart_values_that_would_replace_a_setting_are_refused(extra, variable, mode):
    errors = settings.setting_errors({}, mode, extra)
    assert len(errors) == 1 and errors[0].startswith("%s: set in kueue_mode %s" % (variable, mode)), errors
    # Values beside them are fine (2 replicas, say), and local mode has no chart.
    assert settings.setting_errors({}, mode, {"controllerManager": {"replicas": 2}}) == []
    assert settings.setting_errors({}, "local", extra) == []


def test_render_refuses_before_writing_anything(tmp_path):
    run = ansible_playbook(os.path.join(ROOT, "playbooks", "render.yml"), "-e", "render_output_dir=%s" % tmp_path,
                           "-e", json.dumps({"kueue_extra_values": {"controllerManager": {"featureGates": []}}}))
    assert run.returncode != 0
    assert "kueue_extra_values.controllerManager.featureGates: set in kueue_mode render" in run.stdout, run.stdout[-2000:]
    assert os.listdir(tmp_path) == []


def test_chart_values_carry_gates_only_when_there_are_any():
    assert "controllerManager" not in chart_values("kind: Configuration\n", "main", {})
    values = chart_values("kind: Configuration\n", "v0.19.2", {"b": True, "A": False})
    assert values["controllerManager"]["featureGates"] == [{"name": "A", "enabled": False},
                                                           {"name": "b", "enabled": True}]
    assert values["controllerManager"]["manager"]["image"]["tag"] == "v0.19.2"


@pytest.mark.parametrize("arg, gates", [
    ("A=true,B=false", {"A": True, "B": False}),
    ("A=1,B=F,", {"A": True, "B": False}),
    ("", {}),
])
def test_feature_gates_arg_reads_as_component_base_does(arg, gates):
    assert settings.parse_feature_gates_arg(arg) == gates
    assert settings.parse_feature_gates_arg(settings.feature_gates_arg(gates)) == gates


@pytest.mark.parametrize("arg", ["A", "A=yes", "A=true,B"])
def test_a_malformed_feature_gates_arg_is_an_error(arg):
    with pytest.raises(ValueError):
        settings.parse_feature_gates_arg(arg)


def test_the_checksum_changes_exactly_when_what_kueue_reads_changes():
    config = settings.configuration({}, "kueue-system", "render")
    base = settings.checksum(config, {})
    assert settings.checksum(settings.configuration({}, "kueue-system", "render"), {}) == base
    assert settings.checksum(settings.configuration({"kueue_fair_sharing": False}, "kueue-system", "render"), {}) != base
    assert settings.checksum(config, {"PartialAdmission": True}) != base
    files = kueue_component(config, {})
    changed = kueue_component(settings.configuration({"kueue_integrations": ["batch/job", "pod"]}, "kueue-system",
                                                     "render"), {})
    assert files["deployment-kueue-controller-manager.yaml"] != changed["deployment-kueue-controller-manager.yaml"]
    assert kueue_component(config, {}) == files


def test_every_setting_of_the_role_is_in_the_table():
    """The table (settings.TABLE, and its words in docs/kueue.md "One meaning per Kueue setting, in every mode")
    lists every Configuration setting of the role's defaults."""
    with open(os.path.join(ROOT, "roles", "kueue", "defaults", "main.yml")) as handle:
        defaults = yaml.safe_load(handle)
    mode_only = {"kueue_state", "kueue_version", "kueue_wait_timeout", "kueue_chart_ref", "kueue_chart_version", "kueue_release_name",
                 "kueue_extra_values", "kueue_adopt"}
    assert set(defaults) - mode_only == {name for name, _where in settings.TABLE} == set(settings.DEFAULTS)
    assert docs_table_settings() == {name for name, _where in settings.TABLE}


def docs_table_settings():
    """The settings the table of docs/kueue.md names in its first column (the section "One meaning per Kueue
    setting, in every mode")."""
    with open(os.path.join(ROOT, "docs", "kueue.md"), encoding="utf-8") as handle:
        text = handle.read()
    section = text.split("## One meaning per Kueue setting, in every mode", 1)[1].split("\n## ", 1)[0]
    names = set()
    for line in section.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if line.startswith("|") and cells[0].startswith("`kueue_") and cells[0].endswith("`"):
            names.add(cells[0].strip("`"))
    return names
