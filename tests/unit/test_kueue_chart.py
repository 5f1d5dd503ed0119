"""The values fairgpu gives Kueue's chart and the check of a local chart (plugins/module_utils/kueue/chart.py),
against the chart's own rules in charts/kueue of sigs.k8s.io/kueue v0.19.2 (templates/_helpers.tpl kueue.fullname,
templates/manager/manager-config.yaml, tests/manager_config_test.yaml)."""

import pytest
import yaml

from ansible_collections.fairgpu.tenancy.plugins.module_utils.kueue.chart import (
    chart_ref_errors,
    chart_ref_kind,
    chart_values,
    fullname,
    object_names,
    release_configuration,
    release_image_tag,
)

CONFIG = {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration", "namespace": "kueue-system",
          "internalCertManagement": {"enable": True}, "webhook": {"port": 9443}}


@pytest.mark.parametrize("release, name_override, full_override, expected", [
    ("kueue", "", "", "kueue"),
    # tests/manager_config_test.yaml: a release name that contains the chart name is the fullname.
    ("custom-kueue-name", "", "", "custom-kueue-name"),
    ("batch", "", "", "batch-kueue"),
    ("batch", "", "full-override", "full-override"),
    ("batch", "queues", "", "batch-queues"),
    ("x" * 70, "", "", "x" * 63),
    ("a" * 62 + "-", "", "", "a" * 62),
])
def test_fullname_follows_the_charts_helper(release, name_override, full_override, expected):
    assert fullname(release, name_override, full_override) == expected


def test_the_default_release_names_the_objects_local_mode_and_kustomize_use():
    names = object_names("kueue")
    assert names["webhook_service"] == "kueue-webhook-service"
    assert names["webhook_secret"] == "kueue-webhook-server-cert"
    assert names["config_map"] == "kueue-manager-config"
    assert names["deployment"] == "kueue-controller-manager"
    assert names["metrics_service"] == "kueue-controller-manager-metrics-service"


def test_another_release_name_gets_its_own_certificate_objects():
    """kubernetes-sigs/kueue#6797: with internal cert management named after another release, the controller never
    gets its certificate. The chart fills the names in only when the Configuration has no such section."""
    config = release_configuration(CONFIG, "team-kueue")
    assert config["internalCertManagement"] == {"enable": True, "webhookServiceName": "team-kueue-webhook-service",
                                                "webhookSecretName": "team-kueue-webhook-server-cert"}
    assert CONFIG["internalCertManagement"] == {"enable": True}
    override = release_configuration(CONFIG, "kueue", {"fullnameOverride": "full-override"})
    assert override["internalCertManagement"]["webhookServiceName"] == "full-override-webhook-service"


def test_a_configuration_without_the_section_gets_it_and_cert_manager_is_left_alone():
    bare = dict(CONFIG)
    del bare["internalCertManagement"]
    assert release_configuration(bare, "kueue")["internalCertManagement"] == {
        "enable": True, "webhookServiceName": "kueue-webhook-service", "webhookSecretName": "kueue-webhook-server-cert"}
    off = dict(CONFIG, internalCertManagement={"enable": False})
    assert release_configuration(off, "other")["internalCertManagement"] == {"enable": False}
    named = dict(CONFIG, internalCertManagement={"enable": True, "webhookServiceName": "mine"})
    assert release_configuration(named, "kueue")["internalCertManagement"]["webhookServiceName"] == "mine"


@pytest.mark.parametrize("version, tag", [("v0.19.2", "v0.19.2"), ("0.19.2", "v0.19.2"), ("v0.19.2-rc.1", None),
                                          ("release-0.19", None), ("", None)])
def test_only_a_release_has_an_image_tag(version, tag):
    assert release_image_tag(version) == tag


def test_values_carry_the_configuration_text_and_the_release_image():
    text = yaml.safe_dump(CONFIG)
    values = chart_values(text, "v0.19.2")
    assert yaml.safe_load(values["managerConfig"]["controllerManagerConfigYaml"]) == CONFIG
    assert values["controllerManager"]["manager"]["image"] == {
        "repository": "registry.k8s.io/kueue/kueue", "tag": "v0.19.2", "pullPolicy": "IfNotPresent"}
    assert "controllerManager" not in chart_values(text, "main")


@pytest.mark.parametrize("ref, kind", [
    ("oci://registry.k8s.io/kueue/charts/kueue", "remote"), ("https://example.org/kueue-0.19.2.tgz", "remote"),
    ("/home/u/.cache/fairgpu/helm-v3.22.0/charts/kueue-v0.19.2", "path"), ("./charts/kueue", "path"),
    ("~/charts/kueue", "path"), ("kueue-0.19.2.tgz", "path"), ("mirror/kueue", "repository"),
])
def test_chart_ref_kind(ref, kind):
    assert chart_ref_kind(ref) == kind


def test_a_local_chart_must_exist_be_kueues_and_of_the_version():
    assert chart_ref_errors("oci://registry.k8s.io/kueue/charts/kueue", version="0.19.2") == []
    assert chart_ref_errors("/c/kueue", True, {"name": "kueue", "version": "0.19.2"}, "0.19.2") == []
    [missing] = chart_ref_errors("/c/kueue-0.19.2.tgz", False, None, "0.19.2")
    assert missing.startswith("kueue_chart_ref: /c/kueue-0.19.2.tgz does not exist;") and "--version 0.19.2" in missing
    [other] = chart_ref_errors("/c/x", True, {"name": "gpu-operator", "version": "v25.10.1"}, "0.19.2")
    assert other == "kueue_chart_ref: /c/x is not Kueue's chart (its Chart.yaml names 'gpu-operator')"
    # helm ignores --version for a local chart (helm v3.22.0 `helm show chart <dir> --version 0.18.0` prints 0.19.2).
    [stale] = chart_ref_errors("/c/kueue-0.18.1.tgz", True, {"name": "kueue", "version": "0.18.1"}, "0.19.2")
    assert stale.startswith("kueue_chart_ref: /c/kueue-0.18.1.tgz is chart version 0.18.1, but kueue_chart_version "
                            "is 0.19.2")
    assert chart_ref_errors("  ", version="0.19.2")[0].startswith("kueue_chart_ref: empty")
