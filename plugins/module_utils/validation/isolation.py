# -*- coding: utf-8 -*-
# Copyright: fairgpu maintainers
# Apache License 2.0 (see LICENSE)
"""A tenant that tries to cheat: the objects its attempts send, and how a refusal or Kueue's decision is read and
judged.

Pure logic, no cluster access; the attempts themselves are listed in ``attempts.py``, and the
``tenant_isolation_probe`` module sends them as the tenant (impersonation) and passes the API server's answers and
what it read here. A check is the report's row (``report.check``), so the attempts become one more scenario of the
validation report.

Who refuses what, as the embedded cluster shows (and the integration tests assert):

- RBAC (the tenant's Role, ``kueue_objects.tenant_role``): HTTP 403, ``User "<u>" cannot <verb> resource ...``.
- fairgpu's ValidatingAdmissionPolicies (``kueue_objects.admission_policies``): HTTP 403,
  ``ValidatingAdmissionPolicy '<name>' with binding '<name>' denied request: <message>``.
- The namespace ResourceQuota: HTTP 403, ``exceeded quota: <name>, requested: ..., used: ..., limited: ...``.
- Pod Security Admission (namespace label ``pod-security.kubernetes.io/enforce``): HTTP 403,
  ``pods "<name>" is forbidden: violates PodSecurity "baseline:latest": ...``.
- Kueue: the Job is created but its Workload never gets quota: condition ``QuotaReserved`` False with Kueue's
  reason (``Inadmissible``, ``Pending``) and message.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.fairgpu.tenancy.plugins.module_utils.common.names import (
    GPU_PRODUCT_LABEL,
    GPU_RESOURCE,
    HOSTNAME_LABEL,
    JOB_NAME_LABEL,
    PRIORITY_CLASS_LABEL,
    PROBE_IMAGE,
    PROBE_LABEL,
    PROBE_PREFIX,
    QUEUE_LABEL,
    TENANT_LABEL,
)
from ansible_collections.fairgpu.tenancy.plugins.module_utils.validation import report

# A finalizer of the probe's own (never on a real object: every Job that carries it is refused).
PROBE_FINALIZER = "fairgpu.io/probe-keep"

_POLICY = re.compile(r"ValidatingAdmissionPolicy '([^']+)'")
_QUOTA = re.compile(r"exceeded quota: ([^,]+)")
_QUOTA_CONFLICT = re.compile(r"^Operation cannot be fulfilled on resourcequotas ")
# How often a create that met a quota conflict (quota_conflict) is sent again before its answer counts.
QUOTA_CONFLICT_RETRIES = 5


def quota_conflict(status, message):
    """True when a create was answered 409 "Operation cannot be fulfilled on resourcequotas <name>: the object has
    been modified": the quota admission's optimistic update of the ResourceQuota's status lost a race (with
    kube-controller-manager's recount, or another create), a refusal by nobody. Kubernetes leaves the retry to the
    client (kubernetes/kubernetes#67761, still open; Helm retries it since helm/helm#9710), so the probe sends the
    request again rather than count it as the quota's answer. It failed our CI once, at a burst's 11th Job."""
    return status == 409 and bool(_QUOTA_CONFLICT.match(message or ""))


def refusal(status, message):
    """Who refused a request, from the API server's HTTP ``status`` and the ``message`` of its Status body.

    Returns ``{"status": int, "by": str, "message": str}`` where ``by`` is ``RBAC``,
    ``ValidatingAdmissionPolicy <name>``, ``ResourceQuota <name>``, ``LimitRange`` or ``API server``.
    """
    message = message or ""
    policy, quota = _POLICY.search(message), _QUOTA.search(message)
    if status == 403 and " cannot " in message and "resource" in message:
        by = "RBAC"
    elif policy:
        by = "ValidatingAdmissionPolicy " + policy.group(1)
    elif quota:
        by = "ResourceQuota " + quota.group(1)
    elif "violates PodSecurity" in message:
        by = "PodSecurity"
    elif "usage per Container" in message or "usage per Pod" in message or "limit to request ratio" in message:
        by = "LimitRange"
    else:
        by = "API server"
    return {"status": status, "by": by, "message": message}


def refused_check(attempt, outcomes, by):
    """Judge requests that must all be refused by ``by`` (``RBAC`` or a policy name prefix).

    ``outcomes`` maps a request (``"create ResourceQuota"``) to a ``refusal`` dict, or to None when the API server
    accepted it. Passed when every request was refused with 403 by ``by``; observed names what got through.
    """
    accepted = sorted(request for request, answer in outcomes.items() if answer is None)
    other = sorted("%s (%s %s)" % (request, answer["status"], answer["by"]) for request, answer in outcomes.items()
                   if answer is not None and not (answer["status"] == 403 and answer["by"].startswith(by)))
    if accepted or other:
        observed = "; ".join(filter(None, ["accepted: " + ", ".join(accepted) if accepted else "",
                                           "refused otherwise: " + ", ".join(other) if other else ""]))
    else:
        first = next(iter(sorted(outcomes.items())))[1]
        observed = "%d of %d refused by %s, e.g. %s" % (len(outcomes), len(outcomes), by, first["message"])
    return report.check(attempt, "%s refuses %s" % (by, ", ".join(sorted(outcomes))), observed, not accepted and not other)


def pending_check(attempt, expected, condition, pods, reason=None):
    """Judge a Job Kueue must never admit, from its Workload's ``QuotaReserved`` condition (``quota_reserved``) and
    the names of its ``pods``: held when the condition is False (with ``reason``, if given) and there are no pods."""
    observed = "QuotaReserved=%s (%s): %s; pods: %s" % (
        condition["status"], condition.get("reason"), condition.get("message"), len(pods))
    passed = condition["status"] == "False" and not pods and (reason is None or condition.get("reason") == reason)
    return report.check(attempt, expected, observed, passed)


def still_suspended(row, suspended, pods):
    """Add to a ``refused_check`` row that the Job the refused requests went after is still suspended
    (``suspended``: its ``spec.suspend``) and has no ``pods``."""
    row = dict(row)
    row["observed"] += "; afterwards Job suspended=%s, pods: %d" % (suspended, len(pods))
    row["passed"] = row["passed"] and suspended is True and not pods
    return row


def guarantee_kept_check(attempt, expected, job, condition, other, kept, guarantee, evicted):
    """Judge a Job that must wait while ``other`` (a tenant name) holds its guarantee: held when ``job``'s
    ``condition`` (QuotaReserved) is False, every Job of ``guarantee`` is in ``kept`` (still admitted) and no
    Workload of the other tenant is in ``evicted``."""
    observed = "%s: QuotaReserved=%s (%s); %s kept %d of %d guaranteed Jobs admitted, evicted: %s" % (
        job, condition["status"], condition.get("reason"), other, len(kept), len(guarantee), ", ".join(evicted) or "none")
    return report.check(attempt, expected, observed,
                        condition["status"] == "False" and len(kept) == len(guarantee) and not evicted)


def reclaimed_check(attempt, expected, other, took, tenant, evicted, bound):
    """Judge a reclamation: ``other``'s pods Running on its guarantee ``took`` seconds after it asked, within
    ``bound``; ``evicted``: the Workloads of ``tenant`` Kueue evicted for it."""
    observed = "%s's pods Running after %.1f s; %s's workloads evicted: %s" % (
        other, took, tenant, ", ".join(evicted) or "none")
    return report.check(attempt, expected, observed, took <= bound)


def burst_check(attempt, hard, used, created, refused, quota, overshoot):
    """Judge a burst of Jobs against a ResourceQuota ``quota`` of ``hard`` count/jobs.batch with ``used`` in use:
    ``created`` Jobs got through, then ``refused`` (a ``refusal``, or None when the burst ended unrefused). Held
    when the quota refused it within ``overshoot`` Jobs past its limit. ``attempt`` may name ``%(hard)d`` and
    ``%(used)d``."""
    result = refused_check(attempt % {"hard": hard, "used": used}, {"create Job %d" % (created + 1): refused},
                           "ResourceQuota " + quota)
    over = created - (hard - used)
    result["expected"] += " within %d Jobs past the quota" % overshoot
    result["observed"] = "%d created (%d past the quota), then %s" % (created, max(0, over), result["observed"])
    result["passed"] = result["passed"] and hard > 0 and 0 <= over <= overshoot
    return result


def quota_reserved(workload):
    """The ``QuotaReserved`` condition of a Workload dict, or None while Kueue has not judged it."""
    for condition in (workload.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "QuotaReserved":
            return condition
    return None


def highest_class(allowed, platform_classes):
    """The allowed WorkloadPriorityClass of highest value (None when the tenant may use none)."""
    values = {c["name"]: c["value"] for c in platform_classes}
    usable = [name for name in allowed if name in values]
    return max(usable, key=lambda name: values[name]) if usable else None


def forbidden_class(allowed, platform_classes):
    """A WorkloadPriorityClass the tenant may not use: the platform's highest one it lacks, else a made-up one."""
    others = sorted((c for c in platform_classes if c["name"] not in allowed), key=lambda c: -c["value"])
    return others[0]["name"] if others else PROBE_PREFIX + "not-a-class"


def probe_job(name, namespace, resource, gpus=1, pods=1, queue=None, seconds=None, image=PROBE_IMAGE,
              priority_class=None, pod_priority_class=None, containers=1, cpu="100m", memory="128Mi"):
    """A Job of ``pods`` pods of ``containers`` containers of ``gpus`` devices of ``resource`` each (and ``cpu``,
    ``memory``), labelled as a probe. Its pods pass the Pod Security restricted profile.

    ``seconds``: simulated run time (kwok's pod-complete annotations; None on a real cluster, where the pause
    image runs until the probe deletes the Job).
    """
    labels = {PROBE_LABEL: "isolation"}
    if queue:
        labels[QUEUE_LABEL] = queue
    if priority_class:
        labels[PRIORITY_CLASS_LABEL] = priority_class
    template = {"metadata": {"labels": {PROBE_LABEL: "isolation"}},
                "spec": {"restartPolicy": "Never", "securityContext": dict(RESTRICTED_POD),
                         "containers": [_container("probe-%d" % i if i else "probe", image, resource, gpus, cpu, memory)
                                        for i in range(containers)]}}
    if seconds:
        template["metadata"]["annotations"] = {"pod-complete.stage.kwok.x-k8s.io/delay": "%ds" % seconds,
                                               "pod-complete.stage.kwok.x-k8s.io/jitter-delay": "%ds" % seconds}
    if pod_priority_class:
        template["spec"]["priorityClassName"] = pod_priority_class
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": PROBE_PREFIX + name, "namespace": namespace, "labels": labels},
            "spec": {"parallelism": pods, "completions": pods, "backoffLimit": 0, "template": template}}


