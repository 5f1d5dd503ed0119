# -*- coding: utf-8 -*-
# Copyright: fairgpu maintainers
# Apache License 2.0 (see LICENSE)
"""The one place where fairgpu builds the Kubernetes and Kueue objects of its tenants.

Pure logic, no cluster access. The ``tenants`` role applies what ``tenant_objects`` returns; anything that
renders manifests uses the same function, so both give the same objects.

API versions follow upstream: Kueue ``kueue.x-k8s.io/v1beta2`` (ClusterQueue ``spec.cohortName``, Cohort,
ResourceFlavor ``spec.nodeLabels``, ``nodeTaints`` and ``tolerations``, LocalQueue ``spec.clusterQueue``), Kubernetes ``v1`` and
``rbac.authorization.k8s.io/v1``.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re
from decimal import Decimal

from ansible_collections.fairgpu.tenancy.plugins.module_utils.common.quantity import canonical_quantity, parse_quantity
from ansible_collections.fairgpu.tenancy.plugins.module_utils.tenants.products import split
from ansible_collections.fairgpu.tenancy.plugins.module_utils.common.names import (
    GPU_PRODUCT_LABEL,
    GPU_REPLICAS_LABEL,
    KUEUE_API,
    LIMIT_RANGE,
    LOCAL_QUEUE_SUFFIX,
    MANAGED_BY,
    MULTIKUEUE_ADMISSION_CHECK,
    PRIORITY_CLASSES_ANNOTATION,
    PRIORITY_QUOTA,
    RBAC_API,
    RESOURCE_QUOTA,
    TENANT_LABEL,
    TENANT_ROLE,
)
from ansible_collections.fairgpu.tenancy.plugins.module_utils.kueue import admission
from ansible_collections.fairgpu.tenancy.plugins.module_utils.cluster import pod_security
from ansible_collections.fairgpu.tenancy.plugins.module_utils.kueue.taints import MAX_FLAVOR_TAINTS, tolerations_for

MIB = 1024 * 1024

# One container's default request and limit in tenant namespaces (LimitRange), unless the caller gives one.
DEFAULT_CONTAINER_RESOURCES = {"cpu": "1", "memory": "4Gi"}
# Pod Security Admission namespace labels (https://kubernetes.io/docs/concepts/security/pod-security-admission/).
# The levels of every namespace fairgpu creates live in cluster/pod_security.py (LEVELS, TENANTS).
POD_SECURITY_LABEL = pod_security.LABEL
POD_SECURITY_LEVELS = pod_security.TENANTS["allowed"]
# The tenant namespaces' policy beyond quotas (role variable tenants_isolation; docs/isolation.md "A tenant that tries to cheat"):
# - pod_security_enforce / pod_security_warn: Pod Security levels of the namespaces. enforce applies to pods
#   only, so the Job policy refuses at creation what the enforced level would refuse in the Job's pods; warn also
#   answers on Jobs' templates.
# - max_jobs: default ResourceQuota count/jobs.batch of a namespace (the tenant field max_jobs overrides it).
# - pods_reserved_per_node: pod slots of each GPU node left out of the tenants' pods quotas (the node's daemons).
# - termination_grace_max_seconds: the most terminationGracePeriodSeconds a tenant Job may ask for; a preempted
#   pod keeps its GPUs until it is gone, so this bounds how long a reclaimed guarantee waits for them.
# - cpu_limit_request_ratio / memory_limit_request_ratio: the LimitRange's maxLimitRequestRatio (a limit at most
#   that many times its request): Kueue and the scheduler count requests, a node gives up to the limits.
# - max_object_kib: the most KiB a tenant Job carries in labels, annotations, commands, arguments and environment
#   values, and a ConfigMap or Secret in data.
# - max_objects: ResourceQuota count of ConfigMaps, Secrets, Services and PersistentVolumeClaims per namespace.
# - scheduler_names: the schedulers tenant Jobs may name (schedulerName).
# - denied_pod_priority_classes: PriorityClasses no pod of a tenant namespace may use (a ResourceQuota scoped to
#   them holds pods at 0).
DEFAULT_ISOLATION = {"pod_security_enforce": pod_security.TENANTS["enforce"],
                     "pod_security_warn": pod_security.TENANTS["warn"], "max_jobs": 100,
                     "pods_reserved_per_node": 10, "termination_grace_max_seconds": 30, "cpu_limit_request_ratio": 4,
                     "memory_limit_request_ratio": 2, "max_object_kib": 256, "max_objects": 100,
                     "scheduler_names": ["default-scheduler"],
                     "denied_pod_priority_classes": ["system-node-critical", "system-cluster-critical"]}
# The object counts max_objects bounds (ResourceQuota keys): what the built-in edit role lets a tenant create
# besides Jobs and pods, that holds data or node resources.
COUNTED_OBJECTS = ("count/configmaps", "count/secrets", "services", "persistentvolumeclaims")


def isolation_errors(isolation):
    """Check the namespace policy (``tenants_isolation``, keys of ``DEFAULT_ISOLATION``); messages name the key.
    Never raises."""
    where = "tenants_isolation"
    if isolation is None:
        return []
    if not isinstance(isolation, dict):
        return ["%s: give a mapping with some of %s" % (where, ", ".join(DEFAULT_ISOLATION))]
    errors = ["%s.%s: unknown key; known keys are %s" % (where, key, ", ".join(DEFAULT_ISOLATION))
              for key in sorted(str(k) for k in isolation if k not in DEFAULT_ISOLATION)]
    for key in ("pod_security_enforce", "pod_security_warn"):
        if key in isolation and isolation[key] not in POD_SECURITY_LEVELS:
            errors.append("%s.%s: %r is not a level fairgpu allows; use baseline or restricted (privileged would "
                          "open the host and its devices to tenants)" % (where, key, isolation[key]))
    # The grace bound starts at Kubernetes' default: the API server writes terminationGracePeriodSeconds: 30 into
    # every pod template that sets none (pkg/apis/core/v1/defaults.go), so a lower bound would refuse most Jobs.
    # A limit-to-request ratio below 1 would refuse every container (a limit is never below its request).
    for key, low, high in (("max_jobs", 1, 10 ** 6), ("pods_reserved_per_node", 0, 10 ** 4),
                           ("termination_grace_max_seconds", 30, 86400), ("cpu_limit_request_ratio", 1, 1000),
                           ("memory_limit_request_ratio", 1, 1000), ("max_object_kib", 16, 1024),
                           ("max_objects", 1, 10 ** 6)):
        value = isolation.get(key, low)
        if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
            errors.append("%s.%s: must be a whole number from %d to %d, got %r" % (where, key, low, high, value))
    for key, empty in (("scheduler_names", False), ("denied_pod_priority_classes", True)):
        value = isolation.get(key, DEFAULT_ISOLATION[key])
        if not isinstance(value, list) or not all(isinstance(v, str) and re.match(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$", v)
                                                  for v in value) or (not value and not empty):
            errors.append("%s.%s: give a list of %snames (lower case, digits, '-', '.'), got %r"
                          % (where, key, "" if empty else "at least one ", value))
    return errors


def isolation_policy(isolation):
    """``DEFAULT_ISOLATION`` with the keys of ``isolation`` over it (anything but a dict counts as none). Call
    ``isolation_errors`` first for user input."""
    policy = dict(DEFAULT_ISOLATION)
    policy.update(isolation if isinstance(isolation, dict) else {})
    return policy


def flavor_name(product):
    """ResourceFlavor name for a ``nvidia.com/gpu.product`` value: lower case, other characters as '-'."""
    return re.sub(r"[^a-z0-9-]+", "-", product.lower()).strip("-")


def gpu_flavors(nodes_by_product, taints_by_product=None, settings=None, sharing=None):
    """ResourceFlavors for the GPU products present: ``{product: {resource: count}}`` -> list of dicts
    ``{"name", "product", "resources": {resource: total count}, "node_taints": [taint], "tolerations":
    [toleration]}`` sorted by name.

    ``taints_by_product``: ``{product: [taint]}``, the taints common to the product's schedulable nodes
    (``plan.cluster_capacity``); the flavor declares them as ``spec.nodeTaints`` and tolerates them
    (``taints.tolerations_for``), so Kueue admits only to quota whose pods can land and adds the tolerations
    to the admitted pods (Kueue v0.19.2, apis/kueue/v1beta2/resourceflavor_types.go). ``settings``: the
    inventory's ``{product: {"node_taints", "tolerations"}}``; a given list replaces the default. ``sharing``:
    ``{product: {"replicas", "strategy"}}`` of the shared products (``plan.cluster_capacity``); such a flavor
    carries ``replicas`` and ``strategy`` and also selects its nodes by ``nvidia.com/gpu.replicas``, so each
    (product, replicas) has its own flavor (a non-shared flavor has replicas 1)."""
    taints_by_product = taints_by_product or {}
    sharing = sharing or {}
    settings = settings or {}
    flavors = []
    for product, resources in sorted(nodes_by_product.items()):
        entry = settings.get(product) or {}
        node_taints = entry.get("node_taints", taints_by_product.get(product, []))
        flavors.append({"name": flavor_name(product), "product": product, "resources": dict(sorted(resources.items())),
                        "node_taints": [dict(t) for t in node_taints],
                        "tolerations": [dict(t) for t in entry.get("tolerations", tolerations_for(node_taints))],
                        "replicas": sharing.get(product, {}).get("replicas", 1),
                        "strategy": sharing.get(product, {}).get("strategy", "none")})
    return flavors


def flavor_object(flavor):
    """The ResourceFlavor of a ``gpu_flavors`` item: ``nodeLabels`` the GPU product, ``nodeTaints`` and
    ``tolerations`` when there are any (left out when empty, as the API server writes them back)."""
    spec = {"nodeLabels": {GPU_PRODUCT_LABEL: flavor["product"]}}
    if flavor.get("replicas", 1) > 1:
        spec["nodeLabels"][GPU_REPLICAS_LABEL] = str(flavor["replicas"])
    if flavor.get("node_taints"):
        spec["nodeTaints"] = flavor["node_taints"]
    if flavor.get("tolerations"):
        spec["tolerations"] = flavor["tolerations"]
    return {"apiVersion": KUEUE_API, "kind": "ResourceFlavor", "metadata": {"name": flavor["name"], "labels": _labels()},
            "spec": spec}


def flavor_errors(tenants, flavors):
    """Each tenant's quota must land on flavors that offer its accelerator resource: in the simple form (no
    ``products``), exactly one flavor (one GPU product) offers it; with ``products``, each named product's flavor
    offers it. Returns error strings naming the tenant; and a used flavor's taints and tolerations must fit
    Kueue's limit of ``taints.MAX_FLAVOR_TAINTS`` each (ResourceFlavorSpec MaxItems=8, Kueue v0.19.2)."""
    errors = []
    for flavor in flavors:
        used = any(t["gpu_resource"] in flavor["resources"] for t in tenants)
        for field in ("node_taints", "tolerations"):
            if used and len(flavor.get(field) or []) > MAX_FLAVOR_TAINTS:
                errors.append(
                    "ResourceFlavor %s: the %s nodes have %d %s in common; a ResourceFlavor takes at most %d: give "
                    "tenants_gpu_flavors[%s].%s the ones that matter" % (
                        flavor["name"], flavor["product"], len(flavor[field]), field.replace("_", " "),
                        MAX_FLAVOR_TAINTS, flavor["product"], field))
    for tenant in tenants:
        offering = [f for f in flavors if tenant["gpu_resource"] in f["resources"]]
        if tenant.get("products"):
            for entry in tenant["products"]:
                if not any(f["product"] == entry["product"] for f in offering):
                    errors.append(
                        "tenants_list (%s).products[%s]: the nodes of this product offer no %s; they offer %s"
                        % (tenant["name"], entry["product"], tenant["gpu_resource"],
                           ", ".join(sorted(r for f in flavors if f["product"] == entry["product"]
                                            for r in f["resources"])) or "no accelerators"))
        elif not offering:
            errors.append(
                "tenants_list (%s).gpu_resource: no node offers %s; the nodes offer %s"
                % (tenant["name"], tenant["gpu_resource"],
                   ", ".join(sorted({r for f in flavors for r in f["resources"]})) or "no accelerators")
            )
        elif len(offering) > 1:
            errors.append(
                "tenants_list (%s).gpu_resource: %s is offered by several GPU products (%s); say which the tenant's "
                "guarantee is on with products: {<product>: {gpus: N}, ...}"
                % (tenant["name"], tenant["gpu_resource"], ", ".join(f["product"] for f in offering))
            )
    return errors


