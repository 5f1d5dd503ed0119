# -*- coding: utf-8 -*-
# Copyright: fairgpu maintainers
# Apache License 2.0 (see LICENSE)
"""The validation scenarios as tables of steps, and the one executor that runs them (module ``scenario``).

A scenario of ``SCENARIOS`` is three things:

- its **plan**: the numbers it works with, computed once from the tenants, the cluster's capacity and the settings
  (how many Jobs, which devices the flooder can reach, how many Workloads must finish);
- its **table of steps**: each names an action of the executor (``submit``, ``wait``, ``read``, ``mark``,
  ``delete_backlog``, ``wait_pods_started``, ``nvidia_smi``, ``prometheus_*``, ``cleanup``) and its arguments; an
  argument that is a string naming a value of the plan stands for that value, and a step's ``save`` names where
  what it read is kept;
- its **judges** (``scenarios.py``, ``monitoring/checks.py``), pure functions that read only what the steps kept
  and return the report's entries.

The isolation scenario's table is ``attempts.py``, run by its own executor (``probe.py``): its steps are requests
sent as a tenant, not reads of Kueue. Every wait reads through ``kueue/reader.py`` on the executor's ``Waiter``,
so the timings of a scenario are the reads' own (a step's time is in the result's ``steps``).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy

from ansible_collections.fairgpu.tenancy.plugins.module_utils.common import readiness
from ansible_collections.fairgpu.tenancy.plugins.module_utils.common.applier import api_message
from ansible_collections.fairgpu.tenancy.plugins.module_utils.common.names import (
    BACKLOG_LABEL,
    GPU_PRODUCT_LABEL,
    HOSTNAME_LABEL,
    JOB_NAME_LABEL,
    KUEUE_API,
    LOAD_JOB_PREFIX,
    MANAGED_BY,
    MIG_RESOURCE_PREFIX,
    VALIDATION_LABEL,
)
from ansible_collections.fairgpu.tenancy.plugins.module_utils.kueue import reader
from ansible_collections.fairgpu.tenancy.plugins.module_utils.mig.nvidia_smi import parse_list
from ansible_collections.fairgpu.tenancy.plugins.module_utils.monitoring import checks as alert_checks
from ansible_collections.fairgpu.tenancy.plugins.module_utils.monitoring.objects import duration_seconds
from ansible_collections.fairgpu.tenancy.plugins.module_utils.monitoring.prometheus import PrometheusError
from ansible_collections.fairgpu.tenancy.plugins.module_utils.tenants.quota import reachable
from ansible_collections.fairgpu.tenancy.plugins.module_utils.validation import faults, noisy, scenarios
from ansible_collections.fairgpu.tenancy.plugins.module_utils.validation.load import LOAD_SCRIPT_CONFIGMAP, job_manifest

try:
    from kubernetes.dynamic.exceptions import DynamicApiError, NotFoundError
except ImportError:
    DynamicApiError = NotFoundError = Exception  # the module reports the missing kubernetes library

OVER_GUARANTEE = "FairgpuTenantOverGuarantee"
# Seconds between two reads where a scenario times the cluster (the arriver's guarantee), and elsewhere.
FAST_POLL, POLL = 0.5, 1
# The settings every scenario reads (the validate role's variables without their prefix; its defaults say what
# each is). Times are seconds.
SETTING_NAMES = ("baseline_jobs", "baseline_seconds", "flood_extra_jobs", "flood_seconds", "flood_backlog_jobs",
                 "guarantee_bound_seconds", "running_bound_seconds", "accounting_grace_seconds", "finish_timeout",
                 "mig_seconds", "mig_extra_jobs", "alert_timeout", "prometheus_step", "fault_down_seconds",
                 "fault_guarantee_bound_seconds", "noisy_seconds", "noisy_repeats")


class StepFailed(Exception):
    """A step could not do what the scenario needs (a wait that timed out, a request refused): the scenario stops,
    the message names the step and what it last saw."""


class Step(object):
    """One row of a scenario's table: ``action`` (an executor method ``do_<action>``), a ``title`` (its words in
    the result's ``steps``; ``{name}`` is filled from the plan), ``when`` (a plan value that must be true, or None)
    and the action's arguments."""

    def __init__(self, action, title, when=None, **args):
        self.action, self.title, self.when, self.args = action, title, when, args


class Scenario(object):
    def __init__(self, plan, steps, judges):
        self.plan, self.steps, self.judges = plan, steps, judges


# --- plans ------------------------------------------------------------------------------------------------------

def _common(run):
    return {"a": run.tenants[0], "b": run.tenants[1], "prometheus": run.prometheus is not None,
            "real_gpus": not run.pod["simulated"]}


def baseline_plan(run):
    plan = _common(run)
    plan.update(scenario="baseline", jobs=run.settings["baseline_jobs"], seconds=run.settings["baseline_seconds"],
                workloads=2 * run.settings["baseline_jobs"])
    return plan


def flood_plan(reverse):
    def plan(run):
        values = _common(run)
        flooder, arriver = (values["b"], values["a"]) if reverse else (values["a"], values["b"])
        settings = run.settings
        capacity = run.capacity["resources"][flooder["gpu_resource"]]
        count = capacity + settings["flood_extra_jobs"]
        reach = reachable(run.all_tenants, flooder["name"])
        values.update(scenario="flood_reverse" if reverse else "flood", flooder=flooder, arriver=arriver,
                      reach=reach, capacity=capacity, flood_jobs=count, backlog=settings["flood_backlog_jobs"],
                      backlog_start=count, seconds=settings["flood_seconds"],
                      pending=count + settings["flood_backlog_jobs"] - reach, guarantee=arriver["gpus"],
                      reserve_timeout=4 * settings["guarantee_bound_seconds"],
                      running_timeout=3 * settings["running_bound_seconds"], workloads=count + arriver["gpus"])
        return values
    return plan


def fault_flood_plan(scenario):
    """The plan of a fault in a flood (kueue_restart, control_plane_restart): the flooder holds every GPU it may
    reach with its Jobs still running when the component comes back (they run the outage plus the flood's run
    time), a few more queued behind them; the arriver submits its guarantee once the component is back."""
    def plan(run):
        values = flood_plan(False)(run)
        settings = run.settings
        reach = dict((t["name"], reachable(run.all_tenants, t["name"])) for t in (values["a"], values["b"]))
        # The waits outlast what the judges allow (the bound, and after a control-plane outage the relist backoff
        # on top), so that a slow recovery is judged, not cut short by the wait.
        allowance = scenarios.RELIST_BACKOFF_SECONDS
        values.update(scenario=scenario, backlog=0, pending=values["flood_jobs"] - values["reach"],
                      seconds=int(settings["fault_down_seconds"]) + int(settings["flood_seconds"]),
                      reach_by_queue=reach, down_seconds=settings["fault_down_seconds"],
                      refused_start=values["arriver"]["gpus"], workloads=values["flood_jobs"] + values["arriver"]["gpus"],
                      reserve_timeout=2 * (float(settings["fault_guarantee_bound_seconds"]) + allowance),
                      running_timeout=2 * (float(settings["running_bound_seconds"]) + allowance))
        return values
    return plan


def prometheus_restart_plan(run):
    """The flooder holds every GPU it may reach with Jobs that outlast the over-guarantee alert's for:, the outage and
    the wait for the alert to fire again; nobody arrives, so the alert holds throughout."""
    values = _common(run)
    flooder = values["a"]
    alert_for = int(duration_seconds(run.alert_for))
    down = int(run.settings["fault_down_seconds"])
    values.update(scenario="prometheus_restart", flooder=flooder, reach=reachable(run.all_tenants, flooder["name"]),
                  down_seconds=down, seconds=alert_for + down + 120)
    return values


