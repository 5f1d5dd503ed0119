# -*- coding: utf-8 -*-
# Copyright: fairgpu maintainers
# Apache License 2.0 (see LICENSE)
"""The ``mig_config`` role's logic: the mig-parted document from the inventory, its check against each node's
GPUs before any node is labelled, and the check of each node after the MIG manager has worked. Pure logic, no
cluster access: the caller passes Node objects (API dicts) it read.

Units: GPUs and MIG devices (counts). Upstream rules (profiles, placement, resources, labels): ``mig_layout``.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import json

from ansible_collections.fairgpu.tenancy.plugins.module_utils.plan import manifests
from ansible_collections.fairgpu.tenancy.plugins.module_utils.mig import layout as mig_layout
from ansible_collections.fairgpu.tenancy.plugins.module_utils.mig import nvidia_smi
from ansible_collections.fairgpu.tenancy.plugins.module_utils.common.names import (
    GPU_COUNT_LABEL,
    GPU_PRODUCT_LABEL,
    GPU_RESOURCE,
    MANAGED_BY,
    MIG_RESOURCE_PREFIX,
)
from ansible_collections.fairgpu.tenancy.plugins.module_utils.common.names import (
    MIG_STATE_LABEL as STATE_LABEL,
    SIMULATED_GPU_ANNOTATION_PREFIX as ANNOTATION_PREFIX,
    SIMULATED_NVIDIA_SMI_ANNOTATION as NVIDIA_SMI_ANNOTATION,
)


def config_document(profile="2g.20gb", per_gpu=2, layouts=None):
    """fairgpu's mig-parted document: its own layout (``per_gpu`` x ``profile`` on every GPU, named
    ``mig_layout.fairgpu_config_name``), ``all-disabled``, and the inventory's named ``layouts`` (mig-parted
    entries by config name; a name of fairgpu's own replaces it). Returns the document; checking it is
    ``node_errors``' job."""
    document = mig_layout.fairgpu_mig_config(profile, per_gpu)
    document["mig-configs"].update(copy.deepcopy(layouts or {}))
    return document


def configmap(document, name, namespace):
    """The MIG manager's ConfigMap (the GPU Operator's ``migManager.config.name``) holding ``document`` as
    ``config.yaml``."""
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": namespace, "labels": dict(MANAGED_BY)},
            "data": {"config.yaml": manifests.to_yaml(document)}}


def node_gpus(node, report=None):
    """``(product, GPU count)`` of a Node dict: the simulated hardware annotations on the embedded cluster,
    else GFD's labels with any ``-MIG-<profile>`` suffix of the single strategy removed. ``report``: the node's
    nvidia-smi outputs as the role's discovery read them; their ``-L`` (each GPU once, by UUID, since output
    gathered from several containers repeats them) is the authority for the count. Without it, GFD's count:
    under ``single`` with MIG active that is the MIG devices' count (k8s-device-plugin v0.20.0
    internal/lm/mig-strategy.go), so the GPU count is then an upper bound. On a node with GPUs of several
    models GFD labels one model, and only that model's GPUs of ``-L`` are counted (``other_gpus`` counts the
    rest). Raises NvidiaSmiParseError for a ``-L`` of another format."""
    metadata = node.get("metadata") or {}
    annotations, labels = metadata.get("annotations") or {}, metadata.get("labels") or {}
    if ANNOTATION_PREFIX + "product" in annotations:
        return annotations[ANNOTATION_PREFIX + "product"], int(annotations[ANNOTATION_PREFIX + "count"])
    product = labels.get(GPU_PRODUCT_LABEL, "").split("-MIG-")[0]
    if report and report.get("-L"):
        return product, len(_listed_gpus(product, report)[0])
    try:
        return product, int(labels.get(GPU_COUNT_LABEL, "0"))
    except ValueError:
        return product, 0


def _listed_gpus(product, report):
    """``(UUIDs of product's GPUs, UUIDs of the other GPUs)`` in the report's ``-L``, each GPU once (output gathered
    from several containers repeats them). All GPUs are the product's when none of them is named like it."""
    gpus = dict((gpu["uuid"], mig_layout.product_label(gpu["name"])) for gpu in nvidia_smi.parse_list(report["-L"]))
    mine = set(uuid for uuid, name in gpus.items() if name == product)
    if not mine:
        return set(gpus), set()
    return mine, set(gpus) - mine


def other_gpus(node, report=None):
    """GPUs of ``node``'s ``-L`` in ``report`` that are not of the model GFD labels (``node_gpus``): the MIG
    manager leaves a GPU that cannot take the layout alone (mig-parted v0.13.1 ``cmd/nvidia-mig-parted/apply``
    skips non-MIG-capable GPUs), so the device plugin advertises it whole as ``nvidia.com/gpu``. 0 without ``-L``."""
    if not (report and report.get("-L")):
        return 0
    return len(_listed_gpus(node_gpus(node)[0], report)[1])


