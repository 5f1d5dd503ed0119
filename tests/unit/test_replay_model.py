"""The fast model of Kueue's admission (issue 17, item 4): quotas, borrowing, reclaim, fair sharing's share and
preemption, on small job lists whose outcome follows from Kueue v0.19's rules (plugins/module_utils/replay/model.py
names the sources)."""

import pytest

from ansible_collections.fairgpu.tenancy.plugins.module_utils.replay import model


def job(name, tenant, gpus, seconds, at):
    return {"name": name, "tenant": tenant, "gpus": gpus, "seconds": seconds, "at": at}


def waits(result):
    return dict((n, w["wait"]) for n, w in result["workloads"].items())


def test_within_quota_nothing_waits():
    jobs = [job("a1", "a", 4, 10, 0), job("b1", "b", 4, 10, 0)]
    result = model.simulate(jobs, {"a": {"gpus": 4}, "b": {"gpus": 4}}, 8)
    assert waits(result) == {"a1": 0, "b1": 0}
    assert result["preemptions"] == 0 and result["end"] == 10


def test_strict_quotas_queue_and_never_admit_what_exceeds_the_quota():
    jobs = [job("a1", "a", 4, 10, 0), job("a2", "a", 4, 10, 1), job("a3", "a", 6, 10, 2)]
    result = model.simulate(jobs, {"a": {"gpus": 4, "borrowing_limit": 0}, "b": {"gpus": 4, "borrowing_limit": 0}}, 8)
    assert waits(result) == {"a1": 0, "a2": 9, "a3": None}, "b's idle GPUs are not lent; 6 > 4 never fits"


def test_borrowing_uses_idle_quota_and_the_limit_caps_it():
    jobs = [job("a1", "a", 4, 10, 0), job("a2", "a", 4, 10, 0)]
    assert waits(model.simulate(jobs, {"a": {"gpus": 4}, "b": {"gpus": 4}}, 8)) == {"a1": 0, "a2": 0}
    capped = model.simulate(jobs, {"a": {"gpus": 4, "borrowing_limit": 2}, "b": {"gpus": 4}}, 8)
    assert waits(capped) == {"a1": 0, "a2": 10}


def test_lending_limit_keeps_part_of_the_quota_private():
    jobs = [job("a1", "a", 4, 10, 0), job("a2", "a", 4, 10, 0)]
    result = model.simulate(jobs, {"a": {"gpus": 4}, "b": {"gpus": 4, "lending_limit": 2}}, 8)
    assert waits(result) == {"a1": 0, "a2": 10}


def test_guarantees_below_capacity_leave_the_rest_unused():
    jobs = [job("a1", "a", 4, 10, 0), job("a2", "a", 4, 10, 0)]
    assert waits(model.simulate(jobs, {"a": {"gpus": 4}, "b": {"gpus": 0}}, 8)) == {"a1": 0, "a2": 10}


@pytest.mark.parametrize("fair", [False, True])
def test_a_tenant_reclaims_its_guarantee_by_preemption(fair):
    # a borrows all of b's quota; b's Job within its nominal quota preempts a's newest Workload, which runs again.
    jobs = [job("a1", "a", 4, 100, 0), job("a2", "a", 4, 100, 1), job("b1", "b", 4, 10, 5)]
    result = model.simulate(jobs, {"a": {"gpus": 4}, "b": {"gpus": 4}}, 8, fair_sharing=fair)
    assert result["workloads"]["b1"]["wait"] == 0
    assert result["workloads"]["a2"]["evictions"] == 1 and result["workloads"]["a1"]["evictions"] == 0
    assert result["workloads"]["a2"]["wait"] == 14, "admitted again when b1 finished at 15, from its submission at 1"
    assert result["preemptions"] == 1


def test_without_fair_sharing_a_borrower_does_not_preempt_a_borrower():
    # c is empty: a and b both borrow c's 4 GPUs; b's second Job needs to borrow and waits, no preemption.
    jobs = [job("a1", "a", 4, 100, 0), job("a2", "a", 4, 100, 0), job("b1", "b", 4, 100, 1), job("b2", "b", 4, 10, 2)]
    tenants = {"a": {"gpus": 4}, "b": {"gpus": 4}, "c": {"gpus": 4}}
    result = model.simulate(jobs, tenants, 12, fair_sharing=False)
    assert result["workloads"]["b2"]["wait"] == 98 and result["preemptions"] == 0


