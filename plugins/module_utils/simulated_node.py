# -*- coding: utf-8 -*-
# Copyright: fairgpu maintainers
# Apache License 2.0 (see LICENSE)
"""The simulated GPU layer of the embedded cluster: from a kwok node's simulated hardware to what the
NVIDIA device plugin and GPU feature discovery publish. Pure logic, no cluster access.

A simulated node describes its hardware in annotations (written by the ``cluster`` role, provider kwok):

- ``fairgpu.io/simulated-gpu-product``: a ``nvidia.com/gpu.product`` value from ``gpu_catalog.GPU_MODELS``
- ``fairgpu.io/simulated-gpu-count``: whole GPUs on the node (integer >= 1)
- ``fairgpu.io/simulated-gpu-memory-mib``: optional, per-GPU memory in MiB (default: the catalogue's)
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.fairgpu.tenancy.plugins.module_utils.gpu_catalog import GpuCatalogError, gfd_labels

ANNOTATION_PREFIX = "fairgpu.io/simulated-gpu-"
GPU_RESOURCE = "nvidia.com/gpu"


class SimulatedNodeError(ValueError):
    """Raised when a node's simulated hardware annotations are missing or invalid."""


def _int_annotation(annotations, key, required):
    raw = annotations.get(ANNOTATION_PREFIX + key)
    if raw is None:
        if required:
            raise SimulatedNodeError(
                "annotation %s%s is missing: the node was not created by the cluster role's kwok provider"
                % (ANNOTATION_PREFIX, key)
            )
        return None
    try:
        return int(raw)
    except (TypeError, ValueError):
        raise SimulatedNodeError("annotation %s%s must be an integer, got %r" % (ANNOTATION_PREFIX, key, raw))


def desired_gpu_state(annotations, mig_strategy):
    """Return ``(labels, resources)`` for a node with these annotations.

    ``labels``: GFD label name -> value; ``resources``: ``{"nvidia.com/gpu": <whole GPUs>}``.
    Raises SimulatedNodeError for missing or invalid annotations (including an unknown product).
    """
    product = annotations.get(ANNOTATION_PREFIX + "product")
    if not product:
        raise SimulatedNodeError(
            "annotation %sproduct is missing: the node was not created by the cluster role's kwok provider"
            % ANNOTATION_PREFIX
        )
    count = _int_annotation(annotations, "count", required=True)
    memory_mib = _int_annotation(annotations, "memory-mib", required=False)
    try:
        labels = gfd_labels(product, count, mig_strategy=mig_strategy, memory_mib=memory_mib)
    except GpuCatalogError as exc:
        raise SimulatedNodeError(str(exc))
    return labels, {GPU_RESOURCE: count}


def node_patches(current_labels, current_status, labels, resources):
    """Compute the minimal patches that bring a node to ``labels`` and ``resources``.

    Returns ``(label_patch, status_patch, diff)``: ``label_patch`` maps only labels whose value differs;
    ``status_patch`` is ``{"capacity": {...}, "allocatable": {...}}`` with only differing resources (quantities
    as strings, as the API stores them) or ``{}``; ``diff`` is ``{"before": ..., "after": ...}`` over the keys
    this layer owns.
    """
    label_patch = {k: v for k, v in labels.items() if current_labels.get(k) != v}
    status_patch = {}
    before = {"labels": {k: current_labels.get(k) for k in sorted(labels)}}
    after = {"labels": dict(sorted(labels.items()))}
    for field in ("capacity", "allocatable"):
        current = current_status.get(field) or {}
        wanted = {name: str(count) for name, count in resources.items()}
        changed = {name: value for name, value in wanted.items() if current.get(name) != value}
        if changed:
            status_patch[field] = changed
        before[field] = {name: current.get(name) for name in sorted(wanted)}
        after[field] = dict(sorted(wanted.items()))
    return label_patch, status_patch, {"before": before, "after": after}
