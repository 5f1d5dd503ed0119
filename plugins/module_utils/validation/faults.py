# -*- coding: utf-8 -*-
# Copyright: fairgpu maintainers
# Apache License 2.0 (see LICENSE)
"""Breaking one component on purpose and bringing it back: the fault scenarios' hands (``engine.py`` steps
``fault_stop`` and ``fault_start``). The components are Kueue, Prometheus and the control plane (etcd with the API
server); three ways to take one down, as the cluster runs it (``fault``):

- ``LocalProcess``: the embedded cluster's process of ``local_service`` (``lab/service.py``). It is killed with
  SIGKILL (no graceful shutdown: the crash of a node or an OOM kill) and started again from the record it was
  started with, so that the next ``site.yml`` finds it as it left it and changes nothing.
- ``ComponentPods``: the component in the cluster (Kueue's Deployment, Prometheus's StatefulSet). Its pods are
  deleted with no grace period; their controller makes new ones and the fault ends when one of them is Ready.
  Nothing is held down: a real cluster's outage lasts as long as the new pod takes to start.
- ``ControlPlane``: the embedded cluster's etcd and kube-apiserver, processes of kwokctl's binary runtime. Both are
  killed with SIGKILL and started again by ``kwokctl start cluster``, which starts only the components not running
  (kwok v0.8.0 ``pkg/kwokctl/runtime/binary/cluster_operation.go`` ``startComponent``, ``pkg/kwokctl/runtime/exec.go``
  ``ForkExec``) with the command lines of the cluster's ``kwok.yaml``: the same ports, data directory and flags.
  The controller-manager, the scheduler, kwok and Kueue keep running and reconnect. A control plane fairgpu did not
  make is not restarted by fairgpu (its hosts are not fairgpu's to touch).
- ``GpuNode``: a simulated GPU node of the embedded cluster goes away as a machine does: its kubelet stops
  renewing the node's Lease and reports the node not ready, then the Node is deleted, then a machine of the same
  name joins again. kwok is the embedded cluster's kubelet; it renews a node's Lease only while it holds it (kwok
  v0.8.0 ``pkg/kwok/controllers/node_lease_controller.go``: a Lease another holder renewed within its
  leaseDurationSeconds is not taken over) and leaves a node it does not hold alone, its pods included
  (``controller.go`` ``readOnlyFunc``). So the fault takes the node's Lease over and posts the Ready condition a
  kubelet posts when its container runtime is down (``KubeletNotReady``), and an admission policy refuses the pod
  completions kwok had already scheduled for that node (``POLICY_NAME``); the node lifecycle controller, the taint
  eviction controller, PodGC, the Job controller and Kueue then do what they do. A node of a cluster fairgpu did not
  make is not fairgpu's to take away.

What differs on the embedded cluster is each component's ``DIFFERS`` (docs/failures.md), said in the report.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import fcntl
import os
import signal
import subprocess
import time

from ansible_collections.fairgpu.tenancy.plugins.module_utils.common.applier import listed
from ansible_collections.fairgpu.tenancy.plugins.module_utils.common.names import ADMISSION_API
from ansible_collections.fairgpu.tenancy.plugins.module_utils.common.readiness import node_ready
from ansible_collections.fairgpu.tenancy.plugins.module_utils.lab import service as lab_service

try:
    from kubernetes.dynamic.exceptions import NotFoundError
except ImportError:
    NotFoundError = Exception  # the module reports the missing kubernetes library


class FaultError(Exception):
    """The fault could not be made or undone: the message names the component and what was seen."""


# What a process fault on the embedded cluster does not show of the same fault on a cluster (the report's notes).
DIFFERS = {
    "kueue": ("On the embedded cluster Kueue is a local process, killed with SIGKILL and started again by the scenario "
              "after the outage; on a cluster, Kueue's Deployment restarts its pod at once, and with several replicas "
              "a standby takes over after the leader election's lease (15 s by default)."),
    "prometheus": ("On the embedded cluster Prometheus is a local process, killed with SIGKILL and started again with "
                   "its data directory (TSDB and write-ahead log) as it was; on a cluster its StatefulSet restarts the "
                   "pod, and the alerts' for: state survives only where its storage does (kube-prometheus-stack's "
                   "default storage is an emptyDir, gone with the pod)."),
    "control_plane": ("On the embedded cluster etcd and kube-apiserver are local processes killed with SIGKILL and "
                      "started again by kwokctl; the controller-manager and the scheduler run without leader "
                      "election, Kueue too, so each reconnects. On a cluster with one control-plane node the same "
                      "outage makes every leader-elected controller (kube-controller-manager, kube-scheduler, "
                      "Kueue: leaseDuration 15 s, renewDeadline 10 s) exit and be restarted by its kubelet; with "
                      "several API servers behind a load balancer a restart of one is no outage. An outage longer "
                      "than the node monitor's grace period (kube-controller-manager --node-monitor-grace-period: "
                      "50 s by default, 200 s as kwokctl runs it) marks every node's pods not ready on the API "
                      "server's return, and they are evicted after their unreachable toleration (300 s by default; "
                      "kubernetes/kubernetes#24200)."),
}
DIFFERS["gpu_node"] = (
    "On the embedded cluster the node is a kwok node: the fault takes its Lease over from kwok, its simulated "
    "kubelet, and posts Ready False (KubeletNotReady) as a kubelet whose container runtime is down does; its pods "
    "keep the status they had (no kubelet to kill their containers), as the pods of a machine that lost power "
    "or network do. On a cluster a node's kubelet, its machine or its network fails; fairgpu takes no node of a "
    "cluster it did not make away. The machine that joins again has the same name, labels and GPUs (a "
    "replacement from the same node pool); a cloud's node group may give it another name.")
NAMES = {"kueue": "Kueue", "prometheus": "Prometheus", "control_plane": "the control plane", "gpu_node": "a GPU node"}
# What the fault writes as the node's kubelet: the Lease's holder, and the Ready condition a kubelet posts when its
# container runtime is down (kubernetes v1.36.3 pkg/kubelet/nodestatus/setters.go ReadyCondition: reason
# KubeletNotReady, the runtime's error as message).
LEASE_HOLDER = "fairgpu-validate-node-loss"
NOT_READY_REASON = "KubeletNotReady"
# kwok plays a pod's stage at the time it computed when the pod last changed (kwok v0.8.0
# pkg/kwok/controllers/pod_controller.go: the read-only check is made when an event arrives, not when a queued stage
# is played), so the pods of a node it no longer holds still complete on time: a lost machine's pods would succeed.
# While the node is lost an admission policy refuses any write of a pod of that node to phase Succeeded or Running,
# what only its kubelet writes; the node lifecycle controller's Ready False and PodGC's Failed go through.
POLICY_NAME = "fairgpu-validate-node-loss"
# The taints the node lifecycle controller puts on a node whose Ready condition is False or Unknown
# (pkg/controller/nodelifecycle/node_lifecycle_controller.go, v1.36.3; k8s.io/api core/v1 well_known_taints.go).
NOT_READY_TAINTS = ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")


class LocalProcess(object):
    """The local process of ``component`` (kueue, prometheus), run by ``local_service`` as ``name`` in ``workdir``
    (its files ``<name>.pid`` and ``<name>.service.json``); ``ready_url``: its readiness endpoint; ``waiter``: the
    clock."""

    touched = False  # set once the fault has begun: from then on the component must be brought back

    def __init__(self, component, workdir, ready_url, waiter, ready_timeout=120, name=None):
        self.component, self.workdir, self.ready_url, self.waiter = component, workdir, ready_url, waiter
        self.ready_timeout, self.name = ready_timeout, name or component
        self.how = "the local %s process killed with SIGKILL" % NAMES[component]
        self.differs = DIFFERS[component]
        self.pidfile, self.log, self.record_file = lab_service.service_paths(workdir, self.name)

    def _record(self):
        record = lab_service.read_record(self.record_file)
        if not record or not record.get("argv"):
            raise FaultError("%s: no record of how the local %s was started in %s; run site.yml first"
                             % (self.component, NAMES[self.component], self.record_file))
        return record

    def stop(self):
        """SIGKILL the process the pidfile names and wait until it is gone; ``{"how", "pid"}``."""
        record = self._record()
        pid, _stale = lab_service.running_pid(self.pidfile, [record["argv"][0]])
        if pid is None:
            raise FaultError("%s: the local %s is not running (%s names no live process); run site.yml first"
                             % (self.component, NAMES[self.component], self.pidfile))
        self.touched = True
        os.kill(pid, signal.SIGKILL)
        gone, _value, _elapsed = self.waiter.wait(lambda: not lab_service.alive(pid), 10, 0.2)
        if not gone:
            raise FaultError("%s: pid %d still runs 10 s after SIGKILL" % (self.component, pid))
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
            raise FaultError("%s: could not start it again: %s" % (self.component, exc))
        return {"pid": result["pid"], "ready_seconds": result["ready_seconds"]}


class ComponentPods(object):
    """The pods of ``component`` in the cluster: ``namespace`` and ``label_selector``; ``client``: kubernetes.core's
    K8SClient."""

    touched = False  # set once the fault has begun: from then on the component must be brought back

    def __init__(self, component, client, namespace, label_selector, waiter, ready_timeout=300):
        self.component, self.client, self.namespace, self.selector = component, client, namespace, label_selector
        self.waiter, self.ready_timeout = waiter, ready_timeout
        self.how = "%s's pods deleted (grace period 0)" % NAMES[component]
        self.differs = ("%s's pods were deleted; the outage lasted until a new pod was Ready, however long the "
                        "scenario meant to hold it." % NAMES[component])
        self.deleted = []

    def _pods(self):
        return listed(self.client, "Pod", namespace=self.namespace, label_selector=self.selector)

    def stop(self):
        pods = self._pods()
        if not pods:
            raise FaultError("%s: no pod in %s matches %s (validate_fault_%s)"
                             % (self.component, self.namespace, self.selector, self.component))
        resource = self.client.resource("Pod", "v1")
        self.touched = True
        for pod in pods:
            try:
                self.client.delete(resource, name=pod["metadata"]["name"], namespace=self.namespace,
                                   body={"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0})
            except NotFoundError:
                pass
        self.deleted = [p["metadata"]["uid"] for p in pods]
        return {"how": self.how, "pods": sorted(p["metadata"]["name"] for p in pods)}

    def start(self):
        """Nothing to start (the pods' controller does): wait until a new pod is Ready."""
        def ready():
            return [p["metadata"]["name"] for p in self._pods() if p["metadata"]["uid"] not in self.deleted
                    and any(c.get("type") == "Ready" and c.get("status") == "True"
                            for c in (p.get("status") or {}).get("conditions") or [])]
        held, names, elapsed = self.waiter.wait(ready, self.ready_timeout, 2)
        if not held:
            raise FaultError("%s: no new pod in %s Ready within %d s"
                             % (self.component, self.namespace, self.ready_timeout))
        return {"pods": names, "ready_seconds": round(elapsed, 1)}


class ControlPlane(object):
    """The embedded cluster ``cluster``'s etcd and kube-apiserver, run by kwokctl (``binary``) in ``workdir`` (its
    ``KWOK_WORKDIR``); ``ready``: a function that is true once the API server serves reads (``api_ready``);
    ``lock``: the file ``lab_cluster``'s kwokctl runs lock (``lab_cluster_create_lock``), held from the kill until
    kwokctl has started them again: kwokctl picks a new cluster's ports as those free when it looks (counting down
    from 32767, kwok v0.8.0 ``pkg/utils/net/unused_port.go``), so another cluster created meanwhile on this machine
    would take the ports this outage frees."""

    touched = False  # set once the fault has begun: from then on the component must be brought back

    COMPONENTS = ("kube-apiserver", "etcd")
    # kwokctl start cluster waits up to 2 minutes for the API server to serve (binary runtime start, waitServed),
    # logs a failure and exits 0: give it that and a margin, then wait for the API server ourselves.
    START_TIMEOUT = 180

    def __init__(self, binary, workdir, cluster, ready, waiter, lock=None, ready_timeout=120):
        self.binary, self.workdir, self.cluster, self.ready = binary, workdir, cluster, ready
        self.waiter, self.lock, self.ready_timeout = waiter, lock, ready_timeout
        self.how = "the local etcd and kube-apiserver processes killed with SIGKILL"
        self.differs = DIFFERS["control_plane"]
        self.home = os.path.join(workdir, "clusters", cluster)
        self.recovery = ("start them with: KWOK_WORKDIR=%s %s start cluster --name=%s (or run site.yml); logs: %s"
                         % (workdir, binary, cluster, os.path.join(self.home, "logs")))
        self._locked = None

    def check(self):
        """Before anything is killed: kwokctl can be run and the cluster is kwokctl's, else FaultError."""
        if not (os.path.isfile(self.binary) and os.access(self.binary, os.X_OK)):
            raise FaultError("control_plane: kwokctl %s is not an executable file (validate_fault_control_plane."
                             "kwokctl.binary); nothing was stopped" % self.binary)
        if not os.path.isfile(os.path.join(self.home, "kwok.yaml")):
            raise FaultError("control_plane: %s is no kwokctl cluster (no kwok.yaml; validate_fault_control_plane."
                             "kwokctl.workdir and .cluster); nothing was stopped" % self.home)

    def _pidfile(self, component):
        return os.path.join(self.home, "pids", component + ".pid")

    def _running(self):
        """``{component: pid}`` of the components that run (their pid file names a live process of their binary)."""
        found = {}
        for component in self.COMPONENTS:
            pid, _stale = lab_service.running_pid(self._pidfile(component), [os.path.join(self.home, "bin", component)])
            if pid is not None:
                found[component] = pid
        return found

    def stop(self):
        """SIGKILL the API server and etcd (kwokctl's pid files), wait until both are gone and remove their pid
        files; ``{"how", "pids": {component: pid}, "unreachable": whether the API server then answered nothing}``."""
        self.check()
        pids = self._running()
        missing = [c for c in self.COMPONENTS if c not in pids]
        if missing:
            raise FaultError("control_plane: %s of the embedded cluster %s not running (%s); run site.yml first; "
                             "nothing was stopped" % (", ".join(missing), self.cluster, self._pidfile(missing[0])))
        self._lock()
        self.touched = True
        for pid in pids.values():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        gone, _value, _elapsed = self.waiter.wait(lambda: not any(lab_service.alive(p) for p in pids.values()), 10, 0.2)
        if not gone:
            raise FaultError("control_plane: %s still running 10 s after SIGKILL; %s" % (pids, self.recovery))
        # As kwokctl's own stop does (runtime/exec.go ForkExecKill): the pid file goes with the process. kwokctl
        # takes a pid that answers signal 0 for a running component (pkg/utils/exec/cmd_other.go isRunning), and a
        # killed process whose parent has not reaped it still does: kwokctl start would leave it dead.
        for component in self.COMPONENTS:
            try:
                os.remove(self._pidfile(component))
            except OSError:
                pass
        return {"how": self.how, "pids": pids, "unreachable": not self.ready()}

    def start(self):
        """``kwokctl start cluster`` and wait until the API server serves reads; ``{"ready_seconds", "pids"}`` (the
        new processes'). Raises FaultError naming the logs and how to start them by hand."""
        started = self.waiter.monotonic()
        try:
            try:
                done = subprocess.run([self.binary, "start", "cluster", "--name=%s" % self.cluster],
                                      env=dict(os.environ, KWOK_WORKDIR=self.workdir), capture_output=True, text=True,
                                      timeout=self.START_TIMEOUT, check=False)
            except (OSError, subprocess.TimeoutExpired) as exc:
                raise FaultError("control_plane: kwokctl start cluster %s: %s; %s" % (self.cluster, exc, self.recovery))
        finally:
            self._unlock()
        if done.returncode != 0:
            raise FaultError("control_plane: kwokctl start cluster %s exited %d: %s; %s"
                             % (self.cluster, done.returncode, done.stderr.strip()[-500:], self.recovery))
        held, _value, _elapsed = self.waiter.wait(self.ready, self.ready_timeout, 0.5)
        if not held:
            raise FaultError("control_plane: the API server of %s did not serve within %d s of kwokctl's start; %s"
                             % (self.cluster, self.ready_timeout, self.recovery))
        ready_seconds = round(self.waiter.monotonic() - started, 1)
        both, pids, _elapsed = self.waiter.wait(self._running, 10, 0.2, lambda found: len(found) == len(self.COMPONENTS))
        if not both:
            raise FaultError("control_plane: the API server serves, but only %s run as kwokctl's processes; %s"
                             % (sorted(pids) or "none", self.recovery))
        return {"ready_seconds": ready_seconds, "pids": pids}

    def _lock(self):
        if self.lock:
            self._locked = open(self.lock, "a")
            fcntl.flock(self._locked, fcntl.LOCK_EX)

    def _unlock(self):
        if self._locked is not None:
            self._locked.close()  # closing the descriptor releases the flock
            self._locked = None


def _now():
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _micro_now():
    return time.strftime("%Y-%m-%dT%H:%M:%S.000000Z", time.gmtime())


def node_devices(node, resources):
    """Devices of ``resources`` (names such as nvidia.com/gpu) a Node object's allocatable offers."""
    allocatable = (node.get("status") or {}).get("allocatable") or {}
    return sum(int(str(allocatable.get(r, 0)) or 0) for r in resources)


class GpuNode(object):
    """One GPU node of the embedded cluster, lost and replaced (``stop``: not ready; ``delete``: the Node deleted;
    ``start``: a node of the same name joins again). ``client``: kubernetes.core's K8SClient; ``pod_selector``: the
    label selector of the scenario's pods, by which the node is chosen (the one running most of them);
    ``resources``: the GPU resources counted (the tenants'). The node's object is kept as it was, to be created
    again."""

    touched = False  # set once the fault has begun: from then on the node must be brought back

    def __init__(self, client, waiter, pod_selector, resources, ready_timeout=120):
        self.client, self.waiter, self.pod_selector = client, waiter, pod_selector
        self.resources, self.ready_timeout = tuple(resources), ready_timeout
        self.how = ("the node's Lease taken over from its kubelet (kwok), the node reported not ready (%s), then "
                    "deleted" % NOT_READY_REASON)
        self.differs = DIFFERS["gpu_node"]
        self.node, self.saved, self.deleted = None, None, False

    def _nodes(self):
        return listed(self.client, "Node")

    def _pods_on(self, name):
        pods = listed(self.client, "Pod", label_selector=self.pod_selector)
        return sorted("%s/%s" % (p["metadata"]["namespace"], p["metadata"]["name"]) for p in pods
                      if (p.get("spec") or {}).get("nodeName") == name and not p["metadata"].get("deletionTimestamp")
                      and (p.get("status") or {}).get("phase") in ("Pending", "Running"))

    def _policy(self, name):
        """The admission policy and its binding that play the lost kubelet's silence (``POLICY_NAME``)."""
        expression = ("!(has(object.spec.nodeName) && object.spec.nodeName == '%s' && has(object.status.phase) && "
                      "object.status.phase in ['Running', 'Succeeded'] && (!has(oldObject.status.phase) || "
                      "oldObject.status.phase != object.status.phase))" % name)
        return [
            {"apiVersion": ADMISSION_API, "kind": "ValidatingAdmissionPolicy",
             "metadata": {"name": POLICY_NAME},
             "spec": {"failurePolicy": "Fail",
                      "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                                                              "operations": ["UPDATE"],
                                                              "resources": ["pods", "pods/status"]}]},
                      "validations": [{"expression": expression,
                                       "message": "node %s is lost (fairgpu validate gpu_node_loss): its kubelet "
                                                  "reports nothing" % name}]}},
            {"apiVersion": ADMISSION_API, "kind": "ValidatingAdmissionPolicyBinding",
             "metadata": {"name": POLICY_NAME},
             "spec": {"policyName": POLICY_NAME, "validationActions": ["Deny"]}},
        ]

    def _remove_policy(self):
        for kind in ("ValidatingAdmissionPolicyBinding", "ValidatingAdmissionPolicy"):
            try:
                self.client.delete(self.client.resource(kind, ADMISSION_API), name=POLICY_NAME)
            except NotFoundError:
                pass

    def offered(self):
        """Devices of ``resources`` on the nodes whose Ready condition is True, as the cluster says now."""
        return sum(node_devices(n, self.resources) for n in self._nodes() if node_ready(n))

    def stop(self):
        """Choose the GPU node that runs most of the scenario's pods, take its Lease and post Ready False;
        ``{"how", "node", "gpus": its devices, "pods": its scenario pods (namespace/name), "offered_before"}``."""
        nodes = [n for n in self._nodes() if node_devices(n, self.resources) > 0 and node_ready(n)]
        if not nodes:
            raise FaultError("gpu_node: no Ready node offers %s; nothing was changed" % ", ".join(self.resources))
        on = dict((n["metadata"]["name"], self._pods_on(n["metadata"]["name"])) for n in nodes)
        chosen = max(nodes, key=lambda n: (len(on[n["metadata"]["name"]]), n["metadata"]["name"]))
        name = self.node = chosen["metadata"]["name"]
        if not on[name]:
            raise FaultError("gpu_node: no pod of the scenario (%s) runs on a GPU node; nothing was changed"
                             % self.pod_selector)
        offered_before = self.offered()
        self.saved = chosen
        self.touched = True
        for body in self._policy(name):
            self.client.apply(self.client.resource(body["kind"], body["apiVersion"]), body, None, server_side=True,
                              field_manager=LEASE_HOLDER, force_conflicts=True)
        leases = self.client.resource("Lease", "coordination.k8s.io/v1")
        self.client.apply(leases, {
            "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": name, "namespace": "kube-node-lease"},
            "spec": {"holderIdentity": LEASE_HOLDER, "leaseDurationSeconds": 3600, "renewTime": _micro_now()}},
            namespace="kube-node-lease", server_side=True, field_manager=LEASE_HOLDER, force_conflicts=True)
        stamp = _now()
        self.client.patch(self.client.resource("Node", "v1").subresources["status"], {"status": {"conditions": [{
            "type": "Ready", "status": "False", "reason": NOT_READY_REASON,
            "message": "container runtime is down (fairgpu validate: node loss)",
            "lastHeartbeatTime": stamp, "lastTransitionTime": stamp}]}},
            name=name, content_type="application/strategic-merge-patch+json")
        return {"how": self.how, "node": name, "gpus": node_devices(chosen, self.resources), "pods": on[name],
                "offered_before": offered_before}

    def delete(self):
        """Delete the Node (its machine is gone); ``{"node"}``."""
        try:
            self.client.delete(self.client.resource("Node", "v1"), name=self.node)
        except NotFoundError:
            pass
        self.deleted = True
        return {"node": self.node}

    def start(self):
        """A node of the same name joins again: the taken Lease removed (kwok then holds a new one and manages the
        node), the Node created from the object kept (labels, annotations, GPUs in its status) when it was deleted;
        waits until it is Ready with its GPUs; ``{"ready_seconds", "node", "gpus"}``."""
        started = self.waiter.monotonic()
        self._remove_policy()
        try:
            self.client.delete(self.client.resource("Lease", "coordination.k8s.io/v1"), name=self.node,
                               namespace="kube-node-lease")
        except NotFoundError:
            pass
        nodes = self.client.resource("Node", "v1")
        if self.deleted:
            meta = self.saved["metadata"]
            spec = dict(self.saved.get("spec") or {})
            spec["taints"] = [t for t in spec.get("taints") or [] if t.get("key") not in NOT_READY_TAINTS]
            status = dict((k, v) for k, v in (self.saved.get("status") or {}).items()
                          if k in ("capacity", "allocatable", "nodeInfo"))
            body = {"apiVersion": "v1", "kind": "Node",
                    "metadata": {"name": meta["name"], "labels": meta.get("labels") or {},
                                 "annotations": meta.get("annotations") or {}},
                    "spec": spec, "status": status}
            try:
                self.client.create(nodes, body)
            except Exception as exc:  # already there (a repair after a failed start), or refused: said below
                if "AlreadyExists" not in str(exc) and "already exists" not in str(exc):
                    raise FaultError("gpu_node: node %s could not be created again: %s; create it with site.yml"
                                     % (self.node, exc))
            # The device plugin's part: the GPUs in the status, whatever the create kept of it.
            self.client.patch(nodes.subresources["status"], {"status": status}, name=self.node,
                              content_type="application/strategic-merge-patch+json")
        gpus = node_devices(self.saved, self.resources)

        def back():
            try:
                node = self.client.get(nodes, name=self.node).to_dict()
            except NotFoundError:
                return False
            return node_ready(node) and node_devices(node, self.resources) >= gpus
        held, _value, _elapsed = self.waiter.wait(back, self.ready_timeout, 1)
        if not held:
            raise FaultError("gpu_node: node %s not Ready with its %d GPUs within %d s of joining again; run "
                             "site.yml" % (self.node, gpus, self.ready_timeout))
        self.deleted = False
        return {"ready_seconds": round(self.waiter.monotonic() - started, 1), "node": self.node, "gpus": gpus}


