#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: fairgpu maintainers
# Apache License 2.0 (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: tenant_isolation_probe
short_description: Act as a tenant that tries to cheat and report who refused each attempt
version_added: 0.1.0
description:
  - Sends, as O(tenant) (impersonating a user of its RBAC groups), the requests a tenant would use to take GPUs
    outside its share or to touch another tenant, and reports what the API server, RBAC, fairgpu's
    ValidatingAdmissionPolicies, the ResourceQuota and Kueue decided for each.
  - "The attempts: a bare GPU Pod (as the tenant, and as a user allowed to create pods); a Job naming
    O(other)'s LocalQueue; writes to ClusterQueues, Cohorts, ResourceFlavors, WorkloadPriorityClasses,
    admission policies, ResourceQuotas, LimitRanges and RBAC objects and a LocalQueue pointing at O(other)'s
    ClusterQueue; reading or creating Jobs, Pods, Workloads and Secrets in O(other)'s namespace; lifting
    Kueue's suspension of its own Job and editing its Workload's status; more devices than its hard maximum
    in one pod, in many pods, and in a pod past Kueue; a WorkloadPriorityClass it is not allowed and a pod
    priority; and its highest allowed priority while O(other) holds its guarantee."
  - "Round two (8 and up): a Job with no queue that claims its own admitted Job as controller (Kueue's child
    Jobs, run outside any quota); CPU-only pods beyond the GPU nodes' pod slots, and O(other)'s time to pods
    Running while the tenant holds every pod slot it can reach; a burst of Jobs past its Job quota; a Job that
    reaches for the node's devices or host without a GPU request (C(NVIDIA_VISIBLE_DEVICES), privileged, host
    namespaces, hostPath, added capabilities, a runtime class, a long grace period) and a privileged pod;
    and a pod that asks for more devices than any node has."
  - "Round three (13 and up): deleting its admitted Jobs so that their pods outlive them (every orphaning
    delete); Jobs whose Job or pods carry finalizers; tiny Jobs whose pod affinity or anti-affinity reaches
    O(other)'s namespace (one such pod would lock O(other) out of every GPU node); Jobs Kueue would admit and
    nothing would run (nodeName, schedulerName, schedulingGates, managedBy); limits far above requests; Jobs and
    ConfigMaps far larger than a Job needs; Jobs whose pods Pod Security baseline refuses; and, with Kubernetes'
    built-in edit ClusterRole bound for the probe's run (group C(fairgpu-probe-editors), RoleBinding
    C(fairgpu-probe-edit), removed at the end), pods of its own, Deployments and StatefulSets, lifting Kueue's
    suspension, relabelling its own pod off its Job, and a pod of PriorityClass system-node-critical; Jobs that
    would fill a GPU node's CPU or memory (pinned to the node, or more than their GPUs' share). Last, what O(other)
    got: its guarantee's time to pods Running while the tenant borrows every GPU it may."
  - "The tenant's and O(other)'s Running pods are compared with what Kueue reserved for them after each
    attempt; pods holding more devices than Kueue accounts for fail the scenario, naming the tenant. Each of
    those reads also lists every pod on the nodes that holds devices, cluster-wide and whoever owns it, and the
    scenario fails naming each one no admitted Workload accounts for (no owner, an owner Job without an admitted
    Workload, Terminating past its grace period, in a namespace that is no tenant's)."
  - Writes that must be refused are sent as server-side dry runs, so nothing changes even if one got through.
    The probe's Jobs (prefix C(fairgpu-probe-), label C(fairgpu.io/probe)) are real and deleted at the end.
  - Needs an identity allowed to impersonate users and groups (cluster admin); the kubeconfig's identity also
    stands for "a user allowed to create pods".
  - Does not run in check mode (it creates and deletes Jobs).
author:
  - fairgpu maintainers (!UNKNOWN)
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
options:
  tenant:
    description: The cheating tenant, normalised as the tenants role plans it (C(tenants_plan.tenants[])).
    type: dict
    required: true
  other:
    description: Another tenant (normalised), whose namespace, LocalQueue and guarantee the probe goes after.
    type: dict
    required: true
  priority_classes:
    description: The platform's WorkloadPriorityClasses, C([{name, value, description}]).
    type: list
    elements: dict
    default: []
  local_queue_suffix:
    description: A tenant's LocalQueue is C(<tenant><suffix>).
    type: str
    default: "-queue"
  simulated:
    description: Set kwok's pod run-time annotations on the probe's Jobs (embedded cluster).
    type: bool
    default: false
  image:
    description: Image of the probe's pods (they only hold their devices).
    type: str
    default: registry.k8s.io/pause:3.10
  timeout:
    description: Seconds to wait for one Kueue decision (a Workload judged, a guarantee admitted).
    type: int
    default: 60
  hold_seconds:
    description: Seconds to watch, after the priority attempt is judged, that the other tenant keeps its guarantee.
    type: int
    default: 5
  running_bound_seconds:
    description: Bound on O(other)'s time from submitting its guarantee to its pods Running on it (attempt 9).
    type: float
    default: 60
  accounting_grace_seconds:
    description:
      - Seconds a tenant's Running pods may hold more devices than Kueue reserved for it (a deleted Job's pods
        outlive its Workload until the garbage collector marks them deleted).
      - And seconds a pod on the nodes may hold devices no admitted Workload accounts for.
    type: float
    default: 10
  termination_grace_max_seconds:
    description: The most terminationGracePeriodSeconds tenant Jobs may ask for (C(tenants_isolation)).
    type: int
    default: 30
  max_object_kib:
    description: The most KiB a tenant Job or ConfigMap may carry (C(tenants_isolation.max_object_kib)).
    type: int
    default: 256