def bare_pod(name, namespace, resource, per_container=1, containers=1, owner_uid=None,
             image=PROBE_IMAGE):
    """A Pod outside any Job; with ``owner_uid`` it claims a Job as its controller (a forged owner reference)."""
    metadata = {"name": PROBE_PREFIX + name, "namespace": namespace, "labels": {PROBE_LABEL: "isolation"}}
    if owner_uid:
        metadata["ownerReferences"] = [{"apiVersion": "batch/v1", "kind": "Job", "name": PROBE_PREFIX + "forged",
                                        "uid": owner_uid, "controller": True}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata,
            "spec": {"restartPolicy": "Never",
                     "containers": [_container("probe-%d" % i, image, resource, per_container) for i in range(containers)]}}


# What the Pod Security restricted profile asks of a pod and a container
# (https://kubernetes.io/docs/concepts/security/pod-security-standards/#restricted).
RESTRICTED_POD = {"runAsNonRoot": True, "runAsUser": 65534, "seccompProfile": {"type": "RuntimeDefault"}}
RESTRICTED_CONTAINER = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}


def _container(name, image, resource, gpus, cpu="100m", memory="128Mi"):
    amount = {"cpu": cpu, "memory": memory, resource: str(gpus)}
    return {"name": name, "image": image, "resources": {"requests": dict(amount), "limits": dict(amount)},
            "securityContext": dict(RESTRICTED_CONTAINER)}


