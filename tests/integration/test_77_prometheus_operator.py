"""Issue 15, part 2: the real Prometheus Operator (v0.85.0, built from its Go module by the toolchain) turns the
monitoring role's helm-mode objects into Prometheus's configuration, on an embedded cluster of its own
(fairgpu-it-promop) that has the operator's own CRDs.

The role runs its real path for a cluster that already has a Prometheus Operator (monitoring_mode helm,
monitoring_install_chart false; tests/integration/prometheus_operator.yml): without the CRDs it stops before anything
changes; with them it applies the objects server-side (validated by the CRDs' schemas), and a second run changes
nothing. The operator runs as a local process on the cluster's kubeconfig and generates, for Prometheus custom
resources made as kube-prometheus-stack makes its own from the values fairgpu passes
(objects.chart_prometheus_selectors over objects.chart_values), the configuration Secret and rule-file ConfigMap
that a Prometheus pod would load. The test decodes them and compares them with what fairgpu meant.

Stand-ins, for what cannot run here: Kueue's namespace (the kueue role, or Kueue's chart, makes it), and the
Prometheus custom resources themselves (kube-prometheus-stack's template makes them; its chart repository is not
reachable). No Prometheus pod runs (no kubelet): what is checked is the operator's output, not a scrape.

Field problems of the upstream projects this covers, each in a test below: ServiceMonitors ignored for want of the
release label (prometheus-operator/prometheus-operator#5917, prometheus-community/helm-charts#1631) or because the
Prometheus looks only in its own namespace (#5917's answer); ServiceMonitors dropped by a Prometheus that denies file
access (arbitraryFSAccessThroughSMs; redhat-cop/global-load-balancer-operator#45, operator-framework/operator-sdk#7003,
prometheus-community/helm-charts#7230); bearerTokenFile deprecated for authorization from a Secret
(prometheus-operator/prometheus-operator#6719); ``namespace`` renamed ``exported_namespace`` without honorLabels
(kedacore/charts#434, NVIDIA/gpu-operator#811), which fairgpu's rules rely on. Hardened set-ups (the last tests,
about 40 s): enforcedNamespaceLabel rewriting rules that read other namespaces' series
(prometheus-operator/prometheus-operator#6775, #6418), excludedFromEnforcement as the fix (#3207, #4397),
ignoreNamespaceSelectors needing each ServiceMonitor in the namespace it scrapes (rancher/charts#666,
prometheus-community/helm-charts#3953, openshift/openshift-docs#33480)."""

import base64
import gzip
import json
import os
import subprocess
import time

import pytest
import yaml
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.client.rest import ApiException

from ansible_collections.fairgpu.tenancy.plugins.module_utils.monitoring import objects
import promop
from conftest import KWOK_WORKDIR, ROOT, playbook, wait_until

pytestmark = pytest.mark.own_cluster

PLAYBOOK = "../tests/integration/prometheus_operator.yml"
NAME = "fairgpu-it-promop"
MONITORING_NS, KUEUE_NS, DCGM_NS = "fairgpu-monitoring", "kueue-system", "gpu-operator"
RELEASE = "kube-prometheus-stack"
INTERVAL = "30s"  # monitoring_scrape_interval in helm mode (roles/monitoring/defaults/main.yml)
TENANTS = [{"name": "team-a", "namespaces": ["team-a"]}, {"name": "team-b", "namespaces": ["team-b", "team-b-dev"]}]
VARS = {
    "cluster_name": NAME, "validate_results_dir": os.path.join(ROOT, "results", "it-promop"),
    "run_local_ports": {"kueue_webhook": 31443, "kueue_metrics": 31444, "kueue_health": 31081, "prometheus": 31090,
                        "dcgm_exporter": 31400, "kube_state_metrics": 31480, "kube_state_metrics_telemetry": 31490},
    "lab_cluster_node_pools": [{"name": "gpu-node", "count": 1, "gpu_product": "NVIDIA-H100-80GB-HBM3",
                                "gpu_count": 8, "cpu": "96", "memory": "1Ti"}],
    "monitoring_tenants": TENANTS,
    # An override of the shipped rule file's for: (the local inventory's 60 s would apply otherwise).
    "monitoring_alert_for": {"FairgpuTenantOverGuarantee": "7m"},
}
OPERATOR_LISTEN = "127.0.0.1:31080"
KUBECONFIG = os.path.join(KWOK_WORKDIR, "clusters", NAME, "kubeconfig.yaml")
RULES_FILE = os.path.join(ROOT, "files", "monitoring", "fairgpu-alerts.rules.yml")
KUEUE_SM, DCGM_SM = "serviceMonitor/%s/fairgpu-kueue/0" % KUEUE_NS, "serviceMonitor/%s/fairgpu-dcgm-exporter/0" % DCGM_NS
CONTROL_SM = "serviceMonitor/%s/it-control-token-file/0" % MONITORING_NS
# kube-prometheus-stack names its Prometheus "<fullname>-prometheus"; fullname is the release name when it contains
# the chart's name (charts/kube-prometheus-stack/templates/_helpers.tpl, kube-prometheus-stack.fullname).
CHART_PROMETHEUS = RELEASE + "-prometheus"


