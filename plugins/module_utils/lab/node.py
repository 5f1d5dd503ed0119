# -*- coding: utf-8 -*-
# Copyright: fairgpu maintainers
# Apache License 2.0 (see LICENSE)
"""The simulated GPU layer of the embedded cluster: from a kwok node's simulated hardware to what the
NVIDIA device plugin and GPU feature discovery publish. Pure logic, no cluster access.

A simulated node describes its hardware in annotations (written by the ``cluster`` role, provider kwok):

- ``fairgpu.io/simulated-gpu-product``: a ``nvidia.com/gpu.product`` value from ``gpu_catalog.GPU_MODELS``
- ``fairgpu.io/simulated-gpu-count``: whole GPUs on the node (integer >= 1)
- ``fairgpu.io/simulated-gpu-memory-mib``: optional, per-GPU memory in MiB (default: the catalogue's)
- ``fairgpu.io/simulated-gpu-sharing``: optional, JSON ``{"strategy": "time-slicing" | "mps", "replicas": N}``: the
  device plugin's sharing config (``apply_sharing``)

With MIG, this layer also plays NVIDIA's MIG manager: a node labelled ``nvidia.com/mig.config=<name>`` gets the
layout of config ``<name>`` of the mig-parted config (``mig_layout``), or ``nvidia.com/mig.config.state=failed``
(and keeps its previous layout, as the real manager does) when the layout cannot be created on its GPUs. What it
applied is kept in annotations: ``fairgpu.io/simulated-mig-layout`` (JSON, one item per GPU: null or
``{profile: count}``) and ``fairgpu.io/simulated-nvidia-smi`` (JSON ``{command: stdout}`` of the node's
nvidia-smi in the real formats, for ``nvidia_smi_mig_info``).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

from ansible_collections.fairgpu.tenancy.plugins.module_utils.common.quantity import canonical_quantity
from ansible_collections.fairgpu.tenancy.plugins.module_utils.common.names import (
    GPU_RESOURCE,
    MIG_CONFIG_LABEL,
    MIG_RESOURCE_PREFIX,
    MIG_STATE_LABEL,
    MIG_STRATEGY_LABEL,
    SIMULATED_GPU_ANNOTATION_PREFIX,
    SIMULATED_MIG_LAYOUT_ANNOTATION,
    SIMULATED_NVIDIA_SMI_ANNOTATION,
)
from ansible_collections.fairgpu.tenancy.plugins.module_utils.cluster.node_pools import apply_sharing
from ansible_collections.fairgpu.tenancy.plugins.module_utils.mig import layout as mig_layout
from ansible_collections.fairgpu.tenancy.plugins.module_utils.mig.catalog import GpuCatalogError, gfd_labels
from ansible_collections.fairgpu.tenancy.plugins.module_utils.lab.nvidia_smi import simulated_nvidia_smi

ANNOTATION_PREFIX = SIMULATED_GPU_ANNOTATION_PREFIX
LAYOUT_ANNOTATION = SIMULATED_MIG_LAYOUT_ANNOTATION
NVIDIA_SMI_ANNOTATION = SIMULATED_NVIDIA_SMI_ANNOTATION


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


def owned_label(name):
    """True for the labels GFD and the MIG manager own (``nvidia.com/mig.config`` is the user's choice)."""
    return (name.startswith((GPU_RESOURCE + ".", MIG_RESOURCE_PREFIX)) or
            name in (MIG_STRATEGY_LABEL, "nvidia.com/mig.capable", MIG_STATE_LABEL))


def desired_node(name, annotations, labels, mig_strategy, mig_config=None):
    """What the device plugin, GFD and (with MIG) the MIG manager make of simulated node ``name``.

    ``annotations``, ``labels``: the node's current ones; ``mig_config``: the MIG manager's mig-parted config
    (dict) or None (no MIG manager). Returns ``{"labels", "resources": {name: count}, "annotations",
    "mig_state": None | "success" | "failed", "errors": [str]}``; ``errors`` says why a layout failed.
    Raises SimulatedNodeError for missing or invalid hardware annotations.
    """
    desired_gpu_state(annotations, mig_strategy)  # checks the hardware annotations
    product = annotations[ANNOTATION_PREFIX + "product"]
    count = _int_annotation(annotations, "count", required=True)
    layout = json.loads(annotations.get(LAYOUT_ANNOTATION) or "null")
    selected = labels.get(MIG_CONFIG_LABEL) if mig_config is not None else None
    state, errors = None, []
    if selected is not None:
        # Like mig-parted: the whole file must parse, only the selected config must fit (mig_config_errors).
        errors = mig_layout.mig_config_errors(mig_config, product, count, "mixed", selected=selected)
        if not errors and selected not in mig_config.get("mig-configs", {}):
            errors = ["%s=%s: the MIG manager's config has no such config; it has %s"
                      % (MIG_CONFIG_LABEL, selected, ", ".join(sorted(mig_config["mig-configs"])))]
        if not errors:
            # Like the real MIG manager, this knows no strategy: a layout that does not suit `single` is applied,
            # and GFD then labels the node <model>-MIG-INVALID.
            layout = mig_layout.applied_layout(mig_config, selected, product, count)
        state = "failed" if errors else "success"
    try:
        wanted = mig_layout.gfd_mig_labels(product, count, layout, mig_strategy)
        resources = mig_layout.device_plugin_resources(product, count, layout, mig_strategy)
        outputs = simulated_nvidia_smi(name, product, count, layout)
    except mig_layout.MigLayoutError as exc:
        raise SimulatedNodeError(str(exc))
    memory_mib = _int_annotation(annotations, "memory-mib", required=False)
    if memory_mib is not None and not any(layout or []):
        wanted["nvidia.com/gpu.memory"] = str(memory_mib)
    try:
        sharing = json.loads(annotations.get(ANNOTATION_PREFIX + "sharing") or "null")
    except ValueError:
        raise SimulatedNodeError("annotation %ssharing must be JSON {strategy, replicas}" % ANNOTATION_PREFIX)
    wanted, resources = apply_sharing(wanted, resources, sharing)
    if state:
        wanted[MIG_STATE_LABEL] = state
    elif mig_config is None and MIG_STATE_LABEL in labels:
        wanted[MIG_STATE_LABEL] = labels[MIG_STATE_LABEL]  # without the MIG manager's config, keep its word
    return {"labels": wanted, "resources": resources, "mig_state": state, "errors": errors,
            "annotations": {LAYOUT_ANNOTATION: json.dumps(layout, sort_keys=True),
                            NVIDIA_SMI_ANNOTATION: json.dumps(outputs, sort_keys=True)}}


def node_patches(current_labels, current_status, labels, resources):
    """Compute the minimal patches that bring a node to ``labels`` and ``resources``.

    Returns ``(label_patch, status_patch, diff)``: ``label_patch`` maps only labels whose value differs;
    ``status_patch`` is ``{"capacity": {...}, "allocatable": {...}}`` with only differing resources (quantities
    as the API server writes them back, ``canonical_quantity``) or ``{}``; ``diff`` is ``{"before": ...,
    "after": ...}`` over the keys this layer owns.
    """
    label_patch = {k: v for k, v in labels.items() if current_labels.get(k) != v}
    label_patch.update((k, None) for k in current_labels if owned_label(k) and k not in labels)
    status_patch = {}
    keys = sorted(set(labels) | set(label_patch))
    before = {"labels": {k: current_labels.get(k) for k in keys}}
    after = {"labels": {k: labels.get(k) for k in keys}}
    for field in ("capacity", "allocatable"):
        current = current_status.get(field) or {}
        wanted = {name: canonical_quantity(count, milli=True) for name, count in resources.items()}
        # Accelerator resources of an earlier layout go away (None removes them in a merge patch).
        wanted.update((name, None) for name in current if name.startswith("nvidia.com/") and name not in resources)
        changed = {name: value for name, value in wanted.items() if current.get(name) != value}
        if changed:
            status_patch[field] = changed
        before[field] = {name: current.get(name) for name in sorted(wanted)}
        after[field] = dict(sorted(wanted.items()))
    return label_patch, status_patch, {"before": before, "after": after}
