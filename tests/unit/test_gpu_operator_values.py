"""The GPU Operator chart values the gpu_operator role hands to helm (chart v25.10.1), rendered from the role's
defaults and vars with Ansible's own Templar, as a play would, and the checks of plugins/module_utils/gpu_operator_values.

Upstream facts the assertions rest on (tags of the pinned chart and of its toolkit v1.18.1):
- NVIDIA/gpu-operator v25.10.1 deployments/gpu-operator/values.yaml: ``cdi.enabled: true``, ``toolkit.version: v1.18.1``.
- NVIDIA/gpu-operator v25.10.1 controllers/object_controls.go: with CDI on the device plugin gets
  ``DEVICE_LIST_STRATEGY=cdi-annotations,cdi-cri`` and then ``devicePlugin.env`` / ``toolkit.env`` in order
  (``setContainerEnv`` replaces by name).
- NVIDIA/nvidia-container-toolkit v1.18.1 cmd/nvidia-ctk-installer/toolkit/toolkit.go: env
  ``ACCEPT_NVIDIA_VISIBLE_DEVICES_ENVVAR_WHEN_UNPRIVILEGED`` (default true), ``ACCEPT_NVIDIA_VISIBLE_DEVICES_AS_VOLUME_MOUNTS``
  (default false).
"""

import json
import os
import subprocess
import sys

import pytest
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar

from ansible_collections.fairgpu.tenancy.plugins.module_utils.cluster import gpu_operator_values as gov
from ansible_collections.fairgpu.tenancy.plugins.module_utils.plan import resolve

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ROLE = os.path.join(ROOT, "roles", "gpu_operator")
ENVVAR = "ACCEPT_NVIDIA_VISIBLE_DEVICES_ENVVAR_WHEN_UNPRIVILEGED"
MOUNTS = "ACCEPT_NVIDIA_VISIBLE_DEVICES_AS_VOLUME_MOUNTS"


def helm_values(**inventory):
    """The ``values`` of the role's helm task, templated with the role's defaults, then ``inventory`` (inventory or
    play variables: above role defaults), then the role's vars (above both), as Ansible's precedence orders them."""
    loader = DataLoader()
    variables = dict(loader.load_from_file(os.path.join(ROLE, "defaults", "main.yml"), trusted_as_template=True))
    # The run's settings (fairgpu.tenancy.run) of a cluster with the GPU Operator chart, path kueue.
    variables["run_settings"] = resolve.run_settings("site", "existing")
    variables.update(inventory)
    variables.update(loader.load_from_file(os.path.join(ROLE, "vars", "main.yml"), trusted_as_template=True))
    # What tasks/adopt.yml hands to fairgpu.tenancy.helm_release_adoption, whose helm_values the helm task passes
    # (fairgpu's marker added, or merged over an existing release's values: tests/unit/test_helm_release.py).
    (task,) = [t for t in loader.load_from_file(os.path.join(ROLE, "tasks", "adopt.yml"), trusted_as_template=True)
               if "fairgpu.tenancy.helm_release_adoption" in t]
    return Templar(loader=loader, variables=variables).template(task["fairgpu.tenancy.helm_release_adoption"]["values"])


def toolkit_env(values):
    return gov.effective_env(values["toolkit"]["env"])


def test_default_values_cdi_on_toolkit_refuses_the_envvar_rest_as_before():
    values = helm_values()
    assert values["cdi"] == {"enabled": True}
    # The operator sets the device plugin's strategy for CDI itself: the role gives the device plugin no env at all.
    assert _no_device_list_strategy(values)
    env = toolkit_env(values)
    # Strings, not YAML booleans: the ClusterPolicy's EnvVar.value is a string.
    assert env[ENVVAR] == "false" and isinstance(env[ENVVAR], str)
    assert env[MOUNTS] == "false" and isinstance(env[MOUNTS], str)
    assert values["mig"] == {"strategy": "single"}
    assert values["migManager"] == {"enabled": True,
                                    "config": {"name": "fairgpu-mig-parted-config", "default": "all-disabled"}}
    assert values["dcgmExporter"] == {"enabled": True}
    assert gov.values_errors(values) == []
    assert gov.toolkit_setting(values, gov.ACCEPT_ENVVAR_UNPRIVILEGED) is False


