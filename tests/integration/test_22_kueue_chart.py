"""Issue 15, part 1: Kueue's own chart (charts/kueue of sigs.k8s.io/kueue at the pinned version), installed by a real
helm (built from helm.sh/helm/v3) through the kueue role's kueue_mode helm into an embedded cluster of its own.

What the real API server, its controllers and helm decided is checked: the chart's CRDs are the local mode's and
are established; its webhook configurations are the local mode's and name the release's webhook Service; the
manager's ConfigMap carries exactly the Configuration the role computed; the controller's ServiceAccount may do what
Kueue does (SubjectAccessReview); the monitoring role's ServiceMonitor labels select the metrics Service and only it;
a second run changes nothing; teardown on an existing cluster uninstalls the release and with it every object the
chart made. What this cannot show (docs/kueue.md "Kueue's chart", on the embedded cluster): the controller pod is only
simulated by kwok, so nothing serves the webhooks, the metrics or the visibility API."""

import base64
import glob
import json
import os
import shutil
import subprocess
import sys

import pytest
import yaml
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.client.rest import ApiException

from ansible_collections.fairgpu.tenancy.plugins.module_utils.teardown.plan import helm_release
from conftest import KWOK_WORKDIR, ROOT, VARS, playbook, wait_until

pytestmark = pytest.mark.own_cluster

RECORD = os.path.join(ROOT, "results", "it-kueue-chart", "record.json")
CHART = {
    "cluster_name": "fairgpu-it-kueue-helm",
    "run_local_ports": {"kueue_webhook": 30443, "kueue_metrics": 30444, "kueue_health": 30081, "prometheus": 30090,
                        "dcgm_exporter": 30400, "kube_state_metrics": 30480, "kube_state_metrics_telemetry": 30490},
    "lab_cluster_node_pools": [{"name": "gpu-node", "count": 1, "gpu_product": "NVIDIA-H100-80GB-HBM3",
                                "gpu_count": 8, "cpu": "96", "memory": "1Ti"}],
    "kueue_chart_test_record": RECORD,
}
# FAIRGPU_IT_CHART: JSON overrides (cluster_name, run_local_ports, lab_cluster_apiserver_port) for a run beside the
# usual one.
CHART.update(json.loads(os.environ.get("FAIRGPU_IT_CHART") or "{}"))
KUBECONFIG = os.path.join(KWOK_WORKDIR, "clusters", CHART["cluster_name"], "kubeconfig.yaml")
NAMESPACE = "kueue-system"
SERVICE_ACCOUNT = "system:serviceaccount:%s:kueue-controller-manager" % NAMESPACE
# The same cluster as an existing one: teardown's own path for clusters fairgpu did not create.
AS_EXISTING = {"cluster_provider": "existing", "cluster_kubeconfig": KUBECONFIG, "teardown_confirm": "embedded",
               "teardown_uninstall_releases": True}


