# -*- coding: utf-8 -*-
# Copyright: fairgpu maintainers
# Apache License 2.0 (see LICENSE)
"""The isolation scenario's executor: a tenant that tries to cheat, every attempt of the table in
``validation/attempts.py`` sent as that tenant (impersonation), judged by ``validation/isolation.py`` from who refused
it. Module ``tenant_isolation_probe`` and the validation's module ``scenario`` run it."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import uuid

from ansible_collections.fairgpu.tenancy.plugins.module_utils.common.applier import api_message
from ansible_collections.fairgpu.tenancy.plugins.module_utils.common.names import (
    GPU_PRESENT_LABEL,
    JOB_NAME_LABEL,
    KUEUE_API,
    PROBE_LABEL,
    PROBE_PREFIX,
    RBAC_API,
    WORKLOAD_PREFIX,
)
from ansible_collections.fairgpu.tenancy.plugins.module_utils.kueue import attribution
from ansible_collections.fairgpu.tenancy.plugins.module_utils.kueue import status as kueue_status
from ansible_collections.fairgpu.tenancy.plugins.module_utils.tenants.plan import cluster_capacity
from ansible_collections.fairgpu.tenancy.plugins.module_utils.validation import attempts as table
from ansible_collections.fairgpu.tenancy.plugins.module_utils.validation import isolation
from ansible_collections.fairgpu.tenancy.plugins.module_utils.validation import scenarios as validation

try:
    from kubernetes.dynamic.exceptions import DynamicApiError, NotFoundError
except ImportError:
    DynamicApiError = NotFoundError = Exception  # the modules report the missing kubernetes library

DRY_RUN = "All"
# Seconds between two sends of a request that met a quota conflict (isolation.quota_conflict).
QUOTA_CONFLICT_PAUSE_SECONDS = 0.2
MERGE = "application/merge-patch+json"
# Seconds between two reads while waiting for the cluster.
POLL_SECONDS = 0.5


class ProbeError(Exception):
    """The probe could not do what it must (a Job of its own refused, the cluster not reaching a state in time)."""


class Probe(object):
    """The executor of the isolation scenario's table (``validation/attempts.py``): sends each attempt's requests as
    the tenant, the other tenant or the module's identity (``clients``, keyed ``attempts.TENANT``, ``OTHER``,
    ``ADMIN``, ``EDITOR``), with ``params`` (the options of module tenant_isolation_probe), waits with the shared
    ``waiter``, reads what the cluster decided, has ``isolation`` judge it, and cleans up. After
    each attempt number it samples Kueue's reservations against the devices the tenants' Running pods hold, and
    the pods on the nodes outside Kueue."""

    def __init__(self, params, clients, waiter):
        self.params, self.clients, self.waiter = params, clients, waiter
        self.admin = clients[table.ADMIN]
        self.tenant, self.other = params["tenant"], params["other"]
        self.ns, self.other_ns = self.tenant["namespaces"][0], self.other["namespaces"][0]
        self.namespace_of = {table.TENANT: self.ns, table.OTHER: self.other_ns, table.EDITOR: self.ns}
        self.start = waiter.monotonic()
        self.samples, self.metrics, self.names = [], {}, {}
        self.judges = {table.Refused: self.refused, table.Pending: self.pending, table.KeepsGuarantee: self.keeps_guarantee,
                       table.Reclaimed: self.reclaimed, table.QuotaStops: self.quota_stops}

    def context(self):
        params = self.params
        nodes = self.admin.get(self.admin.resource("Node", "v1"),
                               label_selector=GPU_PRESENT_LABEL + "=true").to_dict()["items"]
        allocatable = [(n["status"].get("allocatable") or {}) for n in nodes]
        capacity = {resource: sum(int(a.get(resource, 0)) for a in allocatable)
                    for resource in (self.tenant["gpu_resource"], self.other["gpu_resource"], "pods")}
        return table.Context(self.tenant, self.other, params["local_queue_suffix"], capacity, str(uuid.uuid4()),
                             simulated=params["simulated"], image=params["image"],
                             priority_classes=params["priority_classes"], grace_max=params["termination_grace_max_seconds"],
                             hold_seconds=params["hold_seconds"], running_bound=params["running_bound_seconds"],
                             max_object_kib=params["max_object_kib"], per_gpu=cluster_capacity(nodes)["per_gpu"],
                             node=nodes[0]["metadata"]["name"] if nodes else None)

    def grant_edit(self, granted):
        """Bind (``granted``) or unbind Kubernetes' built-in edit ClusterRole to ``attempts.EDITORS_GROUP`` in the
        tenant's namespace, as a platform that hands tenants edit would (the EDITOR identity is in that group)."""
        bindings = self.admin.resource("RoleBinding", RBAC_API)
        name = PROBE_PREFIX + "edit"
        try:
            self.admin.delete(bindings, name=name, namespace=self.ns)
        except NotFoundError:
            pass
        if granted:
            self.admin.create(bindings, {
                "apiVersion": RBAC_API, "kind": "RoleBinding",
                "metadata": {"name": name, "namespace": self.ns, "labels": {PROBE_LABEL: "isolation"}},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"},
                "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": table.EDITORS_GROUP}]},
                namespace=self.ns)

    def run(self, attempts):
        """Every attempt in order, a sample of Kueue's state after each attempt number, then the accounting checks.
        Returns the report rows, by attempt number."""
        rows, number = [], None
        for attempt in attempts:
            if number is not None and attempt.number != number:
                self.read_state()
            number = attempt.number
            rows.append(self.attempt(attempt))
        self.read_state()
        grace = self.params["accounting_grace_seconds"]
        rows.append(validation.accounting_check(self.samples, grace, "isolation"))
        rows.append(validation.gpu_pods_check(self.samples, grace, "isolation"))
        return sorted(rows, key=lambda c: int(c["check"].split(".")[0]) if c["check"][0].isdigit() else 99)

    def attempt(self, attempt):
        if attempt.fresh:
            self.cleanup()
        for run in attempt.runs:
            self.prepare(run)
        row = self.judges[type(attempt.held)](attempt, "%d. %s" % (attempt.number, attempt.check))
        self.delete_jobs(*[self.namespace_of[who] for who in attempt.clean])
        return row

    # -- the judges, one per kind of outcome (attempts.Refused, ...) ------------------------------------------
    def refused(self, attempt, check):
        held = attempt.held
        row = isolation.refused_check(check, dict((r.label, self.send(r)) for r in attempt.sends), held.by)
        if held.still_suspended:
            job = self.admin.get(self.admin.resource("Job", "batch/v1"), name=held.still_suspended, namespace=self.ns)
            row = isolation.still_suspended(row, job.to_dict()["spec"].get("suspend"), self.pods_of(self.ns, held.still_suspended))
        return row

    def pending(self, attempt, check):
        name = self.submit(attempt.sends[0])
        condition = isolation.quota_reserved(self.workload_of(self.ns, name))
        return isolation.pending_check(check, attempt.held.expected, condition, self.pods_of(self.ns, name), attempt.held.reason)

    def keeps_guarantee(self, attempt, check):
        held = attempt.held
        name = self.submit(attempt.sends[0])
        condition = isolation.quota_reserved(self.workload_of(self.ns, name))
        self.waiter.pause(held.hold_seconds)
        condition = isolation.quota_reserved(self.workload_of(self.ns, name)) or condition
        kept = [job for job in held.guarantee if self.admitted(self.other_ns, job)]
        return isolation.guarantee_kept_check(check, held.expected, name, condition, self.other["name"], kept,
                                              held.guarantee, self.evicted(self.other_ns))

    def reclaimed(self, attempt, check):
        held = attempt.held
        submitted = self.waiter.monotonic()
        for request in attempt.sends:
            self.submit(request)
        self.wait(lambda: self.read_state()["queues"][held.queue]["pods_running"] >= held.devices, held.what,
                  timeout=3 * held.bound)
        took = round(self.waiter.monotonic() - submitted, 1)
        self.metrics[held.metric] = took
        return isolation.reclaimed_check(check, held.expected, self.other["name"], took, self.tenant["name"],
                                         self.evicted(self.ns), held.bound)

    def quota_stops(self, attempt, check):
        """The burst starts once the quota's count has caught up with the namespace's Jobs (the earlier attempts'
        deletions): its admission counts from the quota's status (attempts.RULE_JOB_QUOTA)."""
        held = attempt.held
        quotas, jobs = self.admin.resource("ResourceQuota", "v1"), self.admin.resource("Job", "batch/v1")

        def settled():
            status = self.admin.get(quotas, name=held.quota, namespace=self.ns).to_dict().get("status") or {}
            count = len(self.admin.get(jobs, namespace=self.ns).to_dict()["items"])
            used = int((status.get("used") or {}).get("count/jobs.batch", -1))
            return (int((status.get("hard") or {}).get("count/jobs.batch", 0)), used) if used == count else None

        hard, used = self.wait(settled, "the Job quota's count did not match the namespace's Jobs")
        created, refused = 0, None
        for index in range(max(0, hard - used) + held.overshoot + 1):
            refused = self.send(table.submit(table.TENANT, held.job(index)))
            if refused is not None:
                break
            created += 1
        return isolation.burst_check(check, hard, used, created, refused, held.quota, held.overshoot)

    # -- sending -------------------------------------------------------------------------------------------------
    def send(self, request):
        """One request (``attempts.Request``); returns None when accepted, else ``isolation.refusal``. A quota
        conflict (``isolation.quota_conflict``) is no answer: the request is sent again, up to
        ``isolation.QUOTA_CONFLICT_RETRIES`` times in all."""
        client = self.clients[request.who]
        resource = client.resource(request.kind, request.api_version)
        if request.subresource:
            resource = resource.subresources[request.subresource]
        body = request.body(lambda job: self.live_job(request.namespace, job)) if callable(request.body) else request.body
        name, namespace = self.name_of(request), request.namespace
        options = {"dry_run": DRY_RUN} if request.dry_run and request.verb != "list" else {}
        for _attempt in range(isolation.QUOTA_CONFLICT_RETRIES):
            answer = self._send(client, resource, request, body, name, namespace, options)
            if answer is None or not isolation.quota_conflict(answer["status"], answer["message"]):
                return answer
            self.waiter.pause(QUOTA_CONFLICT_PAUSE_SECONDS)
        return answer

    @staticmethod
    def _send(client, resource, request, body, name, namespace, options):
        try:
            if request.verb == "create":
                client.create(resource, body, namespace=namespace, **options)
            elif request.verb == "patch":
                client.patch(resource, body, name=name, namespace=namespace, content_type=MERGE, **options)
            elif request.verb == "delete":
                client.delete(resource, name=name, namespace=namespace, body=body, **options)
            elif request.verb == "deletecollection":
                client.delete(resource, namespace=namespace, body=body, label_selector=PROBE_LABEL, **options)
            elif request.verb == "get":
                client.get(resource, name=name, namespace=namespace)
            else:
                client.get(resource, namespace=namespace)
        except DynamicApiError as exc:
            return isolation.refusal(exc.status, _message(exc))
        return None

    def submit(self, request):
        """Create a probe Job for real; fails the module when it is refused. Returns its name."""
        answer = self.send(request)
        metadata = request.body["metadata"]
        if answer is not None:
            raise ProbeError("the probe could not create Job %s/%s: %s" % (
                metadata["namespace"], metadata["name"], answer["message"]))
        return metadata["name"]

    def name_of(self, request):
        """The name a request acts on; ``attempts.WorkloadOf`` and ``attempts.FirstOf`` are looked up once,
        ``attempts.PodOf`` each time."""
        if isinstance(request.name, table.WorkloadOf):
            key = ("Workload", request.namespace, request.name.job)
            if key not in self.names:
                self.names[key] = self.workload_of(request.namespace, request.name.job, judged=False)["metadata"]["name"]
            return self.names[key]
        if isinstance(request.name, table.PodOf):
            pods = self.pods_of(request.namespace, request.name.job)
            return pods[0] if pods else PROBE_PREFIX + "none"
        if isinstance(request.name, table.FirstOf):
            key = (request.api_version, request.kind)
            if key not in self.names:
                items = self.admin.get(self.admin.resource(request.kind, request.api_version)).to_dict()["items"]
                self.names[key] = items[0]["metadata"]["name"] if items else PROBE_PREFIX + "none"
            return self.names[key]
        return request.name

    def live_job(self, namespace, name):
        """A probe Job (``name`` without the prefix) as the API returns it."""
        return self.admin.get(self.admin.resource("Job", "batch/v1"), name=PROBE_PREFIX + name, namespace=namespace).to_dict()

    def prepare(self, run):
        """Create the Jobs of an ``attempts.Run`` and wait until they are admitted or their pods run."""
        names = [self.submit(table.submit(run.who, job)) for job in run.jobs]
        namespace, timeout = self.namespace_of[run.who], run.patience * self.params["timeout"]
        if run.until == "created":
            return
        if run.until == "admitted":
            self.wait(lambda: all(self.admitted(namespace, name) for name in names), run.what, timeout=timeout)
        else:
            def all_running():
                self.read_state()
                return len(self.running_pods(namespace)) >= run.count
            self.wait(all_running, run.what, timeout=timeout)

    # -- waiting and reading -------------------------------------------------------------------------------------
    def wait(self, read, what, timeout=None, predicate=bool):
        """``read()`` until ``predicate`` holds (the shared waiter); returns the last read, or fails the module
        naming ``what`` after ``timeout`` seconds (default: the module's timeout)."""
        timeout = self.params["timeout"] if timeout is None else timeout
        held, value, _elapsed = self.waiter.wait(read, timeout, POLL_SECONDS, predicate)
        if not held:
            raise ProbeError("%s: not within %s s" % (what, timeout))
        return value

    def read_state(self):
        """Kueue's reservations, the devices the two tenants' Running pods hold (``kueue_status``) and every pod on
        the nodes that holds devices no admitted Workload accounts for (``attribution``), kept as a timeline
        sample."""
        namespaces = self.tenant["namespaces"] + self.other["namespaces"]
        queues = self.admin.get(self.admin.resource("ClusterQueue", KUEUE_API)).to_dict()["items"]
        local_queues = [q for ns in namespaces
                        for q in self.admin.get(self.admin.resource("LocalQueue", KUEUE_API), namespace=ns).to_dict()["items"]]
        pods = [p for ns in namespaces
                for p in self.admin.get(self.admin.resource("Pod", "v1"), namespace=ns).to_dict()["items"]]
        info = kueue_status.admission_info(queues, local_queues, [], resource=self.tenant["gpu_resource"],
                                           queue_names={self.tenant["name"], self.other["name"]}, pods=pods)
        node_pods, workloads = attribution.read(self.admin)
        info["outside_kueue"] = attribution.outside_kueue(node_pods, workloads, namespaces, self.waiter.wall())
        self.samples.append(kueue_status.sample(info, self.waiter.monotonic() - self.start, self.waiter.wall()))
        return info

    def workloads(self, namespace):
        return self.admin.get(self.admin.resource("Workload", KUEUE_API), namespace=namespace).to_dict()["items"]

    def workload_of(self, namespace, job_name, judged=True):
        """Wait for the Workload of a Job (and, with ``judged``, for Kueue's QuotaReserved condition)."""
        def find():
            mine = [w for w in self.workloads(namespace)
                    if any(o.get("name") == job_name for o in w["metadata"].get("ownerReferences", []))]
            return mine[0] if mine and (not judged or isolation.quota_reserved(mine[0])) else None
        return self.wait(find, "Kueue judged no Workload of Job %s/%s" % (namespace, job_name))

    def admitted(self, namespace, job_name):
        for workload in self.workloads(namespace):
            if any(o.get("name") == job_name for o in workload["metadata"].get("ownerReferences", [])):
                condition = isolation.quota_reserved(workload)
                return bool(condition and condition["status"] == "True")
        return False

    def evicted(self, namespace):
        """The Workloads of ``namespace`` Kueue has evicted (``kueue_status.evicted``)."""
        return [w["metadata"]["name"] for w in self.workloads(namespace) if kueue_status.evicted(kueue_status.conditions(w))]

    def pods_of(self, namespace, job_name):
        pods = self.admin.get(self.admin.resource("Pod", "v1"), namespace=namespace,
                              label_selector="%s=%s" % (JOB_NAME_LABEL, job_name)).to_dict()["items"]
        return [p["metadata"]["name"] for p in pods]

    def running_pods(self, namespace):
        pods = self.admin.get(self.admin.resource("Pod", "v1"), namespace=namespace,
                              label_selector=PROBE_LABEL).to_dict()["items"]
        return [p for p in pods if (p.get("status") or {}).get("phase") == "Running"
                and not p["metadata"].get("deletionTimestamp")]

    # -- cleaning up ---------------------------------------------------------------------------------------------
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
        self.wait(lambda: not any(
            w["metadata"]["name"].startswith(WORKLOAD_PREFIX + PROBE_PREFIX)
            for namespace in namespaces for w in self.workloads(namespace)) and not any(
            self.admin.get(pods, namespace=namespace, label_selector=PROBE_LABEL).to_dict()["items"]
            for namespace in namespaces), "the probe's Workloads and pods were not gone", timeout=3 * self.params["timeout"])


