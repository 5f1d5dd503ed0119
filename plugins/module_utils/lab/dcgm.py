# -*- coding: utf-8 -*-
# Copyright: fairgpu maintainers
# Apache License 2.0 (see LICENSE)
"""The simulated DCGM exporter of the embedded cluster: which pod holds which simulated GPU, and the samples the
NVIDIA dcgm-exporter would publish for them. Pure logic, no cluster access (``files/monitoring/
dcgm_exporter_sim.py`` reads the cluster and serves the samples with prometheus_client).

Metric names, HELP texts, types and label names are dcgm-exporter's (its default counters), checked against a
real scrape in ``tests/unit/test_dcgm_sim.py`` (``shared/fixtures/dcgm/``):

- ``DCGM_FI_DEV_GPU_UTIL`` (gauge, %, 0 to 100): whole GPUs only; dcgm-exporter has no value for MIG instances.
- ``DCGM_FI_DEV_FB_USED``, ``DCGM_FI_DEV_FB_FREE`` (gauge, MiB): of the device, a whole GPU or a MIG instance.
- ``DCGM_FI_PROF_GR_ENGINE_ACTIVE`` (gauge, a ratio 0 to 1 although the HELP text says %).

Labels, in dcgm-exporter's order: ``gpu`` (index on the node), ``UUID``, ``device`` (``nvidia<gpu>``),
``modelName`` (nvidia-smi's name), ``GPU_I_PROFILE`` and ``GPU_I_ID`` (MIG instances only), ``Hostname``,
``DCGM_FI_DRIVER_VERSION``, then ``container``, ``namespace``, ``pod`` of the pod holding the device, empty strings
for a free device (``device_labels`` keeps this order; prometheus_client prints labels sorted by name, which changes
nothing for Prometheus). ``Hostname`` is the node's name (dcgm-exporter takes ``NODE_NAME`` when set, its pod's host name
otherwise). UUIDs and names are those of the simulated nvidia-smi (``simulated_nvidia_smi``).

The values follow the pod's annotations, which the validate role's load Jobs set from their arguments:

- ``fairgpu.io/simulated-gpu-memory-fraction`` (0 to 1, default 0): the fraction of the device's free memory the
  pod holds, as ``files/gpu_load.py --memory-fraction`` does; used MiB = CUDA context (``CONTEXT_MIB``) +
  fraction x (device MiB - context). A free device uses 0 MiB.
- ``fairgpu.io/simulated-gpu-utilization`` (%, 0 to 100, default 0): GPU_UTIL, and GR_ENGINE_ACTIVE = % / 100.

A node annotated ``fairgpu.io/simulated-dcgm-profiling: "false"`` publishes no ``DCGM_FI_PROF_*`` field, as
dcgm-exporter does where profiling is unsupported or DCGM's profiling module is not loaded ("Not collecting DCP
metrics", "Skipping line N ('DCGM_FI_PROF_GR_ENGINE_ACTIVE'): metric not enabled": NVIDIA/dcgm-exporter#395 on
an M60, #439, #707); its whole GPUs keep ``DCGM_FI_DEV_GPU_UTIL``, its MIG instances then have no utilisation
field at all. Any other value, or none, means profiling metrics are published.

Only live pods hold devices: phase Running, bound to a simulated GPU node (annotation
``fairgpu.io/simulated-gpu-product``), requesting ``nvidia.com/gpu`` or a MIG resource ``nvidia.com/mig-<profile>``.
On a node the simulated MIG manager partitioned (annotation ``fairgpu.io/simulated-mig-layout``), each GPU
instance is a device of its own, as dcgm-exporter reports them: the parent GPU's ``gpu`` and ``UUID`` with
``GPU_I_PROFILE`` and ``GPU_I_ID``, its memory the profile's; a pod asking for ``nvidia.com/mig-2g.20gb`` holds
a free ``2g.20gb`` instance of its node.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import uuid

from ansible_collections.fairgpu.tenancy.plugins.module_utils.common.names import (
    GPU_RESOURCE,
    MIG_RESOURCE_PREFIX,
    MIG_STRATEGY_LABEL,
)
from ansible_collections.fairgpu.tenancy.plugins.module_utils.mig import layout as mig_layout
from ansible_collections.fairgpu.tenancy.plugins.module_utils.mig.catalog import GPU_MODELS
from ansible_collections.fairgpu.tenancy.plugins.module_utils.lab.node import LAYOUT_ANNOTATION
from ansible_collections.fairgpu.tenancy.plugins.module_utils.lab.nvidia_smi import simulated_gpus

ANNOTATION_PRODUCT = "fairgpu.io/simulated-gpu-product"
ANNOTATION_COUNT = "fairgpu.io/simulated-gpu-count"
ANNOTATION_MEMORY_MIB = "fairgpu.io/simulated-gpu-memory-mib"
ANNOTATION_MEMORY_FRACTION = "fairgpu.io/simulated-gpu-memory-fraction"
ANNOTATION_UTILIZATION = "fairgpu.io/simulated-gpu-utilization"
ANNOTATION_PROFILING = "fairgpu.io/simulated-dcgm-profiling"
# MiB a CUDA context takes on the device before the process allocates anything.
CONTEXT_MIB = 512
DRIVER_VERSION = "570.124.06"
# name -> (type, HELP) as dcgm-exporter's default counters publish them.
METRICS = {
    "DCGM_FI_DEV_GPU_UTIL": ("gauge", "GPU utilization (in %)."),
    "DCGM_FI_DEV_FB_FREE": ("gauge", "Framebuffer memory free (in MiB)."),
    "DCGM_FI_DEV_FB_USED": ("gauge", "Framebuffer memory used (in MiB)."),
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE": ("gauge", "Ratio of time the graphics engine is active (in %)."),
}
_UUID_NAMESPACE = uuid.uuid5(uuid.NAMESPACE_DNS, "fairgpu.io")


class DcgmSimError(ValueError):
    """Raised for a simulated node or pod annotation the exporter cannot read."""


def _model_name(product):
    """nvidia-smi's name of ``product`` (a ``nvidia.com/gpu.product`` value): GFD replaced its spaces by '-'."""
    return product.replace("-", " ")


