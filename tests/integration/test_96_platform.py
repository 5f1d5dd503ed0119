"""Issue 25: fairgpu on a cluster a platform team already runs, prepared by them first, as they would.

The cluster is started directly with kwokctl (tests/integration/by_hand.py), not by fairgpu, and declared
``cluster_provider: existing``. The platform team then:

- has the API server enforce Pod Security ``baseline`` by default: an AdmissionConfiguration of the PodSecurity
  plugin passed with ``--admission-control-config-file`` (Kubernetes docs "Enforce Pod Security Standards by
  Configuring the Built-in Admission Controller"), as hardened distributions ship;
- installs the real Kueue chart of the pinned version with the real helm (both from the toolchain) under a release
  name of theirs, ``platform-kueue``, with their values: 2 replicas, the PyTorchJob and RayJob integrations, a
  feature gate;
- runs the real Prometheus Operator (a local process on the cluster's kubeconfig) with a Prometheus that enforces
  the namespace label (``enforcedNamespaceLabel``, as OpenShift's user-workload monitoring does) and selects rules and
  ServiceMonitors labelled ``release: platform`` in every namespace.

Then fairgpu, with ``kueue_mode: helm`` on that release, ``monitoring_mode: helm`` without the chart, and the simulated
GPU operator (no GPU Operator chart can be had here): ``site.yml`` stops before changing anything and lists, key by key,
what it would drop of their release; with ``kueue_adopt: merge`` it converges keeping their values, and a second run
changes nothing; a hand edit of Kueue's live Configuration is listed by ``--check --diff`` and repaired by the next
``site.yml``, which restarts Kueue (a new ReplicaSet); the operator's rewrite of fairgpu's rules under enforcement still
fires the over-guarantee alert and keeps ``FairgpuKueueDown`` quiet (promtool on the operator's rule file). No process
of the cluster holds a connection outside 127.0.0.0/8 (the session's socket watch, conftest.py).

Nothing serves the chart's webhooks here (its controller pods are simulated by kwok; docs/kueue.md "Kueue's chart", on the
embedded cluster), so no Kueue object can be written: the tenants are left out (``--skip-tags tenants``) and the
kueue role says why it does not probe the webhooks."""

import json
import os
import subprocess
import time

import pytest
import yaml
from kubernetes import client as k8s
from kubernetes import config as k8s_config

import promop
import sockets
from by_hand import RESTLESS, KwokCluster, apply, cluster_objects, gpu_node, kubectl, kubectl_json, run
from conftest import ROOT, PlaybookRun

pytestmark = pytest.mark.own_cluster

NAME = "fairgpu-it-platform"
FIRST_PORT = 22200
HOST = "platform"
RELEASE, KUEUE_NS = "platform-kueue", "kueue-system"
# The platform team's monitoring: their Prometheus, in a namespace of theirs, selecting what carries their label.
PLATFORM_MONITORING_NS, PLATFORM_LABEL = "platform-monitoring", {"release": "platform"}
MONITORING_NS = "fairgpu-monitoring"
LOCAL_PORTS = {"kueue_webhook": 22243, "kueue_metrics": 22244, "kueue_health": 22281, "prometheus": 22290,
               "dcgm_exporter": 22240, "kube_state_metrics": 22320, "kube_state_metrics_telemetry": 22330}
OPERATOR_LISTEN = "127.0.0.1:22280"
PRODUCT = "NVIDIA-H100-80GB-HBM3"
TENANTS = [{"name": "team-a", "gpus": 8, "borrowing_limit": 8}, {"name": "team-b", "gpus": 8, "borrowing_limit": 8}]
# The PodSecurity plugin's defaults for namespaces without labels (pod-security.admission.config.k8s.io/v1
# PodSecurityConfiguration; Kubernetes docs "Enforce Pod Security Standards by Configuring the Built-in Admission
# Controller"): enforce baseline, warn and audit restricted.
POD_SECURITY = {
    "apiVersion": "apiserver.config.k8s.io/v1", "kind": "AdmissionConfiguration",
    "plugins": [{"name": "PodSecurity", "configuration": {
        "apiVersion": "pod-security.admission.config.k8s.io/v1", "kind": "PodSecurityConfiguration",
        "defaults": {"enforce": "baseline", "enforce-version": "latest", "audit": "restricted",
                     "audit-version": "latest", "warn": "restricted", "warn-version": "latest"},
        "exemptions": {"usernames": [], "runtimeClasses": [], "namespaces": []}}}]}
