# -*- coding: utf-8 -*-
# Copyright: fairgpu maintainers
# Apache License 2.0 (see LICENSE)
"""The MultiKueue scenarios (docs/multikueue.md "What is proven"): run from the manager with a client of the manager
and of each worker, judged from what the real Kueue of every cluster decided. Module ``validation_scenario`` runs
them (names ``multikueue`` and ``multikueue_worker_lost``).

- ``multikueue``: the fleet's guarantees as the ClusterQueues hold them (each tenant's nominal quota on the manager
  against the sum of its workers': Kueue's rule, docs/concepts/multikueue.md "Quotas across clusters"), the
  MultiKueueClusters and the admission check Active, a tenant refused on every worker (its own credentials, a
  server-side dry run: nothing is made if it were allowed), a tenant's Job submitted on the manager run on a worker
  with its status copied back, and one tenant flooding the fleet while the other arrives: the other's guarantee
  reserved on the manager and its Jobs running on the workers within the flood's bounds, no worker holding more than
  its GPUs, each Job on one worker only. Where the manager's Prometheus is given, it must hold the Kueue series of
  every cluster of the fleet, each with its ``cluster`` label (the workers' through federation).
- ``multikueue_worker_lost``: a tenant's Job running on a worker whose control plane is then stopped (the embedded
  cluster's, ``faults.ControlPlane``; a worker fairgpu did not make is not its to stop) is dispatched to the other
  worker once MultiKueue's ``workerLostTimeout`` has passed (not before), succeeds there once and never fails; the
  lost worker, back, loses its stale copy (Kueue v0.19.2 pkg/controller/admissionchecks/multikueue/workload.go:
  the remote objects of a Workload dispatched elsewhere are deleted; its garbage collector every gcInterval).
  The worker stays away until the Job has finished elsewhere (docs/multikueue.md "A worker that comes back").
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.fairgpu.tenancy.plugins.module_utils.common.applier import api_message
from ansible_collections.fairgpu.tenancy.plugins.module_utils.common.names import (
    KUEUE_API,
    MANAGED_BY,
    MULTIKUEUE_ADMISSION_CHECK,
    MULTIKUEUE_CONTROLLER,
    VALIDATION_LABEL,
)
from ansible_collections.fairgpu.tenancy.plugins.module_utils.kueue.status import queue_summary
from ansible_collections.fairgpu.tenancy.plugins.module_utils.validation import faults
from ansible_collections.fairgpu.tenancy.plugins.module_utils.validation.load import LOAD_SCRIPT_CONFIGMAP, job_manifest
from ansible_collections.fairgpu.tenancy.plugins.module_utils.validation.report import check
from ansible_collections.fairgpu.tenancy.plugins.module_utils.validation.scenarios import load_jobs

try:
    from kubernetes.dynamic.exceptions import DynamicApiError, NotFoundError
except ImportError:
    DynamicApiError = NotFoundError = Exception  # the modules report the missing kubernetes library

# The label MultiKueue puts on the objects it creates on a worker (Kueue v0.19.2 pkg/controller/admissionchecks/
# multikueue/multikueuecluster.go, kueue.MultiKueueOriginLabel).
ORIGIN_LABEL = "kueue.x-k8s.io/multikueue-origin"
POLL = 2
# Seconds a lost worker's Job may be dispatched again before workerLostTimeout, for the two clocks (the manager's
# Kueue and this one) and the reads between.
LOST_SLACK_SECONDS = 5
TITLES = {
    "multikueue": "MultiKueue: the fleet's guarantees, dispatch, and one tenant flooding the fleet",
    "multikueue_worker_lost": "MultiKueue: a worker lost while it runs a tenant's Job",
}


class FleetError(Exception):
    """The scenario could not do what it must (a Job of its own refused, the fleet not reaching a state in time)."""


def tenant_user(tenant):
    """The identity the scenario impersonates for ``tenant`` (a normalised tenant): a user in the tenant's groups."""
    return "fairgpu-validate@%s" % tenant["name"]


