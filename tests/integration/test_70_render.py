"""render.yml's kustomize tree against the real API server: after site.yml `kubectl diff -k` shows nothing, and
on a fresh embedded cluster with only Kueue, `kubectl apply -k` builds the same objects as site.yml did (managed
fields and server bookkeeping aside); a second `kubectl apply -k` changes nothing."""

import glob
import json
import os
import subprocess

import pytest
import yaml

from conftest import KUBECONFIG, KWOK_WORKDIR, playbook

FRESH = {"cluster_name": "fairgpu-it-render",
         "run_local_ports": {"kueue_webhook": 29543, "kueue_metrics": 28543, "kueue_health": 28181, "prometheus": 29190,
                             "dcgm_exporter": 29401}}
FRESH_KUBECONFIG = os.path.join(KWOK_WORKDIR, "clusters", FRESH["cluster_name"], "kubeconfig.yaml")
KUBECTL = glob.glob(os.path.expanduser("~/.cache/fairgpu/kubernetes-*/bin/kubectl"))[0]
BOOKKEEPING = ("managedFields", "uid", "resourceVersion", "creationTimestamp", "generation")
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


def kubectl(kubeconfig, *args):
    return subprocess.run([KUBECTL, "--kubeconfig", kubeconfig] + list(args), check=False, capture_output=True,
                          text=True, timeout=120)


@pytest.fixture(scope="module")
def tree(cluster, tmp_path_factory):
    out = tmp_path_factory.mktemp("rendered")
    run = playbook("render.yml", "-e", "render_output_dir=%s" % out)
    assert run.rc == 0, run.messages()
    return str(out / "embedded")


def rendered_objects(tree):
    objects = []
    for path in sorted(glob.glob(os.path.join(tree, "base", "*.yaml")) + glob.glob(os.path.join(tree, "tenants", "*", "*.yaml"))):
        if not path.endswith("kustomization.yaml"):
            with open(path) as handle:
                objects.append(yaml.safe_load(handle))
    return objects


def live(kubeconfig, obj):
    """The live object without status and server bookkeeping (managed fields, uid, versions, timestamps)."""
    group = obj["apiVersion"].rpartition("/")[0]
    resource = obj["kind"].lower() + ("." + group if group else "")
    args = ["get", resource, obj["metadata"]["name"], "-o", "json"]
    if obj["metadata"].get("namespace"):
        args += ["-n", obj["metadata"]["namespace"]]
    result = kubectl(kubeconfig, *args)
    assert result.returncode == 0, result.stderr
    found = json.loads(result.stdout)
    found.pop("status", None)
    for key in BOOKKEEPING:
        found["metadata"].pop(key, None)
    annotations = found["metadata"].get("annotations", {})
    annotations.pop(LAST_APPLIED, None)
    if not annotations:
        found["metadata"].pop("annotations", None)
    return found


def test_diff_after_site_is_empty(tree):
    # Server-side, as fairgpu's field manager: a client-side diff would always show kubectl's last-applied
    # annotation, which server-side apply does not write.
    result = kubectl(KUBECONFIG, "diff", "--server-side", "--field-manager=fairgpu", "--force-conflicts", "-k", tree)
    assert (result.returncode, result.stdout) == (0, ""), result.stdout + result.stderr


def test_apply_k_on_a_fresh_cluster_builds_what_site_built(tree):
    run = playbook("site.yml", "--skip-tags", "tenants", "-e", json.dumps(FRESH))
    try:
        assert run.rc == 0, run.messages()
        assert kubectl(FRESH_KUBECONFIG, "get", "clusterqueues", "-o", "name").stdout == "", "no tenants yet"
        first = kubectl(FRESH_KUBECONFIG, "apply", "-k", tree)
        assert first.returncode == 0, first.stderr
        objects = rendered_objects(tree)
        assert len(first.stdout.splitlines()) == len(objects)
        for obj in objects:
            assert live(FRESH_KUBECONFIG, obj) == live(KUBECONFIG, obj), "%s %s" % (obj["kind"], obj["metadata"]["name"])
        second = kubectl(FRESH_KUBECONFIG, "apply", "-k", tree)
        assert second.returncode == 0, second.stderr
        assert all(line.endswith(" unchanged") for line in second.stdout.splitlines()), second.stdout
    finally:
        playbook("teardown.yml", "-e", json.dumps(FRESH))
