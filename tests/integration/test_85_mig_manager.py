"""The MIG manager's race on the integration cluster (issue 13 item 5): after test_80 left every GPU split into
two 2g.20gb devices (state success), the mig_config role relabels the nodes while the background simulated MIG
manager (files/lab/mig_manager_sim.py) plays NVIDIA mig-parted v0.13.1's sequences with a delay.

- An already-applied layout under another name goes stale success -> success with no pending: a wait that looks
  for a change of state would hang (here: time out and fail).
- A new layout goes stale success -> pending [-> rebooting] -> success, the device plugin's resources after the
  success: a wait that accepts the stale success fails the role's result check.
- A failed apply goes pending -> failed: the play fails at once, naming the node; the node keeps its layout and ends
  uncordoned.
- With a tenant's long Job on each node holding a MIG device (issue 27, scenario 6), ``--check`` lists each node and
  the pod it would drain and changes nothing; the real run (batches of one) never has two GPU nodes unschedulable at
  once, cordons each node before its label changes, leaves the pod on the second node Running (same uid) while the
  first drains, gives each evicted pod a DisruptionTarget condition and a FairgpuMigDrain Event, and uncordons
  every node."""

import json
import threading
import time
import uuid

import pytest
from kubernetes import watch

from conftest import playbook, wait_until

STATE, CONFIG = "nvidia.com/mig.config.state", "nvidia.com/mig.config"
LAYOUTS = {"copy-of-default": [{"devices": "all", "mig-enabled": True, "mig-devices": {"2g.20gb": 2}}],
           "two-3g": [{"devices": "all", "mig-enabled": True, "mig-devices": {"3g.40gb": 2}}]}
GPU_NODES = "nvidia.com/gpu.present=true"
DRAIN_ANNOTATION = "fairgpu.io/mig-drain-cordoned"
APPLY_TASK = "Apply the MIG layout through the MIG manager and wait for every node"


class States:
    """Every value of the state label each GPU node takes while it runs (a watch on the nodes)."""

    def __init__(self, core):
        self.core, self.seen, self.stop = core, {}, threading.Event()
        for node in core.list_node(label_selector=GPU_NODES).items:
            self.seen[node.metadata.name] = [node.metadata.labels.get(STATE)]
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        while not self.stop.is_set():
            for event in watch.Watch().stream(self.core.list_node, label_selector=GPU_NODES, timeout_seconds=2):
                node = event["object"]
                states = self.seen.setdefault(node.metadata.name, [])
                if states[-1:] != [node.metadata.labels.get(STATE)]:
                    states.append(node.metadata.labels.get(STATE))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        time.sleep(0.5)
        self.stop.set()
        self.thread.join(5)


def partition(selected, timeout=120, check=False, **settings):
    started = time.monotonic()
    run = playbook("../tests/integration/mig_config.yml", "-e", json.dumps(dict({
        "path": "mig", "mig_config_layouts": LAYOUTS, "mig_config_selected": selected,
        "mig_config_wait_timeout": timeout}, **settings)), check=check)
    return run, time.monotonic() - started


def applied(run):
    """The mig_layout task's result of a playbook run (the callback names an included role's task
    ``<role> : <name>``)."""
    return next(host for play in run.result["plays"] for task in play["tasks"]
                if task["task"]["name"].endswith(APPLY_TASK) for host in task["hosts"].values())


class Timeline:
    """Every change the GPU nodes (unschedulable, config label) and the test's pods (node, phase, conditions) go
    through while it runs, in arrival order: two watches into one list of ``(seconds, kind, name, state)``."""

    def __init__(self, core, namespace, selector):
        self.core, self.events, self.lock, self.stop = core, [], threading.Lock(), threading.Event()
        self.threads = [threading.Thread(target=self.run, args=args, daemon=True) for args in [
            ("node", core.list_node, {"label_selector": GPU_NODES}),
            ("pod", core.list_namespaced_pod, {"namespace": namespace, "label_selector": selector})]]
        for thread in self.threads:
            thread.start()

    def run(self, kind, lister, params):
        while not self.stop.is_set():
            for event in watch.Watch().stream(lister, timeout_seconds=2, **params):
                obj = event["object"]
                if kind == "node":
                    state = (bool(obj.spec.unschedulable), obj.metadata.labels.get(CONFIG))
                else:
                    state = (event["type"], obj.metadata.uid, obj.spec.node_name, obj.status.phase,
                             tuple(c.type for c in obj.status.conditions or [] if c.status == "True"))
                with self.lock:
                    self.events.append((time.monotonic(), kind, obj.metadata.name, state))

    def __enter__(self):
        time.sleep(0.5)
        return self

    def __exit__(self, *exc):
        time.sleep(1)
        self.stop.set()
        for thread in self.threads:
            thread.join(5)

    def nodes(self):
        return [(t, name, state) for t, kind, name, state in self.events if kind == "node"]

    def pods(self):
        return [(t, name, state) for t, kind, name, state in self.events if kind == "pod"]


