# -*- coding: utf-8 -*-
# Copyright: fairgpu maintainers
# Apache License 2.0 (see LICENSE)
"""What nvidia-smi would print on one of the embedded cluster's simulated GPU nodes. Pure logic, no cluster
access.

Given the node's name, GPU model (``nvidia.com/gpu.product`` label), GPU count and MIG layout (see
``mig_layout``), ``simulated_nvidia_smi`` renders the outputs of the commands in ``COMMANDS`` in the real formats
of ``shared/fixtures/nvidia-smi/`` (the R570 column widths), so ``nvidia_smi``'s parsers read them back and the
same checks run against simulated and real nodes. UUIDs are UUID-5s of the node name and the GPU index (and GPU
and compute instance IDs), so a node keeps its UUIDs from one run to the next.

GPU instances sit where ``mig_layout.placement`` puts them (allowed start slices, smaller ones first) and are
numbered as in the fixtures: an instance of s of the GPU's n memory slices starting at slice p has ID
n/s - 1 + p/s (7 to 13 for 1-slice instances on an H100, 2 for a 3g.40gb at slice 4). Each holds one compute
instance (ID 0) with all of its compute slices, as ``nvidia-smi mig -cgi ... -C`` and mig-parted create them.
Memory and attribute figures come from the catalogue; the ``-lgip`` columns it has no figures for print 0.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import uuid

from ansible_collections.fairgpu.tenancy.plugins.module_utils.mig.catalog import GPU_MODELS
from ansible_collections.fairgpu.tenancy.plugins.module_utils.mig.nvidia_smi import QUERY_GPU
from ansible_collections.fairgpu.tenancy.plugins.module_utils.mig.layout import (
    ATTRIBUTES,
    free_instances,
    mig_model,
    per_gpu_layout,
    placement,
    profile_memory_mib,
)

COMMANDS = ("-L", "mig -lgip", "mig -lgipp", "mig -lgi", "mig -lci", QUERY_GPU)
NAMESPACE = uuid.uuid5(uuid.NAMESPACE_DNS, "fairgpu.io")
# NVML's compute instance profile IDs (NVML_COMPUTE_INSTANCE_PROFILE_<n>_SLICE) by compute slices.
CI_PROFILE_IDS = {1: 0, 2: 1, 3: 2, 4: 3, 7: 4}
NO_MIG = "No MIG-enabled devices found."

LGIP_BORDER = "+" + "-" * 79 + "+"
LGIP_HEADER = (
    "| GPU instance profiles:                                                        |",
    "| GPU   Name               ID    Instances   Memory     P2P    SM    DEC   ENC  |",
    "|                                Free/Total   GiB              CE    JPEG  OFA  |",
    "|===============================================================================|",
)
BORDER = "+" + "-" * 55 + "+"
LGI_HEADER = (
    "| GPU instances:                                        |",
    "| GPU   Name             Profile  Instance   Placement  |",
    "|                          ID       ID       Start:Size |",
    "|=======================================================|",
)
LCI_HEADER = (
    "| Compute instances:                                    |",
    "| GPU     GPU       Name             Profile   Instance |",
    "|       Instance                       ID        ID     |",
    "|         ID                                            |",
    "|=======================================================|",
)


def _uuid(prefix, *parts):
    return "%s-%s" % (prefix, uuid.uuid5(NAMESPACE, "/".join(str(part) for part in parts)))


def simulated_gpus(node_name, product, gpu_count, layout=None, catalogue=None):
    """The node's GPUs as ``nvidia_smi.mig_tree`` returns them, plus ``mig_enabled`` (bool) and ``memory_mib``
    (the GPU's total memory). Raises MigLayoutError for an unknown model or a layout that does not fit."""
    model = mig_model(product, catalogue)
    gpus = []
    for index, wanted in enumerate(per_gpu_layout(layout, product, gpu_count, catalogue)):
        instances = []
        for instance in placement(wanted, product, catalogue) if wanted is not None else []:
            profile = model["profiles"][instance["profile"]]
            gi_id = model["memory_slices"] // instance["size"] - 1 + instance["start"] // instance["size"]
            instances.append({
                "id": gi_id, "profile": instance["profile"], "profile_id": profile["id"],
                "placement": {"start": instance["start"], "size": instance["size"]},
                "compute_instances": [{
                    "id": 0, "profile": instance["profile"], "profile_id": CI_PROFILE_IDS[profile["compute_slices"]],
                    "uuid": _uuid("MIG", node_name, index, gi_id, 0),
                }],
            })
        gpus.append({"index": index, "name": model["name"], "uuid": _uuid("GPU", node_name, index),
                     "gpu_instances": sorted(instances, key=lambda gi: gi["id"]), "mig_enabled": wanted is not None,
                     "memory_mib": GPU_MODELS[product]["memory_mib"]})
    return gpus


def _list(gpus):
    lines = []
    for gpu in gpus:
        lines.append("GPU %d: %s (UUID: %s)" % (gpu["index"], gpu["name"], gpu["uuid"]))
        devices = [ci for gi in gpu["gpu_instances"] for ci in gi["compute_instances"]]
        lines.extend("  MIG %-12sDevice %2d: (UUID: %s)" % (ci["profile"], number, ci["uuid"])
                     for number, ci in enumerate(devices))
    return lines


def _profiles(gpus, product, catalogue):
    model = mig_model(product, catalogue)
    lines = [LGIP_BORDER] + list(LGIP_HEADER)
    for gpu in gpus:
        placed = [dict(gi["placement"], profile=gi["profile"]) for gi in gpu["gpu_instances"]]
        for name, profile in model["profiles"].items():
            values = profile["attributes"] or dict.fromkeys(ATTRIBUTES, 0)
            lines.append("|%4d  MIG %-15s%3d%8s        %-11s%-7s%-7d%-6d%-4d|" % (
                gpu["index"], name, profile["id"],
                "%d/%d" % (free_instances(name, placed, product, catalogue), profile["max_instances"]),
                "%.2f" % (profile_memory_mib(product, name, catalogue) / 1024.0), "No",
                values["sm"], values["dec"], values["enc"]))
            lines.append("|%s%2d%6d%6d   |" % (" " * 62, values["ce"], values["jpeg"], values["ofa"]))
            lines.append(LGIP_BORDER)
    return lines


def _placements(gpus, product, catalogue):
    """``nvidia-smi mig -lgipp`` lines in the MIG User Guide's form (``Placement :`` for a single start)."""
    model = mig_model(product, catalogue)
    return ["GPU %2d Profile ID %2d %s {%s}:%d" % (
        gpu["index"], profile["id"], "Placements:" if len(profile["starts"]) > 1 else "Placement :",
        ",".join(map(str, profile["starts"])), profile["memory_slices"])
        for gpu in gpus for profile in model["profiles"].values()]


def _table(header, rows, nothing):
    if not rows:
        return [nothing]
    lines = [BORDER] + list(header)
    for row in rows:
        lines.extend([row, BORDER])
    return lines


def _gpu_instances(gpus):
    rows = []
    for gpu in gpus:
        for gi in sorted(gpu["gpu_instances"], key=lambda gi: gi["placement"]["start"]):
            rows.append("|%4d  MIG %-15s%3d%9d%13s     |" % (
                gpu["index"], gi["profile"], gi["profile_id"], gi["id"],
                "%d:%d" % (gi["placement"]["start"], gi["placement"]["size"])))
    return _table(LGI_HEADER, rows, "No GPU instances found: Not Found")


def _compute_instances(gpus):
    rows = ["|%4d%7d       MIG %-15s%3d%10d     |" % (gpu["index"], gi["id"], ci["profile"], ci["profile_id"], ci["id"])
            for gpu in gpus for gi in gpu["gpu_instances"] for ci in gi["compute_instances"]]
    return _table(LCI_HEADER, rows, "No compute instances found: Not Found")


def _query(gpus):
    mode = {True: "Enabled", False: "Disabled"}
    return ["index, name, uuid, mig.mode.current, mig.mode.pending, memory.total [MiB]"] + [
        "%d, %s, %s, %s, %s, %d MiB" % (gpu["index"], gpu["name"], gpu["uuid"], mode[gpu["mig_enabled"]],
                                        mode[gpu["mig_enabled"]], gpu["memory_mib"]) for gpu in gpus]


def simulated_nvidia_smi(node_name, product, gpu_count, layout=None, catalogue=None):
    """stdout of each command in ``COMMANDS`` (``nvidia-smi <command>``) on the simulated node: ``{command: text}``.

    The ``mig`` commands cover the MIG-enabled GPUs and print nvidia-smi's one-line answers when there is nothing
    to list ("No MIG-enabled devices found.", "No GPU instances found: Not Found"). Raises MigLayoutError for an
    unknown model or a layout that does not fit.
    """
    gpus = simulated_gpus(node_name, product, gpu_count, layout, catalogue)
    mig = [gpu for gpu in gpus if gpu["mig_enabled"]]
    outputs = {"-L": _list(gpus), QUERY_GPU: _query(gpus), "mig -lgip": [NO_MIG], "mig -lgipp": [NO_MIG],
               "mig -lgi": [NO_MIG], "mig -lci": [NO_MIG]}
    if mig:
        outputs.update({"mig -lgip": _profiles(mig, product, catalogue),
                        "mig -lgipp": _placements(mig, product, catalogue), "mig -lgi": _gpu_instances(mig),
                        "mig -lci": _compute_instances(mig)})
    return {command: "\n".join(lines) + "\n" for command, lines in outputs.items()}
