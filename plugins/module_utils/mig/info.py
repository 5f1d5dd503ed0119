# -*- coding: utf-8 -*-
# Copyright: fairgpu maintainers
# Apache License 2.0 (see LICENSE)
"""What a node's nvidia-smi says about MIG, and whether it matches a mig-parted layout: the logic of the
``nvidia_smi_mig_info`` module. Pure logic, no cluster access and no commands run.

Units: counts of GPUs, GPU instances and MIG devices. The device plugin's resources follow ``mig_layout``.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.fairgpu.tenancy.plugins.module_utils.common.names import GPU_RESOURCE
from ansible_collections.fairgpu.tenancy.plugins.module_utils.mig import layout as mig_layout
from ansible_collections.fairgpu.tenancy.plugins.module_utils.mig import nvidia_smi
from ansible_collections.fairgpu.tenancy.plugins.module_utils.mig import resources
from ansible_collections.fairgpu.tenancy.plugins.module_utils.mig.nvidia_smi import QUERY_GPU

# The nvidia-smi arguments whose output the module reads; -L is required, the others refine the tree.
COMMANDS = ("-L", "mig -lgi", "mig -lci", QUERY_GPU)
# Read when given or when the command answers: the node's own profiles and placements (the catalogue's authority).
OPTIONAL_COMMANDS = ("mig -lgip", "mig -lgipp")


def node_layout(gpus, query=None):
    """Per-GPU layout from ``parse_list`` output: ``{profile: count}`` for a GPU with MIG devices, ``{}`` for a
    GPU whose ``mig.mode.current`` is Enabled without devices, None for MIG disabled (``query``:
    ``parse_query_gpu`` output; without it a GPU without MIG devices counts as disabled)."""
    enabled = {row["index"]: row.get("mig.mode.current") == "Enabled" for row in (query or [])}
    layout = []
    for gpu in nvidia_smi.profile_counts(gpus):
        layout.append(gpu["profiles"] if gpu["profiles"] or enabled.get(gpu["index"]) else None)
    return layout


def _resources(tree, layout, lgip_names, lgip_by_name):
    """The device plugin's resources for the observed state, without the catalogue: MIG devices are named by
    their GPU instance's profile ID through the node's -lgip (``resources.lgip_resources``), else by the printed
    profile; compute instances smaller than their GPU instance get no resource (rm.go, see ``resources``)."""
    count = len(tree)
    mig = [gpu for gpu in layout if gpu is not None]
    single = {GPU_RESOURCE: count}
    if mig:
        profiles = set(profile for gpu in mig for profile in gpu)
        valid = len(profiles) == 1 and all(layout)
        single = {GPU_RESOURCE: sum(sum(gpu.values()) for gpu in mig) if valid else 0}
    mixed = {GPU_RESOURCE: count - len(mig)}
    for gpu in tree:
        for gi in gpu["gpu_instances"]:
            for ci in gi["compute_instances"]:
                name = lgip_names.get(gi["profile_id"]) if gi["profile_id"] is not None else None
                if name is None and ci["profile"] == gi["profile"]:
                    name = lgip_by_name.get(gi["profile"]) or resources.resource_name(gi["profile"])
                if name is not None and ci["profile"] == gi["profile"]:
                    mixed[name] = mixed.get(name, 0) + 1
    return {"single": single, "mixed": mixed}


def mig_info(outputs, expected_config=None, expected_name=None):
    """Summarise a node's nvidia-smi ``outputs`` (``{command: stdout}``, commands as in ``COMMANDS`` and
    ``OPTIONAL_COMMANDS``, plus ``nvidia-smi``: the full table, read for the MIG mode and memory of each GPU).

    Reading the observed state never uses the built-in catalogue: any profile name the driver prints is taken
    as it is, and the resources are named from the node's own -lgip rows by profile ID when given.

    Returns ``{"product", "gpus": tree (``nvidia_smi.mig_tree``), "mig_enabled": [bool per GPU], "layout",
    "profile_counts": {profile: count on the node}, "resources": {"single": {...}, "mixed": {...}},
    "profiles_source": "node report" | "catalogue" | None}`` (where the node's profiles come from: its -lgip, the
    built-in catalogue, or nowhere as nothing needed them) and, with ``expected_config`` (a mig-parted config)
    and ``expected_name`` (one of its configs), ``"matches"`` and ``"mismatches"``. Raises NvidiaSmiParseError
    for unreadable output and MigLayoutError for a node with several models, or an expected config that cannot
    be checked (invalid, or a model the catalogue lacks and no -lgip/-lgipp given).
    """
    if not outputs.get("-L"):
        raise nvidia_smi.NvidiaSmiParseError(
            "the output of nvidia-smi -L is required (the nvidia-smi table prints neither MIG profile names nor UUIDs)")
    gpus = nvidia_smi.parse_list(outputs["-L"])
    gpu_instances = nvidia_smi.parse_gpu_instances(outputs["mig -lgi"]) if outputs.get("mig -lgi") else None
    compute_instances = nvidia_smi.parse_compute_instances(outputs["mig -lci"]) if outputs.get("mig -lci") else None
    query = nvidia_smi.parse_query_gpu(outputs[QUERY_GPU]) if outputs.get(QUERY_GPU) else None
    table = nvidia_smi.parse_table(outputs["nvidia-smi"]) if outputs.get("nvidia-smi") else None
    lgip = nvidia_smi.parse_gpu_instance_profiles(outputs["mig -lgip"]) if outputs.get("mig -lgip") else []
    lgipp = nvidia_smi.parse_gpu_instance_placements(outputs["mig -lgipp"]) if outputs.get("mig -lgipp") else []
    if query is None and table is not None:
        query = [{"index": gpu["index"], "mig.mode.current": gpu["mig_mode"], "memory.total": gpu["memory_total_mib"]}
                 for gpu in table["gpus"]]
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
    memory = [row.get("memory.total") for row in (query or []) if row.get("memory.total")]
    lgip_names = resources.lgip_resources(lgip, memory[0] if memory else None)
    lgip_by_name = {row["profile"]: lgip_names.get(row["profile_id"]) for row in lgip}
    result = {
        "product": product,
        "gpus": tree,
        "mig_enabled": [gpu is not None for gpu in layout],
        "layout": layout,
        "profile_counts": totals,
        "resources": _resources(tree, layout, lgip_names, lgip_by_name),
        "profiles_source": "node report" if lgip else None,
    }
    if table is not None:
        result["table"] = table
    if expected_config is not None:
        if lgip:
            catalogue = mig_layout.catalogue_from_lgip(lgip, product, lgipp or None)
        else:
            catalogue = mig_layout.mig_model(product)
            result["profiles_source"] = "catalogue"
        expected = mig_layout.applied_layout(expected_config, expected_name, product, count, catalogue)
        result["mismatches"] = ["GPU %d: %s expects %s, nvidia-smi shows %s" % (
            index, expected_name, _describe(want), _describe(have))
            for index, (want, have) in enumerate(zip(expected, layout)) if (want or None) != (have or None)]
        result["matches"] = not result["mismatches"]
    return result


def _describe(gpu):
    if gpu is None:
        return "MIG disabled"
    return ", ".join("%d x %s" % (n, p) for p, n in sorted(gpu.items())) or "MIG enabled, no instances"
