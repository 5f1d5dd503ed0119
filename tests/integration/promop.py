"""The real Prometheus Operator (v0.85.0, built from its Go module by the toolchain) as a local process on an embedded
cluster, its CRDs, and promtool on the rule files it writes: what test_77_prometheus_operator.py and
test_96_platform.py run it with."""

import os
import subprocess

import yaml
from kubernetes import client as k8s
from kubernetes.client.rest import ApiException

from conftest import wait_until

# The Prometheus Operator's CRDs its Prometheus controller reads (example/prometheus-operator-crd of the module);
# Alertmanager, PrometheusAgent and ThanosRuler controllers stay off without theirs (cmd/operator checkPrerequisites).
CRDS = ("prometheuses", "servicemonitors", "podmonitors", "probes", "prometheusrules", "scrapeconfigs")


def install_crds(api, crd_dir):
    ext = k8s.ApiextensionsV1Api(api)
    for plural in CRDS:
        with open(os.path.join(crd_dir, "monitoring.coreos.com_%s.yaml" % plural)) as handle:
            ext.create_custom_resource_definition(yaml.safe_load(handle))
    for plural in CRDS:
        wait_until(lambda p=plural: any(c.type == "Established" and c.status == "True" for c in
                                        ext.read_custom_resource_definition(p + ".monitoring.coreos.com").status.conditions or []),
                   60, what="CRD %s established" % plural)


class Operator:
    """The Prometheus Operator as a local process on a cluster's kubeconfig (v0.85.0 has no --kubeconfig flag: it
    reads KUBECONFIG, pkg/k8sutil NewClusterConfig), its web server on loopback (``listen``), watching
    ``namespaces`` (all of them when empty)."""

    def __init__(self, binary, kubeconfig, listen, workdir, namespaces=()):
        self.log_path = os.path.join(workdir, "prometheus-operator.log")
        self.log = open(self.log_path, "w")
        env = {"PATH": os.environ.get("PATH", ""), "HOME": os.environ.get("HOME", ""), "KUBECONFIG": kubeconfig}
        argv = [binary, "--web.listen-address=" + listen, "--log-level=info"]
        if namespaces:
            argv.append("--namespaces=" + ",".join(namespaces))
        self.proc = subprocess.Popen(argv, stdout=self.log, stderr=subprocess.STDOUT, env=env)

    def tail(self, lines=40):
        self.log.flush()
        with open(self.log_path) as handle:
            return "".join(handle.readlines()[-lines:])

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)
        self.log.close()


def rule_files_with(api, namespace, name, wanted, unwanted=(), timeout=90):
    """The rule files the operator wrote for Prometheus ``namespace/name`` (ConfigMap prometheus-<name>-rulefiles-0)
    once their keys start with every prefix of ``wanted`` and with none of ``unwanted`` (keys:
    <namespace>-<PrometheusRule>-<uid>.yaml)."""
    core = k8s.CoreV1Api(api)

    def ready():
        try:
            data = core.read_namespaced_config_map("prometheus-%s-rulefiles-0" % name, namespace).data or {}
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        keys = list(data)
        if all(any(k.startswith(w) for k in keys) for w in wanted) and not any(
                k.startswith(u) for k in keys for u in unwanted):
            return data
        return None
    return wait_until(ready, timeout, what="the rule files of %s with %s" % (name, ", ".join(wanted)))


def promtool_test(promtool, data, test_file, tmp):
    """``promtool test rules`` with ``test_file`` (its rule_files: rulefiles/*.yaml) over the rule files ``data`` (the
    operator's), copied into tmp/rulefiles."""
    os.makedirs(os.path.join(tmp, "rulefiles"))
    for key, text in data.items():
        with open(os.path.join(tmp, "rulefiles", key), "w") as handle:
            handle.write(text)
    with open(test_file) as src, open(os.path.join(tmp, "rules.test.yml"), "w") as dst:
        dst.write(src.read())
    return subprocess.run([promtool, "test", "rules", "rules.test.yml"], cwd=tmp, capture_output=True, text=True,
                          check=False, timeout=120)
