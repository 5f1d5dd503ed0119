# -*- coding: utf-8 -*-
# Copyright: fairgpu contributors
# Apache License 2.0 (see LICENSE)
"""A GPU cluster trace as replay tasks (issue 17): read, decide what to keep, assign tenants, pick a window,
compress time. Pure logic, no cluster access.

fairgpu's trace form is one task per row, times in seconds from the trace's start: ``{"name", "submit" (when the
task was created), "start" (when the trace's scheduler ran it; None if never), "end" (when it left), "gpus" (whole
GPUs), "cpu_milli", "memory_mib", "tenant", "phase"}``; ``end - start`` is the run time, ``start - submit`` the
wait the trace's own cluster gave it.

The Alibaba GPU cluster trace v2023 (``openb_pod_list_default.csv``: ``name, cpu_milli, memory_mib, num_gpu,
gpu_milli, gpu_spec, qos, pod_phase, creation_time, deletion_time, scheduled_time``; published with "Beware of
Fragmentation: Scheduling GPU-Sharing Workloads with Fragmentation Gradient Descent", USENIX ATC 2023) is read
by ``alibaba_v2023``, which decides, and counts in its facts:

- a task asking for no GPU (``num_gpu`` 0) is dropped: fairgpu replays GPU quotas;
- a task never scheduled (``scheduled_time`` empty, phase Pending) is dropped: it has no run time;
- a task that ended Failed is kept: it held its GPUs until it left;
- a fractional request (``num_gpu`` 1 with ``gpu_milli`` below 1000: GPU sharing) is rounded up to 1 whole GPU,
  as a quota of whole GPUs counts it;
- a task still running when the trace ends (``deletion_time`` equal to the trace's last one) is cut there;
- ``gpu_spec`` (the model asked for) is counted when empty: the replay has one GPU product.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib

from ansible_collections.fairgpu.tenancy.plugins.module_utils.replay.fairness import percentile

ALIBABA_V2023_COLUMNS = ("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli", "gpu_spec", "qos", "pod_phase",
                         "creation_time", "deletion_time", "scheduled_time")


class TraceError(ValueError):
    """Raised for a trace that is not in the expected form; the message names the row and the column."""


def _int(row, column, number):
    try:
        return int(row[column])
    except (KeyError, TypeError, ValueError):
        raise TraceError("row %d: column %s is %r, not a whole number" % (number, column, row.get(column)))


def _rows(rows, columns, what):
    """``rows`` as a list, once the first has every one of ``columns``; TraceError naming ``what`` otherwise."""
    rows = list(rows)
    missing = [column for column in columns if column not in rows[0]] if rows else []
    if missing:
        raise TraceError("not the Alibaba v2023 %s: no column %s; it has %s"
                         % (what, ", ".join(missing), ", ".join(sorted(rows[0]))))
    return rows


def alibaba_v2023(rows):
    """``(tasks, facts)`` from the rows of ``openb_pod_list_default.csv`` (dicts, as ``csv.DictReader`` gives them):
    the kept tasks in fairgpu's form (``tenant`` None; ``phase`` the trace's), and ``{"rows", "no_gpu",
    "never_scheduled", "failed_kept", "fractional_rounded_up", "cut_at_end", "gpu_spec_empty", "tasks",
    "trace_end"}`` (counts; ``trace_end`` in seconds). Raises TraceError for a missing column or a bad number."""
    rows = _rows(rows, ALIBABA_V2023_COLUMNS, "pod list")
    trace_end = max([_int(row, "deletion_time", n) for n, row in enumerate(rows, 2)] or [0])
    facts = dict.fromkeys(("no_gpu", "never_scheduled", "failed_kept", "fractional_rounded_up", "cut_at_end",
                           "gpu_spec_empty"), 0)
    tasks = []
    for number, row in enumerate(rows, 2):  # line 1 is the header
        facts["gpu_spec_empty"] += 0 if row["gpu_spec"] else 1
        gpus = _int(row, "num_gpu", number)
        if gpus <= 0:
            facts["no_gpu"] += 1
            continue
        if row["scheduled_time"] in ("", None):
            facts["never_scheduled"] += 1
            continue
        if gpus == 1 and _int(row, "gpu_milli", number) < 1000:
            facts["fractional_rounded_up"] += 1
        end = _int(row, "deletion_time", number)
        facts["cut_at_end"] += 1 if end == trace_end else 0
        facts["failed_kept"] += 1 if row["pod_phase"] == "Failed" else 0
        tasks.append({"name": row["name"], "submit": _int(row, "creation_time", number),
                      "start": _int(row, "scheduled_time", number), "end": end, "gpus": gpus,
                      "cpu_milli": _int(row, "cpu_milli", number), "memory_mib": _int(row, "memory_mib", number),
                      "tenant": None, "phase": row["pod_phase"], "qos": row["qos"]})
    facts.update(rows=len(rows), tasks=len(tasks), trace_end=trace_end)
    return tasks, facts


ALIBABA_V2023_NODE_COLUMNS = ("sn", "cpu_milli", "memory_mib", "gpu", "model")


def alibaba_v2023_nodes(rows):
    """The trace's own cluster from the rows of ``openb_node_list_gpu_node.csv`` (``sn, cpu_milli, memory_mib, gpu,
    model``; 1,213 GPU nodes with 6,212 GPUs in the published file): ``{"nodes", "gpus", "models": {model: GPUs}}``.
    Raises TraceError for a missing column or a bad number."""
    rows = _rows(rows, ALIBABA_V2023_NODE_COLUMNS, "node list")
    models = {}
    for number, row in enumerate(rows, 2):
        models[row["model"]] = models.get(row["model"], 0) + _int(row, "gpu", number)
    return {"nodes": len(rows), "gpus": sum(models.values()), "models": models}


def never_scheduled(rows, start, length):
    """How many GPU tasks of the pod list's ``rows`` were created in [start, start + length) and never scheduled
    (``alibaba_v2023`` drops them: they have no run time); the longest waits of the trace's own cluster."""
    return sum(1 for n, row in enumerate(rows, 2) if row["scheduled_time"] in ("", None)
               and _int(row, "num_gpu", n) > 0 and start <= _int(row, "creation_time", n) < start + length)