def profiles_unknown(node, report=None):
    """True when ``node``'s MIG profiles are known nowhere although it answered: the built-in catalogue lacks its
    model and its own ``report`` has an ``nvidia-smi mig -lgip`` that lists none (``No MIG-enabled devices
    found.`` until MIG mode is on, as on a fresh node whose GPU Operator config is ``all-disabled``). Such a node
    cannot be checked before the MIG manager enables MIG; the role checks it after, from a report read again. A
    node without a report is not this case: ``node_errors`` asks for its ``-lgip``."""
    if not (report and "mig -lgip" in report):
        return False
    product = node_gpus(node)[0]
    if product in mig_layout.MIG_MODELS:
        return False
    try:
        return node_catalogue(node, product, report) is None
    except (nvidia_smi.NvidiaSmiParseError, mig_layout.MigLayoutError):
        return False


def node_catalogue(node, product, report=None):
    """The node's own MIG profile catalogue, the authority over the built-in one, from its ``report``: its
    nvidia-smi outputs ``{"mig -lgip": stdout, "mig -lgipp": stdout}`` (the role's discovery), or its
    ``mig -lgip`` stdout alone (``mig_config_node_lgip``), or on the embedded cluster the simulated nvidia-smi
    annotation. The placements come from ``mig -lgipp`` when the report has it: a model the built-in catalogue
    lacks needs them. None when the report lists no profiles (MIG still disabled everywhere). Raises
    NvidiaSmiParseError for output of another format, MigLayoutError for profiles that cannot be used."""
    if report is None:
        outputs = ((node.get("metadata") or {}).get("annotations") or {}).get(NVIDIA_SMI_ANNOTATION)
        report = json.loads(outputs) if outputs else {}
    elif not isinstance(report, dict):
        report = {"mig -lgip": report}
    lgip, lgipp = report.get("mig -lgip"), report.get("mig -lgipp")
    profiles = nvidia_smi.parse_gpu_instance_profiles(lgip) if lgip else []
    if not profiles:
        return None
    placements = nvidia_smi.parse_gpu_instance_placements(lgipp) if lgipp else []
    return mig_layout.catalogue_from_lgip(profiles, product, placements or None)


def node_report(node_name, lgip, reports):
    """What the caller knows of one node: its discovered outputs (``reports``), the user's ``mig -lgip`` over
    them (``lgip``); None when neither has the node (then ``node_catalogue`` reads the simulated annotation)."""
    report = dict((reports or {}).get(node_name) or {})
    if node_name in (lgip or {}):
        report["mig -lgip"] = lgip[node_name]
    return report or None


def node_errors(document, name, nodes, strategy, lgip=None, reports=None):
    """Every reason ``document``'s config ``name`` cannot be applied to ``nodes`` under the GPU Operator's
    ``strategy``, one message per problem naming the node, GPU model and what to change; [] when it can.
    Only the selected config must fit the nodes (the MIG manager applies only it); every config must be well
    formed, since mig-parted reads the whole file first (``mig_layout.mig_config_errors``). The other configs'
    fit is ``node_warnings``' business.
    ``lgip``: ``{node name: nvidia-smi mig -lgip stdout}`` where the user gave it; ``reports``: ``{node name:
    {"-L": stdout, "mig -lgip": stdout, "mig -lgipp": stdout}}`` as the role's discovery read them
    (``node_gpus``, ``node_catalogue``)."""
    if not nodes:
        return ["mig_config_node_selector: no node matches; the layout has no GPU to partition"]
    errors = []
    for node in nodes:
        node_name = node["metadata"]["name"]
        report = node_report(node_name, lgip, reports)
        product, count = node_gpus(node)  # GFD's figures, named in a message when the report cannot be used
        if profiles_unknown(node, report):
            continue  # node_unchecked says so; the MIG manager and the check after it judge the layout
        try:
            product, count = node_gpus(node, report)
            catalogue = node_catalogue(node, product, report)
        except nvidia_smi.NvidiaSmiParseError as exc:
            errors.append("node %s: its nvidia-smi MIG report cannot be read: %s" % (node_name, exc))
            continue
        except mig_layout.MigLayoutError as exc:
            # A model known only by its -lgip (no -lgipp): a profile the node does not list is what is wrong,
            # whatever its placements (profile names differ between SKUs of one family: NVIDIA/mig-parted#227).
            unoffered = _unoffered_profiles(document, name, report)
            errors.extend("node %s (%d x %s): %s" % (node_name, count, product, problem)
                          for problem in unoffered or [exc])
            continue
        problems = mig_layout.mig_config_errors(document, product, count, strategy, catalogue, selected=name)
        configs = document.get("mig-configs") if isinstance(document, dict) else None
        if not problems and isinstance(configs, dict) and name not in configs:
            problems = ["mig_config_selected: %r is not a config of the document; it has %s"
                        % (name, ", ".join(sorted(configs)))]
        errors.extend("node %s (%d x %s): %s" % (node_name, count, product, problem) for problem in problems)
    return errors