def assign_products(tenants, flavors):
    """Give each simple-form tenant (``products`` None) its one product: ``[{"product", "gpus", "borrowing_limit",
    "lending_limit"}]`` from its own fields; and every product entry its flavor's ``replicas`` (1: not shared) and
    sharing ``strategy``. Call ``flavor_errors`` first. Changes ``tenants`` in place."""
    for tenant in tenants:
        if not tenant.get("products"):
            flavor = next(f for f in flavors if tenant["gpu_resource"] in f["resources"])
            tenant["products"] = [{"product": flavor["product"], "gpus": tenant["gpus"],
                                   "borrowing_limit": tenant["borrowing_limit"],
                                   "lending_limit": tenant["lending_limit"]}]
        for entry in tenant["products"]:
            flavor = next((f for f in flavors if f["product"] == entry["product"]), {})
            entry["replicas"], entry["strategy"] = flavor.get("replicas", 1), flavor.get("strategy", "none")
    return tenants


def _labels(tenant=None):
    labels = dict(MANAGED_BY)
    if tenant:
        labels[TENANT_LABEL] = tenant
    return labels


def _quantity(value, milli=False):
    """A quantity (number or string) as the API server writes it back (``canonical_quantity``), so that a second
    apply of the same value changes nothing. ``milli``: for a built-in object's resource list (ResourceQuota,
    LimitRange), which the API server rounds up to whole milli units."""
    return canonical_quantity(value, milli=milli)


