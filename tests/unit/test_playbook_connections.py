"""Every play that reaches a cluster reaches the inventory host's own cluster: its module_defaults give the action
group fairgpu.tenancy.cluster (fairgpu's modules, kubernetes.core's k8s and helm groups) the host's kubeconfig and
context as the run resolved them (run_settings.connection.auth), so no task falls back to the user's current kube
context; and every playbook resolves the run first, through playbooks/preflight.yml."""

import os

import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PLAYBOOKS = ("site.yml", "tenants.yml", "validate.yml", "teardown.yml", "replay.yml", "render.yml")
CONNECTION = {"group/fairgpu.tenancy.cluster": "{{ run_settings.connection.auth }}"}


def _plays(name):
    with open(os.path.join(ROOT, "playbooks", name)) as handle:
        return yaml.safe_load(handle)


def _reaches_a_cluster(play):
    text = yaml.safe_dump(play)
    return any(word in text for word in ("kubernetes.core.", "fairgpu.tenancy.", "roles"))


@pytest.mark.parametrize("name", PLAYBOOKS + ("preflight.yml",))
def test_every_play_that_reaches_a_cluster_names_the_hosts_own(name):
    for play in _plays(name):
        if "import_playbook" in play or "ansible.builtin.import_playbook" in play or not _reaches_a_cluster(play):
            continue
        if name == "render.yml" and play.get("name") == "Render the manifests of every cluster":
            assert "module_defaults" not in play, "render.yml's own play reaches no cluster"
            continue
        assert play.get("module_defaults") == CONNECTION, (name, play.get("name"))


def test_the_action_group_holds_every_module_that_reaches_a_cluster():
    with open(os.path.join(ROOT, "meta", "runtime.yml")) as handle:
        group = yaml.safe_load(handle)["action_groups"]["cluster"]
    extended = next(entry["metadata"]["extend_group"] for entry in group if isinstance(entry, dict))
    assert extended == ["kubernetes.core.k8s", "kubernetes.core.helm"]
    modules = os.listdir(os.path.join(ROOT, "plugins", "modules"))
    for module in modules:
        with open(os.path.join(ROOT, "plugins", "modules", module)) as handle:
            if "kubernetes.core.k8s_auth_options" in handle.read():
                assert module[:-len(".py")] in group, module


@pytest.mark.parametrize("name", PLAYBOOKS)
def test_every_playbook_first_resolves_the_run(name):
    """The run's settings and the host's connection come first, before any role reaches a cluster:
    every playbook imports preflight.yml first, naming itself."""
    first = _plays(name)[0]
    assert first["ansible.builtin.import_playbook"] == "preflight.yml"
    assert first["vars"]["run_playbook"] == name[:-len(".yml")]


def test_the_preflight_resolves_the_run_before_any_task_reaches_a_cluster():
    for play in _plays("preflight.yml"):
        first = play["tasks"][0]
        assert first["ansible.builtin.include_role"] == {"name": "fairgpu.tenancy.run"}
    with open(os.path.join(ROOT, "roles", "run", "tasks", "main.yml")) as handle:
        tasks = yaml.safe_load(handle)
    assert "fairgpu.tenancy.run_settings" in tasks[0]
