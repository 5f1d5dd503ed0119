"""Replays side by side (issue 17, item 3) with the model's prediction next to the measurement (item 4), and the
quota advisor's advice checked against its targets and the measurement (issue 28, item 5)."""

import json

import pytest

from ansible_collections.fairgpu.tenancy.plugins.module_utils.replay import compare
from ansible_collections.fairgpu.tenancy.plugins.modules import replay_compare
from module_main import run_main


def report(p95, passed=True, start=100):
    waits = {"count": 2, "not_admitted": 1, "p50": 1, "p95": p95, "max": p95, "trace_p50": 180, "trace_p95": p95 * 180,
             "trace_max": p95 * 180}
    return {"passed": passed, "checks": [{"name": "no Job lost", "passed": passed, "detail": "x"}],
            "window": {"start": start, "seconds": 21600, "tasks": 3}, "compression": {"factor": 180}, "capacity": 16,
            "share": {"contended_seconds": 50, "tenants": {"a": {"held": 5.0, "reference": 6.0, "tolerance": 1.0}}},
            "idle_while_pending": {"share": 0.02}, "most_evictions": 1, "lost": [],
            "tenants": {"a": {"workloads": 3, "waits": waits, "trace_gpu_hours": 12.5, "preemptions_suffered": 2,
                              "preemptions_caused": 0}}}


PREDICTION = {"tenants": {"a": {"trace_p50": 360, "trace_p95": 3600, "trace_max": 3600, "not_admitted": 0,
                                "preempted": 1}}}


def test_rows_carry_measurement_share_check_and_model():
    doc = compare.compare_document([{"name": "strict", "report": report(20, passed=False)},
                                    {"name": "fair", "report": report(10), "prediction": PREDICTION}], "now")
    strict, fair = doc["policies"]
    assert doc["same_replay"] and strict["failed_checks"] == ["no Job lost: x"] and not strict["passed"]
    row = strict["tenants"]["a"]
    assert (row["p95"], row["not_admitted"], row["preempted"], row["trace_gpu_hours"]) == (3600, 1, 2, 12.5)
    assert row["share_within_tolerance"] is True and row["reference"] == 6.0 and "model" not in row
    assert fair["tenants"]["a"]["model"]["p95"] == 3600 and fair["modelled"]


def test_a_share_outside_its_tolerance_says_so():
    rep = report(10)
    rep["share"]["tenants"]["a"]["held"] = 2.0
    assert compare.compare_document([{"name": "x", "report": rep}], "now")["policies"][0]["tenants"]["a"][
        "share_within_tolerance"] is False


def test_different_windows_are_flagged():
    doc = compare.compare_document([{"name": "x", "report": report(10)}, {"name": "y", "report": report(10, start=5)}],
                                   "now")
    assert not doc["same_replay"]
    assert "NOT the same window" in compare.compare_markdown(doc)


def test_markdown_has_a_row_per_policy_and_tenant_in_trace_hours():
    doc = compare.compare_document([{"name": "strict", "report": report(20)},
                                    {"name": "fair", "report": report(10), "prediction": PREDICTION}], "now")
    page = compare.compare_markdown(doc)
    assert "| strict | a | 3 | 1 | 0.05 / 1.00 / 1.00 | - |" in page
    assert "| fair | a | 3 | 1 | 0.05 / 0.50 / 0.50 | 0.10 / 1.00 / 1.00 |" in page


def test_wait_series_for_the_plot():
    doc = compare.compare_document([{"name": "fair", "report": report(10), "prediction": PREDICTION}], "now")
    tenants, series = compare.wait_series(doc)
    assert tenants == ["a"] and series["fair"]["p95"] == [0.5] and series["fair"]["model_p95"] == [1.0]


# The quota advisor checked (issue 28, item 5): the replay of its recommendation against the targets it was given,
# and the model's prediction against the replay, through replay_compare as playbooks/replay_advise.yml calls it.
TARGETS = {"a": {"p95": 3600}}