def toolchain():
    proc = subprocess.run(["bash", os.path.join(ROOT, "files", "lab", "toolchain", "toolchain.sh"), "ensure",
                           "prometheus-operator"], capture_output=True, text=True, check=False, timeout=3600)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def prometheus(name, values=None, release=RELEASE, **extra):
    """A Prometheus custom resource as kube-prometheus-stack's template makes it from ``values`` (the chart's
    defaults overridden by fairgpu's ``chart_values``): the selectors the template decides, the intervals."""
    spec = dict(objects.chart_prometheus_selectors(values or {}, release))
    pspec = ((values or {}).get("prometheus") or {}).get("prometheusSpec") or {}
    for key in ("scrapeInterval", "evaluationInterval"):
        if key in pspec:
            spec[key] = pspec[key]
    spec.update(extra)
    return {"apiVersion": "monitoring.coreos.com/v1", "kind": "Prometheus",
            "metadata": {"name": name, "namespace": MONITORING_NS}, "spec": spec}


FAIRGPU_VALUES = objects.chart_values(INTERVAL, INTERVAL)
PROMETHEUSES = {
    # fairgpu's values: serviceMonitorSelectorNilUsesHelmValues and ruleSelectorNilUsesHelmValues false.
    CHART_PROMETHEUS: prometheus(CHART_PROMETHEUS, FAIRGPU_VALUES),
    # The chart's defaults: only objects labelled release=<release> (what fairgpu's objects carry).
    "chart-defaults": prometheus("chart-defaults", {}),
    # The chart's defaults under another release name: none of fairgpu's objects.
    "other-release": prometheus("other-release", {}, release="other-release"),
    # A hardened Prometheus that refuses ServiceMonitors naming files in its container.
    "deny-fs": prometheus("deny-fs", FAIRGPU_VALUES, arbitraryFSAccessThroughSMs={"deny": True}),
    # A Prometheus made by hand without namespace selectors: it looks only in its own namespace.
    "own-namespace": {"apiVersion": "monitoring.coreos.com/v1", "kind": "Prometheus",
                      "metadata": {"name": "own-namespace", "namespace": MONITORING_NS},
                      "spec": {"serviceMonitorSelector": {}, "ruleSelector": {}}},
}
# Not fairgpu's: a ServiceMonitor with bearerTokenFile, so that the deny-fs Prometheus shows the denial is on.
CONTROL = {"apiVersion": "monitoring.coreos.com/v1", "kind": "ServiceMonitor",
           "metadata": {"name": "it-control-token-file", "namespace": MONITORING_NS},
           "spec": {"selector": {"matchLabels": {"app": "it-control"}},
                    "endpoints": [{"port": "web", "bearerTokenFile": "/var/run/secrets/kubernetes.io/serviceaccount/token"}]}}


def run_role(extra=None):
    return playbook(PLAYBOOK, "-e", json.dumps(dict(VARS, **(extra or {}))))


@pytest.fixture(scope="module")
def cluster():
    """The embedded cluster alone (no Kueue, no Prometheus) and Kueue's and the DCGM exporter's namespaces."""
    tools = toolchain()
    try:
        run = playbook(PLAYBOOK, "-e", json.dumps(dict(VARS, promop_create_cluster=True)))
        assert run.rc == 0, run.messages()
        api = k8s_config.new_client_from_config(config_file=KUBECONFIG)
        for namespace in (KUEUE_NS, DCGM_NS):  # Kueue's and the GPU Operator's, which they would bring
            k8s.CoreV1Api(api).create_namespace({"metadata": {"name": namespace}})
        yield api, tools
    finally:
        playbook("teardown.yml", "-e", json.dumps(VARS))


def names_in(api, namespace):
    core = k8s.CoreV1Api(api)
    return sorted(sa.metadata.name for sa in core.list_namespaced_service_account(namespace).items)