# What the platform team gave their Kueue release (charts/kueue/values.yaml keys of the pinned version).
PLATFORM_FEATURE_GATE = {"name": "LocalQueueMetrics", "enabled": True}
PLATFORM_FRAMEWORKS = ["batch/job", "kubeflow.org/pytorchjob", "ray.io/rayjob"]


def toolchain(*components):
    out = subprocess.run(["bash", os.path.join(ROOT, "files", "lab", "toolchain", "toolchain.sh"), "ensure"] + list(components),
                         check=True, capture_output=True, text=True, timeout=3600).stdout
    return json.loads(out)


def platform_values(tools):
    """The platform team's values for their Kueue release: the release image of the pinned version (the chart in the
    Kueue module names a staging image, plugins/module_utils/kueue/chart.py), 2 replicas, a feature gate, and a
    Configuration of theirs with PyTorchJob and RayJob."""
    configuration = {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
        "health": {"healthProbeBindAddress": ":8081"}, "metrics": {"bindAddress": ":8443"},
        "webhook": {"port": 9443}, "leaderElection": {"leaderElect": True, "resourceName": "c1f6bfd2.kueue.x-k8s.io"},
        "integrations": {"frameworks": PLATFORM_FRAMEWORKS}}
    image = {"repository": "registry.k8s.io/kueue/kueue", "tag": tools["versions"]["kueue"], "pullPolicy": "IfNotPresent"}
    return {"controllerManager": {"replicas": 2, "featureGates": [PLATFORM_FEATURE_GATE], "manager": {"image": image}},
            "managerConfig": {"controllerManagerConfigYaml": yaml.safe_dump(configuration)}}


def inventory(path, kubeconfig, tools, **extra):
    host = {"ansible_connection": "local", "ansible_python_interpreter": "{{ ansible_playbook_python }}",
            "cluster_provider": "existing", "cluster_kubeconfig": kubeconfig, "cluster_name": NAME,
            "kueue_mode": "helm", "kueue_release_name": RELEASE,
            "kueue_chart_ref": tools["kueue_chart"], "run_helm_binary": tools["binaries"]["helm"],
            "gpu_operator_mode": "simulated",
            "monitoring_mode": "helm", "monitoring_install_chart": False, "monitoring_release_name": "platform",
            # The for: that tests/rules/enforced/fairgpu-alerts-enforced.test.yml is written for (test_77's too).
            "monitoring_alert_for": {"FairgpuTenantOverGuarantee": "7m"},
            "tenants_list": TENANTS, "run_local_ports": LOCAL_PORTS}
    host.update(extra)
    with open(path, "w") as handle:
        yaml.safe_dump({"gpu_clusters": {"hosts": {HOST: host}}}, handle)
    return path


def helm(tools, kubeconfig, *args):
    return run(tools["binaries"]["helm"], "--kubeconfig", kubeconfig, *args, timeout=600)


def release_values(tools, kubeconfig):
    got = helm(tools, kubeconfig, "get", "values", RELEASE, "-n", KUEUE_NS, "-o", "json")
    assert got.returncode == 0, got.stderr
    return json.loads(got.stdout)


def release_revision(tools, kubeconfig):
    got = helm(tools, kubeconfig, "history", RELEASE, "-n", KUEUE_NS, "-o", "json")
    assert got.returncode == 0, got.stderr
    return json.loads(got.stdout)[-1]["revision"]


def platform_prometheus(enforce=True):
    """The platform team's Prometheus: rules and ServiceMonitors labelled release=platform in any namespace, the
    namespace label enforced (OpenShift user-workload monitoring's choice)."""
    spec = {"ruleSelector": {"matchLabels": PLATFORM_LABEL}, "ruleNamespaceSelector": {},
            "serviceMonitorSelector": {"matchLabels": PLATFORM_LABEL}, "serviceMonitorNamespaceSelector": {},
            "scrapeInterval": "30s", "evaluationInterval": "30s"}
    if enforce:
        spec["enforcedNamespaceLabel"] = "namespace"
    return {"apiVersion": "monitoring.coreos.com/v1", "kind": "Prometheus",
            "metadata": {"name": "platform", "namespace": PLATFORM_MONITORING_NS}, "spec": spec}