def node_devices(node):
    """The devices of a simulated node (a Node object as a dict), in index order: ``[{"node", "gpu", "key",
    "resource", "uuid", "model_name", "memory_mib", "profiling"}]`` (``profiling``: False when the node's
    ``fairgpu.io/simulated-dcgm-profiling`` annotation is "false") plus ``mig_profile`` and ``gi_id`` for a GPU instance;
    ``[]`` for a node without the annotations. ``key`` tells devices of one node apart (the GPU index, or
    ``"<gpu>/<gi>"``); ``resource`` is what a pod asks for to get it: a GPU instance's ``nvidia.com/mig-<profile>``
    under GFD's ``nvidia.com/mig.strategy`` label ``mixed``, ``nvidia.com/gpu`` under ``single`` (the device
    plugin then advertises MIG devices as ``nvidia.com/gpu``: k8s-device-plugin v0.20.0 internal/rm/rm.go). UUIDs and GPU instance IDs are the
    simulated nvidia-smi's. Raises DcgmSimError for a bad count, memory or layout annotation or an unknown
    product."""
    meta = node.get("metadata") or {}
    annotations = meta.get("annotations") or {}
    product = annotations.get(ANNOTATION_PRODUCT)
    if not product:
        return []
    if product not in GPU_MODELS:
        raise DcgmSimError("node %s: unknown %s %r" % (meta.get("name"), ANNOTATION_PRODUCT, product))
    try:
        count = int(annotations.get(ANNOTATION_COUNT, ""))
        memory = int(annotations.get(ANNOTATION_MEMORY_MIB) or GPU_MODELS[product]["memory_mib"])
    except ValueError:
        raise DcgmSimError("node %s: %s and %s must be integers"
                           % (meta.get("name"), ANNOTATION_COUNT, ANNOTATION_MEMORY_MIB))
    try:
        gpus = simulated_gpus(meta["name"], product, count, json.loads(annotations.get(LAYOUT_ANNOTATION) or "null"))
    except (ValueError, mig_layout.MigLayoutError) as exc:
        raise DcgmSimError("node %s: %s: %s" % (meta.get("name"), LAYOUT_ANNOTATION, exc))
    single = (meta.get("labels") or {}).get(MIG_STRATEGY_LABEL) == "single"
    devices = []
    for gpu in gpus:
        whole = {"node": meta["name"], "gpu": gpu["index"], "key": gpu["index"], "resource": GPU_RESOURCE,
                 "uuid": "GPU-%s" % uuid.uuid5(_UUID_NAMESPACE, "%s/%d" % (meta["name"], gpu["index"])),
                 "model_name": _model_name(product), "memory_mib": memory,
                 "profiling": str(annotations.get(ANNOTATION_PROFILING, "true")).lower() != "false"}
        if not gpu["mig_enabled"]:
            devices.append(whole)
        for instance in gpu["gpu_instances"]:
            devices.append(dict(whole, key="%d/%d" % (gpu["index"], instance["id"]),
                                resource=GPU_RESOURCE if single else mig_layout.mig_resource(instance["profile"]),
                                memory_mib=mig_layout.profile_memory_mib(product, instance["profile"]),
                                mig_profile=instance["profile"], gi_id=instance["id"]))
    return devices