def test_without_an_operator_the_role_stops_before_anything_changes(cluster):
    api, _tools = cluster
    run = run_role()
    assert run.rc != 0
    said = run.messages()
    assert "monitoring_install_chart: false needs a Prometheus Operator on the cluster" in said, said
    assert "servicemonitors.monitoring.coreos.com, prometheusrules.monitoring.coreos.com" in said, said
    assert "set monitoring_install_chart: true" in said, said
    assert objects.KUEUE_METRICS_READER not in names_in(api, KUEUE_NS)
    assert MONITORING_NS not in [n.metadata.name for n in k8s.CoreV1Api(api).list_namespace().items]


def secret_text(core, namespace, name, key):
    try:
        data = core.read_namespaced_secret(name, namespace).data or {}
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise
    return base64.b64decode(data[key]) if key in data else None


@pytest.fixture(scope="module")
def applied(cluster):
    """The CRDs and the Prometheus resources (the role reads them to decide where its objects go), then the role
    twice (the second run must change nothing), then the operator. Yields the api, the two runs, the operator, the
    token the control plane put in fairgpu's Secret and the directory of the operator's log and of each configuration
    it generated (results/it-promop). The operator starts after every object is there, so its first configurations
    are complete and a job missing from one is missing for good."""
    api, tools = cluster
    promop.install_crds(api, tools["prometheus_operator_crds"])
    core, custom = k8s.CoreV1Api(api), k8s.CustomObjectsApi(api)
    core.create_namespace({"metadata": {"name": MONITORING_NS}})  # the platform team's, where their Prometheus runs
    for body in PROMETHEUSES.values():
        custom.create_namespaced_custom_object("monitoring.coreos.com", "v1", MONITORING_NS, "prometheuses", body)
    first = run_role()
    assert first.rc == 0, first.messages()
    second = run_role()
    assert second.rc == 0, second.messages()
    token = wait_until(lambda: secret_text(core, KUEUE_NS, objects.KUEUE_METRICS_TOKEN_SECRET, "token"), 60,
                       what="the token controller to fill %s" % objects.KUEUE_METRICS_TOKEN_SECRET).decode()
    custom.create_namespaced_custom_object("monitoring.coreos.com", "v1", MONITORING_NS, "servicemonitors", CONTROL)
    workdir = VARS["validate_results_dir"]  # the operator's log and each generated configuration, for a reader
    os.makedirs(workdir, exist_ok=True)
    operator = promop.Operator(tools["binaries"]["prometheus-operator"], KUBECONFIG, OPERATOR_LISTEN, workdir,
                               (MONITORING_NS, KUEUE_NS, DCGM_NS))
    try:
        yield {"api": api, "first": first, "second": second, "operator": operator, "token": token,
               "workdir": workdir, "tools": tools}
    finally:
        operator.stop()


def generated(applied, name, expect=(), timeout=60):
    """The configuration the operator generated for Prometheus ``name`` (Secret prometheus-<name>, key
    prometheus.yaml.gz), once it has every job of ``expect``: ``{job_name: scrape config}`` and the whole document."""
    core = k8s.CoreV1Api(applied["api"])

    def ready():
        raw = secret_text(core, MONITORING_NS, "prometheus-" + name, "prometheus.yaml.gz")
        if raw is None:
            return None
        doc = yaml.safe_load(gzip.decompress(raw))
        with open(os.path.join(applied["workdir"], name + ".prometheus.yaml"), "w") as handle:
            yaml.safe_dump(doc, handle)  # for a failure's reader
        jobs = {job["job_name"]: job for job in doc.get("scrape_configs") or []}
        return (jobs, doc) if set(expect) <= set(jobs) else None

    held = None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        held = ready()
        if held:
            return held
        time.sleep(0.5)
    pytest.fail("no configuration with %s for Prometheus %s within %ss (last one in %s); operator log:\n%s"
                % (", ".join(expect), name, timeout, applied["workdir"], applied["operator"].tail()))


def relabel(job, target):
    """The relabel rules of ``job`` that write ``target``."""
    return [r for r in job.get("relabel_configs") or [] if r.get("target_label") == target]


def keep_rules(job):
    return [r for r in job.get("relabel_configs") or [] if r.get("action") == "keep"]


def test_the_role_applies_server_side_and_a_second_run_changes_nothing(applied):
    changed = applied["first"].changed_tasks()
    # The monitoring namespace is the platform team's here (the fixture made it, where their Prometheus runs):
    # fairgpu keeps its labels, so only its objects change.
    assert [t.split(" : ", 1)[-1] for t in changed] == [
        "Apply fairgpu's Kueue metrics reader (ServiceAccount, RBAC, token Secret), ServiceMonitors, PrometheusRule "
        "and dashboard ConfigMap"], changed
    assert applied["second"].changed_tasks() == [], applied["second"].changed_tasks()
    custom = k8s.CustomObjectsApi(applied["api"])
    monitor = custom.get_namespaced_custom_object("monitoring.coreos.com", "v1", KUEUE_NS, "servicemonitors",
                                                  "fairgpu-kueue")
    assert "fairgpu" in [m["manager"] for m in monitor["metadata"]["managedFields"] if m["operation"] == "Apply"]