def child_job(name, namespace, parent, resource, pods):
    """A Job with no queue label that names ``parent`` (a Job object as the API returned it) as its controller,
    ``pods`` pods of one device each: what Kueue would run as the parent's child, outside any quota."""
    job = probe_job(name, namespace, resource, pods=pods)
    job["metadata"]["ownerReferences"] = [{"apiVersion": "batch/v1", "kind": "Job", "controller": True,
                                           "name": parent["metadata"]["name"], "uid": parent["metadata"]["uid"]}]
    return job


def device_door_jobs(namespace, resource, grace_max):
    """Jobs that ask for no GPU and reach for the node's devices or host anyway, by route name. Each must be
    refused when it is created."""
    def job(route, change):
        body = probe_job("door-" + route, namespace, resource, gpus=0)
        change(body["spec"]["template"]["spec"])
        return body

    def template_job(route, change):
        body = probe_job("door-" + route, namespace, resource, gpus=0)
        change(body["spec"]["template"])
        return body

    def env(spec):
        spec["containers"][0]["env"] = [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]

    def privileged(spec):
        spec["containers"][0]["securityContext"] = {"privileged": True}

    def host_dev(spec):
        spec["volumes"] = [{"name": "dev", "hostPath": {"path": "/dev"}}]
        spec["containers"][0]["volumeMounts"] = [{"name": "dev", "mountPath": "/dev"}]

    def sys_admin(spec):
        spec["containers"][0]["securityContext"] = {"capabilities": {"add": ["SYS_ADMIN"]}}

    def init_env(spec):
        spec["initContainers"] = [dict(spec["containers"][0], name="init",
                                       env=[{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}])]

    def env_from(spec):
        spec["containers"][0]["envFrom"] = [{"prefix": "NVIDIA_", "configMapRef": {"name": "kube-root-ca.crt"}}]

    def dra_claim(spec):
        spec["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": PROBE_PREFIX + "gpu"}]
        spec["containers"][0]["resources"]["claims"] = [{"name": "gpu"}]

    def cdi_annotation(template):
        template.setdefault("metadata", {}).setdefault("annotations", {})[
            "nvidia.cdi.k8s.io/container.probe"] = "nvidia.com/gpu=all"

    routes = {"NVIDIA_VISIBLE_DEVICES=all": env, "NVIDIA_VISIBLE_DEVICES in an init container": init_env,
              "envFrom with prefix NVIDIA_": env_from, "privileged": privileged, "hostPath /dev": host_dev,
              "capability SYS_ADMIN": sys_admin,
              "runtimeClassName nvidia": lambda spec: spec.update(runtimeClassName="nvidia"),
              "terminationGracePeriodSeconds %d" % (grace_max + 1):
                  lambda spec: spec.update(terminationGracePeriodSeconds=grace_max + 1)}
    for field in ("hostPID", "hostNetwork", "hostIPC"):
        routes[field] = lambda spec, f=field: spec.update({f: True})
    jobs = {route: job(re.sub(r"[^a-z0-9]+", "-", route.lower())[:30].strip("-"), change)
            for route, change in routes.items()}
    jobs["CDI device annotation"] = template_job("cdi-annotation", cdi_annotation)
    jobs["a DRA resource claim"] = job("dra-claim", dra_claim)
    return jobs