def own_cluster_load(tasks, nodes, start, length, unscheduled=0):
    """How the trace's own cluster fared in the window [start, start + length) of trace time: ``{"nodes", "gpus"
    (its GPUs, ``alibaba_v2023_nodes``), "mean_demand" (mean GPUs its ``tasks`` held over the window, those
    submitted before it and still running included; whole GPUs, a fractional request counted as 1, so at most what
    they held), "load" (mean_demand / gpus; None without GPUs), "waits": {"count", "p50", "p95", "max",
    "never_scheduled"}}``: trace seconds from creation to scheduling of the tasks created in the window, whenever
    they started, and the count of those never scheduled (``never_scheduled``; they have no wait to rank). A replay
    at a load factor far above ``load`` measures the overload it was given, not the trace's cluster."""
    mean = mean_demand(demand_steps(tasks), start, length)
    waits = [t["start"] - t["submit"] for t in tasks
             if start <= t["submit"] < start + length and t.get("start") is not None]
    return {"nodes": nodes["nodes"], "gpus": nodes["gpus"], "mean_demand": round(mean, 3),
            "load": round(mean / nodes["gpus"], 5) if nodes["gpus"] else None,
            "waits": {"count": len(waits), "p50": percentile(waits, 0.5), "p95": percentile(waits, 0.95),
                      "max": percentile(waits, 1.0), "never_scheduled": unscheduled}}


def assign_tenants(tasks, column=None, tenants=0):
    """Each task's tenant: the value of its ``column`` (such as ``qos``: LS, BE, Burstable, Guaranteed), or, with
    ``tenants`` N, one of ``tenant-0`` .. ``tenant-<N-1>`` by a stable hash of its name (SHA-256, so every run and
    machine assigns alike). Returns new task dicts and ``{"by": "column <c>" | "hash into N", "tenants": {tenant:
    tasks}}``. Raises TraceError when neither or both are given, or a task lacks the column."""
    if bool(column) == bool(tenants):
        raise TraceError("assign tenants either by a column (such as qos) or by a hash into a number of tenants")
    assigned, counts = [], {}
    for task in tasks:
        if column:
            if task.get(column) in (None, ""):
                raise TraceError("task %s has no %s to take its tenant from" % (task["name"], column))
            tenant = str(task[column]).lower()
        else:
            digest = hashlib.sha256(task["name"].encode("utf-8")).hexdigest()
            tenant = "tenant-%d" % (int(digest, 16) % int(tenants))
        assigned.append(dict(task, tenant=tenant))
        counts[tenant] = counts.get(tenant, 0) + 1
    return assigned, {"by": ("column %s" % column) if column else "hash into %d" % tenants, "tenants": counts}


