"""fairgpu used as an installed collection, with a decoy cluster in the way (issue 12, parts 2 and 6).

The collection is built (``ansible-galaxy collection build``) and installed offline into an empty collections
path; a user project outside the checkout (its own ansible.cfg and inventory) runs ``fairgpu.tenancy.site``,
``tenants``, ``validate`` (baseline), ``render`` and ``teardown`` against a target embedded cluster. All the while
a second embedded cluster, the decoy, made directly with kwokctl and auditing every request, is what ``KUBECONFIG``
and ``~/.kube/config`` point at (the user's file is backed up and restored). Then the target is declared
``cluster_provider: existing``: teardown without confirmation changes nothing and names the flag; with it only
fairgpu's objects go. At the end the decoy's audit log holds no request but its own components', and its
objects, processes and ports are what they were."""

import base64
import glob
import gzip
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time

import pytest
import yaml

from conftest import KWOK_WORKDIR, ROOT, PlaybookRun

BIN = os.path.dirname(sys.executable)
TOOLCHAIN = json.loads(subprocess.run(["bash", os.path.join(ROOT, "files", "toolchain", "toolchain.sh"), "manifest",
                                       "kubernetes", "etcd", "kwok"], capture_output=True, text=True,
                                      check=True).stdout)
KUBECTL = TOOLCHAIN["binaries"]["kubectl"]
KWOKCTL = TOOLCHAIN["binaries"]["kwokctl"]
DECOY = "fairgpu-decoy"
TARGET = "fairgpu-it-collection"
TARGET_KUBECONFIG = os.path.join(KWOK_WORKDIR, "clusters", TARGET, "kubeconfig.yaml")
HOST = "target"
USER_KUBECONFIG = os.path.expanduser("~/.kube/config")
# The decoy's own components: the only user agents its audit log may show while fairgpu runs.
DECOY_AGENTS = ("kube-apiserver/", "kube-controller-manager/", "kube-scheduler/", "kwok-controller/")
# Kinds that kube components and kwok change on their own (heartbeats): compared by identity only. Events come
# and go: left out.
RESTLESS = {"Lease", "Node", "EndpointSlice", "Endpoints"}
KUEUE_CRDS = ("clusterqueues", "localqueues", "resourceflavors", "cohorts", "workloads", "workloadpriorityclasses")
TENANTS = [{"name": "team-a", "gpus": 8, "borrowing_limit": 8, "groups": ["team-a"]},
           {"name": "team-b", "gpus": 8, "borrowing_limit": 8, "groups": ["team-b"]}]
INVENTORY = {"gpu_clusters": {"hosts": {HOST: {
    "ansible_connection": "local", "ansible_python_interpreter": "{{ ansible_playbook_python }}",
    "cluster_provider": "kwok", "cluster_name": TARGET,
    "cluster_kwok_node_pools": [{"name": "gpu-node", "count": 2, "gpu_product": "NVIDIA-H100-80GB-HBM3",
                                 "gpu_count": 8, "cpu": "96", "memory": "1Ti"}],
    "tenants_list": TENANTS,
    "run_local_ports": {"kueue_webhook": 26443, "kueue_metrics": 26444, "kueue_health": 26081, "prometheus": 26090,
                        "dcgm_exporter": 26400}}}}}
# The same cluster as a platform team declares a cluster fairgpu did not make.
EXISTING = {"gpu_clusters": {"hosts": {HOST: {
    "ansible_connection": "local", "ansible_python_interpreter": "{{ ansible_playbook_python }}",
    "cluster_provider": "existing", "cluster_kubeconfig": TARGET_KUBECONFIG}}}}
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


def processes(text):
    """``{pid: cmdline}`` of the live processes whose command line mentions ``text``."""
    found = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as handle:
                cmdline = handle.read().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            continue
        if text in cmdline:
            found[int(pid)] = cmdline
    return found


def listening_ports(pids):
    """Sorted TCP ports in LISTEN state that the processes ``pids`` hold (``ss -ltnp``)."""
    out = run("ss", "-ltnpH").stdout
    ports = set()
    for line in out.splitlines():
        owners = {int(p) for p in re.findall(r"pid=(\d+)", line)}
        if owners & set(pids):
            ports.add(int(line.split()[3].rsplit(":", 1)[1]))
    return sorted(ports)


def fingerprint(obj):
    """An object without what the server changes by itself: status, resourceVersion, managedFields."""
    obj = json.loads(json.dumps(obj))
    obj.pop("status", None)
    for key in ("resourceVersion", "managedFields"):
        obj.get("metadata", {}).pop(key, None)
    return hashlib.sha1(json.dumps(obj, sort_keys=True).encode()).hexdigest()