def api_ready(client):
    """A function that is true once the API server of kubernetes.core's ``client`` serves a read from etcd (the
    Namespace ``default``)."""
    def ready():
        try:
            client.get(client.resource("Namespace", "v1"), name="default")
            return True
        except Exception:  # refused, reset, or etcd not ready yet: asked again
            return False
    return ready


def fault(component, spec, client, waiter, pod_selector="", resources=()):
    """The fault of ``component`` (kueue, prometheus, control_plane, gpu_node) as ``spec`` says: ``{"process":
    {"workdir", "ready_url"}}`` (the embedded cluster's process), ``{"pods": {"namespace", "label_selector"}}`` (the
    component in the cluster), for the control plane only ``{"kwokctl": {"binary", "workdir", "cluster", "lock"}}``,
    for a GPU node only ``{"kwok": true}`` (``pod_selector``: the scenario's pods, ``resources``: the GPU resources
    counted). Raises FaultError for anything else."""
    spec = spec or {}
    if component not in NAMES:
        raise FaultError("%s: no fault for this component; one of %s" % (component, ", ".join(sorted(NAMES))))
    if component == "gpu_node":
        if not spec.get("kwok"):
            raise FaultError("gpu_node: fairgpu takes only the embedded cluster's kwok nodes away "
                             "(validate_fault_gpu_node.kwok, set for cluster_provider kwok); a node of a cluster "
                             "fairgpu did not make is not its to take away")
        return GpuNode(client, waiter, pod_selector, resources)
    if component == "control_plane":
        given = spec.get("kwokctl")
        if not given:
            raise FaultError("control_plane: fairgpu restarts only the embedded cluster's control plane "
                             "(validate_fault_control_plane.kwokctl {binary, workdir, cluster}, set for "
                             "cluster_provider kwok); a cluster fairgpu did not make is not its to restart")
        missing = [key for key in ("binary", "workdir", "cluster") if not given.get(key)]
        if missing:
            raise FaultError("control_plane: validate_fault_control_plane.kwokctl lacks %s" % ", ".join(missing))
        return ControlPlane(given["binary"], given["workdir"], given["cluster"], api_ready(client), waiter,
                            lock=given.get("lock"))
    if spec.get("process"):
        process = spec["process"]
        return LocalProcess(component, process["workdir"], process["ready_url"], waiter)
    if spec.get("pods"):
        pods = spec["pods"]
        return ComponentPods(component, client, pods["namespace"], pods["label_selector"], waiter)
    raise FaultError("%s: say how %s runs on this cluster: faults.%s.process {workdir, ready_url} or faults.%s.pods "
                     "{namespace, label_selector} (the validate role's validate_fault_%s)"
                     % (component, NAMES[component], component, component, component))
