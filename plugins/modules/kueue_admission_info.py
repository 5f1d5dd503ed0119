#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: fairgpu maintainers
# Apache License 2.0 (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: kueue_admission_info
short_description: Report what Kueue decided for tenants' ClusterQueues and Workloads
version_added: 0.1.0
description:
  - Reads ClusterQueues, LocalQueues and Workloads (API C(kueue.x-k8s.io/v1beta2)) and reports, per
    ClusterQueue, the accelerators it is guaranteed, has reserved, uses and borrows, its fair-sharing weighted
    share and its workload counts; and, per Workload, its queue, the accelerators it requests, where it stands
    and its Kueue conditions with reasons and timestamps.
  - Read-only; never changes the cluster, so it runs in check mode as well.
  - Counts are whole devices of O(resource) (GPUs, or MIG devices for a C(nvidia.com/mig-<profile>) resource).
author:
  - fairgpu maintainers (!UNKNOWN)
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
options:
  namespaces:
    description:
      - Tenant namespaces whose Workloads to report. Their ClusterQueues are reported too.
      - With neither O(namespaces) nor O(cluster_queues), every ClusterQueue and Workload is reported.
    type: list
    elements: str
    default: []
  cluster_queues:
    description: ClusterQueues to report (with the Workloads admitted to or queued for them).
    type: list
    elements: str
    default: []
  resource:
    description: The accelerator resource to count.
    type: str
    default: nvidia.com/gpu
  workloads:
    description: Whether to list Workloads (counts per queue are reported either way).
    type: bool
    default: true
  pods:
    description:
      - Also read the Pods of O(namespaces) and report, per ClusterQueue, the devices its tenant's Running pods
        hold (RV(queues.pods_running), RV(queues.pods_terminating)), whether Kueue admitted them or not.
      - Needs O(namespaces). A pod's devices follow Kubernetes' pod request rule (init containers, sidecars,
        overhead).
    type: bool
    default: false
  gpu_pods:
    description:
      - Also read every pod bound to a node that holds accelerator devices (whole or shared GPUs, MIG devices),
        cluster-wide and whoever owns it, and report those no admitted Workload accounts for (RV(outside_kueue)), with
        why (no owner, an owner Job without an admitted Workload, Terminating past its grace period, in a namespace
        that is no tenant's). Timeline samples then carry the list too.
      - The pods are those kube-scheduler counts on their nodes (bound, neither Succeeded nor Failed, Terminating
        included), in one cluster-wide list; Workloads are read in each namespace that holds such pods.
    type: bool
    default: false
  wait_for:
    description:
      - Poll until Kueue's state meets this condition, recording a timeline, then report.
      - "C({queue: NAME, reserved_at_least: N}): the ClusterQueue holds at least N devices."
      - "C({queue: NAME, admitted_at_least: N}) or C({queue: NAME, pending_at_least: N}): workload counts;
        admitted counts the workloads admitted now or already finished (RV(queues.admitted_or_finished_workloads)),
        so that a short Job done before the read still counts."
      - "C({queue: NAME, running_at_least: N}): the tenant's Running pods hold at least N devices (needs
        O(pods=true)): the guarantee in use, not only reserved."
      - "C({queue: NAME, started_at_least: N}): the tenant's Running and Succeeded pods have at least N devices
        (needs O(pods=true)): every device of the guarantee put to work, also when a short Job finished before the
        last one started."
      - "Counts can be combined on one queue, for example C({queue: NAME, admitted_at_least: 16, pending_at_least: 2}):
        all must hold on the same read."
      - "C({all_finished: true, workloads_at_least: N}): every reported Workload is Finished (and there are
        at least N)."
    type: dict
  wait_timeout:
    description: Seconds to wait for O(wait_for) before failing (the failure returns the last state).
    type: float
    default: 120
  poll_interval:
    description: Seconds between two reads while waiting.
    type: float
    default: 1
requirements:
  - kubernetes >= 24.2.0
  - PyYAML >= 3.11
notes:
  - Fails with a message naming the API when Kueue's CRDs are not installed.
"""

EXAMPLES = r"""
- name: What did Kueue decide for team-a and team-b?
  fairgpu.tenancy.kueue_admission_info:
    namespaces: [team-a, team-b]
  register: admission

- name: team-b holds its guarantee
  ansible.builtin.assert:
    that: admission.queues['team-b'].reserved >= admission.queues['team-b'].nominal
