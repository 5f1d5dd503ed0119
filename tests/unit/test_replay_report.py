"""The replay report (issue 17): each Workload's facts from Kueue's conditions and scheduling stats, GPUs held and
wanted over time, per-tenant figures, Jobs lost, the share check, the Markdown. Workloads here are shaped as Kueue
v0.19 writes them (apis/kueue/v1beta2/workload_types.go); the times are made up."""

from ansible_collections.fairgpu.tenancy.plugins.module_utils.replay import report

JOBS = [{"name": "r-0000", "tenant": "a", "gpus": 4, "seconds": 30, "at": 0},
        {"name": "r-0001", "tenant": "b", "gpus": 4, "seconds": 30, "at": 0},
        {"name": "r-0002", "tenant": "b", "gpus": 4, "seconds": 30, "at": 10}]
BY_NAME = dict((j["name"], j) for j in JOBS)
UID_A = "11111111-1111-1111-1111-111111111111"


def t(second):
    return "2026-12-01T10:%02d:%02dZ" % (second // 60, second % 60)


def workload(job, uid, created, reserved=None, finished=None, reason="Succeeded", preempted_by=None, evictions=0):
    conditions = []
    if reserved is not None:
        conditions.append({"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved",
                           "lastTransitionTime": t(reserved)})
    if finished is not None:
        conditions.append({"type": "Finished", "status": "True", "reason": reason, "lastTransitionTime": t(finished)})
    if preempted_by:
        conditions.append({"type": "Preempted", "status": "False", "reason": "QuotaReserved",
                           "message": "Previously: Preempted to accommodate a workload (UID: %s, JobUID: "
                                      "22222222-2222-2222-2222-222222222222) due to Fair Sharing within the cohort"
                                      % preempted_by, "lastTransitionTime": t(reserved or 0)})
    status = {"conditions": conditions}
    if evictions:
        status["schedulingStats"] = {"evictions": [{"reason": "Preempted", "underlyingCause": "InCohortFairSharing",
                                                    "count": evictions}]}
    return {"metadata": {"name": "job-%s-x" % job, "uid": uid, "creationTimestamp": t(created),
                         "ownerReferences": [{"kind": "Job", "name": job}]}, "status": status}


WORKLOADS = [workload("r-0000", UID_A, 0, 1, 31), workload("r-0001", "u-b1", 0, 1, 31),
             workload("r-0002", "u-b2", 10, 31, 61, preempted_by=UID_A, evictions=1),
             workload("not-ours", "u-x", 0, 0, 5)]


def test_workload_facts_from_kueue_conditions():
    facts = report.workload_facts(WORKLOADS[2], BY_NAME)
    assert facts["tenant"] == "b" and facts["gpus"] == 4 and facts["wait"] == 21
    assert facts["finished"] - facts["reserved"] == 30 and facts["finished_reason"] == "Succeeded"
    assert facts["preempted"] == 1 and facts["preemptor_uid"] == UID_A
    assert report.workload_facts(WORKLOADS[3], BY_NAME) is None, "a Workload of no replay Job"
    assert report.workload_facts(workload("r-0000", "u", 0), BY_NAME)["reserved"] is None


def test_share_steps_hold_from_reservation_and_want_from_creation():
    facts = [report.workload_facts(w, BY_NAME) for w in WORKLOADS[:3]]
    steps = report.share_steps(facts)
    first = steps[0][0]
    at = dict((round(time - first), levels) for time, levels in steps)
    assert at[0] == {"a": {"held": 0, "wanted": 4, "sizes": [4]}, "b": {"held": 0, "wanted": 4, "sizes": [4]}}
    assert at[1] == {"a": {"held": 4, "wanted": 4, "sizes": [4]}, "b": {"held": 4, "wanted": 4, "sizes": [4]}}
    assert at[10]["b"] == {"held": 4, "wanted": 8, "sizes": [4, 4]}
    assert at[31]["b"] == {"held": 4, "wanted": 4, "sizes": [4]} and at[31]["a"] == {"held": 0, "wanted": 0, "sizes": []}
    assert at[61]["b"] == {"held": 0, "wanted": 0, "sizes": []}
    # A Workload no quota could admit (b guaranteed 2, borrowing at most 1) is no demand: b never wants it.
    strict = report.share_steps(facts, quotas={"a": {"gpus": 4}, "b": {"gpus": 2, "borrowing_limit": 1}})
    assert all(levels["b"]["wanted"] == 0 for _time, levels in strict)


def test_tenant_figures_waits_hours_and_preemptions():
    facts = [report.workload_facts(w, BY_NAME) for w in WORKLOADS[:3]]
    figures = report.tenant_figures(facts, ["a", "b"], factor=60)
    assert figures["b"]["waits"]["max"] == 21 and figures["b"]["waits"]["trace_max"] == 21 * 60
    assert figures["a"]["gpu_hours"] == round(4 * 30 / 3600.0, 4)
    assert figures["b"]["preemptions_suffered"] == 1 and figures["a"]["preemptions_caused"] == 1
    assert figures["a"]["preemptions_suffered"] == 0 and figures["b"]["preemptions_caused"] == 0


def test_lost_jobs_are_those_without_a_successful_end():
    facts = [report.workload_facts(w, BY_NAME) for w in WORKLOADS[:3]]
    assert report.lost_jobs(JOBS, facts) == []
    failed = [report.workload_facts(workload("r-0000", UID_A, 0, 1, 31, reason="Failed"), BY_NAME)] + facts[1:2]
    assert report.lost_jobs(JOBS, failed) == ["r-0000", "r-0002"]


def test_share_check_against_the_fair_reference():
    # a and b each guaranteed 4 of 8 GPUs and asking more for 10 s: the reference is 4 each. a holds 8 (b's
    # guarantee not taken back), b 0: off by 4 > the tolerance of 1 GPU, and the detail names both.
    quotas = {"a": {"gpus": 4}, "b": {"gpus": 4}}
    steps = [(0, {"a": {"held": 8, "wanted": 12}, "b": {"held": 0, "wanted": 8}}), (10, {})]
    check = report.share_check(steps, 8, quotas)
    assert check["contended_seconds"] == 10 and check["passed"] is False
    assert check["tenants"]["a"] == {"held": 8, "reference": 4, "fragment": 0, "spare": 0, "tolerance": 1,
                                     "passed": False}
    assert "a held 8.00 GPUs, reference 4.00 +- 1" in check["detail"] and "b held 0.00" in check["detail"]
    steps = [(0, {"a": {"held": 4, "wanted": 12}, "b": {"held": 4, "wanted": 8}}), (10, {})]
    assert report.share_check(steps, 8, quotas)["passed"] is True
    # Weights alone (the reference before issue 28) would give a 2/3 of the GPUs with weight 2; the guarantees
    # come first, so holding its guarantee of 4 passes.
    assert report.share_check(steps, 8, {"a": {"gpus": 4, "weight": 2}, "b": {"gpus": 4}})["passed"] is True
    assert report.share_check([(0, {"a": {"held": 4, "wanted": 4}}), (10, {})], 8, quotas)["passed"] is False, \
        "no contention at all: nothing shown, the check does not pass by default"


def test_document_and_markdown():
    plan = {"jobs": JOBS, "capacity": 8, "compression": {"factor": 60, "floor": 25, "raised_to_floor": 1},
            "window": {"start": 0, "seconds": 3600, "chosen": "busiest", "tasks": 3, "wall_seconds": 60},
            "scaling": {"load_factor": 1.3, "trace_time_load": 1.0, "factor": 0.8, "trace_mean_demand": 10,
                        "mean_demand": 8, "achieved_load": 1.0, "peak_demand": 8, "capped": 0, "thinned": 1},
            "adapter": {"rows": 10, "no_gpu": 1, "never_scheduled": 1, "failed_kept": 1, "fractional_rounded_up": 2,
                        "cut_at_end": 0, "gpu_spec_empty": 10, "tasks": 8},
            "assignment": {"by": "hash into 2", "tenants": {"a": 4, "b": 4}}}
    doc = report.replay_document("embedded", plan, {"created": 3, "existing": 0, "lateness": {"max": 0.1, "mean": 0.05}},
                                 WORKLOADS, {"a": {"weight": 1, "gpus": 4}, "b": {"weight": 1, "gpus": 4}},
                                 "2026-12-01T11:00:00Z")
    assert doc["lost"] == [] and doc["workloads"] == 3
    assert [c["passed"] for c in doc["checks"]][:2] == [True, True]
    page = report.replay_markdown(doc)
    assert "| dropped: CPU-only | 1 |" in page and "by hash into 2" in page
    assert "| b | 2 | 1 / 21 / 21 | 60 / 1260 / 1260 |" in page, page
    assert doc["trace_cluster"] is None and "trace's own cluster" not in page
    own = {"nodes": 1213, "gpus": 6212, "mean_demand": 46.945, "load": 0.00756,
           "waits": {"count": 94, "p50": 1, "p95": 104, "max": 1431, "never_scheduled": 1}}
    page = report.replay_markdown(dict(doc, trace_cluster=own))
    assert ("6212 GPUs on 1213 nodes, at most 46.945 GPUs held on average in this window (a load of 0.00756 against "
            "this replay's 1.3); the tasks created in the window waited p50 1 / p95 104 / max 1431 trace seconds "
            "there, 1 never scheduled") in page, page
    empty = dict(own, gpus=0, load=None, waits={"count": 0, "p50": None, "p95": None, "max": None, "never_scheduled": 0})
    assert "a load of None" in report.replay_markdown(dict(doc, trace_cluster=empty))
    series = report.held_series(doc["timeline"])
    assert series["a"][1][:2] == [0, 4]


def test_idle_while_pending_counts_free_gpus_that_a_pending_workload_could_take():
    def fact(gpus, created, reserved, finished):
        return {"gpus": gpus, "created": created, "reserved": reserved, "finished": finished}
    # 8 GPUs: one 4-GPU Workload runs 0-20; a 2-GPU one waits 0-10 although 4 are free (20 GPU-s idle), and an
    # 8-GPU one waits 0-20 but could not fit beside the first (not counted).
    facts = [fact(4, 0, 0, 20), fact(2, 0, 10, 20), fact(8, 0, 20, 30)]
    assert report.idle_while_pending(facts, 8) == {"gpu_seconds": 20.0, "share": 0.0833}
    assert report.idle_while_pending([], 8) == {"gpu_seconds": 0.0, "share": 0.0}


def event(uid, reason, at, second=None, count=None):
    """An events.k8s.io/v1 Event as Kueue v0.19's recorder writes it (client-go tools/events: the second isomorphic
    event becomes series {count: 2, lastObservedTime})."""
    item = {"apiVersion": "events.k8s.io/v1", "kind": "Event", "reason": reason, "action": reason,
            "eventTime": t(at)[:-1] + ".250000Z", "reportingController": "kueue-admission",
            "regarding": {"kind": "Workload", "uid": uid, "name": "w"}}
    if second is not None:
        item["series"] = {"count": count or 2, "lastObservedTime": t(second)[:-1] + ".500000Z"}
    return item


def test_holds_of_a_preempted_workload_come_from_kueue_s_events():
    fact = report.workload_facts(workload("r-0000", UID_A, 0, 40, 70, evictions=1), BY_NAME)
    holds, complete = report.workload_holds(fact, [event(UID_A, "QuotaReserved", 1, second=40),
                                                   event(UID_A, "Preempted", 12), event(UID_A, "Admitted", 1)])
    created = fact["created"]
    assert complete and holds == [[created + 1.25, created + 12.25], [created + 40.5, fact["finished"]]]


def test_a_history_kueue_did_not_write_whole_falls_back_to_the_last_hold():
    fact = report.workload_facts(workload("r-0000", UID_A, 0, 40, 70, evictions=2), BY_NAME)
    # A third reservation is held in the recorder's cache until the series ends (count 3, no third time written).
    holds, complete = report.workload_holds(fact, [event(UID_A, "QuotaReserved", 1, second=40, count=3),
                                                   event(UID_A, "Preempted", 12, second=30)])
    assert not complete and holds == [[fact["reserved"], fact["finished"]]]
    # No events at all: exact for a Workload never evicted, incomplete for one that was.
    assert report.workload_holds(report.workload_facts(workload("r-0001", "u", 0, 1, 31), BY_NAME), []) == (
        [[fact["created"] + 1, fact["created"] + 31]], True)
    assert report.workload_holds(fact, [])[1] is False


def test_events_are_grouped_by_their_workload():
    grouped = report.events_by_workload([event("u1", "QuotaReserved", 1), event("u2", "Preempted", 2),
                                         {"regarding": {"kind": "Job", "uid": "u1"}, "reason": "Started"}])
    assert sorted(grouped) == ["u1", "u2"] and len(grouped["u1"]) == 1


def test_kueue_metrics_by_tenant_from_prometheus_vectors():
    table = report.metric_table({
        "quota_reserved": [{"metric": {"cluster_queue": "a"}, "value": [1.0, "12"]}],
        "preempted_caused": [{"metric": {"preempting_cluster_queue": "b"}, "value": [1.0, "3"]}],
        "wait_p95_seconds": [{"metric": {"cluster_queue": "a"}, "value": [1.0, "NaN"]}, {"metric": {}, "value": [1, "1"]}]})
    assert table == {"a": {"quota_reserved": 12.0, "wait_p95_seconds": None}, "b": {"preempted_caused": 3.0}}


def test_the_document_checks_the_time_to_guarantee():
    plan = {"jobs": JOBS, "capacity": 8, "compression": {"factor": 60, "floor": 25, "raised_to_floor": 0},
            "window": {"seconds": 600, "start": 0, "chosen": "given", "tasks": 3, "wall_seconds": 10},
            "scaling": {}, "adapter": {}, "assignment": {"by": "hash into 2"}}
    tenants = {"a": {"weight": 1, "gpus": 4}, "b": {"weight": 1, "gpus": 4}}
    doc = report.replay_document("c", plan, {}, WORKLOADS, tenants, "now", guarantee_bound=15)
    # b's second 4-GPU Workload waited 21 s (created 10, reserved 31) while b held 4 of its 4: not owed.
    assert doc["guarantee"]["passed"] and doc["guarantee"]["tenants"]["b"]["over_bound"] == 0
    # With 8 guaranteed the same wait would be owed. Evicted once and no Kueue Event left, its history is unknown
    # from its creation to its last reservation (it may have held quota in between): no wait is taken from there.
    tight = {"a": {"gpus": 0}, "b": {"gpus": 8}}
    unknown = report.replay_document("c", plan, {}, WORKLOADS, tight, "now", guarantee_bound=15)
    assert unknown["guarantee"]["passed"] and unknown["guarantee"]["longest"]["seconds"] <= 1
    assert unknown["histories_incomplete"] == 1
    assert "1 Workloads' histories incomplete" in [c["detail"] for c in unknown["checks"]
                                                   if c["name"].startswith("every tenant")][0]
    # Never evicted, its wait is known and fails the bound.
    known = WORKLOADS[:2] + [workload("r-0002", "u-b2", 10, 31, 61)]
    failed = report.replay_document("c", plan, {}, known, tight, "now", guarantee_bound=15)
    assert not failed["guarantee"]["passed"] and failed["guarantee"]["longest"] == {
        "tenant": "b", "seconds": 21, "start": report.fairness._time(t(10))}
    assert "every tenant gets its guarantee within 15 s" in [c["name"] for c in failed["checks"] if not c["passed"]]


def local_queue(namespace, name, gpus=None, updated="2026-12-01T10:01:00Z"):
    """A LocalQueue as Kueue v0.19.2 writes its status (apis/kueue/v1beta2/localqueue_types.go): with admission fair
    sharing, status.fairSharing.admissionFairSharingStatus {consumedResources, lastUpdate}; without it, no such part."""
    status = {"fairSharing": {"weightedShare": 0}}
    if gpus is not None:
        status["fairSharing"]["admissionFairSharingStatus"] = {"consumedResources": {"nvidia.com/gpu": gpus, "cpu": "3"},
                                                               "lastUpdate": updated}
    return {"metadata": {"namespace": namespace, "name": name}, "spec": {"clusterQueue": "shared"}, "status": status}


# Two namespaces of one ClusterQueue: a's Workload (4 GPUs) was created first, b's (4 GPUs) a second later, and b's
# was admitted first: one comparable pair, overtaken. b's second Workload (2 GPUs) asks less than a's, so a could not
# have gone where it went: not comparable.
GROUPS = {"a": {"namespace": "ns-a", "queue": "shared-queue", "cluster_queue": "shared", "admission_fair_sharing": True,
                "gpus": 0, "weight": 2, "cluster_queue_gpus": 8},
          "b": {"namespace": "ns-b", "queue": "shared-queue", "cluster_queue": "shared", "admission_fair_sharing": True,
                "gpus": 0, "weight": 1, "cluster_queue_gpus": 8}}
ORDER_JOBS = [{"name": "o-0", "tenant": "a", "gpus": 4}, {"name": "o-1", "tenant": "b", "gpus": 4},
              {"name": "o-2", "tenant": "b", "gpus": 2}]
ORDER_FACTS = [report.workload_facts(w, dict((j["name"], j) for j in ORDER_JOBS)) for w in (
    workload("o-0", "u0", 0, 20, 50), workload("o-1", "u1", 1, 2, 30), workload("o-2", "u2", 2, 3, 30))]


def test_overtakes_count_pairs_admitted_out_of_creation_order():
    order = report.overtakes(ORDER_FACTS, {"a": "shared", "b": "shared"})
    assert order == {"pairs": 1, "overtaken": 1, "by_group": {"a": 1}}
    # Admitted in creation order (the same second): the pair counts, nothing overtaken.
    in_order = [dict(ORDER_FACTS[0], reserved=ORDER_FACTS[0]["created"] + 2)] + ORDER_FACTS[1:]
    assert report.overtakes(in_order, {"a": "shared", "b": "shared"}) == {"pairs": 1, "overtaken": 0, "by_group": {}}
    # b created once a was admitted: they never waited together, no pair (however the trace runs on).
    apart = [dict(ORDER_FACTS[0], reserved=ORDER_FACTS[0]["created"] + 1)] + ORDER_FACTS[1:]
    assert report.overtakes(apart, {"a": "shared", "b": "shared"})["pairs"] == 0
    # A Workload whose earlier holds are unknown (history incomplete) says nothing of its first reservation.
    unknown = [dict(ORDER_FACTS[0], unknown=[0, 20])] + ORDER_FACTS[1:]
    assert report.overtakes(unknown, {"a": "shared", "b": "shared"})["pairs"] == 0
    # Groups of two ClusterQueues (two tenants) never compete in one queue: no pair.
    assert report.overtakes(ORDER_FACTS, {"a": "team-a", "b": "team-b"})["pairs"] == 0
    # A Workload's first reservation counts, not a later one after an eviction.
    evicted = [dict(ORDER_FACTS[0], holds=[[ORDER_FACTS[0]["created"] + 1, ORDER_FACTS[0]["created"] + 5],
                                           [ORDER_FACTS[0]["reserved"], ORDER_FACTS[0]["finished"]]])] + ORDER_FACTS[1:]
    assert report.overtakes(evicted, {"a": "shared", "b": "shared"})["overtaken"] == 0


def test_admission_evidence_needs_a_usage_above_zero_for_every_group_with_work():
    reads = {"after_submission": [local_queue("ns-a", "shared-queue", "3500m"), local_queue("ns-b", "shared-queue", "1"),
                                  local_queue("ns-a", "default", "0")],
             "after_finish": [local_queue("ns-a", "shared-queue", "1200m"), local_queue("ns-b", "shared-queue", "0")]}
    evidence = report.admission_evidence(reads, GROUPS, ORDER_FACTS)
    assert evidence["on"] == ["a", "b"] and evidence["recorded"]
    assert evidence["usage"]["a"] == {"after_submission": {"gpus": 3.5, "last_update": "2026-12-01T10:01:00Z"},
                                      "after_finish": {"gpus": 1.2, "last_update": "2026-12-01T10:01:00Z"}}
    assert evidence["weights"] == {"a": 2, "b": 1} and evidence["order"]["overtaken"] == 1
    # kubernetes-sigs/kueue#11134: with a half-life of 0 Kueue writes the status and every usage stays 0.
    zero = {"after_submission": [local_queue("ns-a", "shared-queue", "0"), local_queue("ns-b", "shared-queue", "0")]}
    silent = report.admission_evidence(zero, GROUPS, ORDER_FACTS)
    assert not silent["recorded"]
    assert "usage above 0 in 0 of 2 groups with admitted Workloads: none for a, b" in silent["detail"]
    # A group none of whose Workloads was admitted has no usage to show; with no admitted Workload at all nothing is
    # recorded, so nothing is claimed.
    pending = [dict(ORDER_FACTS[0], reserved=None, holds=[])] + ORDER_FACTS[1:]
    partial = report.admission_evidence({"after_submission": [local_queue("ns-b", "shared-queue", "1")]}, GROUPS, pending)
    assert partial["recorded"] and "usage above 0 in 1 of 1 groups with admitted Workloads" in partial["detail"]
    nothing = [dict(f, reserved=None, holds=[]) for f in ORDER_FACTS]
    assert not report.admission_evidence(zero, GROUPS, nothing)["recorded"]
    # What a read holds that is no object is passed over.
    assert report.admission_evidence({"after_submission": [None, "x"]}, GROUPS, ORDER_FACTS)["usage"]["a"][
        "after_submission"] == {"gpus": None, "last_update": None}
    # Admission fair sharing off for the ClusterQueue: Kueue keeps no usage, and nothing is claimed of it.
    fifo = dict((g, dict(v, admission_fair_sharing=False)) for g, v in GROUPS.items())
    off = report.admission_evidence({"after_submission": [local_queue("ns-a", "shared-queue")]}, fifo, ORDER_FACTS)
    assert off["on"] == [] and not off["recorded"] and off["usage"]["a"]["after_submission"]["gpus"] is None
    assert off["detail"] == "1 of 1 comparable pairs admitted out of creation order"


def test_a_replay_of_namespaces_judges_no_guarantee_and_checks_the_usage():
    plan = {"jobs": ORDER_JOBS, "capacity": 8, "compression": {"factor": 60, "floor": 25, "raised_to_floor": 0},
            "window": {"start": 0, "seconds": 3600, "chosen": "busiest", "tasks": 3, "wall_seconds": 60},
            "scaling": {"load_factor": 1.3, "trace_time_load": 1.0, "factor": 0.8, "trace_mean_demand": 10,
                        "mean_demand": 8, "achieved_load": 1.0, "peak_demand": 8, "capped": 0, "thinned": 0},
            "adapter": {}, "assignment": {"by": "hash into 2", "tenants": {"a": 1, "b": 2}}}
    workloads = [workload("o-0", "u0", 0, 20, 50), workload("o-1", "u1", 1, 2, 30), workload("o-2", "u2", 2, 3, 30)]
    zero = {"after_submission": [local_queue("ns-a", "shared-queue", "0"), local_queue("ns-b", "shared-queue", "0")]}
    doc = report.replay_document("embedded", plan, {}, workloads, GROUPS, "2026-12-01T11:00:00Z", local_queues=zero)
    names = [c["name"] for c in doc["checks"]]
    assert not any("guarantee within" in n for n in names) and doc["guarantee"] is None
    usage = [c for c in doc["checks"] if c["name"].startswith("Kueue recorded each group's usage")]
    assert len(usage) == 1 and not usage[0]["passed"] and not doc["passed"]
    # The shared ClusterQueue lends its 8 GPUs to the groups by weight: while a (weight 2) and b both waited (1 s to
    # 3 s), a's reference was its 4 GPUs asked and b's the other 4; the lender itself is no row.
    assert doc["share"]["contended_seconds"] == 2 and set(doc["share"]["tenants"]) == {"a", "b"}
    assert doc["share"]["tenants"]["a"]["reference"] == 4 and doc["share"]["tenants"]["a"]["held"] == 0
    assert doc["policy"] == "guarantees 0/0 GPUs, weights 2/1, borrowing limits -/-, sharing shared's 8 GPUs"
    assert all(set(levels) <= {"a", "b"} for _t, levels in doc["reference_timeline"])
    page = report.replay_markdown(doc)
    assert "Not judged: no group has a guarantee of its own" in page
    assert "| a | 2 | 1 | 0 |" in page, page
    # Without the LocalQueues (an older role) there is no such section or check.
    plain = report.replay_document("embedded", plan, {}, workloads, GROUPS, "2026-12-01T11:00:00Z")
    assert plain["admission"] is None and len(plain["checks"]) == len(doc["checks"]) - 1
