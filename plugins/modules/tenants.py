#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: fairgpu maintainers
# Apache License 2.0 (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: tenants
short_description: Every tenant's namespaces, ClusterQueue, LocalQueues, quotas, RBAC and admission policies
version_added: 0.1.0
description:
  - The desired state of the tenants of one cluster, in one module run. It reads the cluster's GPU nodes, plans
    every tenant of O(tenants) against them (plugins/module_utils/tenants/plan.py, C(tenant_plan); the rules of each
    field are in docs/tenants.md and plugins/module_utils/tenants/spec.py), and stops with every error of the plan
    before anything is applied, one message per problem naming the field and the fix.
  - With O(state=present) it then compares each object with the live one in the fields fairgpu sets
    (plugins/module_utils/common/drift.py; RV(drift) names each difference, whoever wrote it), applies every object
    with server-side apply (field manager C(fairgpu), C(force_conflicts), so that a field another manager took is
    taken back), removes the tenants that left O(tenants) when O(prune) is set, and waits until every tenant's
    ClusterQueue is C(Active).
  - Check mode is a server-side dry run of every apply (kubernetes.core's client); an object in a namespace the run
    would create cannot be dry-run and is listed in RV(changed_objects) as one the run would create. With
    C(--diff), RV(diff) holds one entry per object that would change.
  - With O(state=rendered) it only plans, touching nothing; without O(nodes) it reads the cluster's GPU nodes
    (read-only), with O(nodes) it needs no cluster (C(render.yml), the pre-check of C(site.yml)).
  - Upstream quirk (Kubernetes 1.36) handled here, not by the caller; the first apply of a
    ValidatingAdmissionPolicy after its status controller wrote the status rewrites the object's managedFields
    (content unchanged) and reports a change; the module waits for the status and applies the policies once more,
    so that the next run changes nothing.
author:
  - fairgpu maintainers (!UNKNOWN)
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
options:
  state:
    description:
      - C(present) applies the plan and waits for the ClusterQueues; C(rendered) returns the plan only.
    type: str
    choices: [present, rendered]
    default: present
  tenants:
    description:
      - The tenants, as the inventory's C(tenants_list) gives them (C(name), C(gpus), C(namespaces), C(groups),
        C(borrowing_limit), C(lending_limit), C(weight), C(products), ...; docs/tenants.md).
      - A list that is not a list of tenants is an error of the plan, not of this option.
    type: raw
    required: true
  nodes:
    description:
      - The GPU Node objects (API dicts) to plan against, for a plan without a cluster (C(render.yml)'s node pools).
      - Omitted, the cluster's nodes labelled C(nvidia.com/gpu.present=true) are read.
    type: list
    elements: dict
  spec_only:
    description:
      - Check the tenants' fields alone, without nodes and without building objects (the pre-check of a cluster
        that is not reached yet). Only with O(state=rendered).
    type: bool
    default: false
  cohort:
    description: The Cohort every tenant's ClusterQueue joins (C(spec.cohortName)).
    type: str
    default: fairgpu
  preemption:
    description: ClusterQueue C(spec.preemption); null takes C(reclaimWithinCohort=Any), C(withinClusterQueue=LowerPriority).
    type: dict
  queueing_strategy:
    description: ClusterQueue C(spec.queueingStrategy).
    type: str
    choices: [BestEffortFIFO, StrictFIFO]
    default: BestEffortFIFO
  default_container_resources:
    description: The LimitRange's default container requests and limits in tenant namespaces (C(cpu), C(memory)).
    type: dict
  local_queue_suffix:
    description: A tenant's LocalQueue is named C(<tenant name><suffix>) (a LocalQueue C(default) is added as well).
    type: str
    default: "-queue"
  workload_priority_classes:
    description:
      - The platform's WorkloadPriorityClasses, C(name), C(value), C(description) each; null, none.
    type: list
    elements: dict
  isolation:
    description:
      - The policy of every tenant namespace beyond its quotas (Pod Security levels, C(max_jobs),
        C(pods_reserved_per_node), C(termination_grace_max_seconds), limit/request ratios, C(max_object_kib),
        C(max_objects), C(scheduler_names), C(denied_pod_priority_classes)); keys not given keep fairgpu's defaults
        (docs/isolation.md).
    type: dict
  gpu_flavors:
    description:
      - ResourceFlavor settings per GPU product (C(tolerations), C(node_labels)); null, the taints common to each
        product's schedulable nodes, tolerated (docs/tenants.md).
    type: dict
  multikueue:
    description:
      - The cluster's part in MultiKueue (docs/multikueue.md). C(manager) - every ClusterQueue carries the MultiKueue
        admission check C(fairgpu-multikueue) (inactive, admitting nothing, until the multikueue role creates it), and
        tenant Jobs are managed by C(kueue.x-k8s.io/multikueue) (Kueue's webhook sets it) and by nothing else.
        C(worker) - the tenants' groups get no Role and no RoleBinding in their namespaces (those fairgpu made before
        are deleted), so work reaches the worker only through the manager's quota. C(none) - a cluster of its own.
      - I(nodes) on a manager are the workers' GPU nodes (it has none of its own), so each tenant's guarantee there is
        checked against the fleet.
    type: str
    choices: [none, manager, worker]
    default: none
  prune:
    description:
      - Remove the ClusterQueue, LocalQueues, quotas and RBAC of tenants on the cluster that are not in O(tenants)
        (their namespaces and what runs in them stay). When false, such a tenant stops the run with a message, since
        its ClusterQueue still holds quota in the cohort.
    type: bool
    default: false
  wait_timeout:
    description: Seconds to wait for the ClusterQueues to become C(Active).
    type: int
    default: 60
