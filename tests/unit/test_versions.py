"""files/lab/toolchain/versions.env is the one place that names fairgpu's pinned versions: the toolchain and the
roles read it, and no role, plugin, playbook, inventory or molecule scenario pins one of them again."""

import ast
import json
import os
import re
import subprocess
import sys

import pytest
import yaml

from ansible_collections.fairgpu.tenancy.plugins.module_utils.common.versions import versions_env
from ansible_collections.fairgpu.tenancy.plugins.module_utils.plan import resolve

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
VERSIONS_ENV = os.path.join(ROOT, "files", "lab", "toolchain", "versions.env")
with open(VERSIONS_ENV) as _handle:
    PINNED = versions_env(_handle.read())
SCANNED = ("roles", "plugins", "playbooks", "inventories", "extensions", "meta")


def test_versions_env_is_read_as_toolchain_sh_reads_it():
    assert versions_env("# KUEUE_VERSION=v0\nA_B=v1.2.3\nlower=x\nC=x=y\n\nD\nE=\n") == {"A_B": "v1.2.3", "C": "x=y", "E": ""}
    assert {"KUBERNETES_VERSION", "ETCD_VERSION", "KWOK_VERSION", "KUEUE_VERSION", "PROMETHEUS_VERSION",
            "GPU_OPERATOR_CHART_VERSION", "KUBE_PROMETHEUS_STACK_CHART_VERSION"} <= set(PINNED)
    out = subprocess.run(["bash", os.path.join(ROOT, "files", "lab", "toolchain", "toolchain.sh"), "manifest"],
                         env=dict(os.environ, FAIRGPU_CACHE="/nonexistent/fairgpu"),
                         check=False, capture_output=True, text=True, timeout=60)
    manifest = json.loads(out.stdout)["versions"]
    assert manifest == {name: PINNED[name.upper().replace("-", "_") + "_VERSION"] for name in manifest}


class _AnyTagLoader(yaml.SafeLoader):
    """SafeLoader that reads Ansible's tags (!unsafe, !vault) as plain values."""


_AnyTagLoader.add_multi_constructor("!", lambda loader, suffix, node: loader.construct_scalar(node)
                                    if isinstance(node, yaml.ScalarNode) else None)


def _scalars(value):
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in _scalars(k) + _scalars(v)]
    if isinstance(value, list):
        return [s for v in value for s in _scalars(v)]
    return [str(value)] if value is not None else []


def _python_strings(source):
    """String constants of a Python file, docstrings left out (they cite the upstream versions read)."""
    tree = ast.parse(source)
    docstrings = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) \
                and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
            docstrings.add(id(body[0].value))
    return [n.value for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docstrings]


def _values(path):
    """What a file sets, without its comments: YAML values and keys, Python string constants, template text."""
    with open(path) as handle:
        text = handle.read()
    if path.endswith((".yml", ".yaml")):
        return [s for doc in yaml.load_all(text, Loader=_AnyTagLoader) for s in _scalars(doc)]
    if path.endswith(".py"):
        return _python_strings(text)
    if path.endswith(".j2"):
        text = re.sub(r"\{#.*?#\}", "", text, flags=re.S)
        return [re.sub(r"(^|\s)#.*$", "", line) for line in text.splitlines()]
    return []


def _files():
    for top in SCANNED:
        for directory, _dirs, files in os.walk(os.path.join(ROOT, top)):
            for name in files:
                yield os.path.join(directory, name)


def test_nothing_else_pins_a_version_of_versions_env():
    patterns = {name: re.compile(r"(?<![\w.])v?%s(?![\w.])" % re.escape(value.lstrip("v")))
                for name, value in PINNED.items()}
    found = []
    for path in _files():
        for value in _values(path):
            found += ["%s: %r pins %s" % (os.path.relpath(path, ROOT), value, name)
                      for name, pattern in patterns.items() if pattern.search(value)]
    assert found == []


def _role_values(*extra):
    """The version variables as the roles' defaults and vars give them, templated by Ansible, with run_settings as
    the run role resolves it (role_path set as in a role, so its lookup of versions.env is the roles' own)."""
    files = ["-e@%s" % os.path.join(ROOT, "roles", role, kind, "main.yml")
             for role in ("run", "cluster", "kueue", "gpu_operator", "monitoring") for kind in ("defaults", "vars")
             if os.path.exists(os.path.join(ROOT, "roles", role, kind, "main.yml"))]
    files += ["-e", json.dumps({"run_settings": resolve.run_settings("site", "kind", versions=PINNED)})]
    names = ["cluster_kind_node_image", "kueue_chart_version", "gpu_operator_chart_version", "monitoring_chart_version"]
    expression = "{{ {%s} | to_json }}" % ", ".join("'%s': %s" % (name, name) for name in names)
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_STDOUT_CALLBACK="json",
               ANSIBLE_LOAD_CALLBACK_PLUGINS="1")
    run = subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible"), "localhost", "-m",
                          "ansible.builtin.debug", "-a", "msg=" + expression, "-e",
                          "role_path=" + os.path.join(ROOT, "roles", "kueue")] + files + list(extra),
                         cwd=ROOT, env=env, check=False, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr
    result = json.loads(run.stdout)["plays"][0]["tasks"][0]["hosts"]["localhost"]["msg"]
    return json.loads(result) if isinstance(result, str) else result


def test_roles_take_their_versions_from_versions_env():
    assert _role_values() == {
        "cluster_kind_node_image": "kindest/node:" + PINNED["KUBERNETES_VERSION"],
        "kueue_chart_version": PINNED["KUEUE_VERSION"].lstrip("v"),
        "gpu_operator_chart_version": PINNED["GPU_OPERATOR_CHART_VERSION"],
        "monitoring_chart_version": PINNED["KUBE_PROMETHEUS_STACK_CHART_VERSION"],
    }
    overridden = _role_values("-e", "lab_cluster_kubernetes_version=v1.35.1", "-e", "kueue_version=v0.20.0")
    assert overridden["kueue_chart_version"] == "0.20.0"
    # The embedded cluster's version is the lab's own; kind's node image is set with cluster_kind_node_image.
    assert overridden["cluster_kind_node_image"] == "kindest/node:" + PINNED["KUBERNETES_VERSION"]


@pytest.mark.parametrize("provider", ["kwok", "kind"])
def test_role_argument_specs_accept_the_defaults_in_a_play(tmp_path, provider):
    """Each role's argument validation (the only task --tags lets run) templates its defaults in the role, with
    the run's settings as the run role would set them."""
    (tmp_path / "run.json").write_text(json.dumps({"cluster_provider": provider,
                                                   "run_settings": resolve.run_settings("site", provider, versions=PINNED)}))
    playbook = tmp_path / "arguments.yml"
    playbook.write_text("- hosts: localhost\n  gather_facts: false\n  tasks:\n" + "".join(
        "    - {ansible.builtin.import_role: {name: fairgpu.tenancy.%s}}\n" % role
        for role in ("cluster", "lab_cluster", "kueue", "gpu_operator", "monitoring", "teardown")))
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"))
    run = subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), str(playbook),
                          "--tags", "fairgpu-none", "-e", "@%s" % (tmp_path / "run.json")],
                         cwd=ROOT, env=env, check=False, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and "ok=6" in run.stdout, run.stdout[-3000:] + run.stderr
