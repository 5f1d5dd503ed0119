"""An interrupted site.yml is repaired by the next run (issue 27, fault 4; docs/failures.md "An interrupted
site.yml"), on an embedded cluster of its own. After a full run, the playbook is killed outright (SIGKILL to the
controller, its workers and their modules, as when the machine running it goes away) at three moments, each
with a change in flight: while the local Kueue restarts for a changed feature gate, while the tenants' objects are
applied with a changed queueing strategy, and while the MIG layout drains and relabels the nodes on the way to path
mig. Each time the next run with the same settings succeeds (what it changed, the repair, is kept in
results/it-interrupt/repairs.json) and the run after it changes nothing: the cluster is where an uninterrupted run
leaves it."""

import json
import os
import signal
import subprocess
import sys
import threading

import pytest
from kubernetes import client as k8s
from kubernetes.client.rest import ApiException

from ansible_collections.fairgpu.tenancy.plugins.module_utils.common.waiter import Waiter
from conftest import ROOT, VARS, load_job, own_cluster, playbook

pytestmark = pytest.mark.own_cluster

NAME = "fairgpu-it-interrupt"
SETTINGS = {
    "cluster_name": NAME, "lab_cluster_apiserver_port": 23200,
    "run_local_ports": {"kueue_webhook": 23443, "kueue_metrics": 23444, "kueue_health": 23081, "prometheus": 23090,
                        "dcgm_exporter": 23400, "kube_state_metrics": 23480, "kube_state_metrics_telemetry": 23490},
    "validate_results_dir": os.path.join(ROOT, "results", "it-interrupt"),
}
KUEUE_TASK = "TASK [fairgpu.tenancy.lab_kueue : Run the Kueue controller"
TENANTS_TASK = "TASK [fairgpu.tenancy.tenants : Apply the tenants"
MIG_TASK = "TASK [fairgpu.tenancy.mig_config : Apply the MIG layout"
MIG_CONFIG, DRAINED = "nvidia.com/mig.config", "fairgpu.io/mig-drain-cordoned"


def site(**extra):
    return playbook("site.yml", "-e", json.dumps(dict(SETTINGS, **extra)), timeout=900)


