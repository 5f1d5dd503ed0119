"""tests/bench/scale_baseline.py (make bench-scale-baseline): Kueue's scheduler performance baseline shape made as
its generator makes it, and the test's measures computed as its recorder and checker compute them
(sigs.k8s.io/kueue v0.19.2 test/performance/scheduler: runner/generator/generator.go, runner/recorder/recorder.go,
checker/checker_test.go)."""

import copy
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "bench"))

import scale_baseline  # noqa: E402

# The shape of configs/baseline/generator.yaml of v0.19.2, two cohorts and two queues instead of five and six.
GENERATOR = {"cohorts": [{"className": "cohort", "count": 2, "queuesSets": [{
    "className": "cq", "count": 2, "nominalQuota": 20, "borrowingLimit": 100, "reclaimWithinCohort": "Any",
    "withinClusterQueue": "LowerPriority", "workloadsSets": [
        {"count": 350, "creationIntervalMs": 100,
         "workloads": [{"className": "small", "runtimeMs": 200, "priority": 50, "request": 1}]},
        {"count": 50, "creationIntervalMs": 1200,
         "workloads": [{"className": "large", "runtimeMs": 1000, "priority": 200, "request": 20}]}]}]}]}
RANGESPEC = {"cmd": {"maxWallMs": 425000}, "clusterQueueClassesMinUsage": {"cq": 50},
             "wlClassesMaxAvgTimeToAdmissionMs": {"large": 23000, "small": 260000}}


def test_plan_names_and_quotas_as_the_generator():
    planned = scale_baseline.plan(GENERATOR)
    assert planned["flavor"] == "rf"
    assert [q["name"] for q in planned["queues"]] == ["cq-0-0-cohort-0", "cq-0-1-cohort-0", "cq-0-0-cohort-1",
                                                      "cq-0-1-cohort-1"]
    cluster_queue, namespace, local_queue = scale_baseline.queue_objects(planned["queues"][2], "rf")
    assert cluster_queue["spec"]["cohortName"] == "cohort-1"
    assert cluster_queue["spec"]["resourceGroups"] == [{"coveredResources": ["cpu"], "flavors": [{"name": "rf", "resources": [
        {"name": "cpu", "nominalQuota": "20", "borrowingLimit": "100"}]}]}]
    assert cluster_queue["spec"]["preemption"] == {"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority"}
    assert namespace["metadata"]["name"] == local_queue["metadata"]["namespace"] == "cq-0-0-cohort-1"
    assert local_queue["spec"]["clusterQueue"] == "cq-0-0-cohort-1"
    index, large = planned["queues"][0]["sets"][1]
    wl = scale_baseline.workload(planned["queues"][0], index, 7, 0, large["workloads"][0])
    assert wl["metadata"]["name"] == "large-1-7-0" and wl["spec"]["priority"] == 200
    assert wl["spec"]["podSets"][0]["template"]["spec"]["containers"][0]["resources"] == {"requests": {"cpu": "20"}}
    assert wl["metadata"]["labels"][scale_baseline.BENCH_LABEL + "-runtime"] == "1.0"
    with pytest.raises(ValueError, match="TAS"):
        scale_baseline.plan(dict(GENERATOR, topology={"levels": []}))


def test_measures_and_bounds():
    """Usage: request x admitted time over nominal x span; the average time to admission from the first event to
    the latest admission (an evicted Workload counts its re-admission, as the recorder overwrites it)."""
    queues = scale_baseline.plan(GENERATOR)["queues"][:2]
    workloads = {("cq-0-0-cohort-0", "small-0-0-0"): ("small", 1.0), ("cq-0-0-cohort-0", "large-1-0-0"): ("large", 20.0),
                 ("cq-0-1-cohort-0", "small-0-0-0"): ("small", 1.0)}
    first_seen = {k: 100.0 for k in workloads}
    last_admitted = {("cq-0-0-cohort-0", "small-0-0-0"): 101.0, ("cq-0-0-cohort-0", "large-1-0-0"): 130.0}
    intervals = {("cq-0-0-cohort-0", "small-0-0-0"): [(100.5, 100.7), (101.0, 101.2)],
                 ("cq-0-0-cohort-0", "large-1-0-0"): [(130.0, 140.0)]}
    result = scale_baseline.measures(queues, workloads, 100.0, first_seen, last_admitted, intervals)
    assert result["wall_ms"] == 40000 and result["end"] == 140.0
    # (1 x 0.4 + 20 x 10) cpu-seconds over 40 cpu nominal x 40 s = 12.5 %.
    assert result["queue_classes"]["cq"] == {"nominal": 40.0, "used_cpu_seconds": 200.4, "usage_percent": 12.5}
    assert result["workload_classes"]["small"] == {"count": 2, "admitted": 1, "avg_time_to_admission_ms": 1000}
    assert result["workload_classes"]["large"]["avg_time_to_admission_ms"] == 30000
    rows = scale_baseline.judge(result, RANGESPEC)
    assert [(r["measure"], r["observed"], r["passed"]) for r in rows] == [
        ("wall time (ms)", 40000, True), ("usage of ClusterQueue class cq (%)", 12.5, False),
        ("average time to admission, class large (ms)", 30000, False),
        ("average time to admission, class small (ms)", 1000, True)]
    nothing = scale_baseline.measures(queues, workloads, 100.0, first_seen, {}, {})
    assert nothing["wall_ms"] is None and all(r["passed"] is None for r in scale_baseline.judge(nothing, RANGESPEC))


