"""fairgpu used as an installed collection on a cluster it did not make, with a decoy cluster in the way (issue 12,
parts 2 and 6; issue 9; issue 15, part 3).

Two embedded clusters are started directly with kwokctl, as a person would, not by fairgpu: the target
``fairgpu-it-existing`` and the decoy ``fairgpu-decoy``, which audits every request. The test gives the target its
GPU nodes (kwok Nodes with fairgpu's simulated-hardware annotations, as the cluster role's kwok provider makes
them) and a CPU node, and writes the user's kubeconfig ``clusters.yaml``: both clusters, the decoy's context
current, the target's under a name no tool chose (``platform-admin@fairgpu-it-existing``). ``KUBECONFIG`` lists
the decoy's file and that one (several files: kubectl merges them, the first file's current context wins),
``K8S_AUTH_KUBECONFIG`` and ``K8S_AUTH_CONTEXT`` (kubernetes.core's fallbacks) name the decoy, and
``~/.kube/config`` is the decoy's (the user's file is backed up and restored).

The collection is built (``ansible-galaxy collection build``) and installed offline into an empty collections path;
a user project outside the checkout declares the target ``cluster_provider: existing`` with that kubeconfig and
context, and the modes the provider would not pick: ``kueue_mode: local``, ``gpu_operator_mode: simulated``,
``monitoring_mode: local``. It runs ``fairgpu.tenancy.site``, ``tenants``, ``validate`` (baseline), ``render``,
then ``teardown`` without confirmation (fails naming the flag, changes nothing), confirmed while the local Kueue
is down (stops before removing anything, saying how to go on), and confirmed (only fairgpu's objects go, and
fairgpu's local processes). At the end the target runs the same processes on the same ports, every
object that is not fairgpu's is as it was, a Job can be created again, and the decoy's audit log holds no request
but its own components'."""

import base64
import glob
import gzip
import json
import os
import re
import shutil
import signal
import subprocess
import time

import pytest
import yaml

from by_hand import (BIN, KwokCluster, apply, cluster_objects, fingerprint, gpu_node, identity, kubectl, kubectl_json,
                     kueue_ready, listening_ports, processes, processes_of, run)
from conftest import ROOT, PlaybookRun, wait_until

pytestmark = pytest.mark.own_cluster

DECOY = "fairgpu-decoy"
TARGET = "fairgpu-it-existing"
# The target's context in the user's kubeconfig: a name of the platform team's, not kwokctl's kwok-<name>.
TARGET_CONTEXT = "platform-admin@" + TARGET
# The decoy keeps kwokctl's name in the user's kubeconfig: a task that loses the target's context and falls back to
# K8S_AUTH_CONTEXT or the current context lands on the decoy, whose audit log shows it.
DECOY_CONTEXT = "kwok-" + DECOY
HOST = "target"
USER_KUBECONFIG = os.path.expanduser("~/.kube/config")
STATE_DIR = os.path.expanduser("~/.local/share/fairgpu")
# The local processes fairgpu starts for the target, and their ports (test_95's own).
LOCAL_PORTS = {"kueue_webhook": 26443, "kueue_metrics": 26444, "kueue_health": 26081, "prometheus": 26090,
               "dcgm_exporter": 26400, "kube_state_metrics": 26480, "kube_state_metrics_telemetry": 26490}
LOCAL_WORKDIRS = [os.path.join(STATE_DIR, "kueue", TARGET), os.path.join(STATE_DIR, "monitoring", TARGET)]
# The kube components of a kwokctl cluster: the only user agents the decoy's audit log may show while fairgpu runs.
DECOY_AGENTS = ("kube-apiserver/", "kube-controller-manager/", "kube-scheduler/", "kwok-controller/")
KUEUE_CRDS = ("clusterqueues", "localqueues", "resourceflavors", "cohorts", "workloads", "workloadpriorityclasses")
PRODUCT = "NVIDIA-H100-80GB-HBM3"
TENANTS = [{"name": "team-a", "gpus": 8, "borrowing_limit": 8, "groups": ["team-a"]},
           {"name": "team-b", "gpus": 8, "borrowing_limit": 8, "groups": ["team-b"]}]


