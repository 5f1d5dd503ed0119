"""render.yml's kustomize tree against the real API server: after site.yml `kubectl diff -k` shows nothing, and
on a fresh embedded cluster with only Kueue, `kubectl apply -k` builds the same objects as site.yml did (managed
fields and server bookkeeping aside); a second `kubectl apply -k` changes nothing."""

import glob
import json
import os
import shutil
import subprocess

import pytest
import yaml

from conftest import KUBECONFIG, KWOK_WORKDIR, ROOT, playbook

FRESH = {"cluster_name": "fairgpu-it-render",
         "run_local_ports": {"kueue_webhook": 29543, "kueue_metrics": 28543, "kueue_health": 28181, "prometheus": 29190,
                             "dcgm_exporter": 29401, "kube_state_metrics": 29481, "kube_state_metrics_telemetry": 29491}}
FRESH_KUBECONFIG = os.path.join(KWOK_WORKDIR, "clusters", FRESH["cluster_name"], "kubeconfig.yaml")
KUBECTL = glob.glob(os.path.expanduser("~/.cache/fairgpu/kubernetes-*/bin/kubectl"))[0]
BOOKKEEPING = ("managedFields", "uid", "resourceVersion", "creationTimestamp", "generation")
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


def kubectl(kubeconfig, *args):
    return subprocess.run([KUBECTL, "--kubeconfig", kubeconfig] + list(args), check=False, capture_output=True,
                          text=True, timeout=120)


# A feature gate too: it changes only kueue/ (a Component for Kueue's own manifests, not in the top Kustomization),
# which the GitOps tests below build with Kueue's manifests.
GATES = {"kueue_feature_gates": {"LocalQueueMetrics": True}}


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    """render.yml's tree of the integration inventory; touches no cluster."""
    out = tmp_path_factory.mktemp("rendered")
    run = playbook("render.yml", "-e", "render_output_dir=%s" % out, "-e", json.dumps(GATES))
    assert run.rc == 0, run.messages()
    return str(out / "embedded")


@pytest.fixture(scope="module")
def tree(cluster, rendered):
    return rendered


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


# --- GitOps that composes (issue 25): the tree next to Kueue's own manifests and next to Kueue's chart ---------------


def toolchain(component):
    out = subprocess.run(["bash", os.path.join(ROOT, "files", "lab", "toolchain", "toolchain.sh"), "ensure", component],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def documents(text):
    return [d for d in yaml.safe_load_all(text) if d]


def object_id(obj):
    return (obj["apiVersion"].rpartition("/")[0], obj["kind"], obj["metadata"].get("namespace", ""),
            obj["metadata"]["name"])


@pytest.fixture(scope="module")
def kueue_manifests(tmp_path_factory):
    """Kueue's released manifests.yaml as its release makes it (Makefile `artifacts` at v0.19.2:
    `kustomize build config/default -o manifests.yaml`), from the Kueue module in the Go module cache (GOPROXY=off:
    nothing is downloaded), built by the toolchain kubectl's kustomize; the image is the module's placeholder."""
    version = toolchain("kueue")["versions"]["kueue"]
    found = subprocess.run(["go", "mod", "download", "-json", "sigs.k8s.io/kueue@" + version], check=True,
                           capture_output=True, text=True, env=dict(os.environ, GOPROXY="off", GOFLAGS="-mod=mod"))
    built = subprocess.run([KUBECTL, "kustomize", os.path.join(json.loads(found.stdout)["Dir"], "config", "default")],
                           check=True, capture_output=True, text=True, timeout=120)
    path = tmp_path_factory.mktemp("kueue-release") / "manifests.yaml"
    path.write_text(built.stdout)
    return str(path)


def platform_kustomization(tmp_path, kueue_manifests, tree, extra_resources=()):
    """A platform team's Kustomization: Kueue's manifests, fairgpu's objects, and fairgpu's kueue/ Component."""
    tmp_path.mkdir(exist_ok=True)
    shutil.copy(kueue_manifests, tmp_path / "manifests.yaml")
    shutil.copytree(tree, tmp_path / "fairgpu")
    (tmp_path / "kustomization.yaml").write_text(yaml.safe_dump({
        "apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
        "resources": ["manifests.yaml", "fairgpu"] + list(extra_resources), "components": ["fairgpu/kueue"]}))
    return kubectl(os.devnull, "kustomize", str(tmp_path))


def test_one_kustomization_takes_kueues_manifests_and_the_tree(rendered, kueue_manifests, tmp_path):
    built = platform_kustomization(tmp_path, kueue_manifests, rendered)
    assert built.returncode == 0, built.stderr
    objects = documents(built.stdout)
    with open(kueue_manifests) as handle:
        release = documents(handle.read())
    ids = [object_id(o) for o in objects]
    # Exactly one object per name: Kueue's own and fairgpu's, none twice, none lost.
    assert len(ids) == len(set(ids))
    assert set(ids) == {object_id(o) for o in release} | {object_id(o) for o in rendered_objects(rendered)}
    by_id = {object_id(o): o for o in objects}
    config_map = by_id[("", "ConfigMap", "kueue-system", "kueue-manager-config")]
    with open(os.path.join(rendered, "kueue", "configmap-kueue-manager-config.yaml")) as handle:
        patch = yaml.safe_load(handle)
    assert yaml.safe_load(config_map["data"]["controller_manager_config.yaml"]) == \
        yaml.safe_load(patch["data"]["controller_manager_config.yaml"])
    assert config_map["metadata"]["labels"] == next(
        o for o in release if object_id(o) == object_id(config_map))["metadata"]["labels"], "still Kueue's ConfigMap"
    deployment = by_id[("apps", "Deployment", "kueue-system", "kueue-controller-manager")]
    manager = deployment["spec"]["template"]["spec"]["containers"][0]
    release_manager = next(o for o in release if object_id(o) == object_id(deployment))["spec"]["template"]["spec"][
        "containers"][0]
    # The gate appended; --config kept (a replaced args list would drop it: kubernetes-sigs/kueue#1427).
    assert manager["args"] == release_manager["args"] + ["--feature-gates=LocalQueueMetrics=true"]
    assert "--config=/controller_manager_config.yaml" in manager["args"]
    annotations = deployment["spec"]["template"]["metadata"]["annotations"]
    assert len(annotations["fairgpu.io/kueue-configuration-checksum"]) == 64
    assert annotations["kubectl.kubernetes.io/default-container"] == "manager"


def test_the_old_layout_is_refused_by_kustomize(kueue_manifests, tmp_path):
    """Why kueue/ holds no ConfigMap of its own: beside Kueue's manifests, kustomize refuses a second object of the
    name (issue 25, GitOps)."""
    shutil.copy(kueue_manifests, tmp_path / "manifests.yaml")
    (tmp_path / "configmap.yaml").write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "kueue-manager-config", "namespace": "kueue-system"},
        "data": {"controller_manager_config.yaml": "kind: Configuration\n"}}))
    (tmp_path / "kustomization.yaml").write_text(yaml.safe_dump({"resources": ["manifests.yaml", "configmap.yaml"]}))
    built = kubectl(os.devnull, "kustomize", str(tmp_path))
    assert built.returncode != 0 and "already registered id" in built.stderr, built.stderr