def toolchain(component):
    out = subprocess.run(["bash", os.path.join(ROOT, "files", "lab", "toolchain", "toolchain.sh"), "ensure", component],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def documents(paths):
    found = []
    for path in paths:
        with open(path) as handle:
            found.extend(d for d in yaml.safe_load_all(handle) if d)
    return found


@pytest.fixture(scope="module")
def chart():
    os.makedirs(os.path.dirname(RECORD), exist_ok=True)
    run = playbook("../tests/integration/kueue_chart.yml", "-e", json.dumps(CHART), timeout=1500)
    try:
        assert run.rc == 0, run.messages()
        with open(RECORD) as handle:
            record = json.load(handle)
        yield run, k8s_config.new_client_from_config(config_file=KUBECONFIG), record
    finally:
        playbook("teardown.yml", "-e", json.dumps(CHART))


@pytest.fixture(scope="module")
def local_manifests():
    """The local mode's CRDs and webhook configurations (the toolchain's copy of the Kueue module's config/)."""
    manifests = toolchain("kueue")["kueue_manifests"]
    crds = {d["metadata"]["name"] for d in documents(sorted(glob.glob(os.path.join(manifests, "crd", "*.yaml"))))}
    webhooks = {d["kind"]: {w["name"] for w in d["webhooks"]}
                for d in documents([os.path.join(manifests, "webhook.yaml")])}
    return crds, webhooks


def kueue_crds(api):
    return [c for c in k8s.ApiextensionsV1Api(api).list_custom_resource_definition().items
            if c.spec.group == "kueue.x-k8s.io"]


def test_the_chart_came_from_the_toolchain_and_was_installed_by_its_helm(chart):
    _run, _api, record = chart
    helm = toolchain("helm")
    assert record["helm"] == helm["binaries"]["helm"]
    assert record["chart"] == helm["kueue_chart"]
    with open(os.path.join(record["chart"], "Chart.yaml")) as handle:
        assert yaml.safe_load(handle)["version"] == helm["versions"]["kueue"].lstrip("v")
    version = subprocess.run([record["helm"], "version", "--template", "{{.Version}}"], check=True,
                             capture_output=True, text=True).stdout
    assert version == helm["versions"]["helm"]


def test_the_crds_are_the_local_modes_helm_owned_and_established(chart, local_manifests):
    _run, api, _record = chart
    crds = kueue_crds(api)
    assert {c.metadata.name for c in crds} == local_manifests[0]
    for crd in crds:
        established = [c for c in crd.status.conditions or [] if c.type == "Established"]
        assert established and established[0].status == "True", crd.metadata.name
        # In templates/, not crds/: helm owns them, so helm upgrade updates them and helm uninstall deletes them.
        assert crd.metadata.labels.get("app.kubernetes.io/managed-by") == "Helm", crd.metadata.name
        assert (crd.metadata.annotations or {}).get("meta.helm.sh/release-name") == "kueue", crd.metadata.name
        # Created, not client-side applied: the Workload CRD would not fit the last-applied annotation
        # (kubernetes-sigs/kueue#1273).
        assert "kubectl.kubernetes.io/last-applied-configuration" not in (crd.metadata.annotations or {})
    workloads = next(c for c in crds if c.metadata.name == "workloads.kueue.x-k8s.io")
    assert [v.name for v in workloads.spec.versions if v.storage] == ["v1beta2"]


def test_the_webhooks_are_the_local_modes_and_call_the_releases_service(chart, local_manifests):
    _run, api, record = chart
    reg = k8s.AdmissionregistrationV1Api(api)
    objects = record["objects"]
    mutating = reg.read_mutating_webhook_configuration(objects["mutating_webhook_configuration"])
    validating = reg.read_validating_webhook_configuration(objects["validating_webhook_configuration"])
    assert {w.name for w in mutating.webhooks} == local_manifests[1]["MutatingWebhookConfiguration"]
    assert {w.name for w in validating.webhooks} == local_manifests[1]["ValidatingWebhookConfiguration"]
    hooks = {w.name: w for w in mutating.webhooks + validating.webhooks}
    for hook in hooks.values():
        assert (hook.client_config.service.name, hook.client_config.service.namespace) == \
            (objects["webhook_service"], NAMESPACE), hook.name
    # The chart reads fairgpu's Configuration: Job hooks fail closed, the pod/deployment/statefulset hooks of
    # integrations fairgpu does not enable are Ignore.
    assert hooks["mjob.kb.io"].failure_policy == "Fail" and hooks["vjob.kb.io"].failure_policy == "Fail"
    assert {hooks[n].failure_policy for n in ("mpod.kb.io", "mdeployment.kb.io", "mstatefulset.kb.io")} == {"Ignore"}
    service = k8s.CoreV1Api(api).read_namespaced_service(objects["webhook_service"], NAMESPACE)
    assert [(p.port, p.target_port) for p in service.spec.ports] == [(443, 9443)]


def test_nothing_serves_the_webhooks_on_kwok_so_a_job_is_refused(chart):
    """What the chart cannot do here: its controller pod is simulated, the Job webhook fails closed."""
    _run, api, _record = chart
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "it-chart-refused"},
           "spec": {"template": {"spec": {"restartPolicy": "Never",
                                          "containers": [{"name": "c", "image": "busybox"}]}}}}
    with pytest.raises(ApiException) as refused:
        k8s.BatchV1Api(api).create_namespaced_job("default", job)
    # The embedded cluster routes webhook calls to the Service's endpoints, and it has none (the simulated pod's
    # loopback address is not published: roles/cluster/templates/kwokctl.yaml.j2), so the API server fails the
    # request without dialling anything.
    status = json.loads(refused.value.body)
    assert (refused.value.status, status["code"]) == (500, 500), status
    assert status["message"].startswith('Internal error occurred: failed calling webhook "mjob.kb.io"'), status
    assert "endpoints" in status["message"], status
    assert k8s.BatchV1Api(api).list_namespaced_job("default").items == []