def annotate(core, name, annotations):
    core.patch_node(name, {"metadata": {"annotations": annotations}})


@pytest.fixture(scope="module")
def gpu_nodes(core):
    names = sorted(n.metadata.name for n in core.list_node(label_selector=GPU_NODES).items)
    assert len(names) >= 2
    # Slow enough that the old state is still there when the role first reads the nodes.
    for name in names:
        annotate(core, name, {"fairgpu.io/simulated-mig-delay-seconds": "4"})
    yield names
    for name in names:
        annotate(core, name, {"fairgpu.io/simulated-mig-delay-seconds": None, "fairgpu.io/simulated-mig-reboot": None,
                              "fairgpu.io/simulated-mig-apply-fails": None})


def test_an_already_applied_layout_ends_the_wait_without_pending(core, gpu_nodes):
    node = core.read_node(gpu_nodes[0])
    assert node.metadata.labels[STATE] == "success" and node.status.allocatable["nvidia.com/mig-2g.20gb"] == "16"
    with States(core) as states:
        run, seconds = partition("copy-of-default", timeout=60)
    assert run.rc == 0, run.messages()
    assert seconds < 55
    for name in gpu_nodes:
        assert "pending" not in states.seen[name], states.seen
        assert core.read_node(name).metadata.labels[CONFIG] == "copy-of-default"


def long_job(name, namespace, node, selector):
    """A tenant's long Job pinned to ``node``, its pod holding one MIG device; an eviction is not one of its
    failures (podFailurePolicy ignores DisruptionTarget, as docs/mig.md tells tenants)."""
    key, value = selector.split("=")
    metadata = {"name": name, "namespace": namespace, "labels": {key: value}}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": metadata,
            "spec": {"backoffLimit": 0, "podFailurePolicy": {"rules": [
                {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}]},
                "template": {"metadata": {"labels": {key: value}, "annotations": {
                    # kwok v0.8.0 waits delay plus a random part of (jitter-delay - delay), and only jitter-delay
                    # when that is not more than delay (pkg/utils/lifecycle/lifecycle.go, Stage.Delay); the
                    # pod-complete stage's jitter-delay is 5 s when not given, which ends the pod after 5 s.
                    "pod-complete.stage.kwok.x-k8s.io/delay": "600s",
                    "pod-complete.stage.kwok.x-k8s.io/jitter-delay": "600s"}},
                    "spec": {"restartPolicy": "Never", "nodeSelector": {"kubernetes.io/hostname": node},
                             "containers": [{"name": "train", "image": "busybox", "resources": {
                                 "requests": {"nvidia.com/mig-2g.20gb": "1"},
                                 "limits": {"nvidia.com/mig-2g.20gb": "1"}}}]}}}}