def _unoffered_profiles(document, name, report):
    """Messages for the profiles config ``name`` of ``document`` asks for that the node's own ``nvidia-smi mig -lgip``
    (in ``report``) does not list; [] when it lists them all or cannot say (no rows, another format). Entries with a
    ``device-filter`` are left out: they may be meant for another model."""
    lgip = (report or {}).get("mig -lgip") if isinstance(report, dict) else report
    try:
        rows = nvidia_smi.parse_gpu_instance_profiles(lgip) if lgip else []
    except nvidia_smi.NvidiaSmiParseError:
        return []
    offered = [row["profile"] for row in rows if row["gpu"] == rows[0]["gpu"]] if rows else []
    configs = document.get("mig-configs") if isinstance(document, dict) else None
    entries = configs.get(name) if isinstance(configs, dict) else None
    if not offered or not isinstance(entries, list):
        return []
    asked = []
    for entry in entries:
        devices = entry.get("mig-devices") if isinstance(entry, dict) and "device-filter" not in entry else None
        asked.extend(profile for profile in (devices or {}) if isinstance(devices, dict) and profile not in asked)
    return ["mig_config_selected %r asks for MIG profile %r, which the node's nvidia-smi mig -lgip does not list; it "
            "offers %s" % (name, profile, ", ".join(offered)) for profile in asked if profile not in offered]


def node_unchecked(nodes, lgip=None, reports=None):
    """The nodes ``node_errors`` cannot check before the MIG manager works (``profiles_unknown``, with a report
    that says MIG is off), one message each; the role shows them as warnings."""
    messages = []
    for node in nodes or []:
        report = node_report(node["metadata"]["name"], lgip, reports)
        if profiles_unknown(node, report):
            product, count = node_gpus(node, report)
            messages.append("node %s (%d x %s): the built-in catalogue lacks the model and MIG is off on its GPUs, so "
                            "nvidia-smi mig -lgip lists no profiles yet; the MIG manager judges the layout, and "
                            "fairgpu checks the result from the node's report once MIG is on"
                            % (node["metadata"]["name"], count, product))
    return messages


def node_warnings(document, name, nodes, strategy, lgip=None, reports=None):
    """What the configs other than ``name`` would do wrong on ``nodes`` (a stock ``all-balanced``, fairgpu's own
    default while the user selects another): nothing applies them, so these are warnings, one per problem with
    the nodes it concerns. Format problems are ``node_errors``'; unreadable nodes are skipped here."""
    configs = document.get("mig-configs") if isinstance(document, dict) else None
    if not isinstance(configs, dict):
        return []
    found = {}
    for node in nodes or []:
        report = node_report(node["metadata"]["name"], lgip, reports)
        try:
            product, count = node_gpus(node, report)
            catalogue = node_catalogue(node, product, report)
        except (nvidia_smi.NvidiaSmiParseError, mig_layout.MigLayoutError):
            continue
        if mig_layout.mig_config_errors(document, product, count, strategy, catalogue, selected=""):
            return []  # malformed or an unknown model: node_errors says so
        for other in sorted(set(configs) - set([name]), key=str):
            for problem in mig_layout.mig_config_errors(document, product, count, strategy, catalogue,
                                                        selected=other):
                found.setdefault(problem, []).append(node["metadata"]["name"])
    return ["not selected (nvidia.com/mig.config=%s), so not applied; on node %s it would fail: %s"
            % (name, ", ".join(sorted(set(names))), problem) for problem, names in sorted(found.items())]


def _counts_mig_devices(node):
    """True when GFD's ``nvidia.com/gpu.count`` on ``node`` counts MIG devices, not GPUs: under ``single`` with
    MIG active GFD labels the product ``<model>-MIG-<profile>`` (or ``-MIG-INVALID``) and overwrites the count
    (k8s-device-plugin v0.20.0 internal/lm/mig-strategy.go)."""
    return "-MIG-" in (((node or {}).get("metadata") or {}).get("labels") or {}).get(GPU_PRODUCT_LABEL, "")


