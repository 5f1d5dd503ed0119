# -*- coding: utf-8 -*-
# Copyright: fairgpu maintainers
# Apache License 2.0 (see LICENSE)
"""From the inventory's tenant list and the cluster's nodes to the objects to apply, or the errors that stop
the play before anything is applied. Pure logic, no cluster access: the caller passes the nodes it read."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.fairgpu.tenancy.plugins.module_utils.kueue import objects as kueue_objects
from ansible_collections.fairgpu.tenancy.plugins.module_utils.kueue import taints as node_taints
from ansible_collections.fairgpu.tenancy.plugins.module_utils.tenants import products as tenant_products
from ansible_collections.fairgpu.tenancy.plugins.module_utils.tenants import spec as tenant_spec
from ansible_collections.fairgpu.tenancy.plugins.module_utils.common.quantity import parse_quantity
from ansible_collections.fairgpu.tenancy.plugins.module_utils.common.names import (
    GPU_COUNT_LABEL,
    GPU_PRODUCT_LABEL,
    GPU_REPLICAS_LABEL,
    GPU_SHARING_STRATEGY_LABEL,
    KUEUE_API,
    LOCAL_QUEUE_SUFFIX,
    RBAC_API,
    SHARED_PRODUCT_SUFFIX,
)


# Pod slots of each GPU node kept for the node's own daemons (GPU Operator, DCGM exporter, CNI, kube-proxy ...),
# which run outside any tenant's quota.
DEFAULT_PODS_RESERVED_PER_NODE = 10


def cluster_capacity(nodes, pods_reserved_per_node=DEFAULT_PODS_RESERVED_PER_NODE):
    """Sum the allocatable resources of ``nodes`` (Node dicts as the API returns them).

    Returns ``{"resources": {accelerator resource: int}, "cpu": millicores (int), "memory": bytes (int),
    "pods": pod slots for tenants (int: allocatable pods less ``pods_reserved_per_node`` on each node),
    "per_node": {accelerator resource: the most devices one node offers}, "products": {gpu product:
    {accelerator resource: int}}, "schedulable": {accelerator resource: int}, "schedulable_products": {gpu product:
    {accelerator resource: int}}, "unavailable": [{"name", "reason", "product", "resources": {accelerator resource:
    int}}], "taints": {gpu product: [taint]}, "sharing": {shared gpu product:
    {"replicas": int > 1, "strategy": "time-slicing" | "mps"}}, "sharing_errors": [str], "per_gpu": {"cpu":
    millicores, "memory": bytes} or None}``. ``per_gpu``: the least CPU and memory a GPU node has per
    physical GPU it has (GFD's ``nvidia.com/gpu.count``, else its devices): a pod's share of its node per device it
    asks for (``kueue/admission.py`` ``share_rules``; per GPU, not per MIG slice or replica, so that a one-slice
    pod still gets a GPU's worth). Only nodes with a
    ``nvidia.com/gpu.product`` label count (CPU, memory and pods of other nodes are not for GPU tenants).

    ``resources`` and the other totals count every GPU node, the installed capacity: quotas are planned on it, so
    a drain neither fails the next run nor rewrites the tenants' objects. ``schedulable`` leaves out the cordoned
    and NotReady nodes (``taints.unavailable_reason``), which ``unavailable`` names; ``tenant_plan`` warns when the
    guarantees exceed it. ``taints``: the taints common to each product's schedulable nodes (all its nodes when
    none is schedulable), without the ``node.kubernetes.io/`` lifecycle ones (``taints.common_taints``).
    """
    totals, products, per_node, schedulable, by_product, sharing, schedulable_products = {}, {}, {}, {}, {}, {}, {}
    unavailable = []
    cpu = memory = pods = 0
    per_gpu = None
    for node in nodes:
        labels = (node.get("metadata") or {}).get("labels") or {}
        product = labels.get(GPU_PRODUCT_LABEL)
        if not product:
            continue
        reason = node_taints.unavailable_reason(node)
        by_product.setdefault(product, []).append((node, reason))
        replicas = _replicas(labels)
        sharing.setdefault(product, {}).setdefault(
            (replicas, labels.get(GPU_SHARING_STRATEGY_LABEL) or "none" if replicas > 1 else "none"), []).append(
            (node.get("metadata") or {}).get("name"))
        allocatable = (node.get("status") or {}).get("allocatable") or {}
        devices = {}
        for name, value in allocatable.items():
            if tenant_spec.is_accelerator_resource(name):
                count = int(parse_quantity(value))
                if count:
                    devices[name] = count
                    totals[name] = totals.get(name, 0) + count
                    per_node[name] = max(per_node.get(name, 0), count)
                    per = products.setdefault(product, {})
                    per[name] = per.get(name, 0) + count
                    if reason is None:
                        schedulable[name] = schedulable.get(name, 0) + count
                        ready = schedulable_products.setdefault(product, {})
                        ready[name] = ready.get(name, 0) + count
        if reason is not None:
            unavailable.append({"name": (node.get("metadata") or {}).get("name"), "reason": reason,
                                "product": product, "resources": devices})
        node_cpu, node_memory = int(parse_quantity(allocatable.get("cpu", 0)) * 1000), int(
            parse_quantity(allocatable.get("memory", 0)))
        if devices:
            try:
                gpus = max(1, int(labels.get(GPU_COUNT_LABEL) or sum(devices.values())))
            except ValueError:
                gpus = sum(devices.values())
            share = {"cpu": node_cpu // gpus, "memory": node_memory // gpus}
            per_gpu = share if per_gpu is None else {k: min(per_gpu[k], share[k]) for k in share}
        cpu += node_cpu
        memory += node_memory
        pods += max(0, int(parse_quantity(allocatable.get("pods", 0))) - pods_reserved_per_node)
    taints = {}
    for product, entries in by_product.items():
        ready = [n for n, reason in entries if reason is None]
        taints[product] = node_taints.common_taints(ready or [n for n, _reason in entries])
    shared, conflicts = {}, []
    for product, kinds in sorted(sharing.items()):
        if len(kinds) > 1:
            conflicts.append(
                "GPU nodes of product %s are shared differently (%s); fairgpu gives a product one ResourceFlavor: "
                "give them one sharing config, or let GFD name the shared ones %s%s (the device plugin's default, "
                "renameByDefault false)" % (product, "; ".join(
                    "%s x%d on %s" % (strategy, replicas, ", ".join(sorted(map(str, names))))
                    for (replicas, strategy), names in sorted(kinds.items())), product, SHARED_PRODUCT_SUFFIX))
        (replicas, strategy), = list(kinds)[:1]
        if replicas > 1:
            shared[product] = {"replicas": replicas, "strategy": strategy}
    return {"resources": totals, "cpu": cpu, "memory": memory, "pods": pods, "per_node": per_node,
            "per_gpu": per_gpu,
            "products": products, "schedulable": schedulable, "schedulable_products": schedulable_products,
            "unavailable": sorted(unavailable, key=lambda u: str(u["name"])), "taints": taints,
            "sharing": shared, "sharing_errors": conflicts}


def _replicas(labels):
    """The device plugin's replicas of a node's GPUs (GFD label nvidia.com/gpu.replicas; 0, 1 or absent: not shared,
    as on the captured H100 node, tests/unit/fixtures/h100-mixed-all-balanced.json, which says 0)."""
    try:
        return max(1, int(labels.get(GPU_REPLICAS_LABEL) or 1))
    except (TypeError, ValueError):
        return 1


def guarantees_by_product(tenants):
    """``{(gpu product, accelerator resource): devices}`` the normalised ``tenants`` are guaranteed (their
    ``products`` entries, as Kueue counts them)."""
    guaranteed = {}
    for tenant in tenants:
        for entry in tenant.get("products") or []:
            key = (entry["product"], tenant["gpu_resource"])
            guaranteed[key] = guaranteed.get(key, 0) + entry["gpus"]
    return guaranteed


def not_counted(capacity, product, resource):
    """The cordoned or NotReady nodes of ``product`` that offer ``resource``, as ``"<node> (<reason>)"``
    (``cluster_capacity`` output)."""
    return ["%s (%s)" % (u["name"], u["reason"]) for u in capacity.get("unavailable") or []
            if u["product"] == product and u["resources"].get(resource)]


def capacity_warnings(tenants, capacity):
    """Warnings (strings) for each GPU product and accelerator resource whose guarantees (the ``products`` entries
    of the normalised ``tenants``) exceed what that product's schedulable nodes offer, naming the nodes left out:
    Kueue admits up to the guarantees, and the pods of what the nodes cannot hold stay Pending while holding the
    tenant's quota. Per product, since a flavor's quota is only good on its own product's nodes."""
    warnings = []
    for (product, resource), guaranteed in sorted(guarantees_by_product(tenants).items()):
        offered = (capacity["schedulable_products"].get(product) or {}).get(resource, 0)
        if guaranteed > offered:
            left_out = not_counted(capacity, product, resource)
            warnings.append(
                "%s on %s: the tenants are guaranteed %d but the schedulable nodes offer %d of the %d installed; "
                "not counted: %s. Kueue admits up to the guarantees and pods beyond what the nodes hold stay Pending "
                "until the nodes return (uncordon them or lower the guarantees)"
                % (resource, product, guaranteed, offered, (capacity["products"].get(product) or {}).get(resource, 0),
                   ", ".join(left_out) or "none"))
    return warnings


def capacity_totals(capacity):
    """``cluster_capacity`` output in the flat shape ``tenant_spec.tenant_errors`` and ``normalise`` take."""
    return dict(capacity["resources"], cpu=capacity["cpu"], memory=capacity["memory"], pods=capacity["pods"],
                per_node=capacity["per_node"])


def tenant_plan(tenants, nodes, cohort="fairgpu", preemption=None, queueing_strategy="BestEffortFIFO",
                limit_range=None, local_queue_suffix=LOCAL_QUEUE_SUFFIX, priority_classes=None, isolation=None,
                gpu_flavors=None, multikueue="none"):
    """Validate ``tenants`` against the cluster's ``nodes`` and build their objects.

    ``nodes``: the GPU Node objects (API dicts), or None when they are not known yet (site.yml's pre-check of a
    cluster it has not reached): then the spec alone is checked, without capacity, and no objects are built.

    ``priority_classes``: the platform's WorkloadPriorityClasses ``[{"name", "value", "description"}]``
    (None: none). ``isolation``: the namespace policy (``kueue_objects.DEFAULT_ISOLATION`` and its keys;
    ``pods_reserved_per_node`` and ``max_jobs`` are used here). ``gpu_flavors``: the inventory's ResourceFlavor
    settings per GPU product (``taints.flavor_settings_errors``; None: the taints common to each product's
    schedulable nodes, tolerated). The other arguments are those of ``kueue_objects.tenant_objects``.
    Returns ``{"errors": [str], "warnings": [str], "tenants": [normalised tenant], "objects": [manifest],
    "capacity": {...}, "accelerators": every accelerator resource of the nodes, allotted to which tenants and closed
    (ResourceQuota 0) to which (``kueue_objects.accelerator_allotment``), "local_queue_suffix": str,
    "priority_classes": [...], "isolation": the namespace policy in force}``; when ``errors`` is not empty,
    ``tenants`` and ``objects`` are empty. ``warnings`` name what does not stop the run: guarantees above the
    schedulable nodes (``capacity_warnings``), flavor settings for products no node has. Never raises on bad
    tenant input.
    """
    priority_classes = [] if priority_classes is None else priority_classes
    plan = {"errors": kueue_objects.isolation_errors(isolation) + node_taints.flavor_settings_errors(gpu_flavors),
            "warnings": [], "tenants": [], "objects": [], "capacity": None, "accelerators": [],
            "local_queue_suffix": local_queue_suffix, "priority_classes": priority_classes, "isolation": None}
    if plan["errors"]:
        return plan
    isolation = plan["isolation"] = kueue_objects.isolation_policy(isolation)
    limit_range = kueue_objects.DEFAULT_CONTAINER_RESOURCES if limit_range is None else limit_range
    tenants_given = tenants
    capacity = None if nodes is None else cluster_capacity(nodes, isolation["pods_reserved_per_node"])
    # Several GPU products: each tenant's products are checked, then the tenant-level checks see its totals.
    plan["errors"] = tenant_products.product_errors(tenants, None if capacity is None else capacity["products"])
    if plan["errors"]:
        return plan
    raw = tenants
    if capacity is not None:
        plan["errors"] = list(capacity["sharing_errors"])
        if isinstance(tenants, list):
            converted = [tenant_products.kueue_units(t, capacity["sharing"], capacity["products"]) for t in tenants]
            plan["errors"] += [error for _t, error in converted if error]
            raw = [t for t, _error in converted]
        if plan["errors"]:
            return plan
    elif isinstance(tenants, list):
        raw = [{k: v for k, v in t.items() if k != "gpu_units"} if isinstance(t, dict) else t for t in tenants]
    tenants = [tenant_products.flatten(t) for t in raw] if isinstance(raw, list) else raw
    if nodes is None:
        plan["errors"] = tenant_spec.tenant_errors(tenants, capacity=None, cohort=cohort, preemption=preemption,
                                                   limit_range=limit_range, priority_classes=priority_classes)
        return plan
    plan["capacity"] = capacity
    totals = capacity_totals(capacity)
    errors = tenant_spec.tenant_errors(tenants, capacity=totals, cohort=cohort, preemption=preemption,
                                       limit_range=limit_range, priority_classes=priority_classes)
    if errors:
        plan["errors"] = errors
        return plan
    normalised = tenant_spec.normalise(tenants, totals, [c["name"] for c in priority_classes],
                                       max_jobs=isolation["max_jobs"])
    for tenant, given, entry in zip(raw, tenants_given, normalised):
        entry["products"] = tenant_products.product_quotas(tenant, entry)
        entry["gpu_units"] = given.get("gpu_units", "physical") if isinstance(given, dict) else "physical"
    flavors = kueue_objects.gpu_flavors(capacity["products"], capacity["taints"], gpu_flavors, capacity["sharing"])
    plan["warnings"] = ["tenants_gpu_flavors[%s]: no GPU node has this product; the setting is not used" % product
                        for product in sorted(gpu_flavors or {}) if product not in capacity["products"]]
    errors = kueue_objects.flavor_errors(normalised, flavors)
    if not errors:
        errors = tenant_products.guarantee_errors(kueue_objects.assign_products(normalised, flavors),
                                                  capacity["products"])
    if errors:
        plan["errors"] = errors
        return plan
    objects = kueue_objects.tenant_objects(
        normalised, flavors, cohort=cohort, preemption=preemption, queueing_strategy=queueing_strategy,
        local_queue_suffix=local_queue_suffix, limit_range=limit_range, priority_classes=priority_classes,
        isolation=isolation, per_gpu=capacity["per_gpu"], multikueue=multikueue,
    )
    plan["errors"] = kueue_objects.object_errors(objects)
    if not plan["errors"]:
        plan["tenants"], plan["objects"] = normalised, objects
        plan["accelerators"] = kueue_objects.accelerator_allotment(normalised, flavors)
        plan["warnings"] += capacity_warnings(normalised, capacity)
    return plan


# The namespaced kinds fairgpu applies in each tenant namespace, which pruning a tenant removes with its ClusterQueue
# (``(apiVersion, kind)``; kueue/objects.py builds them).
PRUNED_KINDS = [(KUEUE_API, "LocalQueue"), ("v1", "ResourceQuota"), ("v1", "LimitRange"), (RBAC_API, "RoleBinding"),
                (RBAC_API, "Role")]


def stale_tenants(cluster_queues, wanted):
    """The names of fairgpu's ``cluster_queues`` (ClusterQueue dicts) that are no tenant in ``wanted``, sorted."""
    return sorted(set(q["metadata"]["name"] for q in cluster_queues) - set(wanted))


def stale_message(stale):
    """Why a run stops on tenants that left the inventory while pruning is off, and the two ways out."""
    return ("Tenant(s) %s are on the cluster but not in tenants_list; their ClusterQueues still hold quota in the "
            "cohort. Put them back in tenants_list, or set tenants_prune: true to remove their ClusterQueues, "
            "LocalQueues, quotas and RBAC (their namespaces and workloads are kept)." % ", ".join(stale))


def _active(queue):
    return any(c.get("type") == "Active" and c.get("status") == "True"
               for c in (queue.get("status") or {}).get("conditions") or [])


def inactive_queues(cluster_queues, names):
    """The tenants of ``names`` whose ClusterQueue is missing from ``cluster_queues`` or not ``Active``."""
    active = set(q["metadata"]["name"] for q in cluster_queues if _active(q))
    return sorted(set(names) - active)


def queue_conditions(cluster_queues, names):
    """``"<name>: <reason> <message>"`` of the Active condition of each ClusterQueue of ``names`` that is not
    Active (``"<name>: not found"`` when missing), for a failure message."""
    found = dict((q["metadata"]["name"], q) for q in cluster_queues)
    lines = []
    for name in inactive_queues(cluster_queues, names):
        queue = found.get(name)
        condition = next((c for c in ((queue or {}).get("status") or {}).get("conditions") or []
                          if c.get("type") == "Active"), None)
        said = "%s %s" % ((condition or {}).get("reason", "no Active condition"), (condition or {}).get("message", ""))
        lines.append("%s: %s" % (name, "not found" if queue is None else said.strip()))
    return lines