def cluster_objects(kubeconfig):
    """``{(apiVersion, kind, namespace, name): fingerprint}`` of every listable object (restless kinds: None)."""
    names = kubectl(kubeconfig, "api-resources", "--verbs=list", "-o", "name")
    assert names.returncode == 0, names.stderr
    items = kubectl_json(kubeconfig, "get", ",".join(names.stdout.split()), "-A")["items"]
    return {(o["apiVersion"], o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"]):
            None if o["kind"] in RESTLESS else fingerprint(o) for o in items if o["kind"] != "Event"}


class Decoy:
    """The decoy embedded cluster, made with kwokctl (not fairgpu), auditing every request."""

    def __init__(self, workdir):
        self.workdir = workdir
        self.env = dict(os.environ, KWOK_WORKDIR=workdir)
        self.dir = os.path.join(workdir, "clusters", DECOY)
        self.kubeconfig = os.path.join(self.dir, "kubeconfig.yaml")
        self.audit_log = os.path.join(self.dir, "logs", "audit.log")

    def create(self):
        policy = os.path.join(self.workdir, "audit-policy.yaml")
        config = os.path.join(self.workdir, "kwokctl.yaml")
        with open(policy, "w") as handle:
            yaml.safe_dump(AUDIT_POLICY, handle)
        binaries = TOOLCHAIN["binaries"]
        with open(config, "w") as handle:
            yaml.safe_dump({"apiVersion": "config.kwok.x-k8s.io/v1alpha1", "kind": "KwokctlConfiguration",
                            "options": {"runtime": "binary", "kubeVersion": TOOLCHAIN["versions"]["kubernetes"],
                                        "etcdVersion": TOOLCHAIN["versions"]["etcd"].lstrip("v"),
                                        "bindAddress": "127.0.0.1", "kubeAuthorization": True,
                                        "kubeApiserverBinary": binaries["kube-apiserver"],
                                        "kubeControllerManagerBinary": binaries["kube-controller-manager"],
                                        "kubeSchedulerBinary": binaries["kube-scheduler"],
                                        "kubectlBinary": binaries["kubectl"], "etcdBinary": binaries["etcd"],
                                        "kwokControllerBinary": binaries["kwok"]}}, handle)
        created = run(KWOKCTL, "create", "cluster", "--name", DECOY, "--config", config, "--kube-audit-policy", policy,
                      "--kubeconfig=", "--wait=120s", env=self.env)
        assert created.returncode == 0, created.stderr[-2000:]
        # What a person keeps on a cluster: a namespace named like a fairgpu tenant, a ConfigMap, a simulated node.
        objects = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a", "labels": {"owner": "decoy"}}},
                   {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "keep-me", "namespace": "team-a"},
                    "data": {"who": "decoy"}},
                   {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "decoy-node",
                                                                     "annotations": {"kwok.x-k8s.io/node": "fake"}}}]
        applied = kubectl(self.kubeconfig, "apply", "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "List",
                                                                                 "items": objects}))
        assert applied.returncode == 0, applied.stderr

    def delete(self):
        run(KWOKCTL, "delete", "cluster", "--name", DECOY, "--kubeconfig", self.kubeconfig, env=self.env)

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

    def audit_size(self):
        return os.path.getsize(self.audit_log)

    def audit_events(self, offset):
        with open(self.audit_log) as handle:
            handle.seek(offset)
            return [json.loads(line) for line in handle if line.strip()]


def processes_of(pid):
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as handle:
            return handle.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return None


def helm_release_secret(name, namespace, chart, version, values):
    """A deployed Helm 3 release as Helm stores it (Secret helm.sh/release.v1, gzip'd JSON, base64 twice)."""
    release = {"name": name, "namespace": namespace, "version": 1, "info": {"status": "deployed"},
               "chart": {"metadata": {"name": chart, "version": version}}, "config": values}
    stored = base64.b64encode(gzip.compress(json.dumps(release).encode())).decode()
    return {"apiVersion": "v1", "kind": "Secret", "type": "helm.sh/release.v1",
            "metadata": {"name": "sh.helm.release.v1.%s.v1" % name, "namespace": namespace,
                         "labels": {"owner": "helm", "name": name, "status": "deployed", "version": "1"}},
            "stringData": {"release": stored}}


