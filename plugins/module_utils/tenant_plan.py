# -*- coding: utf-8 -*-
# Copyright: fairgpu maintainers
# Apache License 2.0 (see LICENSE)
"""From the inventory's tenant list and the cluster's nodes to the objects to apply, or the errors that stop
the play before anything is applied. Pure logic, no cluster access: the caller passes the nodes it read."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.fairgpu.tenancy.plugins.module_utils import kueue_objects, tenant_spec
from ansible_collections.fairgpu.tenancy.plugins.module_utils.quantity import parse_quantity


def cluster_capacity(nodes):
    """Sum the allocatable resources of ``nodes`` (Node dicts as the API returns them).

    Returns ``{"resources": {accelerator resource: int}, "cpu": millicores (int), "memory": bytes (int),
    "products": {gpu product: {accelerator resource: int}}}``. Only nodes with a ``nvidia.com/gpu.product``
    label count (CPU and memory of other nodes are not for GPU tenants).
    """
    totals, products = {}, {}
    cpu = memory = 0
    for node in nodes:
        labels = (node.get("metadata") or {}).get("labels") or {}
        product = labels.get(kueue_objects.PRODUCT_LABEL)
        if not product:
            continue
        allocatable = (node.get("status") or {}).get("allocatable") or {}
        for name, value in allocatable.items():
            if tenant_spec.is_accelerator_resource(name):
                count = int(parse_quantity(value))
                if count:
                    totals[name] = totals.get(name, 0) + count
                    per = products.setdefault(product, {})
                    per[name] = per.get(name, 0) + count
        cpu += int(parse_quantity(allocatable.get("cpu", 0)) * 1000)
        memory += int(parse_quantity(allocatable.get("memory", 0)))
    return {"resources": totals, "cpu": cpu, "memory": memory, "products": products}


def tenant_plan(tenants, nodes, cohort="fairgpu", preemption=None, queueing_strategy="BestEffortFIFO",
                limit_range=None, local_queue_suffix="-queue", priority_classes=None):
    """Validate ``tenants`` against the cluster's ``nodes`` and build their objects.

    ``priority_classes``: the platform's WorkloadPriorityClasses ``[{"name", "value", "description"}]``
    (None: none). The other arguments are those of ``kueue_objects.tenant_objects``.
    Returns ``{"errors": [str], "tenants": [normalised tenant], "objects": [manifest], "capacity": {...},
    "local_queue_suffix": str, "priority_classes": [...]}``; when ``errors`` is not empty, ``tenants`` and
    ``objects`` are empty. Never raises on bad tenant input.
    """
    capacity = cluster_capacity(nodes)
    priority_classes = [] if priority_classes is None else priority_classes
    plan = {"errors": [], "tenants": [], "objects": [], "capacity": capacity, "local_queue_suffix": local_queue_suffix,
            "priority_classes": priority_classes}
    limit_range = kueue_objects.DEFAULT_CONTAINER_RESOURCES if limit_range is None else limit_range
    totals = dict(capacity["resources"], cpu=capacity["cpu"], memory=capacity["memory"])
    errors = tenant_spec.tenant_errors(tenants, capacity=totals, cohort=cohort, preemption=preemption,
                                       limit_range=limit_range, priority_classes=priority_classes)
    if errors:
        plan["errors"] = errors
        return plan
    normalised = tenant_spec.normalise(tenants, totals, [c["name"] for c in priority_classes])
    flavors = kueue_objects.gpu_flavors(capacity["products"])
    errors = kueue_objects.flavor_errors(normalised, flavors)
    if errors:
        plan["errors"] = errors
        return plan
    objects = kueue_objects.tenant_objects(
        normalised, flavors, cohort=cohort, preemption=preemption, queueing_strategy=queueing_strategy,
        local_queue_suffix=local_queue_suffix, limit_range=limit_range, priority_classes=priority_classes,
    )
    plan["errors"] = kueue_objects.object_errors(objects)
    if not plan["errors"]:
        plan["tenants"], plan["objects"] = normalised, objects
    return plan
