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
  - "The tenant's and O(other)'s Running pods are compared with what Kueue reserved for them after each
    attempt; pods holding more devices than Kueue accounts for fail the scenario, naming the tenant."
  - Writes that must be refused are sent as server-side dry runs, so nothing changes even if one got through.
    The probe's Jobs (prefix C(fairgpu-probe-), label C(fairgpu.io/probe)) are real and deleted at the end.
  - Needs an identity allowed to impersonate users and groups (cluster admin); the kubeconfig's identity also
    stands for "a user allowed to create pods".
  - Does not run in check mode (it creates and deletes Jobs).
author:
  - fairgpu maintainers
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
options:
  tenant:
    description: The cheating tenant, normalised as the tenants role plans it (C(tenants_plan.tenants[]).
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
    description: How long a tenant's Running pods may hold more devices than Kueue reserved for it.
    type: float
    default: 5
  termination_grace_max_seconds:
    description: The most terminationGracePeriodSeconds tenant Jobs may ask for (C(tenants_isolation)).
    type: int
    default: 30
"""

EXAMPLES = r"""
- name: Try to cheat as team-a against team-b
  fairgpu.tenancy.tenant_isolation_probe:
    tenant: "{{ tenants_plan.tenants[0] }}"
    other: "{{ tenants_plan.tenants[1] }}"
    priority_classes: "{{ tenants_workload_priority_classes }}"
    simulated: true
    termination_grace_max_seconds: "{{ tenants_plan.isolation.termination_grace_max_seconds }}"
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
        C(user) (the impersonated user), C(groups), and C(pod_slots_time_to_running_seconds), the other tenant's
        time from submitting its guarantee to its pods Running while the tenant held every pod slot it could reach.
      type: dict
    timeline:
      description: The samples of Kueue's reservations and the pods' devices taken after each attempt.
      type: list
passed:
  description: Whether every attempt was refused as expected.
  returned: always
  type: bool
"""

import copy
import json
import time
import uuid

from ansible_collections.kubernetes.core.plugins.module_utils.ansiblemodule import AnsibleModule
from ansible_collections.kubernetes.core.plugins.module_utils.args_common import AUTH_ARG_SPEC
from ansible_collections.kubernetes.core.plugins.module_utils.k8s.client import get_api_client
from ansible_collections.kubernetes.core.plugins.module_utils.k8s.core import AnsibleK8SModule
from ansible_collections.kubernetes.core.plugins.module_utils.k8s.exceptions import CoreException
from ansible_collections.fairgpu.tenancy.plugins.module_utils.validation import isolation
from ansible_collections.fairgpu.tenancy.plugins.module_utils.kueue import status as kueue_status
from ansible_collections.fairgpu.tenancy.plugins.module_utils.validation import report
from ansible_collections.fairgpu.tenancy.plugins.module_utils.validation import scenarios as validation
from ansible_collections.fairgpu.tenancy.plugins.module_utils.common.names import (
    ADMISSION_API,
    GPU_POD_POLICY,
    GPU_PRESENT_LABEL,
    JOB_POLICY,
    KUEUE_API,
    LIMIT_RANGE,
    LOCAL_QUEUE_SUFFIX,
    PROBE_IMAGE,
    PROBE_LABEL,
    PROBE_PREFIX,
    RBAC_API,
    RESOURCE_QUOTA,
    TENANT_ROLE,
    WORKLOAD_PREFIX,
)

try:
    from kubernetes.dynamic.exceptions import DynamicApiError, NotFoundError
except ImportError:
    pass  # AnsibleK8SModule reports the missing kubernetes library

DRY_RUN = "All"
# How many Jobs past its count/jobs.batch quota a burst may get before the quota stops it (see Probe.burst).
BURST_OVERSHOOT = 5
MERGE = "application/merge-patch+json"


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
        accounting_grace_seconds=dict(type="float", default=5),
        termination_grace_max_seconds=dict(type="int", default=30),
    )
    return spec


class Probe(object):
    """The attempts of one tenant; ``as_tenant`` sends as the tenant, ``admin`` as the module's identity."""

    def __init__(self, module, admin, as_tenant, as_other):
        self.module, self.admin, self.as_tenant, self.as_other = module, admin, as_tenant, as_other
        params = module.params
        self.tenant, self.other = params["tenant"], params["other"]
        self.ns, self.other_ns = self.tenant["namespaces"][0], self.other["namespaces"][0]
        self.resource = self.tenant["gpu_resource"]
        self.seconds = 600 if params["simulated"] else None
        self.image = params["image"]
        self.start = time.monotonic()
        self.samples, self.metrics = [], {}

    def wait_until(self, predicate, what, timeout=None):
        """Poll ``predicate()`` every half second until it returns a true value, which is returned; fails the
        module naming ``what`` after ``timeout`` seconds (default: the module's timeout)."""
        timeout = self.module.params["timeout"] if timeout is None else timeout
        deadline = time.monotonic() + timeout
        while True:
            value = predicate()
            if value:
                return value
            if time.monotonic() > deadline:
                self.module.fail_json(msg="%s: not within %s s" % (what, timeout))
            time.sleep(0.5)

    def read_state(self):
        """Kueue's reservations and the devices the two tenants' Running pods hold (``kueue_status``)."""
        namespaces = self.tenant["namespaces"] + self.other["namespaces"]
        queues = self.admin.get(self.admin.resource("ClusterQueue", KUEUE_API)).to_dict()["items"]
        local_queues = [q for ns in namespaces
                        for q in self.admin.get(self.admin.resource("LocalQueue", KUEUE_API), namespace=ns).to_dict()["items"]]
        pods = [p for ns in namespaces
                for p in self.admin.get(self.admin.resource("Pod", "v1"), namespace=ns).to_dict()["items"]]
        info = kueue_status.admission_info(queues, local_queues, [], resource=self.resource,
                                           queue_names={self.tenant["name"], self.other["name"]}, pods=pods)
        self.samples.append(kueue_status.sample(info, time.monotonic() - self.start, time.time()))
        return info

    # -- sending ---------------------------------------------------------------------------------------------
    def send(self, client, verb, api_version, kind, body=None, name=None, namespace=None, dry_run=True):
        """One request; returns None when accepted, else ``isolation.refusal``."""
        resource = client.resource(kind, api_version)
        options = {"dry_run": DRY_RUN} if dry_run and verb != "list" else {}
        try:
            if verb == "create":
                client.create(resource, body, namespace=namespace, **options)
            elif verb == "patch":
                client.patch(resource, body, name=name, namespace=namespace, content_type=MERGE, **options)
            elif verb == "delete":
                client.delete(resource, name=name, namespace=namespace, **options)
            elif verb == "get":
                client.get(resource, name=name, namespace=namespace)
            else:
                client.get(resource, namespace=namespace)
        except DynamicApiError as exc:
            return isolation.refusal(exc.status, _message(exc))
        return None

    def job(self, client, job):
        """Create a probe Job for real; fails the module when it is refused."""
        answer = self.send(client, "create", "batch/v1", "Job", job, namespace=job["metadata"]["namespace"],
                           dry_run=False)
        if answer is not None:
            self.module.fail_json(msg="the probe could not create Job %s/%s: %s" % (
                job["metadata"]["namespace"], job["metadata"]["name"], answer["message"]))

    def workload_of(self, namespace, job_name, judged=True):
        """Wait for the Workload of a Job (and, with ``judged``, for Kueue's QuotaReserved condition)."""
        def find():
            mine = [w for w in self._workloads(namespace)
                    if any(o.get("name") == job_name for o in w["metadata"].get("ownerReferences", []))]
            return mine[0] if mine and (not judged or isolation.quota_reserved(mine[0])) else None
        return self.wait_until(find, "Kueue judged no Workload of Job %s/%s" % (namespace, job_name))

    def pods_of(self, namespace, job_name):
        resource = self.admin.resource("Pod", "v1")
        pods = self.admin.get(resource, namespace=namespace, label_selector="job-name=" + job_name).to_dict()["items"]
        return [p["metadata"]["name"] for p in pods]

    def pending_check(self, attempt, expected, job, want_reason=None):
        """Create ``job`` as the tenant; judge it by Kueue's QuotaReserved condition and the absence of pods."""
        self.job(self.as_tenant, job)
        name = job["metadata"]["name"]
        condition = isolation.quota_reserved(self.workload_of(self.ns, name))
        pods = self.pods_of(self.ns, name)
        observed = "QuotaReserved=%s (%s): %s; pods: %s" % (condition["status"], condition.get("reason"),
                                                           condition.get("message"), len(pods))
        passed = condition["status"] == "False" and not pods and (want_reason is None or
                                                                 condition.get("reason") == want_reason)
        return report.check(attempt, expected, observed, passed)

    # -- the attempts ----------------------------------------------------------------------------------------
    def bare_pods(self):
        pod = isolation.bare_pod("bare", self.ns, self.resource, image=self.image)
        as_tenant = {"create Pod": self.send(self.as_tenant, "create", "v1", "Pod", pod, namespace=self.ns)}
        as_admin = {"create Pod": self.send(self.admin, "create", "v1", "Pod", pod, namespace=self.ns)}
        return [
            isolation.refused_check("1. bare GPU Pod (no Job, no queue) as the tenant", as_tenant, "RBAC"),
            isolation.refused_check("1. bare GPU Pod by a user allowed to create pods", as_admin,
                                    "ValidatingAdmissionPolicy " + GPU_POD_POLICY),
        ]

    def other_queue(self):
        queue = self.other["name"] + self.module.params["local_queue_suffix"]
        job = isolation.probe_job("other-queue", self.ns, self.resource, queue=queue, seconds=self.seconds,
                                  image=self.image)
        return [self.pending_check("2. Job labelled with %s's LocalQueue %s" % (self.other["name"], queue),
                                   "never admitted: Kueue finds no LocalQueue %s in %s" % (queue, self.ns),
                                   job, want_reason="Inadmissible")]

    def platform_objects(self):
        checks = []
        kueue_kinds = [("ClusterQueue", self.tenant["name"]), ("Cohort", None), ("ResourceFlavor", None),
                       ("WorkloadPriorityClass", None)]
        cluster_scoped = [(KUEUE_API, kind, name) for kind, name in kueue_kinds] + [
            (ADMISSION_API, "ValidatingAdmissionPolicy", JOB_POLICY),
            (RBAC_API, "ClusterRoleBinding", None)]
        for api_version, kind, name in cluster_scoped:
            name = name or self._first_name(api_version, kind)
            checks.append(isolation.refused_check("3. write %s objects" % kind, self._writes(api_version, kind, name),
                                                  "RBAC"))
        for api_version, kind, name in (("v1", "ResourceQuota", RESOURCE_QUOTA),
                                        ("v1", "LimitRange", LIMIT_RANGE),
                                        (RBAC_API, "Role", TENANT_ROLE),
                                        (RBAC_API, "RoleBinding", TENANT_ROLE)):
            checks.append(isolation.refused_check("3. write its own namespace's %s" % kind,
                                                  self._writes(api_version, kind, name, self.ns), "RBAC"))
        local_queue = {"apiVersion": KUEUE_API, "kind": "LocalQueue",
                       "metadata": {"name": PROBE_PREFIX + "lq", "namespace": self.ns},
                       "spec": {"clusterQueue": self.other["name"]}}
        checks.append(isolation.refused_check(
            "3. LocalQueue in its namespace pointing at %s's ClusterQueue" % self.other["name"],
            {"create LocalQueue": self.send(self.as_tenant, "create", KUEUE_API, "LocalQueue", local_queue,
                                            namespace=self.ns)}, "RBAC"))
        return checks

    def _first_name(self, api_version, kind):
        items = self.admin.get(self.admin.resource(kind, api_version)).to_dict()["items"]
        return items[0]["metadata"]["name"] if items else PROBE_PREFIX + "none"

    def _writes(self, api_version, kind, name, namespace=None):
        body = {"apiVersion": api_version, "kind": kind,
                "metadata": {"name": PROBE_PREFIX + "new", "labels": {PROBE_LABEL: "isolation"}}}
        if namespace:
            body["metadata"]["namespace"] = namespace
        patch = {"metadata": {"labels": {PROBE_LABEL: "isolation"}}}
        return {
            "create " + kind: self.send(self.as_tenant, "create", api_version, kind, body, namespace=namespace),
            "patch " + kind: self.send(self.as_tenant, "patch", api_version, kind, patch, name=name, namespace=namespace),
            "delete " + kind: self.send(self.as_tenant, "delete", api_version, kind, name=name, namespace=namespace),
        }

    def other_namespace(self):
        checks = []
        job = isolation.probe_job("trespass", self.other_ns, self.resource, image=self.image)
        pod = isolation.bare_pod("trespass", self.other_ns, self.resource, image=self.image)
        for api_version, kind, body in (("batch/v1", "Job", job), ("v1", "Pod", pod),
                                        (KUEUE_API, "Workload", None), ("v1", "Secret", None)):
            outcomes = {"list %s" % kind: self.send(self.as_tenant, "list", api_version, kind, namespace=self.other_ns)}
            if body is not None:
                outcomes["create %s" % kind] = self.send(self.as_tenant, "create", api_version, kind, body,
                                                         namespace=self.other_ns)
            checks.append(isolation.refused_check("4. %ss in %s's namespace %s" % (kind, self.other["name"],
                                                                                   self.other_ns), outcomes, "RBAC"))
        checks.append(isolation.refused_check("4. Secrets in its own namespace", {
            "list Secret": self.send(self.as_tenant, "list", "v1", "Secret", namespace=self.ns)}, "RBAC"))
        return checks

    def over_maximum(self):
        """Attempts 5 and 6: more devices than the hard maximum, and lifting the suspension of that Job."""
        most = self.tenant["max_gpus"]
        queue = self._queue(self.tenant)
        one = isolation.probe_job("one-big-pod", self.ns, self.resource, gpus=most + 1, queue=queue,
                                  seconds=self.seconds, image=self.image)
        many = isolation.probe_job("many-pods", self.ns, self.resource, pods=most + 1, queue=queue,
                                   seconds=self.seconds, image=self.image)
        checks = [
            self.pending_check("6. one pod asking for %d %s (hard maximum %d)" % (most + 1, self.resource, most),
                               "never admitted: Kueue holds the Workload (LimitRange maximum)", one),
            self.pending_check("6. %d pods of 1 %s (hard maximum %d)" % (most + 1, self.resource, most),
                               "never admitted: Kueue holds the Workload (insufficient quota)", many),
        ]
        split = isolation.over_quota_split(most)
        forged = isolation.bare_pod("past-kueue", self.ns, self.resource, per_container=split, containers=2,
                                    owner_uid=str(uuid.uuid4()), image=self.image)
        checks.append(isolation.refused_check(
            "6. a pod past Kueue (forged Job owner) asking for %d %s" % (2 * split, self.resource),
            {"create Pod": self.send(self.admin, "create", "v1", "Pod", forged, namespace=self.ns)},
            "ResourceQuota " + RESOURCE_QUOTA if 2 * split <= self.tenant["max_gpus_per_pod"] else "LimitRange"))

        name = one["metadata"]["name"]
        workload = self.workload_of(self.ns, name, judged=False)["metadata"]["name"]
        outcomes = {
            "patch Job spec.suspend=false": self.send(self.as_tenant, "patch", "batch/v1", "Job",
                                                      {"spec": {"suspend": False}}, name=name, namespace=self.ns),
            "patch Workload": self.send(self.as_tenant, "patch", KUEUE_API, "Workload",
                                        {"metadata": {"labels": {PROBE_LABEL: "x"}}}, name=workload,
                                        namespace=self.ns),
        }
        status = self.as_tenant.resource("Workload", KUEUE_API).subresources["status"]
        try:
            self.as_tenant.patch(status, {"status": {"admission": {"clusterQueue": self.tenant["name"]}}},
                                 name=workload, namespace=self.ns, content_type=MERGE, dry_run=DRY_RUN)
            outcomes["patch Workload status.admission"] = None
        except DynamicApiError as exc:
            outcomes["patch Workload status.admission"] = isolation.refusal(exc.status, _message(exc))
        result = isolation.refused_check("5. lift Kueue's suspension of its own Job, edit its Workload", outcomes,
                                         "RBAC")
        suspended = self.admin.get(self.admin.resource("Job", "batch/v1"), name=name,
                                   namespace=self.ns).to_dict()["spec"].get("suspend")
        pods = self.pods_of(self.ns, name)
        result["observed"] += "; afterwards Job suspended=%s, pods: %d" % (suspended, len(pods))
        result["passed"] = result["passed"] and suspended is True and not pods
        checks.append(result)
        return checks

    def priorities(self):
        params = self.module.params
        allowed = self.tenant.get("priority_classes") or []
        denied = isolation.forbidden_class(allowed, params["priority_classes"])
        job = isolation.probe_job("denied-class", self.ns, self.resource, queue=self._queue(self.tenant),
                                  priority_class=denied, image=self.image)
        pod_priority = isolation.probe_job("pod-priority", self.ns, self.resource, queue=self._queue(self.tenant),
                                           pod_priority_class="system-cluster-critical", image=self.image)
        checks = [
            isolation.refused_check("7. WorkloadPriorityClass %s (allowed: %s)" % (denied, ", ".join(allowed) or "none"),
                                    {"create Job": self.send(self.as_tenant, "create", "batch/v1", "Job", job,
                                                             namespace=self.ns)},
                                    "ValidatingAdmissionPolicy " + JOB_POLICY),
            isolation.refused_check("7. pod priorityClassName system-cluster-critical in a Job",
                                    {"create Job": self.send(self.as_tenant, "create", "batch/v1", "Job", pod_priority,
                                                             namespace=self.ns)},
                                    "ValidatingAdmissionPolicy " + JOB_POLICY),
        ]
        checks.append(self.jump_the_queue(isolation.highest_class(allowed, params["priority_classes"])))
        return checks

    def jump_the_queue(self, priority_class):
        """The other tenant takes its guarantee; the tenant then asks, at its highest allowed priority, for one
        device more than the rest of the cluster. The other tenant must keep every device of its guarantee."""
        other, params = self.other, self.module.params
        held = []
        for index in range(other["gpus"]):
            job = isolation.probe_job("guarantee-%d" % index, self.other_ns, other["gpu_resource"],
                                      queue=self._queue(other), seconds=self.seconds, image=self.image)
            self.job(self.as_other, job)
            held.append(job["metadata"]["name"])
        self.wait_until(lambda: all(self._admitted(self.other_ns, name) for name in held),
                        "%s did not get its guarantee of %d; the priority attempt needs an idle cluster"
                        % (other["name"], other["gpus"]))
        capacity = self._capacity(other["gpu_resource"])
        ask = capacity - other["gpus"] + 1
        job = isolation.probe_job("jump", self.ns, self.resource, pods=ask, queue=self._queue(self.tenant),
                                  priority_class=priority_class, seconds=self.seconds, image=self.image)
        self.job(self.as_tenant, job)
        condition = isolation.quota_reserved(self.workload_of(self.ns, job["metadata"]["name"]))
        time.sleep(params["hold_seconds"])
        condition = isolation.quota_reserved(self.workload_of(self.ns, job["metadata"]["name"])) or condition
        kept = [name for name in held if self._admitted(self.other_ns, name)]
        evicted = [w["metadata"]["name"] for w in self._workloads(self.other_ns) if kueue_status.evicted(kueue_status.conditions(w))]
        observed = ("%s: QuotaReserved=%s (%s); %s kept %d of %d guaranteed Jobs admitted, evicted: %s"
                    % (job["metadata"]["name"], condition["status"], condition.get("reason"), other["name"], len(kept),
                       len(held), ", ".join(evicted) or "none"))
        return report.check(
            "7. priority %s for %d %s while %s holds its guarantee of %d" % (priority_class or "(none)", ask,
                                                                           self.resource, other["name"], other["gpus"]),
            "the tenant waits; %s keeps its guarantee, nothing evicted" % other["name"], observed,
            condition["status"] == "False" and len(kept) == len(held) and not evicted)

    # -- round two: work and capacity Kueue never sees, the device door ------------------------------------
    def spoofed_child(self):
        """Attempt 8: a Job with no queue that names the tenant's own admitted Job as its controller."""
        parent = isolation.probe_job("parent", self.ns, self.resource, gpus=0, queue=self._queue(self.tenant),
                                     seconds=self.seconds, image=self.image)
        self.job(self.as_tenant, parent)
        self.wait_until(lambda: self._admitted(self.ns, parent["metadata"]["name"]),
                        "Kueue did not admit the probe's parent Job %s" % parent["metadata"]["name"])
        live = self.admin.get(self.admin.resource("Job", "batch/v1"), name=parent["metadata"]["name"],
                              namespace=self.ns).to_dict()
        pods = self._capacity(self.resource)
        child = isolation.child_job("child", self.ns, live, self.resource, pods)
        return [isolation.refused_check(
            "8. a Job with no queue claiming its own admitted Job as controller (%d pods of 1 %s)" % (pods, self.resource),
            {"create Job": self.send(self.as_tenant, "create", "batch/v1", "Job", child, namespace=self.ns)},
            "ValidatingAdmissionPolicy " + JOB_POLICY)]

    def pod_slots(self):
        """Attempt 9: CPU-only pods past the nodes' pod slots; then every pod slot it can reach while the other
        tenant submits its guarantee, which Kueue reclaims (measured to the other tenant's pods Running)."""
        self.cleanup()  # the earlier attempts' Jobs hold pods and quota
        slots = self._capacity("pods")
        queue = self._queue(self.tenant)
        flood = isolation.probe_job("pod-slots", self.ns, self.resource, gpus=0, pods=slots + 4, queue=queue,
                                    seconds=self.seconds, image=self.image, cpu="10m", memory="16Mi")
        checks = [self.pending_check(
            "9. one Job of %d pods of 10m CPU and 16Mi (the GPU nodes have %d pod slots)" % (slots + 4, slots),
            "never admitted: Kueue counts pods (insufficient quota for pods)", flood)]
        self.delete_jobs(self.ns)
        # Its own pod slots in one Job, the slots it may borrow in another: Kueue admits both while the other
        # tenant is idle.
        own, most = self.tenant["pods"], self.tenant["max_pods"]
        jobs = [isolation.probe_job("slots-%d" % i, self.ns, self.resource, gpus=0, pods=count, queue=queue,
                                    seconds=self.seconds, image=self.image, cpu="10m", memory="16Mi")
                for i, count in enumerate((own, most - own)) if count]
        for job in jobs:
            self.job(self.as_tenant, job)

        def all_running():
            self.read_state()
            return len(self._running_pods(self.ns)) >= most

        self.wait_until(all_running, "%s's %d tiny pods did not all run" % (self.tenant["name"], most),
                        timeout=4 * self.module.params["timeout"])
        other = self.other
        submitted = time.monotonic()
        for index in range(other["gpus"]):
            self.job(self.as_other, isolation.probe_job("slots-guarantee-%d" % index, self.other_ns,
                                                        other["gpu_resource"], queue=self._queue(other),
                                                        seconds=self.seconds, image=self.image))
        bound = self.module.params["running_bound_seconds"]
        self.wait_until(lambda: self.read_state()["queues"][other["name"]]["pods_running"] >= other["gpus"],
                        "%s's pods did not run on its guarantee of %d while %s held %d pod slots"
                        % (other["name"], other["gpus"], self.tenant["name"], most), timeout=3 * bound)
        took = round(time.monotonic() - submitted, 1)
        self.metrics["pod_slots_time_to_running_seconds"] = took
        evicted = [w["metadata"]["name"] for w in self._workloads(self.ns) if kueue_status.evicted(kueue_status.conditions(w))]
        checks.append(report.check(
            "9. %s holds %d pod slots (%d borrowed); %s submits its guarantee of %d" % (
                self.tenant["name"], most, most - own, other["name"], other["gpus"]),
            "Kueue reclaims the borrowed slots; %s's pods Running within %s s" % (other["name"], bound),
            "%s's pods Running after %.1f s; %s's workloads evicted: %s" % (other["name"], took, self.tenant["name"],
                                                                          ", ".join(evicted) or "none"),
            took <= bound))
        self.delete_jobs(self.ns, self.other_ns)
        return checks

    def burst(self):
        """Attempt 10: a burst of Jobs past the namespace's Job quota.

        The quota's admission counts from the quota's status, which kube-controller-manager's recount can lower to
        what its lagging cache sees, so under a burst a few objects can get past a ResourceQuota (kubernetes
        #123434; the reservation proposal kubernetes#20113 describes the race). The probe therefore starts once the
        recount has caught up with the earlier attempts' deletions, and judges whether the quota stops the burst
        within ``BURST_OVERSHOOT`` Jobs of its limit."""
        quotas, jobs = self.admin.resource("ResourceQuota", "v1"), self.admin.resource("Job", "batch/v1")

        def settled():
            status = self.admin.get(quotas, name=RESOURCE_QUOTA, namespace=self.ns).to_dict().get("status") or {}
            count = len(self.admin.get(jobs, namespace=self.ns).to_dict()["items"])
            used = int((status.get("used") or {}).get("count/jobs.batch", -1))
            return (int((status.get("hard") or {}).get("count/jobs.batch", 0)), used) if used == count else None

        hard, used = self.wait_until(settled, "the Job quota's count did not match the namespace's Jobs")
        created, refused = 0, None
        # Queued on a LocalQueue that does not exist: Kueue keeps them (no pods), as a backlog would wait.
        for index in range(max(0, hard - used) + BURST_OVERSHOOT + 1):
            job = isolation.probe_job("burst-%d" % index, self.ns, self.resource, queue=PROBE_PREFIX + "nowhere",
                                      image=self.image)
            refused = self.send(self.as_tenant, "create", "batch/v1", "Job", job, namespace=self.ns, dry_run=False)
            if refused is not None:
                break
            created += 1
        result = isolation.refused_check(
            "10. a burst of Jobs past its Job quota (count/jobs.batch %d, %d in use)" % (hard, used),
            {"create Job %d" % (created + 1): refused}, "ResourceQuota " + RESOURCE_QUOTA)
        over = created - (hard - used)
        result["expected"] += " within %d Jobs past the quota" % BURST_OVERSHOOT
        result["observed"] = "%d created (%d past the quota), then %s" % (created, max(0, over), result["observed"])
        result["passed"] = result["passed"] and hard > 0 and 0 <= over <= BURST_OVERSHOOT
        self.delete_jobs(self.ns)
        return [result]

    def device_door(self):
        """Attempt 11: Jobs without a GPU request that reach for the node's devices or host; a privileged pod."""
        jobs = isolation.device_door_jobs(self.ns, self.resource, self.module.params["termination_grace_max_seconds"])
        outcomes = {route: self.send(self.as_tenant, "create", "batch/v1", "Job", job, namespace=self.ns)
                    for route, job in jobs.items()}
        pod = isolation.privileged_pod("privileged", self.ns, image=self.image)
        return [
            isolation.refused_check("11. Jobs with no GPU request that reach for the node's devices or host",
                                    outcomes, "ValidatingAdmissionPolicy " + JOB_POLICY),
            isolation.refused_check("11. a privileged pod by a user allowed to create pods",
                                    {"create Pod": self.send(self.admin, "create", "v1", "Pod", pod, namespace=self.ns)},
                                    "PodSecurity"),
        ]

    def never_runnable(self):
        """Attempt 12: one pod of two containers that together ask for more devices than any node has."""
        per_pod = self.tenant["max_gpus_per_pod"]
        job = isolation.probe_job("too-big-pod", self.ns, self.resource, gpus=per_pod, containers=2,
                                  queue=self._queue(self.tenant), seconds=self.seconds, image=self.image)
        return [self.pending_check(
            "12. one pod of 2 containers x %d %s (a node has at most %d)" % (per_pod, self.resource, per_pod),
            "never admitted: Kueue holds the Workload (LimitRange Pod maximum), no quota held", job)]

    def accounting(self):
        """After the attempts: no tenant's Running pods held more devices than Kueue reserved for it."""
        return [validation.accounting_check(self.samples, self.module.params["accounting_grace_seconds"], "isolation")]

    # -- reading ---------------------------------------------------------------------------------------------
    def _queue(self, tenant):
        return tenant["name"] + self.module.params["local_queue_suffix"]

    def _workloads(self, namespace):
        return self.admin.get(self.admin.resource("Workload", KUEUE_API), namespace=namespace).to_dict()["items"]

    def _admitted(self, namespace, job_name):
        for workload in self._workloads(namespace):
            if any(o.get("name") == job_name for o in workload["metadata"].get("ownerReferences", [])):
                condition = isolation.quota_reserved(workload)
                return bool(condition and condition["status"] == "True")
        return False

    def _capacity(self, resource):
        nodes = self.admin.get(self.admin.resource("Node", "v1"), label_selector=GPU_PRESENT_LABEL + "=true")
        return sum(int((n["status"].get("allocatable") or {}).get(resource, 0)) for n in nodes.to_dict()["items"])

    def _running_pods(self, namespace):
        pods = self.admin.get(self.admin.resource("Pod", "v1"), namespace=namespace,
                              label_selector=PROBE_LABEL).to_dict()["items"]
        return [p for p in pods if (p.get("status") or {}).get("phase") == "Running"
                and not p["metadata"].get("deletionTimestamp")]

    def delete_jobs(self, *namespaces):
        """Delete the probe's Jobs (and their pods) in ``namespaces``."""
        jobs = self.admin.resource("Job", "batch/v1")
        for namespace in namespaces:
            for job in self.admin.get(jobs, namespace=namespace, label_selector=PROBE_LABEL).to_dict()["items"]:
                try:
                    self.admin.delete(jobs, name=job["metadata"]["name"], namespace=namespace,
                                      body={"propagationPolicy": "Background"})
                except NotFoundError:
                    pass

    def cleanup(self):
        """Delete the probe's Jobs (and their pods) in both namespaces and wait for their Workloads and pods to go."""
        namespaces = (self.ns, self.other_ns)
        self.delete_jobs(*namespaces)
        pods = self.admin.resource("Pod", "v1")
        self.wait_until(lambda: not any(
            w["metadata"]["name"].startswith(WORKLOAD_PREFIX + PROBE_PREFIX)
            for namespace in namespaces for w in self._workloads(namespace)) and not any(
            self.admin.get(pods, namespace=namespace, label_selector=PROBE_LABEL).to_dict()["items"]
            for namespace in namespaces), "the probe's Workloads and pods were not gone", timeout=3 * self.module.params["timeout"])


def _message(exc):
    """The message of the Status body of an API error."""
    try:
        return json.loads(exc.body)["message"]
    except (TypeError, ValueError, KeyError):
        return exc.summary()


def run(module):
    params = module.params
    tenant, other = params["tenant"], params["other"]
    user = "fairgpu-probe@%s" % tenant["name"]
    admin = get_api_client(module)
    as_tenant = get_api_client(module, impersonate_user=user, impersonate_groups=tenant["groups"])
    as_other = get_api_client(module, impersonate_user="fairgpu-probe@%s" % other["name"],
                              impersonate_groups=other["groups"])
    probe = Probe(module, admin, as_tenant, as_other)
    probe.cleanup()
    try:
        checks = []
        for attempt in (probe.bare_pods, probe.other_queue, probe.platform_objects, probe.other_namespace,
                        probe.over_maximum, probe.priorities, probe.spoofed_child, probe.pod_slots, probe.burst,
                        probe.device_door, probe.never_runnable):
            checks += attempt()
            probe.read_state()
        checks += probe.accounting()
    finally:
        probe.cleanup()
    checks.sort(key=lambda c: int(c["check"].split(".")[0]) if c["check"][0].isdigit() else 99)  # by attempt
    scenario = {"name": "isolation", "title": "A tenant that tries to cheat: %s against %s" % (tenant["name"], other["name"]),
                "checks": checks, "metrics": dict(probe.metrics, user=user, groups=", ".join(tenant["groups"])),
                "timeline": probe.samples}
    module.exit_json(changed=True, scenario=scenario, passed=all(c["passed"] for c in checks))


def main():
    module = AnsibleK8SModule(module_class=AnsibleModule, argument_spec=argspec(), supports_check_mode=False)
    try:
        run(module)
    except CoreException as exc:
        module.fail_from_exception(exc)


if __name__ == "__main__":
    main()