class Project:
    """A user's Ansible project outside the checkout, with the collection installed from its tarball."""

    def __init__(self, base, decoy):
        self.base = base
        self.dir = os.path.join(base, "project")
        self.collections = os.path.join(base, "collections")
        self.installed = os.path.join(self.collections, "ansible_collections", "fairgpu", "tenancy")
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_") and k != "PYTHONPATH"}
        # The user's kube configuration points at the decoy.
        self.env.update(KUBECONFIG=decoy.kubeconfig, ANSIBLE_STDOUT_CALLBACK="ansible.posix.json",
                        ANSIBLE_LOAD_CALLBACK_PLUGINS="1")

    def install(self):
        dist = os.path.join(self.base, "dist")
        built = run(os.path.join(BIN, "ansible-galaxy"), "collection", "build", "--output-path", dist, ROOT, cwd=self.base,
                    env=self.env)
        assert built.returncode == 0, built.stdout + built.stderr
        (tarball,) = glob.glob(os.path.join(dist, "fairgpu-tenancy-*.tar.gz"))
        os.makedirs(self.collections)
        installed = run(os.path.join(BIN, "ansible-galaxy"), "collection", "install", "--offline", "-p",
                        self.collections, tarball, cwd=self.base, env=self.env)
        assert installed.returncode == 0, installed.stdout + installed.stderr
        os.makedirs(self.dir)
        with open(os.path.join(self.dir, "ansible.cfg"), "w") as handle:
            handle.write("[defaults]\ncollections_path = %s\n" % self.collections)
        for name, inventory in (("hosts.yml", INVENTORY), ("existing.yml", EXISTING)):
            with open(os.path.join(self.dir, name), "w") as handle:
                yaml.safe_dump(inventory, handle)
        return tarball

    def playbook(self, name, *args, inventory="hosts.yml", timeout=900):
        cmd = [os.path.join(BIN, "ansible-playbook"), "-i", inventory, "fairgpu.tenancy." + name] + list(args)
        proc = subprocess.run(cmd, cwd=self.dir, env=self.env, capture_output=True, text=True, timeout=timeout,
                              check=False)
        return PlaybookRun(proc)

    def tree(self):
        """Files of the installed collection (bytecode caches aside) with their size and mtime."""
        found = {}
        for top, dirs, files in os.walk(self.installed):
            dirs[:] = [d for d in dirs if d != "__pycache__"]
            for name in files:
                path = os.path.join(top, name)
                found[os.path.relpath(path, self.installed)] = (os.path.getsize(path), os.path.getmtime(path))
        return found


def task_result(run_, name):
    """The host result of the task called ``name`` in a JSON-callback run."""
    for play in run_.result.get("plays", []):
        for task in play["tasks"]:
            if task["task"]["name"].split(" : ", 1)[-1] == name:
                return task["hosts"][HOST]
    raise AssertionError("no task %r in the run: %s" % (name, run_.messages()))


def fairgpu_labelled(kubeconfig):
    """Identities of the objects on the target that carry fairgpu's label."""
    kinds = ["namespaces", "clusterqueues", "localqueues", "resourceflavors", "cohorts", "workloadpriorityclasses",
             "validatingadmissionpolicies", "validatingadmissionpolicybindings", "resourcequotas", "limitranges",
             "roles", "rolebindings", "configmaps", "secrets", "serviceaccounts", "clusterroles", "clusterrolebindings",
             "validatingwebhookconfigurations", "mutatingwebhookconfigurations"]
    items = kubectl_json(kubeconfig, "get", ",".join(kinds), "-A", "-l", "app.kubernetes.io/managed-by=fairgpu")["items"]
    return sorted("%s %s%s" % (o["kind"], o["metadata"].get("namespace", "") + "/" if o["metadata"].get("namespace")
                               else "", o["metadata"]["name"]) for o in items)


@pytest.fixture(scope="module")
def decoy(tmp_path_factory):
    """The decoy cluster, with KUBECONFIG and ~/.kube/config pointing at it; the user's file restored after."""
    decoy = Decoy(str(tmp_path_factory.mktemp("decoy")))
    backup = USER_KUBECONFIG + ".fairgpu-decoy-backup"
    had_config, had_dir = os.path.exists(USER_KUBECONFIG), os.path.isdir(os.path.dirname(USER_KUBECONFIG))
    try:
        decoy.create()
        if had_config:
            shutil.copy2(USER_KUBECONFIG, backup)
        os.makedirs(os.path.dirname(USER_KUBECONFIG), exist_ok=True)
        shutil.copyfile(decoy.kubeconfig, USER_KUBECONFIG)
        yield decoy
    finally:
        if had_config:
            shutil.move(backup, USER_KUBECONFIG)
        elif os.path.exists(USER_KUBECONFIG):
            os.remove(USER_KUBECONFIG)
            if not had_dir:
                shutil.rmtree(os.path.dirname(USER_KUBECONFIG), ignore_errors=True)
        decoy.delete()