def physical_gpus(node, report=None, before=None):
    """``(product, GPU count or None)`` of ``node`` after the MIG manager has worked, from the first source that
    counts physical GPUs: the node's ``-L`` in ``report`` or its simulated hardware annotations
    (``node_gpus``); else GFD's ``nvidia.com/gpu.count`` on ``before`` (the node as read before its label
    changed) or on ``node``, whichever does not count MIG devices (``_counts_mig_devices``). None when none
    does: ``single`` with MIG active before and after, and no ``-L``."""
    product, count = node_gpus(node, report)
    annotations = (node.get("metadata") or {}).get("annotations") or {}
    if (report and report.get("-L")) or ANNOTATION_PREFIX + "product" in annotations:
        return product, count
    for basis in (before, node):
        if basis is not None and not _counts_mig_devices(basis):
            return product, node_gpus(basis)[1]
    return product, None


def expected_resources(document, name, node, strategy, report=None, before=None):
    """``{resource: count}`` the device plugin advertises on ``node`` once config ``name`` is applied; the GPU
    count from ``physical_gpus`` and the profiles from the node's own ``report`` where it has one
    (``node_catalogue``), else the built-in catalogue. None when the GPU count is unknown (``physical_gpus``).
    Raises MigLayoutError for a layout that does not fit or a model known nowhere, NvidiaSmiParseError for a
    report of another format."""
    product, count = physical_gpus(node, report, before)
    if count is None:
        return None
    catalogue = node_catalogue(node, product, report)
    layout = mig_layout.applied_layout(document, name, product, count, catalogue)
    resources = mig_layout.device_plugin_resources(product, count, layout, strategy, catalogue)
    if strategy != "single":
        resources[GPU_RESOURCE] = resources.get(GPU_RESOURCE, 0) + other_gpus(node, report)
    return resources


def _single_product_errors(document, name, node, strategy, report):
    """When the GPU count is unknown (``physical_gpus``): GFD's product label must name the layout's one profile
    (``<model>-MIG-<resource without nvidia.com/mig->``, internal/lm/mig-strategy.go). GFD's count bounds the
    GPU indices the layout is read for."""
    product, count = node_gpus(node, report)
    catalogue = node_catalogue(node, product, report)
    layout = mig_layout.applied_layout(document, name, product, count, catalogue)
    profiles = set(profile for gpu in layout if gpu for profile in gpu)
    if strategy != "single" or len(profiles) != 1:
        return []
    wanted = "%s-MIG-%s" % (product, mig_layout.profile_resource(profiles.pop(), product, catalogue)[
        len(MIG_RESOURCE_PREFIX):])
    have = node["metadata"].get("labels", {}).get(GPU_PRODUCT_LABEL)
    if have != wanted:
        return ["node %s: label %s is %s, expected %s" % (node["metadata"]["name"], GPU_PRODUCT_LABEL, have, wanted)]
    return []


def node_result_errors(document, name, nodes, strategy, before=None, reports=None, lgip=None):
    """After the MIG manager: each node must be in state ``success``, advertise the expected resources and not
    be labelled ``<model>-MIG-INVALID``. ``before``: the nodes as read before their label changed; ``reports``
    and ``lgip``: the nodes' own nvidia-smi outputs as for ``node_errors``. Where a node's GPU count is unknown
    (``physical_gpus``) its product label is checked instead of its resource counts. Returns one message per
    problem; [] when every node is as expected."""
    earlier = dict((n["metadata"]["name"], n) for n in before or [])
    errors = []
    for node in nodes:
        node_name = node["metadata"]["name"]
        labels = node["metadata"].get("labels") or {}
        state = labels.get(STATE_LABEL)
        if state != "success":
            errors.append("node %s: %s is %r, not success" % (node_name, STATE_LABEL, state))
            continue
        if labels.get(GPU_PRODUCT_LABEL, "").endswith("-MIG-INVALID"):
            errors.append("node %s: GPU feature discovery labels it %s: the layout does not suit the %s strategy "
                          "(one profile on every GPU)" % (node_name, labels[GPU_PRODUCT_LABEL], strategy))
        report = node_report(node_name, lgip, reports)
        expected = expected_resources(document, name, node, strategy, report, earlier.get(node_name))
        if expected is None:
            errors.extend(_single_product_errors(document, name, node, strategy, report))
            continue
        allocatable = (node.get("status") or {}).get("allocatable") or {}
        for resource, count in sorted(expected.items()):
            # The device plugin registers no resource it has no device for (k8s-device-plugin v0.20.0
            # internal/rm/nvml_manager.go), so a node that never had a whole GPU has no nvidia.com/gpu at all.
            have = allocatable.get(resource)
            if int(have or 0) != count:
                errors.append("node %s: advertises %s %s, expected %d" % (node_name, resource, have, count))
    return errors
