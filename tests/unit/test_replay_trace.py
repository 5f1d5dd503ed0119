"""The replay's trace (issue 17, first piece): the Alibaba GPU trace v2023 read into fairgpu's trace form with
each decision counted, tenants by column or stable hash, demand over time, windows and compression. The real
trace is read from FAIRGPU_TRACE_DIR (default ../shared/traces beside the checkout); it is never copied here."""

import csv
import os

import pytest

from ansible_collections.fairgpu.tenancy.plugins.module_utils.replay import trace

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TRACE_DIR = os.environ.get("FAIRGPU_TRACE_DIR", os.path.join(ROOT, "..", "shared", "traces"))
POD_LIST = os.path.join(TRACE_DIR, "alibaba-gpu-v2023", "openb_pod_list_default.csv")


def row(name, gpus=1, milli=1000, phase="Running", created=0, scheduled="0", deleted=100, qos="LS"):
    """A row in the trace's columns (values made up here, shaped like the published file's)."""
    return {"name": name, "cpu_milli": "6000", "memory_mib": "12288", "num_gpu": str(gpus), "gpu_milli": str(milli),
            "gpu_spec": "", "qos": qos, "pod_phase": phase, "creation_time": str(created),
            "deletion_time": str(deleted), "scheduled_time": scheduled}


def test_each_decision_is_made_and_counted():
    rows = [row("cpu-only", gpus=0), row("pending", phase="Pending", scheduled=""), row("failed", phase="Failed"),
            row("shared", milli=460), row("eight", gpus=8, created=5, scheduled="10", deleted=200),
            row("to-the-end", created=50, scheduled="60", deleted=200)]
    tasks, facts = trace.alibaba_v2023(rows)
    assert [t["name"] for t in tasks] == ["failed", "shared", "eight", "to-the-end"]
    assert facts == {"rows": 6, "no_gpu": 1, "never_scheduled": 1, "failed_kept": 1, "fractional_rounded_up": 1,
                     "cut_at_end": 2, "gpu_spec_empty": 6, "tasks": 4, "trace_end": 200}
    assert tasks[1]["gpus"] == 1, "460 milli-GPU of sharing is one whole GPU of quota"
    assert tasks[2] == {"name": "eight", "submit": 5, "start": 10, "end": 200, "gpus": 8, "cpu_milli": 6000,
                        "memory_mib": 12288, "tenant": None, "phase": "Running", "qos": "LS"}


def test_another_format_is_refused_naming_what_is_missing():
    with pytest.raises(trace.TraceError, match="not the Alibaba v2023 pod list: no column num_gpu"):
        trace.alibaba_v2023([{k: v for k, v in row("x").items() if k != "num_gpu"}])
    with pytest.raises(trace.TraceError, match="row 2: column num_gpu is 'two', not a whole number"):
        trace.alibaba_v2023([dict(row("x"), num_gpu="two")])


def test_tenants_by_column_or_by_a_stable_hash():
    tasks, _facts = trace.alibaba_v2023([row("a", qos="LS"), row("b", qos="BE"), row("c", qos="LS")])
    by_qos, how = trace.assign_tenants(tasks, column="qos")
    assert [t["tenant"] for t in by_qos] == ["ls", "be", "ls"] and how == {"by": "column qos",
                                                                           "tenants": {"ls": 2, "be": 1}}
    hashed, how = trace.assign_tenants(tasks, tenants=3)
    assert how["by"] == "hash into 3" and sum(how["tenants"].values()) == 3
    assert trace.assign_tenants(tasks, tenants=3)[0] == hashed, "the same on every run"
    with pytest.raises(trace.TraceError, match="either by a column"):
        trace.assign_tenants(tasks)


def test_demand_window_and_compression():
    tasks = [{"name": "a", "submit": 0, "start": 0, "end": 100, "gpus": 2},
             {"name": "b", "submit": 10, "start": 50, "end": 150, "gpus": 3},
             {"name": "c", "submit": 200, "start": 200, "end": 210, "gpus": 8}]
    assert trace.demand_steps(tasks) == [(0, 2), (50, 5), (100, 3), (150, 0), (200, 8), (210, 0)]
    assert trace.peak_demand(tasks) == 8
    cut = trace.window(tasks, 5, 100)
    assert cut == [{"name": "b", "submit": 5, "start": 45, "end": 100, "gpus": 3}], "b only, cut at the end"
    squeezed, how = trace.compress(tasks, 10, 5)
    assert [(t["submit"], t["start"], t["end"]) for t in squeezed] == [(0, 0, 10), (1, 5, 15), (20, 20, 25)]
    assert how == {"factor": 10, "floor": 5, "raised_to_floor": 1}, "c's 1 s run is raised to the floor"
    with pytest.raises(trace.TraceError, match="factor must be above 0"):
        trace.compress(tasks, 0, 5)
    # The busiest 50 s by the window's own tasks: from 0, a and b hold 2 x 50 + 3 x 0 = 100 GPU-seconds (b starts
    # at 50); from 10, b alone 3 x 10 = 30; from 200, c 8 x 10 = 80.
    assert trace.busiest_window(tasks, 50) == (0, pytest.approx(2.0))
    assert trace.busiest_window(tasks, 60) == (0, pytest.approx((2 * 60 + 3 * 10) / 60.0))
    steps = trace.demand_steps(tasks)
    assert trace.mean_demand(steps, 50, 50) == pytest.approx(5.0) and trace.mean_demand(steps, 200, 50) == 1.6


