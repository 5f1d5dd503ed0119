#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: fairgpu maintainers
# Apache License 2.0 (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: validation_scenario
short_description: Run one validation scenario from its table of steps and judge it from what the cluster decided
version_added: 0.1.0
description:
  - The one entry of every validation scenario; the validate role is a loop over O(name) plus the report.
  - C(baseline), C(flood), C(flood_reverse) and C(mig) are tables of steps (plugins/module_utils/validation/engine.py)
    run by one executor; submit the tenants' load Jobs, wait on Kueue's decisions (the waits are the timings the
    checks read), read Jobs, pods and Events, and on the lab's Prometheus the flood's alerts and series; then the
    scenario's judges (plugins/module_utils/validation/scenarios.py) decide each check from what was read.
  - C(kueue_restart) is a fault scenario (docs/failures.md), never run unless asked for. While the first tenant holds
    every GPU it may reach, Kueue is taken down as O(faults) says, the second tenant tries to create a Job (Kueue's
    webhook must refuse it, or it must stay suspended), Kueue comes back, the second tenant submits its guarantee;
    judged are its time-to-guarantee after the restart, Kueue's reserved GPUs against its admitted Workloads on every
    read, no tenant above what it may reach, every Job done once, and on Prometheus C(FairgpuKueueDown). The flood
    scenarios and this one also report Kueue's reconciler errors and evictions from its metrics.
  - C(prometheus_restart), a fault scenario too, takes Prometheus down (O(faults)) while the over-guarantee alert
    fires for the first tenant, and judges that it fires again within three evaluations of Prometheus's return
    with the active-since time it had (its for- state restored, not started again).
  - C(control_plane_restart), a fault scenario of the embedded cluster only, kills its etcd and kube-apiserver with
    SIGKILL while the first tenant holds every GPU it may reach and starts them again with kwokctl (O(faults)); then
    the second tenant submits its guarantee. Judged are every Workload there after the outage with its admission's
    conditions unchanged, the second tenant's time-to-guarantee and its pods running, Kueue's reserved GPUs against
    its Workloads on every read, no pod marked not ready or evicted for its node, every Job done once.
  - C(gpu_node_loss), a fault scenario of the embedded cluster only. Both tenants hold their guarantee, then the GPU
    node running most of their pods stops reporting (its Lease taken from its kubelet, Ready False), is deleted, and
    a node of the same name joins again once PodGC has removed its pods (O(faults)). Judged are the node lifecycle
    controller's taint, PodGC's removal, every Job that lost a pod run again and succeeded with no failure counted
    against its backoffLimit (the load Jobs' podFailurePolicy ignores DisruptionTarget), every Workload evicted
    only by waitForPodsReady or preemption (counted, with reasons), none deactivated, every Job done once, and on
    Prometheus C(FairgpuGuaranteesOverCapacity) firing while the node was away.
  - C(noisy_neighbour) measures the task's acceptance criterion on real GPUs. The first tenant's one-device load
    Job runs alone, then beside the second tenant's, both pinned to one node of a GPU product both tenants'
    flavors select with a free device for each (whole GPUs of that node, or MIG instances where both tenants are
    on MIG), C(noisy_repeats) times each, with C(--device cuda); the throughput each achieved is the load
    generator's JSON line in its pod's log (files/gpu_load.py). Judged are every load on a GPU, the neighbour
    overlapping each run, and the victim's median throughput beside it at most 20 % (whole GPUs) or 5 % (MIG)
    below its median alone (plugins/module_utils/validation/noisy.py); time-sliced GPUs are shown, not judged. On
    simulated GPUs nothing runs and the result says it measured nothing, with no check.
  - C(isolation) is the table of a tenant's attempts to cheat (plugins/module_utils/validation/attempts.py), run by
    the probe's executor (plugins/module_utils/validation/probe.py), as module C(tenant_isolation_probe) runs it.
  - C(multikueue) and C(multikueue_worker_lost) run on a MultiKueue manager with O(multikueue) naming its workers
    (plugins/module_utils/validation/multikueue.py, docs/multikueue.md "What is proven"). C(multikueue) reads each
    tenant's guarantee on the manager and on every worker (the report's table; the manager's must be the workers'
    sum), the workers' MultiKueueClusters and the admission check Active, a tenant's own Job refused on every worker
    (a server-side dry run sent with the tenant's credentials), one Job of the first tenant submitted on the manager
    dispatched to a worker with its status copied back, and the first tenant flooding the fleet while the second
    submits its guarantee, judged against C(guarantee_bound_seconds) (reserved on the manager) and
    C(running_bound_seconds) (its Jobs running on the workers), no worker reserving more than its GPUs, no Job on two
    workers, and with O(prometheus_url) the manager's Prometheus holding Kueue's series of every cluster.
    C(multikueue_worker_lost), a fault scenario of embedded workers only, stops the control plane of the worker that
    runs a Job of the first tenant and judges that MultiKueue dispatches it to another worker only after
    C(worker_lost_timeout), that it succeeds once and never fails, and that the lost worker, back, drops its copy.
  - Before a scenario the load script is put in every tenant namespace and the Jobs an earlier validation left are
    removed; after it, the scenario's Jobs are removed and waited for.
  - A failed check does not fail the module (RV(passed) says it; the report shows it). A step that cannot do what
    the scenario needs (a wait that timed out, a Job refused) fails it, naming the step and what it last saw.
author:
  - fairgpu maintainers (!UNKNOWN)
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
options:
  name:
    description: The scenario.
    type: str
    required: true
    choices: [baseline, flood, flood_reverse, mig, isolation, noisy_neighbour, kueue_restart, prometheus_restart,
              control_plane_restart, gpu_node_loss, multikueue, multikueue_worker_lost]
  plan:
    description:
      - The tenants as the tenants role applied them (the plan module C(fairgpu.tenancy.tenants) returns),
        with at least two tenants; the first two play the A/B test (the flood's flooder and arriver, the cheating
        tenant and its victim).
    type: dict
    required: true
  settings:
    description:
      - The scenarios' numbers, the validate role's variables without their C(validate_) prefix (its
        defaults/main.yml says what each is); times in seconds. C(baseline_jobs), C(baseline_seconds),
        C(flood_extra_jobs), C(flood_seconds), C(flood_backlog_jobs), C(guarantee_bound_seconds),
        C(running_bound_seconds), C(accounting_grace_seconds), C(finish_timeout), C(mig_seconds), C(mig_extra_jobs),
        C(alert_timeout), C(prometheus_step) (a Prometheus duration), C(fault_down_seconds),
        C(fault_guarantee_bound_seconds), C(noisy_seconds), C(noisy_repeats) and, for C(isolation),
        C(probe_timeout).
    type: dict
    required: true
  pod:
    description:
      - The load pods, C(image), C(memory_fraction) (of each device's memory the load holds), C(user) and C(group)
        (numeric, non-root), C(simulated) (the GPUs are simulated; kwok runs the pods for their run time).
    type: dict
    required: true
  load_script:
    description: The text of files/gpu_load.py, put in every tenant namespace as the ConfigMap the load pods mount.
    type: str
    required: true
  prometheus_url:
    description: The lab's Prometheus (monitoring_mode local), for the flood's alert checks and plot; empty, none.
    type: str
    default: ""
  alert_for:
    description: The C(for:) the monitoring role gave FairgpuTenantOverGuarantee (a Prometheus duration).
    type: str
    default: 5m
  results_dir:
    description:
      - Where the flood's plot of Prometheus's samples is written (C(<scenario>-prometheus.png)), and its screenshot
        of the dashboard page (C(<scenario>-dashboard.png)).
    type: path
    default: "."
  dashboard:
    description:
      - The dashboard page (the lab's, files/lab/dashboard_server.py) that the flood scenarios screenshot over their
        window in a headless browser, beside the plot. C(url) the page's address (empty, no screenshot);
        C(browser) Chromium's executable (Debian's C(chromium)). A browser that is missing or fails leaves the
        screenshot out and says why in the scenario's notes; it fails no check.
    type: dict
    default: {}
  faults:
    description:
      - "How a fault scenario breaks each component, by component (C(kueue) for C(kueue_restart), C(prometheus) for
        C(prometheus_restart), C(control_plane) for C(control_plane_restart)). Kueue's and Prometheus's is
        C({process: {workdir, ready_url}}), the embedded cluster's local process (module C(local_service)'s files in
        C(workdir); killed with SIGKILL, started again from its record, ready when C(ready_url) answers), or
        C({pods: {namespace, label_selector}}), the component's pods in the cluster (deleted with no grace period;
        back when a new one is Ready). The control plane's is C({kwokctl: {binary, workdir, cluster, lock}}): the
        embedded cluster's etcd and kube-apiserver, killed with SIGKILL and started again by C(kwokctl start cluster)
        with C(KWOK_WORKDIR=workdir), holding the flock of C(lock) meanwhile; nothing else can restart a control
        plane. A GPU node's (C(gpu_node) for C(gpu_node_loss)) is C({kwok: true}): the embedded cluster's kwok node
        running most of the scenario's pods, its Lease taken over and Ready False posted, then deleted and created
        again; no other node is taken away. A scenario that fails while a component is down starts it again (a lost
        node joins again) before it reports."
    type: dict
    default: {}
  multikueue:
    description:
      - For C(multikueue) and C(multikueue_worker_lost), on the manager. C(cluster) the manager's cluster name (the
        C(cluster) label of its own series); C(worker_lost_timeout) the manager's MultiKueue
        C(workerLostTimeout), a Go duration or seconds (Kueue's default 15m); C(workers) a list, one per worker, of C(name) (its
        inventory host, the name of its MultiKueueCluster), C(cluster) (its cluster name), C(auth) (C(kubeconfig)
        and C(context), how this module reaches it) and C(control_plane) (as O(faults)'s C(control_plane), empty for
        a worker fairgpu did not make, which is never stopped).
    type: dict
    default: {}