def inventory(kubeconfig):
    """The platform team's inventory: the target as a cluster fairgpu did not make, with the local stand-ins."""
    return {"gpu_clusters": {"hosts": {HOST: {
        "ansible_connection": "local", "ansible_python_interpreter": "{{ ansible_playbook_python }}",
        "cluster_provider": "existing", "cluster_kubeconfig": kubeconfig, "cluster_context": TARGET_CONTEXT,
        # Names this host's local state (Kueue's and Prometheus' working directories).
        "cluster_name": TARGET,
        "kueue_mode": "local", "gpu_operator_mode": "simulated", "monitoring_mode": "local",
        "tenants_list": TENANTS,
        "render_node_pools": [{"name": "gpu-node", "count": 2, "gpu_product": PRODUCT, "gpu_count": 8, "cpu": "96",
                               "memory": "1Ti"}],
        "run_local_ports": LOCAL_PORTS}}}}


def user_kubeconfig(path, decoy, target):
    """The platform team's kubeconfig: the decoy (current context) and the target under its own names, each
    flattened from kwokctl's file (certificates inline)."""
    def flat(cluster):
        return kubectl_json(cluster.kubeconfig, "config", "view", "--raw", "--flatten")

    theirs, ours = flat(decoy), flat(target)
    config = {"apiVersion": "v1", "kind": "Config", "preferences": {}, "current-context": DECOY_CONTEXT,
              "clusters": theirs["clusters"] + [{"name": TARGET, "cluster": ours["clusters"][0]["cluster"]}],
              "users": theirs["users"] + [{"name": "platform-admin", "user": ours["users"][0]["user"]}],
              "contexts": theirs["contexts"] + [{"name": TARGET_CONTEXT,
                                                 "context": {"cluster": TARGET, "user": "platform-admin"}}]}
    assert [c["name"] for c in theirs["contexts"]] == [DECOY_CONTEXT]
    with open(path, "w") as handle:
        yaml.safe_dump(config, handle)
    os.chmod(path, 0o600)
    return path


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

    def __init__(self, base, decoy, target):
        self.base = base
        self.dir = os.path.join(base, "project")
        self.collections = os.path.join(base, "collections")
        self.installed = os.path.join(self.collections, "ansible_collections", "fairgpu", "tenancy")
        self.kubeconfig = os.path.join(self.dir, "clusters.yaml")
        self.decoy, self.target = decoy, target
        self.env = {k: v for k, v in os.environ.items()
                    if not k.startswith(("ANSIBLE_", "K8S_AUTH_")) and k not in ("PYTHONPATH", "KUBECONFIG")}
        # Everything the user's environment says points at the decoy: KUBECONFIG with several files (the decoy's
        # first), kubernetes.core's K8S_AUTH_* fallbacks (kubernetes.core plugins/module_utils/args_common.py,
        # env_fallback), and ~/.kube/config (the fixture).
        self.env.update(KUBECONFIG=os.pathsep.join([decoy.kubeconfig, self.kubeconfig]),
                        K8S_AUTH_KUBECONFIG=decoy.kubeconfig, K8S_AUTH_CONTEXT=DECOY_CONTEXT,
                        ANSIBLE_STDOUT_CALLBACK="ansible.posix.json", ANSIBLE_LOAD_CALLBACK_PLUGINS="1")

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
        user_kubeconfig(self.kubeconfig, self.decoy, self.target)
        with open(os.path.join(self.dir, "hosts.yml"), "w") as handle:
            yaml.safe_dump(inventory(self.kubeconfig), handle)
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
    """The host result of the task called ``name`` in a JSON-callback run (a role's task: ``role : name``)."""
    for play in run_.result.get("plays", []):
        for task in play["tasks"]:
            if name in (task["task"]["name"], task["task"]["name"].split(" : ", 1)[-1]):
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


