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
ADMISSION_API = "admissionregistration.k8s.io/v1"
TENANT_LABEL = "fairgpu.io/tenant"
# Namespace annotation: the WorkloadPriorityClasses the tenant's Jobs may name (comma-separated), read by the
# fairgpu-tenant-jobs ValidatingAdmissionPolicy.
PRIORITY_CLASSES_ANNOTATION = "fairgpu.io/workload-priority-classes"
PRIORITY_CLASS_LABEL = "kueue.x-k8s.io/priority-class"
MANAGED_BY = {"app.kubernetes.io/managed-by": "fairgpu"}
PRODUCT_LABEL = "nvidia.com/gpu.product"
# One container's default request and limit in tenant namespaces (LimitRange), unless the caller gives one.
DEFAULT_CONTAINER_RESOURCES = {"cpu": "1", "memory": "4Gi"}


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
    hard = dict(tenant["resource_quota"])
    hard["requests." + gpu] = _quantity(tenant["max_gpus"])
    return [
        {"apiVersion": "v1", "kind": "Namespace",
         "metadata": {"name": namespace, "labels": labels,
                      "annotations": {PRIORITY_CLASSES_ANNOTATION: ",".join(tenant["priority_classes"])}}},
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
         "spec": {"hard": {key: _quantity(value) for key, value in sorted(hard.items())}}},
        {"apiVersion": "v1", "kind": "LimitRange",
         "metadata": {"name": "fairgpu-defaults", "namespace": namespace, "labels": labels},
         "spec": {"limits": [{
             "type": "Container",
             # An explicit 0: with only a max, the API server would default every container to the max.
             "defaultRequest": {"cpu": limit_range["cpu"], "memory": limit_range["memory"], gpu: "0"},
             "default": {"cpu": limit_range["cpu"], "memory": limit_range["memory"], gpu: "0"},
             "max": {gpu: _quantity(tenant["max_gpus"])},
         }]}},
        tenant_role(namespace, tenant),
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
         "metadata": {"name": "fairgpu-tenant", "namespace": namespace, "labels": labels},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "fairgpu-tenant"},
         "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": group}
                      for group in tenant["groups"]]},
    ]


def object_errors(objects):
    """The last check before anything is applied, on the built objects themselves: a ClusterQueue's
    ``namespaceSelector`` must select by labels (Kueue reads null as no namespace and ``{}`` as every namespace,
    so a tenant's quota would serve nobody or everybody). Returns messages naming the object."""
    errors = []
    for obj in objects:
        if obj.get("kind") == "ClusterQueue":
            selector = (obj.get("spec") or {}).get("namespaceSelector")
            if not isinstance(selector, dict) or not (selector.get("matchLabels") or selector.get("matchExpressions")):
                errors.append("ClusterQueue %s: namespaceSelector %s would admit workloads from %s; it must select "
                              "the tenant's namespaces by label" % (obj["metadata"]["name"], "null" if selector is None else selector,
                                                                    "no namespace" if selector is None else "every namespace"))
    return errors


# A container asks for an accelerator when it requests or limits more than 0 of one (the LimitRange gives every
# container an explicit 0).
_ASKS = ("has(c.resources.%(f)s) && c.resources.%(f)s.exists(r, (r == 'nvidia.com/gpu' || "
         "r.startsWith('nvidia.com/mig-')) && quantity(string(c.resources.%(f)s[r])).isGreaterThan(quantity('0')))")