def _no_device_list_strategy(values):
    return gov.DEVICE_LIST_STRATEGY not in gov.effective_env((values.get("devicePlugin") or {}).get("env"))


@pytest.mark.parametrize("given, expected", [(True, "true"), ("false", "false"), ("true", "true"), ("no", "false")])
def test_toolkit_switch_overridable_and_always_a_go_boolean_string(given, expected):
    """-e gives strings ("false"), the inventory booleans; both end as the strings the installer parses."""
    values = helm_values(gpu_operator_toolkit_accept_envvar_unprivileged=given,
                         gpu_operator_toolkit_accept_volume_mounts=given)
    assert toolkit_env(values) == {ENVVAR: expected, MOUNTS: expected}


def test_cdi_overridable_and_then_checked():
    values = helm_values(gpu_operator_cdi_enabled=False)
    assert values["cdi"] == {"enabled": False}
    # CDI off and the envvar refused: the device plugin's default envvar strategy would give pods nothing.
    assert any("CDI is off" in e for e in gov.values_errors(values))


def test_mig_and_exporter_variables_still_apply():
    values = helm_values(run_settings=resolve.run_settings("site", "existing", "mig"), gpu_operator_mig_manager_enabled=False,
                         gpu_operator_dcgm_exporter_enabled=False, gpu_operator_mig_config_name="custom")
    assert values["mig"] == {"strategy": "mixed"}
    assert values["migManager"]["enabled"] is False
    # The ConfigMap the mig_config role writes, named once by the run's settings.
    assert values["migManager"]["config"]["name"] == resolve.MIG_PARTED_CONFIG_NAME
    assert values["dcgmExporter"] == {"enabled": False}


def test_extra_values_merge_over_the_roles():
    # k3s / RKE2 / MicroK8s need toolkit.env entries of their own (k3s-io/k3s pull 11065, NVIDIA/gpu-operator
    # issue 1502): they are appended, the role's hardening stays.
    socket = {"name": "CONTAINERD_SOCKET", "value": "/run/k3s/containerd/containerd.sock"}
    values = helm_values(gpu_operator_extra_values={
        "driver": {"enabled": False},
        "dcgmExporter": {"enabled": False},
        "migManager": {"config": {"default": "all-1g.10gb"}},
        "toolkit": {"env": [socket], "version": "v1.18.2"},
    })
    assert values["driver"] == {"enabled": False}
    assert values["dcgmExporter"] == {"enabled": False}
    assert values["migManager"] == {"enabled": True,
                                    "config": {"name": "fairgpu-mig-parted-config", "default": "all-1g.10gb"}}
    assert values["toolkit"]["version"] == "v1.18.2"
    assert values["toolkit"]["env"][-1] == socket
    assert toolkit_env(values) == {ENVVAR: "false", MOUNTS: "false", "CONTAINERD_SOCKET": socket["value"]}
    assert values["cdi"] == {"enabled": True} and gov.values_errors(values) == []


def test_an_extra_entry_of_the_same_name_comes_later_and_wins():
    values = helm_values(gpu_operator_extra_values={"toolkit": {"env": [{"name": ENVVAR, "value": "true"}]}})
    assert [e["name"] for e in values["toolkit"]["env"]] == [ENVVAR, MOUNTS, ENVVAR]
    assert toolkit_env(values)[ENVVAR] == "true"
    assert gov.toolkit_setting(values, gov.ACCEPT_ENVVAR_UNPRIVILEGED) is True


