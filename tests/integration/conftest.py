"""The integration tests' embedded cluster: brought up once per session with the real playbooks (site.yml),
torn down at the end. Every test talks to its real API server and the real Kueue controller."""

import json
import os
import subprocess
import sys

import pytest
import yaml
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from ansible_collections.fairgpu.tenancy.plugins.module_utils.common.waiter import Waiter

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sockets  # noqa: E402  pylint: disable=wrong-import-position

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# FAIRGPU_IT_VARS: a copy of vars.yml with another cluster_name and ports, for a run beside the usual one.
VARS = os.environ.get("FAIRGPU_IT_VARS") or os.path.join(ROOT, "tests", "integration", "vars.yml")
with open(VARS) as _handle:
    CLUSTER = yaml.safe_load(_handle)["cluster_name"]
KWOK_WORKDIR = os.path.expanduser("~/.local/share/fairgpu/kwok")
KUBECONFIG = os.path.join(KWOK_WORKDIR, "clusters", CLUSTER, "kubeconfig.yaml")


# make test runs the files marked own_cluster (each brings an embedded cluster of its own, with its own name, ports
# and state directory) in one lane and the rest, on the shared cluster CLUSTER, in the other, at the same time
# (tests/lanes.py; docs/testing.md "Two lanes at once"). A file that starts a cluster of its own carries the mark.
OWN_CLUSTER = "own_cluster"


def pytest_configure(config):
    config.addinivalue_line("markers", "fleet: the fleet's runs on three embedded clusters (make test-fleet)")
    config.addinivalue_line("markers", "multikueue: MultiKueue on three embedded clusters (make test-multikueue)")
    config.addinivalue_line("markers", OWN_CLUSTER + ": the file brings an embedded cluster of its own and never uses the "
                            "shared one (make test runs these beside the shared cluster's tests)")


class PlaybookRun:
    """One ansible-playbook run with the JSON callback: rc, the parsed result and the raw output."""

    def __init__(self, proc):
        self.rc = proc.returncode
        self.stderr = proc.stderr
        try:
            self.result = json.loads(proc.stdout)
        except ValueError:
            self.result = {"stats": {}, "plays": [], "raw": proc.stdout}

    @property
    def stats(self):
        return next(iter(self.result.get("stats", {}).values()), {})

    def changed_tasks(self):
        return [task["task"]["name"] for play in self.result.get("plays", []) for task in play["tasks"]
                for host in task["hosts"].values() if host.get("changed")]

    def drift_lines(self, words):
        """What the run's drift reports said: the lines of the tasks "Say what differ..." whose name holds ``words``
        ("would repair" under --check, "repaired" after a repair), in the order the run said them."""
        return [line for play in self.result.get("plays", []) for task in play["tasks"]
                if "Say what differ" in task["task"]["name"] and words in task["task"]["name"]
                for host in task["hosts"].values() if not host.get("skipped") for line in host.get("msg") or []]

    def messages(self):
        """Every failure message of the run, one string."""
        msgs = []
        for play in self.result.get("plays", []):
            for task in play["tasks"]:
                for host in task["hosts"].values():
                    if host.get("failed"):
                        # A loop's failure says only "One or more items failed": name the items that did.
                        msgs.append("%s: %s" % (task["task"]["name"], host.get("msg", "")))
                        msgs.extend("  item %s: %s" % (item.get("item"), item.get("msg", ""))
                                    for item in host.get("results") or [] if item.get("failed"))
        return "\n".join(msgs) + self.stderr + self.result.get("raw", "")


def playbook(name, *args, check=False, timeout=900):
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"),
               ANSIBLE_STDOUT_CALLBACK="ansible.posix.json", ANSIBLE_LOAD_CALLBACK_PLUGINS="1")
    cmd = [os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), os.path.join(ROOT, "playbooks", name), "-e", "@" + VARS] + list(args)
    if check:
        cmd.append("--check")
    proc = subprocess.run(cmd, cwd=ROOT, env=env, check=False, capture_output=True, text=True, timeout=timeout)
    return PlaybookRun(proc)


def own_cluster(settings):
    """A module fixture's body for a test file with an embedded cluster of its own: site.yml with ``settings``
    (cluster_name, ports, ...), then yield an API client of that cluster; teardown.yml afterwards, however the
    tests went."""
    try:
        run = playbook("site.yml", "-e", json.dumps(settings))
        assert run.rc == 0, run.messages()
        yield k8s_config.new_client_from_config(
            config_file=os.path.join(KWOK_WORKDIR, "clusters", settings["cluster_name"], "kubeconfig.yaml"))
    finally:
        playbook("teardown.yml", "-e", json.dumps(settings))


