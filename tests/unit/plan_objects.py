"""Picking objects out of a tenant plan's ``objects`` in the unit tests."""

from ansible_collections.fairgpu.tenancy.plugins.module_utils.common.names import RESOURCE_QUOTA
from ansible_collections.fairgpu.tenancy.plugins.module_utils.kueue.objects import COUNTED_OBJECTS

# The object counts every fairgpu-gpu-quota holds by default (tenants_isolation max_objects).
COUNTED = {key: "100" for key in COUNTED_OBJECTS}


def by_kind(objects, kind):
    return [o for o in objects if o["kind"] == kind]


def gpu_quotas(objects):
    """The namespaces' ResourceQuota fairgpu-gpu-quota (the PriorityClass quota beside it left out)."""
    return [o for o in by_kind(objects, "ResourceQuota") if o["metadata"]["name"] == RESOURCE_QUOTA]