def _routes(namespace, resource, routes, prefix):
    """Probe Jobs with no GPU, one per route: ``{route: change}`` where ``change(job)`` edits the Job."""
    jobs = {}
    for route, change in routes.items():
        body = probe_job("%s-%s" % (prefix, re.sub(r"[^a-z0-9]+", "-", route.lower())[:30].strip("-")), namespace,
                         resource, gpus=0)
        change(body)
        jobs[route] = body
    return jobs


def _spec(job):
    return job["spec"]["template"]["spec"]


def _container_security(job, **fields):
    _spec(job)["containers"][0].setdefault("securityContext", {}).update(fields)


def finalizer_jobs(namespace, resource):
    """Jobs that would outlive their deletion (a finalizer on the Job, or on the pods of its template)."""
    return _routes(namespace, resource, {
        "finalizer on the Job": lambda job: job["metadata"].update(finalizers=[PROBE_FINALIZER]),
        "finalizer on the pod template": lambda job: job["spec"]["template"]["metadata"].update(
            finalizers=[PROBE_FINALIZER]),
    }, "finalizer")


def lockout_jobs(namespace, resource, other_namespace, other_tenant):
    """Tiny Jobs whose pods reach into ``other_namespace`` with pod affinity or anti-affinity: a required
    anti-affinity over a topology key every GPU node shares keeps every pod it matches off those nodes."""
    def term(**selector):
        return dict({"labelSelector": {"matchExpressions": [{"key": JOB_NAME_LABEL, "operator": "Exists"}]},
                     "topologyKey": GPU_PRODUCT_LABEL}, **selector)

    def affinity(kind, mode, **selector):
        field = "%sDuringSchedulingIgnoredDuringExecution" % mode
        value = [term(**selector)] if mode == "required" else [{"weight": 100, "podAffinityTerm": term(**selector)}]
        return lambda job: _spec(job).update(affinity={kind: {field: value}})
    by_tenant = {"namespaceSelector": {"matchLabels": {TENANT_LABEL: other_tenant}}}
    return _routes(namespace, resource, {
        "required anti-affinity, namespaceSelector %s" % other_tenant: affinity("podAntiAffinity", "required", **by_tenant),
        "required anti-affinity, namespaces [%s]" % other_namespace:
            affinity("podAntiAffinity", "required", namespaces=[other_namespace]),
        "required anti-affinity, every namespace": affinity("podAntiAffinity", "required", namespaceSelector={}),
        "preferred anti-affinity, namespaceSelector %s" % other_tenant:
            affinity("podAntiAffinity", "preferred", **by_tenant),
        "required affinity, namespaces [%s]" % other_namespace:
            affinity("podAffinity", "required", namespaces=[other_namespace]),
    }, "lockout")