"""

EXAMPLES = r"""
- name: Try to cheat as team-a against team-b
  fairgpu.tenancy.tenant_isolation_probe:
    tenant: "{{ tenants_plan.tenants[0] }}"
    other: "{{ tenants_plan.tenants[1] }}"
    priority_classes: "{{ tenants_workload_priority_classes }}"
    simulated: true
    termination_grace_max_seconds: "{{ tenants_plan.isolation.termination_grace_max_seconds }}"
    max_object_kib: "{{ tenants_plan.isolation.max_object_kib }}"
  register: cheating
"""

RETURN = r"""
scenario:
  description: The attempts as a scenario of the validation report.
  returned: always
  type: dict
  contains:
    name: {description: C(isolation)., type: str}
    title: {description: Heading of the report section., type: str}
    checks:
      description: One per attempt, C({check, expected, observed, passed}).
      type: list
      elements: dict
    metrics:
      description: >-
        C(user) (the impersonated user), C(groups), C(pod_slots_time_to_running_seconds), the other tenant's
        time from submitting its guarantee to its pods Running while the tenant held every pod slot it could reach,
        and C(guarantee_time_to_running_seconds), the same after every attempt while the tenant borrowed every GPU
        it could reach.
      type: dict
    timeline:
      description: The samples of Kueue's reservations and the pods' devices taken after each attempt.
      type: list
      elements: dict
passed:
  description: Whether every attempt was refused as expected.
  returned: always
  type: bool
"""

import copy

from ansible_collections.kubernetes.core.plugins.module_utils.ansiblemodule import AnsibleModule
from ansible_collections.kubernetes.core.plugins.module_utils.args_common import AUTH_ARG_SPEC
from ansible_collections.kubernetes.core.plugins.module_utils.k8s.client import get_api_client
from ansible_collections.kubernetes.core.plugins.module_utils.k8s.core import AnsibleK8SModule
from ansible_collections.kubernetes.core.plugins.module_utils.k8s.exceptions import CoreException
from ansible_collections.fairgpu.tenancy.plugins.module_utils.common.names import LOCAL_QUEUE_SUFFIX, PROBE_IMAGE
from ansible_collections.fairgpu.tenancy.plugins.module_utils.common.waiter import Waiter
from ansible_collections.fairgpu.tenancy.plugins.module_utils.validation import probe


def argspec():
    spec = copy.deepcopy(AUTH_ARG_SPEC)
    spec.update(
        tenant=dict(type="dict", required=True),
        other=dict(type="dict", required=True),
        priority_classes=dict(type="list", elements="dict", default=[]),
        local_queue_suffix=dict(type="str", default=LOCAL_QUEUE_SUFFIX),
        simulated=dict(type="bool", default=False),
        image=dict(type="str", default=PROBE_IMAGE),
        timeout=dict(type="int", default=60),
        hold_seconds=dict(type="int", default=5),
        running_bound_seconds=dict(type="float", default=60),
        accounting_grace_seconds=dict(type="float", default=10),
        termination_grace_max_seconds=dict(type="int", default=30),
        max_object_kib=dict(type="int", default=256),
    )
    return spec


def run(module, waiter=None):
    params = module.params

    def client_as(user, groups):
        if user is None:
            return get_api_client(module)
        return get_api_client(module, impersonate_user=user, impersonate_groups=groups)

    clients = probe.clients_for(params["tenant"], params["other"], client_as)
    try:
        scenario = probe.isolation_scenario(params, clients, waiter or Waiter())
    except probe.ProbeError as exc:
        module.fail_json(msg=str(exc))
    module.exit_json(changed=True, scenario=scenario, passed=all(c["passed"] for c in scenario["checks"]))


def main():
    module = AnsibleK8SModule(module_class=AnsibleModule, argument_spec=argspec(), supports_check_mode=False)
    try:
        run(module)
    except CoreException as exc:
        module.fail_from_exception(exc)


if __name__ == "__main__":
    main()
