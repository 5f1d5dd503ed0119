"""Replays side by side (issue 17, item 3) with the model's prediction next to the measurement (item 4)."""

from ansible_collections.fairgpu.tenancy.plugins.module_utils.replay import compare


def report(p95, passed=True, start=100):
    waits = {"count": 2, "not_admitted": 1, "p50": 1, "p95": p95, "max": p95, "trace_p50": 180, "trace_p95": p95 * 180,
             "trace_max": p95 * 180}
    return {"passed": passed, "checks": [{"name": "no Job lost", "passed": passed, "detail": "x"}],
            "window": {"start": start, "seconds": 21600, "tasks": 3}, "compression": {"factor": 180}, "capacity": 16,
            "share": {"contended_seconds": 50, "tenants": {"a": {"held": 5.0, "fair": 6.0, "bound": 1.6}}},
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
    assert row["share_within_bound"] is True and "model" not in row
    assert fair["tenants"]["a"]["model"]["p95"] == 3600 and fair["modelled"]


def test_a_share_outside_its_bound_says_so():
    rep = report(10)
    rep["share"]["tenants"]["a"]["held"] = 2.0
    assert compare.compare_document([{"name": "x", "report": rep}], "now")["policies"][0]["tenants"]["a"][
        "share_within_bound"] is False


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