class Fairgpu:
    """fairgpu's playbooks from the checkout on the platform team's inventory."""

    def __init__(self, directory, kubeconfig, tools):
        self.directory, self.kubeconfig, self.tools = directory, kubeconfig, tools

    def site(self, *args, timeout=900, **extra):
        hosts = inventory(os.path.join(self.directory, "hosts-%d.yml" % time.monotonic_ns()), self.kubeconfig,
                          self.tools, **extra)
        env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"),
                   ANSIBLE_STDOUT_CALLBACK="ansible.posix.json", ANSIBLE_LOAD_CALLBACK_PLUGINS="1")
        cmd = [os.path.join(os.path.dirname(os.sys.executable), "ansible-playbook"), "-i", hosts,
               os.path.join(ROOT, "playbooks", "site.yml"), "--skip-tags", "tenants"] + list(args)
        proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout, check=False)
        return PlaybookRun(proc)


@pytest.fixture(scope="module")
def platform(tmp_path_factory):
    """The platform team's cluster as they set it up (module docstring); yields what the tests read."""
    tools = toolchain("helm", "prometheus-operator", "prometheus")
    workdir = str(tmp_path_factory.mktemp("platform"))
    admission = os.path.join(workdir, "admission.yaml")
    with open(admission, "w") as handle:
        yaml.safe_dump(POD_SECURITY, handle)
    # The embedded cluster's rules for traffic (roles/cluster/templates/kwokctl.yaml.j2): webhook calls go to a
    # Service's endpoints, and pods get loopback addresses that no EndpointSlice publishes, so the chart's webhook
    # Service has no endpoints and nothing is dialled off the machine.
    cluster = KwokCluster(NAME, workdir, FIRST_PORT, stages=True, patches={
        "kube-apiserver": {"admission-control-config-file": admission, "enable-aggregator-routing": "true"},
        "kwok-controller": {"cidr": "127.201.0.1/16"}})
    operator = None
    try:
        cluster.create()
        kubeconfig = cluster.kubeconfig
        apply(kubeconfig, [gpu_node("gpu-node-%d" % i, PRODUCT, 8) for i in range(2)] + [gpu_node("cpu-node-0")])
        ready = kubectl(kubeconfig, "wait", "--for=condition=Ready", "--timeout=120s", "node", "--all")
        assert ready.returncode == 0, ready.stderr
        values = os.path.join(workdir, "platform-kueue.values.yaml")
        with open(values, "w") as handle:
            yaml.safe_dump(platform_values(tools), handle)
        installed = helm(tools, kubeconfig, "install", RELEASE, tools["kueue_chart"], "-n", KUEUE_NS,
                         "--create-namespace", "-f", values, "--wait", "--timeout", "180s")
        assert installed.returncode == 0, installed.stdout + installed.stderr
        api = k8s_config.new_client_from_config(config_file=kubeconfig)
        promop.install_crds(api, tools["prometheus_operator_crds"])
        apply(kubeconfig, [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": PLATFORM_MONITORING_NS}},
                           platform_prometheus()])
        operator = promop.Operator(tools["binaries"]["prometheus-operator"], kubeconfig, OPERATOR_LISTEN, workdir)
        yield {"cluster": cluster, "kubeconfig": kubeconfig, "api": api, "tools": tools, "operator": operator,
               "fairgpu": Fairgpu(workdir, kubeconfig, tools), "workdir": workdir, "runs": {}}
    finally:
        if operator:
            operator.stop()
        cluster.delete()


def without_restless(objects):
    return {key: value for key, value in objects.items() if key[1] not in RESTLESS}


def test_site_stops_before_any_change_and_lists_what_it_would_drop(platform):
    kubeconfig, tools = platform["kubeconfig"], platform["tools"]
    before, revision = without_restless(cluster_objects(kubeconfig)), release_revision(tools, kubeconfig)
    refused = platform["fairgpu"].site()
    assert refused.rc != 0
    said = refused.messages()
    # Key by key: their replicas, their feature gate and their integrations would be dropped by a reset.
    for key in ("controllerManager.replicas", "controllerManager.featureGates", "kueue_adopt: merge"):
        assert key in said, said
    assert refused.changed_tasks() == [], refused.changed_tasks()
    assert release_revision(tools, kubeconfig) == revision
    assert without_restless(cluster_objects(kubeconfig)) == before