requirements:
  - kubernetes >= 24.2.0
"""

EXAMPLES = r"""
- name: Flood the cluster as the first tenant, then submit the second's guarantee
  fairgpu.tenancy.validation_scenario:
    name: flood
    plan: "{{ tenants_plan }}"
    settings: "{{ validate_settings }}"
    pod: {image: "pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime", memory_fraction: 0.8, user: 1000, group: 1000, simulated: true}
    load_script: "{{ lookup('ansible.builtin.file', 'files/gpu_load.py') }}"
  register: flood
"""

RETURN = r"""
results:
  description:
    - The scenario's entries of the report (plugins/module_utils/validation/report.py renders them), each
      C(name), C(title), C(checks) (C(check), C(expected), C(observed), C(passed)), C(metrics), C(timeline); the flood's
      alerts are an entry of their own (C(<scenario>_alerts)) where Prometheus judged them.
  returned: success
  type: list
  elements: dict
steps:
  description: Each step of the scenario's table as it ran, C(step) (its words), C(seconds), C(skipped).
  returned: success
  type: list
  elements: dict
passed:
  description: Whether every check of every entry passed.
  returned: success
  type: bool
"""

import copy
import os
import subprocess
import tempfile

from ansible_collections.kubernetes.core.plugins.module_utils.ansiblemodule import AnsibleModule
from ansible_collections.kubernetes.core.plugins.module_utils.args_common import AUTH_ARG_SPEC
from ansible_collections.kubernetes.core.plugins.module_utils.k8s.client import get_api_client
from ansible_collections.kubernetes.core.plugins.module_utils.k8s.core import AnsibleK8SModule
from ansible_collections.kubernetes.core.plugins.module_utils.k8s.exceptions import CoreException
from ansible_collections.fairgpu.tenancy.plugins.module_utils.common.drift import parse_duration
from ansible_collections.fairgpu.tenancy.plugins.module_utils.common.names import PROBE_IMAGE
from ansible_collections.fairgpu.tenancy.plugins.module_utils.common.waiter import Waiter
from ansible_collections.fairgpu.tenancy.plugins.module_utils.monitoring import page
from ansible_collections.fairgpu.tenancy.plugins.module_utils.monitoring.plot import draw
from ansible_collections.fairgpu.tenancy.plugins.module_utils.monitoring.prometheus import Prometheus
from ansible_collections.fairgpu.tenancy.plugins.module_utils.validation import engine
from ansible_collections.fairgpu.tenancy.plugins.module_utils.validation import faults
from ansible_collections.fairgpu.tenancy.plugins.module_utils.validation import multikueue
from ansible_collections.fairgpu.tenancy.plugins.module_utils.validation import probe


def argspec():
    spec = copy.deepcopy(AUTH_ARG_SPEC)
    spec.update(
        name=dict(type="str", required=True,
                  choices=["baseline", "flood", "flood_reverse", "mig", "isolation", "kueue_restart",
                           "prometheus_restart", "control_plane_restart", "gpu_node_loss", "noisy_neighbour",
                           "multikueue", "multikueue_worker_lost"]),
        plan=dict(type="dict", required=True),
        settings=dict(type="dict", required=True),
        pod=dict(type="dict", required=True),
        load_script=dict(type="str", required=True),
        prometheus_url=dict(type="str", default=""),
        alert_for=dict(type="str", default="5m"),
        results_dir=dict(type="path", default="."),
        faults=dict(type="dict", default={}),
        dashboard=dict(type="dict", default={}),
        multikueue=dict(type="dict", default={}),
    )
    return spec


def exec_in_pod(client):
    """``nvidia-smi -L`` and the like in a pod (real GPUs only): kubernetes' exec stream, its stdout."""
    def run(namespace, pod, argv):
        from kubernetes.client import CoreV1Api
        from kubernetes.stream import stream
        return stream(CoreV1Api(client.client.client).connect_get_namespaced_pod_exec, pod, namespace, command=argv,
                      stderr=False, stdin=False, stdout=True, tty=False)
    return run