def test_the_manager_configmap_is_exactly_the_computed_configuration(chart):
    _run, api, record = chart
    core, objects = k8s.CoreV1Api(api), record["objects"]
    data = core.read_namespaced_config_map(objects["config_map"], NAMESPACE).data
    configuration = yaml.safe_load(data["controller_manager_config.yaml"])
    assert configuration == record["configuration"]
    # And it is fairgpu's (tests/integration/vars.yml), with the release's own certificate objects.
    assert configuration["fairSharing"]["preemptionStrategies"] == ["LessThanOrEqualToFinalShare",
                                                                    "LessThanInitialShare"]
    assert configuration["waitForPodsReady"]["timeout"] == "60s"
    assert configuration["integrations"]["frameworks"] == ["batch/job"]
    assert configuration["metrics"]["enableClusterQueueResources"] is True
    certs = configuration["internalCertManagement"]
    assert certs["enable"] is True
    core.read_namespaced_service(certs["webhookServiceName"], NAMESPACE)
    core.read_namespaced_secret(certs["webhookSecretName"], NAMESPACE)
    deployment = k8s.AppsV1Api(api).read_namespaced_deployment(objects["deployment"], NAMESPACE)
    pod = deployment.spec.template.spec
    assert objects["config_map"] in [v.config_map.name for v in pod.volumes if v.config_map]
    manager = next(c for c in pod.containers if c.name == "manager")
    assert (manager.image, manager.image_pull_policy) == ("registry.k8s.io/kueue/kueue:v0.19.2", "IfNotPresent")


