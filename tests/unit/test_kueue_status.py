import pytest

from ansible_collections.fairgpu.tenancy.plugins.module_utils.kueue.status import (
    pod_requests,
    admission_info,
    condition_met,
    conditions as workload_conditions,
    evicted,
    preempted,
    requested,
    sample,
    wait_for_errors,
    workload_state,
)


def cluster_queue(name, nominal=8, reserved=0, borrowed=0, pending=0, admitted=0, share=0):
    return {
        "metadata": {"name": name},
        "spec": {"cohortName": "fairgpu", "fairSharing": {"weight": "1"}, "resourceGroups": [{"flavors": [{
            "name": "h100", "resources": [{"name": "cpu", "nominalQuota": "96"},
                                          {"name": "nvidia.com/gpu", "nominalQuota": str(nominal), "borrowingLimit": "8"}]}]}]},
        "status": {"flavorsReservation": [{"name": "h100", "resources": [
            {"name": "nvidia.com/gpu", "total": str(reserved), "borrowed": str(borrowed)}]}],
            "flavorsUsage": [{"name": "h100", "resources": [{"name": "nvidia.com/gpu", "total": str(reserved)}]}],
            "pendingWorkloads": pending, "admittedWorkloads": admitted, "reservingWorkloads": admitted,
            "fairSharing": {"weightedShare": share},
            "conditions": [{"type": "Active", "status": "True"}]},
    }


def workload(name, ns, queue, gpus=1, count=1, conditions=(), job=None, admitted_to=None, created="2026-01-01T00:00:00Z"):
    w = {"metadata": {"name": name, "namespace": ns, "creationTimestamp": created,
                      "ownerReferences": [{"kind": "Job", "name": job or name}]},
         "spec": {"queueName": queue, "podSets": [{"name": "main", "count": count, "template": {"spec": {"containers": [
             {"name": "c", "resources": {"requests": {"nvidia.com/gpu": str(gpus), "cpu": "2"}}}]}}}]},
         "status": {"conditions": [dict(type=t, status=s, reason=r, message="m", lastTransitionTime="t") for t, s, r in conditions]}}
    if admitted_to:
        w["status"]["admission"] = {"clusterQueue": admitted_to}
    return w


LQS = [{"metadata": {"namespace": "team-a", "name": "team-a-queue"}, "spec": {"clusterQueue": "team-a"}},
       {"metadata": {"namespace": "team-b", "name": "team-b-queue"}, "spec": {"clusterQueue": "team-b"}}]


def test_queue_and_workload_summaries():
    info = admission_info(
        [cluster_queue("team-a", reserved=16, borrowed=8, pending=4, admitted=16, share=500), cluster_queue("team-b")],
        LQS,
        [workload("w1", "team-a", "team-a-queue",
                  conditions=[("QuotaReserved", "True", "QuotaReserved"), ("Admitted", "True", "Admitted")],
                  admitted_to="team-a"),
         workload("w2", "team-a", "team-a-queue", gpus=2, count=3, conditions=[("QuotaReserved", "False", "Pending")])],
    )
    a = info["queues"]["team-a"]
    assert (a["nominal"], a["borrowing_limit"], a["lending_limit"]) == (8, 8, None)
    assert (a["reserved"], a["in_use"], a["borrowed"], a["weighted_share"]) == (16, 16, 8, 500)
    assert (a["pending_workloads"], a["admitted_workloads"], a["active"]) == (4, 16, True)
    w1, w2 = info["workloads"]
    assert (w1["state"], w1["cluster_queue"], w1["job"]) == ("admitted", "team-a", "w1")
    assert (w2["state"], w2["gpus"], w2["cluster_queue"]) == ("pending", 6, "team-a")
    assert w2["conditions"]["QuotaReserved"]["reason"] == "Pending"


def test_queue_filter_drops_other_workloads():
    info = admission_info([cluster_queue("team-a"), cluster_queue("team-b")], LQS,
                          [workload("w", "team-b", "team-b-queue")], queue_names={"team-a"})
    assert list(info["queues"]) == ["team-a"] and info["workloads"] == []


@pytest.mark.parametrize("conditions, state", [
    ([("Finished", "True", "Succeeded"), ("Admitted", "True", "")], "finished"),
    ([("Admitted", "True", "")], "admitted"),
    ([("QuotaReserved", "True", "")], "reserved"),
    ([("Evicted", "True", "Preempted")], "evicted"),
    ([], "pending"),
])
def test_states(conditions, state):
    conds = {t: {"status": s, "reason": r} for t, s, r in conditions}
    assert workload_state(conds) == state


# The condition sets Kueue v0.19.2 writes (pkg/workload/workload.go): a preemption sets Preempted and Evicted True;
# a new quota reservation turns both False with reason QuotaReserved; PodsReadyTimeout evicts without preempting.
PREEMPTED_NOW = [("QuotaReserved", "False", "Pending"), ("Evicted", "True", "Preempted"),
                 ("Preempted", "True", "InCohortReclamation")]
READMITTED = [("QuotaReserved", "True", "QuotaReserved"), ("Evicted", "False", "QuotaReserved"),
              ("Preempted", "False", "QuotaReserved")]
