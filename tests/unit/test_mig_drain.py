"""plugins/module_utils/mig/drain.py, the drain's pure rules: which pods must leave a node (accelerator devices by
Kubernetes' pod request rule; not finished pods, not DaemonSet pods or static pods' mirrors, as kubectl drain),
which nodes are drained and in which batches, what check mode lists, what an interrupted run repairs, and the
messages: the Event on an evicted pod and the timeout naming each pod still holding devices."""

import pytest

from ansible_collections.fairgpu.tenancy.plugins.module_utils.mig import drain

CONFIG, STATE = "nvidia.com/mig.config", "nvidia.com/mig.config.state"
NEW = "fairgpu-2x2g.20gb"


def node(name, config=None, state=None, unschedulable=None, annotations=None):
    labels = dict((k, v) for k, v in [(CONFIG, config), (STATE, state)] if v is not None)
    obj = {"metadata": {"name": name, "labels": labels, "annotations": dict(annotations or {})}, "spec": {}}
    if unschedulable is not None:
        obj["spec"]["unschedulable"] = unschedulable
    return obj


def pod(name, on, requests=None, limits=None, phase="Running", owner=None, annotations=None, deleting=False,
        init=None):
    metadata = {"name": name, "namespace": "team-a", "uid": "u-" + name, "annotations": dict(annotations or {})}
    if owner:
        metadata["ownerReferences"] = [{"kind": owner, "name": "o", "controller": True}]
    if deleting:
        metadata["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    resources = {"requests": requests or {}, "limits": limits or {}}
    spec = {"nodeName": on, "containers": [{"name": "c", "resources": resources}]}
    if init:
        spec["initContainers"] = init
    return {"metadata": metadata, "spec": spec, "status": {"phase": phase}}


MIG = {"nvidia.com/mig-2g.20gb": "1"}


def test_the_pods_that_must_leave_hold_accelerator_devices_and_are_not_finished_nor_daemon_set_pods():
    pods = [pod("mig", "n0", MIG), pod("whole-by-limit", "n0", limits={"nvidia.com/gpu": "2"}),
            pod("shared", "n0", {"nvidia.com/gpu.shared": "1"}), pod("cpu", "n0", {"cpu": "1"}),
            pod("done", "n0", MIG, phase="Succeeded"), pod("failed", "n0", MIG, phase="Failed"),
            pod("plugin", "n0", MIG, owner="DaemonSet"), pod("job", "n0", MIG, owner="Job"),
            pod("mirror", "n0", MIG, annotations={"kubernetes.io/config.mirror": "x"}),
            pod("elsewhere", "n1", MIG), pod("pending", None, MIG, phase="Pending"),
            pod("terminating", "n0", MIG, deleting=True),
            pod("init-only", "n0", init=[{"name": "i", "resources": {"requests": MIG}}])]
    held = drain.holders(pods, ["n0"])
    assert [drain.pod_key(p) for p in held] == [
        "team-a/init-only", "team-a/job", "team-a/mig", "team-a/shared", "team-a/terminating", "team-a/whole-by-limit"]
    assert [drain.pod_key(p) for p in drain.evictable(held)] == [
        "team-a/init-only", "team-a/job", "team-a/mig", "team-a/shared", "team-a/whole-by-limit"]
    assert drain.devices(held[-1]) == {"nvidia.com/gpu": 2}


def test_only_the_nodes_whose_label_changes_are_drained_in_name_order_and_batches():
    nodes = [node("n3"), node("n1", NEW), node("n0", "other"), node("n2"), node("n4")]
    assert drain.to_change(nodes, NEW) == ["n0", "n2", "n3", "n4"]
    assert drain.batches(nodes, NEW, 1) == [["n0"], ["n2"], ["n3"], ["n4"]]
    assert drain.batches(nodes, NEW, 3) == [["n0", "n2", "n3"], ["n4"]]
    assert drain.batches([node("n1", NEW)], NEW, 2) == []


def test_the_plan_lists_each_node_to_change_with_its_pods_and_check_mode_shows_it():
    nodes = [node("n1"), node("n0"), node("n2", NEW)]
    pods = [pod("b", "n0", MIG), pod("a", "n0", MIG), pod("c", "n2", MIG)]
    plan = drain.plan(nodes, pods, NEW)
    assert plan == [{"node": "n0", "pods": ["team-a/a", "team-a/b"]}, {"node": "n1", "pods": []}]
    assert drain.plan_lines(plan) == [
        "check mode: would cordon and drain node n0 before relabelling it (evicting team-a/a, team-a/b)",
        "check mode: would cordon and drain node n1 before relabelling it (no pod holds its GPUs)"]


def test_the_cordon_is_recorded_and_undone_by_a_merge_patch():
    assert drain.cordon_patch(NEW) == {"spec": {"unschedulable": True},
                                       "metadata": {"annotations": {"fairgpu.io/mig-drain-cordoned": NEW}}}
    assert drain.uncordon_patch() == {"spec": {"unschedulable": None},
                                      "metadata": {"annotations": {"fairgpu.io/mig-drain-cordoned": None}}}
    ours = node("n0", unschedulable=True, annotations={"fairgpu.io/mig-drain-cordoned": NEW})
    theirs = node("n1", unschedulable=True)
    assert drain.cordoned_by_fairgpu(ours) and not drain.cordoned_by_fairgpu(theirs)
    assert drain.unschedulable(theirs) and not drain.unschedulable(node("n2"))


def test_an_interrupted_run_is_repaired_only_where_the_label_and_the_manager_are_done():
    mark = {"fairgpu.io/mig-drain-cordoned": NEW}
    nodes = [node("done", NEW, "success", True, mark), node("pending", NEW, "pending", True, mark),
             node("unlabelled", "old", "success", True, mark), node("theirs", NEW, "success", True),
             node("failed", NEW, "failed", True, mark)]
    assert drain.repairs(nodes, NEW) == ["done"]


def test_the_eviction_and_the_event_name_the_pod_the_node_and_the_config():
    evicted = pod("train", "n0", MIG)
    assert drain.eviction(evicted) == {"apiVersion": "policy/v1", "kind": "Eviction",
                                       "metadata": {"name": "train", "namespace": "team-a"}}
    event = drain.event(evicted, "n0", NEW, 1.7e9 + 0.5)
    assert event["metadata"] == {"name": "train.%x" % int((1.7e9 + 0.5) * 1e9), "namespace": "team-a"}
    assert event["involvedObject"] == {"apiVersion": "v1", "kind": "Pod", "name": "train", "namespace": "team-a",
                                       "uid": "u-train"}
    assert event["reason"] == "FairgpuMigDrain" and event["source"] == {"component": "fairgpu"}
    assert event["message"] == "evicted from node n0: fairgpu re-partitions its GPUs with MIG config %r" % NEW
    assert event["firstTimestamp"] == "2023-11-14T22:13:20Z"


def test_the_timeout_names_each_pod_its_devices_phase_and_why_it_is_still_there():
    pods = [pod("stuck", "n0", MIG, deleting=True), pod("guarded", "n1", {"nvidia.com/gpu": "1"}),
            pod("starting", "n1", MIG, phase="Pending")]
    message = drain.timeout_message(pods, ["n0", "n1"], NEW, 600, {"team-a/guarded": "Cannot evict pod"})
    assert message == (
        "the drain of node(s) n0, n1 for MIG config 'fairgpu-2x2g.20gb' did not finish within 600 s "
        "(mig_config_drain_timeout): 3 pod(s) still hold devices on them:\n"
        "team-a/stuck on node n0: nvidia.com/mig-2g.20gb=1, phase Running, terminating\n"
        "team-a/guarded on node n1: nvidia.com/gpu=1, phase Running; eviction refused: Cannot evict pod\n"
        "team-a/starting on node n1: nvidia.com/mig-2g.20gb=1, phase Pending")


@pytest.mark.parametrize("size", [1, 2, 5])
def test_every_node_to_change_is_in_exactly_one_batch(size):
    nodes = [node("n%d" % i, NEW if i % 3 == 0 else None) for i in range(7)]
    flat = [name for batch in drain.batches(nodes, NEW, size) for name in batch]
    assert flat == drain.to_change(nodes, NEW) and all(len(b) <= size for b in drain.batches(nodes, NEW, size))