@pytest.fixture(scope="module")
def watch(decoy, tmp_path_factory):
    """The decoy's state and the audit log's length before fairgpu runs; the installed collection."""
    time.sleep(3)  # let the decoy's controllers settle (namespace finalizers, service accounts)
    before = decoy.state()
    offset = decoy.audit_size()
    with open(USER_KUBECONFIG, "rb") as handle:
        user_config = handle.read()
    project = Project(str(tmp_path_factory.mktemp("user")), decoy)
    project.install()
    yield {"before": before, "offset": offset, "user_config": user_config, "project": project,
           "installed_tree": project.tree()}
    # Whatever happened: the target goes (it is an embedded cluster).
    if os.path.exists(os.path.join(KWOK_WORKDIR, "clusters", TARGET)):
        project.playbook("teardown")


def test_site_tenants_validate_render_from_the_installed_collection(watch):
    project = watch["project"]
    assert not os.path.exists(os.path.join(project.dir, "..", "..", "ansible_collections"))
    # The cluster, GPUs, Kueue and monitoring first; the tenants after a person made team-b by hand.
    site = project.playbook("site", "--skip-tags", "tenants")
    assert site.rc == 0, site.messages()
    made = kubectl(TARGET_KUBECONFIG, "apply", "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-b", "labels": {"owner": "research"}}},
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "notes", "namespace": "team-b"}, "data": {"a": "b"}},
    ]}))
    assert made.returncode == 0, made.stderr
    tenants = project.playbook("tenants")
    assert tenants.rc == 0, tenants.messages()
    labels = kubectl_json(TARGET_KUBECONFIG, "get", "namespace", "team-b")["metadata"]["labels"]
    assert labels["fairgpu.io/tenant"] == "team-b" and labels["owner"] == "research"

    validate = project.playbook("validate", "-e", json.dumps({"validate_scenarios": ["baseline"]}))
    assert validate.rc == 0, validate.messages()
    with open(os.path.join(project.dir, "results", HOST, "report.json")) as handle:
        report = json.load(handle)
    assert report["passed"] is True, report

    render = project.playbook("render")
    assert render.rc == 0, render.messages()
    assert os.path.isfile(os.path.join(project.dir, "rendered", HOST, "kustomization.yaml"))
    # Nothing was written into the installed collection.
    assert project.tree() == watch["installed_tree"]


