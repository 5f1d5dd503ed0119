"""Embedded clusters a person makes by hand with kwokctl, not through fairgpu's cluster role, and what the tests that
use them read there: test_95_decoy.py (a cluster fairgpu did not make, with a decoy in the way) and
test_96_platform.py (a platform team's cluster, with their own Kueue release, Pod Security and a hardened Prometheus
Operator).

kwokctl's configuration is kwok v0.8.0's ``KwokctlConfiguration`` (pkg/apis/config/v1alpha1/
kwokctl_configuration_types.go): ``options`` for the binaries and ports, ``componentsPatches`` for a component's extra
flags (``extraArgs``: key and value, appended to the component's command line)."""

import glob
import hashlib
import json
import os
import re
import subprocess
import sys
import urllib.request

import yaml

from conftest import ROOT

BIN = os.path.dirname(sys.executable)
TOOLCHAIN = json.loads(subprocess.run(["bash", os.path.join(ROOT, "files", "lab", "toolchain", "toolchain.sh"), "manifest",
                                       "kubernetes", "etcd", "kwok"], capture_output=True, text=True,
                                      check=True).stdout)
KUBECTL = TOOLCHAIN["binaries"]["kubectl"]
KWOKCTL = TOOLCHAIN["binaries"]["kwokctl"]

# Kinds that kube components and kwok change on their own (heartbeats; fairgpu's simulated GPU operator publishes the
# GPU nodes' labels and capacity, as the real one does): compared by identity only. Events come and go: left out.
RESTLESS = {"Lease", "Node", "EndpointSlice", "Endpoints"}
# The ports of a kwokctl cluster's components (kwok v0.8.0 KwokctlConfigurationOptions), from a first port on.
CLUSTER_PORT_OPTIONS = ("kubeApiserverPort", "etcdPort", "etcdPeerPort", "kubeControllerManagerPort",
                        "kubeSchedulerPort", "kwokControllerPort")
AUDIT_POLICY = {"apiVersion": "audit.k8s.io/v1", "kind": "Policy", "rules": [{"level": "Metadata"}]}


def run(*argv, **kwargs):
    return subprocess.run(list(argv), capture_output=True, text=True, timeout=kwargs.pop("timeout", 300), check=False,
                          **kwargs)


def kubectl(kubeconfig, *args, stdin=None):
    return run(KUBECTL, "--kubeconfig", kubeconfig, *args, input=stdin)


