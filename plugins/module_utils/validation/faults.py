# -*- coding: utf-8 -*-
# Copyright: fairgpu maintainers
# Apache License 2.0 (see LICENSE)
"""Breaking one component on purpose and bringing it back: the fault scenarios' hands (``engine.py`` steps
``fault_stop`` and ``fault_start``).

Two ways to take Kueue down, as the cluster runs it (``kueue_fault``):

- ``KueueProcess``: the embedded cluster's Kueue, a local process of ``local_service`` (``lab/service.py``). It is
  killed with SIGKILL (no graceful shutdown: the crash of a node or an OOM kill) and started again from the record
  it was started with, so that the next ``site.yml`` finds it as it left it and changes nothing.
- ``KueuePods``: Kueue in the cluster (the chart's Deployment). Its controller pods are deleted with no grace
  period; the Deployment's ReplicaSet makes new ones and the fault ends when one of them is Ready. Nothing is held
  down: a real cluster's outage lasts as long as the new pod takes to start and win its lease.

What differs (docs/failures.md): the process is down for exactly the time the scenario holds it; on a real cluster
the outage is the Deployment's restart, the pod's readiness and, with several replicas, the leader election's
lease duration (Kueue's ``leaderElection.leaseDuration``, 15 s by default), none of which the embedded cluster has.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import signal

from ansible_collections.fairgpu.tenancy.plugins.module_utils.lab import service as lab_service

try:
    from kubernetes.dynamic.exceptions import NotFoundError
except ImportError:
    NotFoundError = Exception  # the module reports the missing kubernetes library


class FaultError(Exception):
    """The fault could not be made or undone: the message names the component and what was seen."""


class KueueProcess(object):
    """The local Kueue of ``local_service`` in ``workdir`` (its files ``kueue.pid`` and ``kueue.service.json``);
    ``ready_url``: its readiness endpoint (``/readyz`` of the health port); ``waiter``: the clock."""

    how = "the local Kueue process killed with SIGKILL"
    differs = ("On the embedded cluster Kueue is a local process, killed with SIGKILL and started again by the "
               "scenario after the outage; on a cluster, Kueue's Deployment restarts its pod at once, and with "
               "several replicas a standby takes over after the leader election's lease (15 s by default).")

    def __init__(self, workdir, ready_url, waiter, ready_timeout=120, name="kueue"):
        self.workdir, self.ready_url, self.waiter = workdir, ready_url, waiter
        self.ready_timeout, self.name = ready_timeout, name
        self.pidfile, self.log, self.record_file = lab_service.service_paths(workdir, name)

    def _record(self):
        record = lab_service.read_record(self.record_file)
        if not record or not record.get("argv"):
            raise FaultError("kueue: no record of how the local Kueue was started in %s; run site.yml first"
                             % self.record_file)
        return record

    def stop(self):
        """SIGKILL the process the pidfile names and wait until it is gone; ``{"how", "pid"}``."""
        record = self._record()
        pid, _stale = lab_service.running_pid(self.pidfile, [record["argv"][0]])
        if pid is None:
            raise FaultError("kueue: the local Kueue is not running (%s names no live process); run site.yml first"
                             % self.pidfile)
        os.kill(pid, signal.SIGKILL)
        gone, _value, _elapsed = self.waiter.wait(lambda: not lab_service.alive(pid), 10, 0.2)
        if not gone:
            raise FaultError("kueue: pid %d still runs 10 s after SIGKILL" % pid)
        return {"how": self.how, "pid": pid}

    def start(self):
        """Start it again exactly as it was started (its stored record: command line, environment, watched files)
        and wait until it is ready; ``{"pid", "ready_seconds"}``."""
        record = self._record()
        service = lab_service.LocalService(
            self.name, self.workdir, argv=record["argv"], environment=record.get("environment"),
            chdir=record.get("chdir"), restart_on=sorted(record.get("restart_on") or {}),
            reload_on=sorted(record.get("reload_on") or {}), record=record.get("record"), ready_url=self.ready_url,
            ready_timeout=self.ready_timeout, waiter=self.waiter)
        try:
            result = service.run("started")
        except lab_service.ServiceError as exc:
            raise FaultError("kueue: could not start it again: %s" % exc)
        return {"pid": result["pid"], "ready_seconds": result["ready_seconds"]}


class KueuePods(object):
    """Kueue's controller pods in the cluster: ``namespace`` and ``label_selector`` (the chart's
    ``control-plane=controller-manager``); ``client``: kubernetes.core's K8SClient."""

    how = "Kueue's controller pods deleted (grace period 0)"
    differs = ("Kueue's controller pods were deleted; the outage lasted until the Deployment's new pod was Ready, "
               "however long the scenario meant to hold it.")

    def __init__(self, client, namespace, label_selector, waiter, ready_timeout=300):
        self.client, self.namespace, self.selector = client, namespace, label_selector
        self.waiter, self.ready_timeout = waiter, ready_timeout
        self.deleted = []

    def _pods(self):
        resource = self.client.resource("Pod", "v1")
        return self.client.get(resource, namespace=self.namespace,
                               label_selector=self.selector).to_dict().get("items", [])

    def stop(self):
        pods = self._pods()
        if not pods:
            raise FaultError("kueue: no pod in %s matches %s (validate_fault_kueue_pods)" % (self.namespace, self.selector))
        resource = self.client.resource("Pod", "v1")
        for pod in pods:
            try:
                self.client.delete(resource, name=pod["metadata"]["name"], namespace=self.namespace,
                                   body={"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0})
            except NotFoundError:
                pass
        self.deleted = [p["metadata"]["uid"] for p in pods]
        return {"how": self.how, "pods": sorted(p["metadata"]["name"] for p in pods)}

    def start(self):
        """Nothing to start (the ReplicaSet does): wait until a new pod is Ready."""
        def ready():
            return [p["metadata"]["name"] for p in self._pods() if p["metadata"]["uid"] not in self.deleted
                    and any(c.get("type") == "Ready" and c.get("status") == "True"
                            for c in (p.get("status") or {}).get("conditions") or [])]
        held, names, elapsed = self.waiter.wait(ready, self.ready_timeout, 2)
        if not held:
            raise FaultError("kueue: no new controller pod in %s Ready within %d s" % (self.namespace, self.ready_timeout))
        return {"pods": names, "ready_seconds": round(elapsed, 1)}


def kueue_fault(spec, client, waiter):
    """The fault of ``spec``: ``{"process": {"workdir", "ready_url"}}`` (the embedded cluster's Kueue) or
    ``{"pods": {"namespace", "label_selector"}}`` (Kueue in the cluster). Raises FaultError for anything else."""
    spec = spec or {}
    if spec.get("process"):
        process = spec["process"]
        return KueueProcess(process["workdir"], process["ready_url"], waiter)
    if spec.get("pods"):
        pods = spec["pods"]
        return KueuePods(client, pods["namespace"], pods["label_selector"], waiter)
    raise FaultError("kueue: say how Kueue runs on this cluster: faults.kueue.process {workdir, ready_url} or "
                     "faults.kueue.pods {namespace, label_selector} (the validate role's validate_fault_kueue)")