def demand_steps(tasks):
    """GPU demand over time from the tasks' run intervals [start, end): ``[(time, GPUs in use from then)]``, one
    step per time something changes, in time order."""
    changes = {}
    for task in tasks:
        if task.get("start") is None or task["end"] <= task["start"]:
            continue
        changes[task["start"]] = changes.get(task["start"], 0) + task["gpus"]
        changes[task["end"]] = changes.get(task["end"], 0) - task["gpus"]
    steps, level = [], 0
    for time in sorted(changes):
        level += changes[time]
        steps.append((time, level))
    return steps


def peak_demand(tasks):
    """The most GPUs the tasks held at once (``demand_steps``)."""
    return max([level for _time, level in demand_steps(tasks)] or [0])


def mean_demand(steps, start, length):
    """Mean GPUs in use over [start, start + length) of ``demand_steps`` output."""
    return _integral(steps, start, start + length) / float(length) if length > 0 else 0.0


def _integral(steps, start, end):
    total = 0.0
    for (time, level), following in zip(steps, [t for t, _l in steps[1:]] + [float("inf")]):
        low, high = max(time, start), min(following, end)
        if high > low:
            total += level * (high - low)
    return total


def busiest_window(tasks, length):
    """``(start, mean GPUs)`` of the ``length``-second window whose own tasks (those submitted in it, run until its
    end at most: what a replay of it submits, ``window``) hold the most GPU-seconds; starts are submit times.
    (0, 0.0) for no task."""
    ordered = sorted((t for t in tasks if t.get("start") is not None), key=lambda t: t["submit"])
    best, best_total, last = 0, -1.0, 0
    for first, task in enumerate(ordered):
        start = task["submit"]
        while last < len(ordered) and ordered[last]["submit"] < start + length:
            last += 1
        total = sum(t["gpus"] * max(0, min(t["end"], start + length) - t["start"]) for t in ordered[first:last])
        if total > best_total:
            best, best_total = start, total
    return best, (max(best_total, 0.0) / float(length)) if length > 0 else 0.0


def window(tasks, start, length):
    """The tasks submitted in [start, start + length), their times shifted so that ``start`` is 0 and their run
    cut at the window's end (``end`` at most ``length``)."""
    kept = []
    for task in tasks:
        if start <= task["submit"] < start + length:
            shifted = dict(task, submit=task["submit"] - start, end=min(task["end"], start + length) - start)
            shifted["start"] = None if task.get("start") is None else max(task["start"] - start, shifted["submit"])
            if shifted["start"] is None or shifted["end"] > shifted["start"]:
                kept.append(shifted)
    return kept


def compress(tasks, factor, floor):
    """The tasks with time divided by ``factor`` (> 0) and every run time at least ``floor`` seconds, so that the
    embedded cluster's pod start and stop delays (seconds) do not become trace-time waits. Times are whole
    seconds. Returns new tasks and ``{"factor", "floor", "raised_to_floor": tasks whose run time was raised}``."""
    if not factor > 0 or floor < 0:
        raise TraceError("compression: factor must be above 0 and floor at least 0 seconds, got %r and %r"
                         % (factor, floor))
    compressed, raised = [], 0
    for task in tasks:
        submit = int(round(task["submit"] / float(factor)))
        start = None if task.get("start") is None else max(submit, int(round(task["start"] / float(factor))))
        run = int(round((task["end"] - (task["start"] if start is not None else task["submit"])) / float(factor)))
        if run < floor:
            run, raised = int(floor), raised + 1
        compressed.append(dict(task, submit=submit, start=start, end=(start if start is not None else submit) + run))
    return compressed, {"factor": factor, "floor": floor, "raised_to_floor": raised}