def test_kueue_job_https_bearer_token_from_the_secret_and_the_service_selector(applied):
    jobs, _doc = generated(applied, CHART_PROMETHEUS, [KUEUE_SM, DCGM_SM])
    job = jobs[KUEUE_SM]
    assert job["scheme"] == "https" and job["metrics_path"] == "/metrics"
    assert job["scrape_interval"] == INTERVAL
    # The token the control plane put in fairgpu's Secret, inline: no credentials_file, no bearer_token_file.
    assert job["authorization"] == {"type": "Bearer", "credentials": applied["token"]}
    assert "bearer_token_file" not in job and "credentials_file" not in job["authorization"]
    # Kueue's internal certificate management serves a self-signed certificate: not verified, and no file named.
    assert job["tls_config"] == {"insecure_skip_verify": True}
    sd = job["kubernetes_sd_configs"]
    assert [s["role"] for s in sd] == ["endpoints"] and sd[0]["namespaces"]["names"] == [KUEUE_NS]
    keep = keep_rules(job)
    assert {"action": "keep", "source_labels": ["__meta_kubernetes_service_label_control_plane",
                                                "__meta_kubernetes_service_labelpresent_control_plane"],
            "regex": "(controller-manager);true"} in keep, keep
    assert {"action": "keep", "source_labels": ["__meta_kubernetes_endpoint_port_name"], "regex": "https"} in keep, keep
    # fairgpu's job label comes after the operator's own (the service name), so "kueue" is what the rules see.
    assert relabel(job, "job")[-1] == {"target_label": "job", "replacement": objects.KUEUE_JOB, "action": "replace"}


def test_dcgm_job_keeps_the_exporters_namespace_and_adds_tenant_from_exported_namespace(applied):
    jobs, _doc = generated(applied, CHART_PROMETHEUS, [KUEUE_SM, DCGM_SM])
    job = jobs[DCGM_SM]
    assert job.get("scheme", "http") == "http" and job["scrape_interval"] == INTERVAL
    assert "authorization" not in job
    # honor_labels false: the target's namespace/pod (the exporter's) win and the GPU's pod arrives as
    # exported_namespace/exported_pod, which the alert rules group by.
    assert job["honor_labels"] is False
    assert relabel(job, "namespace") == [{"source_labels": ["__meta_kubernetes_namespace"], "target_label": "namespace"}]
    assert {"source_labels": ["__meta_kubernetes_pod_name"], "target_label": "pod"} in relabel(job, "pod")
    sd = job["kubernetes_sd_configs"]
    assert sd[0]["namespaces"]["names"] == [DCGM_NS]
    assert {"action": "keep", "source_labels": ["__meta_kubernetes_service_label_app",
                                                "__meta_kubernetes_service_labelpresent_app"],
            "regex": "(nvidia-dcgm-exporter);true"} in keep_rules(job)
    assert relabel(job, "job")[-1] == {"target_label": "job", "replacement": objects.DCGM_JOB, "action": "replace"}
    # The operator turned fairgpu's metricRelabelings into exactly the local mode's metric_relabel_configs.
    assert job["metric_relabel_configs"] == objects.tenant_relabelings(TENANTS), job["metric_relabel_configs"]


def test_intervals_and_rule_files(applied):
    _jobs, doc = generated(applied, CHART_PROMETHEUS, [KUEUE_SM, DCGM_SM])
    assert doc["global"]["scrape_interval"] == INTERVAL and doc["global"]["evaluation_interval"] == INTERVAL
    assert doc["rule_files"] == ["/etc/prometheus/rules/prometheus-%s-rulefiles-0/*.yaml" % CHART_PROMETHEUS]


def rule_files(applied, name, timeout=60):
    core = k8s.CoreV1Api(applied["api"])

    def ready():
        try:
            return core.read_namespaced_config_map("prometheus-%s-rulefiles-0" % name, MONITORING_NS).data or None
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
    return wait_until(ready, timeout, what="the rule-file ConfigMap of %s" % name)


