# -*- coding: utf-8 -*-
# Copyright: fairgpu maintainers
# Apache License 2.0 (see LICENSE)
"""Validation and expansion of the embedded cluster's node pools (``lab_cluster_node_pools``).

Pure logic, no cluster access. A node pool is a dict::

    {"name": str, "count": int >= 1, "gpu_product": str (a key of gpu_catalog.GPU_MODELS),
     "gpu_count": int >= 1, "gpu_memory_mib": int >= 1 (optional), "cpu": quantity, "memory": quantity,
     "pods": int >= 1 (optional, default 110),
     "taints": [{"key", "value" (optional), "effect"}] (optional; a Node's spec.taints, such as a managed GPU
               pool's nvidia.com/gpu=present:NoSchedule),
     "unschedulable": bool (optional; true: the pool's nodes are cordoned, spec.unschedulable),
     "gpu_sharing": {"strategy": "time-slicing" | "mps", "replicas": int >= 2} (optional; the GPU Operator's device
                    plugin sharing config: the node advertises gpu_count x replicas nvidia.com/gpu and GFD labels
                    the product <product>-SHARED, nvidia.com/gpu.replicas and nvidia.com/gpu.sharing-strategy,
                    while nvidia.com/gpu.count stays the physical count; NVIDIA GPU Operator docs, "GPU sharing")}

A cordoned node also carries node.kubernetes.io/unschedulable:NoSchedule, which the node lifecycle controller adds
(TaintNodesByCondition); ``pool_gpu_nodes`` writes it as a live cluster would show it.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.fairgpu.tenancy.plugins.module_utils.common.fields import unknown_field_errors
from ansible_collections.fairgpu.tenancy.plugins.module_utils.common.names import (
    GPU_PRODUCT_LABEL,
    GPU_REPLICAS_LABEL,
    GPU_RESOURCE,
    GPU_SHARING_STRATEGY_LABEL,
    SHARED_PRODUCT_SUFFIX,
    UNSCHEDULABLE_TAINT,
)
from ansible_collections.fairgpu.tenancy.plugins.module_utils.kueue import taints as node_taints
from ansible_collections.fairgpu.tenancy.plugins.module_utils.mig import layout as mig_layout
from ansible_collections.fairgpu.tenancy.plugins.module_utils.mig.catalog import GPU_MODELS
from ansible_collections.fairgpu.tenancy.plugins.module_utils.common.quantity import canonical_quantity, parse_quantity
from ansible_collections.fairgpu.tenancy.plugins.module_utils.tenants.spec import is_dns_label, is_whole_number

DEFAULT_PODS = 110
FIELDS = ("name", "count", "gpu_product", "gpu_count", "gpu_memory_mib", "cpu", "memory", "pods", "taints",
          "unschedulable", "gpu_sharing")
SHARING_STRATEGIES = ("time-slicing", "mps")


def _is_quantity(value):
    """A finite Kubernetes quantity >= 0 given as a string or an int."""
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        return False
    try:
        amount = parse_quantity(value)
        canonical_quantity(value)  # a multiple of 1000E cannot be written back
    except ValueError:
        return False
    return amount.is_finite() and amount >= 0


def apply_sharing(labels, resources, sharing):
    """What the device plugin and GFD publish for a node with a sharing config (``{"strategy": "time-slicing" |
    "mps", "replicas": N}``, renameByDefault false; None: no sharing): ``nvidia.com/gpu`` times the replicas, the
    product ``<product>-SHARED``, ``nvidia.com/gpu.replicas`` and ``nvidia.com/gpu.sharing-strategy``, while
    ``nvidia.com/gpu.count`` stays the physical count (NVIDIA GPU Operator documentation, "GPU sharing"). Returns
    new ``(labels, resources)``."""
    labels, resources = dict(labels), dict(resources)
    if sharing and resources.get(GPU_RESOURCE):
        labels[GPU_PRODUCT_LABEL] += SHARED_PRODUCT_SUFFIX
        labels[GPU_REPLICAS_LABEL] = str(sharing["replicas"])
        labels[GPU_SHARING_STRATEGY_LABEL] = sharing["strategy"]
        resources[GPU_RESOURCE] *= sharing["replicas"]
    return labels, resources


def node_pool_errors(pools, where="lab_cluster_node_pools"):
    """Return a list of error strings, one per problem, each naming ``<where>[i].field`` (``where``: the
    variable that holds the pools).

    An empty list means the pools are valid. Never raises on malformed input.
    """
    if not isinstance(pools, list) or not pools:
        return ["%s: give a non-empty list of node pools" % where]
    errors = []
    names = set()
    for index, pool in enumerate(pools):
        at = "%s[%d]" % (where, index)
        if not isinstance(pool, dict):
            errors.append("%s: must be a mapping with name, count, gpu_product, gpu_count, cpu, memory" % at)
            continue
        errors.extend(unknown_field_errors(at, pool, FIELDS))
        name = pool.get("name")
        # Node names are <pool>-<index>: a DNS label with room for the suffix.
        if not is_dns_label(name) or len(name) > 50:
            errors.append("%s.name: %r is not a lower-case DNS label of at most 50 characters" % (at, name))
        elif name in names:
            errors.append("%s.name: %r is used by two pools; node names would collide" % (at, name))
        else:
            names.add(name)
        for field in ("count", "gpu_count"):
            value = pool.get(field)
            if not is_whole_number(value) or value < 1:
                errors.append("%s.%s: must be an integer >= 1, got %r" % (at, field, value))
        for field in ("gpu_memory_mib", "pods"):
            value = pool.get(field)
            if value is not None and (not is_whole_number(value) or value < 1):
                errors.append("%s.%s: must be an integer >= 1 when given, got %r" % (at, field, value))
        product = pool.get("gpu_product")
        if product not in GPU_MODELS:
            errors.append(
                "%s.gpu_product: %r is not a known GPU product; use one of %s"
                % (at, product, ", ".join(sorted(GPU_MODELS)))
            )
        for field in ("cpu", "memory"):
            value = pool.get(field)
            if not _is_quantity(value):
                errors.append("%s.%s: %r is not a Kubernetes quantity (for example 96 or 1Ti)" % (at, field, value))
        if "taints" in pool:
            errors.extend(node_taints.taint_errors(pool["taints"], at + ".taints"))
        if "unschedulable" in pool and not isinstance(pool["unschedulable"], bool):
            errors.append("%s.unschedulable: must be true or false, got %r" % (at, pool["unschedulable"]))
        if "gpu_sharing" in pool:
            errors.extend(_sharing_errors(pool["gpu_sharing"], at + ".gpu_sharing"))
    return errors


def _sharing_errors(sharing, at):
    if not isinstance(sharing, dict):
        return ["%s: give {strategy: time-slicing | mps, replicas: N}" % at]
    errors = unknown_field_errors(at, sharing, ("strategy", "replicas"))
    if sharing.get("strategy") not in SHARING_STRATEGIES:
        errors.append("%s.strategy: %r is not one of %s" % (at, sharing.get("strategy"), ", ".join(SHARING_STRATEGIES)))
    if not is_whole_number(sharing.get("replicas")) or sharing["replicas"] < 2:
        errors.append("%s.replicas: must be an integer >= 2 (1 is no sharing), got %r" % (at, sharing.get("replicas")))
    return errors


def node_pool_nodes(pools):
    """Expand valid pools into one dict per node: the pool's fields plus ``name`` (``<pool>-<index>``),
    ``pool`` (the pool name) and ``pods`` (default 110); ``cpu``, ``memory`` and ``pods`` as the canonical
    quantity strings the API server keeps in the node's status (a resource list: rounded up to milli units; a
    number of bytes as binary). Call ``node_pool_errors`` first."""
    nodes = []
    for pool in pools:
        for index in range(pool["count"]):
            node = dict(pool)
            node.update(name="%s-%d" % (pool["name"], index), pool=pool["name"],
                        pods=canonical_quantity(pool.get("pods", DEFAULT_PODS), milli=True),
                        cpu=canonical_quantity(pool["cpu"], milli=True),
                        memory=canonical_quantity(pool["memory"], binary=True, milli=True))
            nodes.append(node)
    return nodes


def _accelerators(node, mig_strategy, mig_config, mig_config_name):
    """``(GFD labels, {resource: count})`` of one expanded pool node, with MIG config ``mig_config_name`` of the
    mig-parted document ``mig_config`` applied (None: MIG disabled)."""
    product, count = node["gpu_product"], node["gpu_count"]
    layout = mig_layout.applied_layout(mig_config, mig_config_name, product, count) if mig_config else None
    labels = mig_layout.gfd_mig_labels(product, count, layout, mig_strategy)
    if node.get("gpu_memory_mib") and not layout:
        labels["nvidia.com/gpu.memory"] = str(node["gpu_memory_mib"])
    return labels, mig_layout.device_plugin_resources(product, count, layout, mig_strategy)


def pool_gpu_nodes(pools, mig_strategy="single", mig_config=None, mig_config_name=None):
    """The Node objects (API dicts: name, GFD labels, allocatable) that valid pools become once the GPU
    operator's feature discovery and device plugin (and, with ``mig_config``, its MIG manager) have run. What
    ``tenant_plan`` reads from a live cluster, for planning a cluster that is not reachable (rendering).
    Raises MigLayoutError for a MIG config that does not fit the pools' GPUs."""
    nodes = []
    for node in node_pool_nodes(pools):
        labels, resources = _accelerators(node, mig_strategy, mig_config, mig_config_name)
        # The embedded cluster's simulated nodes publish the same (simulated/node.py desired_node).
        labels, resources = apply_sharing(labels, resources, node.get("gpu_sharing"))
        allocatable = {"cpu": node["cpu"], "memory": node["memory"], "pods": node["pods"]}
        allocatable.update((name, canonical_quantity(count, milli=True)) for name, count in resources.items())
        nodes.append({"metadata": {"name": node["name"], "labels": labels}, "spec": node_spec(node),
                      "status": {"allocatable": allocatable}})
    return nodes


def node_spec(node):
    """The Node ``spec`` of an expanded pool node (``node_pool_nodes``): ``{"taints": [...], "unschedulable":
    true}`` as given, with the lifecycle controller's unschedulable taint on a cordoned node; {} for neither."""
    spec = {}
    taints = [dict(t) for t in node.get("taints") or []]
    if node.get("unschedulable"):
        spec["unschedulable"] = True
        taints.append({"key": UNSCHEDULABLE_TAINT, "effect": "NoSchedule"})
    if taints:
        spec["taints"] = taints
    return spec