def adoption_of(run_):
    """The result of the kueue role's adoption task ("Decide what to do with the release") of the roll-out play."""
    found = [host for play in run_.result["plays"] for task in play["tasks"] for host in task["hosts"].values()
             if "Decide what to do with the release" in task["task"]["name"] and not host.get("skipped")]
    assert found, run_.messages()
    return found[-1]


def test_check_diff_states_the_merged_values_and_changes_nothing(platform):
    kubeconfig, tools = platform["kubeconfig"], platform["tools"]
    revision = release_revision(tools, kubeconfig)
    check = platform["fairgpu"].site("--check", "--diff", kueue_adopt="merge",
                                     monitoring_enforced_cross_namespace_rules="omit")
    assert check.rc == 0, check.messages()
    adoption = adoption_of(check)
    assert adoption["decision"] == "merge" and adoption["changed"] is True
    after = yaml.safe_load(adoption["diff"]["after"])
    assert after["controllerManager"]["replicas"] == 2
    configuration = yaml.safe_load(after["managerConfig"]["controllerManagerConfigYaml"])
    assert configuration["integrations"]["frameworks"] == PLATFORM_FRAMEWORKS and "fairSharing" in configuration
    assert yaml.safe_load(adoption["diff"]["before"]) == platform_values(tools)
    assert release_revision(tools, kubeconfig) == revision


def test_adopt_merge_keeps_their_values_and_a_second_run_changes_nothing(platform):
    kubeconfig, tools = platform["kubeconfig"], platform["tools"]
    merged = platform["fairgpu"].site(kueue_adopt="merge", monitoring_enforced_cross_namespace_rules="omit")
    assert merged.rc == 0, merged.messages()
    values = release_values(tools, kubeconfig)
    assert values["controllerManager"]["replicas"] == 2
    assert PLATFORM_FEATURE_GATE in values["controllerManager"]["featureGates"]
    configuration = yaml.safe_load(values["managerConfig"]["controllerManagerConfigYaml"])
    assert set(PLATFORM_FRAMEWORKS) <= set(configuration["integrations"]["frameworks"]), configuration
    assert configuration["fairSharing"]["preemptionStrategies"], configuration
    deployment = kubectl_json(kubeconfig, "get", "deployment", "-n", KUEUE_NS, RELEASE + "-controller-manager")
    assert deployment["spec"]["replicas"] == 2
    again = platform["fairgpu"].site(kueue_adopt="merge", monitoring_enforced_cross_namespace_rules="omit")
    assert again.rc == 0, again.messages()
    assert again.changed_tasks() == [], again.changed_tasks()
    platform["runs"]["merged"] = merged


def test_a_hand_edit_of_kueues_configuration_is_listed_then_repaired_with_a_restart(platform):
    """Fair sharing taken out of the release's ConfigMap at 2 a.m. (another field manager): --check --diff lists it
    and changes nothing; site.yml writes the adopted Configuration back, keeps their integrations, and restarts
    Kueue (a new pod template, so a new ReplicaSet)."""
    kubeconfig = platform["kubeconfig"]
    core, apps = k8s.CoreV1Api(platform["api"]), k8s.AppsV1Api(platform["api"])
    config_map, deployment = RELEASE + "-manager-config", RELEASE + "-controller-manager"
    live = yaml.safe_load(core.read_namespaced_config_map(config_map, KUEUE_NS).data["controller_manager_config.yaml"])
    adopted = json.loads(json.dumps(live))
    del live["fairSharing"]
    core.patch_namespaced_config_map(config_map, KUEUE_NS, {"data": {"controller_manager_config.yaml": yaml.safe_dump(live)}},
                                     field_manager="kubectl-edit", _content_type="application/merge-patch+json")
    before = apps.read_namespaced_deployment(deployment, KUEUE_NS).spec.template.metadata.annotations or {}
    sets = {r.metadata.name for r in apps.list_namespaced_replica_set(KUEUE_NS).items}
    where = "ConfigMap/%s/%s controller_manager_config.yaml fairSharing: live (absent)" % (KUEUE_NS, config_map)

    check = platform["fairgpu"].site("--check", "--diff", kueue_adopt="merge",
                                     monitoring_enforced_cross_namespace_rules="omit")
    assert check.rc == 0, check.messages()
    listed = check.drift_lines("would repair")
    assert [line for line in listed if line.startswith(where)] and len(listed) == 1, listed
    assert "fairSharing" not in yaml.safe_load(core.read_namespaced_config_map(config_map, KUEUE_NS)
                                               .data["controller_manager_config.yaml"]), "--check changed nothing"

    repair = platform["fairgpu"].site(kueue_adopt="merge", monitoring_enforced_cross_namespace_rules="omit")
    assert repair.rc == 0, repair.messages()
    assert repair.drift_lines("repaired") == listed
    assert yaml.safe_load(core.read_namespaced_config_map(config_map, KUEUE_NS)
                          .data["controller_manager_config.yaml"]) == adopted
    after = apps.read_namespaced_deployment(deployment, KUEUE_NS).spec.template.metadata.annotations or {}
    assert after != before, "a new pod template: Kueue restarts and reads the repaired Configuration"
    new_sets = {r.metadata.name for r in apps.list_namespaced_replica_set(KUEUE_NS).items} - sets
    assert new_sets, "a new ReplicaSet"
    assert kubectl(kubeconfig, "rollout", "status", "-n", KUEUE_NS, "deployment/" + deployment,
                   "--timeout=120s").returncode == 0