def test_rule_groups_and_alerts_equal_fairgpus_rule_file(applied):
    data = rule_files(applied, CHART_PROMETHEUS)
    assert list(data) and all(key.startswith("%s-fairgpu-alerts-" % MONITORING_NS) for key in data), list(data)
    loaded = yaml.safe_load(next(iter(data.values())))
    with open(RULES_FILE) as handle:
        text = handle.read()
    # The rule file as the role renders it: the shipped groups with monitoring_alert_for's for:.
    meant = yaml.safe_load(objects.rules_with_for(text, VARS["monitoring_alert_for"]))
    assert [g["name"] for g in loaded["groups"]] == [g["name"] for g in meant["groups"]]
    assert objects.alerts(yaml.safe_dump(loaded)) == dict(objects.alerts(text), FairgpuTenantOverGuarantee="7m")
    assert loaded == meant


def test_the_charts_default_release_selector_selects_fairgpus_objects(applied):
    """prometheus-operator/prometheus-operator#5917, prometheus-community/helm-charts#1631: the chart's default
    Prometheus takes only ServiceMonitors and rules labelled release=<release>; fairgpu's carry it."""
    jobs, _doc = generated(applied, "chart-defaults", [KUEUE_SM, DCGM_SM])
    assert CONTROL_SM not in jobs  # no release label: not selected
    assert list(rule_files(applied, "chart-defaults"))[0].startswith("%s-fairgpu-alerts-" % MONITORING_NS)
    others, _doc = generated(applied, "other-release")
    assert KUEUE_SM not in others and DCGM_SM not in others
    assert "prometheus-other-release-rulefiles-0" not in [
        c.metadata.name for c in k8s.CoreV1Api(applied["api"]).list_namespaced_config_map(MONITORING_NS).items
        if c.data]


def test_a_prometheus_that_denies_file_access_keeps_fairgpus_kueue_job(applied):
    """arbitraryFSAccessThroughSMs.deny (hardened set-ups, OpenShift user workload monitoring) drops a ServiceMonitor
    naming a file (redhat-cop/global-load-balancer-operator#45, operator-framework/operator-sdk#7003,
    prometheus-community/helm-charts#7230): the control with bearerTokenFile goes, fairgpu's Kueue job stays."""
    open_jobs, _doc = generated(applied, CHART_PROMETHEUS, [KUEUE_SM, DCGM_SM, CONTROL_SM])
    assert open_jobs[CONTROL_SM]["bearer_token_file"] == CONTROL["spec"]["endpoints"][0]["bearerTokenFile"]
    jobs, _doc = generated(applied, "deny-fs", [KUEUE_SM, DCGM_SM])
    assert CONTROL_SM not in jobs
    assert jobs[KUEUE_SM]["authorization"] == {"type": "Bearer", "credentials": applied["token"]}
    # The operator says so on the object it rejected, and on none of fairgpu's.
    core = k8s.CoreV1Api(applied["api"])

    def rejected():
        return {(e.involved_object.namespace, e.involved_object.name) for ns in (MONITORING_NS, KUEUE_NS, DCGM_NS)
                for e in core.list_namespaced_event(ns).items if e.reason == "InvalidConfiguration"}
    said = wait_until(lambda: (MONITORING_NS, "it-control-token-file") in rejected() and rejected(), 30,
                      what="the operator's InvalidConfiguration event on the control ServiceMonitor")
    assert said == {(MONITORING_NS, "it-control-token-file")}, said


def test_a_prometheus_without_namespace_selectors_misses_fairgpus_monitors(applied):
    """A Prometheus without serviceMonitorNamespaceSelector looks only in its own namespace
    (prometheus-operator/prometheus-operator#5917): fairgpu's ServiceMonitors are in the namespaces they scrape
    (Kueue's, the DCGM exporter's), so a Prometheus Operator already there must select those namespaces too; the
    role accepted this set-up because another Prometheus (the chart's) selects them (placement.plan)."""
    # Every ServiceMonitor was there before the operator started (it syncs its caches before it reconciles), so
    # the first configuration is complete; the Prometheus with namespace selectors has both jobs.
    generated(applied, CHART_PROMETHEUS, [KUEUE_SM, DCGM_SM])
    jobs, _doc = generated(applied, "own-namespace", [CONTROL_SM])
    assert KUEUE_SM not in jobs and DCGM_SM not in jobs


def ca_pem():
    """A self-signed CA certificate (PEM), as cert-manager would put in kueue-metrics-server-cert's ca.crt."""
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "it-kueue-metrics-ca")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now)
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True).sign(key, hashes.SHA256()))
    return cert.public_bytes(serialization.Encoding.PEM).decode()