TIMED_OUT = [("QuotaReserved", "False", "Pending"), ("Evicted", "True", "PodsReadyTimeout")]


@pytest.mark.parametrize("conditions, is_preempted, is_evicted", [
    (PREEMPTED_NOW, True, True),
    ([("Preempted", "True", "reason")], True, True),
    (READMITTED, False, False),
    (TIMED_OUT, False, True),
    ([("QuotaReserved", "True", "QuotaReserved"), ("Admitted", "True", "Admitted")], False, False),
    ([], False, False),
])
def test_preempted_and_evicted(conditions, is_preempted, is_evicted):
    for reason in ("InClusterQueue", "InCohortReclamation", "InCohortFairSharing", "InCohortReclaimWhileBorrowing"):
        workload = {"status": {"conditions": [{"type": t, "status": s, "reason": reason if r == "reason" else r}
                                              for t, s, r in conditions]}}
        conds = workload_conditions(workload)
        assert (preempted(conds), evicted(conds)) == (is_preempted, is_evicted), (conditions, reason)


def test_limits_count_when_no_request():
    w = {"spec": {"podSets": [{"count": 2, "template": {"spec": {"containers": [
        {"resources": {"limits": {"nvidia.com/gpu": "1"}}}, {"resources": {}}]}}}]}}
    assert requested(w, "nvidia.com/gpu") == 2


def test_wait_conditions():
    info = admission_info([cluster_queue("team-b", reserved=8, pending=1, admitted=8)], LQS,
                          [workload("w", "team-b", "team-b-queue", conditions=[("Finished", "True", "")])])
    assert condition_met(info, {"queue": "team-b", "reserved_at_least": 8})
    assert not condition_met(info, {"queue": "team-b", "reserved_at_least": 9})
    assert condition_met(info, {"queue": "team-b", "pending_at_least": 1})
    assert condition_met(info, {"all_finished": True, "workloads_at_least": 1})
    assert not condition_met(info, {"all_finished": True, "workloads_at_least": 2})
    assert not condition_met(info, {"queue": "nope", "admitted_at_least": 0})
    point = sample(info, 1.5, 100.0)
    assert point["queues"]["team-b"] == {"reserved": 8, "borrowed": 0, "workloads_reserved": 0, "pending": 1,
                                         "admitted": 8, "running": 0, "terminating": 0, "started": 0}


def test_workloads_reserved_adds_up_the_workloads_that_hold_quota_beside_the_queues_own_count():
    """The ClusterQueue says 8 reserved; its listed Workloads holding quota (admitted, or only quota reserved) ask
    for 2 + 3: the finished, pending and evicted ones hold none. A restart that lost or double-counted a Workload
    shows as the two numbers apart (the kueue_restart scenario's check)."""
    admitted = [("QuotaReserved", "True", "QuotaReserved"), ("Admitted", "True", "Admitted")]
    found = [workload("w1", "team-b", "team-b-queue", gpus=2, conditions=admitted, admitted_to="team-b"),
             workload("w2", "team-b", "team-b-queue", gpus=3, conditions=admitted[:1], admitted_to="team-b"),
             workload("w3", "team-b", "team-b-queue", gpus=4, conditions=admitted + [("Finished", "True", "")]),
             workload("w4", "team-b", "team-b-queue", gpus=5),
             workload("w5", "team-b", "team-b-queue", gpus=6, conditions=[("Evicted", "True", "Preempted")]),
             workload("w6", "team-a", "team-a-queue", gpus=7, conditions=admitted, admitted_to="team-a")]
    info = admission_info([cluster_queue("team-b", reserved=8), cluster_queue("team-a", reserved=7)], LQS, found)
    assert info["queues"]["team-b"]["workloads_reserved"] == 5 and info["queues"]["team-a"]["workloads_reserved"] == 7
    assert sample(info, 0, 0)["queues"]["team-b"]["workloads_reserved"] == 5


def test_admitted_counts_finished_workloads_so_a_wait_cannot_miss_short_jobs():
    # A ClusterQueue's status.admittedWorkloads drops as Jobs finish (a CI run's 10 s MIG Jobs were done before the
    # second tenant's wait read it); a Kueue-managed Job runs only once admitted, so finished ones count.
    workloads = [workload("w%d" % i, "team-b", "team-b-queue", conditions=[("Finished", "True", "")]) for i in range(3)]
    workloads.append(workload("w3", "team-b", "team-b-queue", conditions=[("Admitted", "True", "")]))
    workloads.append(workload("w4", "team-b", "team-b-queue"))
    info = admission_info([cluster_queue("team-b", reserved=1, pending=1, admitted=1)], LQS, workloads)
    queue = info["queues"]["team-b"]
    assert (queue["admitted_workloads"], queue["admitted_or_finished_workloads"]) == (1, 4)
    assert condition_met(info, {"queue": "team-b", "admitted_at_least": 4})
    assert not condition_met(info, {"queue": "team-b", "admitted_at_least": 5})
    # Without listed workloads the ClusterQueue's own count is all there is.
    bare = admission_info([cluster_queue("team-b", admitted=2)], LQS, [])
    assert bare["queues"]["team-b"]["admitted_or_finished_workloads"] == 2