def gpu_node_loss_plan(run):
    """Both tenants hold their guarantee with one-GPU Jobs that outlast the loss (the outage and a flood's run
    time); every tenant's guarantee counts for the capacity the node's loss leaves."""
    values = _common(run)
    a, b = values["a"], values["b"]
    settings = run.settings
    values.update(scenario="gpu_node_loss", a_jobs=a["gpus"], b_jobs=b["gpus"], workloads=a["gpus"] + b["gpus"],
                  seconds=int(settings["fault_down_seconds"]) + int(settings["flood_seconds"]),
                  guaranteed=sum(t["gpus"] for t in run.all_tenants),
                  resources=sorted(set(t["gpu_resource"] for t in run.all_tenants)))
    return values


def noisy_neighbour_plan(run):
    """The first tenant is the victim, the second its neighbour; on path mig (MIG resources) they share a GPU's
    instances, otherwise each has whole GPUs of one node (noisy.PLACEMENTS)."""
    values = _common(run)
    victim, neighbour = values["a"], values["b"]
    if any((p.get("replicas") or 1) > 1 for t in (victim, neighbour) for p in t.get("products") or []):
        placement = "shared_gpu"  # time-slicing or MPS replicas: two "GPUs" may be one, never a promise
    elif all(t["gpu_resource"].startswith(MIG_RESOURCE_PREFIX) for t in (victim, neighbour)):
        placement = "mig_instances"
    else:
        placement = "own_gpus"
    values.update(scenario="noisy_neighbour", victim=victim, neighbour=neighbour, placement=placement,
                  seconds=int(run.settings["noisy_seconds"]), repeats=int(run.settings["noisy_repeats"]))
    return values


def mig_plan(run):
    plan = _common(run)
    a, b, extra = plan["a"], plan["b"], run.settings["mig_extra_jobs"]
    plan.update(scenario="mig", extra=extra, a_jobs=a["gpus"] + extra, seconds=run.settings["mig_seconds"],
                workloads=a["gpus"] + b["gpus"] + extra)
    return plan


# --- judges (over what the steps kept) ------------------------------------------------------------------------

def judge_baseline(plan, kept, settings):
    a, b = plan["a"], plan["b"]
    return scenarios.baseline_result([a, b], plan["jobs"], {a["name"]: kept["admitted_a"], b["name"]: kept["admitted_b"]},
                                     kept["finished"], kept["jobs"])


def judge_flood(plan, kept, settings):
    pending = [w["job"] for w in kept["flooded"]["workloads"] if w["state"] == "pending"]
    held_back = {"jobs": [j for j in kept["flood_jobs_read"] if j["metadata"]["name"] in pending],
                 "pods": [p for p in kept["flood_pods_read"]
                          if ((p["metadata"].get("labels") or {}).get(JOB_NAME_LABEL)) in pending]}
    return _with_noise(scenarios.flood_result(
        plan["scenario"], plan["flooder"], plan["arriver"], plan["reach"], plan["capacity"], plan["flood_jobs"],
        kept["flooded"], held_back, kept["arrival_ts"], kept["arrived"], kept["after"], kept["finished"],
        kept["all_jobs"], kept["events"], float(settings["guarantee_bound_seconds"]), running=kept["running"],
        running_bound_seconds=float(settings["running_bound_seconds"]), backlog=plan["backlog"],
        accounting_grace_seconds=float(settings["accounting_grace_seconds"])), kept)


def judge_alerts(plan, kept, settings):
    if not plan["prometheus"]:
        return None
    expected = kept["alert_for"]
    result = alert_checks.alert_result(
        plan["scenario"], plan["flooder"], plan["arriver"], kept["flood_start"], kept["series"]["alerts"],
        kept["rule_groups"], [expected, duration_seconds(expected)], kept["series"]["dcgm_pods"],
        duration_seconds(settings["prometheus_step"]), kept["plots"])
    if kept.get("screenshot_note"):
        result["notes"] = [kept["screenshot_note"]]
    return result


def judge_kueue_restart(plan, kept, settings):
    kueue_down = None
    if plan["prometheus"] and kept.get("alerts") is not None:
        kueue_down = alert_checks.kueue_down_check(kept["alerts"], kept["fault"]["ts"], kept["back"]["ts"],
                                                   duration_seconds(kept["kueue_down_for"]),
                                                   duration_seconds(settings["prometheus_step"]))
    during = dict(kept["during"], pods=kept["during_pods"])
    result = scenarios.kueue_restart_result(
        plan["flooder"], plan["arriver"], plan["reach_by_queue"], plan["flood_jobs"], kept["fault"], during,
        kept["back"], kept["arrival_ts"], kept["arrived"], kept["finished"], kept["all_jobs"], kept["all_pods"],
        float(settings["fault_guarantee_bound_seconds"]), float(settings["accounting_grace_seconds"]), kueue_down,
        earlier=kept["flooded"]["timeline"] + kept["down"]["timeline"])
    return _with_noise(result, kept)


def judge_control_plane_restart(plan, kept, settings):
    result = scenarios.control_plane_restart_result(
        plan["flooder"], plan["arriver"], plan["reach_by_queue"], plan["flood_jobs"], kept["fault"], kept["back"],
        kept["workloads_before"], kept["workloads_after"], kept["workloads_later"], kept["arrival_ts"], kept["arrived"],
        kept["running"], kept["finished"], kept["all_jobs"], kept["all_pods"], kept["events"],
        float(settings["fault_guarantee_bound_seconds"]), float(settings["accounting_grace_seconds"]),
        running_bound_seconds=float(settings["running_bound_seconds"]), earlier=kept["flooded"]["timeline"])
    return _with_noise(result, kept)


def judge_gpu_node_loss(plan, kept, settings):
    result = scenarios.gpu_node_loss_result(
        [plan["a"], plan["b"]], kept["fault"], kept["tainted"], kept["deleted"], kept["gone"], kept["back"],
        kept.get("capacity_alert"), kept["workloads_before"], kept["workloads_after"], kept["all_jobs"],
        kept["all_pods"], kept["finished"], plan["guaranteed"])
    return _with_noise(result, kept)


def judge_noisy_neighbour(plan, kept, settings):
    victim, neighbour = plan["victim"]["name"], plan["neighbour"]["name"]
    if not plan["real_gpus"]:
        return noisy.not_measured(victim, neighbour, "the GPUs are simulated (kwok nodes run no load, so there is "
                                  "no throughput to compare); tests/bench/noisy_neighbour.py measures a bare host")
    runs = kept["noisy"]
    where = "node %s, %s and %s; the runs alone and beside may use different devices of the node%s" % (
        runs["node"], plan["victim"]["gpu_resource"], plan["neighbour"]["gpu_resource"],
        "; instances of one GPU only where the node has one MIG-partitioned GPU (not verified)"
        if plan["placement"] == "mig_instances" else "")
    return noisy.judge(victim, neighbour, {plan["placement"]: dict(runs, where=where)}, expect_gpu=True)


def _with_noise(result, kept):
    """The scenario's result with Kueue's noise (``kept["noise"]``, ``monitoring.checks.kueue_noise``) added to its
    metrics and notes; and what the embedded cluster cannot show (``kept["differs"]``)."""
    metrics, notes = kept.get("noise") or ({}, [])
    result["metrics"].update(metrics)
    result["notes"] = list(result.get("notes") or []) + list(notes) + list(kept.get("differs") or [])
    return result