class FakeWorkloads:
    """The two calls scale.Finisher's settling makes (get, replace status), on Workloads held here."""

    def __init__(self, workloads):
        self.workloads = workloads
        self.replaced = []

    def get_namespaced_custom_object(self, group, version, namespace, plural, name):
        return copy.deepcopy(self.workloads[(namespace, name)])

    def replace_namespaced_custom_object_status(self, group, version, namespace, plural, name, body):
        self.replaced.append((name, {c["type"]: c["status"] for c in body["status"]["conditions"]},
                              "admission" in body["status"]))
        self.workloads[(namespace, name)] = body


def _wl(**conditions):
    status = {"conditions": [{"type": kind, "status": value} for kind, value in conditions.items()]}
    if conditions.get("QuotaReserved") == "True":
        status["admission"] = {"clusterQueue": "cq"}
    return {"metadata": {"namespace": "ns", "name": "w", "labels": {scale_baseline.BENCH_LABEL + "-runtime": "0"}},
            "status": status}


def test_the_finisher_ends_every_eviction_even_when_a_relist_hid_the_state_between():
    """As Kueue's perf runner does (runner/controller/controller.go): an evicted Workload loses its reservation
    (workload.UnsetQuotaReservationWithCondition), a Finished is timed from the latest admission and never written
    on an evicted one. The second eviction is seen by a relist that never showed the Workload unreserved."""
    admitted, evicted = _wl(QuotaReserved="True", Admitted="True"), _wl(QuotaReserved="True", Admitted="True", Evicted="True")
    api = FakeWorkloads({("ns", "w"): evicted})
    finisher = scale_baseline.Finisher(api, "", True)
    key = ("ns", "w")
    finisher.observe(admitted)
    finisher.observe(evicted)
    assert finisher.admissions[key] == 1 and len(finisher.intervals[key]) == 1 and key in finisher.unreserving
    # The finish due for the first admission comes now: the Workload was evicted since, so nothing is written.
    finisher.settle_one(key, 1)
    assert api.replaced == []
    finisher.settle_one(key, 0)
    assert api.replaced == [("w", {"QuotaReserved": "False", "Admitted": "False", "Evicted": "True"}, False)]
    assert key not in finisher.unreserving
    # Kueue admits it again and evicts it again; a relist shows only the second eviction.
    finisher.due.clear()
    api.workloads[key] = evicted
    finisher.observe(evicted)
    assert [entry[1:] for entry in finisher.due] == [(key, 0)]
    finisher.settle_one(key, 0)
    assert len(api.replaced) == 2 and api.replaced[-1][1]["QuotaReserved"] == "False"
    # Admitted once more and seen: its finish is written, timed from this admission, and the Finished the watch
    # shows closes its interval.
    finisher.observe(admitted)
    assert finisher.admissions[key] == 2 and [entry[1:] for entry in finisher.due][-1] == (key, 2)
    api.workloads[key] = admitted
    finisher.settle_one(key, 2)
    assert api.replaced[-1][1]["Finished"] == "True"
    finisher.observe(api.workloads[key])
    assert key in finisher.finished and len(finisher.intervals[key]) == 2


def test_the_pinned_kueue_config_is_read_from_the_module():
    """The real configs/baseline of the pinned Kueue (the toolchain's build fetched the module): 5 cohorts x 6
    ClusterQueues, 500 Workloads each, and the three kinds of bound. Skipped where Go has no module cache with it
    and cannot reach the module proxy."""
    version = scale_baseline.scale.kueue_version()
    try:
        generator, rangespec, directory = scale_baseline.upstream_config(version)
    except (subprocess.CalledProcessError, FileNotFoundError) as error:
        if os.environ.get("FAIRGPU_MAKE_TEST") is not None:
            raise
        pytest.skip("the Kueue module is not reachable: %s" % error)
    planned = scale_baseline.plan(generator)
    assert directory.endswith(os.path.join("kueue@%s" % version, "test", "performance", "scheduler", "configs", "baseline"))
    assert len(planned["queues"]) == 30 and len({q["cohort"] for q in planned["queues"]}) == 5
    assert scale_baseline.workload_count(planned) == 15000
    assert set(rangespec) == {"cmd", "clusterQueueClassesMinUsage", "wlClassesMaxAvgTimeToAdmissionMs"}
    assert rangespec["cmd"]["maxWallMs"] > 0 and set(rangespec["wlClassesMaxAvgTimeToAdmissionMs"]) == {"small", "medium", "large"}
