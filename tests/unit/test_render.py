"""The kustomize tree of render.yml: layout, stable bytes, and the checked-in example kept in step with the
roles (the example is render.yml's output for inventories/local)."""

import filecmp
import functools
import json
import os
import subprocess
import sys

import yaml

from ansible_collections.fairgpu.tenancy.plugins.module_utils.plan.manifests import kustomize_tree
from ansible_collections.fairgpu.tenancy.plugins.module_utils.tenants.plan import tenant_plan

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLE = os.path.join(ROOT, "examples", "manifests")
NODES = [{"metadata": {"name": "gpu-%d" % i, "labels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}},
          "status": {"allocatable": {"cpu": "96", "memory": "1Ti", "nvidia.com/gpu": "8", "pods": "110"}}}
         for i in range(2)]
TEAMS = [{"name": "team-a", "gpus": 8, "namespaces": ["team-a", "team-a-dev"]}, {"name": "team-b", "gpus": 8}]


def test_layout_base_and_one_directory_per_tenant():
    objects = tenant_plan(TEAMS, NODES)["objects"]
    tree = kustomize_tree(objects, {"configuration": {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration"}})
    top = yaml.safe_load(tree["kustomization.yaml"])
    assert top["resources"] == ["base", "tenants/team-a", "tenants/team-b"]
    base = yaml.safe_load(tree["base/kustomization.yaml"])["resources"]
    assert "clusterqueue-team-a.yaml" in base and "cohort-fairgpu.yaml" in base
    team_a = yaml.safe_load(tree["tenants/team-a/kustomization.yaml"])["resources"]
    assert "namespace-team-a-dev.yaml" in team_a and "team-a-dev-resourcequota-fairgpu-gpu-quota.yaml" in team_a
    assert all(("tenants/team-a/" + name) in tree for name in team_a)
    # Every object once, unchanged by the layout.
    laid_out = [yaml.safe_load(text) for path, text in tree.items()
                if not path.endswith("kustomization.yaml") and not path.startswith("kueue/")]
    canonical = functools.partial(json.dumps, sort_keys=True)
    assert sorted(map(canonical, laid_out)) == sorted(map(canonical, objects))
    config = yaml.safe_load(tree["kueue/configmap-kueue-manager-config.yaml"])
    assert config["metadata"] == {"name": "kueue-manager-config", "namespace": "kueue-system"}
    assert yaml.safe_load(config["data"]["controller_manager_config.yaml"])["kind"] == "Configuration"


def test_monitoring_objects_get_a_directory_of_their_own():
    rule = {"apiVersion": "monitoring.coreos.com/v1", "kind": "PrometheusRule",
            "metadata": {"name": "fairgpu-alerts", "namespace": "fairgpu-monitoring"}}
    tree = kustomize_tree(tenant_plan(TEAMS, NODES)["objects"], monitoring_objects=[rule])
    assert yaml.safe_load(tree["monitoring/kustomization.yaml"])["resources"] == [
        "fairgpu-monitoring-prometheusrule-fairgpu-alerts.yaml"]
    assert "monitoring" not in yaml.safe_load(tree["kustomization.yaml"])["resources"], \
        "the top tree must apply on a cluster without the Prometheus Operator's CRDs"


def test_same_input_same_bytes():
    assert kustomize_tree(tenant_plan(TEAMS, NODES)["objects"]) == kustomize_tree(tenant_plan(TEAMS, NODES)["objects"])


def test_objects_of_platform_namespaces_go_to_base():
    platform = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "mig", "namespace": "gpu-operator"}}
    tree = kustomize_tree(tenant_plan(TEAMS, NODES)["objects"] + [platform])
    assert "gpu-operator-configmap-mig.yaml" in yaml.safe_load(tree["base/kustomization.yaml"])["resources"]


def test_checked_in_example_is_what_render_writes(tmp_path):
    """examples/manifests must be rendered again when the roles' objects change:
    ansible-playbook playbooks/render.yml -e render_output_dir=$PWD/examples/manifests"""
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"))
    run = subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible-playbook"),
                          os.path.join(ROOT, "playbooks", "render.yml"), "-e", "render_output_dir=%s" % tmp_path],
                         cwd=ROOT, env=env, check=False, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr
    rendered = sorted(os.path.relpath(os.path.join(d, f), tmp_path) for d, _dirs, fs in os.walk(tmp_path) for f in fs)
    example = sorted(os.path.relpath(os.path.join(d, f), EXAMPLE) for d, _dirs, fs in os.walk(EXAMPLE) for f in fs)
    assert rendered == example
    _match, mismatch, errors = filecmp.cmpfiles(tmp_path, EXAMPLE, rendered, shallow=False)
    assert (mismatch, errors) == ([], []), "examples/manifests is out of date: render it again (see docstring)"