def judge_prometheus_restart(plan, kept, settings):
    result = alert_checks.prometheus_restart_result(
        plan["flooder"], kept["fault"], kept["back"], kept["before"], kept["after"],
        alert_checks.rule_durations(kept.get("rules") or []).get(OVER_GUARANTEE),
        duration_seconds(settings["prometheus_step"]))
    return _with_noise(result, kept)


def judge_mig(plan, kept, settings):
    a, b = plan["a"], plan["b"]
    started = [p for p in kept["pods"] if (p.get("status") or {}).get("phase") in ("Running", "Succeeded")]
    return scenarios.mig_result([a, b], {a["name"]: a["gpus"], b["name"]: b["gpus"]}, plan["extra"],
                                {a["name"]: kept["held"], b["name"]: kept["admitted_b"]}, kept["held"], kept["done"],
                                started, kept.get("smi"))


# --- the tables -------------------------------------------------------------------------------------------------

def _flood(reverse):
    return Scenario(flood_plan(reverse), [
        Step("prometheus_quiet", "start with no fairgpu alert active on Prometheus", when="prometheus"),
        Step("submit", "the flooder {flooder[name]} submits {flood_jobs} one-GPU Jobs, then a backlog of {backlog}",
             jobs=[("flooder", "flood_jobs", 0, False), ("flooder", "backlog", "backlog_start", True)]),
        Step("wait", "until the flooder holds every GPU it can reach ({reach})", queue="flooder",
             until={"reserved_at_least": "reach"}, pods=True, gpu_pods=True, timeout=60),
        # Kueue counts the last Jobs as pending a moment after it has admitted the first ones: wait for all of
        # them, then read both from one sample; what it saw is judged, a timeout is no failure here.
        Step("wait", "until the rest of the flooder's Jobs and its backlog are queued ({pending})", queue="flooder",
             until={"pending_at_least": "pending"}, pods=True, gpu_pods=True, timeout=30, save="flooded",
             may_time_out=True),
        Step("read", "the Jobs of the queued workloads", kind="Job", tenant="flooder", save="flood_jobs_read"),
        Step("read", "the pods of the queued workloads", kind="Pod", tenant="flooder", save="flood_pods_read"),
        Step("mark", "the time the arriver {arriver[name]} submits", save="arrival_ts"),
        Step("submit", "the arriver {arriver[name]} submits one one-GPU Job per guaranteed GPU ({guarantee})",
             jobs=[("arriver", "guarantee", 0, False)]),
        # The time-to-guarantee: read without the pods on the nodes, whose cluster-wide list would space the samples.
        Step("wait", "until Kueue reserves the arriver's guarantee, the time-to-guarantee", queue="arriver",
             until={"reserved_at_least": "guarantee"}, pods=True, timeout="reserve_timeout", poll=FAST_POLL,
             save="arrived"),
        Step("read_admission", "what Kueue did to the flooder", tenant="flooder", save="after"),
        Step("read", "the Events of the flooder's Workloads", kind="Event", tenant="flooder",
             field_selector="involvedObject.kind=Workload", save="events"),
        Step("wait", "until the arriver's pods run on its guarantee, the time-to-guarantee in use", queue="arriver",
             until={"started_at_least": "guarantee"}, pods=True, gpu_pods=True, timeout="running_timeout",
             poll=FAST_POLL, save="running"),
        Step("delete_backlog", "the flooder deletes its backlog", when="backlog", tenant="flooder"),
        Step("wait", "until every Job has finished", tenant="flooder", until={"all_finished": True,
             "workloads_at_least": "workloads"}, pods=True, gpu_pods=True, timeout="finish_timeout", save="finished"),
        Step("read", "every Job of the scenario", kind="Job", save="all_jobs"),
        Step("prometheus_alerts", "what Prometheus saw: the over-guarantee alert, its series and plot",
             when="prometheus"),
        Step("prometheus_noise", "Kueue's own errors and evictions during the flood, from its metrics",
             when="prometheus"),
        Step("cleanup", "clean up"),
    ], [judge_flood, judge_alerts])


# Once the broken component is back: the arriver submits its guarantee and Kueue's reservation of it is timed (the
# rows both flood faults share).
ARRIVAL_AFTER_FAULT = [
    Step("mark", "the time the arriver {arriver[name]} submits", save="arrival_ts"),
    Step("submit", "the arriver {arriver[name]} submits one one-GPU Job per guaranteed GPU ({guarantee})",
         jobs=[("arriver", "guarantee", 0, False)]),
    Step("wait", "until Kueue reserves the arriver's guarantee, the time-to-guarantee after the restart",
         queue="arriver", until={"reserved_at_least": "guarantee"}, pods=True, timeout="reserve_timeout",
         poll=FAST_POLL, save="arrived"),
]


KUEUE_RESTART = Scenario(fault_flood_plan("kueue_restart"), [
    Step("prometheus_quiet", "start with no fairgpu alert active on Prometheus", when="prometheus"),
    Step("submit", "the flooder {flooder[name]} submits {flood_jobs} one-GPU Jobs of {seconds} s",
         jobs=[("flooder", "flood_jobs", 0, False)]),
    Step("wait", "until the flooder holds every GPU it can reach ({reach})", queue="flooder",
         until={"reserved_at_least": "reach"}, pods=True, gpu_pods=True, timeout=60),
    Step("wait", "until the rest of the flooder's Jobs are queued ({pending})", queue="flooder",
         until={"pending_at_least": "pending"}, pods=True, gpu_pods=True, timeout=30, save="flooded",
         may_time_out=True),
    Step("fault_stop", "Kueue goes down", component="kueue", save="fault"),
    Step("try_submit", "the arriver {arriver[name]} creates a Job while Kueue is down", tenant="arriver",
         start="refused_start", save="during"),
    Step("hold", "Kueue stays down for {down_seconds} s (Kueue's objects read on)", seconds="down_seconds",
         tenant="flooder", save="down"),
    Step("read", "the arriver's pods while Kueue is down", kind="Pod", tenant="arriver", save="during_pods"),
    Step("fault_start", "Kueue comes back", component="kueue", save="back"),
] + ARRIVAL_AFTER_FAULT + [
    Step("wait", "until every Job has finished", tenant="flooder", until={"all_finished": True,
         "workloads_at_least": "workloads"}, pods=True, gpu_pods=True, timeout="finish_timeout", save="finished"),
    Step("read", "every Job of the scenario", kind="Job", save="all_jobs"),
    Step("read", "every pod of the scenario", kind="Pod", save="all_pods"),
    Step("prometheus_kueue", "what Prometheus saw: FairgpuKueueDown and Kueue's own errors", when="prometheus"),
    Step("cleanup", "clean up"),
], [judge_kueue_restart])


