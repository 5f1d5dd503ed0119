# -*- coding: utf-8 -*-
# Copyright: fairgpu maintainers
# Apache License 2.0 (see LICENSE)
"""A tenant's quota on several GPU products (issue 14 item 3). Pure logic, no cluster access.

The tenant field ``products`` maps a GPU product (a ``nvidia.com/gpu.product`` value) to that product's quota::

    products:
      NVIDIA-H100-80GB-HBM3: {gpus: 8, borrowing_limit: 8, lending_limit: 8}
      NVIDIA-A100-SXM4-80GB: {gpus: 4}

``gpus`` (integer >= 0, required), ``borrowing_limit`` and ``lending_limit`` (integer >= 0 or null: no limit /
all) mean what the tenant-level fields mean, for that product's ResourceFlavor only. A tenant with ``products``
gives none of ``gpus``, ``borrowing_limit`` and ``lending_limit`` itself: ``flatten`` derives them (the sums;
null when one product has no limit) so that every tenant-level check and default (``max_gpus``, ``cpu``,
``memory``, ``pods``, the ResourceQuota) works on the tenant's totals over its products. The order of ``products``
is the tenant's order of preference: Kueue tries a ClusterQueue's flavors in their order.

A tenant without ``products`` (the simple form, ``gpus: 8``) gets the one product whose nodes offer its
``gpu_resource``; on a cluster where several products offer it, it must say ``products``.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.fairgpu.tenancy.plugins.module_utils.common.fields import unknown_field_errors
from ansible_collections.fairgpu.tenancy.plugins.module_utils.common.names import GPU_RESOURCE
from ansible_collections.fairgpu.tenancy.plugins.module_utils.tenants.spec import is_whole_number

PRODUCT_FIELDS = ("gpus", "borrowing_limit", "lending_limit")
GPU_UNITS = ("physical", "replicas")
# A ClusterQueue resource group holds at most 64 flavors (apis/kueue/v1beta2/clusterqueue_types.go, ResourceGroup
# flavors MaxItems=64, Kueue v1beta2).
MAX_PRODUCTS = 64


def product_errors(tenants, products_present=None):
    """Check the ``products`` field of each tenant; messages name ``tenants_list[i] (name).products[product]``.
    ``products_present``: the GPU products of the nodes (None: not known, not checked). Never raises."""
    errors = []
    if not isinstance(tenants, list):
        return errors
    for index, tenant in enumerate(tenants):
        if isinstance(tenant, dict) and tenant.get("gpu_units", "physical") not in GPU_UNITS:
            errors.append("tenants_list[%d] (%s).gpu_units: %r is not physical or replicas"
                          % (index, tenant.get("name"), tenant.get("gpu_units")))
        if not isinstance(tenant, dict) or "products" not in tenant:
            continue
        at = "tenants_list[%d] (%s).products" % (index, tenant.get("name") if isinstance(tenant.get("name"), str) else "?")
        products = tenant["products"]
        if not isinstance(products, dict) or not products:
            errors.append("%s: give a mapping of GPU product (nvidia.com/gpu.product) to {gpus, borrowing_limit, "
                          "lending_limit}" % at)
            continue
        both = [field for field in PRODUCT_FIELDS if field in tenant]
        if both:
            errors.append("%s: give %s per product, not also for the tenant" % (at, ", ".join(both)))
        if len(products) > MAX_PRODUCTS:
            errors.append("%s: %d products; a Kueue resource group holds at most %d flavors"
                          % (at, len(products), MAX_PRODUCTS))
        for product, entry in products.items():
            where = "%s[%s]" % (at, product)
            if products_present is not None and product not in products_present:
                errors.append("%s: no GPU node has this product; the nodes have %s"
                              % (where, ", ".join(sorted(products_present)) or "none"))
            if not isinstance(entry, dict):
                errors.append("%s: give a mapping with gpus (and optionally borrowing_limit, lending_limit)" % where)
                continue
            errors.extend(unknown_field_errors(where, entry, PRODUCT_FIELDS))
            gpus = entry.get("gpus")
            if not is_whole_number(gpus) or gpus < 0:
                errors.append("%s.gpus: the guarantee must be a whole number of GPUs >= 0, got %r" % (where, gpus))
                gpus = None
            for field in ("borrowing_limit", "lending_limit"):
                value = entry.get(field)
                if value is not None and (not is_whole_number(value) or value < 0):
                    errors.append("%s.%s: must be a whole number >= 0 or null, got %r" % (where, field, value))
            lending = entry.get("lending_limit")
            if is_whole_number(lending) and gpus is not None and lending > gpus:
                errors.append("%s.lending_limit: %d is more than this product's guarantee gpus=%d"
                              % (where, lending, gpus))
    return errors


def flatten(tenant):
    """The tenant as the tenant-level checks see it: ``products`` replaced by the totals ``gpus``,
    ``borrowing_limit`` (null when a product has none) and ``lending_limit`` (null when no product has one; else
    what all products lend together). A tenant without ``products`` is returned as it is. Call
    ``product_errors`` first."""
    if not isinstance(tenant, dict) or "products" not in tenant:
        return tenant
    flat = {k: v for k, v in tenant.items() if k != "products"}
    entries = list(tenant["products"].values())
    flat["gpus"] = sum(e["gpus"] for e in entries)
    borrowing = [e.get("borrowing_limit") for e in entries]
    if all(b is not None for b in borrowing):
        flat["borrowing_limit"] = sum(borrowing)
    if any(e.get("lending_limit") is not None for e in entries):
        flat["lending_limit"] = sum(e["gpus"] if e.get("lending_limit") is None else e["lending_limit"]
                                    for e in entries)
    return flat


def product_quotas(tenant, normalised):
    """The normalised tenant's per-product quotas: ``[{"product", "gpus", "borrowing_limit", "lending_limit"}]`` in
    the tenant's order, from its ``products`` (``tenant``: the inventory entry), or None for the simple form."""
    if not isinstance(tenant.get("products"), dict):
        return None
    return [{"product": product, "gpus": entry["gpus"], "borrowing_limit": entry.get("borrowing_limit"),
             "lending_limit": entry.get("lending_limit")} for product, entry in tenant["products"].items()]