def test_a_kueue_ca_from_a_secret_reaches_prometheus_as_a_tls_asset(applied):
    """monitoring_kueue_metrics_ca (Kueue's chart with cert-manager): the operator copies the CA from the Secret in
    Kueue's namespace into the Prometheus's TLS assets and points ca_file there; the certificate is verified against
    the DNS name Kueue's chart issues it for. Last: it changes the objects the tests above read."""
    core = k8s.CoreV1Api(applied["api"])
    pem = ca_pem()
    core.create_namespaced_secret(KUEUE_NS, {"metadata": {"name": "kueue-metrics-server-cert"},
                                             "stringData": {"ca.crt": pem}})
    run = run_role({"monitoring_kueue_metrics_ca": {"secret": {"name": "kueue-metrics-server-cert", "key": "ca.crt"}}})
    assert run.rc == 0, run.messages()

    def verified():
        jobs, _doc = generated(applied, CHART_PROMETHEUS, [KUEUE_SM])
        return jobs[KUEUE_SM] if "ca_file" in jobs[KUEUE_SM].get("tls_config", {}) else None
    job = wait_until(verified, 60, what="the Kueue job to verify Kueue's certificate")
    assert job["tls_config"]["server_name"] == "kueue-controller-manager-metrics-service.%s.svc" % KUEUE_NS
    assert sorted(job["tls_config"]) == ["ca_file", "server_name"]  # no insecure_skip_verify any more
    # The file is one of the TLS assets the operator mounts at /etc/prometheus/certs (v0.85.0 names it
    # <index>_<namespace>_<secret>_<key>), and holds the CA of the Secret in Kueue's namespace.
    directory, asset = os.path.split(job["tls_config"]["ca_file"])
    assert directory == "/etc/prometheus/certs" and asset.endswith("_%s_kueue-metrics-server-cert_ca.crt" % KUEUE_NS)
    assert secret_text(core, MONITORING_NS, "prometheus-%s-tls-assets-0" % CHART_PROMETHEUS, asset).decode() == pem
    assert job["authorization"] == {"type": "Bearer", "credentials": applied["token"]}


# --- Hardened Prometheus set-ups (issue 25, item 5; docs/existing-cluster.md, Hardened monitoring) ---
# Three more Prometheus resources, made after the tests above (the role would otherwise place for them from the
# start): one that enforces the namespace label (OpenShift user workload monitoring does), one that enforces it but
# excludes fairgpu's rule file (the alternative fix, prometheus-operator/prometheus-operator#3207, #4397), one that
# ignores ServiceMonitors' namespace selectors (rancher/charts#666, prometheus-community/helm-charts#3953,
# openshift/openshift-docs#33480: a ServiceMonitor must then live in the namespace it scrapes).
ENFORCED, EXCLUDED, IGNORE_NS = "enforced", "enforced-excluded", "ignore-ns"
HARDENED = {
    ENFORCED: prometheus(ENFORCED, FAIRGPU_VALUES, enforcedNamespaceLabel="namespace"),
    EXCLUDED: prometheus(EXCLUDED, FAIRGPU_VALUES, enforcedNamespaceLabel="namespace", excludedFromEnforcement=[
        {"group": "monitoring.coreos.com", "resource": "prometheusrules", "namespace": MONITORING_NS,
         "name": "fairgpu-alerts"}]),
    IGNORE_NS: prometheus(IGNORE_NS, FAIRGPU_VALUES, ignoreNamespaceSelectors=True),
}
# Not fairgpu's: a ServiceMonitor placed as fairgpu placed its DCGM monitor before (in the monitoring namespace,
# reaching the exporter's through namespaceSelector), so that the ignore-ns Prometheus shows what that placement gets.
CROSS_CONTROL = {"apiVersion": "monitoring.coreos.com/v1", "kind": "ServiceMonitor",
                 "metadata": {"name": "it-control-cross-namespace", "namespace": MONITORING_NS},
                 "spec": {"namespaceSelector": {"matchNames": [DCGM_NS]},
                          "selector": {"matchLabels": {"app": "nvidia-dcgm-exporter"}},
                          "endpoints": [{"port": "gpu-metrics"}]}}
CROSS_CONTROL_SM = "serviceMonitor/%s/it-control-cross-namespace/0" % MONITORING_NS
ENFORCED_TEST = os.path.join(ROOT, "tests", "rules", "enforced", "fairgpu-alerts-enforced.test.yml")
OMIT = {"monitoring_enforced_cross_namespace_rules": "omit"}


def rule_files_with(applied, name, wanted, unwanted=(), timeout=90):
    return promop.rule_files_with(applied["api"], MONITORING_NS, name, wanted, unwanted, timeout)


def promtool_on(applied, data, tmp):
    """promtool test rules with tests/rules/enforced/fairgpu-alerts-enforced.test.yml over the operator's rule files
    ``data``."""
    return promop.promtool_test(applied["promtool"], data, ENFORCED_TEST, tmp)


