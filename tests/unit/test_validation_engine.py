"""The validation scenarios' tables and executor (plugins/module_utils/validation/engine.py): every step names an action
the executor has, every argument that names a value finds it in the plan or the settings, the plans count as the
role's tasks did, a step whose condition is false is skipped and said, a wait that times out stops the scenario
naming the step, and the judges read only what the steps kept (run here on recorded reads)."""

import inspect

import pytest

from ansible_collections.fairgpu.tenancy.plugins.module_utils.validation import engine
from ansible_collections.fairgpu.tenancy.plugins.module_utils.common.waiter import Waiter

from fake_clock import FakeClock

SETTINGS = {"baseline_jobs": 3, "baseline_seconds": 10, "flood_extra_jobs": 4, "flood_seconds": 30,
            "flood_backlog_jobs": 60, "guarantee_bound_seconds": 15.0, "running_bound_seconds": 60.0,
            "accounting_grace_seconds": 10.0, "finish_timeout": 600, "mig_seconds": 20, "mig_extra_jobs": 1,
            "alert_timeout": 300, "prometheus_step": "5s", "fault_down_seconds": 30,
            "fault_guarantee_bound_seconds": 30.0, "noisy_seconds": 60, "noisy_repeats": 3}


def tenant(name, gpus=8, borrowing_limit=8, resource="nvidia.com/gpu"):
    return {"name": name, "namespaces": [name], "gpus": gpus, "borrowing_limit": borrowing_limit, "lending_limit": None,
            "max_gpus": 16, "gpu_resource": resource, "groups": [name]}


TENANTS = [tenant("team-a"), tenant("team-b")]
CAPACITY = {"resources": {"nvidia.com/gpu": 16}}


def run(tenants=None, prometheus=None, simulated=True, clock=None):
    clock, tenants = clock or FakeClock(), tenants or TENANTS
    return engine.Run(None, Waiter(clock.monotonic, clock.sleep, clock.time), tenants[:2], tenants, CAPACITY, "-queue",
                      dict(SETTINGS), {"simulated": simulated}, "", prometheus=prometheus)


@pytest.mark.parametrize("name", sorted(engine.SCENARIOS))
def test_every_step_is_an_action_of_the_executor_and_its_values_resolve(name):
    scenario = engine.SCENARIOS[name]
    executor = run(prometheus=object())
    plan = scenario.plan(executor)
    if name == "mig":
        plan = engine._mig_values(plan)
    for step in scenario.steps:
        action = getattr(engine.Run, "do_" + step.action)
        accepted = inspect.signature(action).parameters
        assert set(step.args) <= set(accepted), (step.action, set(step.args) - set(accepted))
        step.title.format(**plan)
        assert step.when is None or step.when in plan
        for key in ("timeout", "queue", "tenant", "seconds", "start"):
            given = step.args.get(key)
            assert not isinstance(given, str) or given in plan or given in SETTINGS, (step.title, key, given)
        for given in (step.args.get("until") or {}).values():
            assert not isinstance(given, str) or given in plan, (step.title, given)
        for who, count, start, _backlog in step.args.get("jobs") or []:
            assert who in plan and count in plan and (not isinstance(start, str) or start in plan)


def test_the_flood_plans_count_as_the_role_did():
    plan = engine.SCENARIOS["flood"].plan(run())
    assert (plan["flooder"]["name"], plan["arriver"]["name"]) == ("team-a", "team-b")
    # 16 GPUs + 4 more Jobs, a backlog of 60; team-a reaches 8 + 8 borrowed; the rest stays queued.
    assert (plan["flood_jobs"], plan["reach"], plan["pending"], plan["workloads"]) == (20, 16, 64, 28)
    assert (plan["reserve_timeout"], plan["running_timeout"]) == (60.0, 180.0)
    reverse = engine.SCENARIOS["flood_reverse"].plan(run())
    assert (reverse["flooder"]["name"], reverse["scenario"]) == ("team-b", "flood_reverse")
    mig = engine._mig_values(engine.SCENARIOS["mig"].plan(run()))
    assert (mig["a_jobs"], mig["b_jobs"], mig["workloads"]) == (9, 8, 17)