def _message(exc):
    """The message of the Status body of an API error, else the error's summary."""
    message = api_message(exc)
    return exc.summary() if message is None else message


def isolation_scenario(params, clients, waiter):
    """Run the isolation scenario (every attempt of ``attempts.attempts``) as ``params["tenant"]`` against
    ``params["other"]``; returns its report entry ``{"name", "title", "checks", "metrics", "timeline"}``. Raises
    ProbeError when the probe itself could not do what it must (a Job of its own refused, the cluster not reaching
    a state in time)."""
    tenant, other = params["tenant"], params["other"]
    probe = Probe(params, clients, waiter)
    probe.cleanup()
    try:
        probe.grant_edit(True)
        checks = probe.run(table.attempts(probe.context()))
    finally:
        probe.grant_edit(False)
        probe.cleanup()
    return {"name": "isolation", "title": "A tenant that tries to cheat: %s against %s" % (tenant["name"], other["name"]),
            "checks": checks, "metrics": dict(probe.metrics, user=probe_user(tenant), groups=", ".join(tenant["groups"])),
            "timeline": probe.samples}


def probe_user(tenant):
    """The identity the probe impersonates for ``tenant`` (a normalised tenant): a user in the tenant's groups."""
    return "fairgpu-probe@%s" % tenant["name"]


def clients_for(tenant, other, client_as):
    """The probe's clients: ``client_as(user, groups)`` returns a kubernetes.core client impersonating them (None,
    None: the module's own identity)."""
    user = probe_user(tenant)
    return {
        table.ADMIN: client_as(None, None),
        table.TENANT: client_as(user, tenant["groups"]),
        table.OTHER: client_as(probe_user(other), other["groups"]),
        table.EDITOR: client_as(user, list(tenant["groups"]) + [table.EDITORS_GROUP]),
    }
