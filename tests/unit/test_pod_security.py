"""Pod Security of the namespaces fairgpu installs into (plugins/module_utils/cluster/pod_security.py): the levels,
the labels, and the pre-check that reads existing namespaces and the cluster's default before anything is installed.

The refusal texts are PodSecurity's own (k8s.io/pod-security-admission v0.36.3 admission/admission.go EvaluatePod,
"violates PodSecurity %q: %s"; policy/check_*.go for the details), as kube-apiserver v1.36.3 answers a dry-run pod
create (the order of the details is kube-apiserver v1.36.3's, seen in tests/integration/test_15_pod_security.py);
the JSON form is the Status body kubernetes.core.k8s puts in its failure message."""

import json

import pytest

from ansible_collections.fairgpu.tenancy.plugins.module_utils.cluster import pod_security as psa
from ansible_collections.fairgpu.tenancy.plugins.module_utils.plan.resolve import run_settings

BASELINE_REFUSAL = (
    'pods "fairgpu-pod-security-probe" is forbidden: violates PodSecurity "baseline:latest": host namespaces '
    '(hostNetwork=true, hostPID=true), hostPath volumes (volume "host"), privileged (container "probe" must not set '
    'securityContext.privileged=true)')
STATUS = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": BASELINE_REFUSAL,
          "reason": "Forbidden", "details": {"name": "fairgpu-pod-security-probe", "kind": "pods"}, "code": 403}
# kubernetes.core.k8s: "Failed to create object: b'<Status JSON>'" (module_utils/k8s/service.py create).
MODULE_MSG = "Failed to create object: b'%s'" % json.dumps(STATUS)


def ns(name, labels=None, managers=("kubectl-create",)):
    return {"object": {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels or {}}},
            "other_writers": list(managers)}


def operator_rows():
    return psa.rows({"gpu_operator": "helm", "kueue": "helm", "monitoring": "helm"},
                    {"gpu_operator": "gpu-operator", "kueue": "kueue-system", "monitoring": "monitoring"})


def test_the_levels_each_upstream_documents():
    rows = {r["namespace"]: r for r in operator_rows()}
    assert (rows["gpu-operator"]["needs"], rows["gpu-operator"]["label"]) == ("privileged", "privileged")
    assert "docs.nvidia.com" in rows["gpu-operator"]["source"]
    assert (rows["monitoring"]["needs"], rows["monitoring"]["label"]) == ("privileged", "privileged")
    assert "prometheus-node-exporter" in rows["monitoring"]["source"]
    assert (rows["kueue-system"]["needs"], rows["kueue-system"]["label"]) == ("restricted", "restricted")


def test_local_modes_run_no_pods_and_are_labelled_restricted():
    rows = psa.rows({"gpu_operator": "simulated", "kueue": "local", "monitoring": "local"},
                    {"gpu_operator": "gpu-operator", "kueue": "kueue-system", "monitoring": "fairgpu-monitoring"})
    assert [(r["namespace"], r["needs"], r["label"]) for r in rows] == [
        ("gpu-operator", None, "restricted"), ("kueue-system", None, "restricted"),
        ("fairgpu-monitoring", None, "restricted")]
    # A Prometheus Operator already there: fairgpu's objects only, no node-exporter.
    assert psa.policy("monitoring", "helm", install_chart=False)["needs"] is None
    assert psa.policy("monitoring", "helm", install_chart="false")["needs"] is None


def test_the_resolver_carries_the_rows():
    settings = run_settings("site", "existing")
    assert [r["namespace"] for r in settings["pod_security"]] == ["gpu-operator", "kueue-system", "fairgpu-monitoring"]
    settings = run_settings("site", "existing", chart_settings={"monitoring_install_chart": False})
    assert settings["pod_security"][-1]["needs"] is None


def test_labels_enforce_audit_warn_with_versions():
    assert psa.labels("privileged") == {
        "pod-security.kubernetes.io/enforce": "privileged", "pod-security.kubernetes.io/enforce-version": "latest",
        "pod-security.kubernetes.io/audit": "privileged", "pod-security.kubernetes.io/audit-version": "latest",
        "pod-security.kubernetes.io/warn": "privileged", "pod-security.kubernetes.io/warn-version": "latest"}
    with pytest.raises(ValueError):
        psa.labels("root")