def admitted(p95):
    """``report`` with every Job admitted and a p95 of ``p95`` trace seconds."""
    rep = report(p95 / 180.0)
    rep["tenants"]["a"]["waits"]["not_admitted"] = 0
    return rep


def advised(p95, predicted_p95, preempted=2, model_preempted=1, gpu_hours=12.5, model_gpu_hours=12.0):
    rep = admitted(p95)
    rep["tenants"]["a"]["preemptions_suffered"] = preempted
    rep["tenants"]["a"]["trace_gpu_hours"] = gpu_hours
    prediction = {"tenants": {"a": {"trace_p50": 360, "trace_p95": predicted_p95, "trace_max": predicted_p95,
                                    "not_admitted": 0, "preempted": model_preempted,
                                    "trace_gpu_hours": model_gpu_hours}}}
    return compare.compare_document([{"name": "advised", "report": rep, "prediction": prediction}], "now",
                                    targets=TARGETS, error_bound=0.5)["policies"][0]["advice"]


def test_an_advice_met_and_predicted_within_the_bound_passes():
    advice = advised(3000, 2500)
    assert advice["passed"], advice
    assert advice["errors"] == [{"tenant": "a", "figure": "p95", "target": 3600, "measured": 3000.0,
                                 "predicted": 2500, "error": 500.0, "allowed": 1800.0}]


def test_a_target_the_replay_cannot_meet_fails_naming_the_tenant_and_figure():
    # The model promised 0.9 h; the real Kueue gave 1.25 h against a target of 1 h.
    advice = advised(4500, 3240)
    met, predicted = advice["checks"]
    assert not advice["passed"] and not met["passed"] and met["detail"] == "a p95 1.25 h, target 1.00 h"
    assert predicted["passed"], "0.35 h off is within half the target"


@pytest.mark.parametrize("kwargs, part", [
    (dict(preempted=6, model_preempted=1), "preemption: 6 evictions measured, 1 modelled"),
    (dict(preempted=1, gpu_hours=20, model_gpu_hours=12), "quota held before the pods ran or lost to evictions: 20 GPU"),
    (dict(preempted=1), "admission order or latency"),
])
def test_a_prediction_off_by_more_than_the_bound_fails_and_says_which_part_missed(kwargs, part):
    advice = advised(3500, 1000, **kwargs)
    met, predicted = advice["checks"]
    assert met["passed"] and not predicted["passed"] and not advice["passed"]
    assert predicted["detail"].startswith("a p95 measured 0.97 h, model 0.28 h, off by 0.69 h (allowed 0.50 h): ")
    assert part in predicted["detail"], predicted["detail"]
    assert "## The advice of advised checked" in compare.compare_markdown(
        {"generated": "now", "same_replay": True, "policies": [{"name": "advised", "advice": advice, "tenants": {},
                                                                "description": "", "passed": True,
                                                                "failed_checks": [], "contended_seconds": 1,
                                                                "idle_while_pending": 0, "most_evictions": 0}]})


def test_replay_compare_reports_the_failed_advice(tmp_path, capsys):
    path = tmp_path / "replay.json"
    path.write_text(json.dumps(admitted(4500)))
    prediction = {"tenants": {"a": {"trace_p50": 360, "trace_p95": 3240, "trace_max": 3240, "not_admitted": 0,
                                    "preempted": 2, "trace_gpu_hours": 12.5}}}
    result = run_main(replay_compare, {"path": str(tmp_path / "out"), "targets": TARGETS, "policies": [
        {"name": "advised", "report": str(path), "prediction": prediction}]}, capsys)
    assert not result.get("failed"), result
    assert result["advice_failed"] == ['advised: failed "the replay met every target": a p95 1.25 h, target 1.00 h']
    assert "| the replay met every target | FAILED |" in (tmp_path / "out" / "compare.md").read_text()
    bad = run_main(replay_compare, {"path": str(tmp_path / "out"), "targets": TARGETS, "error_bound": 0,
                                    "policies": [{"name": "advised", "report": str(path)}]}, capsys)
    assert bad["failed"] and bad["msg"].startswith("error_bound:")


