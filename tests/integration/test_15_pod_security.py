"""Issue 25, item 3: Pod Security everywhere fairgpu creates a namespace, on an embedded cluster of its own
(fairgpu-it-psa) whose kube-apiserver enforces ``baseline`` by default, as hardened distributions run it: a PodSecurity
AdmissionConfiguration (lab_cluster_pod_security_defaults) given by --admission-control-config-file
(https://kubernetes.io/docs/tasks/configure-pod-container/enforce-standards-admission-controller/).

What the real API server decides, each with a server-side dry run (admission runs, nothing is stored): a privileged pod
in an unlabelled namespace is refused with PodSecurity's message; in the namespaces fairgpu's task files created it is
admitted where the operands need privileged (the GPU Operator's, kube-prometheus-stack's) and refused in Kueue's
(restricted). Then the same cluster declared ``cluster_provider: existing``, with namespaces a platform team made: the
pre-check stops before anything is installed, naming the namespace, its level, whether from its label or from the
cluster's default (read from the API server's refusal of the dry run), and what would be refused; once the team
labelled them, it passes and fairgpu leaves their labels as they are.

The GPU Operator's and kube-prometheus-stack's charts cannot be installed here (no chart repository); their
namespaces are made by the module the roles call (component_namespace) as their helm modes call it
(tests/integration/pod_security.yml)."""

import json
import os

import pytest
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.client.rest import ApiException

from conftest import KWOK_WORKDIR, ROOT, playbook

pytestmark = pytest.mark.own_cluster

PLAYBOOK = "../tests/integration/pod_security.yml"
NAME = "fairgpu-it-psa"
KUBECONFIG = os.path.join(KWOK_WORKDIR, "clusters", NAME, "kubeconfig.yaml")
GPU_NS, KUEUE_NS, MONITORING_NS = "gpu-operator", "kueue-system", "fairgpu-monitoring"
VARS = {
    "cluster_name": NAME, "validate_results_dir": os.path.join(ROOT, "results", "it-psa"),
    "lab_cluster_apiserver_port": 27200,
    "run_local_ports": {"kueue_webhook": 27243, "kueue_metrics": 27244, "kueue_health": 27281, "prometheus": 27290,
                        "dcgm_exporter": 27240, "kube_state_metrics": 27320, "kube_state_metrics_telemetry": 27330},
    "lab_cluster_node_pools": [{"name": "gpu-node", "count": 1, "gpu_product": "NVIDIA-H100-80GB-HBM3",
                                "gpu_count": 8, "cpu": "96", "memory": "1Ti"}],
    "lab_cluster_pod_security_defaults": {"enforce": "baseline", "enforce-version": "latest", "warn": "restricted"},
    "lab_cluster_pod_security_exemptions": {"namespaces": ["kube-system"]},
}
# The same cluster as a platform team's: cluster_provider existing (the helm modes' namespaces and pre-check).
EXISTING = dict(VARS, cluster_provider="existing", cluster_kubeconfig=KUBECONFIG)
PRIVILEGED = {"containers": [{"name": "probe", "image": "registry.k8s.io/pause:3.10",
                              "securityContext": {"privileged": True}}], "hostNetwork": True}


@pytest.fixture(scope="module")
def cluster():
    try:
        run = playbook(PLAYBOOK, "-e", json.dumps(VARS))
        assert run.rc == 0, run.messages()
        api = k8s_config.new_client_from_config(config_file=KUBECONFIG)
        yield {"api": api, "core": k8s.CoreV1Api(api), "first": run}
    finally:
        playbook("teardown.yml", "-e", json.dumps(VARS))


def dry_run_pod(core, namespace, name="it-privileged"):
    """None when admitted, else the API server's refusal (status and message)."""
    try:
        core.create_namespaced_pod(namespace, {"metadata": {"name": name}, "spec": PRIVILEGED}, dry_run="All")
        return None
    except ApiException as error:
        return error.status, json.loads(error.body)["message"]


