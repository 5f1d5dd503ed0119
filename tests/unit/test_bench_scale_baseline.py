"""tests/bench/scale_baseline.py (make bench-scale-baseline): Kueue's scheduler performance baseline shape made as
its generator makes it, and the test's measures computed as its recorder and checker compute them
(sigs.k8s.io/kueue v0.19.2 test/performance/scheduler: runner/generator/generator.go, runner/recorder/recorder.go,
checker/checker_test.go)."""

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
    assert sum(ws["count"] for q in planned["queues"] for _i, ws in q["sets"]) == 15000
    assert set(rangespec) == {"cmd", "clusterQueueClassesMinUsage", "wlClassesMaxAvgTimeToAdmissionMs"}
    assert rangespec["cmd"]["maxWallMs"] > 0 and set(rangespec["wlClassesMaxAvgTimeToAdmissionMs"]) == {"small", "medium", "large"}