def _float_annotation(pod_name, annotations, key, low, high):
    raw = annotations.get(key)
    if raw is None:
        return 0.0
    try:
        value = float(raw)
    except ValueError:
        value = None
    if value is None or not low <= value <= high:
        raise DcgmSimError("pod %s: annotation %s must be a number from %s to %s, got %r"
                           % (pod_name, key, low, high, raw))
    return value


def _accelerators(container):
    """``{resource: count > 0}`` of the accelerators a container asks for (requests, else limits)."""
    requests = (container.get("resources") or {}).get("requests") or {}
    limits = (container.get("resources") or {}).get("limits") or {}
    wanted = {}
    for name in set(requests) | set(limits):
        if name == GPU_RESOURCE or name.startswith(MIG_RESOURCE_PREFIX):
            count = int(requests.get(name, limits.get(name)))
            if count > 0:
                wanted[name] = count
    return wanted


def live_gpu_pods(pods, gpu_nodes):
    """Pods that hold simulated devices: Running, on one of ``gpu_nodes`` (node names), with containers asking
    for ``nvidia.com/gpu`` or MIG devices. Returns a list of ``{"uid", "namespace", "name", "node", "containers":
    [(container, resource, devices)], "memory_fraction", "utilization"}`` sorted by start time and name."""
    held = []
    for pod in pods:
        meta, spec, status = pod.get("metadata") or {}, pod.get("spec") or {}, pod.get("status") or {}
        if status.get("phase") != "Running" or spec.get("nodeName") not in gpu_nodes:
            continue
        containers = [(container["name"], resource, count) for container in spec.get("containers") or []
                      for resource, count in sorted(_accelerators(container).items())]
        if not containers:
            continue
        name = "%s/%s" % (meta.get("namespace"), meta.get("name"))
        annotations = meta.get("annotations") or {}
        held.append({
            "uid": meta.get("uid") or name, "namespace": meta.get("namespace"), "name": meta.get("name"),
            "node": spec["nodeName"], "containers": containers, "started": status.get("startTime") or "",
            "memory_fraction": _float_annotation(name, annotations, ANNOTATION_MEMORY_FRACTION, 0, 1),
            "utilization": _float_annotation(name, annotations, ANNOTATION_UTILIZATION, 0, 100),
        })
    held.sort(key=lambda p: (p["started"], p["namespace"], p["name"]))
    return held