def admission_policies():
    """The ValidatingAdmissionPolicies (Kubernetes >= 1.30) that hold in every tenant namespace (label
    ``fairgpu.io/tenant``), whoever asks, and their bindings:

    - ``fairgpu-tenant-gpu-pods``: a Pod that requests or limits an accelerator must be controlled by a Job
      (so Kueue admits it against the tenant's ClusterQueue). Pod priority is checked on the Job, not here: the
      Priority admission plugin fills every pod's ``spec.priority`` before validation.
    - ``fairgpu-tenant-jobs``: a Job may name only the WorkloadPriorityClasses of its namespace's
      ``fairgpu.io/workload-priority-classes`` annotation, and its pods may not set a pod priority
      (kube-scheduler would evict other tenants' pods for a higher one).

    They run inside the API server: no webhook, and they hold while Kueue is down. Returns manifest dicts.
    """
    containers = "(object.spec.containers + (has(object.spec.initContainers) ? object.spec.initContainers : []))"
    gpu_pods = {
        "variables": [{"name": "accelerators", "expression": containers + ".exists(c, has(c.resources) && ((%s) || (%s)))"
                       % (_ASKS % {"f": "requests"}, _ASKS % {"f": "limits"})}],
        "validations": [
            {"expression": "!variables.accelerators || (has(object.metadata.ownerReferences) && "
                           "object.metadata.ownerReferences.exists(o, o.apiVersion == 'batch/v1' && o.kind == 'Job' "
                           "&& has(o.controller) && o.controller))",
             "reason": "Forbidden",
             "message": "a pod that requests GPUs in a tenant namespace must belong to a Job, so that Kueue admits "
                        "it against the tenant's ClusterQueue: submit a Job with the label kueue.x-k8s.io/queue-name"},
        ],
    }
    jobs = {
        "variables": [
            {"name": "priorityClass", "expression": "has(object.metadata.labels) && '%s' in object.metadata.labels ? "
             "object.metadata.labels['%s'] : ''" % (PRIORITY_CLASS_LABEL, PRIORITY_CLASS_LABEL)},
            {"name": "allowed", "expression": "has(namespaceObject.metadata.annotations) && '%s' in "
             "namespaceObject.metadata.annotations && namespaceObject.metadata.annotations['%s'] != '' ? "
             "namespaceObject.metadata.annotations['%s'].split(',') : []"
             % ((PRIORITY_CLASSES_ANNOTATION,) * 3)},
            # Kueue updates admitted Jobs; a class that was allowed at creation stays usable.
            {"name": "unchanged", "expression": "request.operation == 'UPDATE' && has(oldObject.metadata.labels) && "
             "'%s' in oldObject.metadata.labels && oldObject.metadata.labels['%s'] == variables.priorityClass"
             % (PRIORITY_CLASS_LABEL, PRIORITY_CLASS_LABEL)},
        ],
        "validations": [
            {"expression": "variables.priorityClass == '' || variables.unchanged || "
                           "variables.priorityClass in variables.allowed",
             "reason": "Forbidden",
             "messageExpression": "'WorkloadPriorityClass ' + variables.priorityClass + ' is not allowed in namespace ' "
                                  "+ namespaceObject.metadata.name + '; use one of: ' + "
                                  "(variables.allowed.size() > 0 ? variables.allowed.join(', ') : 'none (omit the label)')"},
            {"expression": "(!has(object.spec.template.spec.priorityClassName) || "
                           "object.spec.template.spec.priorityClassName == '') && !has(object.spec.template.spec.priority)",
             "reason": "Forbidden",
             "message": "pod priority (priorityClassName, priority) is not allowed in tenant Jobs: kube-scheduler "
                        "would evict other tenants' pods for it; set the label kueue.x-k8s.io/priority-class instead"},
        ],
    }
    objects = []
    for name, resource, operations, rules in (
        ("fairgpu-tenant-gpu-pods", ("", "pods"), ["CREATE"], gpu_pods),
        ("fairgpu-tenant-jobs", ("batch", "jobs"), ["CREATE", "UPDATE"], jobs),
    ):
        # The API server's defaults written out, so that a client-side `kubectl apply` finds nothing to change.
        spec = {"failurePolicy": "Fail",
                "matchConstraints": {"matchPolicy": "Equivalent", "namespaceSelector": {}, "objectSelector": {},
                                     "resourceRules": [{"apiGroups": [resource[0]], "apiVersions": ["v1"],
                                                        "operations": operations, "resources": [resource[1]],
                                                        "scope": "*"}]}}
        spec.update(rules)
        objects.append({"apiVersion": ADMISSION_API, "kind": "ValidatingAdmissionPolicy",
                        "metadata": {"name": name, "labels": _labels()}, "spec": spec})
        objects.append({"apiVersion": ADMISSION_API, "kind": "ValidatingAdmissionPolicyBinding",
                        "metadata": {"name": name, "labels": _labels()},
                        "spec": {"policyName": name, "validationActions": ["Deny"],
                                 "matchResources": {"namespaceSelector": {"matchExpressions": [
                                     {"key": TENANT_LABEL, "operator": "Exists"}]}}}})
    return objects


def tenant_objects(tenants, flavors, cohort="fairgpu", preemption=None, queueing_strategy="BestEffortFIFO",
                   local_queue_suffix="-queue", limit_range=None, priority_classes=()):
    """Every object of the tenants, in apply order (cluster-scoped first).

    ``tenants``: normalised tenants (``tenant_spec.normalise``); ``flavors``: ``gpu_flavors`` output;
    ``preemption``: ClusterQueue ``spec.preemption`` (default: reclaim within cohort from any borrower,
    preempt lower priority within the queue); ``limit_range``: default container request/limit
    ``{"cpu", "memory"}``; ``priority_classes``: the platform's WorkloadPriorityClasses
    ``[{"name", "value", "description"}]``. Returns a list of manifest dicts.
    """
    if preemption is None:
        preemption = {"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority"}
    if limit_range is None:
        limit_range = DEFAULT_CONTAINER_RESOURCES
    used = {f["name"]: f for f in flavors for t in tenants if t["gpu_resource"] in f["resources"]}
    objects = admission_policies()
    for priority_class in priority_classes:
        objects.append({"apiVersion": KUEUE_API, "kind": "WorkloadPriorityClass",
                        "metadata": {"name": priority_class["name"], "labels": _labels()},
                        "value": priority_class["value"], "description": priority_class.get("description", "")})
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