def test_the_chart_values_and_the_tree_own_different_objects(rendered):
    """Beside an Argo CD app that owns Kueue through its chart with the tree's values.yaml: the chart (the real one,
    rendered by the real helm) makes every Kueue object, with fairgpu's Configuration and gates; the tree makes none
    of them."""
    helm = toolchain("helm")
    template = subprocess.run([helm["binaries"]["helm"], "template", "kueue", helm["kueue_chart"], "--namespace",
                               "kueue-system", "-f", os.path.join(rendered, "kueue", "values.yaml")],
                              check=False, capture_output=True, text=True, timeout=120)
    assert template.returncode == 0, template.stderr
    chart = documents(template.stdout)
    assert not {object_id(o) for o in chart} & {object_id(o) for o in rendered_objects(rendered)}
    config_map = next(o for o in chart if o["kind"] == "ConfigMap" and o["metadata"]["name"] == "kueue-manager-config")
    deployment = next(o for o in chart if o["kind"] == "Deployment")
    manager = next(c for c in deployment["spec"]["template"]["spec"]["containers"] if c["name"] == "manager")
    with open(os.path.join(rendered, "kueue", "configmap-kueue-manager-config.yaml")) as handle:
        patch = yaml.safe_load(handle)
    ours = yaml.safe_load(patch["data"]["controller_manager_config.yaml"])
    theirs = yaml.safe_load(config_map["data"]["controller_manager_config.yaml"])
    # The same Configuration; the chart's release names its own certificate objects.
    assert {k: v for k, v in theirs.items() if k != "internalCertManagement"} == \
        {k: v for k, v in ours.items() if k != "internalCertManagement"}
    assert "--feature-gates=LocalQueueMetrics=true" in manager["args"]
    # The chart's own checksum of its ConfigMap rolls the Deployment on a change (kubernetes-sigs/kueue#2128).
    assert "charts.kueue.x-k8s.io/config-checksum" in deployment["spec"]["template"]["metadata"]["annotations"]


def test_the_component_fails_loudly_on_a_layout_it_does_not_know(rendered, kueue_manifests, tmp_path):
    """The JSON patch first tests that the Deployment's first container is Kueue's manager: on other manifests the
    build stops instead of patching the wrong container."""
    with open(kueue_manifests) as handle:
        release = documents(handle.read())
    for obj in release:
        if obj["kind"] == "Deployment":
            obj["spec"]["template"]["spec"]["containers"][0]["name"] = "sidecar"
    other = tmp_path / "other-manifests.yaml"
    other.write_text(yaml.safe_dump_all(release))
    built = platform_kustomization(tmp_path / "platform", str(other), rendered)
    assert built.returncode != 0, built.stdout[:500]
    assert "/spec/template/spec/containers/0/name" in built.stderr, built.stderr
