# -*- coding: utf-8 -*-
# Copyright: fairgpu maintainers
# Apache License 2.0 (see LICENSE)
"""From the inventory's tenant list and the cluster's nodes to the objects to apply, or the errors that stop
the play before anything is applied. Pure logic, no cluster access: the caller passes the nodes it read."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.fairgpu.tenancy.plugins.module_utils.kueue import objects as kueue_objects
from ansible_collections.fairgpu.tenancy.plugins.module_utils.tenants import spec as tenant_spec
from ansible_collections.fairgpu.tenancy.plugins.module_utils.common.quantity import parse_quantity
from ansible_collections.fairgpu.tenancy.plugins.module_utils.common.names import GPU_PRODUCT_LABEL, LOCAL_QUEUE_SUFFIX


# Pod slots of each GPU node kept for the node's own daemons (GPU Operator, DCGM exporter, CNI, kube-proxy ...),
# which run outside any tenant's quota.
DEFAULT_PODS_RESERVED_PER_NODE = 10


def cluster_capacity(nodes, pods_reserved_per_node=DEFAULT_PODS_RESERVED_PER_NODE):
    """Sum the allocatable resources of ``nodes`` (Node dicts as the API returns them).

    Returns ``{"resources": {accelerator resource: int}, "cpu": millicores (int), "memory": bytes (int),
    "pods": pod slots for tenants (int: allocatable pods less ``pods_reserved_per_node`` on each node),
    "per_node": {accelerator resource: the most devices one node offers}, "products": {gpu product:
    {accelerator resource: int}}}``. Only nodes with a ``nvidia.com/gpu.product`` label count (CPU, memory and
    pods of other nodes are not for GPU tenants).
    """
    totals, products, per_node = {}, {}, {}
    cpu = memory = pods = 0
    for node in nodes:
        labels = (node.get("metadata") or {}).get("labels") or {}
        product = labels.get(GPU_PRODUCT_LABEL)
        if not product:
            continue
        allocatable = (node.get("status") or {}).get("allocatable") or {}
        for name, value in allocatable.items():
            if tenant_spec.is_accelerator_resource(name):
                count = int(parse_quantity(value))
                if count:
                    totals[name] = totals.get(name, 0) + count
                    per_node[name] = max(per_node.get(name, 0), count)
                    per = products.setdefault(product, {})
                    per[name] = per.get(name, 0) + count
        cpu += int(parse_quantity(allocatable.get("cpu", 0)) * 1000)
        memory += int(parse_quantity(allocatable.get("memory", 0)))
        pods += max(0, int(parse_quantity(allocatable.get("pods", 0))) - pods_reserved_per_node)
    return {"resources": totals, "cpu": cpu, "memory": memory, "pods": pods, "per_node": per_node,
            "products": products}


def capacity_totals(capacity):
    """``cluster_capacity`` output in the flat shape ``tenant_spec.tenant_errors`` and ``normalise`` take."""
    return dict(capacity["resources"], cpu=capacity["cpu"], memory=capacity["memory"], pods=capacity["pods"],
                per_node=capacity["per_node"])


def tenant_plan(tenants, nodes, cohort="fairgpu", preemption=None, queueing_strategy="BestEffortFIFO",
                limit_range=None, local_queue_suffix=LOCAL_QUEUE_SUFFIX, priority_classes=None, isolation=None):
    """Validate ``tenants`` against the cluster's ``nodes`` and build their objects.

    ``nodes``: the GPU Node objects (API dicts), or None when they are not known yet (site.yml's pre-check of a
    cluster it has not reached): then the spec alone is checked, without capacity, and no objects are built.

    ``priority_classes``: the platform's WorkloadPriorityClasses ``[{"name", "value", "description"}]``
    (None: none). ``isolation``: the namespace policy (``kueue_objects.DEFAULT_ISOLATION`` and its keys;
    ``pods_reserved_per_node`` and ``max_jobs`` are used here). The other arguments are those of
    ``kueue_objects.tenant_objects``.
    Returns ``{"errors": [str], "tenants": [normalised tenant], "objects": [manifest], "capacity": {...},
    "local_queue_suffix": str, "priority_classes": [...], "isolation": the namespace policy in force}``; when ``errors`` is not empty, ``tenants`` and
    ``objects`` are empty. Never raises on bad tenant input.
    """
    priority_classes = [] if priority_classes is None else priority_classes
    plan = {"errors": kueue_objects.isolation_errors(isolation), "tenants": [], "objects": [], "capacity": None,
            "local_queue_suffix": local_queue_suffix, "priority_classes": priority_classes, "isolation": None}
    if plan["errors"]:
        return plan
    isolation = plan["isolation"] = kueue_objects.isolation_policy(isolation)
    limit_range = kueue_objects.DEFAULT_CONTAINER_RESOURCES if limit_range is None else limit_range
    if nodes is None:
        plan["errors"] = tenant_spec.tenant_errors(tenants, capacity=None, cohort=cohort, preemption=preemption,
                                                   limit_range=limit_range, priority_classes=priority_classes)
        return plan
    capacity = plan["capacity"] = cluster_capacity(nodes, isolation["pods_reserved_per_node"])
    totals = capacity_totals(capacity)
    errors = tenant_spec.tenant_errors(tenants, capacity=totals, cohort=cohort, preemption=preemption,
                                       limit_range=limit_range, priority_classes=priority_classes)
    if errors:
        plan["errors"] = errors
        return plan
    normalised = tenant_spec.normalise(tenants, totals, [c["name"] for c in priority_classes],
                                       max_jobs=isolation["max_jobs"])
    flavors = kueue_objects.gpu_flavors(capacity["products"])
    errors = kueue_objects.flavor_errors(normalised, flavors)
    if errors:
        plan["errors"] = errors
        return plan
    objects = kueue_objects.tenant_objects(
        normalised, flavors, cohort=cohort, preemption=preemption, queueing_strategy=queueing_strategy,
        local_queue_suffix=local_queue_suffix, limit_range=limit_range, priority_classes=priority_classes,
        isolation=isolation,
    )
    plan["errors"] = kueue_objects.object_errors(objects)
    if not plan["errors"]:
        plan["tenants"], plan["objects"] = normalised, objects
    return plan
