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


def _first_task(play):
    first = (play.get("pre_tasks") or play.get("tasks"))[0]
    return first["block"][0] if "block" in first else first


@pytest.mark.parametrize("name", PLAYBOOKS + ("render.yml",))
def test_every_playbook_first_resolves_the_run(name):
    """The run's settings and the host's kubeconfig come first, before any role reaches a cluster: the first task
    of the first play (site.yml's later roll-out play and validate.yml's verdict play run on its facts)."""
    with open(os.path.join(ROOT, "playbooks", name)) as handle:
        play = yaml.safe_load(handle)[0]
    first = _first_task(play)
    assert first["ansible.builtin.include_role"] == {"name": "fairgpu.tenancy.run"}
    assert first["vars"] == {"run_playbook": name[:-len(".yml")]}


def test_the_run_role_resolves_the_kubeconfig_before_any_task_reaches_a_cluster():
    with open(os.path.join(ROOT, "roles", "run", "tasks", "main.yml")) as handle:
        tasks = yaml.safe_load(handle)
    modules = [next(key for key in task if "." in key) for task in tasks if "block" not in task]
    assert modules[:3] == ["ansible.builtin.set_fact", "ansible.builtin.assert", "ansible.builtin.include_role"]
    assert tasks[2]["ansible.builtin.include_role"]["name"] == "fairgpu.tenancy.cluster"
    assert "kubeconfig.yml" in tasks[2]["ansible.builtin.include_role"]["tasks_from"]
