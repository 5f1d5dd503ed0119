# -*- coding: utf-8 -*-
# Copyright: fairgpu maintainers
# Apache License 2.0 (see LICENSE)
"""Quota arithmetic over normalised tenants (``tenant_spec.normalise``): what Kueue's cohort rules let one
tenant hold. Pure logic. Devices are whole GPUs (or MIG devices) of the tenant's accelerator resource.

Rules (Kueue, ClusterQueue resources in a cohort without Cohort-level quota): a ClusterQueue can always use
its nominalQuota; above it, it borrows what the other members lend (their lendingLimit, or their whole
nominalQuota when unset) and not in use, up to its own borrowingLimit (unlimited when unset).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


def lendable(tenant):
    """Devices a tenant lends to its cohort when idle."""
    return tenant["gpus"] if tenant.get("lending_limit") is None else min(tenant["lending_limit"], tenant["gpus"])


def reachable(tenants, name):
    """Devices tenant ``name`` can hold when every other tenant of the same resource is idle.

    min(max_gpus, gpus + min(borrowing_limit, what the others lend)). Raises KeyError for an unknown name.
    """
    tenant = next((t for t in tenants if t["name"] == name), None)
    if tenant is None:
        raise KeyError("no tenant named %r" % name)
    others = sum(lendable(t) for t in tenants if t["name"] != name and t["gpu_resource"] == tenant["gpu_resource"])
    borrow = others if tenant.get("borrowing_limit") is None else min(others, tenant["borrowing_limit"])
    return min(tenant["max_gpus"], tenant["gpus"] + borrow)