@pytest.fixture(scope="module")
def hardened(applied, tmp_path_factory):
    """The hardened Prometheus resources and the control; the operator's rewrite of fairgpu's rules as placed so far
    (one PrometheusRule in the monitoring namespace); then the role: refused by default (the cross-namespace rules),
    applied with monitoring_enforced_cross_namespace_rules: omit, and once more (changes nothing)."""
    custom = k8s.CustomObjectsApi(applied["api"])
    custom.create_namespaced_custom_object("monitoring.coreos.com", "v1", MONITORING_NS, "servicemonitors",
                                           CROSS_CONTROL)
    for body in HARDENED.values():
        custom.create_namespaced_custom_object("monitoring.coreos.com", "v1", MONITORING_NS, "prometheuses", body)
    old = "%s-fairgpu-alerts-" % MONITORING_NS
    before = {ENFORCED: rule_files_with(applied, ENFORCED, [old]), EXCLUDED: rule_files_with(applied, EXCLUDED, [old])}
    unselected = run_role({"monitoring_prometheus": "%s/other-release" % MONITORING_NS})
    refused = run_role()
    omitted = run_role(OMIT)
    again = run_role(OMIT)
    new = ["%s-fairgpu-kueue-alerts-" % KUEUE_NS, "%s-fairgpu-gpu-alerts-" % DCGM_NS]
    after = rule_files_with(applied, ENFORCED, new, [old])
    proc = subprocess.run(["bash", os.path.join(ROOT, "files", "lab", "toolchain", "toolchain.sh"), "ensure", "prometheus"],
                          capture_output=True, text=True, check=False, timeout=3600)
    assert proc.returncode == 0, proc.stderr
    applied["promtool"] = json.loads(proc.stdout)["binaries"]["promtool"]
    return {"before": before, "unselected": unselected, "refused": refused, "omitted": omitted, "again": again,
            "after": after,
            "tmp": tmp_path_factory.mktemp("enforced")}


def test_a_prometheus_that_selects_none_of_fairgpus_objects_is_refused_with_the_fix(hardened):
    """monitoring_prometheus names the chart's default Prometheus of another release: it selects none of fairgpu's
    objects (release label), and the role says so for each, with the fix, before any change."""
    run = hardened["unselected"]
    assert run.rc != 0
    said = run.messages()
    for obj in ("ServiceMonitor %s/fairgpu-kueue" % KUEUE_NS, "ServiceMonitor %s/fairgpu-dcgm-exporter" % DCGM_NS,
                "PrometheusRule %s/fairgpu-alerts" % MONITORING_NS):
        assert "no Prometheus selects fairgpu's %s" % obj in said, said
    assert ("%s/other-release: serviceMonitorSelector {matchLabels: {release: other-release}}: set "
            "monitoring_release_name: other-release" % MONITORING_NS) in said, said
    assert run.changed_tasks() == [], run.changed_tasks()


def test_enforcement_refuses_the_cross_namespace_rules_before_any_change_and_names_the_fix(hardened):
    run = hardened["refused"]
    assert run.rc != 0
    said = run.messages()
    assert "Prometheus %s/%s enforces the namespace label" % (MONITORING_NS, ENFORCED) in said, said
    assert ("{group: monitoring.coreos.com, resource: prometheusrules, namespace: %s, name: fairgpu-alerts}"
            % MONITORING_NS) in said, said
    assert "monitoring_enforced_cross_namespace_rules: omit" in said, said
    assert run.changed_tasks() == [], run.changed_tasks()


def test_enforcement_places_each_rule_with_its_series_and_a_second_run_changes_nothing(hardened, applied):
    assert hardened["omitted"].rc == 0, hardened["omitted"].messages()
    assert hardened["again"].rc == 0 and hardened["again"].changed_tasks() == [], hardened["again"].changed_tasks()
    custom = k8s.CustomObjectsApi(applied["api"])

    def rules_in(namespace):
        return sorted(r["metadata"]["name"] for r in custom.list_namespaced_custom_object(
            "monitoring.coreos.com", "v1", namespace, "prometheusrules")["items"])
    assert (rules_in(MONITORING_NS), rules_in(KUEUE_NS), rules_in(DCGM_NS)) == (
        [], ["fairgpu-kueue-alerts"], ["fairgpu-gpu-alerts"])
    # The operator rewrote them: every selector of the Kueue rules got namespace="kueue-system", of the DCGM rules
    # namespace="gpu-operator", and each rule the label.
    after = hardened["after"]
    kueue = yaml.safe_load(next(v for k, v in after.items() if k.startswith(KUEUE_NS + "-")))
    down = next(r for g in kueue["groups"] for r in g["rules"] if r.get("alert") == "FairgpuKueueDown")
    assert down["labels"]["namespace"] == KUEUE_NS
    assert 'absent(up{job="kueue",namespace="%s"})' % KUEUE_NS in down["expr"], down["expr"]
    gpus = next(v for k, v in after.items() if k.startswith(DCGM_NS + "-"))
    assert 'namespace="%s"' % DCGM_NS in gpus and "kueue_" not in gpus