def split(total, weights):
    """Split the whole number ``total`` in proportion to ``weights`` (whole numbers): each part but the last is
    rounded down, the last takes the rest, so the parts add up to ``total``. Equal parts when all weights are 0."""
    weights = list(weights)
    if not weights:
        return []
    if not sum(weights):
        weights = [1] * len(weights)
    parts = [total * w // sum(weights) for w in weights[:-1]]
    return parts + [total - sum(parts)]


def guarantee_errors(normalised, capacity_products):
    """The guarantees on each (product, resource) must fit what that product's nodes offer (installed):
    ``capacity_products`` is ``{product: {resource: int}}``. Messages name the product. Never raises."""
    asked = {}
    for tenant in normalised:
        for entry in tenant["products"]:
            key = (entry["product"], tenant["gpu_resource"])
            asked.setdefault(key, []).append((tenant["name"], entry["gpus"]))
    errors = []
    for (product, resource), holders in sorted(asked.items()):
        total = sum(g for _name, g in holders)
        offered = (capacity_products.get(product) or {}).get(resource, 0)
        if total > offered:
            errors.append("tenants_list: the guarantees of %s on %s add up to %d %s but its nodes offer %d; lower them"
                          % (", ".join(n for n, g in holders if g), product, total, resource, offered))
    return errors


def kueue_units(tenant, sharing, products_present):
    """The tenant with its GPU figures in what Kueue counts. On shared GPUs (time-slicing or MPS, ``sharing``:
    ``{product: {"replicas", "strategy"}}`` from ``plan.cluster_capacity``) a node advertises physical x replicas
    devices and Kueue counts those; a tenant's figures are physical GPUs unless it says ``gpu_units: replicas``,
    so ``gpus``, ``borrowing_limit``, ``lending_limit`` and ``max_gpus`` (per product with ``products``) are
    multiplied by the product's replicas. ``products_present``: ``{product: {resource: int}}``, to find the
    product of a simple-form tenant. ``gpu_units`` is dropped. Returns ``(tenant, error or None)``; never raises
    on a tenant that passed ``product_errors``."""
    if not isinstance(tenant, dict):
        return tenant, None
    tenant = dict(tenant)
    physical = tenant.pop("gpu_units", "physical") == "physical"
    if not physical or not sharing:
        return tenant, None

    def scaled(entry, replicas, fields):
        return dict(entry, **{f: entry[f] * replicas for f in fields if is_whole_number(entry.get(f))})

    if isinstance(tenant.get("products"), dict):
        tenant["products"] = {product: scaled(entry, sharing.get(product, {}).get("replicas", 1), PRODUCT_FIELDS)
                              if isinstance(entry, dict) else entry
                              for product, entry in tenant["products"].items()}
        if tenant.get("max_gpus") is not None and any(p in sharing for p in tenant["products"]):
            return tenant, ("tenants_list (%s).max_gpus: with products on shared GPUs, give max_gpus in replicas "
                            "(gpu_units: replicas) or leave it to its default" % tenant.get("name"))
        return tenant, None
    resource = tenant.get("gpu_resource", GPU_RESOURCE)
    offering = [p for p, resources in products_present.items() if resource in resources]
    if len(offering) == 1 and offering[0] in sharing:
        fields = ("gpus", "borrowing_limit", "lending_limit", "max_gpus")
        tenant = scaled(tenant, sharing[offering[0]]["replicas"], fields)
    return tenant, None