def assign(previous, devices, pods):
    """Which devices each live pod holds, as the device plugin would have allocated them.

    ``previous``: the last result (``{pod uid: [(container, node, device key)]}``); a pod keeps its devices while
    it lives. New pods get the first free devices of the resource they ask for on their node, in the order of
    ``pods``. ``devices``: node name -> list from ``node_devices``. Returns ``(assignment, unplaced)``; ``unplaced``
    names pods whose node has fewer free simulated devices than they request (the scheduler would not have bound
    them; reported, never invented)."""
    live = {p["uid"]: p for p in pods}
    assignment = {uid: held for uid, held in previous.items() if uid in live}
    taken = {(node, key) for held in assignment.values() for _container, node, key in held}
    unplaced = []
    for pod in pods:
        if pod["uid"] in assignment:
            continue
        node = pod["node"]
        free = {resource: [d["key"] for d in devices.get(node, []) if d["resource"] == resource
                           and (node, d["key"]) not in taken] for _container, resource, _count in pod["containers"]}
        if any(len(free[resource]) < count for _container, resource, count in pod["containers"]):
            unplaced.append("%s/%s" % (pod["namespace"], pod["name"]))
            continue
        held = []
        for container, resource, count in pod["containers"]:
            for _device in range(count):
                key = free[resource].pop(0)
                held.append((container, node, key))
                taken.add((node, key))
        assignment[pod["uid"]] = held
    return assignment, unplaced


def device_labels(device, container="", namespace="", pod="", driver_version=DRIVER_VERSION):
    """dcgm-exporter's labels of one device, in its order; ``device`` may carry ``mig_profile`` and ``gi_id`` (a MIG
    instance), which add ``GPU_I_PROFILE`` and ``GPU_I_ID``."""
    labels = [("gpu", str(device["gpu"])), ("UUID", device["uuid"]), ("device", "nvidia%d" % device["gpu"]),
              ("modelName", device["model_name"])]
    if device.get("mig_profile"):
        labels += [("GPU_I_PROFILE", device["mig_profile"]), ("GPU_I_ID", str(device["gi_id"]))]
    labels += [("Hostname", device["node"]), ("DCGM_FI_DRIVER_VERSION", driver_version), ("container", container),
               ("namespace", namespace or ""), ("pod", pod or "")]
    return labels


def device_values(memory_mib, memory_fraction=0.0, utilization=0.0, held=True, mig=False, profiling=True):
    """The metrics of one device: ``{name: value}``. ``memory_mib``: the device's memory (MiB);
    ``memory_fraction`` (0 to 1) and ``utilization`` (%) of the pod holding it; ``held``: whether a pod holds it.
    A MIG instance (``mig``) has no ``DCGM_FI_DEV_GPU_UTIL``; without ``profiling`` there is no
    ``DCGM_FI_PROF_GR_ENGINE_ACTIVE``."""
    used = 0
    if held:
        context = min(CONTEXT_MIB, memory_mib)
        used = int(context + memory_fraction * (memory_mib - context))
    util = float(utilization) if held else 0.0
    values = {"DCGM_FI_DEV_FB_USED": used, "DCGM_FI_DEV_FB_FREE": memory_mib - used,
              "DCGM_FI_PROF_GR_ENGINE_ACTIVE": round(util / 100.0, 6)}
    if not mig:
        values["DCGM_FI_DEV_GPU_UTIL"] = int(round(util))
    if not profiling:
        del values["DCGM_FI_PROF_GR_ENGINE_ACTIVE"]
    return values


def samples(devices, assignment, pods, driver_version=DRIVER_VERSION):
    """Every sample the exporter publishes: a list of ``(metric name, [(label, value)], value)``, metric by metric
    in ``METRICS`` order, then device by device (node, index)."""
    by_uid = {p["uid"]: p for p in pods}
    holder = {}
    for uid, held in assignment.items():
        for container, node, key in held:
            holder[(node, key)] = (by_uid[uid], container)
    rows = []
    for node in sorted(devices):
        for device in devices[node]:
            pod, container = holder.get((node, device["key"]), (None, ""))
            labels = device_labels(device, container, pod and pod["namespace"], pod and pod["name"], driver_version)
            values = device_values(device["memory_mib"], pod["memory_fraction"] if pod else 0.0,
                                   pod["utilization"] if pod else 0.0, held=pod is not None,
                                   mig=bool(device.get("mig_profile")), profiling=device.get("profiling", True))
            rows.append((labels, values))
    return [(name, labels, values[name]) for name in METRICS for labels, values in rows if name in values]