def test_fair_sharing_preempts_the_higher_share_for_a_borrower():
    # a takes all 16 GPUs; b1 reclaims b's guarantee (a keeps 12: 8 borrowed). b2 must borrow 4: b's share with it
    # (4 * 1000 / 16 = 250) is <= a's share without the victim ((8 - 4) * 1000 / 16 = 250), so
    # LessThanOrEqualToFinalShare preempts a's newest Workload.
    jobs = [job("a%d" % i, "a", 4, 100, 0) for i in range(4)] + [job("b1", "b", 4, 100, 1), job("b2", "b", 4, 10, 2)]
    tenants = {"a": {"gpus": 4}, "b": {"gpus": 4}, "c": {"gpus": 4}, "d": {"gpus": 4}}
    result = model.simulate(jobs, tenants, 16, fair_sharing=True)
    assert result["workloads"]["b2"]["wait"] == 0 and result["preemptions"] == 2
    # Without fair sharing, b2 (borrowing) preempts nothing and waits.
    assert model.simulate(jobs, tenants, 16, fair_sharing=False)["preemptions"] == 1
    # With a weight of 3, a's share is a third: b's 250 is above a's 83 after removal and not below a's 167 before.
    tenants["a"]["weight"] = 3
    assert model.simulate(jobs, tenants, 16, fair_sharing=True)["preemptions"] == 1


def test_equal_shares_do_not_preempt_each_other():
    # a borrows 4 of 12 after b1's reclaim; b2 would borrow 4: 333 <= 0 and 333 < 333 both fail (no ping-pong).
    jobs = [job("a1", "a", 4, 100, 0), job("a2", "a", 4, 100, 0), job("a3", "a", 4, 100, 0),
            job("b1", "b", 4, 100, 1), job("b2", "b", 4, 10, 2)]
    result = model.simulate(jobs, {"a": {"gpus": 4}, "b": {"gpus": 4}, "c": {"gpus": 4}}, 12, fair_sharing=True)
    assert result["preemptions"] == 1 and result["workloads"]["b2"]["wait"] == 98


def test_share_is_kueues_dominant_resource_share():
    state = model._State(model.policy_tenants({"a": {"gpus": 4, "weight": 2}, "b": {"gpus": 8}}), 12)
    state.usage.update({"a": 7, "b": 0})
    assert state.share("a") == pytest.approx(3 * 1000.0 / 12 / 2)
    assert state.share("b") == 0.0 and state.share("b", 9) == pytest.approx(1000.0 / 12)


def test_fair_sharing_admits_the_lower_share_first():
    # Both pending heads must borrow; b (weight 2) has the lower share after admission and goes first.
    jobs = [job("x", "c", 12, 10, 0), job("a1", "a", 6, 10, 1), job("b1", "b", 6, 10, 1)]
    tenants = {"a": {"gpus": 4}, "b": {"gpus": 4, "weight": 2}, "c": {"gpus": 4}}
    result = model.simulate(jobs, tenants, 12, fair_sharing=True)
    assert result["workloads"]["b1"]["admitted"] <= result["workloads"]["a1"]["admitted"]


def test_predict_gives_percentiles_in_wall_and_trace_time():
    jobs = [job("a%d" % i, "a", 4, 10, 0) for i in range(4)]
    prediction = model.predict(jobs, {"a": {"gpus": 4, "borrowing_limit": 0}}, 8, factor=100)
    row = prediction["tenants"]["a"]
    assert (row["p50"], row["p95"], row["max"]) == (10, 30, 30)
    assert (row["trace_p50"], row["trace_p95"]) == (1000, 3000)
    assert row["gpu_hours"] == pytest.approx(160 / 3600.0, abs=1e-4) and row["not_admitted"] == 0


def test_start_delay_lengthens_each_run():
    jobs = [job("a1", "a", 4, 10, 0), job("a2", "a", 4, 10, 0)]
    result = model.simulate(jobs, {"a": {"gpus": 4, "borrowing_limit": 0}}, 8, start_delay=5)
    assert waits(result)["a2"] == 15


@pytest.mark.parametrize("tenants, text", [
    ({"a": {"gpus": -1}}, "gpus"), ({"a": {"gpus": 4, "lending_limit": 5}}, "lending_limit"),
    ({"a": {"gpus": 4, "borrowing_limit": -1}}, "borrowing_limit"), ({"a": {"gpus": 4, "weight": -1}}, "weight")])
def test_bad_policies_are_refused_naming_the_field(tenants, text):
    with pytest.raises(model.ModelError, match=text):
        model.simulate([], tenants, 8)


def test_a_job_of_an_unknown_tenant_is_refused():
    with pytest.raises(model.ModelError, match="tenant z"):
        model.simulate([job("z1", "z", 1, 1, 0)], {"a": {"gpus": 4}}, 8)
