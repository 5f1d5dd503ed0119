"""Every pod on the nodes that holds accelerator devices is attributed to an admitted Workload or named as outside
Kueue (kueue/attribution.py), and the validation's judge of a timeline of those reads (scenarios.gpu_pods_check).

Pods and Workloads are shaped as the API returns them: a Job's pod has the Job as controller owner (kubernetes
pkg/controller/job, metav1.NewControllerRef), Kueue's Workload has the Job as controller owner and its admission's
podSetAssignments with resourceUsage (Kueue v0.19.2, v1beta2)."""

from ansible_collections.fairgpu.tenancy.plugins.module_utils.kueue import attribution
from ansible_collections.fairgpu.tenancy.plugins.module_utils.kueue.status import sample
from ansible_collections.fairgpu.tenancy.plugins.module_utils.replay.fairness import _time
from ansible_collections.fairgpu.tenancy.plugins.module_utils.validation.scenarios import gpu_pods_check

NOW = _time("2026-12-01T10:38:20Z")
TENANTS = ["team-a", "team-b"]


def job_owner(name, uid):
    return {"apiVersion": "batch/v1", "kind": "Job", "name": name, "uid": uid, "controller": True,
            "blockOwnerDeletion": True}


def pod(name, namespace="team-a", owner=None, gpus=1, resource="nvidia.com/gpu", node="fairgpu-gpu-0",
        phase="Running", created="2026-12-01T10:30:00Z", deletion=None, finalizers=None):
    metadata = {"name": name, "namespace": namespace, "uid": "uid-" + name, "creationTimestamp": created,
                "labels": {"job-name": owner[0]} if owner else {}}
    if owner:
        metadata["ownerReferences"] = [job_owner(*owner)]
    if deletion:
        metadata["deletionTimestamp"] = deletion
        metadata["deletionGracePeriodSeconds"] = 30
    if finalizers:
        metadata["finalizers"] = finalizers
    spec = {"containers": [{"name": "load", "image": "pytorch/pytorch",
                            "resources": {"requests": {"cpu": "1", resource: str(gpus)},
                                          "limits": {resource: str(gpus)}}}],
            "restartPolicy": "Never", "terminationGracePeriodSeconds": 30}
    if node:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec, "status": {"phase": phase}}


def workload(job, uid, namespace="team-a", state="admitted", gpus=1, resource="nvidia.com/gpu"):
    true = {"status": "True", "reason": "Admitted", "lastTransitionTime": "2026-12-01T10:29:59Z"}
    conds = [dict(true, type="QuotaReserved", reason="QuotaReserved")]
    status = {"conditions": conds}
    if state in ("admitted", "finished"):
        conds.append(dict(true, type="Admitted"))
        status["admission"] = {"clusterQueue": namespace, "podSetAssignments": [{
            "name": "main", "flavors": {resource: "nvidia-h100-80gb-hbm3"}, "count": 1,
            "resourceUsage": {"cpu": "1", resource: str(gpus)}}]}
    if state == "finished":
        conds.append(dict(true, type="Finished", reason="Succeeded"))
    if state == "evicted":
        conds[0] = dict(conds[0], status="False", reason="Pending")
        conds.append(dict(true, type="Evicted", reason="Preempted"))
        conds.append(dict(true, type="Preempted", reason="InCohortReclamation"))
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
            "metadata": {"name": "job-%s-3f2a1" % job, "namespace": namespace, "ownerReferences": [job_owner(job, uid)]},
            "spec": {"queueName": namespace + "-queue"}, "status": status}


def outside(pods, workloads, now=NOW):
    return attribution.outside_kueue(pods, workloads, TENANTS, now)


def timeline(*reads):
    """Samples ``(ts, outside_kueue list)`` as kueue_status.sample writes them."""
    info = {"queues": {}}
    return [sample(dict(info, outside_kueue=listed), ts - NOW, ts) for ts, listed in reads]


def test_a_normal_admitted_jobs_pods_are_not_named():
    pods = [pod("load-0-abc", owner=("load-0", "j0")), pod("load-1-abc", owner=("load-1", "j1"), gpus=2)]
    assert outside(pods, [workload("load-0", "j0"), workload("load-1", "j1", gpus=2)]) == []


def test_orphans_are_named_with_node_devices_and_why_and_fail_after_the_grace():
    # kubectl delete job --cascade=orphan: the garbage collector removes the pods' owner reference, Kueue's
    # Workload goes with the Job and its quota is released, the pods keep running.
    pods = [pod("load-%d-abc" % i) for i in range(16)]
    listed = outside(pods, [])
    assert len(listed) == 16
    assert listed[0] == {"namespace": "team-a", "pod": "load-0-abc", "uid": "uid-load-0-abc", "node": "fairgpu-gpu-0",
                         "devices": {"nvidia.com/gpu": 1}, "tenant": True, "why": "no owner", "since": None}
    within = gpu_pods_check(timeline((NOW, listed), (NOW + 5, listed), (NOW + 9.5, listed)), 10, "isolation")
    assert within["passed"] and within["observed"] == "none (3 samples)"
    check = gpu_pods_check(timeline((NOW, listed), (NOW + 5, listed), (NOW + 11, listed)), 10, "isolation")
    assert not check["passed"]
    assert check["check"] == "every GPU pod on the nodes belongs to an admitted Workload (isolation)"
    assert check["expected"] == "none outside Kueue longer than 10 s"
    assert "team-a/load-0-abc on fairgpu-gpu-0 (1 nvidia.com/gpu): no owner, for 11.0 s (t=11.0 s)" in check["observed"]
    assert check["observed"].count("no owner") == 16


