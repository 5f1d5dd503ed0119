# -*- coding: utf-8 -*-
# Copyright: fairgpu maintainers
# Apache License 2.0 (see LICENSE)
"""GPU models and the node labels NVIDIA GPU feature discovery (GFD) publishes for them.

Pure logic, no cluster access. The label names and value shapes follow GFD as deployed by the NVIDIA GPU
Operator; ``tests/unit/test_gpu_catalog.py`` checks them against real label sets captured on an H100 node
(``shared/fixtures/node-labels/``).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.fairgpu.tenancy.plugins.module_utils.common.names import (
    GPU_COUNT_LABEL,
    GPU_PRESENT_LABEL,
    GPU_PRODUCT_LABEL,
    GPU_REPLICAS_LABEL,
    GPU_SHARING_STRATEGY_LABEL,
    MIG_STRATEGY_LABEL,
)

# product label value -> facts GFD reports for one GPU of that model.
#   memory_mib: ``nvidia.com/gpu.memory`` (MiB, as nvidia-smi reports total framebuffer memory)
#   family, compute: ``nvidia.com/gpu.family``, ``nvidia.com/gpu.compute.{major,minor}``
#   mig_capable: ``nvidia.com/mig.capable``
GPU_MODELS = {
    "NVIDIA-A100-SXM4-40GB": {"memory_mib": 40960, "family": "ampere", "compute": (8, 0), "mig_capable": True},
    "NVIDIA-A100-SXM4-80GB": {"memory_mib": 81920, "family": "ampere", "compute": (8, 0), "mig_capable": True},
    "NVIDIA-H100-80GB-HBM3": {"memory_mib": 81559, "family": "hopper", "compute": (9, 0), "mig_capable": True},
    "NVIDIA-H100-PCIe": {"memory_mib": 81559, "family": "hopper", "compute": (9, 0), "mig_capable": True},
    "NVIDIA-H200": {"memory_mib": 143771, "family": "hopper", "compute": (9, 0), "mig_capable": True},
    "NVIDIA-A30": {"memory_mib": 24576, "family": "ampere", "compute": (8, 0), "mig_capable": True},
    "Tesla-T4": {"memory_mib": 15360, "family": "turing", "compute": (7, 5), "mig_capable": False},
    "NVIDIA-L4": {"memory_mib": 23034, "family": "ada-lovelace", "compute": (8, 9), "mig_capable": False},
}

MIG_STRATEGIES = ("none", "single", "mixed")


class GpuCatalogError(ValueError):
    """Raised for a GPU model or node description that GFD would never report."""


def gpu_model(product):
    """Return the facts dict of ``product`` (a ``nvidia.com/gpu.product`` value).

    Raises GpuCatalogError naming the known products when ``product`` is not one of them.
    """
    try:
        return GPU_MODELS[product]
    except KeyError:
        raise GpuCatalogError(
            "unknown GPU product %r: use one of %s" % (product, ", ".join(sorted(GPU_MODELS)))
        )


def gfd_labels(product, count, mig_strategy="single", memory_mib=None):
    """Labels GFD sets on a node with ``count`` whole GPUs of ``product`` and MIG disabled.

    ``memory_mib`` overrides the catalogue's per-GPU memory (MiB). ``mig_strategy`` is the GPU Operator's
    ``mig.strategy`` value; ``none`` omits the ``nvidia.com/mig.strategy`` label as GFD does.
    Returns a dict of label name -> string value. Raises GpuCatalogError for an unknown product, a count
    below 1 or an unknown strategy.
    """
    model = gpu_model(product)
    if not isinstance(count, int) or isinstance(count, bool) or count < 1:
        raise GpuCatalogError("GPU count must be an integer >= 1, got %r" % (count,))
    if mig_strategy not in MIG_STRATEGIES:
        raise GpuCatalogError(
            "unknown MIG strategy %r: use one of %s" % (mig_strategy, ", ".join(MIG_STRATEGIES))
        )
    labels = {
        GPU_PRESENT_LABEL: "true",
        GPU_PRODUCT_LABEL: product,
        GPU_COUNT_LABEL: str(count),
        "nvidia.com/gpu.memory": str(memory_mib if memory_mib is not None else model["memory_mib"]),
        "nvidia.com/gpu.family": model["family"],
        "nvidia.com/gpu.compute.major": str(model["compute"][0]),
        "nvidia.com/gpu.compute.minor": str(model["compute"][1]),
        GPU_REPLICAS_LABEL: "1",
        GPU_SHARING_STRATEGY_LABEL: "none",
        "nvidia.com/mig.capable": "true" if model["mig_capable"] else "false",
    }
    if mig_strategy != "none":
        labels[MIG_STRATEGY_LABEL] = mig_strategy
    return labels
