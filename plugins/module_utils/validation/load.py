# -*- coding: utf-8 -*-
# Copyright: fairgpu maintainers
# Apache License 2.0 (see LICENSE)
"""The validation's load Jobs as the API server receives them: one suspended Job per description of
``scenarios.load_jobs``, queued to the tenant's LocalQueue, running files/gpu_load.py from the ConfigMap
``fairgpu-gpu-load`` with the devices it asks for. Pure logic.

Their pods pass Pod Security ``restricted`` (https://kubernetes.io/docs/concepts/security/pod-security-standards/):
a numeric non-root user, RuntimeDefault seccomp, no privilege escalation, every capability dropped; GPUs come only
from the device plugin (CDI), the image's own ``NVIDIA_VISIBLE_DEVICES=all`` being ignored in an unprivileged
container (the GPU Operator's toolkit with ``ACCEPT_NVIDIA_VISIBLE_DEVICES_ENVVAR_WHEN_UNPRIVILEGED`` false).
Where the GPUs are simulated, kwok completes each pod after its run time (kwok's pod-complete stage delay).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.fairgpu.tenancy.plugins.module_utils.common.names import (
    BACKLOG_LABEL,
    HOSTNAME_LABEL,
    QUEUE_LABEL,
    TENANT_LABEL,
    VALIDATION_LABEL,
)

# A pod that a disruption failed (its node lost: PodGC, DeletionByPodGC; evicted for its node's taint:
# DeletionByTaintManager; preempted by the scheduler) carries the condition DisruptionTarget
# (k8s.io/api core/v1 PodDisruptionTarget, kubernetes v1.36.3 pkg/controller/podgc/gc_controller.go): the Job then
# makes a new pod without counting a failure, while a pod that failed by itself still fails the Job at once
# (backoffLimit 0). What Kubernetes documents for a Job's pod failure policy ("Handling pod failures", ignore
# disruptions); fairgpu recommends the same for tenants' GPU Jobs (docs/failures.md).
POD_FAILURE_POLICY = {"rules": [{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}]}
# The ConfigMap in every tenant namespace that holds files/gpu_load.py, mounted at /opt/fairgpu.
LOAD_SCRIPT_CONFIGMAP = "fairgpu-gpu-load"
# The defaults of the validate role (roles/validate/defaults/main.yml says what each is).
POD_DEFAULTS = {"image": "pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime", "memory_fraction": 0.8, "user": 1000,
                "group": 1000, "simulated": False}


def job_manifest(job, pod=None):
    """The Job of one load description ``job`` (``scenarios.load_jobs``: name, namespace, queue, tenant, scenario,
    seconds, resource, gpus, backlog; ``node``, when given, pins its pod to that node by name; ``device``, when
    given, is gpu_load.py's --device: ``cuda`` makes a pod without a CUDA device fail, not run on the CPU). ``pod``: ``image``,
    ``memory_fraction`` (of the GPU's memory gpu_load.py holds), ``user`` and ``group`` (numeric), ``simulated``
    (kwok runs the pod: its run-time annotations), over POD_DEFAULTS."""
    settings = dict(POD_DEFAULTS, **(pod or {}))
    seconds = "%ds" % int(job["seconds"])
    labels = {QUEUE_LABEL: job["queue"], VALIDATION_LABEL: job["scenario"], TENANT_LABEL: job["tenant"]}
    if job.get("backlog"):
        labels[BACKLOG_LABEL] = "true"
    template = {"labels": {VALIDATION_LABEL: job["scenario"], TENANT_LABEL: job["tenant"]}}
    if settings["simulated"]:
        template["annotations"] = {
            # kwok completes the pod this long after it runs (delay = jitter-delay gives a fixed time).
            "pod-complete.stage.kwok.x-k8s.io/delay": seconds,
            "pod-complete.stage.kwok.x-k8s.io/jitter-delay": seconds,
            # The simulated DCGM exporter's values: the memory gpu_load.py holds, its matmuls keep the GPU busy.
            "fairgpu.io/simulated-gpu-memory-fraction": str(settings["memory_fraction"]),
            "fairgpu.io/simulated-gpu-utilization": "100",
        }
    devices = {job["resource"]: str(job["gpus"])}
    resources = {"cpu": "2", "memory": "8Gi"}
    manifest = {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": job["name"], "namespace": job["namespace"], "labels": labels},
        "spec": {
            "parallelism": 1, "completions": 1, "backoffLimit": 0, "suspend": True,
            "podFailurePolicy": POD_FAILURE_POLICY,
            "template": {
                "metadata": template,
                "spec": {
                    "restartPolicy": "Never",
                    "securityContext": {"runAsNonRoot": True, "runAsUser": int(settings["user"]),
                                        "runAsGroup": int(settings["group"]),
                                        "seccompProfile": {"type": "RuntimeDefault"}},
                    "containers": [{
                        "name": "load",
                        "image": settings["image"],
                        "command": ["python", "/opt/fairgpu/gpu_load.py", "--seconds", str(int(job["seconds"])),
                                    "--memory-fraction", str(settings["memory_fraction"])],
                        "env": [{"name": "TENANT", "value": job["tenant"]},
                                # The user has no home in the image: caches (PyTorch's ~/.cache, CUDA's ~/.nv) go
                                # to the emptyDir.
                                {"name": "HOME", "value": "/tmp"}],
                        "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
                        "resources": {"requests": dict(resources, **devices), "limits": dict(resources, **devices)},
                        "volumeMounts": [{"name": "load-script", "mountPath": "/opt/fairgpu", "readOnly": True},
                                         {"name": "tmp", "mountPath": "/tmp"}],
                    }],
                    "volumes": [{"name": "load-script", "configMap": {"name": LOAD_SCRIPT_CONFIGMAP}},
                                {"name": "tmp", "emptyDir": {}}],
                },
            },
        },
    }
    if job.get("device"):
        manifest["spec"]["template"]["spec"]["containers"][0]["command"] += ["--device", job["device"]]
    if job.get("node"):
        # The well-known label every kubelet sets on its Node (k8s.io/api core/v1 LabelHostname).
        manifest["spec"]["template"]["spec"]["nodeSelector"] = {HOSTNAME_LABEL: job["node"]}
    return manifest