@pytest.mark.parametrize("enforced, needed, ok", [
    ("privileged", "privileged", True), ("baseline", "privileged", False), ("restricted", "privileged", False),
    ("baseline", "restricted", True), ("restricted", "restricted", True), ("restricted", None, True),
])
def test_admits(enforced, needed, ok):
    assert psa.admits(enforced, needed) is ok


def test_absent_namespaces_are_created_labelled():
    result = psa.plan(operator_rows(), {})
    assert result["errors"] == [] and result["probe"] == []
    gpu = result["namespaces"]["gpu-operator"]
    assert gpu["action"] == "create"
    assert gpu["labels"]["pod-security.kubernetes.io/enforce"] == "privileged"
    assert gpu["labels"]["app.kubernetes.io/managed-by"] == "fairgpu"
    assert result["namespaces"]["kueue-system"]["labels"]["pod-security.kubernetes.io/warn"] == "restricted"


def test_fairgpus_own_namespace_is_relabelled():
    found = {"gpu-operator": ns("gpu-operator", {"app.kubernetes.io/managed-by": "fairgpu",
                                                 "pod-security.kubernetes.io/enforce": "baseline"}, managers=())}
    result = psa.plan(operator_rows(), found)
    assert result["errors"] == []
    assert result["namespaces"]["gpu-operator"]["action"] == "label"


def test_a_namespace_someone_else_wrote_to_is_not_fairgpus_even_with_the_label():
    # An earlier fairgpu put its managed-by label on a namespace that was there (server-side apply): another
    # field manager wrote to it, so it stays theirs (the rule teardown uses).
    found = {"gpu-operator": ns("gpu-operator", {"app.kubernetes.io/managed-by": "fairgpu",
                                                 "pod-security.kubernetes.io/enforce": "baseline"}, managers=("helm",))}
    result = psa.plan(operator_rows(), found)
    assert result["namespaces"]["gpu-operator"]["action"] == "keep"
    assert len(result["errors"]) == 1


def test_another_teams_namespace_below_the_level_stops_the_run_naming_everything():
    found = {"gpu-operator": ns("gpu-operator", {"pod-security.kubernetes.io/enforce": "baseline"})}
    result = psa.plan(operator_rows(), found)
    assert result["namespaces"]["gpu-operator"]["action"] == "keep"
    [error] = result["errors"]
    assert error.startswith("Pod Security: namespace gpu-operator exists, is not fairgpu's and enforces baseline "
                            "(its label pod-security.kubernetes.io/enforce)")
    assert "need privileged" in error and "NFD worker" in error
    assert "kubectl label --overwrite namespace gpu-operator pod-security.kubernetes.io/enforce=privileged" in error
    assert "does not relabel a namespace it does not own" in error


def test_another_teams_namespace_at_a_level_that_admits_is_kept_as_it_is():
    found = {"gpu-operator": ns("gpu-operator", {"pod-security.kubernetes.io/enforce": "privileged"}),
             "kueue-system": ns("kueue-system", {"pod-security.kubernetes.io/enforce": "restricted"}),
             "monitoring": ns("monitoring", {"pod-security.kubernetes.io/enforce": "privileged"})}
    result = psa.plan(operator_rows(), found)
    assert result["errors"] == []
    assert {n: r["action"] for n, r in result["namespaces"].items()} == {
        "gpu-operator": "keep", "kueue-system": "keep", "monitoring": "keep"}
    assert all(r["labels"] == {} for r in result["namespaces"].values())


def test_an_unknown_level_is_read_as_restricted():
    found = {"gpu-operator": ns("gpu-operator", {"pod-security.kubernetes.io/enforce": "Privileged"})}
    [error] = psa.plan(operator_rows(), found)["errors"]
    assert "enforces restricted" in error and "'Privileged', which Pod Security reads as restricted" in error


def test_an_unlabelled_namespace_is_probed_then_judged_by_the_cluster_default():
    found = {"monitoring": ns("monitoring")}
    first = psa.plan(operator_rows(), found)
    assert first["probe"] == ["monitoring"] and first["errors"] == []
    second = psa.plan(operator_rows(), found, {"monitoring": {"failed": True, "msg": MODULE_MSG}})
    assert second["probe"] == []
    [error] = second["errors"]
    assert "enforces baseline (the cluster's default (it has no pod-security.kubernetes.io/enforce label))" in error
    # What would be refused, in PodSecurity's words.
    assert ('host namespaces (hostNetwork=true, hostPID=true), hostPath volumes (volume "host"), privileged '
            '(container "probe" must not set securityContext.privileged=true)') in error
    assert second["namespaces"]["monitoring"]["source"] == "cluster default"


