"""Module fairgpu.tenancy.component_namespace against a fake API server (tests/unit/fake_api.py): a missing namespace
is created with the level of its component's row (cluster/pod_security.py), fairgpu's own is labelled again with no
change, a platform team's keeps its labels, and check mode writes nothing."""

import pytest

from ansible_collections.fairgpu.tenancy.plugins.modules import component_namespace

import fake_api

ENFORCE = "pod-security.kubernetes.io/enforce"


class Module(object):
    def __init__(self, check_mode=False, **params):
        self.params = dict(name="gpu-operator", component="gpu_operator", mode="helm", install_chart=True,
                           kueue_values={})
        self.params.update(params)
        self.check_mode, self._diff = check_mode, False


def converge(api, **params):
    api.dry_run = params.get("check_mode", False)
    return component_namespace.converge(Module(**params), api)


@pytest.mark.parametrize("component, mode, level", [
    ("gpu_operator", "helm", "privileged"),
    ("kueue", "helm", "restricted"),
    ("monitoring", "helm", "privileged"),
])
def test_a_missing_namespace_is_created_with_its_components_level_and_a_second_run_changes_nothing(component, mode,
                                                                                                   level):
    api = fake_api.FakeApi()
    first = converge(api, name="ns", component=component, mode=mode)
    assert first["changed"] and first["action"] == "create"
    labels = api.objects[("Namespace", None, "ns")]["metadata"]["labels"]
    assert labels[ENFORCE] == level and labels["app.kubernetes.io/managed-by"] == "fairgpu"
    assert first["line"] == "ns: created by fairgpu, Pod Security %s (enforce, audit, warn)" % level
    second = converge(api, name="ns", component=component, mode=mode)
    assert not second["changed"] and second["action"] == "label"


def test_kueue_with_host_network_needs_privileged():
    api = fake_api.FakeApi()
    converge(api, name="kueue-system", component="kueue", kueue_values={"controllerManager": {"hostNetwork": True}})
    assert api.objects[("Namespace", None, "kueue-system")]["metadata"]["labels"][ENFORCE] == "privileged"


def test_a_platform_teams_namespace_keeps_its_labels():
    theirs = {"apiVersion": "v1", "kind": "Namespace",
              "metadata": {"name": "team-gpu", "labels": {ENFORCE: "privileged"},
                           "managedFields": [{"manager": "kubectl-label", "operation": "Update"}]}}
    api = fake_api.FakeApi([theirs])
    result = converge(api, name="team-gpu")
    assert not result["changed"] and result["action"] == "keep" and api.writes == []
    assert api.objects[("Namespace", None, "team-gpu")]["metadata"]["labels"] == {ENFORCE: "privileged"}


def test_check_mode_writes_nothing():
    api = fake_api.FakeApi()
    result = converge(api, check_mode=True)
    assert result["changed"] and result["action"] == "create" and api.writes == []