CONTROL_PLANE_RESTART = Scenario(fault_flood_plan("control_plane_restart"), [
    Step("submit", "the flooder {flooder[name]} submits {flood_jobs} one-GPU Jobs of {seconds} s",
         jobs=[("flooder", "flood_jobs", 0, False)]),
    # Its pods run before the outage: Kueue's waitForPodsReady counts from the admission, outage included, so
    # Workloads admitted just before it whose pods could not start meanwhile are evicted (PodsReadyTimeout) when
    # the timeout is short (docs/failures.md).
    Step("wait", "until the flooder holds every GPU it can reach ({reach}) with its pods running", queue="flooder",
         until={"reserved_at_least": "reach", "running_at_least": "reach"}, pods=True, gpu_pods=True, timeout=90),
    Step("wait", "until the rest of the flooder's Jobs are queued ({pending})", queue="flooder",
         until={"pending_at_least": "pending"}, pods=True, gpu_pods=True, timeout=30, save="flooded",
         may_time_out=True),
    Step("read", "the tenants' Workloads before the outage", kind="Workload", save="workloads_before"),
    Step("fault_stop", "etcd and the API server go down", component="control_plane", save="fault"),
    Step("pause", "they stay down for {down_seconds} s (nothing of the cluster can be read)", seconds="down_seconds"),
    Step("fault_start", "etcd and the API server come back", component="control_plane", save="back"),
    Step("read", "the tenants' Workloads once the API server is back", kind="Workload", save="workloads_after"),
] + ARRIVAL_AFTER_FAULT + [
    Step("read", "the tenants' Workloads once Kueue works again", kind="Workload", save="workloads_later"),
    Step("wait", "until the arriver's pods run on its guarantee (the scheduler and the Job controller back too)",
         queue="arriver", until={"started_at_least": "guarantee"}, pods=True, gpu_pods=True,
         timeout="running_timeout", poll=FAST_POLL, save="running"),
    Step("wait", "until every Job has finished", tenant="flooder", until={"all_finished": True,
         "workloads_at_least": "workloads"}, pods=True, gpu_pods=True, timeout="finish_timeout", save="finished"),
    Step("read", "every Job of the scenario", kind="Job", save="all_jobs"),
    Step("read", "every pod of the scenario", kind="Pod", save="all_pods"),
    Step("read", "the Events of the tenants' pods (marked not ready or evicted for their node)", kind="Event",
         field_selector="involvedObject.kind=Pod", save="events"),
    Step("prometheus_noise", "Kueue's own errors and evictions, from its metrics", when="prometheus"),
    Step("cleanup", "clean up"),
], [judge_control_plane_restart])


PROMETHEUS_RESTART = Scenario(prometheus_restart_plan, [
    Step("prometheus_quiet", "start with no fairgpu alert active on Prometheus"),
    Step("submit", "the flooder {flooder[name]} submits {reach} one-GPU Jobs of {seconds} s",
         jobs=[("flooder", "reach", 0, False)]),
    Step("wait", "until the flooder holds every GPU it can reach ({reach})", queue="flooder",
         until={"reserved_at_least": "reach"}, pods=True, timeout=60, save="flooded"),
    Step("prometheus_firing", "until Prometheus fires the over-guarantee alert for the flooder", save="before"),
    Step("fault_stop", "Prometheus goes down", component="prometheus", save="fault"),
    Step("hold", "Prometheus stays down for {down_seconds} s", seconds="down_seconds", tenant="flooder", save="down"),
    Step("fault_start", "Prometheus comes back", component="prometheus", save="back"),
    Step("prometheus_firing", "until the alert fires again, timed from Prometheus's return", save="after",
         may_time_out=True),
    Step("cleanup", "clean up"),
], [judge_prometheus_restart])


# A GPU node goes away while both tenants use their guarantees (docs/failures.md): the node lifecycle controller
# taints it within its monitor period (--node-monitor-period: 5 s upstream, 25 s as kwokctl v0.8.0 runs it), PodGC
# removes the pods of a deleted node after 40 s of quarantine, checked every 20 s (kubernetes v1.36.3
# pkg/controller/podgc/gc_controller.go, quarantineTime, gcCheckPeriod); the waits allow twice that.
GPU_NODE_LOSS = Scenario(gpu_node_loss_plan, [
    Step("mark", "the time the scenario starts", save="start_ts"),
    Step("submit", "both tenants submit one one-GPU Job of {seconds} s per guaranteed GPU ({a[name]}: {a_jobs}, "
         "{b[name]}: {b_jobs})", jobs=[("a", "a_jobs", 0, False), ("b", "b_jobs", 0, False)]),
    Step("wait_pods_started", "until every admitted pod has started", save="started"),
    Step("read", "the tenants' Workloads before the loss", kind="Workload", save="workloads_before"),
    Step("fault_stop", "the GPU node running most of their pods stops reporting (not ready)", component="gpu_node",
         save="fault"),
    Step("node_watch", "until the node lifecycle controller taints it not ready", condition="tainted", timeout=120,
         save="tainted"),
    Step("prometheus_capacity", "until Prometheus fires FairgpuGuaranteesOverCapacity", when="prometheus",
         save="capacity_alert"),
    Step("node_delete", "the Node is deleted (its machine is gone)", save="deleted"),
    Step("node_watch", "until PodGC has removed its pods", condition="pods_gone", timeout=180, save="gone"),
    Step("fault_start", "a node of the same name joins again", component="gpu_node", save="back"),
    Step("wait", "until every Job has finished", tenant="a", until={"all_finished": True,
         "workloads_at_least": "workloads"}, pods=True, gpu_pods=True, timeout="finish_timeout", save="finished"),
    Step("read", "the tenants' Workloads at the end", kind="Workload", save="workloads_after"),
    Step("read", "every Job of the scenario", kind="Job", save="all_jobs"),
    Step("read", "every pod of the scenario", kind="Pod", save="all_pods"),
    Step("prometheus_noise", "Kueue's own errors and evictions, from its metrics", when="prometheus",
         since="start_ts"),
    Step("cleanup", "clean up"),
], [judge_gpu_node_loss])


# The task's acceptance criterion (issue 28): the victim's load alone, then beside its neighbour's on the same node,
# noisy_repeats times each, alternating; throughput from the load generator's line in each pod's log. Nothing runs
# where the GPUs are simulated: the judge says so.
NOISY_NEIGHBOUR = Scenario(noisy_neighbour_plan, [
    Step("noisy_runs", "{victim[name]} alone, then beside {neighbour[name]} on one node, {repeats} times each "
         "({seconds} s runs)", when="real_gpus", save="noisy"),
    Step("cleanup", "clean up"),
], [judge_noisy_neighbour])


SCENARIOS = {
    "baseline": Scenario(baseline_plan, [
        Step("submit", "{jobs} one-GPU Jobs per tenant", jobs=[("a", "jobs", 0, False), ("b", "jobs", 0, False)]),
        Step("wait", "until {a[name]}'s Jobs are admitted", queue="a", until={"admitted_at_least": "jobs"},
             timeout=60, save="admitted_a"),
        Step("wait", "until {b[name]}'s Jobs are admitted", queue="b", until={"admitted_at_least": "jobs"},
             timeout=60, save="admitted_b"),
        Step("wait", "until every Job has finished", until={"all_finished": True, "workloads_at_least": "workloads"},
             timeout="finish_timeout", save="finished"),
        Step("read", "the Jobs", kind="Job", save="jobs"),
        Step("cleanup", "clean up"),
    ], [judge_baseline]),
    "flood": _flood(False),
    "flood_reverse": _flood(True),
    # Kueue killed while one tenant floods and the other arrives (docs/failures.md).
    "kueue_restart": KUEUE_RESTART,
    # etcd and the API server killed while one tenant floods; the other arrives once they are back.
    "control_plane_restart": CONTROL_PLANE_RESTART,
    # A GPU node of the embedded cluster lost and replaced while both tenants use their guarantees.
    "gpu_node_loss": GPU_NODE_LOSS,
    # Prometheus killed while the over-guarantee alert fires (docs/failures.md).
    "prometheus_restart": PROMETHEUS_RESTART,
    "noisy_neighbour": NOISY_NEIGHBOUR,
    # Path mig: each tenant runs one 1-device Job per MIG device of its guarantee; the first also asks for
    # mig_extra_jobs more than its quota.
    "mig": Scenario(mig_plan, [
        Step("submit", "one-device Jobs per tenant, {extra} more than its quota for {a[name]}",
             jobs=[("a", "a_jobs", 0, False), ("b", "b_jobs", 0, False)]),
        # The one wait that must be a single observation: the guarantee admitted while the extra Jobs wait.
        Step("wait", "until {a[name]}'s guaranteed Jobs are admitted while those above its quota wait", queue="a",
             until={"admitted_at_least": "a_gpus", "pending_at_least": "extra"}, timeout=60, save="held"),
        Step("wait", "until {b[name]}'s guaranteed Jobs are admitted", queue="b",
             until={"admitted_at_least": "b_gpus"}, timeout=60, save="admitted_b"),
        Step("wait_pods_started", "until every admitted pod has started", save="pods"),
        Step("nvidia_smi", "nvidia-smi -L in each running pod (real GPUs only)", when="real_gpus", save="smi"),
        Step("wait", "until every Job has finished", tenant="a", until={"all_finished": True,
             "workloads_at_least": "workloads"}, timeout="finish_timeout", save="done"),
        Step("cleanup", "clean up"),
    ], [judge_mig]),
}