def test_an_unlabelled_namespace_the_default_admits_is_fine():
    found = {"monitoring": ns("monitoring")}
    result = psa.plan(operator_rows(), found, {"monitoring": {"failed": False, "msg": ""}})
    assert result["errors"] == [] and result["namespaces"]["monitoring"]["level"] == "admitted"


def test_a_probe_failing_for_another_reason_says_so():
    found = {"monitoring": ns("monitoring")}
    msg = ('Failed to create object: b\'{"message":"admission webhook \\"x.kyverno.svc\\" does not support dry run"}\'')
    [error] = psa.plan(operator_rows(), found, {"monitoring": {"failed": True, "msg": msg}})["errors"]
    assert "failed for another reason" in error and "does not support dry run" in error


def test_no_pods_no_probe():
    rows = psa.rows({"gpu_operator": "simulated", "kueue": "local", "monitoring": "local"},
                    {"gpu_operator": "g", "kueue": "kueue-system", "monitoring": "m"})
    result = psa.plan(rows, {"g": ns("g"), "kueue-system": ns("kueue-system"),
                             "m": ns("m", {"pod-security.kubernetes.io/enforce": "restricted"})})
    del result["lines"]
    assert result == {"errors": [], "probe": [],
                      "namespaces": {"g": {"action": "keep", "labels": {}, "level": None, "source": None},
                                     "kueue-system": {"action": "keep", "labels": {}, "level": None, "source": None},
                                     "m": {"action": "keep", "labels": {}, "level": "restricted", "source": "label"}}}


@pytest.mark.parametrize("text", [BASELINE_REFUSAL, MODULE_MSG, json.dumps(STATUS)])
def test_refusal_reads_the_level_and_what(text):
    refused = psa.refusal(text)
    assert (refused["level"], refused["version"]) == ("baseline", "latest")
    assert refused["detail"].startswith("host namespaces (hostNetwork=true, hostPID=true)")
    assert refused["detail"].endswith('privileged (container "probe" must not set securityContext.privileged=true)')


def test_refusal_of_other_errors_is_none():
    assert psa.refusal('namespaces "x" not found') is None
    assert psa.refusal(None) is None


def test_the_probe_pod_asks_for_what_the_operands_need():
    pod = psa.probe_pod("gpu-operator", psa.policy("gpu_operator", "helm"))
    spec = pod["spec"]
    assert spec["hostNetwork"] and spec["hostPID"] and spec["volumes"][0]["hostPath"] == {"path": "/"}
    assert spec["containers"][0]["securityContext"] == {"privileged": True}
    restricted = psa.probe_pod("kueue-system", psa.policy("kueue", "helm"))["spec"]["containers"][0]["securityContext"]
    assert restricted["runAsNonRoot"] and restricted["capabilities"] == {"drop": ["ALL"]}


def test_admission_configuration_of_the_embedded_api_server():
    defaults = {"enforce": "baseline", "enforce-version": "latest", "warn": "restricted"}
    assert psa.admission_configuration_errors(defaults, {"namespaces": ["kube-system"]}) == []
    assert psa.admission_configuration(defaults, {"namespaces": ["kube-system"]}) == {
        "apiVersion": "apiserver.config.k8s.io/v1", "kind": "AdmissionConfiguration",
        "plugins": [{"name": "PodSecurity", "configuration": {
            "apiVersion": "pod-security.admission.config.k8s.io/v1", "kind": "PodSecurityConfiguration",
            "defaults": {"enforce": "baseline", "enforce-version": "latest", "warn": "restricted"},
            "exemptions": {"usernames": [], "runtimeClasses": [], "namespaces": ["kube-system"]}}}]}
    assert psa.admission_configuration({}) is None and psa.admission_configuration(None) is None


@pytest.mark.parametrize("defaults, exemptions, message", [
    ({"enforce": "strict"}, None, "lab_cluster_pod_security_defaults.enforce: 'strict' is not a Pod Security level"),
    ({"enforce-version": "1.30"}, None, "lab_cluster_pod_security_defaults.enforce-version: '1.30' is not"),
    ({"enforced": "baseline"}, None, "lab_cluster_pod_security_defaults.enforced: unknown key"),
    ("baseline", None, "lab_cluster_pod_security_defaults: give a mapping"),
    ({"enforce": "baseline"}, {"users": ["a"]}, "lab_cluster_pod_security_exemptions.users: unknown key"),
    ({"enforce": "baseline"}, {"namespaces": "kube-system"}, "lab_cluster_pod_security_exemptions.namespaces: give a list"),
    ({}, {"namespaces": ["kube-system"]}, "lab_cluster_pod_security_exemptions: exemptions without"),
])
def test_admission_configuration_errors(defaults, exemptions, message):
    errors = psa.admission_configuration_errors(defaults, exemptions)
    assert len(errors) == 1 and errors[0].startswith(message), errors