def draw_png(path, title, start, panels, spans):
    """The plot (monitoring/plot.py), its directory made first."""
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    return draw(path, title, start, panels, spans)


def screenshotter(dashboard):
    """A function ``(path, start, end) -> None or why not`` that saves the dashboard page over ``start`` to ``end``
    (Unix seconds) as a PNG with headless Chromium; None when O(dashboard) names no page."""
    url, browser = dashboard.get("url") or "", dashboard.get("browser") or ""
    if not url:
        return None

    def shoot(path, start, end):
        if not (browser and os.access(browser, os.X_OK)):
            return "no browser at %r (dashboard.browser; Debian's package chromium)" % browser
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        with tempfile.TemporaryDirectory(prefix="fairgpu-chromium-") as profile:
            argv = page.screenshot_argv(browser, page.window_url(url, start, end), path, profile)
            try:
                done = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
            except (OSError, subprocess.TimeoutExpired) as exc:
                return "%s: %s" % (browser, exc)
        if done.returncode != 0 or not os.path.exists(path):
            return "%s exited %d: %s" % (browser, done.returncode, done.stderr.strip()[-300:])
        return None

    return shoot


def isolation(module, plan, settings, waiter):
    tenant, other = plan["tenants"][0], plan["tenants"][1]
    params = dict(tenant=tenant, other=other, priority_classes=plan["priority_classes"],
                  local_queue_suffix=plan["local_queue_suffix"], simulated=module.params["pod"]["simulated"],
                  image=PROBE_IMAGE, timeout=int(settings["probe_timeout"]), hold_seconds=5,
                  running_bound_seconds=float(settings["running_bound_seconds"]),
                  accounting_grace_seconds=float(settings["accounting_grace_seconds"]),
                  termination_grace_max_seconds=plan["isolation"]["termination_grace_max_seconds"],
                  max_object_kib=plan["isolation"]["max_object_kib"])

    def client_as(user, groups):
        if user is None:
            return get_api_client(module)
        return get_api_client(module, impersonate_user=user, impersonate_groups=groups)

    return [probe.isolation_scenario(params, probe.clients_for(tenant, other, client_as), waiter)], []