requirements:
  - kubernetes >= 24.2.0
"""

EXAMPLES = r"""
- name: Apply the tenants and wait until their ClusterQueues are Active
  fairgpu.tenancy.tenants:
    tenants:
      - {name: team-a, gpus: 8, borrowing_limit: 8}
      - {name: team-b, gpus: 8, borrowing_limit: 8}
  register: tenants_applied

- name: The objects for a kustomize tree, planned against two nodes of 8 H100s (no cluster)
  fairgpu.tenancy.tenants:
    state: rendered
    tenants: [{name: team-a, gpus: 8}, {name: team-b, gpus: 8}]
    nodes: "{{ pools | fairgpu.tenancy.node_pool_gpu_nodes('single') }}"
"""

RETURN = r"""
plan:
  description:
    - The plan (plugins/module_utils/tenants/plan.py, C(tenant_plan)), what the validation and the monitoring read of
      the tenants, so that they see them exactly as they were applied.
  returned: always
  type: dict
  contains:
    tenants:
      description: The tenants as planned, every field with its default filled in (docs/tenants.md).
      type: list
      elements: dict
    objects:
      description: The objects the tenants need, in the order they are applied (Namespaces first).
      type: list
      elements: dict
    capacity:
      description:
        - What the GPU nodes offer (C(cluster_capacity) of the same file); null when the nodes are not known
          (O(spec_only)).
      type: dict
    warnings:
      description: What does not stop the run, such as guarantees above what the schedulable nodes offer.
      type: list
      elements: str
    accelerators:
      description: Every accelerator resource of the nodes, allotted to which tenants and closed to which.
      type: list
      elements: dict
    local_queue_suffix:
      description: The suffix of every tenant's LocalQueue name (O(local_queue_suffix)).
      type: str
    priority_classes:
      description: The WorkloadPriorityClasses in force.
      type: list
      elements: dict
    isolation:
      description: The namespace policy in force, every key filled in.
      type: dict
    errors:
      description: The plan's errors; the module fails when there is one, with them as its message, one a line.
      type: list
      elements: str
drift:
  description:
    - One line per field fairgpu sets whose live value differs, C(<object> <path>; live <value>, fairgpu <value>),
      repaired by this run (would be, in check mode). Empty with O(state=rendered).
  returned: always
  type: list
  elements: str
changed_objects:
  description: C(<Kind>/<namespace>/<name>) of every object this run changed or removed (would, in check mode).
  returned: always
  type: list
  elements: str