def test_the_api_server_refuses_a_privileged_pod_in_an_unlabelled_namespace(cluster):
    core = cluster["core"]
    core.create_namespace({"metadata": {"name": "it-plain"}})
    status, message = dry_run_pod(core, "it-plain")
    assert status == 403, message
    assert 'violates PodSecurity "baseline:latest": host namespaces (hostNetwork=true), privileged (container ' \
           '"probe" must not set securityContext.privileged=true)' in message, message
    # The configuration's exemption: kube-system admits it.
    assert dry_run_pod(core, "kube-system") is None


def test_fairgpus_namespaces_carry_their_levels_and_admit_their_operands(cluster):
    core = cluster["core"]
    for namespace, level in ((GPU_NS, "privileged"), (KUEUE_NS, "restricted"), (MONITORING_NS, "privileged")):
        labels = core.read_namespace(namespace).metadata.labels
        for mode in ("enforce", "audit", "warn"):
            assert labels["pod-security.kubernetes.io/" + mode] == level, (namespace, labels)
            assert labels["pod-security.kubernetes.io/%s-version" % mode] == "latest", (namespace, labels)
        assert labels["app.kubernetes.io/managed-by"] == "fairgpu", labels
    assert dry_run_pod(core, GPU_NS) is None
    assert dry_run_pod(core, MONITORING_NS) is None
    status, message = dry_run_pod(core, KUEUE_NS)
    assert status == 403 and 'violates PodSecurity "restricted:latest"' in message, message
    said = " ".join(str(m) for play in cluster["first"].result.get("plays", []) for t in play["tasks"]
                    for h in t["hosts"].values() for m in [h.get("msg", "")])
    assert "kueue-system: created by fairgpu, Pod Security restricted (enforce, audit, warn)" in said, said


def test_the_pre_check_stops_on_a_platform_teams_namespaces_then_keeps_their_labels(cluster):
    core = cluster["core"]
    core.create_namespace({"metadata": {"name": "team-gpu"}})
    core.create_namespace({"metadata": {"name": "team-monitoring",
                                        "labels": {"pod-security.kubernetes.io/enforce": "baseline"}}})
    teams = dict(EXISTING, run_namespaces={"gpu_operator": "team-gpu", "monitoring": "team-monitoring"},
                 psa_namespaces=False)
    run = playbook(PLAYBOOK, "-e", json.dumps(teams))
    said = run.messages()
    assert run.rc != 0, said
    # From the cluster's default, which only the dry run shows, with what would be refused.
    assert ("Pod Security: namespace team-gpu exists, is not fairgpu's and enforces baseline (the cluster's default "
            "(it has no pod-security.kubernetes.io/enforce label)), but the NVIDIA GPU Operator's operands") in said, said
    assert ('the API server would refuse them: host namespaces (hostNetwork=true, hostPID=true), hostPath volumes '
            '(volume "host"), privileged (container "probe" must not set securityContext.privileged=true)') in said, said
    # From the team's label.
    assert ("namespace team-monitoring exists, is not fairgpu's and enforces baseline (its label "
            "pod-security.kubernetes.io/enforce), but kube-prometheus-stack's node-exporter") in said, said
    assert "kubectl label --overwrite namespace team-gpu pod-security.kubernetes.io/enforce=privileged" in said, said
    # Nothing was labelled, nothing installed.
    assert "pod-security.kubernetes.io/enforce" not in (core.read_namespace("team-gpu").metadata.labels or {})

    # The team follows the fix: the pre-check passes and their labels stay theirs (no fairgpu label, no change).
    for namespace in ("team-gpu", "team-monitoring"):
        core.patch_namespace(namespace, {"metadata": {"labels": {"pod-security.kubernetes.io/enforce": "privileged"}}})
    run = playbook(PLAYBOOK, "-e", json.dumps(dict(teams, psa_namespaces=True)))
    assert run.rc == 0, run.messages()
    assert [t for t in run.changed_tasks() if "Pod Security" in t] == [], run.changed_tasks()
    for namespace in ("team-gpu", "team-monitoring"):
        labels = core.read_namespace(namespace).metadata.labels
        assert "app.kubernetes.io/managed-by" not in labels and "pod-security.kubernetes.io/audit" not in labels, labels