# NVIDIA/gpu-operator issue 1876 (upgrade to v25.10.0, "Pod with GPU will not start": unresolvable CDI devices):
# the values that had worked before CDI became the default.
ISSUE_1876 = {
    "toolkit": {"env": [{"name": MOUNTS, "value": "true"}, {"name": ENVVAR, "value": "false"}]},
    "devicePlugin": {"env": [{"name": "PASS_DEVICE_SPECS", "value": "true"},
                             {"name": "FAIL_ON_INIT_ERROR", "value": "true"},
                             {"name": "DEVICE_LIST_STRATEGY", "value": "volume-mounts"}]},
}


def test_issue_1876_device_list_strategy_under_cdi_is_refused():
    errors = gov.values_errors(helm_values(gpu_operator_extra_values=ISSUE_1876))
    assert len(errors) == 1 and "DEVICE_LIST_STRATEGY=volume-mounts" in errors[0] and "cdi-annotations,cdi-cri" in errors[0]


def test_issue_372_volume_mounts_recipe_is_accepted_without_cdi():
    """The maintainers' recipe for a set-up without CDI (NVIDIA/gpu-operator issue 372): device plugin
    volume-mounts, toolkit accepting mounts and refusing the envvar."""
    values = helm_values(gpu_operator_cdi_enabled=False, gpu_operator_toolkit_accept_volume_mounts=True,
                         gpu_operator_extra_values={"devicePlugin": {"env": [
                             {"name": "DEVICE_LIST_STRATEGY", "value": "volume-mounts"}]}})
    assert gov.values_errors(values) == []
    # Half of it (mounts accepted, plugin still on envvar) is not enough.
    values = helm_values(gpu_operator_cdi_enabled=False, gpu_operator_toolkit_accept_volume_mounts=True)
    assert any("CDI is off" in e for e in gov.values_errors(values))


def test_without_cdi_and_envvar_accepted_nothing_to_refuse():
    values = helm_values(gpu_operator_cdi_enabled=False, gpu_operator_toolkit_accept_envvar_unprivileged=True)
    assert gov.values_errors(values) == []


@pytest.mark.parametrize("entry, message", [
    ({"name": ENVVAR, "value": False}, "must be a string"),
    ({"name": ENVVAR, "value": "no"}, "not a boolean the toolkit's installer reads"),
    ({"value": "x"}, "needs a name"),
])
def test_bad_toolkit_entries(entry, message):
    errors = gov.values_errors({"toolkit": {"env": [entry]}})
    assert len(errors) == 1 and message in errors[0]


def test_helpers():
    assert gov.effective_env([{"name": "A", "value": "1"}, {"name": "B", "value": "2"}, {"name": "A", "value": "3"}]) \
        == {"A": "3", "B": "2"}
    assert gov.cdi_enabled({}) is True and gov.cdi_enabled({"cdi": {"enabled": False}}) is False
    assert gov.toolkit_setting({}, ENVVAR) is True and gov.toolkit_setting({}, MOUNTS) is False
    assert [gov.parse_go_bool(s) for s in ("1", "T", "False", "yes")] == [True, True, False, None]


def _run_check(tmp_path, extra):
    """The role's own check task (tasks/check.yml) in a play, with the role's defaults and vars and ``extra`` as -e."""
    playbook = tmp_path / "check.yml"
    playbook.write_text("- hosts: localhost\n  gather_facts: false\n  tasks:\n"
                        "    - ansible.builtin.include_role: {name: fairgpu.tenancy.gpu_operator, tasks_from: check}\n")
    (tmp_path / "extra.json").write_text(json.dumps(extra))
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"))
    return subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), str(playbook),
                           "-e", "@%s" % (tmp_path / "extra.json")],
                          cwd=ROOT, env=env, check=False, capture_output=True, text=True, timeout=120)


def test_role_check_task_passes_the_defaults_and_refuses_issue_1876(tmp_path):
    run = _run_check(tmp_path, {})
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr
    run = _run_check(tmp_path, {"gpu_operator_extra_values": ISSUE_1876})
    assert run.returncode != 0 and "DEVICE_LIST_STRATEGY=volume-mounts" in run.stdout, run.stdout[-3000:]