# Repeated runs (issue 28, item 2): min / median / max over the runs of each policy, and a difference claimed only
# where the ranges do not overlap.
def test_the_spread_of_repeated_runs():
    assert compare.spread([3.0, None, 1.0, 2.0]) == {"runs": 4, "min": 1.0, "median": 2.0, "max": 3.0}
    assert compare.spread([4.0, 1.0]) == {"runs": 2, "min": 1.0, "median": 2.5, "max": 4.0}
    assert compare.spread([None]) == {"runs": 1, "min": None, "median": None, "max": None}


def with_runs(name, p95s):
    reports = [admitted(p95) for p95 in p95s]
    return {"name": name, "report": reports[0], "runs": reports}


@pytest.mark.parametrize("fair, borrowing, claim", [
    ([1800, 2000, 2200], [3000, 3600, 4000], True),    # 0.50-0.61 h below 0.83-1.11 h: differs
    ([1800, 2000, 3200], [3000, 3600, 4000], False),   # 0.50-0.89 h overlaps 0.83-1.11 h: no difference shown
    ([1800], [3000, 3600, 4000], None),                # one run: nothing claimed
])
def test_a_difference_is_claimed_only_where_the_runs_ranges_do_not_overlap(fair, borrowing, claim):
    doc = compare.compare_document([with_runs("fair", fair), with_runs("borrowing", borrowing)], "now")
    (difference,) = doc["differences"]
    assert (difference["lower"], difference["higher"], difference["differs"]) == ("fair", "borrowing", claim)
    fair_row = doc["policies"][0]
    assert fair_row["spread"]["a"]["p95"]["runs"] == len(fair) and fair_row["runs_passed"] == [True] * len(fair)
    page = compare.compare_markdown(doc)
    assert "## Across repeated runs" in page
    words = {True: "a, differs: fair", False: "a, no difference shown: fair", None: "a, one run, not claimed: fair"}
    assert words[claim] in page, page


def test_the_plot_series_take_the_medians_and_ranges_of_the_runs():
    doc = compare.compare_document([with_runs("fair", [1800, 3600, 5400])], "now")
    _tenants, series = compare.wait_series(doc)
    assert series["fair"]["p95"] == [1.0] and series["fair"]["p95_range"] == [(0.5, 1.5)]


def test_replay_compare_reads_every_run(tmp_path, capsys):
    paths = []
    for index, p95 in enumerate([1800, 3600, 5400]):
        path = tmp_path / ("run-%d.json" % index)
        path.write_text(json.dumps(admitted(p95)))
        paths.append(str(path))
    result = run_main(replay_compare, {"path": str(tmp_path / "out"), "policies": [
        {"name": "fair", "report": paths[0], "runs": paths}]}, capsys)
    assert not result.get("failed"), result
    assert result["comparison"]["policies"][0]["spread"]["a"]["p95"] == {"runs": 3, "min": 1800.0, "median": 3600.0,
                                                                         "max": 5400.0}
    missing = run_main(replay_compare, {"path": str(tmp_path / "out"), "policies": [
        {"name": "fair", "report": paths[0], "runs": [paths[0], str(tmp_path / "gone.json")]}]}, capsys)
    assert missing["failed"] and missing["msg"].startswith("policies[fair].runs: cannot read")


def ordered(name, overtaken, on=("a",), recorded=True, pairs=100):
    """One policy's runs, each report with an admission section (report.admission_evidence) saying ``overtaken`` of
    ``pairs`` comparable pairs were admitted out of creation order."""
    reports = [dict(report(10), admission={"on": list(on), "recorded": recorded,
                                           "order": {"pairs": pairs, "overtaken": n, "by_group": {}}})
               for n in overtaken]
    return {"name": name, "report": reports[0], "runs": reports}


