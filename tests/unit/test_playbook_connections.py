"""Every play that reaches a cluster reaches the inventory host's own cluster: its module_defaults give the
kubernetes.core k8s and helm groups and fairgpu's modules the host's kubeconfig and context (the facts of
roles/cluster/tasks/kubeconfig.yml), so no task falls back to the user's current kube context."""

import os

import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PLAYBOOKS = ("site.yml", "tenants.yml", "validate.yml", "teardown.yml")
GROUPS = ("group/kubernetes.core.k8s", "group/kubernetes.core.helm", "group/fairgpu.tenancy.k8s")


@pytest.mark.parametrize("name", PLAYBOOKS)
def test_every_play_names_the_hosts_cluster(name):
    with open(os.path.join(ROOT, "playbooks", name)) as handle:
        plays = yaml.safe_load(handle)
    for play in plays:
        defaults = play.get("module_defaults") or {}
        for group in GROUPS:
            assert defaults.get(group) == {"kubeconfig": "{{ cluster_kubeconfig_path | default(omit) }}",
                                           "context": "{{ cluster_context_name | default('', true) or omit }}"}, \
                (name, play.get("name"), group)


def test_teardown_resolves_the_kubeconfig_before_any_role_reaches_a_cluster():
    with open(os.path.join(ROOT, "playbooks", "teardown.yml")) as handle:
        tasks = yaml.safe_load(handle)[0]["tasks"]
    first = tasks[0]["ansible.builtin.include_role"]
    assert (first["name"], first["tasks_from"]) == ("fairgpu.tenancy.cluster", "kubeconfig.yml")