stale:
  description:
    - The tenants on the cluster (fairgpu's ClusterQueues) that are not in O(tenants); with O(prune) this run
      removed them (would, in check mode).
  returned: always
  type: list
  elements: str
diff:
  description: With C(--diff), one C(before)/C(after) entry per changed object.
  returned: when diff mode is on and an object changes
  type: list
  elements: dict
"""

import copy

from ansible_collections.kubernetes.core.plugins.module_utils.ansiblemodule import AnsibleModule
from ansible_collections.kubernetes.core.plugins.module_utils.args_common import AUTH_ARG_SPEC
from ansible_collections.kubernetes.core.plugins.module_utils.k8s.client import get_api_client
from ansible_collections.kubernetes.core.plugins.module_utils.k8s.core import AnsibleK8SModule
from ansible_collections.kubernetes.core.plugins.module_utils.k8s.exceptions import CoreException
from ansible_collections.fairgpu.tenancy.plugins.module_utils.common import drift
from ansible_collections.fairgpu.tenancy.plugins.module_utils.common.applier import Applier, listed
from ansible_collections.fairgpu.tenancy.plugins.module_utils.common.names import (
    GPU_PRESENT_LABEL,
    KUEUE_API,
    LOCAL_QUEUE_SUFFIX,
    MANAGED_BY_LABEL,
    MULTIKUEUE_ROLES,
    RBAC_API,
    TENANT_LABEL,
    TENANT_ROLE,
)
from ansible_collections.fairgpu.tenancy.plugins.module_utils.common.waiter import Waiter
from ansible_collections.fairgpu.tenancy.plugins.module_utils.tenants import plan as tenant_plan

MANAGED = MANAGED_BY_LABEL + "=fairgpu"


def argspec():
    spec = copy.deepcopy(AUTH_ARG_SPEC)
    spec.update(
        state=dict(type="str", choices=["present", "rendered"], default="present"),
        tenants=dict(type="raw", required=True),
        nodes=dict(type="list", elements="dict"),
        spec_only=dict(type="bool", default=False),
        cohort=dict(type="str", default="fairgpu"),
        preemption=dict(type="dict"),
        queueing_strategy=dict(type="str", choices=["BestEffortFIFO", "StrictFIFO"], default="BestEffortFIFO"),
        default_container_resources=dict(type="dict"),
        local_queue_suffix=dict(type="str", default=LOCAL_QUEUE_SUFFIX),
        workload_priority_classes=dict(type="list", elements="dict"),
        isolation=dict(type="dict"),
        gpu_flavors=dict(type="dict"),
        multikueue=dict(type="str", choices=list(MULTIKUEUE_ROLES), default="none"),
        prune=dict(type="bool", default=False),
        wait_timeout=dict(type="int", default=60),
    )
    return spec


def plan(module, nodes):
    """``tenant_plan`` of the module's parameters against ``nodes`` (None: the spec alone)."""
    params = module.params
    return tenant_plan.tenant_plan(
        params["tenants"], nodes, cohort=params["cohort"], preemption=params["preemption"],
        queueing_strategy=params["queueing_strategy"], limit_range=params["default_container_resources"],
        local_queue_suffix=params["local_queue_suffix"], priority_classes=params["workload_priority_classes"],
        isolation=params["isolation"], gpu_flavors=params["gpu_flavors"], multikueue=params["multikueue"])


class Tenants(object):
    """One run of the module against a cluster: ``client`` kubernetes.core's, ``applier`` what writes its objects."""

    def __init__(self, module, client, waiter=None):
        self.module, self.client = module, client
        self.applier = Applier(module, client)
        self.waiter = waiter or Waiter()

    def settle_policies(self, objects):
        """Wait until the API server has type-checked every ValidatingAdmissionPolicy (its status
        observedGeneration at its generation), then apply them once more (managedFields only, not a change)."""
        policies = [o for o in objects if o["kind"] == "ValidatingAdmissionPolicy"]
        names = set(o["metadata"]["name"] for o in policies)

        def read():
            return [p for p in listed(self.client, "ValidatingAdmissionPolicy", policies[0]["apiVersion"],
                                      label_selector=MANAGED) if p["metadata"]["name"] in names]

        def typed(policy):
            return (policy.get("status") or {}).get("observedGeneration") == policy["metadata"].get("generation")

        def checked(found):
            return len(found) == len(names) and all(typed(p) for p in found)

        if policies:
            held, found, _elapsed = self.waiter.wait(read, 15, 1, checked)
            if not held:
                self.module.fail_json(msg="tenants: the API server did not type-check the admission policies within 15 s "
                                      "(status.observedGeneration behind metadata.generation): %s" % ", ".join(
                                          sorted(names - set(p["metadata"]["name"] for p in found if typed(p)))),
                                      changed=True, changed_objects=self.applier.changed)
            for policy in policies:
                self.applier.service.apply(self.applier.resource(policy), copy.deepcopy(policy),
                                           self.applier.service.retrieve(self.applier.resource(policy), policy))

    def prune(self, name):
        """Delete what fairgpu applied for tenant ``name`` (its namespaces and what runs there stay)."""
        selector = "%s=%s,%s" % (TENANT_LABEL, name, MANAGED)
        for namespace in listed(self.client, "Namespace", label_selector="%s=%s" % (TENANT_LABEL, name)):
            for api_version, kind in tenant_plan.PRUNED_KINDS:
                for item in listed(self.client, kind, api_version, namespace=namespace["metadata"]["name"],
                                   label_selector=selector):
                    self.applier.delete(dict(item, apiVersion=api_version, kind=kind))
        self.applier.delete({"apiVersion": KUEUE_API, "kind": "ClusterQueue", "metadata": {"name": name}})

    def wait_active(self, names, timeout):
        """Wait until the ClusterQueue of every tenant in ``names`` is Active; fail naming those that are not."""
        def read():
            return listed(self.client, "ClusterQueue", KUEUE_API, label_selector=MANAGED)

        held, queues, elapsed = self.waiter.wait(read, timeout, 2, lambda found: not tenant_plan.inactive_queues(found, names))
        if not held:
            self.module.fail_json(msg="tenants: the ClusterQueues of %s did not become Active within %d s: %s" % (
                ", ".join(sorted(tenant_plan.inactive_queues(queues, names))), timeout,
                "; ".join(tenant_plan.queue_conditions(queues, names))), changed=bool(self.applier.changed))
        return elapsed


def converge(module, client, waiter=None):
    """State present: plan against the live nodes, apply, prune, wait. Returns the module's result."""
    run = Tenants(module, client, waiter)
    nodes = module.params["nodes"]
    if nodes is None:
        nodes = listed(client, "Node", label_selector=GPU_PRESENT_LABEL + "=true")
    planned = plan(module, nodes)
    if planned["errors"]:
        module.fail_json(msg="\n".join(planned["errors"]), plan=planned)
    existing = listed(client, "ClusterQueue", KUEUE_API, label_selector=MANAGED)
    wanted = [t["name"] for t in planned["tenants"]]
    stale = tenant_plan.stale_tenants(existing, wanted)
    if stale and not module.params["prune"]:
        module.fail_json(msg=tenant_plan.stale_message(stale), plan=planned, stale=stale)
    namespaces = set(n["metadata"]["name"] for n in listed(client, "Namespace"))
    new_namespaces = set(o["metadata"]["name"] for o in planned["objects"] if o["kind"] == "Namespace") - namespaces
    differences = []
    for definition in planned["objects"]:
        differences.extend(run.applier.apply(definition, new_namespaces))
    if module.params["multikueue"] == "worker":
        # A cluster that becomes a MultiKueue worker keeps no access of the tenants' own from before.
        for namespace in sorted(o["metadata"]["name"] for o in planned["objects"] if o["kind"] == "Namespace"):
            for kind in ("RoleBinding", "Role"):
                run.applier.delete({"apiVersion": RBAC_API, "kind": kind,
                                    "metadata": {"name": TENANT_ROLE, "namespace": namespace}})
    applied = bool(run.applier.changed)
    if applied and not module.check_mode:
        run.settle_policies(planned["objects"])
    for name in stale:
        if not module.check_mode:
            run.prune(name)
        else:
            run.applier.changed.append("ClusterQueue/" + name)
    if not module.check_mode and (applied or stale or tenant_plan.inactive_queues(existing, wanted)):
        run.wait_active(wanted, module.params["wait_timeout"])
    result = dict(changed=bool(run.applier.changed), plan=planned, changed_objects=run.applier.changed,
                  drift=drift.difference_lines(differences), stale=stale)
    if module._diff and run.applier.diffs:
        result["diff"] = run.applier.diffs
    return result


def rendered(module, client_factory):
    """State rendered: the plan only (nodes given, read from the cluster, or none with spec_only)."""
    params = module.params
    if params["spec_only"]:
        nodes = None
    elif params["nodes"] is not None:
        nodes = params["nodes"]
    else:
        nodes = listed(client_factory(), "Node", label_selector=GPU_PRESENT_LABEL + "=true")
    planned = plan(module, nodes)
    if planned["errors"]:
        module.fail_json(msg="\n".join(planned["errors"]), plan=planned)
    return dict(changed=False, plan=planned, changed_objects=[], drift=[], stale=[])


def main():
    module = AnsibleK8SModule(module_class=AnsibleModule, argument_spec=argspec(), supports_check_mode=True)
    try:
        if module.params["state"] == "rendered":
            result = rendered(module, lambda: get_api_client(module))
        else:
            if module.params["spec_only"]:
                module.fail_json(msg="spec_only: only with state rendered (a plan without nodes builds no objects)")
            result = converge(module, get_api_client(module))
        module.exit_json(**result)
    except CoreException as exc:
        module.fail_from_exception(exc)


if __name__ == "__main__":
    main()