@pytest.mark.parametrize("fifo, afs, claim", [
    ([0, 1, 0], [20, 31, 25], True),      # 0-1 % against 20-31 %: differs
    ([0, 1, 22], [20, 31, 25], False),    # the ranges overlap: no difference shown
    ([0], [20, 31, 25], None),            # one run: not claimed
])
def test_admission_order_against_first_come_first_served(fifo, afs, claim):
    doc = compare.compare_document([ordered("shared", fifo, on=()), ordered("admission", afs)], "now")
    (difference,) = doc["order_differences"]
    assert (difference["lower"], difference["higher"], difference["differs"]) == ("shared", "admission", claim)
    assert doc["policies"][1]["admission_order"][0] == {"on": ["a"], "pairs": 100, "overtaken": afs[0],
                                                        "share": afs[0] / 100.0, "recorded": True}
    page = compare.compare_markdown(doc)
    assert "## Admission order" in page
    assert "| admission | a | %s | yes, yes, yes |" % ", ".join("%d / 100" % n for n in afs) in page, page
    assert "| shared | none | " in page and page.split("| shared | none | ")[1].split("\n")[0].endswith("| - |")
    assert {True: "- differs: shared", False: "- no difference shown: shared",
            None: "- one run, not claimed: shared"}[claim] in page, page


def test_reports_without_an_admission_section_have_no_such_table():
    doc = compare.compare_document([with_runs("fair", [1800, 2000, 2200])], "now")
    assert doc["policies"][0]["admission_order"] == [] and doc["order_differences"] == []
    assert "## Admission order" not in compare.compare_markdown(doc)
    # Tenants, each its own ClusterQueue: no pair ever waits in one queue, so no row either.
    tenants = compare.compare_document([ordered("fair", [0, 0, 0], on=(), pairs=0)], "now")
    assert tenants["policies"][0]["admission_order"] == []
    assert "## Admission order" not in compare.compare_markdown(tenants)


def at_load(load, achieved, tasks, own=None):
    """A report of the same window at another load: its Jobs differ (scaled and thinned), the window does not."""
    return dict(report(10), window={"start": 100, "seconds": 21600, "tasks": tasks},
                scaling={"load_factor": load, "achieved_load": achieved}, trace_cluster=own)


def test_a_load_sweep_is_the_same_window_with_other_jobs_and_the_traces_own_waits_beside():
    own = {"gpus": 6212, "mean_demand": 46.945, "load": 0.00756,
           "waits": {"p50": 1, "p95": 104, "max": 1431, "never_scheduled": 1}}
    sweep = [{"name": "load 0.5", "report": at_load(0.5, 0.61, 25)},
             {"name": "load 1.3", "report": at_load(1.3, 1.5, 63, own)}]
    doc = compare.compare_document(sweep, "now", same_jobs=False)
    assert doc["same_replay"] and doc["trace_cluster"] == own
    assert [(p["load"], p["achieved_load"]) for p in doc["policies"]] == [(0.5, 0.61), (1.3, 1.5)]
    page = compare.compare_markdown(doc, title="fairgpu replay: one policy at several loads")
    assert "The same window at each load: 21600 s of trace from 100 s" in page, page
    assert ("the tasks created in the window waited p50 1 / p95 104 / max 1431 trace seconds there (0.00 / 0.03 / "
            "0.40 h), 1 never scheduled") in page
    assert "| load 0.5 | - | 0.5 / 0.61 | passed |" in page, page
    # Compared as policies, the same reports are not the same replay.
    assert not compare.compare_document(sweep, "now")["same_replay"]
    other = [sweep[0], {"name": "load 1.3", "report": dict(at_load(1.3, 1.5, 63), window={"start": 5, "seconds": 21600,
                                                                                          "tasks": 63})}]
    assert "(NOT the same window)" in compare.compare_markdown(compare.compare_document(other, "now", same_jobs=False))