# With several products, a Job that can run on any of them goes to the first product (in the tenant's order) where
# it fits in the tenant's own guarantee before it borrows or preempts on any: ClusterQueue flavorFungibility
# whenCanBorrow/whenCanPreempt TryNextFlavor (apis/kueue/v1beta2/clusterqueue_types.go; Kueue's defaults are
# MayStopSearch and TryNextFlavor). A Job that needs one product pins it with a nodeSelector on
# nvidia.com/gpu.product: Kueue only assigns flavors whose nodeLabels match it.
FLAVOR_FUNGIBILITY = {"whenCanBorrow": "TryNextFlavor", "whenCanPreempt": "TryNextFlavor"}


def _split_quantity(text, weights, unit):
    """A canonical quantity string split in proportion to ``weights``: CPU (``unit`` 1000) in millicores, memory
    (``unit`` 1) in whole MiB."""
    if unit == 1000:
        return [canonical_quantity(Decimal(p) / 1000) for p in split(int(parse_quantity(text) * 1000), weights)]
    return [canonical_quantity(p * MIB, binary=True) for p in split(int(parse_quantity(text)) // MIB, weights)]


def cluster_queue(tenant, flavors, cohort, preemption, queueing_strategy, multikueue="none"):
    """The tenant's ClusterQueue. It covers CPU, memory, the accelerator and ``pods`` (Kueue then counts one per
    pod of a workload: pkg/scheduler/flavorassigner/flavorassigner.go, v0.19.2); every covered resource is
    quota Kueue can reclaim, so no tenant fills the nodes' pod limit (110 per node by default) outside it.

    One resource group, one flavor per product of ``tenant["products"]`` in its order (``flavors``: the
    ``gpu_flavors`` items). Kueue requires every flavor of a group to list all of the group's resources
    (ResourceGroup rule "flavors must have the same number of resources as the coveredResources",
    apis/kueue/v1beta2/clusterqueue_types.go), and a Job's pods get all the resources of a group from one flavor.
    CPU, memory and pods therefore stay in the accelerator's group and are split between the products in
    proportion to the tenant's GPUs on each (``split``): the flavor pins the pods to that product's nodes, so that
    is where their CPU and memory are. A group of their own with a flavor without nodeLabels would let a tenant's
    CPU quota be spent on any node, and its CPU-only pods leave the GPU nodes the capacity was counted on.

    ``multikueue`` manager: the ClusterQueue carries the MultiKueue admission check, so a Workload it reserves
    quota for runs on a worker (v1beta2 ``admissionChecksStrategy``, without ``onFlavors``, which makes Kueue set
    the ClusterQueue inactive: pkg/cache/scheduler/clusterqueue.go, v0.19.2). Until the check exists the
    ClusterQueue is inactive and admits nothing, so no Job runs before the workers are joined."""
    products = tenant["products"]
    weights = [p["gpus"] for p in products]
    cpus = _split_quantity(tenant["cpu"], weights, 1000)
    memories = _split_quantity(tenant["memory"], weights, 1)
    pods = split(tenant["pods"], weights)
    entries = []
    for index, product in enumerate(products):
        flavor = next(f for f in flavors if f["product"] == product["product"])
        gpu = {"name": tenant["gpu_resource"], "nominalQuota": _quantity(product["gpus"])}
        if cohort and product["borrowing_limit"] is not None:
            gpu["borrowingLimit"] = _quantity(product["borrowing_limit"])
        if cohort and product["lending_limit"] is not None:
            gpu["lendingLimit"] = _quantity(product["lending_limit"])
        single = len(products) == 1
        entries.append({
            "name": flavor["name"],
            "resources": [
                {"name": "cpu", "nominalQuota": _quantity(tenant["cpu"]) if single else cpus[index]},
                {"name": "memory", "nominalQuota": _quantity(tenant["memory"]) if single else memories[index]},
                gpu,
                {"name": "pods", "nominalQuota": _quantity(pods[index])},
            ],
        })
    spec = {
        "namespaceSelector": {"matchLabels": {TENANT_LABEL: tenant["name"]}},
        "queueingStrategy": queueing_strategy,
        "preemption": dict(preemption),
        "fairSharing": {"weight": _quantity(tenant["weight"])},
        "resourceGroups": [{
            "coveredResources": ["cpu", "memory", tenant["gpu_resource"], "pods"],
            "flavors": entries,
        }],
    }
    if tenant.get("admission_fair_sharing"):
        # KEP-4136: order the Workloads of this ClusterQueue by their LocalQueues' usage (apis/kueue/v1beta2
        # fairsharing_types.go AdmissionScope); Kueue acts on it only with the Configuration's admissionFairSharing.
        spec["admissionScope"] = {"admissionMode": "UsageBasedAdmissionFairSharing"}
    if len(products) > 1:
        spec["flavorFungibility"] = dict(FLAVOR_FUNGIBILITY)
    if cohort:
        spec["cohortName"] = cohort
    if multikueue == "manager":
        spec["admissionChecksStrategy"] = {"admissionChecks": [{"name": MULTIKUEUE_ADMISSION_CHECK}]}
    return {"apiVersion": KUEUE_API, "kind": "ClusterQueue",
            "metadata": {"name": tenant["name"], "labels": _labels(tenant["name"])}, "spec": spec}


def tenant_role(namespace, tenant):
    """Namespaced Role of a tenant's users: run and watch Jobs, read their pods, logs, events, LocalQueues and
    Workloads. Nothing cluster-wide, no Secrets, no quota or RBAC objects, no Workload writes, and no
    update/patch of Jobs (so a tenant cannot lift Kueue's suspension of its own Job)."""
    read = ["get", "list", "watch"]
    return {
        "apiVersion": RBAC_API, "kind": "Role",
        "metadata": {"name": TENANT_ROLE, "namespace": namespace, "labels": _labels(tenant["name"])},
        "rules": [
            {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": read + ["create", "delete"]},
            {"apiGroups": [""], "resources": ["pods", "pods/log", "events"], "verbs": read},
            {"apiGroups": ["events.k8s.io"], "resources": ["events"], "verbs": read},
            {"apiGroups": ["kueue.x-k8s.io"], "resources": ["localqueues", "workloads"], "verbs": read},
            {"apiGroups": [""], "resources": ["resourcequotas", "limitranges"], "verbs": read},
        ],
    }


def closed_resources(tenant, flavors):
    """The accelerator resources of the nodes (``gpu_flavors``) that ``tenant`` gets no quota of: every one but its
    own ``gpu_resource``, less those its ``resource_quota`` sets itself. Its ResourceQuota holds them at 0, so a pod
    that bypasses Kueue (its ClusterQueue covers only the tenant's own resource) cannot take the MIG devices or
    whole GPUs next to its own on the same nodes (mig-parted per-GPU configs under the mixed strategy)."""
    present = {r for f in flavors for r in f["resources"]}
    return sorted(r for r in present if r != tenant["gpu_resource"] and "requests." + r not in tenant["resource_quota"])


def accelerator_allotment(tenants, flavors):
    """What the plan says of every accelerator resource of the nodes: ``[{"resource", "devices": int (installed),
    "allotted_to": [tenant names], "closed_to": [tenant names]}]`` sorted by resource. A resource nobody is
    allotted is closed to every tenant."""
    devices = {}
    for flavor in flavors:
        for resource, count in flavor["resources"].items():
            devices[resource] = devices.get(resource, 0) + count
    return [{"resource": resource, "devices": count,
             "allotted_to": [t["name"] for t in tenants if t["gpu_resource"] == resource],
             "closed_to": [t["name"] for t in tenants if resource in closed_resources(t, flavors)]}
            for resource, count in sorted(devices.items())]


def namespace_objects(namespace, tenant, local_queue_name, limit_range, isolation=None, closed=(), multikueue="none"):
    """A tenant namespace and what holds in it: LocalQueues, ResourceQuota (the accelerator's hard maximum,
    ``pods``, ``count/jobs.batch``, and 0 for each accelerator resource of ``closed``, see ``closed_resources``),
    LimitRange, Role and RoleBinding. The Namespace carries the Pod Security labels of ``isolation``
    (``isolation_policy``). On a MultiKueue ``worker`` the tenant's groups get no Role and no RoleBinding: work
    reaches a worker only through the manager, whose quota it passed (MultiKueue creates it as the worker's
    ServiceAccount ``MULTIKUEUE_WORKER_IDENTITY``)."""
    isolation = isolation_policy(isolation)
    gpu = tenant["gpu_resource"]
    labels = _labels(tenant["name"])
    queue_spec = {"clusterQueue": tenant["name"]}
    if tenant.get("admission_fair_sharing"):
        # Admission fair sharing divides a LocalQueue's usage by this weight (pkg/util/admissionfairsharing
        # LQWeightAsFloat64, default 1); both LocalQueues of the namespace (its own and "default") get the namespace's weight.
        queue_spec["fairSharing"] = {"weight": _quantity((tenant.get("local_queue_weights") or {}).get(namespace, 1))}
    hard = {"requests." + resource: 0 for resource in closed}
    hard.update((key, isolation["max_objects"]) for key in COUNTED_OBJECTS)
    hard.update(tenant["resource_quota"])
    hard["requests." + gpu] = tenant["max_gpus"]
    hard["pods"] = tenant["max_pods"]
    hard["count/jobs.batch"] = tenant["max_jobs"]
    namespace_labels = dict(labels)
    for mode in ("enforce", "warn"):
        namespace_labels[POD_SECURITY_LABEL + mode] = isolation["pod_security_" + mode]
        namespace_labels[POD_SECURITY_LABEL + mode + "-version"] = "latest"
    # No pod may ask for more devices than the largest node has: Kueue checks the LimitRange's Container and
    # Pod maxima before admitting (pkg/util/limitrange, v0.19.2), so such a Job is never admitted.
    per_pod = {gpu: _quantity(tenant.get("max_gpus_per_pod", tenant["max_gpus"]), milli=True)}
    default_request = {"cpu": _quantity(limit_range["cpu"], milli=True),
                       "memory": _quantity(limit_range["memory"], milli=True), gpu: "0"}
    return [
        {"apiVersion": "v1", "kind": "Namespace",
         "metadata": {"name": namespace, "labels": namespace_labels,
                      "annotations": {PRIORITY_CLASSES_ANNOTATION: ",".join(tenant["priority_classes"])}}},
        {"apiVersion": KUEUE_API, "kind": "LocalQueue",
         "metadata": {"name": local_queue_name, "namespace": namespace, "labels": labels},
         "spec": dict(queue_spec)},
        # Kueue's LocalQueueDefaulting: a Job without the queue-name label goes to the LocalQueue "default".
        {"apiVersion": KUEUE_API, "kind": "LocalQueue",
         "metadata": {"name": "default", "namespace": namespace, "labels": labels},
         "spec": dict(queue_spec)},
        # Only the requests. form is enforced for an extended resource.
        {"apiVersion": "v1", "kind": "ResourceQuota",
         "metadata": {"name": RESOURCE_QUOTA, "namespace": namespace, "labels": labels},
         "spec": {"hard": {key: _quantity(value, milli=True) for key, value in sorted(hard.items())}}},
        {"apiVersion": "v1", "kind": "LimitRange",
         "metadata": {"name": LIMIT_RANGE, "namespace": namespace, "labels": labels},
         "spec": {"limits": [{
             "type": "Container",
             # An explicit 0: with only a max, the API server would default every container to the max.
             "defaultRequest": dict(default_request),
             "default": dict(default_request),
             "max": dict(per_pod),
             "maxLimitRequestRatio": {resource: _quantity(isolation["%s_limit_request_ratio" % resource], milli=True)
                                      for resource in ("cpu", "memory")},
         }, {"type": "Pod", "max": dict(per_pod)}]}},
    ] + priority_quota(namespace, labels, isolation["denied_pod_priority_classes"]) + ([] if multikueue == "worker" else [
        tenant_role(namespace, tenant),
        {"apiVersion": RBAC_API, "kind": "RoleBinding",
         "metadata": {"name": TENANT_ROLE, "namespace": namespace, "labels": labels},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": TENANT_ROLE},
         "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": group}
                      for group in tenant["groups"]]},
    ])


def priority_quota(namespace, labels, denied):
    """The ResourceQuota that holds pods of the ``denied`` PriorityClasses at 0 in ``namespace`` (none when the list
    is empty). kube-scheduler preempts lower-priority pods on a node for a higher one, whoever owns them, and since
    Kubernetes 1.17 the system-node-critical and system-cluster-critical classes are usable in every namespace,
    with a quota scoped to them as the documented limit ("Limit Priority Class consumption by default",
    https://kubernetes.io/docs/concepts/policy/resource-quotas/#limit-priority-class-consumption-by-default)."""
    if not denied:
        return []
    return [{"apiVersion": "v1", "kind": "ResourceQuota",
             "metadata": {"name": PRIORITY_QUOTA, "namespace": namespace, "labels": labels},
             "spec": {"hard": {"pods": "0"}, "scopeSelector": {"matchExpressions": [
                 {"scopeName": "PriorityClass", "operator": "In", "values": list(denied)}]}}}]


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


def tenant_objects(tenants, flavors, cohort="fairgpu", preemption=None, queueing_strategy="BestEffortFIFO",
                   local_queue_suffix=LOCAL_QUEUE_SUFFIX, limit_range=None, priority_classes=(), isolation=None,
                   per_gpu=None, multikueue="none"):
    """Every object of the tenants, in apply order (cluster-scoped first).

    ``tenants``: normalised tenants (``tenant_spec.normalise``) with their ``products`` (``assign_products``);
    ``flavors``: ``gpu_flavors`` output;
    ``preemption``: ClusterQueue ``spec.preemption`` (default: reclaim within cohort from any borrower,
    preempt lower priority within the queue); ``limit_range``: default container request/limit
    ``{"cpu", "memory"}``; ``priority_classes``: the platform's WorkloadPriorityClasses
    ``[{"name", "value", "description"}]``; ``isolation``: the namespace policy (``isolation_policy``);
    ``per_gpu``: the GPU nodes' least CPU and memory per GPU (``tenants.plan.cluster_capacity``), which bounds a
    pod's CPU and memory by its devices (None: no bound); ``multikueue``: the cluster's part in MultiKueue
    (``MULTIKUEUE_ROLES``: a manager's ClusterQueues carry the MultiKueue check and its Jobs Kueue's managedBy, a
    worker's namespaces give the tenants no access).
    Returns a list of manifest dicts.
    """
    if preemption is None:
        preemption = {"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority"}
    if limit_range is None:
        limit_range = DEFAULT_CONTAINER_RESOURCES
    named = {p["product"] for t in tenants for p in t["products"]}
    used = {f["name"]: f for f in flavors if f["product"] in named}
    objects = admission.policies(isolation_policy(isolation), limit_range, per_gpu, multikueue=multikueue)
    for priority_class in priority_classes:
        objects.append({"apiVersion": KUEUE_API, "kind": "WorkloadPriorityClass",
                        "metadata": {"name": priority_class["name"], "labels": _labels()},
                        "value": priority_class["value"], "description": priority_class.get("description", "")})
    if cohort:
        objects.append({"apiVersion": KUEUE_API, "kind": "Cohort",
                        "metadata": {"name": cohort, "labels": _labels()}, "spec": {}})
    for name in sorted(used):
        objects.append(flavor_object(used[name]))
    for tenant in tenants:
        objects.append(cluster_queue(tenant, flavors, cohort, preemption, queueing_strategy, multikueue))
    for tenant in tenants:
        for namespace in tenant["namespaces"]:
            objects.extend(namespace_objects(namespace, tenant, tenant["name"] + local_queue_suffix, limit_range,
                                             isolation, closed_resources(tenant, flavors), multikueue))
    return objects