def test_a_pod_gone_before_the_grace_ends_its_run():
    orphan = outside([pod("late-0")], [])
    reads = timeline((NOW, orphan), (NOW + 8, orphan), (NOW + 9, []), (NOW + 12, orphan), (NOW + 20, orphan))
    assert gpu_pods_check(reads, 10, "flood")["passed"]


def test_a_pod_terminating_past_its_grace_period_kept_by_a_finalizer_is_named_from_its_deadline():
    # Its Job's Workload is still admitted (the Job controller replaced the pod): Kueue counts one pod, the
    # scheduler two, until the finalizer is removed.
    stuck = pod("load-0-old", owner=("load-0", "j0"), created="2026-12-01T10:20:00Z",
                deletion="2026-12-01T10:38:00Z", finalizers=["example.com/keep"])
    replacement = pod("load-0-new", owner=("load-0", "j0"))
    listed = outside([stuck, replacement], [workload("load-0", "j0")])
    assert [(o["pod"], o["since"]) for o in listed] == [("load-0-old", NOW - 20)]
    assert listed[0]["why"] == ("Terminating past its grace period (deletion deadline 2026-12-01T10:38:00Z, "
                                "finalizers: example.com/keep); Workload job-load-0-3f2a1 of Job load-0 accounts for "
                                "1 nvidia.com/gpu; its other pods hold those")
    # Counted from the deadline, not from the first read: 20 s past it at the first read already.
    check = gpu_pods_check(timeline((NOW, listed)), 10, "isolation")
    assert not check["passed"] and "load-0-old on fairgpu-gpu-0 (1 nvidia.com/gpu): Terminating past" in check["observed"]
    assert "for 20.0 s" in check["observed"]


def test_a_preempted_pod_within_its_termination_grace_is_listed_but_not_blamed():
    # Kueue evicted the Workload and released its quota once the Job had no active pods; the pod being deleted
    # keeps its GPU until its deadline, 25 s from now.
    leaving = pod("load-3-abc", owner=("load-3", "j3"), deletion="2026-12-01T10:38:45Z")
    listed = outside([leaving], [workload("load-3", "j3", state="evicted")])
    assert [(o["pod"], o["since"]) for o in listed] == [("load-3-abc", NOW + 25)]
    assert listed[0]["why"] == ("being deleted, within its grace period until 2026-12-01T10:38:45Z; "
                                "Workload job-load-3-3f2a1 of Job load-3 is evicted, not admitted")
    reads = timeline(*[(NOW + s, outside([leaving], [workload("load-3", "j3", state="evicted")], NOW + s))
                       for s in (0, 10, 20, 30)])
    assert gpu_pods_check(reads, 10, "flood")["passed"]
    # Still there 11 s past its deadline: named.
    late = NOW + 36
    reads.append(timeline((late, outside([leaving], [], late)))[0])
    assert not gpu_pods_check(reads, 10, "flood")["passed"]


def test_gpu_pods_of_a_namespace_that_is_no_tenants_are_named():
    listed = outside([pod("stray", namespace="default", gpus=2)], [])
    assert listed[0]["tenant"] is False
    assert listed[0]["why"] == "namespace default is no tenant's; no owner"
    assert listed[0]["devices"] == {"nvidia.com/gpu": 2}


def test_a_job_just_finished_whose_pods_are_still_listed_within_the_grace_is_not_named():
    # Kueue marks the Workload Finished when the Job finishes; a read can still see its pod before the kubelet's
    # (here kwok's) status update or the pod's deletion reaches the API.
    finishing = pod("load-5-abc", owner=("load-5", "j5"))
    listed = outside([finishing], [workload("load-5", "j5", state="finished")])
    assert listed[0]["why"] == "Workload job-load-5-3f2a1 of Job load-5 is finished, not admitted"
    done = dict(finishing, status={"phase": "Succeeded"})
    reads = timeline((NOW, listed), (NOW + 3, listed), (NOW + 4, outside([done], [workload("load-5", "j5", state="finished")])))
    assert reads[-1]["outside_kueue"] == []
    assert gpu_pods_check(reads, 10, "flood")["passed"]