def never_running_jobs(namespace, resource):
    """Jobs that Kueue would admit and nothing would run: bound past the scheduler, handed to a scheduler that does
    not exist, gated, or managed by another controller."""
    return _routes(namespace, resource, {
        "nodeName": lambda job: _spec(job).update(nodeName="gpu-node-0"),
        "schedulerName": lambda job: _spec(job).update(schedulerName="fairgpu-probe-no-such-scheduler"),
        "schedulingGates": lambda job: _spec(job).update(schedulingGates=[{"name": "example.com/hold"}]),
        "managedBy": lambda job: job["spec"].update(managedBy="example.com/elsewhere"),
    }, "never")


def limit_jobs(namespace, resource):
    """Jobs whose containers ask for little and would be given much more (limits far above requests), or whose
    pods the API server refuses (a request above the LimitRange's default limit, with no limit of its own)."""
    def resources(requests, limits=None):
        def change(job):
            container = _spec(job)["containers"][0]
            container["resources"] = {"requests": dict(requests)}
            if limits:
                container["resources"]["limits"] = dict(limits)
        return change
    return _routes(namespace, resource, {
        "cpu 10m, limit 96": resources({"cpu": "10m", "memory": "16Mi"}, {"cpu": "96", "memory": "16Mi"}),
        "memory 16Mi, limit 1Ti": resources({"cpu": "10m", "memory": "16Mi"}, {"cpu": "10m", "memory": "1Ti"}),
        "cpu 8 with no limit (default limit 1)": resources({"cpu": "8", "memory": "1Gi"}),
        # Pod-level requests may not be below the containers' together (API validation): the probe's are 100m.
        "pod-level cpu 100m, limit 96": lambda job: _spec(job).update(
            resources={"requests": {"cpu": "100m"}, "limits": {"cpu": "96"}}),
    }, "limits")