"""

RETURN = r"""
queues:
  description: One entry per ClusterQueue, keyed by name.
  returned: always
  type: dict
  contains:
    name:
      description: ClusterQueue name.
      type: str
      returned: always
    cohort:
      description: Its C(spec.cohortName), or null without a cohort.
      type: str
      returned: always
    weight:
      description: Fair-sharing weight (C(spec.fairSharing.weight); 1 when unset).
      type: float
      returned: always
    nominal:
      description: Guaranteed devices (C(nominalQuota) summed over flavors).
      type: int
      returned: always
    borrowing_limit:
      description: Devices it may borrow, or null for no limit.
      type: int
      returned: always
    lending_limit:
      description: Devices it may lend, or null for all of them.
      type: int
      returned: always
    reserved:
      description: Devices reserved by its workloads (C(status.flavorsReservation)).
      type: int
      returned: always
    in_use:
      description: Devices used by its admitted workloads (C(status.flavorsUsage)).
      type: int
      returned: always
    borrowed:
      description: Reserved devices above its nominal quota, borrowed from the cohort.
      type: int
      returned: always
    weighted_share:
      description: Kueue's C(status.fairSharing.weightedShare) (share x 1000 / weight), or null when Kueue reports none.
      type: int
      returned: always
    pending_workloads:
      description: Workloads waiting for quota.
      type: int
      returned: always
    reserving_workloads:
      description: Workloads holding a quota reservation.
      type: int
      returned: always
    admitted_workloads:
      description: Workloads admitted now (the ClusterQueue's status; it drops as Jobs finish).
      type: int
      returned: always
    admitted_or_finished_workloads:
      description:
        - Workloads admitted now or already finished, from the listed Workloads (a Kueue-managed Job runs only once
          admitted); never below RV(queues.admitted_workloads). A count that only grows.
      type: int
      returned: always
    workloads_reserved:
      description:
        - Devices of O(resource) that the listed Workloads holding this ClusterQueue's quota (admitted, or quota
          reserved) ask for, to set beside RV(queues.reserved), the ClusterQueue's own count; the two differ while
          Kueue catches up with a change, or when it double-counts or loses a Workload (0 with O(workloads=false)).
      type: int
      returned: always
    active:
      description: Whether the ClusterQueue's Active condition is True.
      type: bool
      returned: always
    pods_running:
      description: Devices held by Running pods of the tenant's namespaces that are not being deleted (0 without O(pods)).
      type: int
      returned: always
    pods_terminating:
      description: Devices held by Running pods of the tenant's namespaces that are being deleted (0 without O(pods)).
      type: int
      returned: always
    pods_succeeded:
      description: Devices of Succeeded pods of the tenant's namespaces, which ran on them and are done (0 without O(pods)).
      type: int
      returned: always
  sample:
    team-a:
      name: team-a
      cohort: fairgpu
      weight: 1.0
      nominal: 8
      borrowing_limit: 8
      lending_limit: 8
      reserved: 16
      in_use: 16
      borrowed: 8
      weighted_share: 500
      pending_workloads: 4
      reserving_workloads: 16
      admitted_workloads: 16
      admitted_or_finished_workloads: 16
      workloads_reserved: 16
      active: true
      pods_running: 16
      pods_terminating: 0
      pods_succeeded: 0
workloads:
  description: The Workloads, sorted by namespace, creation time and name (empty when O(workloads=false)).
  returned: always
  type: list
  elements: dict
  contains:
    name:
      description: Workload name.
      type: str
      returned: always
    namespace:
      description: Its namespace.
      type: str
      returned: always
    job:
      description: Name of the Job that owns it, or null.
      type: str
      returned: always
    local_queue:
      description: Its LocalQueue (C(spec.queueName)).
      type: str
      returned: always
    cluster_queue:
      description: The ClusterQueue of its admission, else the one its LocalQueue points at.
      type: str
      returned: always
    gpus:
      description: Devices of O(resource) it requests (all pods).
      type: int
      returned: always
    priority:
      description: Its C(spec.priority), or null.
      type: int
      returned: always
    state:
      description: Where it stands.
      type: str
      returned: always
      choices: [finished, admitted, reserved, evicted, pending]
    conditions:
      description:
        - Kueue conditions by type (QuotaReserved, Admitted, PodsReady, Evicted, Preempted, Requeued, Finished).
        - Each with C(status), C(reason), C(message) and C(last_transition_time).
      type: dict
      returned: always
    created:
      description: Its C(metadata.creationTimestamp).
      type: str
      returned: always
  sample:
    - name: job-team-a-load-0-3f2a1
      namespace: team-a
      job: team-a-load-0
      local_queue: team-a-queue
      cluster_queue: team-a
      gpus: 2
      priority: 100
      state: admitted
      conditions:
        Admitted:
          status: "True"
          reason: Admitted
          message: The workload is admitted
          last_transition_time: "2026-11-30T10:00:05Z"
      created: "2026-11-30T10:00:04Z"