def test_several_counts_must_hold_on_one_read():
    # "its guarantee admitted while its extra Jobs wait" is one observation, not two reads apart.
    info = admission_info([cluster_queue("team-b", reserved=2, pending=2, admitted=2)], LQS, [])
    assert condition_met(info, {"queue": "team-b", "admitted_at_least": 2, "pending_at_least": 2})
    assert not condition_met(info, {"queue": "team-b", "admitted_at_least": 2, "pending_at_least": 3})
    assert not condition_met(info, {"queue": "team-b", "admitted_at_least": 3, "pending_at_least": 2})
    assert wait_for_errors({"queue": "team-b", "admitted_at_least": 2, "pending_at_least": 2}) == []


def pod(namespace, phase="Running", gpus=1, deleting=False, init=(), overhead=None, containers=1):
    spec = {"containers": [{"name": "c%d" % i, "resources": {"requests": {"nvidia.com/gpu": str(gpus)}}}
                           for i in range(containers)]}
    if init:
        spec["initContainers"] = [dict({"name": "i%d" % i, "resources": {"requests": {"nvidia.com/gpu": str(n)}}},
                                       **({"restartPolicy": "Always"} if sidecar else {}))
                                  for i, (n, sidecar) in enumerate(init)]
    if overhead:
        spec["overhead"] = {"nvidia.com/gpu": str(overhead)}
    metadata = {"name": "p", "namespace": namespace}
    if deleting:
        metadata["deletionTimestamp"] = "2026-11-30T20:00:00Z"
    return {"metadata": metadata, "spec": spec, "status": {"phase": phase}}


@pytest.mark.parametrize("kwargs, devices", [
    ({}, 1),
    ({"containers": 2, "gpus": 2}, 4),
    # An init container runs before the others: the pod needs the larger of it and the regular containers.
    ({"gpus": 1, "init": [(3, False)]}, 3),
    # A sidecar (restartPolicy Always) runs along: it adds to the containers and to every later init container.
    ({"gpus": 1, "init": [(1, True), (3, False)]}, 4),
    # A sidecar declared after an init container does not run beside it.
    ({"gpus": 1, "init": [(3, False), (1, True)]}, 3),
    ({"gpus": 1, "overhead": 1}, 2),
])
def test_pod_requests_follow_kubernetes_rule(kwargs, devices):
    # k8s.io/component-helpers/resource PodRequests: max(containers + sidecars, each init + sidecars before it)
    # + overhead.
    assert pod_requests(pod("team-a", **kwargs)["spec"], "nvidia.com/gpu") == devices


def test_pods_count_for_their_namespace_tenant_whether_kueue_admitted_them_or_not():
    pods = [pod("team-a", gpus=2), pod("team-a", deleting=True), pod("team-a", phase="Pending"),
            pod("team-a", phase="Succeeded"), pod("team-b"), pod("elsewhere", gpus=8)]
    info = admission_info([cluster_queue("team-a", reserved=0), cluster_queue("team-b", reserved=1)],
                          [{"metadata": {"namespace": "team-a", "name": "default"}, "spec": {"clusterQueue": "team-a"}},
                           {"metadata": {"namespace": "team-b", "name": "default"}, "spec": {"clusterQueue": "team-b"}}],
                          [], pods=pods)
    assert (info["queues"]["team-a"]["pods_running"], info["queues"]["team-a"]["pods_terminating"]) == (2, 1)
    assert info["queues"]["team-b"]["pods_running"] == 1
    assert condition_met(info, {"queue": "team-b", "running_at_least": 1})
    assert not condition_met(info, {"queue": "team-b", "running_at_least": 2})
    # A Succeeded pod had its devices: it counts as started, not as running (a 30 s Job can be done before the
    # tenant's last pod starts; a CI run saw 7 of 8 at once).
    assert info["queues"]["team-a"]["pods_succeeded"] == 1
    assert condition_met(info, {"queue": "team-a", "started_at_least": 3})
    assert not condition_met(info, {"queue": "team-a", "started_at_least": 4})
    assert not condition_met(info, {"queue": "team-a", "running_at_least": 3})
    assert sample(info, 0, 0)["queues"]["team-a"]["started"] == 3


@pytest.mark.parametrize("wait_for, message", [
    ({}, "give a mapping"),
    ({"queue": "a"}, "give one or more of"),
    ({"queue": "a", "admitted_at_least": 2, "pending_at_least": "x"}, "wait_for.pending_at_least: must be"),
    ({"reserved_at_least": 1}, "wait_for.queue"),
    ({"queue": "a", "reserved_at_least": -1}, "must be an integer >= 0"),
    ({"queue": "a", "reserved_at_least": 1, "colour": 1}, "wait_for.colour: unknown key"),
    ({"all_finished": True, "queue": "a"}, "not allowed with all_finished"),
])
def test_bad_wait_for(wait_for, message):
    assert any(message in e for e in wait_for_errors(wait_for))