def guarantee_rows(tenants, manager_queues, worker_queues, workers):
    """The fleet's guarantees as the clusters hold them: per tenant ``{"tenant", "resource", "manager",
    "workers": {worker: devices}, "sum"}``; ``manager_queues`` and each ``worker_queues[worker]`` map a ClusterQueue's
    name to ``status.queue_summary`` (a queue missing counts 0)."""
    rows = []
    for tenant in tenants:
        name = tenant["name"]
        on_workers = dict((w, (worker_queues[w].get(name) or {}).get("nominal") or 0) for w in workers)
        rows.append({"tenant": name, "resource": tenant["gpu_resource"],
                     "manager": (manager_queues.get(name) or {}).get("nominal") or 0,
                     "workers": on_workers, "sum": sum(on_workers.values())})
    return rows


def guarantee_table(rows, workers):
    """The report's table of ``guarantee_rows``."""
    return {"title": "Each tenant's guarantee across the fleet (nominalQuota, devices)",
            "header": ["tenant", "resource", "manager"] + list(workers) + ["workers' sum"],
            "rows": [[r["tenant"], r["resource"], r["manager"]] + [r["workers"][w] for w in workers] + [r["sum"]]
                     for r in rows]}


def guarantee_checks(rows):
    return [check("%s's guarantee on the manager is the sum of its workers'" % r["tenant"], r["sum"], r["manager"],
                  r["manager"] == r["sum"]) for r in rows]


def refusal_check(worker, tenant, status, message):
    """A tenant's Job on a worker must be refused by RBAC (403 ``cannot create resource "jobs"``): the worker's
    tenants have no Role there (docs/multikueue.md "A tenant cannot bypass the manager")."""
    refused = status == 403 and 'cannot create resource "jobs"' in (message or "")
    return check("%s's own Job on %s refused (RBAC: the worker's tenants have no Role)" % (tenant, worker),
                 '403 cannot create resource "jobs"', "%s %s" % (status, message or "created"), refused)


def placements_check(placements, where):
    """Each Job on one worker at most: ``placements`` maps a Job's name to the workers holding a copy."""
    twice = sorted("%s on %s" % (job, ", ".join(held)) for job, held in placements.items() if len(held) > 1)
    return check("each Job of %s on one worker at most" % where, "none twice", ", ".join(twice) or "none twice",
                 not twice)


def fleet_series_check(found, clusters):
    """The manager's Prometheus holds Kueue's quota series of every cluster of the fleet (``found``: the values of
    label ``cluster`` it has)."""
    missing = sorted(set(clusters) - set(found))
    return check("the manager's Prometheus holds Kueue's series of every cluster, by label cluster",
                 ", ".join(sorted(clusters)), ", ".join(sorted(found)) or "none", not missing)


def _seconds(met, seconds, limit):
    """A measured time as the report shows it, or that the wait ended without it."""
    return "%.1f s" % seconds if met else "not within %.0f s" % limit