def fairgpu_processes():
    """fairgpu's local processes for the target (the Kueue controller, Prometheus, the simulated DCGM exporter,
    kube-state-metrics)."""
    found = {}
    for workdir in LOCAL_WORKDIRS:
        found.update(processes(workdir + "/"))
    return found


@pytest.fixture(scope="module")
def clusters(tmp_path_factory):
    """The decoy (KUBECONFIG and ~/.kube/config point at it) and the target, both started with kwokctl; the
    user's ~/.kube/config restored and both clusters deleted after."""
    workdir = str(tmp_path_factory.mktemp("kwok"))
    decoy = KwokCluster(DECOY, workdir, 22110, audit=True)
    target = KwokCluster(TARGET, workdir, 22100, stages=True)
    backup = USER_KUBECONFIG + ".fairgpu-decoy-backup"
    had_config, had_dir = os.path.exists(USER_KUBECONFIG), os.path.isdir(os.path.dirname(USER_KUBECONFIG))
    try:
        decoy.create()
        # What a person keeps on a cluster: a namespace named like a fairgpu tenant, a ConfigMap, a simulated node.
        apply(decoy.kubeconfig, [
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a", "labels": {"owner": "decoy"}}},
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "keep-me", "namespace": "team-a"},
             "data": {"who": "decoy"}},
            gpu_node("decoy-node", PRODUCT, 8)])
        target.create()
        # The target's machines, made by the platform team: two H100 nodes of 8 GPUs and a CPU node.
        apply(target.kubeconfig, [gpu_node("gpu-node-%d" % i, PRODUCT, 8) for i in range(2)] + [gpu_node("cpu-node-0")])
        ready = kubectl(target.kubeconfig, "wait", "--for=condition=Ready", "--timeout=120s", "node", "--all")
        assert ready.returncode == 0, ready.stderr
        if had_config:
            shutil.copy2(USER_KUBECONFIG, backup)
        os.makedirs(os.path.dirname(USER_KUBECONFIG), exist_ok=True)
        shutil.copyfile(decoy.kubeconfig, USER_KUBECONFIG)
        yield decoy, target
    finally:
        if had_config:
            shutil.move(backup, USER_KUBECONFIG)
        elif os.path.exists(USER_KUBECONFIG):
            os.remove(USER_KUBECONFIG)
            if not had_dir:
                shutil.rmtree(os.path.dirname(USER_KUBECONFIG), ignore_errors=True)
        decoy.delete()
        target.delete()


@pytest.fixture(scope="module")
def watch(clusters, tmp_path_factory):
    """Both clusters' state and the audit log's length before fairgpu runs; the installed collection."""
    decoy, target = clusters
    time.sleep(3)  # let the controllers settle (namespace finalizers, service accounts)
    before, target_before = decoy.state(), target.state()
    offset = decoy.audit_size()
    with open(USER_KUBECONFIG, "rb") as handle:
        user_config = handle.read()
    project = Project(str(tmp_path_factory.mktemp("user")), decoy, target)
    project.install()
    # The objects that are not fairgpu's: every object before fairgpu ran, and what the platform team adds later.
    theirs = dict(target_before["objects"])
    yield {"before": before, "offset": offset, "user_config": user_config, "project": project,
           "installed_tree": project.tree(), "target": target, "target_before": target_before, "theirs": theirs}
    # Whatever happened: fairgpu's local processes go (the target itself is deleted by the clusters fixture).
    if fairgpu_processes():
        project.playbook("teardown", "-e", "teardown_confirm=" + HOST)


def keep_as_theirs(watch, items):
    """Record the platform team's objects ``items`` (as the API server now holds them) among the objects that are
    not fairgpu's."""
    kubeconfig = watch["target"].kubeconfig
    for item in items:
        meta = item["metadata"]
        args = ["get", item["kind"], meta["name"]] + (["-n", meta["namespace"]] if meta.get("namespace") else [])
        obj = kubectl_json(kubeconfig, *args)
        watch["theirs"][identity(obj)] = fingerprint(obj)