def fleet(module, client, plan, settings, waiter):
    """The MultiKueue fleet seen from the manager: this module's client and one per worker of O(multikueue), each
    reached with that worker's own kubeconfig and context (never the manager's), the tenants impersonated."""
    given = module.params["multikueue"]
    workers = {}
    for worker in given.get("workers") or []:
        auth = dict((k, v) for k, v in (worker.get("auth") or {}).items() if k in ("kubeconfig", "context") and v)
        workers[worker["name"]] = {"client": get_api_client(None, **auth), "auth": auth,
                                   "cluster": worker.get("cluster") or worker["name"],
                                   "control_plane": worker.get("control_plane") or {}}
    if not workers:
        module.fail_json(msg="%s: multikueue.workers names no worker; run it on a MultiKueue manager "
                             "(multikueue_role manager) whose fleet has workers" % module.params["name"])

    def as_tenant(tenant, where):
        user, groups = multikueue.tenant_user(tenant), list(tenant["groups"])
        if where == "manager":
            return get_api_client(module, impersonate_user=user, impersonate_groups=groups)
        return get_api_client(None, impersonate_user=user, impersonate_groups=groups, **workers[where]["auth"])

    prometheus_url = module.params["prometheus_url"]
    return multikueue.Fleet(
        client, workers, as_tenant, waiter, settings, dict(module.params["pod"]), module.params["load_script"],
        plan["tenants"][:2], plan["local_queue_suffix"], prometheus=Prometheus(prometheus_url) if prometheus_url else None,
        cluster=given.get("cluster") or "", lost_timeout=lost_timeout_seconds(module, given))


