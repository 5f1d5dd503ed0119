# -*- coding: utf-8 -*-
# Copyright: fairgpu contributors
# Apache License 2.0 (see LICENSE)
"""The noisy-neighbour measurement (issue 28, item 9): the task's acceptance criterion that one tenant may not
degrade another's performance by more than 20 % on whole GPUs, and not at all on MIG. A victim tenant's load runs
alone, then beside a neighbour's load; the throughput each run achieved comes from the load generator's JSON line
(files/gpu_load.py: ``tenant``, ``device``, ``backend``, ``tflops``, ``started``, ``ended``), read from the pods'
logs (the ``noisy_neighbour`` validate scenario) or from the processes' output (tests/bench/noisy_neighbour.py on a
bare host). Pure logic. Units: TFLOP/s, seconds, fractions (0.2 is 20 %).

Placements (``PLACEMENTS``): two loads on **one GPU** (time-sliced, no isolation: shown, never promised), each on
**its own GPU** of one node (what Kueue's whole-GPU quotas give: judged against ``WHOLE_GPU_BOUND``), and on **other
MIG instances of the same GPU** (hardware partitions: judged against ``MIG_BOUND``). A run on the CPU is shown and
not judged: the promise is about GPUs. A scenario on simulated GPUs measures nothing and says so.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import statistics

from ansible_collections.fairgpu.tenancy.plugins.module_utils.validation.report import check

# The task's bound for whole GPUs: another tenant's load may cost at most 20 % of the victim's throughput.
WHOLE_GPU_BOUND = 0.20
# The task asks 0 % on MIG: an instance has its own SMs, L2 slices and memory (NVIDIA's MIG user guide). 0 % cannot
# be told from the spread of repeated runs on one instance, so the bound is 5 %.
MIG_BOUND = 0.05
# The share of the victim's run its neighbour must overlap for a run to count as "beside" it.
OVERLAP_LEAST = 0.9
GPU_BACKENDS = ("torch-cuda",)
PLACEMENTS = {
    "shared_gpu": {"title": "sharing one device (time-sliced)", "bound": None},
    "own_gpus": {"title": "each on its own device", "bound": WHOLE_GPU_BOUND},
    "mig_instances": {"title": "each on its own MIG instance", "bound": MIG_BOUND},
}
FIELDS = ("tenant", "backend", "tflops", "started", "ended")


class LoadOutputError(ValueError):
    """Output that holds no load generator line, or a line without a field the judge needs."""


def load_records(text, where="output"):
    """The load generator's JSON lines in ``text`` (a pod's log or a process's stdout; other lines, such as a
    library's warnings, are skipped). Raises LoadOutputError naming ``where`` when there is none or one lacks a
    field of ``FIELDS``."""
    records = []
    for line in (text or "").splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if not isinstance(record, dict) or "tflops" not in record:
            continue
        missing = [f for f in FIELDS if f not in record]
        if missing:
            raise LoadOutputError("%s: the load generator's line lacks %s: %s" % (where, ", ".join(missing), line))
        records.append(record)
    if not records:
        raise LoadOutputError("%s: no line of the load generator (files/gpu_load.py) in it" % where)
    return records


def overlap(victim, neighbour):
    """The share of the victim run's time (``started`` to ``ended``) during which the neighbour's run ran."""
    span = victim["ended"] - victim["started"]
    shared = min(victim["ended"], neighbour["ended"]) - max(victim["started"], neighbour["started"])
    return max(0.0, shared) / span if span > 0 else 0.0


def _tflops(records):
    """The median TFLOP/s of ``records``; None for none."""
    return statistics.median(float(r["tflops"]) for r in records) if records else None


def _kind(records):
    backends = sorted(set(r["backend"] for r in records))
    if all(b in GPU_BACKENDS for b in backends):
        return "gpu", backends
    return "cpu", backends


def judge(victim, neighbour, placements, expect_gpu=False):
    """The scenario's result (``{"name", "title", "checks", "metrics", "notes"}``, validation/report.py rows).

    ``placements``: ``{placement: {"where": the devices in words, "alone": [the victim's records run alone there],
    "beside": [(victim's record, neighbour's record) run at the same time]}}`` for the placements of ``PLACEMENTS``
    measured. The victim's throughput is the median of its runs. Judged: every placement with a bound whose runs
    were all on a GPU: the neighbour overlapped each run by ``OVERLAP_LEAST``, and the victim's median beside it
    is at most the bound below its median alone. Runs on the CPU, and the same-GPU placement, are shown and not
    judged; with ``expect_gpu`` (a cluster with real GPUs) a run of either tenant on the CPU fails a check, since
    the load generator falls back to the CPU where it finds no CUDA device."""
    checks, notes, metrics = [], [], {"victim": victim, "neighbour": neighbour}
    for placement, runs in sorted(placements.items()):
        spec = PLACEMENTS[placement]
        everyone = list(runs["alone"]) + [record for pair in runs["beside"] for record in pair]
        kind, backends = _kind(everyone)
        if expect_gpu:
            checks.append(check("every load of %s and %s ran on a GPU (%s)" % (victim, neighbour, spec["title"]),
                                "backend %s" % " or ".join(GPU_BACKENDS), backends, kind == "gpu"))
        base, here = _tflops(runs["alone"]), _tflops([pair[0] for pair in runs["beside"]])
        lost = (1.0 - here / base) if base and here is not None else None
        overlaps = [round(overlap(v, n), 3) for v, n in runs["beside"]]
        metrics[placement] = {"where": runs.get("where"), "backends": backends, "alone_tflops": base,
                              "beside_tflops": here, "degradation": None if lost is None else round(lost, 4),
                              "runs": [len(runs["alone"]), len(runs["beside"])], "overlap": overlaps}
        observed = "%s below alone (alone %s, beside %s TFLOP/s, medians of %d and %d runs)" % (
            "-" if lost is None else "%.1f %%" % (100 * lost), _fmt(base), _fmt(here), len(runs["alone"]),
            len(runs["beside"]))
        title = "%s %s (%s)" % (victim, spec["title"], runs.get("where") or "-")
        if kind != "gpu":
            notes.append("%s: %s. Measured the CPU, not a GPU (backends %s): it shows the mechanics of the "
                         "measurement and is not judged." % (title, observed, ", ".join(backends)))
            continue
        if spec["bound"] is None:
            notes.append("%s: %s; not a promise (two loads on one GPU share it without isolation)." % (
                title, observed))
            continue
        checks.append(check("the neighbour %s ran beside %s" % (neighbour, title),
                            "at least %d %% of each run" % (OVERLAP_LEAST * 100), overlaps,
                            bool(overlaps) and min(overlaps) >= OVERLAP_LEAST))
        checks.append(check("%s's throughput beside %s" % (title, neighbour),
                            "at most %d %% below alone" % round(spec["bound"] * 100), observed,
                            lost is not None and lost <= spec["bound"]))
    return {"name": "noisy_neighbour", "title": "Noisy neighbour: %s beside %s" % (victim, neighbour),
            "checks": checks, "metrics": metrics, "notes": notes}


def not_measured(victim, neighbour, why):
    """The scenario's result where nothing can be measured (simulated GPUs): no check, a note saying why."""
    return {"name": "noisy_neighbour", "title": "Noisy neighbour: %s beside %s" % (victim, neighbour),
            "checks": [], "metrics": {}, "notes": ["Not measured: %s. Nothing here passes or fails." % why]}


def _fmt(value):
    return "-" if value is None else "%g" % round(value, 4)


def markdown(result):
    """The result as the report section both the scenario and the bare-host script write."""
    lines = ["## %s" % result["title"], ""]
    lines += ["- " + note for note in result["notes"]] + [""]
    measured = [p for p in sorted(PLACEMENTS) if p in result["metrics"]]
    if measured:
        lines += ["| placement | devices | victim alone (TFLOP/s) | beside | below alone | runs alone / beside | "
                  "neighbour overlap |", "|---|---|---|---|---|---|---|"]
        for placement in measured:
            m = result["metrics"][placement]
            lines.append("| %s | %s | %s | %s | %s | %d / %d | %s |" % (
                PLACEMENTS[placement]["title"], m["where"] or "-", _fmt(m["alone_tflops"]), _fmt(m["beside_tflops"]),
                "-" if m["degradation"] is None else "%.1f %%" % (100 * m["degradation"]), m["runs"][0], m["runs"][1],
                ", ".join("%d %%" % round(100 * o) for o in m["overlap"]) or "-"))
        lines.append("")
    if result["checks"]:
        lines += ["| check | expected | observed | result |", "|---|---|---|---|"]
        lines += ["| %s | %s | %s | %s |" % (c["check"], c["expected"], c["observed"], "pass" if c["passed"] else
                                             "**FAIL**") for c in result["checks"]]
        lines.append("")
    return "\n".join(lines)