def test_site_tenants_validate_render_on_an_existing_cluster_from_the_installed_collection(watch):
    project, target = watch["project"], watch["target"]
    assert not os.path.exists(os.path.join(project.dir, "..", "..", "ansible_collections"))
    # The cluster, GPUs, Kueue and monitoring first; the tenants after a person made team-b by hand.
    site = project.playbook("site", "--skip-tags", "tenants")
    assert site.rc == 0, site.messages()
    # The run used the local stand-ins although the provider is existing (the overrides, decided once).
    resolved = task_result(site, "fairgpu.tenancy.run : Resolve the run's settings and the cluster's connection")
    settings = resolved["ansible_facts"]["run_settings"]
    assert settings["provider"] == "existing"
    assert settings["modes"] == {"gpu_operator": "simulated", "kueue": "local", "monitoring": "local"}
    # The simulated GPU operator published the GPU nodes the platform team made, and left the CPU node alone.
    nodes = {n["metadata"]["name"]: n for n in kubectl_json(target.kubeconfig, "get", "nodes")["items"]}
    for name in ("gpu-node-0", "gpu-node-1"):
        assert nodes[name]["status"]["allocatable"]["nvidia.com/gpu"] == "8"
        assert nodes[name]["metadata"]["labels"]["nvidia.com/gpu.product"] == PRODUCT
    assert "nvidia.com/gpu" not in nodes["cpu-node-0"]["status"]["allocatable"]
    assert "nvidia.com/gpu.product" not in nodes["cpu-node-0"]["metadata"]["labels"]
    # The local Kueue was given only the target's context (cmd/kueue reads the current one of its file).
    (kueue,) = [cmd for cmd in fairgpu_processes().values() if "/bin/kueue " in cmd]
    kueue_kubeconfig = re.search(r"--kubeconfig=(\S+)", kueue).group(1)
    with open(kueue_kubeconfig) as handle:
        given = yaml.safe_load(handle)
    assert [c["name"] for c in given["contexts"]] == [TARGET_CONTEXT] and given["current-context"] == TARGET_CONTEXT
    assert [c["cluster"]["server"] for c in given["clusters"]] == [target.server()]

    made = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-b", "labels": {"owner": "research"}}},
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "notes", "namespace": "team-b"},
             "data": {"a": "b"}}]
    apply(target.kubeconfig, made)
    keep_as_theirs(watch, made)
    tenants = project.playbook("tenants")
    assert tenants.rc == 0, tenants.messages()
    labels = kubectl_json(target.kubeconfig, "get", "namespace", "team-b")["metadata"]["labels"]
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


def test_a_context_the_kubeconfig_does_not_hold_is_refused_before_anything_changes(watch):
    before = cluster_objects(watch["target"].kubeconfig)
    site = watch["project"].playbook("site", "-e", "cluster_context=platform-admin@prod")
    assert site.rc != 0 and site.stats.get("changed", 0) == 0, site.changed_tasks()
    assert ("cluster_context: %s has no context 'platform-admin@prod'; set cluster_context to one of %s, %s"
            % (watch["project"].kubeconfig, DECOY_CONTEXT, TARGET_CONTEXT)) in site.messages()
    assert cluster_objects(watch["target"].kubeconfig) == before


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
    apply(watch["target"].kubeconfig, items, "--server-side", "--field-manager=platform-team")
    keep_as_theirs(watch, items)
    return items