class Fleet(object):
    """The clusters of one MultiKueue fleet: ``manager`` (kubernetes.core client, the module's identity),
    ``workers`` (``{inventory host: {"client", "cluster", "control_plane"}}``), ``as_tenant(tenant, where)`` (a client
    impersonating ``tenant_user`` on ``where``: "manager" or a worker's host), ``waiter``, ``settings``
    (``engine.settings_of``), ``pod`` (``load.job_manifest``'s), ``load_script``, ``prometheus`` (None or a
    ``Prometheus`` of the manager), ``cluster`` (the manager's cluster name), ``lost_timeout`` (seconds of
    MultiKueue's workerLostTimeout)."""

    def __init__(self, manager, workers, as_tenant, waiter, settings, pod, load_script, tenants, suffix,
                 prometheus=None, cluster="", lost_timeout=900):
        self.manager, self.workers, self.as_tenant, self.waiter = manager, workers, as_tenant, waiter
        self.settings, self.pod, self.load_script, self.tenants = settings, pod, load_script, tenants
        self.suffix, self.prometheus, self.cluster, self.lost_timeout = suffix, prometheus, cluster, lost_timeout
        self.a, self.b = tenants[0], tenants[1]
        self.namespaces = [t["namespaces"][0] for t in tenants]

    # -- reading ---------------------------------------------------------------------------------------------
    def clients(self):
        return [("manager", self.manager)] + [(w, self.workers[w]["client"]) for w in sorted(self.workers)]

    @staticmethod
    def items(client, kind, api_version, namespace=None, **selectors):
        return client.get(client.resource(kind, api_version), namespace=namespace, **selectors).to_dict()["items"]

    def queues(self, client):
        return dict((q["metadata"]["name"], queue_summary(q, self.a["gpu_resource"]))
                    for q in self.items(client, "ClusterQueue", KUEUE_API))

    def reserved(self, client, tenant):
        return (self.queues(client).get(tenant["name"]) or {}).get("reserved") or 0

    def jobs(self, client, tenant, scenario):
        return self.items(client, "Job", "batch/v1", tenant["namespaces"][0],
                          label_selector="%s=%s" % (VALIDATION_LABEL, scenario))

    def worker_jobs(self, tenant, scenario):
        """``{worker: [Job]}``: MultiKueue's copies keep the Job's labels."""
        return dict((w, self.jobs(self.workers[w]["client"], tenant, scenario)) for w in sorted(self.workers))

    def workload_of(self, tenant, job_name):
        for workload in self.items(self.manager, "Workload", KUEUE_API, tenant["namespaces"][0]):
            owners = workload["metadata"].get("ownerReferences") or []
            if any(o.get("kind") == "Job" and o.get("name") == job_name for o in owners):
                return workload
        return None

    def wait(self, what, timeout, done, read):
        met, found, elapsed = self.waiter.wait(read, timeout, POLL, done)
        if not met:
            raise FleetError("%s: not within %s s (last read: %s)" % (what, timeout, found))
        return found, elapsed

    # -- doing -----------------------------------------------------------------------------------------------
    def prepare(self, scenario):
        """The load script in every tenant namespace of every cluster (a real worker's pods mount it), and the Jobs of
        an earlier run gone."""
        for _where, client in self.clients():
            for namespace in self.namespaces:
                body = {"apiVersion": "v1", "kind": "ConfigMap",
                        "metadata": {"name": LOAD_SCRIPT_CONFIGMAP, "namespace": namespace, "labels": dict(MANAGED_BY)},
                        "data": {"gpu_load.py": self.load_script}}
                client.apply(client.resource("ConfigMap", "v1"), body, namespace=namespace, server_side=True,
                             field_manager="fairgpu", force_conflicts=True)
        self.cleanup(scenario)

    def submit(self, tenant, count, scenario, seconds, start=0):
        """``count`` load Jobs of ``tenant`` on the manager, sent with the tenant's own credentials."""
        client = self.as_tenant(tenant, "manager")
        made = []
        for job in load_jobs(tenant, count, scenario, seconds, self.suffix, start=start):
            made.append(client.create(client.resource("Job", "batch/v1"), job_manifest(job, self.pod),
                                      namespace=job["namespace"]).to_dict())
        return made

    def cleanup(self, scenario):
        """Delete the scenario's Jobs on the manager (MultiKueue deletes their workers' copies) and on every worker
        (what a lost worker kept), and wait until none is left anywhere."""
        for _where, client in self.clients():
            for namespace in self.namespaces:
                for job in self.items(client, "Job", "batch/v1", namespace,
                                      label_selector="%s=%s" % (VALIDATION_LABEL, scenario)):
                    try:
                        client.delete(client.resource("Job", "batch/v1"), name=job["metadata"]["name"],
                                      namespace=namespace, body={"apiVersion": "v1", "kind": "DeleteOptions",
                                                                 "propagationPolicy": "Background"})
                    except NotFoundError:
                        pass

        def left():
            return ["%s:%s/%s" % (where, ns, j["metadata"]["name"]) for where, client in self.clients()
                    for ns in self.namespaces
                    for j in self.items(client, "Job", "batch/v1", ns,
                                        label_selector="%s=%s" % (VALIDATION_LABEL, scenario))]

        self.wait("the scenario's Jobs gone from every cluster", 120, lambda found: not found, left)

    # -- the scenarios ---------------------------------------------------------------------------------------
    def multikueue(self):
        scenario, checks, notes, metrics = "multikueue", [], [], {}
        self.prepare(scenario)
        workers = sorted(self.workers)
        # The guarantees and the connection, as the clusters hold them.
        rows = guarantee_rows(self.tenants, self.queues(self.manager),
                              dict((w, self.queues(self.workers[w]["client"])) for w in workers), workers)
        checks += guarantee_checks(rows)
        for kind, name in [("MultiKueueCluster", w) for w in workers] + [("AdmissionCheck", MULTIKUEUE_ADMISSION_CHECK)]:
            obj = self.manager.get(self.manager.resource(kind, KUEUE_API), name=name).to_dict()
            active = [c for c in (obj.get("status") or {}).get("conditions") or [] if c.get("type") == "Active"]
            state = active[0] if active else {}
            checks.append(check("%s %s Active on the manager" % (kind, name), "True",
                                "%s %s" % (state.get("status", "none"), state.get("reason", "")),
                                state.get("status") == "True"))
        # A tenant's own Job on each worker (a dry run: nothing is made even if it were allowed).
        job = job_manifest(load_jobs(self.a, 1, scenario, 10, self.suffix)[0], self.pod)
        for worker in workers:
            client = self.as_tenant(self.a, worker)
            try:
                client.create(client.resource("Job", "batch/v1"), job, namespace=job["metadata"]["namespace"],
                              dry_run="All")
                status, message = 201, "accepted"
            except DynamicApiError as exc:
                status, message = exc.status, api_message(exc) or str(exc)
            checks.append(refusal_check(worker, self.a["name"], status, message))
        checks += self.dispatch(scenario, metrics)
        checks += self.flood(scenario, metrics, notes)
        self.cleanup(scenario)
        return {"name": scenario, "title": TITLES[scenario], "checks": checks, "metrics": metrics, "notes": notes,
                "timeline": [], "tables": [guarantee_table(rows, workers)]}

    def dispatch(self, scenario, metrics):
        """One Job of the first tenant, submitted on the manager: dispatched to a worker, its status copied back."""
        seconds = int(self.settings["baseline_seconds"])
        made = self.submit(self.a, 1, scenario, seconds)[0]
        name = made["metadata"]["name"]
        start = self.waiter.monotonic()

        def read():
            return self.manager.get(self.manager.resource("Job", "batch/v1"), name=name,
                                    namespace=self.a["namespaces"][0]).to_dict()

        job, _elapsed = self.wait("%s succeeded on the manager" % name, seconds + self.settings["finish_timeout"],
                                  lambda j: ((j.get("status") or {}).get("succeeded") or 0) >= 1, read)
        metrics["dispatched_job_seconds"] = round(self.waiter.monotonic() - start, 1)
        workload = self.workload_of(self.a, name) or {}
        ran_on = (workload.get("status") or {}).get("clusterName")
        return [
            check("Kueue's Job webhook on the manager hands %s to MultiKueue (spec.managedBy)" % name,
                  MULTIKUEUE_CONTROLLER, made["spec"].get("managedBy"),
                  made["spec"].get("managedBy") == MULTIKUEUE_CONTROLLER),
            check("%s dispatched to a worker (Workload status.clusterName)" % name, " or ".join(sorted(self.workers)),
                  ran_on or "none", ran_on in self.workers),
            check("%s's status copied back to the manager: succeeded once, never failed" % name, "succeeded 1, failed 0",
                  "succeeded %s, failed %s" % ((job.get("status") or {}).get("succeeded") or 0,
                                               (job.get("status") or {}).get("failed") or 0),
                  ((job.get("status") or {}).get("succeeded"), (job.get("status") or {}).get("failed") or 0) == (1, 0)),
        ]

    def capacities(self):
        """Devices of the tenants' GPU resource each worker's GPU nodes offer (its tenants' guarantees summed: fairgpu
        guarantees every GPU of a worker to its tenants)."""
        return dict((w, sum(q["nominal"] or 0 for n, q in self.queues(self.workers[w]["client"]).items()
                            if n in set(t["name"] for t in self.tenants))) for w in sorted(self.workers))

    def flood(self, scenario, metrics, notes):
        """The first tenant takes every GPU of the fleet it may (its guarantee and borrowing on the manager), then the
        second submits one Job per guaranteed GPU: Kueue on the manager reclaims, MultiKueue dispatches them."""
        capacity = self.capacities()
        fleet = sum(capacity.values())
        a_max = min(fleet, self.a["gpus"] + (self.a["borrowing_limit"] if self.a["borrowing_limit"] is not None
                                             else fleet))
        long_run = int(self.settings["finish_timeout"])
        self.submit(self.a, a_max, scenario, long_run, start=1)
        self.wait("%s holding %d GPUs of the fleet" % (self.a["name"], a_max), self.settings["finish_timeout"],
                  lambda held: held >= a_max, lambda: self.reserved(self.manager, self.a))
        arrival = self.waiter.monotonic()
        self.submit(self.b, self.b["gpus"], scenario, long_run)
        # Each wait is allowed twice its bound, so that a slow fleet shows its time and a fleet that never gives the
        # guarantee (a manager that does not reclaim) shows "not within"; both fail the checks below.
        limit = 2 * float(self.settings["running_bound_seconds"])
        reserved, _held, _elapsed = self.waiter.wait(lambda: self.reserved(self.manager, self.b), limit, POLL,
                                                     lambda held: held >= self.b["gpus"])
        reserved_after = self.waiter.monotonic() - arrival

        def running():
            return sum(1 for jobs in self.worker_jobs(self.b, scenario).values() for j in jobs
                       if ((j.get("status") or {}).get("active") or 0) > 0)

        ran, _running, _elapsed = self.waiter.wait(running, max(0.0, limit - reserved_after) if reserved else 0, POLL,
                                                   lambda n: n >= self.b["gpus"])
        running_after = self.waiter.monotonic() - arrival
        if reserved:
            metrics["guarantee_reserved_seconds"] = round(reserved_after, 1)
        if ran:
            metrics["guarantee_running_seconds"] = round(running_after, 1)
        held = dict((w, dict((t["name"], self.reserved(self.workers[w]["client"], t)) for t in (self.a, self.b)))
                    for w in sorted(self.workers))
        flooder_held = self.reserved(self.manager, self.a)
        placements = {}
        for tenant in (self.a, self.b):
            for worker, jobs in self.worker_jobs(tenant, scenario).items():
                for job in jobs:
                    placements.setdefault(job["metadata"]["name"], []).append(worker)
        checks = [
            check("%s's guarantee (%d) reserved on the manager within %s s of its arrival"
                  % (self.b["name"], self.b["gpus"], self.settings["guarantee_bound_seconds"]),
                  "<= %s s" % self.settings["guarantee_bound_seconds"], _seconds(reserved, reserved_after, limit),
                  reserved and reserved_after <= self.settings["guarantee_bound_seconds"]),
            check("%s's %d Jobs running on the workers within %s s of its arrival"
                  % (self.b["name"], self.b["gpus"], self.settings["running_bound_seconds"]),
                  "<= %s s" % self.settings["running_bound_seconds"], _seconds(ran, running_after, limit),
                  ran and running_after <= self.settings["running_bound_seconds"]),
            check("%s back within its guarantee on the manager" % self.a["name"], "<= %d" % self.a["gpus"],
                  flooder_held, flooder_held <= self.a["gpus"]),
        ]
        for worker in sorted(self.workers):
            total = sum(held[worker].values())
            checks.append(check("%s reserves no more than its %d GPUs" % (worker, capacity[worker]),
                                "<= %d" % capacity[worker], "%d (%s)" % (total, ", ".join(
                                    "%s %d" % item for item in sorted(held[worker].items()))),
                                total <= capacity[worker]))
        checks.append(placements_check(placements, "the flood"))
        if self.prometheus is not None:
            found = self.prometheus.query('count by (cluster) (kueue_cluster_queue_nominal_quota)')
            clusters = [self.cluster] + [self.workers[w]["cluster"] for w in sorted(self.workers)]
            checks.append(fleet_series_check([s["metric"].get("cluster", "") for s in found], clusters))
        else:
            notes.append("No Prometheus of the manager given (validate_prometheus_url): the fleet's series not checked.")
        return checks

    def worker_lost(self):
        scenario, metrics, notes = "multikueue_worker_lost", {}, []
        self.prepare(scenario)
        seconds = 60
        made = self.submit(self.a, 1, scenario, seconds)[0]
        name, namespace = made["metadata"]["name"], self.a["namespaces"][0]

        def where():
            return [w for w, jobs in self.worker_jobs(self.a, scenario).items()
                    if any(((j.get("status") or {}).get("active") or 0) > 0 for j in jobs)]

        first, _e = self.wait("%s running on a worker" % name, self.settings["finish_timeout"], bool, where)
        first = first[0]
        other = [w for w in sorted(self.workers) if w != first][0]
        spec = self.workers[first]["control_plane"]
        plane = faults.fault("control_plane", spec, self.workers[first]["client"], self.waiter)
        lost = self.waiter.monotonic()
        plane.stop()
        try:
            def moved():
                return [j for j in self.jobs(self.workers[other]["client"], self.a, scenario)
                        if ((j.get("status") or {}).get("active") or 0) > 0]

            self.wait("%s dispatched to %s" % (name, other), self.lost_timeout + self.settings["finish_timeout"],
                      bool, moved)
            moved_after = self.waiter.monotonic() - lost

            def manager_job():
                return self.manager.get(self.manager.resource("Job", "batch/v1"), name=name,
                                        namespace=namespace).to_dict()

            job, _e = self.wait("%s succeeded on %s" % (name, other), seconds + self.settings["finish_timeout"],
                                lambda j: ((j.get("status") or {}).get("succeeded") or 0) >= 1, manager_job)
        finally:
            plane.start()

        def stale():
            return [j["metadata"]["name"] for j in self.jobs(self.workers[first]["client"], self.a, scenario)
                    if ORIGIN_LABEL in (j["metadata"].get("labels") or {})]

        # Removed when the worker answers again (the Workload's remote objects, or MultiKueue's garbage collection
        # every gcInterval, 1m by default): read for three of those.
        _gone, left, removed_after = self.waiter.wait(stale, 180, POLL, lambda found: not found)
        workload = self.workload_of(self.a, name) or {}
        status = manager_job().get("status") or {}
        metrics.update(redispatched_seconds=round(moved_after, 1), stale_copy_removed_seconds=round(removed_after, 1),
                       worker_lost_timeout_seconds=self.lost_timeout)
        checks = [
            check("%s dispatched again only after workerLostTimeout" % name,
                  ">= %s s" % (self.lost_timeout - LOST_SLACK_SECONDS), "%.1f s" % moved_after,
                  moved_after >= self.lost_timeout - LOST_SLACK_SECONDS),
            check("%s's Workload now on %s (status.clusterName)" % (name, other), other,
                  (workload.get("status") or {}).get("clusterName") or "none",
                  (workload.get("status") or {}).get("clusterName") == other),
            check("%s succeeded once on the manager, never failed" % name, "succeeded 1, failed 0",
                  "succeeded %s, failed %s" % (status.get("succeeded") or 0, status.get("failed") or 0),
                  (status.get("succeeded"), status.get("failed") or 0) == (1, 0)),
            check("the lost worker %s, back, holds no copy of %s within 180 s" % (first, name), "none",
                  ", ".join(left) or "none", not left),
        ]
        notes.append("%s's control plane (etcd, kube-apiserver) was stopped while %s ran there and kept down until the "
                     "Job had finished on %s (docs/multikueue.md \"A worker that comes back\")." % (first, name, other))
        self.cleanup(scenario)
        return {"name": scenario, "title": TITLES[scenario], "checks": checks, "metrics": metrics, "notes": notes,
                "timeline": []}


def run(fleet, name):
    """Scenario ``name`` (``multikueue`` or ``multikueue_worker_lost``) on ``fleet``: its report entry. Raises
    FleetError or faults.FaultError when it cannot be run to its end."""
    if len(fleet.workers) < 2 and name == "multikueue_worker_lost":
        raise FleetError("multikueue_worker_lost needs two workers: the lost one's Job goes to another")
    return fleet.multikueue() if name == "multikueue" else fleet.worker_lost()