def _parents():
    """``{pid: parent pid}`` of every process (``/proc/<pid>/stat``, field 4)."""
    found = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open("/proc/%s/stat" % entry) as handle:
                    found[int(entry)] = int(handle.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
    return found


def _ansible_processes(root):
    """``root`` and its descendants that are Ansible's: the controller's forked workers (``ansible-playbook`` in their
    command line) and the modules they run (``AnsiballZ_``), not the services a module started (Kueue, Prometheus,
    the lab's simulators: they outlive the run by design)."""
    parents, found, todo = _parents(), [root], [root]
    while todo:
        pid = todo.pop()
        children = [child for child, parent in parents.items() if parent == pid]
        todo += children
        found += children
    ansible = []
    for pid in found:
        try:
            with open("/proc/%d/cmdline" % pid, "rb") as handle:
                cmdline = handle.read()
        except OSError:
            continue
        if b"ansible-playbook" in cmdline or b"AnsiballZ_" in cmdline:
            ansible.append(pid)
    return ansible


def killed_when(marker, moment, what, **extra):
    """site.yml with ``extra``, killed as soon as ``moment()`` holds once its output has shown ``marker`` (the task's
    banner): the moment is read from the cluster, so the kill lands in the middle of the task's change, not at a
    time that a slower or faster machine would shift. Returns its output lines."""
    # Unbuffered: through a pipe Python buffers its output, and the task's banner would come after the task.
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_STDOUT_CALLBACK="default",
               ANSIBLE_FORCE_COLOR="0", PYTHONUNBUFFERED="1")
    cmd = [os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), os.path.join(ROOT, "playbooks", "site.yml"),
           "-e", "@" + VARS, "-e", json.dumps(dict(SETTINGS, **extra))]
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    lines, reached = [], threading.Event()

    def read():
        for line in proc.stdout:
            lines.append(line.rstrip())
            if marker in line:
                reached.set()
    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        assert reached.wait(600), "site.yml never reached %r:\n%s" % (marker, "\n".join(lines[-40:]))
        held, _value, _elapsed = Waiter().wait(moment, 120, 0.05)
        assert held and proc.poll() is None, "site.yml was not killed %s:\n%s" % (what, "\n".join(lines[-40:]))
        # Ansible's workers run in sessions of their own (ansible-core executor/process/worker.py, _detach: setsid),
        # so killing the controller alone leaves the task in flight running to its end. Killed here are the
        # controller, its workers and their modules: the machine that runs the playbook going away.
        for pid in _ansible_processes(proc.pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(30)
        reader.join(10)
    return lines


def record(name, run):
    """What the repairing run changed, kept for a person to read (results/it-interrupt/repairs.json)."""
    path = os.path.join(SETTINGS["validate_results_dir"], "repairs.json")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    found = {}
    if os.path.exists(path):
        with open(path) as handle:
            found = json.load(handle)
    found[name] = run.changed_tasks()
    with open(path, "w") as handle:
        json.dump(found, handle, indent=2)


@pytest.fixture(scope="module")
def api():
    yield from own_cluster(SETTINGS)


KUEUE_DIR = os.path.expanduser("~/.local/share/fairgpu/kueue/%s" % NAME)


def kueue_args():
    with open(os.path.join(KUEUE_DIR, "kueue.service.json")) as handle:
        return json.load(handle)["argv"]


def kueue_pid():
    with open(os.path.join(KUEUE_DIR, "kueue.pid")) as handle:
        return int(handle.read().strip())


def test_a_run_killed_while_kueue_restarts_is_repaired_and_meanwhile_no_job_runs_outside_kueue(api):
    gates = {"kueue_feature_gates": {"LocalQueueMetrics": True}}
    old = kueue_pid()
    killed_when(KUEUE_TASK, lambda: not os.path.exists("/proc/%d" % old), "once the old Kueue had stopped", **gates)
    batch = k8s.BatchV1Api(api)
    # Between the runs: Kueue's webhooks stay in place, so a tenant's Job is refused while Kueue is not serving,
    # or created suspended for Kueue to admit: never running outside it.
    try:
        job = batch.create_namespaced_job("team-a", load_job("it-between", "team-a", queue="team-a-queue"))
        assert job.spec.suspend is True, job.spec
        batch.delete_namespaced_job("it-between", "team-a", propagation_policy="Background")
    except ApiException as refused:
        assert refused.status == 500 and "failed calling webhook" in refused.body, refused.body
    repair = site(**gates)
    assert repair.rc == 0, repair.messages()
    record("kueue", repair)
    assert "--feature-gates=LocalQueueMetrics=true" in " ".join(kueue_args())
    again = site(**gates)
    assert again.rc == 0 and again.changed_tasks() == [], again.changed_tasks()


def test_a_run_killed_while_the_tenants_are_applied_is_repaired(api):
    custom = k8s.CustomObjectsApi(api)

    def strategies():
        return dict((q["metadata"]["name"], q["spec"]["queueingStrategy"]) for q in custom.list_cluster_custom_object(
            "kueue.x-k8s.io", "v1beta2", "clusterqueues")["items"])
    killed_when(TENANTS_TASK, lambda: "StrictFIFO" in strategies().values(), "once the first ClusterQueue changed",
                tenants_queueing_strategy="StrictFIFO")
    repair = site(tenants_queueing_strategy="StrictFIFO")
    assert repair.rc == 0, repair.messages()
    record("tenants", repair)
    assert strategies() == {"team-a": "StrictFIFO", "team-b": "StrictFIFO"}
    again = site(tenants_queueing_strategy="StrictFIFO")
    assert again.rc == 0 and again.changed_tasks() == [], again.changed_tasks()


def test_a_run_killed_while_the_mig_layout_drains_is_repaired(api):
    core = k8s.CoreV1Api(api)

    def cordoned():
        return any(n.spec.unschedulable for n in core.list_node(label_selector="nvidia.com/gpu.present=true").items)
    killed_when(MIG_TASK, cordoned, "once the drain had cordoned the first node", path="mig")
    repair = site(path="mig")
    assert repair.rc == 0, repair.messages()
    record("mig", repair)
    assert any("Apply the MIG layout" in task for task in repair.changed_tasks()), repair.changed_tasks()
    for node in core.list_node(label_selector="nvidia.com/gpu.present=true").items:
        assert node.metadata.labels[MIG_CONFIG] == "fairgpu-2x2g.20gb", node.metadata.labels
        assert not node.spec.unschedulable and DRAINED not in (node.metadata.annotations or {}), node.metadata.name
    again = site(path="mig")
    assert again.rc == 0 and again.changed_tasks() == [], again.changed_tasks()