outside_kueue:
  description:
    - With O(gpu_pods), the pods that hold accelerator devices no admitted Workload accounts for, sorted by namespace
      and name.
  returned: when O(gpu_pods=true)
  type: list
  elements: dict
  contains:
    namespace:
      description: The pod's namespace.
      type: str
    pod:
      description: The pod's name.
      type: str
    uid:
      description: The pod's UID.
      type: str
    node:
      description: The node it is bound to (C(spec.nodeName)).
      type: str
    devices:
      description: Accelerator resource to the devices the pod holds (Kubernetes' pod request rule).
      type: dict
    tenant:
      description: Whether its namespace is one of O(namespaces).
      type: bool
    why:
      description: Why no admitted Workload accounts for it.
      type: str
    since:
      description: For a pod being deleted, its deletion deadline (Unix time), from which it counts; else null.
      type: float
  sample:
    - namespace: default
      pod: orphan-0
      uid: 0b1c2d3e-0000-4000-8000-000000000001
      node: fairgpu-gpu-0
      devices: {nvidia.com/gpu: 2}
      tenant: false
      why: "namespace default is no tenant's; no owner"
      since: null
elapsed:
  description: Seconds spent until O(wait_for) held (0 without O(wait_for)).
  returned: always
  type: float
timeline:
  description: With O(wait_for), one sample per poll; empty without it.
  returned: always
  type: list
  elements: dict
  contains:
    t:
      description: Seconds since the wait began.
      type: float
    ts:
      description: Unix time of the sample.
      type: float
    queues:
      description:
        - Per ClusterQueue name, C(reserved), C(borrowed), C(workloads_reserved) (RV(queues.workloads_reserved)),
          C(running), C(terminating) and C(started) in devices (running, terminating and started are held by pods,
          with O(pods)), C(pending) and C(admitted) in workloads.
      type: dict
    outside_kueue:
      description: With O(gpu_pods), RV(outside_kueue) as read for this sample.
      type: list
      elements: dict
  sample:
    - t: 1.002
      ts: 1796032682.5
      queues:
        team-a: {reserved: 16, borrowed: 8, workloads_reserved: 16, pending: 4, admitted: 16, running: 16,
                 terminating: 0, started: 16}
      outside_kueue: []
"""

import copy

from ansible_collections.kubernetes.core.plugins.module_utils.ansiblemodule import AnsibleModule
from ansible_collections.kubernetes.core.plugins.module_utils.args_common import AUTH_ARG_SPEC
from ansible_collections.kubernetes.core.plugins.module_utils.k8s.client import get_api_client
from ansible_collections.kubernetes.core.plugins.module_utils.k8s.core import AnsibleK8SModule
from ansible_collections.kubernetes.core.plugins.module_utils.k8s.exceptions import CoreException
from ansible_collections.fairgpu.tenancy.plugins.module_utils.kueue import reader
from ansible_collections.fairgpu.tenancy.plugins.module_utils.kueue.status import wait_for_errors
from ansible_collections.fairgpu.tenancy.plugins.module_utils.common.names import GPU_RESOURCE
from ansible_collections.fairgpu.tenancy.plugins.module_utils.common.waiter import Waiter


def argspec():
    spec = copy.deepcopy(AUTH_ARG_SPEC)
    spec.update(
        namespaces=dict(type="list", elements="str", default=[]),
        cluster_queues=dict(type="list", elements="str", default=[]),
        resource=dict(type="str", default=GPU_RESOURCE),
        workloads=dict(type="bool", default=True),
        pods=dict(type="bool", default=False),
        gpu_pods=dict(type="bool", default=False),
        wait_for=dict(type="dict"),
        wait_timeout=dict(type="float", default=120),
        poll_interval=dict(type="float", default=1),
    )
    return spec


def run(module, client, waiter=None):
    params, wait_for = module.params, module.params["wait_for"]
    reading = dict(namespaces=params["namespaces"], cluster_queues=params["cluster_queues"],
                   resource=params["resource"], workloads=params["workloads"], pods=params["pods"],
                   gpu_pods=params["gpu_pods"])
    if wait_for is not None:
        errors = wait_for_errors(wait_for)
        for key in ("running_at_least", "started_at_least"):
            if key in wait_for and not params["pods"]:
                errors.append("wait_for.%s: needs pods=true" % key)
        if errors:
            module.fail_json(msg="; ".join(errors))
    try:
        if wait_for is None:
            module.exit_json(changed=False, elapsed=0.0, timeline=[], **reader.read(client, **reading))
        met, info, elapsed, timeline = reader.wait(client, waiter or Waiter(), wait_for, params["wait_timeout"],
                                                   params["poll_interval"], **reading)
    except reader.ReadError as exc:
        module.fail_json(msg=str(exc))
    if not met:
        module.fail_json(msg="Kueue did not reach %s within %s s" % (wait_for, params["wait_timeout"]),
                         elapsed=elapsed, timeline=timeline, **info)
    module.exit_json(changed=False, elapsed=elapsed, timeline=timeline, **info)


def main():
    module = AnsibleK8SModule(module_class=AnsibleModule, argument_spec=argspec(), supports_check_mode=True)
    try:
        run(module, get_api_client(module))
    except CoreException as exc:
        module.fail_from_exception(exc)


if __name__ == "__main__":
    main()
