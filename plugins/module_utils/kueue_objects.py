# -*- coding: utf-8 -*-
# Copyright: fairgpu maintainers
# Apache License 2.0 (see LICENSE)
"""The one place where fairgpu builds the Kubernetes and Kueue objects of its tenants.

Pure logic, no cluster access. The ``tenants`` role applies what ``tenant_objects`` returns; anything that
renders manifests uses the same function, so both give the same objects.

API versions follow upstream: Kueue ``kueue.x-k8s.io/v1beta2`` (ClusterQueue ``spec.cohortName``, Cohort,
ResourceFlavor ``spec.nodeLabels``, LocalQueue ``spec.clusterQueue``), Kubernetes ``v1`` and
``rbac.authorization.k8s.io/v1``.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

KUEUE_API = "kueue.x-k8s.io/v1beta2"
TENANT_LABEL = "fairgpu.io/tenant"
MANAGED_BY = {"app.kubernetes.io/managed-by": "fairgpu"}
PRODUCT_LABEL = "nvidia.com/gpu.product"


def flavor_name(product):
    """ResourceFlavor name for a ``nvidia.com/gpu.product`` value: lower case, other characters as '-'."""
    return re.sub(r"[^a-z0-9-]+", "-", product.lower()).strip("-")


def gpu_flavors(nodes_by_product):
    """ResourceFlavors for the GPU products present: ``{product: {resource: count}}`` -> list of dicts
    ``{"name", "product", "resources": {resource: total count}}`` sorted by name."""
    return [
        {"name": flavor_name(product), "product": product, "resources": dict(sorted(resources.items()))}
        for product, resources in sorted(nodes_by_product.items())
    ]


def flavor_errors(tenants, flavors):
    """Each tenant's accelerator resource must be offered by exactly one flavor (one GPU product).
    Returns error strings naming the tenant."""
    errors = []
    for tenant in tenants:
        offering = [f["name"] for f in flavors if tenant["gpu_resource"] in f["resources"]]
        if not offering:
            errors.append(
                "tenants_list (%s).gpu_resource: no node offers %s; the nodes offer %s"
                % (tenant["name"], tenant["gpu_resource"],
                   ", ".join(sorted({r for f in flavors for r in f["resources"]})) or "no accelerators")
            )
        elif len(offering) > 1:
            errors.append(
                "tenants_list (%s).gpu_resource: %s is offered by several GPU products (%s); fairgpu gives a "
                "tenant one ResourceFlavor, so give each product its own tenants or use one product"
                % (tenant["name"], tenant["gpu_resource"], ", ".join(offering))
            )
    return errors


def _labels(tenant=None):
    labels = dict(MANAGED_BY)
    if tenant:
        labels[TENANT_LABEL] = tenant
    return labels


def _quantity(value):
    return str(value)


def cluster_queue(tenant, flavor, cohort, preemption, queueing_strategy):
    gpu = {"name": tenant["gpu_resource"], "nominalQuota": _quantity(tenant["gpus"])}
    if cohort and tenant["borrowing_limit"] is not None:
        gpu["borrowingLimit"] = _quantity(tenant["borrowing_limit"])
    if cohort and tenant["lending_limit"] is not None:
        gpu["lendingLimit"] = _quantity(tenant["lending_limit"])
    spec = {
        "namespaceSelector": {"matchLabels": {TENANT_LABEL: tenant["name"]}},
        "queueingStrategy": queueing_strategy,
        "preemption": dict(preemption),
        "fairSharing": {"weight": _quantity(tenant["weight"])},
        "resourceGroups": [{
            "coveredResources": ["cpu", "memory", tenant["gpu_resource"]],
            "flavors": [{
                "name": flavor["name"],
                "resources": [
                    {"name": "cpu", "nominalQuota": tenant["cpu"]},
                    {"name": "memory", "nominalQuota": tenant["memory"]},
                    gpu,
                ],
            }],
        }],
    }
    if cohort:
        spec["cohortName"] = cohort
    return {"apiVersion": KUEUE_API, "kind": "ClusterQueue",
            "metadata": {"name": tenant["name"], "labels": _labels(tenant["name"])}, "spec": spec}


def tenant_role(namespace, tenant):
    """Namespaced Role of a tenant's users: run and watch Jobs, read their pods, logs, events, LocalQueues and
    Workloads. Nothing cluster-wide, no Secrets, no quota or RBAC objects, no Workload writes, and no
    update/patch of Jobs (so a tenant cannot lift Kueue's suspension of its own Job)."""
    read = ["get", "list", "watch"]
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
        "metadata": {"name": "fairgpu-tenant", "namespace": namespace, "labels": _labels(tenant["name"])},
        "rules": [
            {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": read + ["create", "delete"]},
            {"apiGroups": [""], "resources": ["pods", "pods/log", "events"], "verbs": read},
            {"apiGroups": ["events.k8s.io"], "resources": ["events"], "verbs": read},
            {"apiGroups": ["kueue.x-k8s.io"], "resources": ["localqueues", "workloads"], "verbs": read},
            {"apiGroups": [""], "resources": ["resourcequotas", "limitranges"], "verbs": read},
        ],
    }


def namespace_objects(namespace, tenant, local_queue_name, limit_range):
    gpu = tenant["gpu_resource"]
    labels = _labels(tenant["name"])
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace, "labels": labels}},
        {"apiVersion": KUEUE_API, "kind": "LocalQueue",
         "metadata": {"name": local_queue_name, "namespace": namespace, "labels": labels},
         "spec": {"clusterQueue": tenant["name"]}},
        # Kueue's LocalQueueDefaulting: a Job without the queue-name label goes to the LocalQueue "default".
        {"apiVersion": KUEUE_API, "kind": "LocalQueue",
         "metadata": {"name": "default", "namespace": namespace, "labels": labels},
         "spec": {"clusterQueue": tenant["name"]}},
        # Only the requests. form is enforced for an extended resource.
        {"apiVersion": "v1", "kind": "ResourceQuota",
         "metadata": {"name": "fairgpu-gpu-quota", "namespace": namespace, "labels": labels},
         "spec": {"hard": {"requests." + gpu: _quantity(tenant["max_gpus"])}}},
        {"apiVersion": "v1", "kind": "LimitRange",
         "metadata": {"name": "fairgpu-defaults", "namespace": namespace, "labels": labels},
         "spec": {"limits": [{
             "type": "Container",
             "defaultRequest": {"cpu": limit_range["cpu"], "memory": limit_range["memory"]},
             "default": {"cpu": limit_range["cpu"], "memory": limit_range["memory"]},
             "max": {gpu: _quantity(tenant["max_gpus"])},
         }]}},
        tenant_role(namespace, tenant),
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
         "metadata": {"name": "fairgpu-tenant", "namespace": namespace, "labels": labels},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "fairgpu-tenant"},
         "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": group}
                      for group in tenant["groups"]]},
    ]