def test_existing_cluster_teardown_without_confirmation_changes_nothing(watch, user_objects):
    project, target = watch["project"], watch["target"]
    before = cluster_objects(target.kubeconfig)
    local = fairgpu_processes()
    teardown = project.playbook("teardown")
    assert teardown.rc != 0
    assert teardown.stats.get("changed", 0) == 0, teardown.changed_tasks()
    message = task_result(teardown, "Stop unless the removal is confirmed with the host's name")["msg"]
    assert message.startswith("Not confirmed: nothing was removed from target.")
    assert message.endswith("run the teardown again with -e teardown_confirm=target")
    listing = task_result(teardown, "List what teardown removes from target")["msg"]
    # The target's API server, reached through the context named in the inventory (not the file's current one).
    assert listing[0] == ("target: existing cluster (%s, context %s, API server %s). The cluster itself stays; "
                          "fairgpu removes only what it created." % (project.kubeconfig, TARGET_CONTEXT, target.server()))
    assert "  delete Namespace team-a and everything in it" in listing
    assert "  delete ClusterQueue team-b" in listing
    assert "  keep Namespace team-b: other field managers wrote to it (kubectl-client-side-apply): it existed before " \
           "fairgpu or is shared" in listing
    assert "  keep Cohort fairgpu: used by ClusterQueues fairgpu did not make: research" in listing
    assert any(line.startswith("  keep Helm release kueue-system/kueue (chart kueue 0.19.2): not installed by fairgpu")
               for line in listing), listing
    assert any(line.startswith("  keep Helm release gpu-operator/gpu-operator (chart gpu-operator v25.10.1): installed "
                               "by fairgpu") and "-e teardown_uninstall_releases=true" in line for line in listing), listing
    # The local Kueue's webhooks go with it (left behind they would refuse every Job of the cluster).
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        assert ("  delete %s kueue-%s-webhook-configuration: it calls the local Kueue (https://127.0.0.1:%d), which "
                "teardown stops; left behind (failurePolicy Fail) it would refuse every Job of the cluster"
                % (kind, "mutating" if kind.startswith("M") else "validating", LOCAL_PORTS["kueue_webhook"])) in listing
    assert cluster_objects(target.kubeconfig) == before
    assert fairgpu_processes() == local and len(local) == 4, local


def test_existing_cluster_teardown_stops_before_anything_while_the_local_kueue_is_down(watch, user_objects):
    """The local Kueue crashed (SIGKILL, its pid file left behind): a confirmed teardown removes nothing and says
    how to go on, instead of waiting out every deletion (Kueue's finalizers) and stopping half-way. Then a person
    starts Kueue again by hand with the same arguments (start-stop-daemon writes the pid file in the format the
    kueue role's local_service reads, so the next site.yml takes it for its own)."""
    project, target = watch["project"], watch["target"]
    workdir = LOCAL_WORKDIRS[0]
    with open(os.path.join(workdir, "kueue.pid")) as handle:
        pid = int(handle.read())
    with open("/proc/%d/cmdline" % pid, "rb") as handle:
        argv = handle.read().decode().split("\0")[:-1]
    assert argv[0].endswith("/kueue"), argv
    os.kill(pid, signal.SIGKILL)
    wait_until(lambda: not processes_of(pid), 30, what="the local Kueue to exit")
    before = cluster_objects(target.kubeconfig)
    teardown = project.playbook("teardown", "-e", "teardown_confirm=target")
    assert teardown.rc != 0
    assert teardown.stats.get("changed", 0) == 0, teardown.changed_tasks()
    message = task_result(teardown, "Stop before removing anything while the local Kueue is down")["msg"]
    assert message.startswith("Nothing was removed from target: its webhooks call fairgpu's local Kueue, which is "
                              "not running (http://127.0.0.1:%d/readyz:" % LOCAL_PORTS["kueue_health"]), message
    assert "Start it again with site.yml for this host" in message and workdir + "/kueue.log" in message
    assert cluster_objects(target.kubeconfig) == before
    started = subprocess.run(["start-stop-daemon", "--start", "--background", "--make-pidfile",
                              "--pidfile=" + os.path.join(workdir, "kueue.pid"),
                              "--output=" + os.path.join(workdir, "kueue.log"), "--exec=" + argv[0], "--"] + argv[1:],
                             check=False, capture_output=True, text=True)
    assert started.returncode == 0, started.stderr
    wait_until(lambda: kueue_ready(LOCAL_PORTS["kueue_health"]), 120, what="the local Kueue to be ready again")