# What Kueue's controller does (its kubebuilder RBAC markers, the chart's templates/rbac), and two things it must not.
@pytest.mark.parametrize("verb, group, resource, subresource, namespace, name, allowed", [
    ("update", "kueue.x-k8s.io", "workloads", "status", "team-a", "", True),
    ("create", "kueue.x-k8s.io", "workloads", "", "team-a", "", True),
    ("patch", "batch", "jobs", "", "team-a", "", True),
    ("update", "kueue.x-k8s.io", "clusterqueues", "status", "", "", True),
    # Kueue records events through the events.k8s.io API, not the core one.
    ("create", "events.k8s.io", "events", "", "team-a", "", True),
    ("create", "", "events", "", "team-a", "", False),
    # The internal cert rotator: its Secret, and the caBundle of its own webhook configuration only.
    ("update", "", "secrets", "", NAMESPACE, "kueue-webhook-server-cert", True),
    ("update", "admissionregistration.k8s.io", "validatingwebhookconfigurations", "", "", "kueue-validating-webhook-configuration", True),
    ("update", "admissionregistration.k8s.io", "validatingwebhookconfigurations", "", "", "someone-elses", False),
    # The metrics endpoint's bearer-token check, and leader election.
    ("create", "authentication.k8s.io", "tokenreviews", "", "", "", True),
    ("create", "coordination.k8s.io", "leases", "", NAMESPACE, "", True),
    ("delete", "", "namespaces", "", "", "", False),
    ("get", "", "secrets", "", "team-a", "", False),
])
def test_the_controller_may_do_what_kueue_does(chart, verb, group, resource, subresource, namespace, name, allowed):
    """The API server's RBAC authorizer decides, for the ServiceAccount the chart's Deployment runs as."""
    _run, api, record = chart
    deployment = k8s.AppsV1Api(api).read_namespaced_deployment(record["objects"]["deployment"], NAMESPACE)
    assert deployment.spec.template.spec.service_account_name == record["objects"]["service_account"]
    review = k8s.AuthorizationV1Api(api).create_subject_access_review({
        "apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
        "spec": {"user": SERVICE_ACCOUNT, "groups": ["system:serviceaccounts", "system:serviceaccounts:" + NAMESPACE],
                 "resourceAttributes": {"verb": verb, "group": group, "resource": resource,
                                        "subresource": subresource, "namespace": namespace, "name": name}}})
    assert review.status.allowed is allowed, review.status


def test_the_servicemonitor_labels_select_the_metrics_service_and_only_it(chart):
    _run, api, record = chart
    with open(os.path.join(ROOT, "roles", "monitoring", "defaults", "main.yml")) as handle:
        labels = yaml.safe_load(handle)["monitoring_kueue_service_labels"]
    core = k8s.CoreV1Api(api)
    selected = core.list_namespaced_service(NAMESPACE, label_selector=",".join("%s=%s" % kv for kv in labels.items()))
    assert [s.metadata.name for s in selected.items] == [record["objects"]["metrics_service"]]
    assert [(p.name, p.port) for p in selected.items[0].spec.ports] == [("https", 8443)]
    # The Service's own selector picks the (simulated) controller pod. Its address is not published: the embedded
    # cluster gives pods loopback addresses, which EndpointSlices refuse, so nothing here is ever dialled.
    pods = core.list_namespaced_pod(NAMESPACE, label_selector="control-plane=controller-manager").items
    behind = core.list_namespaced_pod(NAMESPACE, label_selector=",".join(
        "%s=%s" % kv for kv in selected.items[0].spec.selector.items())).items
    assert [p.metadata.name for p in behind] == [p.metadata.name for p in pods] and pods
    assert all(p.status.pod_ip.startswith("127.") for p in pods), [p.status.pod_ip for p in pods]
    slices = k8s.DiscoveryV1Api(api).list_namespaced_endpoint_slice(
        NAMESPACE, label_selector="kubernetes.io/service-name=" + record["objects"]["metrics_service"]).items
    assert {a for s in slices for e in s.endpoints or [] for a in e.addresses} == set()


def test_the_release_is_marked_and_fits_its_secret(chart):
    _run, api, _record = chart
    secrets = k8s.CoreV1Api(api).list_namespaced_secret(NAMESPACE, label_selector="owner=helm,name=kueue").items
    assert len(secrets) == 1
    release = helm_release(k8s.ApiClient().sanitize_for_serialization(secrets[0]))
    assert (release["chart"], release["chart_version"], release["revision"]) == ("kueue", "0.19.2", 1)
    assert release["marked"] is True
    # A release is one Secret, at most 1 MiB (tigera/docs#2636: CRD charts outgrew it).
    assert len(base64.b64decode(secrets[0].data["release"])) < 1024 * 1024


def test_the_visibility_api_is_registered_but_not_available_on_kwok(chart):
    _run, api, _record = chart
    service = k8s.ApiregistrationV1Api(api).read_api_service("v1beta2.visibility.kueue.x-k8s.io")
    assert service.spec.service.name == "kueue-visibility-server"
    available = [c for c in service.status.conditions or [] if c.type == "Available"]
    assert not available or available[0].status != "True"