def kubectl_json(kubeconfig, *args):
    result = kubectl(kubeconfig, *args, "-o", "json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def apply(kubeconfig, items, *args):
    documents = json.dumps({"apiVersion": "v1", "kind": "List", "items": items})
    applied = kubectl(kubeconfig, "apply", *args, "-f", "-", stdin=documents)
    assert applied.returncode == 0, applied.stderr


def processes(text):
    """``{pid: cmdline}`` of the live processes whose command line mentions ``text``."""
    found = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        cmdline = processes_of(int(pid))
        if cmdline and text in cmdline:
            found[int(pid)] = cmdline
    return found


def kueue_ready(port):
    """Whether the local Kueue answers its health endpoint /readyz (what the kueue role waits for)."""
    try:
        with urllib.request.urlopen("http://127.0.0.1:%d/readyz" % port, timeout=2) as answer:
            return answer.status == 200
    except OSError:
        return False


def processes_of(pid):
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as handle:
            return handle.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return None


def listening_ports(pids=None):
    """Sorted TCP ports in LISTEN state that the processes ``pids`` hold (``ss -ltnp``); all of them for None."""
    out = run("ss", "-ltnpH").stdout
    ports = set()
    for line in out.splitlines():
        owners = {int(p) for p in re.findall(r"pid=(\d+)", line)}
        if pids is None or owners & set(pids):
            ports.add(int(line.split()[3].rsplit(":", 1)[1]))
    return sorted(ports)


def fingerprint(obj):
    """An object without what the server changes by itself: status, resourceVersion, managedFields."""
    obj = json.loads(json.dumps(obj))
    obj.pop("status", None)
    for key in ("resourceVersion", "managedFields"):
        obj.get("metadata", {}).pop(key, None)
    return hashlib.sha1(json.dumps(obj, sort_keys=True).encode()).hexdigest()


def identity(obj):
    return (obj["apiVersion"], obj["kind"], obj["metadata"].get("namespace", ""), obj["metadata"]["name"])


def cluster_objects(kubeconfig):
    """``{(apiVersion, kind, namespace, name): fingerprint}`` of every listable object (restless kinds: None)."""
    names = kubectl(kubeconfig, "api-resources", "--verbs=list", "-o", "name")
    assert names.returncode == 0, names.stderr
    items = kubectl_json(kubeconfig, "get", ",".join(names.stdout.split()), "-A")["items"]
    return {identity(o): None if o["kind"] in RESTLESS else fingerprint(o) for o in items if o["kind"] != "Event"}


class KwokCluster:
    """An embedded cluster made with kwokctl (not fairgpu), in a working directory of its own."""

    def __init__(self, name, workdir, first_port, audit=False, stages=False, patches=None):
        self.name, self.workdir, self.audit, self.stages = name, workdir, audit, stages
        # Extra flags of the components, {component: {flag: value}}: componentsPatches extraArgs.
        self.patches = patches or {}
        self.first_port = first_port
        self.env = dict(os.environ, KWOK_WORKDIR=workdir)
        self.dir = os.path.join(workdir, "clusters", name)
        self.kubeconfig = os.path.join(self.dir, "kubeconfig.yaml")
        self.audit_log = os.path.join(self.dir, "logs", "audit.log")

    def create(self):
        binaries = TOOLCHAIN["binaries"]
        config = os.path.join(self.workdir, self.name + ".kwokctl.yaml")
        options = {"runtime": "binary", "kubeVersion": TOOLCHAIN["versions"]["kubernetes"],
                   "etcdVersion": TOOLCHAIN["versions"]["etcd"].lstrip("v"), "bindAddress": "127.0.0.1",
                   "kubeAuthorization": True, "kubeAdmission": True,
                   "kubeApiserverBinary": binaries["kube-apiserver"],
                   "kubeControllerManagerBinary": binaries["kube-controller-manager"],
                   "kubeSchedulerBinary": binaries["kube-scheduler"], "kubectlBinary": binaries["kubectl"],
                   "etcdBinary": binaries["etcd"], "kwokControllerBinary": binaries["kwok"]}
        # Ports of our own: kwokctl picks free ports when it looks and binds them later, so clusters created at the
        # same time on this machine (other tests') were given the same ones (kubernetes-sigs/kwok#475).
        options.update(zip(CLUSTER_PORT_OPTIONS, range(self.first_port, self.first_port + len(CLUSTER_PORT_OPTIONS))))
        with open(config, "w") as handle:
            configuration = {"apiVersion": "config.kwok.x-k8s.io/v1alpha1", "kind": "KwokctlConfiguration",
                             "options": options}
            if self.patches:
                configuration["componentsPatches"] = [
                    {"name": component, "extraArgs": [{"key": key, "value": value} for key, value in sorted(flags.items())]}
                    for component, flags in sorted(self.patches.items())]
            yaml.safe_dump(configuration, handle)
            if self.stages:
                # kwok's own stages at the pinned version (kwok v0.8.0 kustomize/stage/...), unchanged: a Job's pod
                # completes after its pod-complete delay annotation. A cluster fairgpu did not make runs no simulated
                # kubelet, so its pod-create stage does not wait for one (the cluster role's kwokctl.yaml.j2 does).
                with open(TOOLCHAIN["kwok_stages"]) as stages:
                    handle.write("---\n" + stages.read())
        argv = [KWOKCTL, "create", "cluster", "--name", self.name, "--config", config, "--kubeconfig=", "--wait=120s"]
        if self.audit:
            policy = os.path.join(self.workdir, "audit-policy.yaml")
            with open(policy, "w") as handle:
                yaml.safe_dump(AUDIT_POLICY, handle)
            argv += ["--kube-audit-policy", policy]
        created = run(*argv, env=self.env)
        assert created.returncode == 0, created.stderr[-2000:]

    def delete(self):
        run(KWOKCTL, "delete", "cluster", "--name", self.name, "--kubeconfig", self.kubeconfig, env=self.env)

    def pids(self):
        found = {}
        for path in glob.glob(os.path.join(self.dir, "pids", "*.pid")):
            with open(path) as handle:
                found[os.path.basename(path)] = int(handle.read().strip())
        return found

    def state(self):
        """Objects, component processes (pid and command line) and their listening ports."""
        pids = self.pids()
        live = {name: (pid, processes_of(pid)) for name, pid in pids.items()}
        return {"objects": cluster_objects(self.kubeconfig), "processes": live,
                "ports": listening_ports(pids.values())}

    def server(self):
        return kubectl_json(self.kubeconfig, "config", "view", "--raw")["clusters"][0]["cluster"]["server"]

    def audit_size(self):
        return os.path.getsize(self.audit_log)

    def audit_events(self, offset):
        with open(self.audit_log) as handle:
            handle.seek(offset)
            return [json.loads(line) for line in handle if line.strip()]


def gpu_node(name, product=None, gpus=0):
    """A kwok Node as the cluster role's kwok provider makes one (roles/cluster/templates/kwok-nodes.yaml.j2): kwok's
    fake-node annotation (kwok.x-k8s.io/node: fake, kwok v0.8.0 docs "kwok-controller"), and for a GPU machine the
    simulated hardware the gpu_operator role's simulated mode publishes (plugins/module_utils/lab/node.py)."""
    annotations = {"kwok.x-k8s.io/node": "fake"}
    if product:
        annotations.update({"fairgpu.io/simulated-gpu-product": product, "fairgpu.io/simulated-gpu-count": str(gpus)})
    resources = {"cpu": "96", "memory": "1Ti", "pods": "110"}
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "annotations": annotations,
                         "labels": {"kubernetes.io/arch": "amd64", "kubernetes.io/hostname": name,
                                    "kubernetes.io/os": "linux", "type": "kwok"}},
            "status": {"allocatable": resources, "capacity": resources, "phase": "Running"}}