def test_steps_run_in_their_order_and_a_false_condition_is_skipped_and_said(monkeypatch):
    executor = run()
    done = []
    monkeypatch.setattr(engine.Run, "prepare", lambda self: done.append("prepare"))
    for action in ("submit", "wait", "read", "mark", "read_admission", "delete_backlog", "cleanup",
                   "prometheus_quiet", "prometheus_alerts"):
        monkeypatch.setattr(engine.Run, "do_" + action,
                            lambda self, plan, kept, title, _a=action, **args: done.append(_a))
    monkeypatch.setattr(engine.SCENARIOS["flood"], "judges", [lambda plan, kept, settings: {"name": "flood"}])
    results, steps = executor.run("flood")
    assert results == [{"name": "flood"}]
    assert done == ["prepare", "submit", "wait", "wait", "read", "read", "mark", "submit", "wait", "read_admission",
                    "read", "wait", "delete_backlog", "wait", "read", "cleanup"]
    skipped = [s["step"] for s in steps if s["skipped"]]
    assert skipped == ["start with no fairgpu alert active on Prometheus",
                       "what Prometheus saw: the over-guarantee alert, its series and plot",
                       "Kueue's own errors and evictions during the flood, from its metrics"]
    assert steps[1]["step"] == "the flooder team-a submits 20 one-GPU Jobs, then a backlog of 60"


def test_a_wait_that_times_out_stops_the_scenario_naming_the_step(monkeypatch):
    clock = FakeClock()
    executor = run(clock=clock)
    info = {"queues": {"team-a": {"reserved": 3, "borrowed": 0, "pending_workloads": 0, "admitted_workloads": 3,
                                  "admitted_or_finished_workloads": 3, "pods_running": 0, "pods_terminating": 0,
                                  "pods_succeeded": 0}},
            "workloads": []}
    monkeypatch.setattr(engine.reader, "read", lambda client, **reading: info)
    with pytest.raises(engine.StepFailed) as failed:
        executor.do_wait({"a": TENANTS[0], "jobs": 5}, {}, "until team-a's Jobs are admitted", queue="a",
                         until={"admitted_at_least": "jobs"}, timeout=60)
    assert str(failed.value) == (
        "until team-a's Jobs are admitted: Kueue did not reach {'admitted_at_least': 5, 'queue': 'team-a'} within 60 s "
        "(last read: team-a: reserved 3, pending 0, admitted 3)")
    assert clock.now == 1060.0
    kept = {}
    executor.do_wait({"a": TENANTS[0], "jobs": 5}, kept, "until queued", queue="a", until={"admitted_at_least": "jobs"},
                     timeout=30, save="flooded", may_time_out=True)
    assert kept["flooded"]["queues"] == info["queues"] and len(kept["flooded"]["timeline"]) == 31


def test_the_baseline_is_judged_from_what_the_steps_kept():
    queue = {"admitted_or_finished_workloads": 3}
    kept = {"admitted_a": {"queues": {"team-a": queue}, "elapsed": 1.5},
            "admitted_b": {"queues": {"team-b": queue}, "elapsed": 2.0},
            "finished": {"workloads": [], "timeline": [], "elapsed": 12.0},
            "jobs": [{"metadata": {"name": "fairgpu-val-baseline-team-%s-%d" % (t, i)}, "status": {"succeeded": 1}}
                     for t in "ab" for i in range(3)]}
    result = engine.judge_baseline(engine.baseline_plan(run()), kept, SETTINGS)
    assert result["name"] == "baseline" and all(c["passed"] for c in result["checks"])
    assert result["metrics"]["admission_seconds"] == {"team-a": 1.5, "team-b": 2.0}
