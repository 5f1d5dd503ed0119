"""The quota advisor (issue 17, item 4): the smallest sum of guarantees meeting per-tenant wait targets, ranked
by the model; targets and choices checked; the recommendation as a tenants_list."""

import pytest

from ansible_collections.fairgpu.tenancy.plugins.module_utils.replay import advisor


def job(name, tenant, gpus, seconds, at):
    return {"name": name, "tenant": tenant, "gpus": gpus, "seconds": seconds, "at": at}


# a: two 4-GPU Jobs at once; b: one 2-GPU Job later. Factor 10: 1 wall second is 10 trace seconds.
JOBS = [job("a1", "a", 4, 10, 0), job("a2", "a", 4, 10, 0), job("b1", "b", 2, 10, 1)]


def test_splits_cover_every_division_of_the_sum():
    assert sorted(advisor.splits(2, ["a", "b"], {})) == [(0, 2), (1, 1), (2, 0)]
    assert list(advisor.splits(3, ["a", "b"], {"a": 2})) == [(2, 1), (3, 0)]


def test_the_smallest_sum_meeting_the_targets_wins():
    # Nothing may wait: a needs 8 GPUs at t=0 and b 2 at t=1 while a runs: 10 in all, of 12.
    found = advisor.advise(JOBS, ["a", "b"], 12, {"a": {"p95": 0}, "b": {"p95": 0}}, 10)
    rec = found["recommended"]
    assert rec["sum"] == 10 and rec["margin"] == 0
    # Borrowing lets the split be anything that sums to 10.
    assert sum(t["gpus"] for t in rec["tenants"].values()) == 10
    assert found["sums_tried"][0][0] == 4, "starts at the largest Job's GPUs"


def test_a_looser_target_needs_fewer_guarantees():
    # a may wait 100 trace seconds (10 wall: one run): 4 + 2 GPUs suffice.
    found = advisor.advise(JOBS, ["a", "b"], 12, {"a": {"p95": 100}, "b": {"p95": 0}}, 10)
    assert found["recommended"]["sum"] == 6


def test_no_candidate_when_the_targets_cannot_be_met():
    jobs = [job("a%d" % i, "a", 4, 10, 0) for i in range(4)]
    found = advisor.advise(jobs, ["a"], 8, {"a": {"p95": 0}}, 10)
    assert found["recommended"] is None and found["candidates"] == []


def test_the_search_is_bounded():
    found = advisor.advise(JOBS, ["a", "b"], 12, {"a": {"p95": 0}, "b": {"p95": 0}}, 10, max_candidates=3)
    assert found["truncated"] and found["evaluated"] == 3


def test_borrowing_limits_that_could_never_admit_a_job_are_skipped():
    found = advisor.advise(JOBS, ["a", "b"], 12, {"a": {"p95": 0}, "b": {"p95": 0}}, 10, borrowing_limits=[0])
    rec = found["recommended"]
    assert rec["tenants"]["a"]["gpus"] >= 8 and rec["tenants"]["b"]["gpus"] >= 2


def test_weights_of_the_same_proportion_are_tried_once():
    found = advisor.advise(JOBS, ["a", "b"], 12, {"a": {"p95": 0}, "b": {"p95": 0}}, 10, weights=[1, 2])
    weights = [tuple(sorted((t, v["weight"]) for t, v in c["tenants"].items())) for c in found["candidates"]]
    assert (("a", 2), ("b", 2)) not in weights


@pytest.mark.parametrize("targets, text", [
    ({}, "at least one"), ({"z": {"p95": 1}}, "no such tenant"), ({"a": {"p99": 1}}, "p50, p95"),
    ({"a": {"p95": -1}}, "trace seconds")])
def test_bad_targets_are_refused(targets, text):
    with pytest.raises(advisor.AdvisorError, match=text):
        advisor.advise(JOBS, ["a", "b"], 12, targets, 10)


def test_bad_choices_are_refused():
    with pytest.raises(advisor.AdvisorError, match="weights"):
        advisor.advise(JOBS, ["a", "b"], 12, {"a": {"p95": 1}}, 10, weights=[0])
    with pytest.raises(advisor.AdvisorError, match="borrowing_limits"):
        advisor.advise(JOBS, ["a", "b"], 12, {"a": {"p95": 1}}, 10, borrowing_limits=[-1])


def test_the_recommendation_as_a_tenants_list_keeps_the_other_fields():
    rec = {"tenants": {"a": {"gpus": 8, "borrowing_limit": None, "weight": 2},
                       "b": {"gpus": 2, "borrowing_limit": 0, "weight": 1}}}
    base = [{"name": "a", "gpus": 6, "max_jobs": 400, "borrowing_limit": 3}, {"name": "b", "gpus": 6}]
    assert advisor.tenants_list(rec, base) == [
        {"name": "a", "gpus": 8, "weight": 2, "max_jobs": 400},
        {"name": "b", "gpus": 2, "borrowing_limit": 0, "weight": 1}]