def tenant_objects(tenants, flavors, cohort="fairgpu", preemption=None, queueing_strategy="BestEffortFIFO",
                   local_queue_suffix="-queue", limit_range=None):
    """Every object of the tenants, in apply order (cluster-scoped first).

    ``tenants``: normalised tenants (``tenant_spec.normalise``); ``flavors``: ``gpu_flavors`` output;
    ``preemption``: ClusterQueue ``spec.preemption`` (default: reclaim within cohort from any borrower,
    preempt lower priority within the queue); ``limit_range``: default container request/limit
    ``{"cpu", "memory"}``. Returns a list of manifest dicts.
    """
    if preemption is None:
        preemption = {"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority"}
    if limit_range is None:
        limit_range = {"cpu": "1", "memory": "4Gi"}
    used = {f["name"]: f for f in flavors for t in tenants if t["gpu_resource"] in f["resources"]}
    objects = []
    if cohort:
        objects.append({"apiVersion": KUEUE_API, "kind": "Cohort",
                        "metadata": {"name": cohort, "labels": _labels()}, "spec": {}})
    for name in sorted(used):
        objects.append({"apiVersion": KUEUE_API, "kind": "ResourceFlavor",
                        "metadata": {"name": name, "labels": _labels()},
                        "spec": {"nodeLabels": {PRODUCT_LABEL: used[name]["product"]}}})
    for tenant in tenants:
        flavor = next(f for f in flavors if tenant["gpu_resource"] in f["resources"])
        objects.append(cluster_queue(tenant, flavor, cohort, preemption, queueing_strategy))
    for tenant in tenants:
        for namespace in tenant["namespaces"]:
            objects.extend(namespace_objects(namespace, tenant, tenant["name"] + local_queue_suffix, limit_range))
    return objects