def lost_timeout_seconds(module, given):
    """Seconds of O(multikueue)'s C(worker_lost_timeout): a Go duration as Kueue's Configuration takes it (``1m``,
    ``15m``; Kueue's default 15m), or a number of seconds."""
    value = given.get("worker_lost_timeout", "15m")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    nanoseconds = parse_duration(str(value))
    if nanoseconds is None or nanoseconds <= 0:
        module.fail_json(msg="multikueue.worker_lost_timeout: %r is not a positive Go duration such as 1m or 15m "
                             "(kueue_multikueue.workerLostTimeout)" % (value,))
    return float(nanoseconds) / 1e9


def run(module, client, waiter=None):
    params, plan = module.params, module.params["plan"]
    if len(plan.get("tenants") or []) < 2 or plan.get("errors"):
        module.fail_json(msg="validate needs at least two valid tenants on a cluster with GPUs: %s" % (
            "; ".join(plan.get("errors") or []) or "only %d tenant(s)" % len(plan.get("tenants") or [])))
    waiter = waiter or Waiter()
    try:
        settings = dict(engine.settings_of(params["settings"]), probe_timeout=params["settings"].get("probe_timeout", 60))
        if params["name"] == "isolation":
            results, steps = isolation(module, plan, settings, waiter)
        elif params["name"].startswith("multikueue"):
            results, steps = [multikueue.run(fleet(module, client, plan, settings, waiter), params["name"])], []
        else:
            pod = dict(params["pod"])
            scenario = engine.Run(
                client, waiter, plan["tenants"][:2], plan["tenants"], plan["capacity"], plan["local_queue_suffix"],
                settings, pod, params["load_script"],
                prometheus=Prometheus(params["prometheus_url"]) if params["prometheus_url"] else None,
                exec_in_pod=exec_in_pod(client), draw=draw_png, results_dir=params["results_dir"],
                alert_for=params["alert_for"], faults=params["faults"],
                screenshot=screenshotter(params["dashboard"]))
            results, steps = scenario.run(params["name"])
    except (engine.StepFailed, probe.ProbeError, multikueue.FleetError, faults.FaultError, ValueError) as exc:
        module.fail_json(msg="%s: %s" % (params["name"], exc))
    module.exit_json(changed=True, results=results, steps=steps,
                     passed=all(c["passed"] for r in results for c in r["checks"]))


def main():
    module = AnsibleK8SModule(module_class=AnsibleModule, argument_spec=argspec(), supports_check_mode=False)
    try:
        run(module, get_api_client(module))
    except CoreException as exc:
        module.fail_from_exception(exc)


if __name__ == "__main__":
    main()
