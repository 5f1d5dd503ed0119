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
                     share of the cluster's CPU and memory in proportion to its accelerators

Units: accelerators are whole GPUs (or whole MIG devices for a MIG resource).

Rules from upstream Kueue (kueue.x-k8s.io/v1beta2 ClusterQueue validation): ``borrowingLimit`` only with a
cohort; ``lendingLimit`` <= ``nominalQuota``; fairSharing ``weight`` >= 0 (fairgpu requires > 0: a zero weight
makes a tenant always the first to be preempted and never to borrow). From Kubernetes: ResourceQuota enforces
an extended resource only under its ``requests.`` name.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import numbers
import re

from ansible_collections.fairgpu.tenancy.plugins.module_utils.quantity import format_cpu, format_memory, parse_quantity

MIB = 1024 * 1024
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
GPU_RESOURCE = "nvidia.com/gpu"
MIG_RESOURCE = re.compile(r"^nvidia\.com/mig-[1-7]g\.[0-9]+gb(\.me)?$")
KNOWN_FIELDS = (
    "name", "namespaces", "gpus", "borrowing_limit", "lending_limit", "weight", "max_gpus",
    "gpu_resource", "groups", "cpu", "memory",
)
# Namespaces a tenant must never own: Kueue's webhooks skip the first two, the rest are the system's.
RESERVED_NAMESPACES = ("kube-system", "kueue-system", "kube-public", "kube-node-lease", "default")


def is_whole_number(value):
    """True for an int that is not a bool."""
    return isinstance(value, int) and not isinstance(value, bool)


def is_dns_label(value):
    """True for a lower-case RFC 1123 DNS label of at most 63 characters."""
    return isinstance(value, str) and len(value) <= 63 and bool(DNS_LABEL.match(value))


def is_accelerator_resource(name):
    """True for ``nvidia.com/gpu`` and ``nvidia.com/mig-<profile>`` (``+me`` profiles appear as ``.me``)."""
    return name == GPU_RESOURCE or (isinstance(name, str) and bool(MIG_RESOURCE.match(name)))


def tenant_errors(tenants, capacity=None, cohort="fairgpu", preemption=None):
    """Validate ``tenants``; return a list of messages, each naming the tenant and field and saying the fix.

    ``capacity`` maps an accelerator resource name to what the cluster's nodes offer in all (ints), plus
    optionally ``cpu`` (millicores) and ``memory`` (bytes); None skips the capacity checks. ``cohort`` is the
    cohort every ClusterQueue joins (empty or None: no cohort); ``preemption`` the ClusterQueues'
    ``spec.preemption``. Never raises, whatever the input.
    """
    where = "tenants_list"
    if not isinstance(tenants, list) or not tenants:
        return ["%s: give a non-empty list of tenants (each with at least name and gpus)" % where]
    errors = []
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

        max_gpus = tenant.get("max_gpus")
        if max_gpus is not None:
            if not is_whole_number(max_gpus) or max_gpus < 0:
                err("max_gpus", "must be a whole number of GPUs, got %r" % (max_gpus,))
            elif gpus is not None and max_gpus < gpus:
                err("max_gpus", "%d is below the guarantee gpus=%d; the ResourceQuota would block the guarantee"
                    % (max_gpus, gpus))

        groups = tenant.get("groups", [name])
        if not isinstance(groups, list) or not all(isinstance(g, str) and g for g in groups):
            err("groups", "give a list of RBAC group names")

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
    return errors


def normalise(tenants, capacity):
    """Fill every default of valid ``tenants`` (see the module docstring); returns new dicts.

    ``capacity``: accelerator resource -> total on the cluster (ints), plus ``cpu`` in millicores and
    ``memory`` in bytes for the default CPU and memory guarantees. Call ``tenant_errors`` first.
    """
    result = []
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
        entry = {
            "name": tenant["name"],
            "namespaces": list(tenant.get("namespaces", [tenant["name"]])),
            "gpus": gpus,
            "borrowing_limit": borrowing,
            "lending_limit": tenant.get("lending_limit"),
            "weight": tenant.get("weight", 1),
            "max_gpus": max_gpus,
            "gpu_resource": resource,
            "groups": list(tenant.get("groups", [tenant["name"]])),
            "cpu": format_cpu(parse_quantity(tenant["cpu"]) * 1000 if tenant.get("cpu") is not None
                              else int(capacity.get("cpu", 0) * 1000 * fraction)),
            # Memory shares are rounded down to whole MiB.
            "memory": format_memory(parse_quantity(tenant["memory"]) if tenant.get("memory") is not None
                                    else int(capacity.get("memory", 0) * fraction) // MIB * MIB),
        }
        result.append(entry)
    return result
