# -*- coding: utf-8 -*-
# Copyright: fairgpu maintainers
# Apache License 2.0 (see LICENSE)
"""What a node's nvidia-smi says about MIG, and whether it matches a mig-parted layout: the logic of the
``nvidia_smi_mig_info`` module. Pure logic, no cluster access and no commands run.

Units: counts of GPUs, GPU instances and MIG devices. The device plugin's resources follow ``mig_layout``.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.fairgpu.tenancy.plugins.module_utils.mig import layout as mig_layout
from ansible_collections.fairgpu.tenancy.plugins.module_utils.mig import nvidia_smi
from ansible_collections.fairgpu.tenancy.plugins.module_utils.simulated.nvidia_smi import QUERY_GPU

# The nvidia-smi arguments whose output the module reads; -L is required, the others refine the tree.
COMMANDS = ("-L", "mig -lgi", "mig -lci", QUERY_GPU)


def node_layout(gpus, query=None):
    """Per-GPU layout from ``parse_list`` output: ``{profile: count}`` for a GPU with MIG devices, ``{}`` for a
    GPU whose ``mig.mode.current`` is Enabled without devices, None for MIG disabled (``query``:
    ``parse_query_gpu`` output; without it a GPU without MIG devices counts as disabled)."""
    enabled = {row["index"]: row.get("mig.mode.current") == "Enabled" for row in (query or [])}
    layout = []
    for gpu in nvidia_smi.profile_counts(gpus):
        layout.append(gpu["profiles"] if gpu["profiles"] or enabled.get(gpu["index"]) else None)
    return layout


def mig_info(outputs, expected_config=None, expected_name=None):
    """Summarise a node's nvidia-smi ``outputs`` (``{command: stdout}``, commands as in ``COMMANDS``).

    Returns ``{"product", "gpus": tree (``nvidia_smi.mig_tree``), "mig_enabled": [bool per GPU], "layout",
    "profile_counts": {profile: count on the node}, "resources": {"single": {...}, "mixed": {...}}}`` and, with
    ``expected_config`` (a mig-parted config) and ``expected_name`` (one of its configs), ``"matches"`` (bool) and
    ``"mismatches"`` (one message per GPU that differs). Raises NvidiaSmiParseError for unreadable output and
    MigLayoutError for an unknown model, a node with several models or an invalid expected config.
    """
    if "-L" not in outputs:
        raise nvidia_smi.NvidiaSmiParseError("the output of nvidia-smi -L is required")
    gpus = nvidia_smi.parse_list(outputs["-L"])
    gpu_instances = nvidia_smi.parse_gpu_instances(outputs["mig -lgi"]) if outputs.get("mig -lgi") else None
    compute_instances = nvidia_smi.parse_compute_instances(outputs["mig -lci"]) if outputs.get("mig -lci") else None
    query = nvidia_smi.parse_query_gpu(outputs[QUERY_GPU]) if outputs.get(QUERY_GPU) else None
    tree = nvidia_smi.mig_tree(gpus, gpu_instances, compute_instances)
    products = sorted({mig_layout.product_label(gpu["name"]) for gpu in tree})
    if len(products) != 1:
        raise mig_layout.MigLayoutError("the node has %s; fairgpu expects one GPU model per node"
                                        % (", ".join(products) or "no GPU"))
    product, count = products[0], len(tree)
    layout = node_layout(gpus, query)
    totals = {}
    for gpu in layout:
        for profile, number in (gpu or {}).items():
            totals[profile] = totals.get(profile, 0) + number
    result = {
        "product": product,
        "gpus": tree,
        "mig_enabled": [gpu is not None for gpu in layout],
        "layout": layout,
        "profile_counts": totals,
        "resources": {strategy: mig_layout.device_plugin_resources(product, count, layout, strategy)
                      for strategy in ("single", "mixed")},
    }
    if expected_config is not None:
        expected = mig_layout.applied_layout(expected_config, expected_name, product, count)
        result["mismatches"] = ["GPU %d: %s expects %s, nvidia-smi shows %s" % (
            index, expected_name, _describe(want), _describe(have))
            for index, (want, have) in enumerate(zip(expected, layout)) if (want or None) != (have or None)]
        result["matches"] = not result["mismatches"]
    return result


def _describe(gpu):
    if gpu is None:
        return "MIG disabled"
    return ", ".join("%d x %s" % (n, p) for p, n in sorted(gpu.items())) or "MIG enabled, no instances"
