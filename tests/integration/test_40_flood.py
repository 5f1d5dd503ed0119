"""The task's A/B test against the real Kueue: team-a floods the cluster, team-b arrives and gets its
guarantee back by visible preemption; team-a's excess waits suspended without pods; nothing is lost."""

import time

from conftest import cluster_queue, condition, delete_jobs, load_job, reserved_gpus, wait_until, workloads

FLOOD = 20  # one-GPU Jobs, more than the cluster's 16 GPUs
ARRIVE = 8  # team-b's guarantee
SECONDS = 30


def test_flood_then_guarantee(core, batch, kueue):
    label = {"it-flood": "1"}
    for i in range(FLOOD):
        batch.create_namespaced_job("team-a", load_job("flood-a-%d" % i, "team-a", queue="team-a-queue",
                                                       seconds=SECONDS, labels=label))
    try:
        # team-a borrows every idle GPU: its 8 plus team-b's 8 (borrowingLimit 8); 4 Jobs wait.
        def borrowing():
            queue = cluster_queue(kueue, "team-a")
            return queue if reserved_gpus(queue) == 16 and queue["status"].get("pendingWorkloads") == 4 else None

        cq = wait_until(borrowing, 60, what="team-a to hold 16 GPUs")
        borrowed = sum(int(r.get("borrowed", 0)) for f in cq["status"]["flavorsReservation"] for r in f["resources"]
                       if r["name"] == "nvidia.com/gpu")
        assert borrowed == 8
        pending = [w for w in workloads(kueue, "team-a") if not condition(w, "QuotaReserved")
                   or condition(w, "QuotaReserved")["status"] != "True"]
        assert len(pending) == 4
        for w in pending:
            job = w["metadata"]["ownerReferences"][0]["name"]
            assert batch.read_namespaced_job(job, "team-a").spec.suspend is True
            assert core.list_namespaced_pod("team-a", label_selector="job-name=%s" % job).items == []
            assert "admission" not in w.get("status", {})

        start = time.monotonic()
        for i in range(ARRIVE):
            batch.create_namespaced_job("team-b", load_job("flood-b-%d" % i, "team-b", queue="team-b-queue",
                                                           seconds=SECONDS, labels=label))
        wait_until(lambda: reserved_gpus(cluster_queue(kueue, "team-b")) >= ARRIVE, 30, interval=0.25,
                   what="team-b's guarantee")
        time_to_guarantee = time.monotonic() - start
        assert time_to_guarantee < 15, time_to_guarantee

        preempted = [w for w in workloads(kueue, "team-a") if condition(w, "Preempted")]
        assert len(preempted) == 8, [w["metadata"]["name"] for w in preempted]
        for w in preempted:
            assert condition(w, "Preempted")["reason"] == "InCohortReclamation"
            assert condition(w, "Evicted")["reason"] == "Preempted"
        events = core.list_namespaced_event("team-a", field_selector="involvedObject.kind=Workload,reason=Preempted").items
        assert {w["metadata"]["name"] for w in preempted} <= {e.involved_object.name for e in events}
        # team-a keeps its own guarantee (the ClusterQueue's status may lag the preemptions by a moment).
        wait_until(lambda: reserved_gpus(cluster_queue(kueue, "team-a")) == 8, 5, interval=0.25,
                   what="team-a to hold its own 8 GPUs")

        def all_succeeded():
            jobs = batch.list_namespaced_job("team-a", label_selector="it-flood").items + \
                batch.list_namespaced_job("team-b", label_selector="it-flood").items
            return len(jobs) == FLOOD + ARRIVE and all((j.status.succeeded or 0) == 1 for j in jobs)

        wait_until(all_succeeded, 400, interval=2, what="every Job of both tenants to succeed")
    finally:
        delete_jobs(batch, "team-a", "it-flood")
        delete_jobs(batch, "team-b", "it-flood")
        wait_until(lambda: not [w for w in workloads(kueue, "team-a") + workloads(kueue, "team-b")
                                if "flood-" in w["metadata"]["name"]], 60, what="the Workloads to go")