SOCKET_SUMMARY = pytest.StashKey()


def pytest_terminal_summary(terminalreporter, config):
    """The socket watcher's line (what it watched, how often), after the tests."""
    if SOCKET_SUMMARY in config.stash:
        terminalreporter.write_line(config.stash[SOCKET_SUMMARY])


@pytest.fixture(scope="session", autouse=True)
def loopback_only(request):
    """Nothing of an embedded cluster dials off the machine (docs/lab.md "Nothing leaves the machine from the
    embedded cluster"): the whole session long, a background thread samples every second the sockets of the
    embedded clusters' processes (tests/integration/sockets.py);
    the session fails, naming the process, its pid and the address, if one was connected outside 127.0.0.0/8
    (::1, ::ffff:127.x.x.x)."""
    watcher = sockets.started()
    yield watcher
    offences = watcher.stop()
    request.config.stash[SOCKET_SUMMARY] = (
        "socket watcher: %d samples, watched %s; connections off the machine: %d%s"
        % (watcher.samples, ", ".join(sorted(watcher.seen)) or "no cluster process", len(offences),
           "; errors: " + "; ".join(watcher.errors) if watcher.errors else ""))
    if offences:
        pytest.fail("a process of the embedded cluster connected off the machine (%d samples):\n%s"
                    % (watcher.samples, "\n".join(sockets.describe(o) for o in offences)), pytrace=False)


@pytest.fixture(scope="session")
def cluster(request):
    """site.yml on a fresh embedded cluster; yields the kubernetes ApiClient. Tears the cluster down after.

    Refused in the lane of the files with clusters of their own (``-m own_cluster``): a second shared cluster
    there would be made beside the other lane's, under the same name and ports."""
    if (request.config.option.markexpr or "").strip() == OWN_CLUSTER:
        pytest.fail("the shared cluster %s was asked for in the %s lane: a test of a file marked %s uses it; "
                    "take the mark off that file, or give the test a cluster of its own"
                    % (CLUSTER, OWN_CLUSTER, OWN_CLUSTER), pytrace=False)
    run = playbook("site.yml")
    assert run.rc == 0, run.messages()
    api = k8s_config.new_client_from_config(config_file=KUBECONFIG)
    yield api
    playbook("teardown.yml")


@pytest.fixture(scope="session")
def core(cluster):
    return k8s.CoreV1Api(cluster)


@pytest.fixture(scope="session")
def batch(cluster):
    return k8s.BatchV1Api(cluster)


@pytest.fixture(scope="session")
def kueue(cluster):
    return k8s.CustomObjectsApi(cluster)


def wait_until(predicate, timeout, interval=0.5, what="condition"):
    """Poll ``predicate`` until it returns a truthy value; return it, or fail after ``timeout`` seconds (the
    collection's own waiter, common/waiter.py)."""
    held, value, _elapsed = Waiter().wait(predicate, timeout, interval)
    if not held:
        pytest.fail("timed out after %ss waiting for %s" % (timeout, what))
    return value


def load_job(name, namespace, queue=None, gpus=1, seconds=30, labels=None):
    """A Job shaped like the validate role's load Jobs (kwok completes its pod after ``seconds``)."""
    meta_labels = dict(labels or {})
    if queue:
        meta_labels["kueue.x-k8s.io/queue-name"] = queue
    return {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "namespace": namespace, "labels": meta_labels},
        "spec": {"backoffLimit": 0, "template": {
            "metadata": {"annotations": {"pod-complete.stage.kwok.x-k8s.io/delay": "%ds" % seconds,
                                         "pod-complete.stage.kwok.x-k8s.io/jitter-delay": "%ds" % seconds}},
            "spec": {"restartPolicy": "Never", "containers": [{
                "name": "load", "image": "pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime",
                "resources": {"requests": {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": str(gpus)},
                              "limits": {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": str(gpus)}}}]}}},
    }


def workloads(kueue, namespace):
    return kueue.list_namespaced_custom_object("kueue.x-k8s.io", "v1beta2", namespace, "workloads")["items"]


def cluster_queue(kueue, name):
    return kueue.get_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "clusterqueues", name)


def reserved_gpus(cq):
    return sum(int(r.get("total", 0)) for f in cq.get("status", {}).get("flavorsReservation", [])
               for r in f["resources"] if r["name"] == "nvidia.com/gpu")


def condition(obj, kind):
    return next((c for c in obj.get("status", {}).get("conditions", []) if c["type"] == kind), None)


def delete_jobs(batch, namespace, selector):
    batch.delete_collection_namespaced_job(namespace, label_selector=selector, propagation_policy="Background")