@pytest.fixture(scope="module")
def user_objects(watch):
    """What the platform team has on the cluster besides fairgpu: a ClusterQueue in fairgpu's cohort using its
    flavor, a namespace with a ConfigMap, a Kueue release it installed itself and a release fairgpu installed
    (both as Helm stores them; no Helm is run)."""
    items = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "research"}},
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "data", "namespace": "research"}, "data": {"x": "y"}},
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "gpu-operator"}},
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "research"},
         "spec": {"cohortName": "fairgpu", "namespaceSelector": {"matchLabels": {"team": "research"}},
                  "resourceGroups": [{"coveredResources": ["nvidia.com/gpu"], "flavors": [
                      {"name": "nvidia-h100-80gb-hbm3", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 0}]}]}]}},
        helm_release_secret("kueue", "kueue-system", "kueue", "0.19.2", {"replicaCount": 2}),
        helm_release_secret("gpu-operator", "gpu-operator", "gpu-operator", "v25.10.1",
                            {"fairgpu": {"installedBy": "fairgpu.tenancy"}}),
    ]
    made = kubectl(TARGET_KUBECONFIG, "apply", "--server-side", "--field-manager=platform-team", "-f", "-",
                   stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    assert made.returncode == 0, made.stderr
    return items


def test_existing_cluster_teardown_without_confirmation_changes_nothing(watch, user_objects):
    project = watch["project"]
    before = cluster_objects(TARGET_KUBECONFIG)
    teardown = project.playbook("teardown", inventory="existing.yml")
    assert teardown.rc != 0
    assert teardown.stats.get("changed", 0) == 0, teardown.changed_tasks()
    message = task_result(teardown, "Stop unless the removal is confirmed with the host's name")["msg"]
    assert message.startswith("Not confirmed: nothing was removed from target.")
    assert message.endswith("run the teardown again with -e teardown_confirm=target")
    listing = task_result(teardown, "List what teardown removes from target")["msg"]
    assert listing[0].startswith("target: existing cluster (%s, API server https://127.0.0.1:" % TARGET_KUBECONFIG)
    assert "  delete Namespace team-a and everything in it" in listing
    assert "  delete ClusterQueue team-b" in listing
    assert "  keep Namespace team-b: other field managers wrote to it (kubectl-client-side-apply): it existed before " \
           "fairgpu or is shared" in listing
    assert "  keep Cohort fairgpu: used by ClusterQueues fairgpu did not make: research" in listing
    assert any(line.startswith("  keep Helm release kueue-system/kueue (chart kueue 0.19.2): not installed by fairgpu")
               for line in listing), listing
    assert any(line.startswith("  keep Helm release gpu-operator/gpu-operator (chart gpu-operator v25.10.1): installed "
                               "by fairgpu") and "-e teardown_uninstall_releases=true" in line for line in listing), listing
    assert cluster_objects(TARGET_KUBECONFIG) == before


def test_existing_cluster_teardown_confirmed_removes_only_fairgpus_objects(watch, user_objects):
    project = watch["project"]
    crds = kubectl(TARGET_KUBECONFIG, "get", "crd", "-o", "name").stdout.split()
    helm = kubectl_json(TARGET_KUBECONFIG, "get", "secrets", "-A", "-l", "owner=helm")["items"]
    teardown = project.playbook("teardown", "-e", "teardown_confirm=target", inventory="existing.yml")
    assert teardown.rc == 0, teardown.messages()
    # fairgpu's own objects are gone, but for those someone else still uses and Kueue's installation.
    assert fairgpu_labelled(TARGET_KUBECONFIG) == [
        "Cohort fairgpu", "MutatingWebhookConfiguration kueue-mutating-webhook-configuration",
        "ResourceFlavor nvidia-h100-80gb-hbm3", "ValidatingWebhookConfiguration kueue-validating-webhook-configuration"]
    names = kubectl(TARGET_KUBECONFIG, "get", "namespaces", "-o", "name").stdout.split()
    assert "namespace/team-a" not in names and "namespace/fairgpu-monitoring" not in names
    team_b = kubectl_json(TARGET_KUBECONFIG, "get", "namespace", "team-b")["metadata"]
    assert team_b["labels"] == {"kubernetes.io/metadata.name": "team-b", "owner": "research"}
    assert not team_b.get("annotations", {}).get("fairgpu.io/workload-priority-classes")
    assert kubectl_json(TARGET_KUBECONFIG, "get", "configmap", "notes", "-n", "team-b")["data"] == {"a": "b"}
    assert kubectl_json(TARGET_KUBECONFIG, "get", "configmap", "data", "-n", "research")["data"] == {"x": "y"}
    assert kubectl(TARGET_KUBECONFIG, "get", "clusterqueues", "-o", "name").stdout.split() == ["clusterqueue.kueue.x-k8s.io/research"]
    # The API server, every CRD (Kueue's among them) and both Helm releases stay.
    assert kubectl(TARGET_KUBECONFIG, "get", "--raw", "/readyz").stdout == "ok"
    assert kubectl(TARGET_KUBECONFIG, "get", "crd", "-o", "name").stdout.split() == crds
    assert all("customresourcedefinition.apiextensions.k8s.io/%s.kueue.x-k8s.io" % c in crds for c in KUEUE_CRDS)
    releases = kubectl_json(TARGET_KUBECONFIG, "get", "secrets", "-A", "-l", "owner=helm")["items"]
    assert sorted(s["metadata"]["name"] for s in releases) == sorted(s["metadata"]["name"] for s in helm)
    again = project.playbook("teardown", "-e", "teardown_confirm=target", inventory="existing.yml")
    assert again.rc == 0 and again.stats.get("changed", 0) == 0, again.changed_tasks()


def test_teardown_of_the_embedded_target_from_the_installed_collection(watch):
    teardown = watch["project"].playbook("teardown")
    assert teardown.rc == 0, teardown.messages()
    assert processes("/clusters/%s/" % TARGET) == {}
    assert not os.path.exists(os.path.join(KWOK_WORKDIR, "clusters", TARGET))


def test_the_decoy_saw_nothing(decoy, watch):
    events = decoy.audit_events(watch["offset"])
    assert events, "the decoy's audit log stopped"
    strangers = sorted({(e.get("userAgent", ""), e["user"].get("username"), e["verb"], e["requestURI"])
                        for e in events if not e.get("userAgent", "").startswith(DECOY_AGENTS)})
    assert strangers == [], strangers[:20]
    with open(USER_KUBECONFIG, "rb") as handle:
        assert handle.read() == watch["user_config"]
    after = decoy.state()
    before = watch["before"]
    assert after["processes"] == before["processes"] and all(cmd for pid, cmd in after["processes"].values())
    assert after["ports"] == before["ports"] and after["ports"]
    assert after["objects"] == before["objects"]