# Field reports, turned into cases.
def test_tigera_operator_2996_unlabelled_namespace_under_a_baseline_default():
    # tigera/operator#2996: a namespace without Pod Security labels on a cluster whose default is baseline; the
    # refusal as the reporter quotes it.
    msg = ('pods "tigera-operator-6d8c69f9c6-wl988" is forbidden: violates PodSecurity "baseline:latest": host '
           'namespaces (hostNetwork=true), hostPath volumes (volume "var-lib-calico")')
    assert psa.refusal(msg) == {"level": "baseline", "version": "latest",
                                "detail": 'host namespaces (hostNetwork=true), hostPath volumes (volume "var-lib-calico")'}
    [error] = psa.plan(operator_rows(), {"gpu-operator": ns("gpu-operator")},
                       {"gpu-operator": {"failed": True, "msg": msg}})["errors"]
    assert "enforces baseline (the cluster's default" in error and "var-lib-calico" in error


def test_openshift_restricted_by_default_admits_kueue_and_refuses_the_gpu_operator():
    # openshift/sandboxed-containers-operator#217: OpenShift 4.12 enforcing restricted for every pod by default
    # ("restricted:latest"); OpenShift's label syncer writes only audit and warn (docs.okd.io osdk-complying-with-psa),
    # so the enforce level is the default's and only a dry run tells it.
    synced = {"pod-security.kubernetes.io/audit": "restricted", "pod-security.kubernetes.io/warn": "restricted"}
    found = {"gpu-operator": ns("gpu-operator", synced), "kueue-system": ns("kueue-system", synced)}
    first = psa.plan(operator_rows(), found)
    assert first["probe"] == ["gpu-operator", "kueue-system"]
    refused = ('pods "fairgpu-pod-security-probe" is forbidden: violates PodSecurity "restricted:latest": host '
               'namespaces (hostNetwork=true, hostPID=true), privileged (container "probe" must not set '
               'securityContext.privileged=true)')
    result = psa.plan(operator_rows(), found, {"gpu-operator": {"failed": True, "msg": refused},
                                               "kueue-system": {"failed": False, "msg": ""}})
    [error] = result["errors"]
    assert error.startswith("Pod Security: namespace gpu-operator exists, is not fairgpu's and enforces restricted")
    assert result["namespaces"]["kueue-system"]["level"] == "admitted"


def test_a_pinned_version_is_read():
    # pulp/pulp-operator#1102, trustyai-service-operator#50: levels pinned to a version, "restricted:v1.24".
    assert psa.refusal('violates PodSecurity "restricted:v1.24": runAsNonRoot != true')["version"] == "v1.24"


def test_nfd_worker_is_named_among_the_gpu_operators_operands():
    # kubernetes-sigs/node-feature-discovery-operator#156: nfd-worker needs hostNetwork and hostPath volumes; the
    # GPU Operator's chart deploys NFD in its own namespace, so that namespace needs privileged for it too.
    row = psa.policy("gpu_operator", "helm")
    assert "NFD worker" in row["what"] and row["needs"] == "privileged"


def test_kueue_on_the_hosts_network_needs_privileged():
    row = psa.policy("kueue", "helm", kueue_values={"controllerManager": {"hostNetwork": True}})
    assert (row["needs"], row["label"]) == ("privileged", "privileged") and "hostNetwork" in row["what"]
    assert psa.policy("kueue", "helm", kueue_values={"controllerManager": {"hostNetwork": False}})["needs"] == "restricted"
    # The local process runs no pod, whatever the chart's values say.
    assert psa.policy("kueue", "local", kueue_values={"controllerManager": {"hostNetwork": True}})["needs"] is None
    rows = run_settings("site", "existing", chart_settings={"kueue_extra_values": {"controllerManager": {"hostNetwork": True}}})
    assert [r["needs"] for r in rows["pod_security"]] == ["privileged", "privileged", "privileged"]
