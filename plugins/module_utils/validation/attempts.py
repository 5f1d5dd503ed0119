# -*- coding: utf-8 -*-
# Copyright: fairgpu maintainers
# Apache License 2.0 (see LICENSE)
"""The cheating tenant's attempts as data: for each, what is sent and as whom, what counts as held, and the
upstream rule that holds it. The ``tenant_isolation_probe`` module is their one executor: it sends the requests,
waits, reads what the cluster decided and passes it to the judges in ``isolation.py``.

Pure logic, no cluster access. ``attempts(ctx)`` returns the table for one tenant against another, in the order
they run; ``context`` gathers what the table needs (the two tenants as the tenants role plans them, the module's
options and the GPU nodes' capacity).

An attempt (``Attempt``) has:

- ``number`` and ``check``: its row in the report, ``"<number>. <check>"``;
- ``runs``: Jobs created for real before it (``Run``), and what to wait for (admitted, or their pods Running);
- ``sends``: the requests (``Request``); writes that must be refused are server-side dry runs;
- ``held``: what counts as held, one of ``Refused`` (every request answered 403 by the named refuser),
  ``Pending`` (the Job is created and Kueue never reserves quota for it), ``KeepsGuarantee``, ``Reclaimed`` and
  ``QuotaStops``;
- ``rule``: the upstream source of the rule that holds it. The Kueue sources were read at v0.19.2, the version
  pinned when the table was written; the rule texts say "at KUEUE_VERSION" rather than repeat the pin
  (``files/lab/toolchain/versions.env`` is the one place of versions);
- ``fresh`` (start once the probe's earlier Jobs, Workloads and pods are gone) and ``clean`` (whose probe Jobs to
  delete afterwards: ``TENANT``, ``OTHER``).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.fairgpu.tenancy.plugins.module_utils.common.names import (
    ADMISSION_API,
    DELETION_POLICY,
    GPU_POD_POLICY,
    JOB_POLICY,
    KUEUE_API,
    LIMIT_RANGE,
    OBJECT_SIZE_POLICY,
    POD_CREATOR_POLICY,
    PRIORITY_QUOTA,
    PROBE_IMAGE,
    PROBE_LABEL,
    PROBE_PREFIX,
    RBAC_API,
    RESOURCE_QUOTA,
    TENANT_ROLE,
    WORKLOAD_KINDS_POLICY,
)
from ansible_collections.fairgpu.tenancy.plugins.module_utils.validation import isolation

# Who sends: the tenant (impersonating a user of its groups), the other tenant, the tenant bound to Kubernetes'
# built-in edit ClusterRole in its namespace as many platforms do (a user of its groups and of EDITORS_GROUP, which
# the probe binds to edit for its run), or the module's own identity (a cluster admin, which also stands for "a
# user allowed to create pods").
TENANT, OTHER, EDITOR, ADMIN = "tenant", "other", "editor", "admin"
EDITORS_GROUP = "fairgpu-probe-editors"

# How many Jobs past its count/jobs.batch quota a burst may get before the quota stops it (QuotaStops).
BURST_OVERSHOOT = 5

RBAC = "RBAC"
JOB_POLICY_REFUSER = "ValidatingAdmissionPolicy " + JOB_POLICY

# The upstream rules that hold the attempts (fairgpu's own objects are built in kueue/objects.py).
RULE_RBAC = ("Kubernetes RBAC: the tenant's Role (kueue/objects.py tenant_role) grants Jobs (create, read, delete), "
             "reads of pods, events, LocalQueues, Workloads, quotas; nothing else, nothing cluster-wide")
RULE_GPU_PODS = ("ValidatingAdmissionPolicy %s (kueue/objects.py admission_policies; admissionregistration.k8s.io/v1, "
                 "GA in Kubernetes 1.30): a GPU pod in a tenant namespace must be controlled by a Job" % GPU_POD_POLICY)
RULE_JOBS = ("ValidatingAdmissionPolicy %s (kueue/objects.py admission_policies, _template_rules), on CREATE and "
             "UPDATE of Jobs in tenant namespaces" % JOB_POLICY)
RULE_LOCAL_QUEUE = ("Kueue at KUEUE_VERSION: a Job's queue-name names a LocalQueue of its own namespace; none there: QuotaReserved "
                    "False, Inadmissible, \"LocalQueue %s doesn't exist\" (pkg/controller/core/workload_controller.go, "
                    "getQueueBlocker)")
RULE_SUSPEND = ("Kueue at KUEUE_VERSION keeps a Job suspended until its Workload is admitted (pkg/controller/jobframework/"
                "reconciler.go); the tenant's Role has no patch of Jobs and no Workload writes")
RULE_LIMIT_RANGE_KUEUE = ("Kueue at KUEUE_VERSION checks a Workload against the namespace's LimitRange before admitting: "
                          "\"requests must not be above the limitRange max\" (pkg/util/limitrange), \"didn't satisfy "
                          "LimitRange constraints\" (pkg/workload/resources.go)")
RULE_QUOTA_KUEUE = ("Kueue at KUEUE_VERSION flavor assignment: a pod set above nominal quota plus borrowing limit is "
                    "\"insufficient quota ... > maximum capacity\" (pkg/scheduler/flavorassigner/flavorassigner.go)")
RULE_PAST_KUEUE = ("Kubernetes admission: LimitRanger (plugin/pkg/admission/limitranger, Container and Pod maxima) and "
                   "ResourceQuota (requests.<resource>) on pods that go around Kueue")
RULE_PRIORITY = ("Kueue at KUEUE_VERSION preemption (pkg/scheduler/preemption): reclaimWithinCohort Any reclaims only borrowed "
                 "quota, withinClusterQueue LowerPriority acts inside the tenant's own ClusterQueue: no priority takes "
                 "another tenant's guarantee (\"insufficient unused quota\", flavorassigner.go)")
RULE_CHILD_JOBS = ("Kueue at KUEUE_VERSION runs a Job whose controller is a Job it manages as that Job's child, with no Workload "
                   "of its own (pkg/controller/jobframework/reconciler.go, shouldSuspendChildJob); refused by " + RULE_JOBS)
RULE_PODS_QUOTA = ("Kueue at KUEUE_VERSION counts one pod per pod for a ClusterQueue covering pods (pkg/scheduler/flavorassigner/"
                   "flavorassigner.go; pkg/resources/requests.go OnePodRequest)")
RULE_RECLAIM = ("Kueue at KUEUE_VERSION reclaimWithinCohort Any: a tenant under its nominal quota preempts borrowers "
                "(pkg/scheduler/preemption), the Preempted condition InCohortReclamation")
RULE_JOB_QUOTA = ("Kubernetes ResourceQuota count/jobs.batch (plugin/pkg/admission/resourcequota); its admission counts "
                  "from the quota's status, which kube-controller-manager's recount can lower under a burst "
                  "(kubernetes/kubernetes#123434, the race described in kubernetes#20113)")
RULE_DELETIONS = ("ValidatingAdmissionPolicy %s (kueue/admission.py policies), on DELETE of Jobs in tenant namespaces: "
                  "DeleteOptions propagationPolicy Background or Foreground; batch/v1's default orphans the pods "
                  "(pkg/registry/batch/job/strategy.go DefaultGarbageCollectionPolicy, Kubernetes v1.36)" % DELETION_POLICY)
RULE_POD_CREATORS = ("ValidatingAdmissionPolicy %s (kueue/admission.py policies): a pod in a tenant namespace is "
                     "created by an identity that may update jobs/status (the Job controller); the built-in edit "
                     "ClusterRole has no Job status writes (Kubernetes RBAC bootstrap policy)" % POD_CREATOR_POLICY)
RULE_WORKLOAD_KINDS = ("ValidatingAdmissionPolicy %s (kueue/admission.py policies, WORKLOAD_KINDS): no pod-creating "
                       "kind but Jobs in tenant namespaces" % WORKLOAD_KINDS_POLICY)
RULE_OBJECT_SIZE = ("ValidatingAdmissionPolicy %s (kueue/admission.py policies): ConfigMap and Secret data at most "
                    "tenants_isolation.max_object_kib" % OBJECT_SIZE_POLICY)
RULE_PRIORITY_QUOTA = ("Kubernetes ResourceQuota scoped to PriorityClass (scopeSelector, "
                       "https://kubernetes.io/docs/concepts/policy/resource-quotas/#limit-priority-class-consumption-"
                       "by-default): %s holds pods of tenants_isolation.denied_pod_priority_classes at 0" % PRIORITY_QUOTA)
RULE_JOB_CHANGES = ("%s: only an identity that may update workloads/status (Kueue) changes a Job's spec once it is "
                    "created" % RULE_JOBS)
RULE_LIMIT_RATIO = ("Kubernetes LimitRanger (plugin/pkg/admission/limitranger): LimitRange maxLimitRequestRatio "
                    "(tenants_isolation cpu_limit_request_ratio, memory_limit_request_ratio) on pods past Kueue")
RULE_POD_SECURITY = ("Kubernetes Pod Security admission, namespace label pod-security.kubernetes.io/enforce: baseline "
                     "(https://kubernetes.io/docs/concepts/security/pod-security-standards/#baseline)")


class Request(object):
    """One request: ``label`` names it in the report (``"create Pod"``); ``who`` sends it; ``verb`` is create,
    patch, delete, deletecollection (of the probe's objects), get or list; ``body`` is the object, the patch or the
    DeleteOptions, or a callable given ``live(name)``, which returns the probe Job ``name`` (without the prefix) of
    the request's namespace as the API returns it (the one a Run created); ``name`` may be ``WorkloadOf`` or
    ``FirstOf``, looked up when it is sent; ``subresource``: ``status``; ``dry_run``: False for a real create."""

    def __init__(self, label, who, verb, api_version, kind, body=None, name=None, namespace=None, subresource=None,
                 dry_run=True):
        self.label, self.who, self.verb, self.api_version, self.kind = label, who, verb, api_version, kind
        self.body, self.name, self.namespace, self.subresource, self.dry_run = body, name, namespace, subresource, dry_run


class WorkloadOf(object):
    """The name of the Workload Kueue made for the probe Job ``job`` (in the request's namespace)."""

    def __init__(self, job):
        self.job = job


class PodOf(object):
    """The name of the first pod of the probe Job ``job`` (in the request's namespace)."""

    def __init__(self, job):
        self.job = job


class FirstOf(object):
    """The name of the first existing object of the request's kind (``PROBE_PREFIX + "none"`` if there is none)."""


class Run(object):
    """Jobs created for real, as ``who``, before an attempt's requests; then wait ``until`` each is ``admitted`` or
    ``running`` (``count`` Running probe pods in the namespace), for ``patience`` times the module's timeout, else
    fail with ``what``; ``created``: no wait (Kueue's webhook suspends a queued Job when it is created)."""

    def __init__(self, who, jobs, until, what, count=None, patience=1):
        self.who, self.jobs, self.until, self.what, self.count, self.patience = who, jobs, until, what, count, patience


class Refused(object):
    """Held when every request is refused with HTTP 403 by ``by`` (``isolation.refusal``'s ``by``, or a prefix of
    it). ``still_suspended``: a probe Job that must afterwards still be suspended, with no pods."""

    def __init__(self, by, still_suspended=None):
        self.by, self.still_suspended = by, still_suspended


class Pending(object):
    """Held when the one Job sent (for real, as the tenant) gets a Workload with QuotaReserved False (with
    ``reason``, if given) and no pods."""

    def __init__(self, expected, reason=None):
        self.expected, self.reason = expected, reason


class KeepsGuarantee(object):
    """Held when the one Job sent waits (QuotaReserved False, also after ``hold_seconds``) while the other tenant
    keeps every Job of its guarantee admitted and none of its Workloads is evicted (``kueue_status.evicted``)."""

    def __init__(self, expected, guarantee, hold_seconds):
        self.expected, self.guarantee, self.hold_seconds = expected, guarantee, hold_seconds


class Reclaimed(object):
    """Held when, after the Jobs sent (for real, as the other tenant), the Running pods of ClusterQueue ``queue``
    hold its ``devices`` within ``bound`` seconds of sending them (waiting at most three times that, else failing
    with ``what``); the time is reported as metric ``metric``."""

    def __init__(self, expected, queue, devices, bound, metric, what):
        self.expected, self.queue, self.devices, self.bound, self.metric, self.what = expected, queue, devices, bound, metric, what


class QuotaStops(object):
    """A burst: Jobs ``job(index)`` created for real, as the tenant, until the ResourceQuota ``quota`` refuses one.
    Held when it does within ``overshoot`` Jobs past its count/jobs.batch (``isolation.burst_check``). Starts once
    the quota's count matches the namespace's Jobs."""

    def __init__(self, quota, overshoot, job):
        self.quota, self.overshoot, self.job = quota, overshoot, job


class Attempt(object):
    def __init__(self, number, check, held, rule, sends=(), runs=(), fresh=False, clean=()):
        self.number, self.check, self.held, self.rule = number, check, held, rule
        self.sends, self.runs, self.fresh, self.clean = list(sends), list(runs), fresh, tuple(clean)


class Context(object):
    """What the table is built from: ``tenant`` and ``other`` (normalised tenants), their first namespaces
    (``ns``, ``other_ns``) and LocalQueues (``queue``, ``other_queue``), the tenant's ``resource``, the module's
    options (``image``, ``seconds`` of simulated run time or None, ``priority_classes``, ``grace_max``,
    ``hold_seconds``, ``running_bound``, ``max_object_kib``), ``per_gpu``: the GPU nodes' least ``{"cpu":
    millicores, "memory": bytes}`` per GPU, ``node``: a GPU node's name, ``capacity``: the GPU nodes' allocatable, by resource (``pods``
    included), and ``owner_uid``: the made-up UID a forged owner reference names."""

    def __init__(self, tenant, other, local_queue_suffix, capacity, owner_uid, simulated=False, image=PROBE_IMAGE,
                 priority_classes=(), grace_max=30, hold_seconds=5, running_bound=60, max_object_kib=256,
                 per_gpu=None, node=None):
        self.tenant, self.other = tenant, other
        self.ns, self.other_ns = tenant["namespaces"][0], other["namespaces"][0]
        self.queue, self.other_queue = tenant["name"] + local_queue_suffix, other["name"] + local_queue_suffix
        self.resource, self.capacity = tenant["gpu_resource"], dict(capacity)
        self.image, self.seconds = image, 600 if simulated else None
        self.priority_classes, self.grace_max = list(priority_classes), grace_max
        self.hold_seconds, self.running_bound, self.owner_uid = hold_seconds, running_bound, owner_uid
        self.max_object_kib, self.per_gpu, self.node = max_object_kib, per_gpu, node


def create(who, api_version, kind, body, namespace, label=None, dry_run=True):
    return Request(label or "create " + kind, who, "create", api_version, kind, body, namespace=namespace, dry_run=dry_run)


def submit(who, job):
    """A Job created for real."""
    return create(who, "batch/v1", "Job", job, job["metadata"]["namespace"], dry_run=False)


def writes(api_version, kind, name, namespace=None):
    """Create, patch and delete one kind of object, as the tenant."""
    body = {"apiVersion": api_version, "kind": kind,
            "metadata": {"name": PROBE_PREFIX + "new", "labels": {PROBE_LABEL: "isolation"}}}
    if namespace:
        body["metadata"]["namespace"] = namespace
    patch = {"metadata": {"labels": {PROBE_LABEL: "isolation"}}}
    return [create(TENANT, api_version, kind, body, namespace),
            Request("patch " + kind, TENANT, "patch", api_version, kind, patch, name=name, namespace=namespace),
            Request("delete " + kind, TENANT, "delete", api_version, kind, name=name, namespace=namespace)]


def attempts(c):
    """The attempts of ``c.tenant`` against ``c.other`` (``Context``), in the order they run."""
    tenant, other, ns, resource = c.tenant, c.other, c.ns, c.resource

    def job(name, **kwargs):
        kwargs.setdefault("image", c.image)
        return isolation.probe_job(name, kwargs.pop("namespace", ns), kwargs.pop("resource", resource), **kwargs)

    def queued(name, **kwargs):
        return job(name, queue=c.queue, seconds=c.seconds, **kwargs)

    most, per_pod = tenant["max_gpus"], tenant["max_gpus_per_pod"]
    split = isolation.over_quota_split(most)
    allowed = tenant.get("priority_classes") or []
    denied = isolation.forbidden_class(allowed, c.priority_classes)
    highest = isolation.highest_class(allowed, c.priority_classes)
    ask = c.capacity.get(other["gpu_resource"], 0) - other["gpus"] + 1
    devices, slots = c.capacity.get(resource, 0), c.capacity.get("pods", 0)
    own, reach = tenant["pods"], tenant["max_pods"]

    def child(live):
        """A Job that names the parent Job (as the API returned it) as its controller."""
        return isolation.child_job("child", ns, live("parent"), resource, devices)

    guarantee, slots_guarantee = guarantee_of(c, job, "guarantee"), guarantee_of(c, job, "slots-guarantee")
    tiny = {"gpus": 0, "cpu": "10m", "memory": "16Mi"}
    jump = "priority %s for %d %s while %s holds its guarantee of %d" % (highest or "(none)", ask, resource, other["name"],
                                                                         other["gpus"])
    reclaim = "%s holds %d pod slots (%d borrowed); %s submits its guarantee of %d" % (
        tenant["name"], reach, reach - own, other["name"], other["gpus"])
    bare = isolation.bare_pod("bare", ns, resource, image=c.image)
    cluster_scoped = [(KUEUE_API, "ClusterQueue", tenant["name"]), (KUEUE_API, "Cohort", FirstOf()),
                      (KUEUE_API, "ResourceFlavor", FirstOf()), (KUEUE_API, "WorkloadPriorityClass", FirstOf()),
                      (ADMISSION_API, "ValidatingAdmissionPolicy", JOB_POLICY), (RBAC_API, "ClusterRoleBinding", FirstOf())]
    own_namespace = [("v1", "ResourceQuota", RESOURCE_QUOTA), ("v1", "LimitRange", LIMIT_RANGE),
                     (RBAC_API, "Role", TENANT_ROLE), (RBAC_API, "RoleBinding", TENANT_ROLE)]
    local_queue = {"apiVersion": KUEUE_API, "kind": "LocalQueue", "metadata": {"name": PROBE_PREFIX + "lq", "namespace": ns},
                   "spec": {"clusterQueue": other["name"]}}
    trespass = [("batch/v1", "Job", job("trespass", namespace=c.other_ns)),
                ("v1", "Pod", isolation.bare_pod("trespass", c.other_ns, resource, image=c.image)),
                (KUEUE_API, "Workload", None), ("v1", "Secret", None)]
    forged = isolation.bare_pod("past-kueue", ns, resource, per_container=split, containers=2, owner_uid=c.owner_uid,
                                image=c.image)

    table = [
        Attempt(1, "bare GPU Pod (no Job, no queue) as the tenant", Refused(RBAC), RULE_RBAC,
                sends=[create(TENANT, "v1", "Pod", bare, ns)]),
        Attempt(1, "bare GPU Pod by a user allowed to create pods", Refused("ValidatingAdmissionPolicy " + GPU_POD_POLICY),
                RULE_GPU_PODS, sends=[create(ADMIN, "v1", "Pod", bare, ns)]),
        Attempt(2, "Job labelled with %s's LocalQueue %s" % (other["name"], c.other_queue),
                Pending("never admitted: Kueue finds no LocalQueue %s in %s" % (c.other_queue, ns), reason="Inadmissible"),
                RULE_LOCAL_QUEUE, sends=[submit(TENANT, job("other-queue", queue=c.other_queue, seconds=c.seconds))]),
    ]
    table += [Attempt(3, "write %s objects" % kind, Refused(RBAC), RULE_RBAC, sends=writes(api_version, kind, name))
              for api_version, kind, name in cluster_scoped]
    table += [Attempt(3, "write its own namespace's %s" % kind, Refused(RBAC), RULE_RBAC,
                      sends=writes(api_version, kind, name, ns)) for api_version, kind, name in own_namespace]
    table.append(Attempt(3, "LocalQueue in its namespace pointing at %s's ClusterQueue" % other["name"], Refused(RBAC),
                         RULE_RBAC, sends=[create(TENANT, KUEUE_API, "LocalQueue", local_queue, ns)]))
    table += [Attempt(4, "%ss in %s's namespace %s" % (kind, other["name"], c.other_ns), Refused(RBAC), RULE_RBAC,
                      sends=[Request("list " + kind, TENANT, "list", api_version, kind, namespace=c.other_ns)] + (
                          [create(TENANT, api_version, kind, body, c.other_ns)] if body is not None else []))
              for api_version, kind, body in trespass]
    table += [
        Attempt(4, "Secrets in its own namespace", Refused(RBAC), RULE_RBAC,
                sends=[Request("list Secret", TENANT, "list", "v1", "Secret", namespace=ns)]),
        Attempt(6, "one pod asking for %d %s (hard maximum %d)" % (most + 1, resource, most),
                Pending("never admitted: Kueue holds the Workload (LimitRange maximum)"), RULE_LIMIT_RANGE_KUEUE,
                sends=[submit(TENANT, queued("one-big-pod", gpus=most + 1))]),
        Attempt(6, "%d pods of 1 %s (hard maximum %d)" % (most + 1, resource, most),
                Pending("never admitted: Kueue holds the Workload (insufficient quota)"), RULE_QUOTA_KUEUE,
                sends=[submit(TENANT, queued("many-pods", pods=most + 1))]),
        Attempt(6, "a pod past Kueue (forged Job owner) asking for %d %s" % (2 * split, resource),
                Refused("ResourceQuota " + RESOURCE_QUOTA if 2 * split <= per_pod else "LimitRange"), RULE_PAST_KUEUE,
                sends=[create(ADMIN, "v1", "Pod", forged, ns)]),
        Attempt(5, "lift Kueue's suspension of its own Job, edit its Workload",
                Refused(RBAC, still_suspended=PROBE_PREFIX + "one-big-pod"), RULE_SUSPEND, sends=[
                    Request("patch Job spec.suspend=false", TENANT, "patch", "batch/v1", "Job", {"spec": {"suspend": False}},
                            name=PROBE_PREFIX + "one-big-pod", namespace=ns),
                    Request("patch Workload", TENANT, "patch", KUEUE_API, "Workload",
                            {"metadata": {"labels": {PROBE_LABEL: "x"}}}, name=WorkloadOf(PROBE_PREFIX + "one-big-pod"),
                            namespace=ns),
                    Request("patch Workload status.admission", TENANT, "patch", KUEUE_API, "Workload",
                            {"status": {"admission": {"clusterQueue": tenant["name"]}}},
                            name=WorkloadOf(PROBE_PREFIX + "one-big-pod"), namespace=ns, subresource="status")]),
        Attempt(7, "WorkloadPriorityClass %s (allowed: %s)" % (denied, ", ".join(allowed) or "none"),
                Refused(JOB_POLICY_REFUSER), RULE_JOBS,
                sends=[create(TENANT, "batch/v1", "Job", job("denied-class", queue=c.queue, priority_class=denied), ns)]),
        Attempt(7, "pod priorityClassName system-cluster-critical in a Job", Refused(JOB_POLICY_REFUSER), RULE_JOBS,
                sends=[create(TENANT, "batch/v1", "Job", job("pod-priority", queue=c.queue,
                                                             pod_priority_class="system-cluster-critical"), ns)]),
        Attempt(7, jump,
                KeepsGuarantee("the tenant waits; %s keeps its guarantee, nothing evicted" % other["name"],
                               [j["metadata"]["name"] for j in guarantee], c.hold_seconds), RULE_PRIORITY,
                runs=[Run(OTHER, guarantee, "admitted", "%s did not get its guarantee of %d; the priority attempt needs "
                          "an idle cluster" % (other["name"], other["gpus"]))],
                sends=[submit(TENANT, queued("jump", pods=ask, priority_class=highest))]),
        Attempt(8, "a Job with no queue claiming its own admitted Job as controller (%d pods of 1 %s)" % (devices, resource),
                Refused(JOB_POLICY_REFUSER), RULE_CHILD_JOBS,
                runs=[Run(TENANT, [queued("parent", gpus=0)], "admitted",
                          "Kueue did not admit the probe's parent Job %sparent" % PROBE_PREFIX)],
                sends=[create(TENANT, "batch/v1", "Job", child, ns)]),
        Attempt(9, "one Job of %d pods of 10m CPU and 16Mi (the GPU nodes have %d pod slots)" % (slots + 4, slots),
                Pending("never admitted: Kueue counts pods (insufficient quota for pods)"), RULE_PODS_QUOTA,
                sends=[submit(TENANT, queued("pod-slots", pods=slots + 4, **tiny))], fresh=True, clean=[TENANT]),
        Attempt(9, reclaim,
                Reclaimed("Kueue reclaims the borrowed slots; %s's pods Running within %s s" % (other["name"], c.running_bound),
                          other["name"], other["gpus"], c.running_bound, "pod_slots_time_to_running_seconds",
                          "%s's pods did not run on its guarantee of %d while %s held %d pod slots"
                          % (other["name"], other["gpus"], tenant["name"], reach)), RULE_RECLAIM,
                runs=[Run(TENANT, [queued("slots-%d" % i, pods=count, **tiny) for i, count in enumerate((own, reach - own))
                                   if count], "running", "%s's %d tiny pods did not all run" % (tenant["name"], reach),
                          count=reach, patience=4)],
                sends=[submit(OTHER, j) for j in slots_guarantee], clean=[TENANT, OTHER]),
        Attempt(10, "a burst of Jobs past its Job quota (count/jobs.batch %(hard)d, %(used)d in use)",
                QuotaStops(RESOURCE_QUOTA, BURST_OVERSHOOT,
                           # Queued on a LocalQueue that does not exist: Kueue keeps them (no pods), as a backlog waits.
                           lambda index: job("burst-%d" % index, queue=PROBE_PREFIX + "nowhere")),
                RULE_JOB_QUOTA, clean=[TENANT]),
        Attempt(11, "Jobs with no GPU request that reach for the node's devices or host", Refused(JOB_POLICY_REFUSER),
                RULE_JOBS, sends=[create(TENANT, "batch/v1", "Job", body, ns, label=route) for route, body in
                                  sorted(isolation.device_door_jobs(ns, resource, c.grace_max).items())]),
        Attempt(11, "a privileged pod by a user allowed to create pods", Refused("PodSecurity"), RULE_POD_SECURITY,
                sends=[create(ADMIN, "v1", "Pod", isolation.privileged_pod("privileged", ns, image=c.image), ns)]),
        Attempt(12, "one pod of 2 containers x %d %s (a node has at most %d)" % (per_pod, resource, per_pod),
                Pending("never admitted: Kueue holds the Workload (LimitRange Pod maximum), no quota held"),
                RULE_LIMIT_RANGE_KUEUE, sends=[submit(TENANT, queued("too-big-pod", gpus=per_pod, containers=2))]),
    ]
    return table + round_three(c, job, queued)


def guarantee_of(c, job, prefix):
    """The other tenant's guarantee, one Job of one device each (``job``: the table's Job builder)."""
    other = c.other
    return [job("%s-%d" % (prefix, i), namespace=c.other_ns, resource=other["gpu_resource"], queue=c.other_queue,
                seconds=c.seconds) for i in range(other["gpus"])]


def round_three(c, job, queued):
    """Round three (13 and up): routes that keep GPUs after Kueue released them, lock the other tenant out, hold
    quota for pods that never run, or go around Kueue with the built-in edit role; each refused at admission."""
    ns, resource, other = c.ns, c.resource, c.other
    most = c.tenant["max_gpus"]

    def creates(who, bodies):
        return [create(who, body["apiVersion"], body["kind"], body, ns, label=route)
                for route, body in sorted(bodies.items())]

    def orphaning(label, who, options, verb="delete"):
        """A dry-run delete of the first of the admitted Jobs (deletecollection: of the probe's Jobs)."""
        return Request(label, who, verb, "batch/v1", "Job", options,
                       name=PROBE_PREFIX + "orphan-0" if verb == "delete" else None, namespace=ns)

    cpu_pod = isolation.bare_pod("cpu-95", ns, resource, per_container=0, image=c.image)
    cpu_pod["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "95", "memory": "1Gi"},
                                                     "limits": {"cpu": "95", "memory": "1Gi"}}
    forged = isolation.bare_pod("edit-forged", ns, resource, owner_uid=c.owner_uid, image=c.image)
    critical = isolation.bare_pod("critical", ns, resource, per_container=0, image=c.image)
    critical["spec"]["priorityClassName"] = "system-node-critical"
    ratio = isolation.bare_pod("ratio", ns, resource, per_container=0, image=c.image)
    ratio["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "10m", "memory": "16Mi"},
                                                   "limits": {"cpu": "96", "memory": "16Mi"}}
    workloads = {kind: isolation.workload_object(kind, kind.lower(), ns, resource, image=c.image)
                 for kind in ("Deployment", "StatefulSet")}
    table = [
        Attempt(13, "delete its admitted Jobs leaving their pods running (orphaning deletes)",
                Refused("ValidatingAdmissionPolicy " + DELETION_POLICY), RULE_DELETIONS,
                runs=[Run(TENANT, [queued("orphan-%d" % i) for i in range(2)], "admitted",
                          "Kueue did not admit the probe's Jobs %sorphan-*" % PROBE_PREFIX)],
                sends=[orphaning("delete, propagationPolicy Orphan (kubectl --cascade=orphan)", TENANT,
                                 {"propagationPolicy": "Orphan"}),
                       orphaning("delete with no DeleteOptions (batch/v1 orphans by default)", TENANT, None),
                       orphaning("delete, orphanDependents true", TENANT, {"orphanDependents": True}),
                       orphaning("deletecollection, propagationPolicy Orphan (edit role)", EDITOR,
                                 {"propagationPolicy": "Orphan"}, verb="deletecollection")],
                clean=[TENANT]),
        Attempt(14, "Jobs whose Job or pods carry a finalizer (they outlive their deletion)", Refused(JOB_POLICY_REFUSER),
                RULE_JOBS, sends=creates(TENANT, isolation.finalizer_jobs(ns, resource))),
        Attempt(15, "tiny Jobs whose pod affinity or anti-affinity reaches %s's namespace %s" % (other["name"], c.other_ns),
                Refused(JOB_POLICY_REFUSER), RULE_JOBS,
                sends=creates(TENANT, isolation.lockout_jobs(ns, resource, c.other_ns, other["name"]))),
        Attempt(16, "Jobs Kueue would admit and nothing would run (nodeName, schedulerName, schedulingGates, managedBy)",
                Refused(JOB_POLICY_REFUSER), RULE_JOBS, sends=creates(TENANT, isolation.never_running_jobs(ns, resource))),
        Attempt(17, "Jobs whose limits are far above the requests Kueue counts", Refused(JOB_POLICY_REFUSER), RULE_JOBS,
                sends=creates(TENANT, isolation.limit_jobs(ns, resource))),
        Attempt(17, "a pod of 10m CPU limited to 96 by a user allowed to create pods", Refused("LimitRange"),
                RULE_LIMIT_RATIO, sends=[create(ADMIN, "v1", "Pod", ratio, ns)]),
        Attempt(18, "Jobs far larger than a Job needs (the Job quota counts objects, not bytes)",
                Refused(JOB_POLICY_REFUSER), RULE_JOBS,
                sends=creates(TENANT, isolation.big_jobs(ns, resource, c.max_object_kib))),
        Attempt(18, "a ConfigMap of %d KiB (edit role)" % (c.max_object_kib + 1),
                Refused("ValidatingAdmissionPolicy " + OBJECT_SIZE_POLICY), RULE_OBJECT_SIZE,
                sends=[create(EDITOR, "v1", "ConfigMap", isolation.big_config_map("big", ns, c.max_object_kib), ns)]),
        Attempt(19, "Jobs whose pods Pod Security baseline refuses (seccomp, sysctls, AppArmor, SELinux, probe hosts)",
                Refused(JOB_POLICY_REFUSER), RULE_JOBS, sends=creates(TENANT, isolation.pod_security_jobs(ns, resource))),
        Attempt(20, "with the edit role: pods of its own (95 CPUs; a GPU pod with a forged Job owner)",
                Refused("ValidatingAdmissionPolicy " + POD_CREATOR_POLICY), RULE_POD_CREATORS,
                sends=[create(EDITOR, "v1", "Pod", cpu_pod, ns, label="create Pod of 95 CPUs"),
                       create(EDITOR, "v1", "Pod", forged, ns, label="create GPU Pod with a forged Job owner")]),
        Attempt(20, "with the edit role: Deployments and StatefulSets",
                Refused("ValidatingAdmissionPolicy " + WORKLOAD_KINDS_POLICY), RULE_WORKLOAD_KINDS,
                sends=creates(EDITOR, workloads)),
        Attempt(20, "with the edit role: change its own waiting Job (lift Kueue's suspension, scale it up)",
                Refused(JOB_POLICY_REFUSER, still_suspended=PROBE_PREFIX + "held"), RULE_JOB_CHANGES,
                runs=[Run(TENANT, [queued("held", gpus=most + 1)], "created", "")],
                sends=[Request("patch Job spec.suspend=false", EDITOR, "patch", "batch/v1", "Job",
                               {"spec": {"suspend": False}}, name=PROBE_PREFIX + "held", namespace=ns),
                       Request("patch Job spec.parallelism=16", EDITOR, "patch", "batch/v1", "Job",
                               {"spec": {"parallelism": 16}}, name=PROBE_PREFIX + "held", namespace=ns)],
                clean=[TENANT]),
        Attempt(20, "with the edit role: relabel its own running pod off its Job (the Job controller releases it)",
                Refused("ValidatingAdmissionPolicy " + POD_CREATOR_POLICY), RULE_POD_CREATORS,
                runs=[Run(TENANT, [queued("relabel")], "running", "%s's Job %srelabel did not run"
                          % (c.tenant["name"], PROBE_PREFIX), count=1)],
                sends=[Request("patch Pod label batch.kubernetes.io/controller-uid", EDITOR, "patch", "v1", "Pod",
                               {"metadata": {"labels": {"batch.kubernetes.io/controller-uid": "detached"}}},
                               name=PodOf(PROBE_PREFIX + "relabel"), namespace=ns)],
                clean=[TENANT]),
        Attempt(20, "a pod of PriorityClass system-node-critical by a user allowed to create pods",
                Refused("ResourceQuota " + PRIORITY_QUOTA), RULE_PRIORITY_QUOTA,
                sends=[create(ADMIN, "v1", "Pod", critical, ns)]),
        Attempt(21, "Jobs that would fill a GPU node's CPU or memory while its GPUs stay free",
                Refused(JOB_POLICY_REFUSER), RULE_JOBS,
                sends=creates(TENANT, isolation.node_filling_jobs(ns, resource, c.per_gpu, c.node)))
        if c.per_gpu else None,
        # What the other tenant got after every attempt: nothing they left holds it off its guarantee.
        Attempt(22, "after every attempt: %s borrows all %d %s, %s submits its guarantee of %d"
                % (c.tenant["name"], c.tenant["max_gpus"], resource, other["name"], other["gpus"]),
                Reclaimed("Kueue reclaims the borrowed GPUs; %s's pods Running within %s s" % (other["name"], c.running_bound),
                          other["name"], other["gpus"], c.running_bound, "guarantee_time_to_running_seconds",
                          "%s's pods did not run on its guarantee of %d after the attempts" % (other["name"], other["gpus"])),
                RULE_RECLAIM, fresh=True,
                runs=[Run(TENANT, [queued("borrow-%d" % i) for i in range(c.tenant["max_gpus"])], "running",
                          "%s's %d Jobs did not all run" % (c.tenant["name"], c.tenant["max_gpus"]),
                          count=c.tenant["max_gpus"], patience=2)],
                sends=[submit(OTHER, j) for j in guarantee_of(c, job, "after")], clean=[TENANT, OTHER]),
    ]
    return [attempt for attempt in table if attempt is not None]
