# -*- coding: utf-8 -*-
# Copyright: fairgpu maintainers
# Apache License 2.0 (see LICENSE)
"""Validation and normalisation of fairgpu's tenant list (the ``tenants_list`` inventory variable).

Pure logic, no cluster access. One tenant is a dict::

    name:            DNS label, unique; also the ClusterQueue's name
    namespaces:      list of DNS labels (default [name]); a namespace belongs to one tenant only
    gpus:            guaranteed accelerators: the ClusterQueue's nominalQuota (integer >= 0)
    borrowing_limit: accelerators it may borrow from the cohort above its guarantee (integer >= 0;
                     null or absent: no limit). Needs a cohort.
    lending_limit:   accelerators of its guarantee it lends to the cohort (0..gpus; null or absent: all)
    weight:          fair-sharing weight (number > 0, default 1)
    max_gpus:        hard maximum, the namespace ResourceQuota's requests.<resource> (integer >= gpus;
                     default gpus + borrowing_limit, or the cluster's capacity when borrowing is unlimited)
    gpu_resource:    nvidia.com/gpu (default) or nvidia.com/mig-<profile>
    groups:          RBAC groups of the tenant's users (default [name])
    cpu, memory:     optional guaranteed CPU and memory (Kubernetes quantities); default: the tenant's
                     share of the cluster's CPU and memory in proportion to its accelerators; never below
                     one container's default request (tenants_default_container_resources)
    priority_classes: names of the platform's WorkloadPriorityClasses the tenant's Jobs may use
                     (default: all of them); any other ``kueue.x-k8s.io/priority-class`` is refused
    resource_quota:  extra ResourceQuota ``spec.hard`` entries of its namespaces (``requests.cpu``, ...); the
                     accelerator's own entry comes from max_gpus, ``pods`` from max_pods and
                     ``count/jobs.batch`` from max_jobs
    pods:            guaranteed pod slots: the ClusterQueue's nominalQuota of ``pods`` (integer >= gpus);
                     default: the tenant's GPU share of the GPU nodes' pod slots (allocatable ``pods`` less
                     the slots kept for the nodes' own daemons). Kueue counts one per pod of a workload when a
                     ClusterQueue covers ``pods`` (pkg/scheduler/flavorassigner/flavorassigner.go, v0.19.2), so
                     tiny CPU-only pods can no longer fill the nodes' pod limit outside any quota
    max_pods:        hard maximum of pods per namespace (ResourceQuota ``pods``; default: every tenant pod slot
                     of the cluster, what borrowing could reach)
    max_jobs:        hard maximum of Jobs per namespace, finished ones included (ResourceQuota
                     ``count/jobs.batch``; default: the caller's default, 100): caps the backlog one tenant can
                     queue in a burst

    products:        quota per GPU product instead of gpus, borrowing_limit and lending_limit, on a cluster with
                     several products: ``{<nvidia.com/gpu.product>: {gpus, borrowing_limit, lending_limit}}``
                     (``tenants/products.py``); the checks here see the tenant's totals (``products.flatten``)

    admission_fair_sharing: true orders the Workloads of the tenant's ClusterQueue by the usage of their
                     LocalQueues (each namespace has two: ``<name><suffix>`` and ``default``, each with its own
                     usage) before their priority, instead of first come, first served: ClusterQueue
                     ``spec.admissionScope.admissionMode: UsageBasedAdmissionFairSharing`` (default false:
                     no admissionScope). Needs the kueue role's ``kueue_admission_fair_sharing``
    local_queue_weights: ``{namespace: weight}`` (numbers > 0, default 1 each) for admission fair sharing: the
                     LocalQueues' ``spec.fairSharing.weight`` in that namespace; a LocalQueue's usage is divided by
                     it. Only with ``admission_fair_sharing`` (Kueue reads it for nothing else)

    gpu_units:       physical (default) or replicas: on shared GPUs (time-slicing, MPS: GFD label
                     nvidia.com/gpu.replicas > 1), whether gpus and its limits count physical GPUs (fairgpu
                     multiplies them by the replicas, what Kueue counts) or replicas as they are

Units: accelerators are whole GPUs (or whole MIG devices for a MIG resource).

Rules from upstream Kueue (kueue.x-k8s.io/v1beta2 ClusterQueue validation): ``borrowingLimit`` only with a
cohort; ``lendingLimit`` <= ``nominalQuota``; fairSharing ``weight`` >= 0 (fairgpu requires > 0: a zero weight
makes a tenant always the first to be preempted and never to borrow; a LocalQueue's zero weight makes its usage
infinite in admission fair sharing, last for ever, and before kubernetes-sigs/kueue#13479 first while idle). From Kubernetes: ResourceQuota enforces
an extended resource only under its ``requests.`` name (a bare ``nvidia.com/gpu`` or ``limits.nvidia.com/gpu``
key is accepted by the API server and never enforced).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import numbers
from decimal import Decimal
import re

from ansible_collections.fairgpu.tenancy.plugins.module_utils.common.fields import unknown_field_errors
from ansible_collections.fairgpu.tenancy.plugins.module_utils.common.quantity import canonical_quantity, parse_quantity
from ansible_collections.fairgpu.tenancy.plugins.module_utils.common.names import GPU_RESOURCE, GPU_SHARED_RESOURCE
from ansible_collections.fairgpu.tenancy.plugins.module_utils.mig import resources

MIB = 1024 * 1024
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
KNOWN_FIELDS = (
    "name", "namespaces", "gpus", "borrowing_limit", "lending_limit", "weight", "max_gpus",
    "gpu_resource", "groups", "cpu", "memory", "priority_classes", "resource_quota", "pods", "max_pods",
    "max_jobs", "products", "gpu_units", "admission_fair_sharing", "local_queue_weights",
)
# ResourceQuota keys fairgpu sets itself from the tenant's fields.
OWN_QUOTA_KEYS = {"pods": "max_pods", "count/jobs.batch": "max_jobs"}
DEFAULT_MAX_JOBS = 100
# Namespaces a tenant must never own: Kueue's webhooks skip the first two, the rest are the system's.
RESERVED_NAMESPACES = ("kube-system", "kueue-system", "kube-public", "kube-node-lease", "default")


def is_whole_number(value):
    """True for an int that is not a bool."""
    return isinstance(value, int) and not isinstance(value, bool)


def is_dns_label(value):
    """True for a lower-case RFC 1123 DNS label of at most 63 characters."""
    return isinstance(value, str) and len(value) <= 63 and bool(DNS_LABEL.match(value))


def is_accelerator_resource(name):
    """True for ``nvidia.com/gpu``, ``nvidia.com/gpu.shared`` (time-slicing with renameByDefault) and every
    ``nvidia.com/mig-<profile>`` form the device plugin writes
    (``mig.resources.is_mig_resource``: ``.me``, ``.me.all``, ``.gfx``, ``-me``)."""
    return name in (GPU_RESOURCE, GPU_SHARED_RESOURCE) or resources.is_mig_resource(name)


def tenant_errors(tenants, capacity=None, cohort="fairgpu", preemption=None, limit_range=None,
                  priority_classes=None):
    """Validate ``tenants``; return a list of messages, each naming the tenant and field and saying the fix.

    ``capacity`` maps an accelerator resource name to what the cluster's nodes offer in all (ints), plus
    optionally ``cpu`` (millicores), ``memory`` (bytes) and ``pods`` (pod slots for tenants); None skips the
    capacity checks. ``cohort`` is the
    cohort every ClusterQueue joins (empty or None: no cohort); ``preemption`` the ClusterQueues'
    ``spec.preemption``; ``limit_range`` one container's default ``{"cpu", "memory"}`` request (quantities):
    a tenant with GPUs guaranteed must be guaranteed at least that much CPU and memory (checked when
    ``capacity`` has cpu and memory, after the defaults are filled); ``priority_classes`` the platform's
    WorkloadPriorityClasses (``priority_class_errors``; None: none checked). Never raises, whatever the input.
    """
    errors = priority_class_errors(priority_classes) if priority_classes is not None else []
    class_names = None if errors or priority_classes is None else [c["name"] for c in priority_classes]
    where = "tenants_list"
    if not isinstance(tenants, list) or not tenants:
        return errors + ["%s: give a non-empty list of tenants (each with at least name and gpus)" % where]
    if isinstance(preemption, dict) and preemption.get("borrowWithinCohort"):
        errors.append("tenants_preemption.borrowWithinCohort: Kueue ignores it under fair sharing; remove it")
    names, owners = set(), {}
    guaranteed, holders = {}, {}
    explicit = {"cpu": 0, "memory": 0}
    for index, tenant in enumerate(tenants):
        if not isinstance(tenant, dict):
            errors.append("%s[%d]: must be a mapping with at least name and gpus" % (where, index))
            continue
        name = tenant.get("name")
        at = "%s[%d] (%s)" % (where, index, name if isinstance(name, str) else "?")

        def err(field, message):
            errors.append("%s.%s: %s" % (at, field, message))

        for unknown in sorted(str(key) for key in tenant if key not in KNOWN_FIELDS):
            err(unknown, "unknown field; known fields are %s" % ", ".join(KNOWN_FIELDS))
        if not is_dns_label(name):
            err("name", "%r is not a lower-case DNS label (a-z, 0-9, '-', at most 63 characters)" % (name,))
        elif name in names:
            err("name", "%r is used by two tenants; tenant names must be unique" % name)
        else:
            names.add(name)

        namespaces = tenant.get("namespaces", [name])
        if not isinstance(namespaces, list) or not namespaces:
            err("namespaces", "give a non-empty list of namespace names")
            namespaces = []
        for namespace in namespaces:
            if not is_dns_label(namespace):
                err("namespaces", "%r is not a valid namespace name (lower-case DNS label)" % (namespace,))
            elif namespace in RESERVED_NAMESPACES:
                err("namespaces", "%r is a system namespace; give the tenant its own" % namespace)
            elif namespace in owners and owners[namespace] != index:
                err("namespaces", "%r already belongs to tenant %r; a namespace belongs to one tenant"
                    % (namespace, tenants[owners[namespace]].get("name")))
            else:
                owners[namespace] = index

        resource = tenant.get("gpu_resource", GPU_RESOURCE)
        if not is_accelerator_resource(resource):
            err("gpu_resource", "%r is not an accelerator resource; use nvidia.com/gpu or "
                "nvidia.com/mig-<profile> such as nvidia.com/mig-2g.20gb" % (resource,))

        gpus = tenant.get("gpus")
        if not is_whole_number(gpus) or gpus < 0:
            err("gpus", "the guarantee must be a whole number of GPUs >= 0, got %r" % (gpus,))
            gpus = None
        elif is_accelerator_resource(resource):
            guaranteed[resource] = guaranteed.get(resource, 0) + gpus
            holders.setdefault(resource, []).append(name if isinstance(name, str) else "?")

        borrowing = tenant.get("borrowing_limit")
        if borrowing is not None:
            if not is_whole_number(borrowing) or borrowing < 0:
                err("borrowing_limit", "must be a whole number of GPUs >= 0 or null (no limit), got %r" % (borrowing,))
                borrowing = None
            elif not cohort:
                err("borrowing_limit", "needs a cohort to borrow from: set tenants_cohort or remove the limit")

        lending = tenant.get("lending_limit")
        if lending is not None:
            if not is_whole_number(lending) or lending < 0:
                err("lending_limit", "must be a whole number of GPUs >= 0 or null (lend all), got %r" % (lending,))
            elif gpus is not None and lending > gpus:
                err("lending_limit", "%d is more than the tenant's guarantee gpus=%d; a tenant lends only what it has"
                    % (lending, gpus))
            elif not cohort:
                err("lending_limit", "needs a cohort to lend to: set tenants_cohort or remove the limit")

        weight = tenant.get("weight", 1)
        if isinstance(weight, bool) or not isinstance(weight, numbers.Real) or not weight > 0:
            err("weight", "the fair-sharing weight must be a number > 0, got %r" % (weight,))

        admission = tenant.get("admission_fair_sharing", False)
        if not isinstance(admission, bool):
            err("admission_fair_sharing", "must be true or false, got %r" % (admission,))
        local_weights = tenant.get("local_queue_weights")
        if local_weights is not None:
            if not isinstance(local_weights, dict):
                err("local_queue_weights", "give a mapping of the tenant's namespace to a weight > 0, got %r"
                    % (local_weights,))
            else:
                if admission is not True:
                    err("local_queue_weights", "Kueue reads a LocalQueue's weight only for admission fair sharing; "
                        "set admission_fair_sharing: true or remove the weights")
                for key, value in sorted(local_weights.items(), key=lambda kv: str(kv[0])):
                    if key not in namespaces:
                        err("local_queue_weights", "%r is not one of the tenant's namespaces %s"
                            % (key, ", ".join(str(n) for n in namespaces)))
                    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not value > 0:
                        err("local_queue_weights", "%s: the weight must be a number > 0, got %r (a 0 makes the "
                            "queue's usage infinite, so it goes last for ever; before the fix of "
                            "kubernetes-sigs/kueue#13479 it went first while idle)" % (key, value))
                        continue
                    try:
                        canonical_quantity(value)
                    except ValueError:
                        err("local_queue_weights", "%s: %r cannot be written as a Kubernetes quantity; give a "
                            "finite weight such as 2 or 0.5" % (key, value))

        max_gpus = tenant.get("max_gpus")
        if max_gpus is not None:
            if not is_whole_number(max_gpus) or max_gpus < 0:
                err("max_gpus", "must be a whole number of GPUs, got %r" % (max_gpus,))
            elif gpus is not None and max_gpus < gpus:
                err("max_gpus", "%d is below the guarantee gpus=%d; the ResourceQuota would block the guarantee"
                    % (max_gpus, gpus))

        pods = tenant.get("pods")
        if pods is not None:
            if not is_whole_number(pods) or pods < 0:
                err("pods", "the guarantee must be a whole number of pods >= 0, got %r" % (pods,))
                pods = None
            elif gpus is not None and pods < gpus:
                err("pods", "%d pod slots cannot hold the guarantee of %d GPUs (one pod each at least); raise pods"
                    % (pods, gpus))
        max_pods = tenant.get("max_pods")
        if max_pods is not None:
            if not is_whole_number(max_pods) or max_pods < 0:
                err("max_pods", "must be a whole number of pods >= 0, got %r" % (max_pods,))
            elif pods is not None and max_pods < pods:
                err("max_pods", "%d is below the guarantee pods=%d; the ResourceQuota would block the guarantee"
                    % (max_pods, pods))
        max_jobs = tenant.get("max_jobs")
        if max_jobs is not None and (not is_whole_number(max_jobs) or max_jobs < 1):
            err("max_jobs", "must be a whole number of Jobs >= 1, got %r" % (max_jobs,))

        groups = tenant.get("groups", [name])
        if not isinstance(groups, list) or not all(isinstance(g, str) and g for g in groups):
            err("groups", "give a list of RBAC group names")

        classes = tenant.get("priority_classes")
        if classes is not None:
            if not isinstance(classes, list) or not all(isinstance(c, str) and c for c in classes):
                err("priority_classes", "give a list of WorkloadPriorityClass names")
            elif class_names is not None and set(classes) - set(class_names):
                err("priority_classes", "%s: not a WorkloadPriorityClass of the platform; use some of %s "
                    "(tenants_workload_priority_classes)" % (", ".join(sorted(set(classes) - set(class_names))),
                                                             ", ".join(class_names) or "none"))

        for field, message in resource_quota_errors(tenant.get("resource_quota"), resource):
            err(field, message)

        for field in ("cpu", "memory"):
            value = tenant.get(field)
            if value is None:
                continue
            try:
                if isinstance(value, bool) or not isinstance(value, (str, int, float)):
                    raise ValueError(value)
                amount = parse_quantity(value)
                if not amount.is_finite() or amount < 0:
                    raise ValueError(value)
            except (ValueError, ArithmeticError):
                err(field, "%r is not a Kubernetes quantity >= 0 (for example 16 or 64Gi)" % (value,))
                continue
            explicit[field] += amount * (1000 if field == "cpu" else 1)

        # What passed the checks above must also be writable: apimachinery writes a multiple of 10^21 (1000E)
        # as its bare mantissa, another value (common/quantity.py).
        for field in ("gpus", "borrowing_limit", "lending_limit", "weight", "max_gpus", "pods", "max_pods",
                      "max_jobs", "cpu", "memory"):
            try:
                if isinstance(tenant.get(field), (str, numbers.Real)) and not isinstance(tenant.get(field), bool):
                    canonical_quantity(tenant[field])
            except ValueError as exc:
                if "cannot write" in str(exc):
                    err(field, "%r is too large to be written as a Kubernetes quantity" % (tenant[field],))

    if capacity is not None:
        for resource, total in sorted(guaranteed.items()):
            offered = capacity.get(resource, 0)
            if total > offered:
                errors.append(
                    "%s: the guarantees (gpus) of %s add up to %d %s but %s; lower them"
                    % (where, ", ".join(holders[resource]), total, resource,
                       "the cluster's nodes offer %d" % offered if offered else "no node offers it")
                )
        for field, unit in (("cpu", "millicores"), ("memory", "bytes")):
            if field in capacity and explicit[field] > capacity[field]:
                errors.append("%s: the %s guarantees add up to %d %s but the GPU nodes have %d; lower them"
                              % (where, field, explicit[field], unit, capacity[field]))
        if not errors and limit_range and "cpu" in capacity and "memory" in capacity:
            errors.extend(_default_request_errors(tenants, capacity, limit_range, class_names or []))
        if not errors and "pods" in capacity:
            errors.extend(_pod_slot_errors(tenants, capacity))
    return errors


def _pod_slot_errors(tenants, capacity):
    """The pods guarantees, defaults included, must fit the GPU nodes' pod slots for tenants, and each hard
    maximum must hold its guarantee (else Kueue admits pods the ResourceQuota then refuses)."""
    errors = []
    normalised = normalise(tenants, capacity)
    total = sum(t["pods"] for t in normalised)
    if total > capacity["pods"]:
        errors.append("tenants_list: the pods guarantees (defaults included: at least one slot per guaranteed GPU) "
                      "add up to %d but the GPU nodes have %d pod slots for tenants (allocatable pods less "
                      "tenants_isolation.pods_reserved_per_node on each node); lower the guarantees, or give the "
                      "nodes more pod slots" % (total, capacity["pods"]))
    for index, tenant in enumerate(normalised):
        if tenant["max_pods"] < tenant["pods"]:
            errors.append("tenants_list[%d] (%s).max_pods: %d is below the pods guarantee %d; the ResourceQuota would "
                          "refuse pods Kueue admitted; raise max_pods"
                          % (index, tenant["name"], tenant["max_pods"], tenant["pods"]))
    return errors


def priority_class_errors(classes):
    """Check the platform's WorkloadPriorityClasses (``tenants_workload_priority_classes``): a list of
    ``{"name": DNS label, "value": int32 (Kueue's WorkloadPriorityClass value), "description": str}`` with unique
    names. Returns messages naming the entry and field; never raises."""
    where = "tenants_workload_priority_classes"
    if not isinstance(classes, list):
        return ["%s: give a list of {name, value, description} (an empty list for none)" % where]
    errors, names = [], set()
    for index, entry in enumerate(classes):
        at = "%s[%d]" % (where, index)
        if not isinstance(entry, dict):
            errors.append("%s: must be a mapping with name and value" % at)
            continue
        errors.extend(unknown_field_errors(at, entry, ("name", "value", "description")))
        name = entry.get("name")
        if not is_dns_label(name):
            errors.append("%s.name: %r is not a lower-case DNS label" % (at, name))
        elif name in names:
            errors.append("%s.name: %r is defined twice" % (at, name))
        names.add(name)
        value = entry.get("value")
        if not is_whole_number(value) or not -2 ** 31 <= value < 2 ** 31:
            errors.append("%s.value: the priority must be a 32-bit integer, got %r" % (at, value))
        if not isinstance(entry.get("description", ""), str):
            errors.append("%s.description: must be a string" % at)
    return errors


def _is_extended_resource(name):
    """True for an extended resource name such as ``nvidia.com/gpu``: a domain-prefixed name outside
    ``kubernetes.io`` (object counts ``count/...`` are not resources)."""
    if "/" not in name or name.startswith("count/"):
        return False
    domain = name.split("/", 1)[0]
    return "." in domain and not (domain == "kubernetes.io" or domain.endswith(".kubernetes.io"))


def resource_quota_errors(hard, resource):
    """Check a tenant's extra ResourceQuota ``spec.hard`` entries; ``resource`` is its accelerator resource.

    Returns ``[(field, message)]``. Kubernetes enforces an extended resource only under ``requests.<name>``;
    the ``requests.<accelerator>`` entry itself comes from ``max_gpus``.
    """
    if hard is None:
        return []
    field = "resource_quota"
    if not isinstance(hard, dict):
        return [(field, "give a mapping of ResourceQuota spec.hard entries, such as {'requests.cpu': '64'}")]
    problems = []
    for key, value in sorted(hard.items(), key=lambda item: str(item[0])):
        at = "%s[%r]" % (field, key)
        if not isinstance(key, str) or not key:
            problems.append((at, "a ResourceQuota key is a resource name such as requests.cpu"))
            continue
        bare = key.split(".", 1)[1] if key.startswith(("requests.", "limits.")) else key
        if _is_extended_resource(bare) and not key.startswith("requests."):
            problems.append((at, "Kubernetes never enforces an extended resource under this key (it accepts it "
                             "silently); write requests.%s" % bare))
        elif key == "requests." + str(resource):
            problems.append((at, "the tenant's own accelerator is limited by max_gpus; set max_gpus instead"))
        elif key in OWN_QUOTA_KEYS:
            problems.append((at, "fairgpu sets this entry from the tenant's %s; set %s instead"
                             % (OWN_QUOTA_KEYS[key], OWN_QUOTA_KEYS[key])))
        try:
            if isinstance(value, bool) or not isinstance(value, (str, int)) or parse_quantity(value) < 0:
                raise ValueError(value)
            canonical_quantity(value)
        except (ValueError, ArithmeticError):
            problems.append((at, "%r is not a Kubernetes quantity >= 0" % (value,)))
    return problems


def _default_request_errors(tenants, capacity, limit_range, class_names):
    """A tenant with GPUs guaranteed whose CPU or memory guarantee is below one default container request
    could not run one pod within its guarantee."""
    errors = []
    normalised = normalise(tenants, capacity, class_names)
    for index, tenant in enumerate(normalised):
        if not tenant["gpus"]:
            continue
        for field in ("cpu", "memory"):
            try:
                request = parse_quantity(limit_range[field])
            except (KeyError, TypeError, ValueError, ArithmeticError):
                errors.append("tenants_default_container_resources.%s: %r is not a Kubernetes quantity"
                              % (field, limit_range.get(field)))
                continue
            if parse_quantity(tenant[field]) < request:
                errors.append(
                    "tenants_list[%d] (%s).%s: the guarantee %s is below one container's default request %s "
                    "(tenants_default_container_resources.%s), so not even one pod fits in it; raise %s or lower "
                    "the default" % (index, tenant["name"], field, tenant[field], limit_range[field], field, field))
    return errors


def normalise(tenants, capacity, priority_classes=(), max_jobs=DEFAULT_MAX_JOBS):
    """Fill every default of valid ``tenants`` (see the module docstring); returns new dicts.

    ``capacity``: accelerator resource -> total on the cluster (ints), plus ``cpu`` in millicores and
    ``memory`` in bytes for the default CPU and memory guarantees, ``pods`` (pod slots for tenants) for the
    default pods guarantee and ``per_node`` (accelerator resource -> the most one node offers) for the largest
    pod; ``priority_classes``: the platform's WorkloadPriorityClass names, the default of a tenant's
    ``priority_classes``; ``max_jobs``: the default of a tenant's ``max_jobs``. Call ``tenant_errors`` first.

    Besides the fields, each tenant gets ``max_gpus_per_pod``: the most devices one pod may ask for, the smaller
    of ``max_gpus`` and the largest node's devices (LimitRange maximum per container and per pod; a larger pod
    would be admitted by Kueue and never scheduled).
    """
    result = []
    pod_slots = capacity.get("pods", 0)
    per_node = capacity.get("per_node") or {}
    for tenant in tenants:
        resource = tenant.get("gpu_resource", GPU_RESOURCE)
        total = capacity.get(resource, 0)
        borrowing = tenant.get("borrowing_limit")
        gpus = tenant["gpus"]
        if tenant.get("max_gpus") is not None:
            max_gpus = tenant["max_gpus"]
        elif borrowing is not None:
            max_gpus = gpus + borrowing
        else:
            max_gpus = max(total, gpus)
        fraction = float(gpus) / total if total else 0.0
        pods = tenant["pods"] if tenant.get("pods") is not None else max(gpus, int(pod_slots * fraction))
        entry = {
            "name": tenant["name"],
            "namespaces": list(tenant.get("namespaces", [tenant["name"]])),
            "gpus": gpus,
            "borrowing_limit": borrowing,
            "lending_limit": tenant.get("lending_limit"),
            "weight": tenant.get("weight", 1),
            "admission_fair_sharing": tenant.get("admission_fair_sharing", False),
            "local_queue_weights": dict(tenant.get("local_queue_weights") or {}),
            "max_gpus": max_gpus,
            "max_gpus_per_pod": min(max_gpus, per_node.get(resource, max_gpus)),
            "gpu_resource": resource,
            "groups": list(tenant.get("groups", [tenant["name"]])),
            "priority_classes": list(tenant.get("priority_classes", priority_classes)),
            "resource_quota": dict(tenant.get("resource_quota") or {}),
            "pods": pods,
            "max_pods": tenant["max_pods"] if tenant.get("max_pods") is not None else max(pods, pod_slots),
            "max_jobs": tenant["max_jobs"] if tenant.get("max_jobs") is not None else max_jobs,
            # Canonical quantities (common/quantity.py): a tenant's own value keeps its format ("64G" stays
            # decimal); a share of the nodes is written in cores and in binary bytes, rounded down to whole MiB.
            "cpu": canonical_quantity(tenant["cpu"] if tenant.get("cpu") is not None
                                      else Decimal(int(capacity.get("cpu", 0) * fraction)) / 1000),
            "memory": canonical_quantity(tenant["memory"] if tenant.get("memory") is not None
                                         else int(capacity.get("memory", 0) * fraction) // MIB * MIB, binary=True),
        }
        result.append(entry)
    return result