@pytest.mark.skipif(not os.path.isfile(POD_LIST), reason="the Alibaba v2023 trace is not at %s: set FAIRGPU_TRACE_DIR "
                    "to the folder that holds alibaba-gpu-v2023/" % POD_LIST)
def test_the_real_trace_facts():
    """The issue's facts, decided: 1,088 CPU-only and 861 never-scheduled GPU tasks dropped, 1,869 failed GPU tasks
    kept (1,870 failed in all, one of them CPU-only), 2,573 fractional requests rounded up, 32 cut at the end (34
    in all), gpu_spec empty everywhere, and a peak of 71 GPUs at once of the 6,212 the node list has."""
    with open(POD_LIST) as handle:
        tasks, facts = trace.alibaba_v2023(csv.DictReader(handle))
    assert facts == {"rows": 8152, "no_gpu": 1088, "never_scheduled": 861, "failed_kept": 1869,
                     "fractional_rounded_up": 2573, "cut_at_end": 32, "gpu_spec_empty": 8152, "tasks": 6203,
                     "trace_end": 12902960}
    assert trace.peak_demand(tasks) == 71
    by_qos = trace.assign_tenants(tasks, column="qos")[1]["tenants"]
    assert by_qos == {"ls": 3590, "be": 2510, "burstable": 97, "guaranteed": 6}
    # The busiest day by its own tasks: 197 tasks holding 17.4 GPUs on average and 28 at the peak, enough to load
    # a 16-GPU replay cluster above its capacity.
    start, mean = trace.busiest_window(tasks, 86400)
    day = trace.window(tasks, start, 86400)
    assert mean == pytest.approx(trace.mean_demand(trace.demand_steps(day), 0, 86400))
    assert (start, round(mean, 2), len(day), trace.peak_demand(day)) == (11989417, 17.44, 197, 28)


NODE_LIST = os.path.join(TRACE_DIR, "alibaba-gpu-v2023", "openb_node_list_gpu_node.csv")


def test_the_trace_clusters_own_load_and_waits():
    nodes = trace.alibaba_v2023_nodes([{"sn": "n-0", "cpu_milli": "64000", "memory_mib": "262144", "gpu": "8",
                                        "model": "V100M32"},
                                       {"sn": "n-1", "cpu_milli": "64000", "memory_mib": "262144", "gpu": "2",
                                        "model": "P100"}])
    assert nodes == {"nodes": 2, "gpus": 10, "models": {"V100M32": 8, "P100": 2}}
    # One task ran since before the window (4 GPUs throughout), one created in it waited 30 s for 2 GPUs, one waited
    # past the window's end (its wait still counts), one was never scheduled (counted apart).
    rows = [row("old", gpus=4, created=0, scheduled="0", deleted=1000),
            row("new", gpus=2, created=100, scheduled="130", deleted=200),
            row("late", gpus=1, created=150, scheduled="450", deleted=500),
            row("never", gpus=1, created=160, scheduled="", deleted=900, phase="Pending"),
            row("x", gpus=1, created=0, scheduled="0", deleted=1001)]
    tasks, _facts = trace.alibaba_v2023(rows)
    assert trace.never_scheduled(rows, 100, 100) == 1 and trace.never_scheduled(rows, 0, 100) == 0
    own = trace.own_cluster_load(tasks, nodes, 100, 100, trace.never_scheduled(rows, 100, 100))
    assert own == {"nodes": 2, "gpus": 10, "mean_demand": 6.4, "load": 0.64,
                   "waits": {"count": 2, "p50": 30, "p95": 300, "max": 300, "never_scheduled": 1}}
    assert trace.own_cluster_load([], trace.alibaba_v2023_nodes([]), 0, 10)["load"] is None
    with pytest.raises(trace.TraceError, match="not the Alibaba v2023 node list: no column gpu"):
        trace.alibaba_v2023_nodes([{"sn": "n-0", "cpu_milli": "1", "memory_mib": "1", "model": "T4"}])


@pytest.mark.skipif(not os.path.isfile(NODE_LIST), reason="the Alibaba v2023 trace is not at %s: set FAIRGPU_TRACE_DIR "
                    "to the folder that holds alibaba-gpu-v2023/" % NODE_LIST)
def test_the_real_trace_ran_its_cluster_almost_idle():
    """The published pod list is made for a scheduler simulator that inflates it (alibaba/clusterdata
    cluster-trace-gpu-v2023/README.md): over its busiest six hours its tasks held 47 of the node list's 6,212 GPUs
    on average (0.76 %; fractional requests counted whole), and the 94 GPU tasks created there and scheduled waited
    1 s at the median (one more was never scheduled). A replay loading 16 GPUs 1.3 times measures that overload,
    not this cluster."""
    with open(POD_LIST) as handle:
        tasks, _facts = trace.alibaba_v2023(csv.DictReader(handle))
    with open(NODE_LIST) as handle:
        nodes = trace.alibaba_v2023_nodes(csv.DictReader(handle))
    assert (nodes["nodes"], nodes["gpus"]) == (1213, 6212)
    with open(POD_LIST) as handle:
        rows = list(csv.DictReader(handle))
    start, _mean = trace.busiest_window(tasks, 21600)
    own = trace.own_cluster_load(tasks, nodes, start, 21600, trace.never_scheduled(rows, start, 21600))
    assert own == {"nodes": 1213, "gpus": 6212, "mean_demand": 46.945, "load": 0.00756,
                   "waits": {"count": 94, "p50": 1, "p95": 104, "max": 1431, "never_scheduled": 1}}