@pytest.mark.parametrize("which", ["missing", "other version"])
def test_a_bad_local_chart_is_refused_before_the_release_changes(chart, which, tmp_path):
    """helm ignores --version for a local chart: a stale .tgz or directory would be installed without a word."""
    _run, api, record = chart
    if which == "missing":
        ref = str(tmp_path / "kueue-0.19.2.tgz")
        expected = "kueue_chart_ref: %s does not exist; " % ref
    else:
        ref = str(tmp_path / "kueue")
        shutil.copytree(record["chart"], ref)
        with open(os.path.join(ref, "Chart.yaml")) as handle:
            meta = yaml.safe_load(handle)
        meta["version"] = "0.18.1"
        with open(os.path.join(ref, "Chart.yaml"), "w") as handle:
            yaml.safe_dump(meta, handle)
        expected = "kueue_chart_ref: %s is chart version 0.18.1, but kueue_chart_version is 0.19.2" % ref
    run = playbook("../tests/integration/kueue_chart.yml", "-e", json.dumps(dict(CHART, kueue_chart_ref=ref)))
    assert run.rc != 0 and expected in run.messages(), run.messages()
    assert not any("Install the Kueue chart" in t for t in run.changed_tasks())
    secrets = k8s.CoreV1Api(api).list_namespaced_secret(NAMESPACE, label_selector="owner=helm,name=kueue").items
    assert [s.metadata.labels["version"] for s in secrets] == ["1"]


def test_a_hand_edited_configmap_is_listed_repaired_and_kueue_restarted(chart):
    """Drift in mode helm (issue 25): fair sharing taken out of the chart's ConfigMap by hand. The helm task does not
    see it (the release's values did not change); --check --diff lists it, the next run writes fairgpu's
    Configuration back and restarts the Deployment's pods (a new pod template, so a new ReplicaSet)."""
    _run, api, record = chart
    core, apps, objects = k8s.CoreV1Api(api), k8s.AppsV1Api(api), record["objects"]
    data = core.read_namespaced_config_map(objects["config_map"], NAMESPACE).data
    configuration = yaml.safe_load(data["controller_manager_config.yaml"])
    del configuration["fairSharing"]
    core.patch_namespaced_config_map(objects["config_map"], NAMESPACE, {"data": {
        "controller_manager_config.yaml": yaml.safe_dump(configuration)}}, field_manager="kubectl-edit",
        _content_type="application/merge-patch+json")
    template = apps.read_namespaced_deployment(objects["deployment"], NAMESPACE).spec.template.metadata
    where = "ConfigMap/%s/%s controller_manager_config.yaml" % (NAMESPACE, objects["config_map"])
    expected = [where + ' fairSharing: live (absent), fairgpu '
                '{"preemptionStrategies": ["LessThanOrEqualToFinalShare", "LessThanInitialShare"]}']

    check = playbook("../tests/integration/kueue_chart.yml", "--diff", "-e", json.dumps(CHART), check=True)
    assert check.rc == 0, check.messages()
    assert check.drift_lines("(would repair)") == expected
    assert not any("Install the Kueue chart" in t for t in check.changed_tasks()), "helm saw nothing"
    assert "fairSharing" not in yaml.safe_load(core.read_namespaced_config_map(
        objects["config_map"], NAMESPACE).data["controller_manager_config.yaml"]), "--check changed nothing"

    repair = playbook("../tests/integration/kueue_chart.yml", "-e", json.dumps(CHART))
    assert repair.rc == 0, repair.messages()
    assert repair.drift_lines("(repaired)") == expected
    live = yaml.safe_load(core.read_namespaced_config_map(objects["config_map"], NAMESPACE)
                          .data["controller_manager_config.yaml"])
    assert live == record["configuration"]
    restarted = apps.read_namespaced_deployment(objects["deployment"], NAMESPACE).spec.template.metadata
    assert "kubectl.kubernetes.io/restartedAt" in (restarted.annotations or {})
    assert (restarted.annotations or {}) != (template.annotations or {}), "a new pod template: the pods restart"