def test_promtool_on_the_operators_rewrite_passes_with_fairgpus_placement(hardened, applied):
    """The over-guarantee alert fires, FairgpuKueueDown stays quiet while Kueue is up and fires when it is down or
    not scraped, a GPU pod outside the tenants is named: on the rule files the operator wrote under enforcement."""
    proc = promtool_on(applied, hardened["after"], str(hardened["tmp"] / "placed"))
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_promtool_on_the_operators_rewrite_fails_with_the_old_placement(hardened, applied):
    """The failure mode (issue 25): one PrometheusRule in the monitoring namespace under enforcement reads
    namespace="fairgpu-monitoring" everywhere, so the same tests fail."""
    data = hardened["before"][ENFORCED]
    assert all('namespace="%s"' % MONITORING_NS in v for v in data.values())
    proc = promtool_on(applied, data, str(hardened["tmp"] / "old"))
    said = proc.stdout + proc.stderr
    assert proc.returncode != 0, said
    for alert in ("FairgpuTenantOverGuarantee", "FairgpuKueueDown", "FairgpuGpuPodOutsideTenants"):
        assert "alertname: %s" % alert in said, said


def test_excluded_from_enforcement_leaves_fairgpus_rules_as_written(hardened):
    """The alternative fix: a Prometheus that enforces but lists fairgpu-alerts in excludedFromEnforcement loads
    the rule file exactly as fairgpu wrote it (placement.plan then keeps the single layout)."""
    (text,) = hardened["before"][EXCLUDED].values()
    with open(RULES_FILE) as handle:
        meant = yaml.safe_load(objects.rules_with_for(handle.read(), VARS["monitoring_alert_for"]))
    assert yaml.safe_load(text) == meant


def test_ignore_namespace_selectors_keeps_fairgpus_monitors_and_drops_the_old_placement(hardened, applied):
    """ignoreNamespaceSelectors: each ServiceMonitor discovers only its own namespace. fairgpu's monitors are in
    the namespaces they scrape, so the jobs keep them; the control placed as fairgpu's DCGM monitor was before
    (monitoring namespace, namespaceSelector to the exporter's) is turned to the monitoring namespace."""
    assert hardened["omitted"].rc == 0
    jobs, _doc = generated(applied, IGNORE_NS, [KUEUE_SM, DCGM_SM, CROSS_CONTROL_SM])
    assert jobs[KUEUE_SM]["kubernetes_sd_configs"][0]["namespaces"]["names"] == [KUEUE_NS]
    assert jobs[DCGM_SM]["kubernetes_sd_configs"][0]["namespaces"]["names"] == [DCGM_NS]
    assert jobs[CROSS_CONTROL_SM]["kubernetes_sd_configs"][0]["namespaces"]["names"] == [MONITORING_NS]
    open_jobs, _doc = generated(applied, CHART_PROMETHEUS, [CROSS_CONTROL_SM])
    assert open_jobs[CROSS_CONTROL_SM]["kubernetes_sd_configs"][0]["namespaces"]["names"] == [DCGM_NS]


def test_enforcement_labels_the_dcgm_series_with_the_exporters_namespace(hardened, applied):
    """Under enforcement the operator's last relabelling sets namespace to the ServiceMonitor's namespace, on the
    target and on every metric (pkg/namespacelabeler GetRelabelingConfigs): the exporter's, the namespace of the
    DCGM rules; the promtool tests' input series are labelled so."""
    jobs, _doc = generated(applied, ENFORCED, [KUEUE_SM, DCGM_SM])
    for sm, namespace in ((DCGM_SM, DCGM_NS), (KUEUE_SM, KUEUE_NS)):
        enforced = {"target_label": "namespace", "replacement": namespace}
        # After fairgpu's job relabelling (only the operator's sharding rules follow it).
        targets = jobs[sm]["relabel_configs"]
        assert enforced in targets and targets.index(enforced) > targets.index(relabel(jobs[sm], "job")[-1]), targets
        assert jobs[sm]["metric_relabel_configs"][-1] == enforced, jobs[sm]["metric_relabel_configs"]