def test_existing_teardown_confirmed_removes_only_fairgpus_objects(watch, user_objects):
    project, target = watch["project"], watch["target"]
    kubeconfig = target.kubeconfig
    crds = kubectl(kubeconfig, "get", "crd", "-o", "name").stdout.split()
    helm = kubectl_json(kubeconfig, "get", "secrets", "-A", "-l", "owner=helm")["items"]
    teardown = project.playbook("teardown", "-e", "teardown_confirm=target")
    assert teardown.rc == 0, teardown.messages()
    # The cluster takes Jobs again: no webhook is left calling the stopped Kueue (failurePolicy Fail).
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "after-fairgpu", "namespace": "research"},
           "spec": {"template": {"spec": {"restartPolicy": "Never",
                                          "containers": [{"name": "main", "image": "busybox"}]}}}}
    created = kubectl(kubeconfig, "create", "-f", "-", stdin=json.dumps(job))
    assert created.returncode == 0, created.stderr
    deleted = kubectl(kubeconfig, "delete", "job", "after-fairgpu", "-n", "research", "--cascade=foreground")
    assert deleted.returncode == 0, deleted.stderr
    # fairgpu's own objects are gone, but for those someone else still uses.
    assert fairgpu_labelled(kubeconfig) == ["Cohort fairgpu", "ResourceFlavor nvidia-h100-80gb-hbm3"]
    names = kubectl(kubeconfig, "get", "namespaces", "-o", "name").stdout.split()
    assert "namespace/team-a" not in names and "namespace/fairgpu-monitoring" not in names
    team_b = kubectl_json(kubeconfig, "get", "namespace", "team-b")["metadata"]
    assert team_b["labels"] == {"kubernetes.io/metadata.name": "team-b", "owner": "research"}
    assert not team_b.get("annotations", {}).get("fairgpu.io/workload-priority-classes")
    assert kubectl_json(kubeconfig, "get", "configmap", "notes", "-n", "team-b")["data"] == {"a": "b"}
    assert kubectl_json(kubeconfig, "get", "configmap", "data", "-n", "research")["data"] == {"x": "y"}
    assert kubectl(kubeconfig, "get", "clusterqueues", "-o", "name").stdout.split() == ["clusterqueue.kueue.x-k8s.io/research"]
    # The API server, every CRD (Kueue's among them) and both Helm releases stay.
    assert kubectl(kubeconfig, "get", "--raw", "/readyz").stdout == "ok"
    assert kubectl(kubeconfig, "get", "crd", "-o", "name").stdout.split() == crds
    assert all("customresourcedefinition.apiextensions.k8s.io/%s.kueue.x-k8s.io" % c in crds for c in KUEUE_CRDS)
    releases = kubectl_json(kubeconfig, "get", "secrets", "-A", "-l", "owner=helm")["items"]
    assert sorted(s["metadata"]["name"] for s in releases) == sorted(s["metadata"]["name"] for s in helm)
    # fairgpu's local processes and their working directories are gone, and nothing listens on their ports.
    assert fairgpu_processes() == {}
    assert not any(os.path.exists(d) for d in LOCAL_WORKDIRS)
    assert set(LOCAL_PORTS.values()).isdisjoint(listening_ports())
    # Every object that is not fairgpu's is as it was; the cluster's processes and ports are the same.
    after = target.state()
    assert {key: after["objects"].get(key) for key in watch["theirs"]} == watch["theirs"]
    before = watch["target_before"]
    assert after["processes"] == before["processes"] and all(cmd for pid, cmd in after["processes"].values())
    assert after["ports"] == before["ports"] and after["ports"]
    again = project.playbook("teardown", "-e", "teardown_confirm=target")
    assert again.rc == 0 and again.stats.get("changed", 0) == 0, again.changed_tasks()


def test_the_decoy_saw_nothing(clusters, watch):
    decoy, _target = clusters
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