def _mig_values(plan):
    plan["a_gpus"], plan["b_gpus"], plan["b_jobs"] = plan["a"]["gpus"], plan["b"]["gpus"], plan["b"]["gpus"]
    return plan


# --- the executor -------------------------------------------------------------------------------------------------

class Run(object):
    """One scenario on one cluster. ``client``: kubernetes.core's K8SClient; ``waiter``: the clock of every wait;
    ``tenants``: the two tenants of the A/B test (normalised), ``all_tenants`` every tenant of the plan,
    ``namespaces`` the first namespace of each; ``capacity``: the plan's (``tenants/plan.py`` cluster_capacity);
    ``suffix``: the LocalQueue suffix; ``settings``: SETTING_NAMES; ``pod``: the load pods' image, memory fraction,
    user, group and whether the GPUs are simulated (``load.job_manifest``); ``load_script``: files/gpu_load.py's
    text; ``prometheus``: a ``Prometheus`` or None; ``exec_in_pod(namespace, pod, argv)``: its stdout (real GPUs);
    ``draw(path, title, start, panels, spans)``: writes a PNG, returns whether it did; ``results_dir``: where;
    ``faults``: how to break each component a fault scenario breaks (``{component: faults.fault's spec}``);
    ``screenshot(path, start, end)``: saves the dashboard page over that window (Unix seconds) as a PNG, returns
    None or why it did not (None: no page to screenshot)."""

    def __init__(self, client, waiter, tenants, all_tenants, capacity, suffix, settings, pod, load_script,
                 prometheus=None, exec_in_pod=None, draw=None, results_dir=".", alert_for="5m", faults=None,
                 screenshot=None):
        self.client, self.waiter, self.tenants, self.all_tenants = client, waiter, tenants, all_tenants
        self.capacity, self.suffix, self.settings, self.pod = capacity, suffix, settings, pod
        self.load_script, self.prometheus, self.exec_in_pod, self.draw = load_script, prometheus, exec_in_pod, draw
        self.results_dir, self.alert_for, self.faults = results_dir, alert_for, faults or {}
        self.screenshot = screenshot
        self.broken = {}
        self.namespaces = [t["namespaces"][0] for t in all_tenants]

    # -- running a table ---------------------------------------------------------------------------------------
    def run(self, name):
        """Run scenario ``name``; returns ``(results, steps)``: the report's entries (the scenario's, and its alerts'
        where Prometheus judged them) and ``[{"step", "seconds", "skipped"}]``."""
        scenario = SCENARIOS[name]
        plan = scenario.plan(self)
        if name == "mig":
            plan = _mig_values(plan)
        kept, steps = {}, []
        self.prepare()
        for step in scenario.steps:
            title = step.title.format(**plan)
            if step.when is not None and not plan[step.when]:
                steps.append({"step": title, "seconds": 0.0, "skipped": True})
                continue
            start = self.waiter.monotonic()
            try:
                getattr(self, "do_" + step.action)(plan, kept, title, **step.args)
            except (reader.ReadError, faults.FaultError) as exc:
                raise StepFailed("%s: %s%s" % (title, exc, self.repair()))
            except StepFailed as exc:
                raise StepFailed("%s%s" % (exc, self.repair()))
            except Exception:
                self.repair()
                raise
            steps.append({"step": title, "seconds": round(self.waiter.monotonic() - start, 1), "skipped": False})
        results = [judge(plan, kept, self.settings) for judge in scenario.judges]
        return [r for r in results if r is not None], steps

    def repair(self):
        """Bring back what a fault scenario took down when it stops before its ``fault_start``; the words to add to
        its error (what was started again, or what could not be and how to do it by hand)."""
        said = []
        for component, injector in sorted(self.broken.items()):
            try:
                injector.start()
                said.append("%s started again" % faults.NAMES[component])
            except faults.FaultError as exc:
                said.append(str(exc))
        self.broken = {}
        return "".join("; " + words for words in said)

    def value(self, plan, given):
        """A step's argument: a string naming a plan value stands for it, or a setting; anything else is itself."""
        if isinstance(given, str) and given in plan:
            return plan[given]
        if isinstance(given, str) and given in self.settings:
            return self.settings[given]
        return given

    # -- cluster access ----------------------------------------------------------------------------------------
    def resource(self, kind, api_version):
        return self.client.resource(kind, api_version)

    def items(self, kind, api_version, namespace, **selectors):
        return self.client.get(self.resource(kind, api_version), namespace=namespace, **selectors).to_dict()["items"]

    def prepare(self):
        """The load script in every tenant namespace (server-side apply), and the Jobs of an earlier run gone."""
        configmaps = self.resource("ConfigMap", "v1")
        for namespace in self.namespaces:
            body = {"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": LOAD_SCRIPT_CONFIGMAP, "namespace": namespace,
                                 "labels": dict(MANAGED_BY)},
                    "data": {"gpu_load.py": self.load_script}}
            self.client.apply(configmaps, body, namespace=namespace, server_side=True, field_manager="fairgpu",
                              force_conflicts=True)
        self.do_cleanup(None, None, "clean up what an earlier validation left")

    # -- the actions -----------------------------------------------------------------------------------------------
    def do_submit(self, plan, kept, title, jobs):
        """Create the load Jobs ``jobs``: ``(tenant, count, first index, backlog)`` rows, in order."""
        resource = self.resource("Job", "batch/v1")
        for who, count, start, backlog in jobs:
            tenant = plan[who]
            for job in scenarios.load_jobs(tenant, self.value(plan, count), plan["scenario"], plan["seconds"],
                                           self.suffix, start=self.value(plan, start), backlog=backlog):
                self.client.create(resource, job_manifest(job, self.pod), namespace=job["namespace"])

    def do_wait(self, plan, kept, title, until, timeout, save=None, queue=None, tenant=None, pods=False,
                gpu_pods=False, poll=POLL, may_time_out=False):
        """Read Kueue's decisions until ``until`` holds (``status.condition_met``) for ``queue``'s tenant;
        ``tenant``: whose accelerator resource is counted (default the queue's)."""
        who = plan[queue or tenant] if (queue or tenant) else None
        wait_for = dict((key, self.value(plan, given)) for key, given in until.items())
        if queue:
            wait_for["queue"] = who["name"]
        reading = dict(namespaces=self.namespaces, pods=pods, gpu_pods=gpu_pods)
        if who is not None:
            reading["resource"] = who["gpu_resource"]
        limit = self.value(plan, timeout)
        met, info, elapsed, timeline = reader.wait(self.client, self.waiter, wait_for, limit, poll, **reading)
        if not met and not may_time_out:
            raise StepFailed("%s: Kueue did not reach %s within %s s (last read: %s)" % (
                title, wait_for, limit, _queues_seen(info)))
        if save:
            kept[save] = dict(info, elapsed=elapsed, timeline=timeline)

    def do_read_admission(self, plan, kept, title, tenant, save):
        kept[save] = dict(reader.read(self.client, namespaces=self.namespaces, resource=plan[tenant]["gpu_resource"]),
                          elapsed=0.0, timeline=[])

    def do_read(self, plan, kept, title, kind, save, tenant=None, field_selector=None):
        """Read ``kind`` (Job, Pod, Event, Workload) of the scenario: in ``tenant``'s first namespace or every tenant
        namespace; labelled with the scenario (Jobs, Pods), by ``field_selector``, or the load Jobs' Workloads."""
        api_version = {"Job": "batch/v1", "Workload": KUEUE_API}.get(kind, "v1")
        namespaces = [plan[tenant]["namespaces"][0]] if tenant else self.namespaces
        if kind == "Workload":  # Kueue names them after their Job; they carry none of its labels
            kept[save] = [w for namespace in namespaces for w in self.items(kind, api_version, namespace)
                          if LOAD_JOB_PREFIX in w["metadata"]["name"]]
            return
        selectors = {"field_selector": field_selector} if field_selector else {
            "label_selector": "%s=%s" % (VALIDATION_LABEL, plan["scenario"])}
        kept[save] = [item for namespace in namespaces for item in self.items(kind, api_version, namespace, **selectors)]

    def do_mark(self, plan, kept, title, save):
        kept[save] = self.waiter.wall()

    def do_delete_backlog(self, plan, kept, title, tenant):
        self.delete_jobs(plan[tenant]["namespaces"][0], "%s=true" % BACKLOG_LABEL)

    def do_wait_pods_started(self, plan, kept, title, save):
        """Until each tenant's started pods (Running, or already Succeeded: a short Job can be done before the
        tenant's last pod starts) are at least its guarantee; keeps the last read of every tenant namespace's."""
        wanted = dict((t["namespaces"][0], t["gpus"]) for t in (plan["a"], plan["b"]))

        def read():
            return dict((ns, self.items("Pod", "v1", ns, label_selector="%s=%s" % (VALIDATION_LABEL, plan["scenario"])))
                        for ns in self.namespaces)

        def started(found):
            return all(sum((p.get("status") or {}).get("phase") in ("Running", "Succeeded") for p in found[ns]) >= want
                       for ns, want in wanted.items())

        held, found, _elapsed = self.waiter.wait(read, 60, 2, started)
        if not held:
            raise StepFailed("%s: not within 60 s (%s)" % (title, ", ".join(
                "%s: %d started" % (ns, sum((p.get("status") or {}).get("phase") in ("Running", "Succeeded")
                                            for p in found[ns])) for ns in sorted(wanted))))
        kept[save] = [p for ns in self.namespaces for p in found[ns]]

    def do_nvidia_smi(self, plan, kept, title, save):
        running = [p for p in kept["pods"] if (p.get("status") or {}).get("phase") == "Running"]
        kept[save] = dict((p["metadata"]["name"], parse_list(self.exec_in_pod(
            p["metadata"]["namespace"], p["metadata"]["name"], ["nvidia-smi", "-L"]))) for p in running)

    def do_fault_stop(self, plan, kept, title, component, save):
        """Take ``component`` down (``faults.py``); keeps ``{"how", "ts", ...}``, ts the Unix time just before."""
        try:
            injector = faults.fault(component, self.faults.get(component), self.client, self.waiter,
                                    pod_selector="%s=%s" % (VALIDATION_LABEL, plan["scenario"]),
                                    resources=plan.get("resources") or ())
        except faults.FaultError as exc:
            raise StepFailed("%s: %s" % (title, exc))
        started = self.waiter.wall()
        try:
            kept[save] = dict(injector.stop(), ts=started)
        finally:
            if injector.touched:  # run() brings it back if this or a later step fails
                self.broken[component] = injector
        kept["differs"] = [injector.differs]

    def do_fault_start(self, plan, kept, title, component, save):
        """Bring ``component`` back and wait until it is ready; keeps ``{"ts": ready, "ready_seconds", ...}``."""
        try:
            kept[save] = dict(self.broken.pop(component).start(), ts=self.waiter.wall())
        except faults.FaultError as exc:
            raise StepFailed("%s: %s" % (title, exc))

    def do_node_delete(self, plan, kept, title, save):
        """Delete the lost node (the ``gpu_node`` fault's); keeps ``{"node", "ts"}``."""
        kept[save] = dict(self.broken["gpu_node"].delete(), ts=self.waiter.wall())

    def do_node_watch(self, plan, kept, title, condition, timeout, save):
        """Read the lost node until ``condition`` holds: ``tainted`` (a taint of the node lifecycle controller's for a
        node not ready) or ``pods_gone`` (none of the pods it ran is left); keeps ``{"held", "seconds" (since the
        fault began, or since the deletion for pods_gone), "ts", "taints" | "left"}``. Not holding is judged."""
        node = kept["fault"]["node"]
        since = kept["deleted"]["ts"] if condition == "pods_gone" else kept["fault"]["ts"]
        nodes, pods = self.resource("Node", "v1"), self.resource("Pod", "v1")

        def taints():
            try:
                found = self.client.get(nodes, name=node).to_dict()
            except NotFoundError:
                return []
            return sorted(set(t["key"] for t in (found.get("spec") or {}).get("taints") or []
                              if t.get("key") in faults.NOT_READY_TAINTS))

        def left():
            there = []
            for key in kept["fault"]["pods"]:
                namespace, name = key.split("/", 1)
                try:
                    self.client.get(pods, name=name, namespace=namespace)
                    there.append(key)
                except NotFoundError:
                    pass
            return there
        read, holds = (taints, bool) if condition == "tainted" else (left, lambda found: not found)
        held, found, _elapsed = self.waiter.wait(read, self.value(plan, timeout), POLL, holds)
        now = self.waiter.wall()
        kept[save] = {"held": held, "seconds": round(now - since, 1), "ts": now,
                      ("taints" if condition == "tainted" else "left"): found}

    def do_pause(self, plan, kept, title, seconds):
        """Let ``seconds`` pass, reading nothing (the API server is down)."""
        self.waiter.pause(float(self.value(plan, seconds)))

    def do_try_submit(self, plan, kept, title, tenant, start, save):
        """Create one load Job of ``tenant`` (index ``start``) that may be refused: keeps ``{"refused": the API
        server's answer or None, "job": the Job created or None}``."""
        job = scenarios.load_jobs(plan[tenant], 1, plan["scenario"], plan["seconds"], self.suffix,
                                  start=self.value(plan, start))[0]
        try:
            created = self.client.create(self.resource("Job", "batch/v1"), job_manifest(job, self.pod),
                                         namespace=job["namespace"])
        except DynamicApiError as exc:
            kept[save] = {"refused": "%s %s: %s" % (exc.status, exc.reason, api_message(exc) or exc.body), "job": None}
            return
        kept[save] = {"refused": None, "job": created.to_dict() if hasattr(created, "to_dict") else created}

    def do_hold(self, plan, kept, title, seconds, tenant, save):
        """Read Kueue's objects and the pods for ``seconds`` while something is down (a wait that never holds)."""
        never = {"all_finished": True, "workloads_at_least": 10 ** 9}
        _met, info, elapsed, timeline = reader.wait(
            self.client, self.waiter, never, self.value(plan, seconds), POLL, namespaces=self.namespaces, pods=True,
            gpu_pods=True, resource=plan[tenant]["gpu_resource"])
        kept[save] = dict(info, elapsed=elapsed, timeline=timeline)

    def do_noisy_runs(self, plan, kept, title, save):
        """The noisy-neighbour runs: on one node with room for both loads (``noisy_node``), ``repeats`` times the
        victim's one-device Job alone, then the victim's and the neighbour's together. Keeps ``{"node", "alone":
        [record], "beside": [(victim's record, neighbour's record)]}`` (noisy.load_records of each pod's log)."""
        victim, neighbour = plan["victim"], plan["neighbour"]
        node = self.noisy_node(victim, neighbour, title)
        runs = {"node": node, "alone": [], "beside": []}
        for repeat in range(plan["repeats"]):
            alone = self.noisy_job(plan, victim, 2 * repeat, node)
            runs["alone"].append(self.noisy_record(alone, title))
            pair = (self.noisy_job(plan, victim, 2 * repeat + 1, node), self.noisy_job(plan, neighbour, repeat, node))
            runs["beside"].append(tuple(self.noisy_record(job, title) for job in pair))
        kept[save] = runs

    def noisy_node(self, victim, neighbour, title):
        """A Ready, schedulable node with a free device for each load (two where both ask the same resource), of a
        GPU product each tenant's ResourceFlavors select (their nodeLabels, nvidia.com/gpu.product): its
        ``kubernetes.io/hostname`` label, which the load Jobs select (not always the Node's name). Free: allocatable
        less the requests of the pods on it that have not ended."""
        wanted = {}
        for tenant in (victim, neighbour):
            wanted[tenant["gpu_resource"]] = wanted.get(tenant["gpu_resource"], 0) + 1
        products = [set(p["product"] for p in t.get("products") or [] if p.get("product")) for t in (victim, neighbour)]
        used = {}
        for pod in self.items("Pod", "v1", None, field_selector="status.phase!=Succeeded,status.phase!=Failed"):
            node = (pod.get("spec") or {}).get("nodeName")
            for container in (pod.get("spec") or {}).get("containers") or []:
                for resource, count in ((container.get("resources") or {}).get("requests") or {}).items():
                    if node and resource in wanted:
                        used[(node, resource)] = used.get((node, resource), 0) + int(count)
        for node in self.items("Node", "v1", None):
            name, labels = node["metadata"]["name"], node["metadata"].get("labels") or {}
            ready = readiness.node_ready(node)
            offered = (node.get("status") or {}).get("allocatable") or {}
            selected = all(not wanted_products or labels.get(GPU_PRODUCT_LABEL) in wanted_products
                           for wanted_products in products)
            if ready and selected and labels.get(HOSTNAME_LABEL) and not (node.get("spec") or {}).get("unschedulable") \
                    and all(int(offered.get(r, 0)) - used.get((name, r), 0) >= n for r, n in wanted.items()):
                return labels[HOSTNAME_LABEL]
        raise StepFailed("%s: no Ready, schedulable node of %s has %s free" % (
            title, " and ".join(sorted(set.union(*products))) or "any GPU product",
            ", ".join("%d %s" % (n, r) for r, n in sorted(wanted.items()))))

    def noisy_job(self, plan, tenant, index, node):
        """Create one pinned load Job of ``tenant``; returns its description."""
        job = dict(scenarios.load_jobs(tenant, 1, plan["scenario"], plan["seconds"], self.suffix, start=index)[0],
                   node=node, device="cuda")
        self.client.create(self.resource("Job", "batch/v1"), job_manifest(job, self.pod), namespace=job["namespace"])
        return job

    def noisy_record(self, job, title):
        """Wait for ``job`` to succeed; the load generator's line in its pod's log."""
        def read():
            return self.items("Job", "batch/v1", job["namespace"], field_selector="metadata.name=%s" % job["name"])

        def done(found):
            status = (found[0].get("status") or {}) if found else {}
            return bool(status.get("succeeded") or status.get("failed"))

        ended, found, _elapsed = self.waiter.wait(read, job["seconds"] + self.settings["finish_timeout"], 2, done)
        if not ended or not (found[0].get("status") or {}).get("succeeded"):
            raise StepFailed("%s: Job %s/%s did not succeed (%s)" % (
                title, job["namespace"], job["name"], (found[0].get("status") if found else "gone")))
        pods = self.items("Pod", "v1", job["namespace"], label_selector="%s=%s" % (JOB_NAME_LABEL, job["name"]))
        pod = [p for p in pods if (p.get("status") or {}).get("phase") == "Succeeded"][0]["metadata"]["name"]
        log = self.resource("Pod", "v1").log.get(name=pod, namespace=job["namespace"], serialize=False)
        try:
            return noisy.load_records(log.data.decode("utf-8"), "pod %s/%s" % (job["namespace"], pod))[-1]
        except noisy.LoadOutputError as exc:
            raise StepFailed("%s: %s" % (title, exc))

    def do_cleanup(self, plan, kept, title):
        """Delete the validation's Jobs (their pods in the background) and wait until they and their Workloads are
        gone."""
        for namespace in self.namespaces:
            self.delete_jobs(namespace, VALIDATION_LABEL)

        def left():
            return [(ns, w["metadata"]["name"]) for ns in self.namespaces
                    for w in self.items("Workload", KUEUE_API, ns)
                    if LOAD_JOB_PREFIX in w["metadata"]["name"]] + [
                (ns, j["metadata"]["name"]) for ns in self.namespaces
                for j in self.items("Job", "batch/v1", ns, label_selector=VALIDATION_LABEL)]

        held, found, _elapsed = self.waiter.wait(left, 60, 2, lambda found: not found)
        if not held:
            raise StepFailed("%s: still there after 60 s: %s" % (title, ", ".join("%s/%s" % f for f in found)))

    def delete_jobs(self, namespace, selector):
        resource = self.resource("Job", "batch/v1")
        for job in self.items("Job", "batch/v1", namespace, label_selector=selector):
            try:
                self.client.delete(resource, name=job["metadata"]["name"], namespace=namespace,
                                   body={"apiVersion": "v1", "kind": "DeleteOptions", "propagationPolicy": "Background"})
            except NotFoundError:
                pass

    # -- Prometheus (the lab's, monitoring_mode local) ---------------------------------------------------------
    def do_prometheus_quiet(self, plan, kept, title):
        """Until no fairgpu alert is active (pending or firing): a scenario's alert check judges only what the
        scenario did. The over-guarantee alert looks back a minute, so a tenant that held its GPUs just before keeps
        it pending for that long. Not reaching it is no failure (the judge shows what fired)."""
        self.waiter.wait(lambda: self.ask("query", 'ALERTS{alertname=~"Fairgpu.+"}'),
                         self.settings["alert_timeout"], 5, lambda result: result == [])

    def do_prometheus_alerts(self, plan, kept, title):
        """The flood seen by Prometheus: the rules it evaluates, whether the flooder's over-guarantee alert fired at
        any evaluation since the flood began (not only now: a flood shorter than the alert's life fires and resolves
        before this step), the end of every alert, the scenario's series and their plot."""
        flooder, arriver, step = plan["flooder"], plan["arriver"], self.settings["prometheus_step"]
        start = kept["flooded"]["timeline"][0]["ts"]
        kept["flood_start"], kept["alert_for"] = start, self.alert_for
        kept["rule_groups"] = self.ask("rules") or []
        # The window is fixed once, wide enough for every try; samples before the flood are cut off inside the
        # query (time() is each step's timestamp).
        window = int(self.waiter.wall() - start + self.settings["alert_timeout"] + 60)
        fired = ('max_over_time((ALERTS{alertname="%s", alertstate="firing", tenant="%s"} and on () '
                 '(vector(time()) >= %s))[%ds:%s])' % (OVER_GUARANTEE, flooder["name"], start, window, step))
        self.waiter.wait(lambda: self.ask("query", fired), self.settings["alert_timeout"], 5, bool)
        # Once no alert is active the record is complete (the arriver's alert can no longer fire without a new
        # reason, and the flooder's firing has ended), and the next scenario starts with no fairgpu alert active.
        self.do_prometheus_quiet(plan, kept, title)
        queries = {
            "alerts": 'ALERTS{alertname=~"Fairgpu.+"}',
            "held": 'sum by (cluster_queue) (kueue_cluster_queue_resource_reservation{resource="%s"})'
                    % flooder["gpu_resource"],
            "pending": "sum by (cluster_queue) (kueue_pending_workloads)",
            "dcgm_pods": 'count(DCGM_FI_DEV_FB_USED{exported_pod!="", tenant="%s"})' % flooder["name"],
        }
        end = self.waiter.wall()
        kept["series"] = dict((key, self.ask("query_range", query, start - 10, end, step) or [])
                              for key, query in queries.items())
        spans = [dict(span, label="over-guarantee alert %s (%s)" % (state, flooder["name"]), color=color)
                 for state, color in (("pending", "orange"), ("firing", "red"))
                 for span in alert_checks.alert_spans(kept["series"]["alerts"], OVER_GUARANTEE, flooder["name"], step,
                                                      state)]
        name = "%s-prometheus.png" % plan["scenario"]
        written = self.draw(
            "%s/%s" % (self.results_dir, name),
            "%s: %s floods, %s arrives (Prometheus samples; %s for: %s)" % (
                plan["scenario"], flooder["name"], arriver["name"], OVER_GUARANTEE, self.alert_for),
            start,
            [{"title": "GPUs held (Kueue reservation) vs guaranteed per tenant", "ylabel": "GPUs",
              "series": alert_checks.series_by(kept["series"]["held"], "cluster_queue"),
              "dashed": {flooder["name"]: flooder["gpus"], arriver["name"]: arriver["gpus"]}},
             {"title": "Pending workloads per tenant", "ylabel": "workloads",
              "series": alert_checks.series_by(kept["series"]["pending"], "cluster_queue")}],
            spans)
        kept["plots"] = [{"file": name, "title": "GPUs held vs guaranteed and pending workloads per tenant, from "
                                                 "Prometheus"}] if written else []
        kept["screenshot_note"] = None
        if self.screenshot:
            shot = "%s-dashboard.png" % plan["scenario"]
            why_not = self.screenshot("%s/%s" % (self.results_dir, shot), start - 10, end)
            if why_not is None:
                kept["plots"].append({"file": shot, "title": "The dashboard page over the scenario (Perses, headless "
                                                             "Chromium): every panel, the same Prometheus"})
            else:
                kept["screenshot_note"] = "No screenshot of the dashboard page: %s" % why_not

    def do_prometheus_capacity(self, plan, kept, title, save):
        """Until Prometheus fires FairgpuGuaranteesOverCapacity (its ``for:`` as Prometheus evaluates it, then the
        scrapes); keeps ``{"fired_ts": Unix time first seen firing or None, "for", "offered", "guaranteed"}``, both
        sides as the recording rules say then. Not firing within alert_timeout is judged."""
        name = alert_checks.GUARANTEES_OVER_CAPACITY
        held, _found, _elapsed = self.waiter.wait(
            lambda: self.ask("query", 'ALERTS{alertname="%s", alertstate="firing"}' % name),
            self.settings["alert_timeout"], 2, bool)
        sides = dict((key, sum(float(r["value"][1]) for r in self.ask("query", query) or []))
                     for key, query in (("offered", "fairgpu:gpu_allocatable_ready:sum"),
                                        ("guaranteed", "fairgpu:gpu_nominal_quota:sum")))
        kept[save] = dict(sides, fired_ts=self.waiter.wall() if held else None,
                          **{"for": "%ds" % alert_checks.rule_durations(self.ask("rules") or []).get(name, 120)})

    def do_prometheus_kueue(self, plan, kept, title):
        """What Prometheus saw of Kueue's outage: FairgpuKueueDown's series and rule, once Prometheus scrapes Kueue
        again; then Kueue's noise."""
        step = self.settings["prometheus_step"]
        self.waiter.wait(lambda: self.ask("query", 'up{job="kueue"} == 1'), self.settings["alert_timeout"], 5, bool)
        start = kept["fault"]["ts"]
        kept["alerts"] = self.ask("query_range", 'ALERTS{alertname="%s"}' % alert_checks.KUEUE_DOWN, start - 10,
                                  self.waiter.wall(), step)
        durations = alert_checks.rule_durations(self.ask("rules") or [])
        kept["kueue_down_for"] = "%ds" % durations.get(alert_checks.KUEUE_DOWN, 300)
        self.do_prometheus_noise(plan, kept, title)

    def do_prometheus_firing(self, plan, kept, title, save, may_time_out=False):
        """Until Prometheus fires the over-guarantee alert for the flooder; keeps ``{"ts": Unix time it was first
        seen firing or None, "for_state": ALERTS_FOR_STATE's value then (the Unix time the alert became active)}``
        and the rules Prometheus evaluates. Prometheus is asked every second; while it does not answer the wait goes
        on."""
        if self.prometheus is None:
            raise StepFailed("%s: this scenario needs Prometheus (validate_prometheus_url)" % title)
        labels = 'alertname="%s", tenant="%s"' % (OVER_GUARANTEE, plan["flooder"]["name"])
        held, _found, _elapsed = self.waiter.wait(
            lambda: self.ask("query", 'ALERTS{%s, alertstate="firing"}' % labels), self.settings["alert_timeout"], 1,
            bool)
        if not held and not may_time_out:
            raise StepFailed("%s: it did not fire within %s s" % (title, self.settings["alert_timeout"]))
        state = self.ask("query", "ALERTS_FOR_STATE{%s}" % labels) or []
        kept[save] = {"ts": self.waiter.wall() if held else None,
                      "for_state": float(state[0]["value"][1]) if state else None}
        kept["rules"] = self.ask("rules") or kept.get("rules") or []

    def do_prometheus_noise(self, plan, kept, title, since=None):
        """Kueue's reconciler errors and evictions over the scenario so far (from the flood's first read, or the
        time kept as ``since``), from its own metrics (``alert_checks.kueue_noise``); nothing when Prometheus does
        not answer."""
        start = kept[since] if since else kept["flooded"]["timeline"][0]["ts"]
        window = int(self.waiter.wall() - start) + 10
        errors = self.ask("query", 'sum by (controller) (increase(controller_runtime_reconcile_errors_total'
                                   '{job="kueue"}[%ds]))' % window)
        evictions = self.ask("query", 'sum by (reason) (increase(kueue_evicted_workloads_total{job="kueue"}[%ds]))'
                             % window)
        kept["noise"] = alert_checks.kueue_noise(errors, evictions)

    def ask(self, what, *args):
        """Prometheus's answer, or None when it did not answer: the judge then shows what is missing."""
        try:
            return getattr(self.prometheus, what)(*args)
        except PrometheusError:
            return None


def _queues_seen(info):
    return "; ".join("%s: reserved %s, pending %s, admitted %s" % (name, q["reserved"], q["pending_workloads"],
                                                                   q["admitted_or_finished_workloads"])
                     for name, q in sorted((info or {}).get("queues", {}).items())) or "nothing"


def settings_of(given):
    """The executor's settings: SETTING_NAMES from ``given`` (a copy, numbers as given)."""
    missing = [name for name in SETTING_NAMES if name not in given]
    if missing:
        raise ValueError("settings: missing %s" % ", ".join(missing))
    return copy.deepcopy(dict((name, given[name]) for name in SETTING_NAMES))