def node_filling_jobs(namespace, resource, per_gpu, node):
    """Jobs that would fill a GPU node's CPU or memory while its GPUs stay free (``per_gpu``: the GPU nodes'
    ``{"cpu": millicores, "memory": bytes}`` per GPU; ``node``: a GPU node's name): a tenant's share of either can
    be a node's allocatable, and Kueue counts both cluster-wide only."""
    def resources(gpus, cpu, memory, pin=None):
        def change(job):
            amount = {"cpu": cpu, "memory": memory, resource: str(gpus)}
            _spec(job)["containers"][0]["resources"] = {"requests": dict(amount), "limits": dict(amount)}
            if pin == "selector":
                _spec(job)["nodeSelector"] = {HOSTNAME_LABEL: node}
            elif pin == "affinity":
                _spec(job)["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": [
                        {"key": HOSTNAME_LABEL, "operator": "In", "values": [node]}]}]}}}
        return change
    twice_cpu, twice_memory = "%dm" % (2 * per_gpu["cpu"] + 1000), "%dMi" % (2 * per_gpu["memory"] // 2 ** 20 + 1)
    return _routes(namespace, resource, {
        "no GPU, memory %s" % twice_memory: resources(0, "100m", twice_memory),
        "no GPU, cpu %s" % twice_cpu: resources(0, twice_cpu, "128Mi"),
        "1 GPU, cpu %s" % twice_cpu: resources(1, twice_cpu, "128Mi"),
        "pinned by nodeSelector %s" % HOSTNAME_LABEL: resources(0, "100m", "128Mi", "selector"),
        "pinned by node affinity %s" % HOSTNAME_LABEL: resources(0, "100m", "128Mi", "affinity"),
    }, "fill")


def big_jobs(namespace, resource, kib):
    """Jobs past ``kib`` KiB: in one annotation, and in many environment variables."""
    # The API server caps one object's annotations at 256 KiB (apimachinery TotalAnnotationSizeLimitB), so the
    # bulk is split between the Job's and its pod template's.
    half = "x" * ((kib // 2 + 1) * 1024)
    return _routes(namespace, resource, {
        "annotations of %d KiB on the Job and its pods" % (kib + 2): lambda job: [
            meta.setdefault("annotations", {}).update({"example.com/blob": half})
            for meta in (job["metadata"], job["spec"]["template"]["metadata"])],
        "%d environment variables" % (kib * 16): lambda job: _spec(job)["containers"][0].update(
            env=[{"name": "V%d" % i, "value": "x"} for i in range(kib * 16)]),
    }, "big")


def pod_security_jobs(namespace, resource):
    """Jobs whose pods Pod Security baseline refuses, by the controls outside the device door."""
    return _routes(namespace, resource, {
        "seccomp Unconfined": lambda job: _spec(job)["securityContext"].update(seccompProfile={"type": "Unconfined"}),
        "sysctl kernel.msgmax": lambda job: _spec(job)["securityContext"].update(
            sysctls=[{"name": "kernel.msgmax", "value": "65536"}]),
        "AppArmor Unconfined": lambda job: _container_security(job, appArmorProfile={"type": "Unconfined"}),
        "SELinux type spc_t": lambda job: _container_security(job, seLinuxOptions={"type": "spc_t"}),
        "probe on another host": lambda job: _spec(job)["containers"][0].update(
            livenessProbe={"tcpSocket": {"host": "169.254.169.254", "port": 80}}),
    }, "pss")


def workload_object(kind, name, namespace, resource, image=PROBE_IMAGE):
    """A ``kind`` of apps/v1 (Deployment, StatefulSet) whose pods would run outside Kueue."""
    pod = bare_pod(name, namespace, resource, per_container=0, image=image)
    pod["spec"]["restartPolicy"] = "Always"
    labels = {PROBE_LABEL: "isolation", "app": PROBE_PREFIX + name}
    return {"apiVersion": "apps/v1", "kind": kind, "metadata": pod["metadata"],
            "spec": {"replicas": 1, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels}, "spec": pod["spec"]}}}


def big_config_map(name, namespace, kib):
    """A ConfigMap of ``kib`` KiB and one more."""
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": PROBE_PREFIX + name, "namespace": namespace, "labels": {PROBE_LABEL: "isolation"}},
            "data": {"blob": "x" * ((kib + 1) * 1024)}}


def privileged_pod(name, namespace, image=PROBE_IMAGE):
    """A Pod with no GPU and a privileged container (for Pod Security's own refusal)."""
    pod = bare_pod(name, namespace, GPU_RESOURCE, per_container=0, image=image)
    pod["spec"]["containers"][0]["securityContext"] = {"privileged": True}
    return pod


def over_quota_split(max_devices):
    """Two containers of ``max_devices // 2 + 1`` devices each: together more than the ResourceQuota's
    ``max_devices``. The LimitRange refuses such a pod first when a node has fewer devices than that (its
    Container and Pod maxima are the largest node's devices)."""
    return max_devices // 2 + 1