def test_the_operators_rewrite_under_enforcement_fires_the_over_guarantee_alert_and_keeps_kueue_down_quiet(platform):
    """fairgpu's rules as the platform's Prometheus Operator rewrote them for their Prometheus (enforcedNamespaceLabel):
    promtool with the series labelled as the scrape labels them (tests/rules/enforced/)."""
    data = promop.rule_files_with(platform["api"], PLATFORM_MONITORING_NS, "platform",
                                  ["%s-fairgpu-kueue-alerts-" % KUEUE_NS])
    kueue = yaml.safe_load(next(v for k, v in data.items() if k.startswith(KUEUE_NS + "-fairgpu-kueue-alerts-")))
    down = next(r for g in kueue["groups"] for r in g["rules"] if r.get("alert") == "FairgpuKueueDown")
    assert 'namespace="%s"' % KUEUE_NS in down["expr"], down["expr"]
    test_file = os.path.join(ROOT, "tests", "rules", "enforced", "fairgpu-alerts-enforced.test.yml")
    proc = promop.promtool_test(platform["tools"]["binaries"]["promtool"], data, test_file,
                                os.path.join(platform["workdir"], "promtool"))
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_pod_security_of_the_platform_is_kept_and_fairgpus_namespace_labelled(platform):
    """The platform's kueue-system (no labels: the cluster's baseline default) is not relabelled; the namespace fairgpu
    created for its monitoring objects carries its level (plugins/module_utils/cluster/pod_security.py)."""
    kueue = kubectl_json(platform["kubeconfig"], "get", "namespace", KUEUE_NS)["metadata"].get("labels") or {}
    assert not [k for k in kueue if k.startswith("pod-security.kubernetes.io/")], kueue
    ours = kubectl_json(platform["kubeconfig"], "get", "namespace", MONITORING_NS)["metadata"]["labels"]
    assert ours["pod-security.kubernetes.io/enforce"] == "restricted", ours
    # And the API server enforces baseline where no label says otherwise.
    privileged = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "it-privileged", "namespace": "default"},
                  "spec": {"hostNetwork": True, "containers": [{"name": "c", "image": "busybox"}]}}
    refused = kubectl(platform["kubeconfig"], "create", "--dry-run=server", "-f", "-", stdin=json.dumps(privileged))
    assert refused.returncode != 0 and 'violates PodSecurity "baseline:latest"' in refused.stderr, refused.stderr


def test_no_process_of_the_cluster_holds_a_connection_off_the_machine(platform):
    """One sample of the session's socket watch (tests/integration/sockets.py) while the platform's processes run:
    the API server, etcd, the controllers, kwok and the Prometheus Operator are watched, none is connected outside
    127.0.0.0/8 (the watch over the whole session fails it on any such connection too)."""
    seen = set()
    offences = sockets.sample(sockets.toolchain_cache(), seen=seen)
    assert {"kube-apiserver", "etcd", "kwok-controller", "prometheus-operator"} <= seen, seen
    assert offences == [], [sockets.describe(o) for o in offences]