def test_a_deleted_jobs_pods_before_the_garbage_collector_marks_them_are_within_the_grace():
    # propagationPolicy Background: the Job and its Workload are gone, the pods keep their owner reference a moment.
    listed = outside([pod("load-6-abc", owner=("load-6", "j6"))], [])
    assert listed[0]["why"] == "its Job load-6 has no Workload"
    assert gpu_pods_check(timeline((NOW, listed), (NOW + 5.3, listed)), 10, "flood")["passed"]


def test_a_pod_that_forges_an_admitted_jobs_owner_is_the_one_left_over():
    # The Job's Workload was admitted with 0 GPUs (a CPU Job); a pod created later claims it as controller.
    real = pod("it-owner-abc", owner=("it-owner", "j9"), gpus=0)
    forged = pod("it-outside", owner=("it-owner", "j9"), gpus=2, created="2026-12-01T10:31:00Z")
    listed = outside([real, forged], [workload("it-owner", "j9", gpus=0)])
    assert [o["pod"] for o in listed] == ["it-outside"]
    assert listed[0]["why"] == ("Workload job-it-owner-3f2a1 of Job it-owner accounts for 0 nvidia.com/gpu; "
                                "its other pods hold those")
    # Two pods of one 1-GPU Workload: the one created first is accounted, the later one is named.
    first = pod("load-7-a", owner=("load-7", "j7"), created="2026-12-01T10:30:00Z")
    second = pod("load-7-b", owner=("load-7", "j7"), created="2026-12-01T10:30:05Z")
    assert [o["pod"] for o in outside([second, first], [workload("load-7", "j7")])] == ["load-7-b"]


def test_other_owners_and_jobs_kueue_does_not_manage():
    replica = pod("web-1", namespace="serving")
    replica["metadata"]["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-5d4f",
                                               "uid": "rs1", "controller": True}]
    listed = outside([replica, pod("batch-0", namespace="ml", owner=("batch", "j8"))], [])
    assert [o["why"] for o in listed] == ["namespace ml is no tenant's; its Job batch has no Workload",
                                          "namespace serving is no tenant's; its controller is ReplicaSet web-5d4f, not a Job"]


def test_what_holds_devices_is_the_schedulers_view():
    pods = [
        pod("bound-pending", phase="Pending"),  # bound, not started yet (image pull): the scheduler counts it
        pod("unbound", node=None, phase="Pending"),  # not on a node
        pod("done", phase="Succeeded"),
        pod("failed", phase="Failed"),
        pod("cpu-only", gpus=0),
        pod("mig", resource="nvidia.com/mig-2g.20gb"),
        pod("shared", resource="nvidia.com/gpu.shared", gpus=2),
    ]
    listed = {o["pod"]: o["devices"] for o in outside(pods, [])}
    assert listed == {"bound-pending": {"nvidia.com/gpu": 1}, "mig": {"nvidia.com/mig-2g.20gb": 1},
                      "shared": {"nvidia.com/gpu.shared": 2}}


def test_devices_follow_the_pod_request_rule():
    spec = pod("x")["spec"]
    spec["initContainers"] = [{"name": "warm", "resources": {"limits": {"nvidia.com/gpu": "3"}}},
                              {"name": "side", "restartPolicy": "Always", "resources": {"requests": {"nvidia.com/gpu": "1"}}}]
    assert attribution.accelerators(spec) == {"nvidia.com/gpu": 3}  # the init container alone needs 3; 1 + 1 after
    assert attribution.accelerators({"containers": [{"name": "c", "resources": {"requests": {"cpu": "2"}}}]}) == {}


def test_the_judge_needs_reads_with_the_list():
    check = gpu_pods_check([{"t": 0, "ts": NOW, "queues": {}}], 10, "flood")
    assert not check["passed"] and check["observed"] == "never read"
    assert gpu_pods_check(timeline((NOW, [])), 10, "flood")["observed"] == "none (1 samples)"


class _Client(object):
    """The dynamic client's ``resource`` and ``get`` as ``attribution.read`` calls them, recording each list."""

    class _List(object):
        def __init__(self, items):
            self.items = items

        def to_dict(self):
            return {"items": self.items}

    def __init__(self, pods, workloads):
        self.pods, self.workloads, self.calls = pods, workloads, []

    def resource(self, kind, api_version):
        return (kind, api_version)

    def get(self, resource, namespace=None, field_selector=None):
        self.calls.append((resource[0], namespace, field_selector))
        if resource[0] == "Pod":
            return self._List(self.pods)
        return self._List([w for w in self.workloads if w["metadata"]["namespace"] == namespace])


def test_read_lists_pods_once_cluster_wide_and_workloads_only_where_not_given():
    client = _Client([pod("a"), pod("b", namespace="default"), pod("cpu", gpus=0)],
                     [workload("x", "jx", namespace="default")])
    pods, workloads = attribution.read(client, {"team-a": [workload("load-0", "j0")]})
    assert client.calls == [("Pod", None, "spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed"),
                            ("Workload", "default", None)]
    assert [p["metadata"]["name"] for p in pods] == ["a", "b"]
    assert sorted(w["metadata"]["name"] for w in workloads) == ["job-load-0-3f2a1", "job-x-3f2a1"]
