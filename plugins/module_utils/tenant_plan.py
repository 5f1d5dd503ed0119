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
                limit_range=None, local_queue_suffix="-queue"):
    """Validate ``tenants`` against the cluster's ``nodes`` and build their objects.

    Returns ``{"errors": [str], "tenants": [normalised tenant], "objects": [manifest], "capacity": {...}}``;
    when ``errors`` is not empty, ``tenants`` and ``objects`` are empty. Never raises on bad tenant input.
    """
    capacity = cluster_capacity(nodes)
    plan = {"errors": [], "tenants": [], "objects": [], "capacity": capacity}
    errors = tenant_spec.tenant_errors(
        tenants, capacity=dict(capacity["resources"], cpu=capacity["cpu"], memory=capacity["memory"]),
        cohort=cohort, preemption=preemption)
    if errors:
        plan["errors"] = errors
        return plan
    capacity_for_defaults = dict(capacity["resources"], cpu=capacity["cpu"] / 1000.0, memory=capacity["memory"])
    normalised = tenant_spec.normalise(tenants, capacity_for_defaults)
    flavors = kueue_objects.gpu_flavors(capacity["products"])
    errors = kueue_objects.flavor_errors(normalised, flavors)
    if errors:
        plan["errors"] = errors
        return plan
    plan["tenants"] = normalised
    plan["objects"] = kueue_objects.tenant_objects(
        normalised, flavors, cohort=cohort, preemption=preemption, queueing_strategy=queueing_strategy,
        local_queue_suffix=local_queue_suffix, limit_range=limit_range,
    )
    return plan