def test_second_run_changes_nothing(chart):
    run = playbook("../tests/integration/kueue_chart.yml", "-e", json.dumps(CHART), timeout=900)
    assert run.rc == 0, run.messages()
    assert run.stats["changed"] == 0, run.changed_tasks()
    _run, api, _record = chart
    secrets = k8s.CoreV1Api(api).list_namespaced_secret(NAMESPACE, label_selector="owner=helm,name=kueue").items
    assert [s.metadata.labels["version"] for s in secrets] == ["1"]


def test_a_changed_configuration_rolls_the_deployment(chart):
    """Kueue reads its Configuration and flags only at start. A changed setting and a feature gate: the chart's
    config-checksum annotation on the pod template changes (templates/manager/manager.yaml of v0.19.2,
    kubernetes-sigs/kueue#2128), the gate reaches the manager's args (controllerManager.featureGates), so the
    Deployment rolls to a new ReplicaSet; and the live objects make Kueue run with what the local mode would."""
    _run, api, record = chart
    apps = k8s.AppsV1Api(api)
    name = record["objects"]["deployment"]
    checksum = "charts.kueue.x-k8s.io/config-checksum"
    before = apps.read_namespaced_deployment(name, NAMESPACE).spec.template.metadata.annotations[checksum]
    # Earlier tests rolled it too (the drift test's restart): one more ReplicaSet than now.
    sets_before = apps.list_namespaced_replica_set(NAMESPACE, label_selector="control-plane=controller-manager").items
    changed = {"kueue_fair_sharing_preemption_strategies": ["LessThanInitialShare"],
               "kueue_feature_gates": {"LocalQueueMetrics": True}}
    run = playbook("../tests/integration/kueue_chart.yml", "-e", json.dumps(dict(CHART, **changed)), timeout=900)
    assert run.rc == 0, run.messages()
    deployment = apps.read_namespaced_deployment(name, NAMESPACE)
    after = deployment.spec.template.metadata.annotations[checksum]
    assert after != before
    manager = next(c for c in deployment.spec.template.spec.containers if c.name == "manager")
    assert "--feature-gates=LocalQueueMetrics=true" in manager.args, manager.args
    sets = apps.list_namespaced_replica_set(NAMESPACE, label_selector="control-plane=controller-manager").items
    current = [r for r in sets if r.spec.template.metadata.annotations.get(checksum) == after]
    assert len(sets) == len(sets_before) + 1 and len(current) == 1, [r.metadata.name for r in sets]
    # One meaning: what the chart's live ConfigMap and args say equals what the local mode computes.
    from ansible_collections.fairgpu.tenancy.plugins.module_utils.kueue import settings
    with open(VARS) as handle:
        inventory = dict(yaml.safe_load(handle), **changed)
    data = k8s.CoreV1Api(api).read_namespaced_config_map(record["objects"]["config_map"], NAMESPACE).data
    live = settings.effective_from_args(data["controller_manager_config.yaml"], manager.args)
    assert live == settings.effective(settings.configuration(inventory, NAMESPACE, "local"),
                                      settings.feature_gates(inventory, "local"))