def test_a_relabel_drains_one_node_at_a_time_and_the_others_keep_running(core, batch, gpu_nodes):
    namespace, selector = "default", "it-drain=%s" % uuid.uuid4().hex[:6]
    first, second = gpu_nodes[0], gpu_nodes[1]
    for index, name in enumerate(gpu_nodes):
        batch.create_namespaced_job(namespace, long_job("it-drain-%d-%s" % (index, selector[-6:]), namespace, name,
                                                        selector))
    try:
        def running():
            pods = core.list_namespaced_pod(namespace, label_selector=selector).items
            placed = dict((p.spec.node_name, p) for p in pods if p.status.phase == "Running")
            return placed if len(placed) == len(gpu_nodes) else None

        placed = wait_until(running, 60, what="one running pod per GPU node")
        keys = dict((name, "%s/%s" % (namespace, pod.metadata.name)) for name, pod in placed.items())

        check, _seconds = partition("fairgpu-2x2g.20gb", timeout=60, check=True)
        assert check.rc == 0, check.messages()
        assert applied(check)["drain"] == [{"node": name, "pods": [keys[name]]} for name in gpu_nodes]
        assert "would cordon and drain node %s" % first in json.dumps(applied(check)["warnings"])
        for name in gpu_nodes:
            node = core.read_node(name)
            assert node.metadata.labels[CONFIG] == "copy-of-default" and not node.spec.unschedulable
        assert running() and all(running()[n].metadata.uid == placed[n].metadata.uid for n in gpu_nodes)

        with Timeline(core, namespace, selector) as timeline:
            run, seconds = partition("fairgpu-2x2g.20gb", timeout=60, mig_config_drain_timeout=60)
        assert run.rc == 0, run.messages()
        assert seconds < 120
        assert [d["node"] for d in applied(run)["drained"]] == gpu_nodes
        assert [d["pods"] for d in applied(run)["drained"]] == [[keys[name]] for name in gpu_nodes]

        nodes = timeline.nodes()
        cordoned = set()
        for _t, name, (unschedulable, _config) in nodes:
            (cordoned.add if unschedulable else cordoned.discard)(name)
            assert len(cordoned) <= 1, nodes
        times = {}
        for name in gpu_nodes:
            mine = [(t, state) for t, node, state in nodes if node == name]
            cordon = next(t for t, (unschedulable, _c) in mine if unschedulable)
            relabel = next(t for t, (_u, config) in mine if config == "fairgpu-2x2g.20gb")
            uncordon = next(t for t, (unschedulable, _c) in mine if t > relabel and not unschedulable)
            assert cordon < relabel < uncordon, mine
            times[name] = (cordon, uncordon)

        pods = timeline.pods()
        uid = dict((name, placed[name].metadata.uid) for name in gpu_nodes)
        while_first_drains = [state for t, _n, state in pods if state[1] == uid[second]
                              and times[first][0] <= t <= times[first][1]]
        assert all(state[0] != "DELETED" and state[3] == "Running" and "DisruptionTarget" not in state[4]
                   for state in while_first_drains), pods
        for name in gpu_nodes:
            assert any(state[1] == uid[name] and "DisruptionTarget" in state[4] for _t, _n, state in pods), pods
            events = core.list_namespaced_event(namespace, field_selector="involvedObject.uid=%s" % uid[name]).items
            drained = [e for e in events if e.reason == "FairgpuMigDrain"]
            assert len(drained) == 1 and name in drained[0].message, [(e.reason, e.message) for e in events]
        for name in gpu_nodes:
            node = core.read_node(name)
            assert not node.spec.unschedulable and DRAIN_ANNOTATION not in (node.metadata.annotations or {}), name
    finally:
        batch.delete_collection_namespaced_job(namespace, label_selector=selector, propagation_policy="Background")
        wait_until(lambda: not core.list_namespaced_pod(namespace, label_selector=selector).items, 60,
                   what="the test's pods to go")


def test_the_stale_success_is_no_answer(core, gpu_nodes):
    annotate(core, gpu_nodes[1], {"fairgpu.io/simulated-mig-reboot": "true"})
    with States(core) as states:
        run, _seconds = partition("two-3g")
    assert run.rc == 0, run.messages()
    assert states.seen[gpu_nodes[0]] == ["success", "pending", "success"], states.seen
    assert states.seen[gpu_nodes[1]] == ["success", "pending", "rebooting", "success"], states.seen
    for name in gpu_nodes:
        node = core.read_node(name)
        assert node.status.allocatable.get("nvidia.com/mig-3g.40gb") == "16"
        assert "nvidia.com/mig-2g.20gb" not in node.status.allocatable
        assert node.metadata.labels["nvidia.com/mig-3g.40gb.count"] == "16"


def test_a_failed_apply_fails_the_play_and_keeps_the_layout(core, gpu_nodes):
    annotate(core, gpu_nodes[1], {"fairgpu.io/simulated-mig-reboot": None, "fairgpu.io/simulated-mig-apply-fails": "true"})
    with States(core) as states:
        run, seconds = partition("fairgpu-2x2g.20gb")
    assert run.rc != 0
    assert "node %s: the MIG manager could not apply 'fairgpu-2x2g.20gb'" % gpu_nodes[1] in run.messages()
    assert states.seen[gpu_nodes[1]] == ["success", "pending", "failed"], states.seen
    assert seconds < 100
    assert core.read_node(gpu_nodes[1]).status.allocatable.get("nvidia.com/mig-3g.40gb") == "16"
    assert core.read_node(gpu_nodes[0]).status.allocatable.get("nvidia.com/mig-2g.20gb") == "16"
    assert "node(s) %s were uncordoned" % gpu_nodes[1] in run.messages()
    for name in gpu_nodes:
        node = core.read_node(name)
        assert not node.spec.unschedulable and DRAIN_ANNOTATION not in (node.metadata.annotations or {}), name