def test_teardown_uninstalls_the_release_and_what_it_made(chart):
    """teardown.yml's path for an existing cluster, pointed at this one, confirmed and allowed to uninstall."""
    _run, api, record = chart
    run = playbook("teardown.yml", "-e", json.dumps(dict(CHART, run_helm_binary=record["helm"], **AS_EXISTING)))
    assert run.rc == 0, run.messages()
    assert any(t.endswith(" : Uninstall fairgpu's own Helm releases (-e teardown_uninstall_releases=true)")
               for t in run.changed_tasks()), run.changed_tasks()
    core, reg = k8s.CoreV1Api(api), k8s.AdmissionregistrationV1Api(api)
    assert core.list_namespaced_secret(NAMESPACE, label_selector="owner=helm").items == []
    assert kueue_crds(api) == []
    assert [w.metadata.name for w in reg.list_mutating_webhook_configuration().items
            + reg.list_validating_webhook_configuration().items if w.metadata.name.startswith("kueue")] == []
    # A visibility APIService left behind would stall every namespace deletion (kubernetes-sigs/kueue#1769, #3943).
    assert [s.metadata.name for s in k8s.ApiregistrationV1Api(api).list_api_service().items
            if "kueue" in s.metadata.name] == []
    assert [r.metadata.name for r in k8s.RbacAuthorizationV1Api(api).list_cluster_role().items
            if r.metadata.name.startswith("kueue-")] == []
    assert core.list_namespaced_config_map(NAMESPACE, label_selector="app.kubernetes.io/instance=kueue").items == []


# --- Chart repositories without a named repository (issue 25) --------------------------------------------------
# The loopback chart repository of the test below (a port of this file's own cluster range).
REPO_PORT = 30150


def test_a_repository_url_is_read_afresh_on_every_call_from_a_fresh_control_node(tmp_path):
    """What the gpu_operator role (chart_repo_url) and monitoring_chart_repo_url rely on, with the real helm: --repo
    downloads the repository's index on every call (helm pkg/repo/chartrepo.go FindChartInAuthAndTLSAndPassRepoURL),
    so a control node without any repository configured finds the chart, and a version published after the last
    call is found at once, with no helm repo add or update. The repository is a directory served on loopback."""
    helm_bin = toolchain("helm")
    binary, source = helm_bin["binaries"]["helm"], helm_bin["kueue_chart"]
    repo, home = tmp_path / "repo", tmp_path / "home"
    repo.mkdir()
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(home),
           "HELM_REPOSITORY_CONFIG": str(home / "repositories.yaml"), "HELM_REPOSITORY_CACHE": str(home / "cache"),
           "HELM_CACHE_HOME": str(home / "cache-home"), "HELM_CONFIG_HOME": str(home / "config")}
    url = "http://127.0.0.1:%d" % REPO_PORT

    def publish(version):
        chart_dir = tmp_path / ("kueue-" + version) / "kueue"
        shutil.copytree(source, chart_dir)
        meta_path = chart_dir / "Chart.yaml"
        meta = yaml.safe_load(meta_path.read_text())
        meta["version"] = version
        meta_path.write_text(yaml.safe_dump(meta))
        subprocess.run([binary, "package", str(chart_dir), "-d", str(repo)], check=True, env=env, capture_output=True)
        subprocess.run([binary, "repo", "index", str(repo), "--url", url], check=True, env=env, capture_output=True)

    def show(version):
        return subprocess.run([binary, "show", "chart", "kueue", "--repo", url, "--version", version], env=env, check=False,
                              capture_output=True, text=True)

    publish("0.19.2")
    server = subprocess.Popen([sys.executable, "-m", "http.server", str(REPO_PORT), "--bind", "127.0.0.1",
                               "--directory", str(repo)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_until(lambda: show("0.19.2").returncode == 0, 20, what="the loopback chart repository")
        assert yaml.safe_load(show("0.19.2").stdout)["version"] == "0.19.2"
        assert not (home / "repositories.yaml").exists()          # nothing was added to the control node
        missing = show("0.19.3")
        assert missing.returncode != 0 and 'chart "kueue" version "0.19.3" not found in %s repository' % url \
            in missing.stderr, missing.stderr
        publish("0.19.3")
        assert yaml.safe_load(show("0.19.3").stdout)["version"] == "0.19.3"   # no helm repo update
    finally:
        server.terminate()
        server.wait(timeout=10)
