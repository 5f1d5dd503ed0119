# -*- coding: utf-8 -*-
# Copyright: fairgpu maintainers
# Apache License 2.0 (see LICENSE)
"""When the MIG manager is done with a node: the ``mig_config`` role's wait after it labels the nodes
``nvidia.com/mig.config=<name>``. Pure logic, no cluster access: the caller passes the Node objects (API dicts)
it read before labelling and now.

The MIG manager's state machine (NVIDIA/mig-parted v0.13.1, the version GPU Operator v25.10.x runs):

- ``cmd/nvidia-mig-manager/main.go`` ``start``/``ContinuouslySyncMigConfigChanges``: the manager acts on the
  label's value at start and on each *change* of the label; until it has checked the request, the node keeps
  the previous ``nvidia.com/mig.config.state`` (often ``success`` of the previous config).
- ``pkg/mig/reconfigure/reconfigure.go`` ``Run``: an invalid config goes to ``failed`` without ``pending``; a
  config already applied goes to ``success`` without ``pending``; otherwise ``pending``, GPU clients stopped,
  then ``rebooting`` when a MIG mode change needs a reboot and the manager is configured to reboot, else the
  config applied and ``success`` or ``failed``. The device plugin and GFD republish resources and labels when
  they restart, which may be after ``success`` is set.

So neither "the state is success" (the stale state passes against the old layout) nor "the state changed"
(hangs when the layout is already applied: no ``pending``, and ``success`` stays ``success``) is a right end.
A node is **ready** when its label names the config, its state is ``success`` and it publishes the layout's
resources and labels (``nodes.node_result_errors``); it has **failed** when its state is ``failed`` unless that
is the stale state of an earlier, different config (read before labelling); every other node is **waiting**.
Public reports behind the messages: a state ``success`` with the old resources (NVIDIA/gpu-operator#1607), a
state stuck at ``pending`` after an aborted apply (NVIDIA/mig-parted#485, NVIDIA/gpu-operator#2833).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.fairgpu.tenancy.plugins.module_utils.common.names import GPU_PRODUCT_LABEL, MIG_RESOURCE_PREFIX
from ansible_collections.fairgpu.tenancy.plugins.module_utils.mig import layout as mig_layout
from ansible_collections.fairgpu.tenancy.plugins.module_utils.mig import nodes as mig_nodes
from ansible_collections.fairgpu.tenancy.plugins.module_utils.mig import nvidia_smi
from ansible_collections.fairgpu.tenancy.plugins.module_utils.common.names import MIG_CONFIG_LABEL, MIG_STATE_LABEL

READY, FAILED, WAITING = "ready", "failed", "waiting"


def _labels(node):
    return ((node or {}).get("metadata") or {}).get("labels") or {}


def _label_errors(document, name, node, strategy, report=None, before=None):
    """GFD's per-profile count labels (``nvidia.com/mig-<profile>.count``, mixed strategy) against the layout: each
    equals the device plugin's count of that resource (k8s-device-plugin v0.20.0 internal/lm/mig-strategy.go
    counts the MIG devices per resource), so it is read from ``nodes.expected_resources`` with the node's own
    report, and needs no catalogue entry for the model."""
    if strategy != "mixed":
        return []
    labels = _labels(node)
    expected = mig_nodes.expected_resources(document, name, node, strategy, report, before) or {}
    wanted = dict((resource + ".count", str(count)) for resource, count in expected.items()
                  if resource.startswith(MIG_RESOURCE_PREFIX) and count)
    keys = sorted(set(k for k in list(wanted) + list(labels) if k.startswith(MIG_RESOURCE_PREFIX) and k.endswith(".count")))
    return ["node %s: label %s is %s, expected %s" % (node["metadata"]["name"], key, labels.get(key), wanted.get(key))
            for key in keys if labels.get(key) != wanted.get(key)]


def _publishes_mig(node, strategy):
    """Whether ``node`` publishes MIG devices at all: a ``nvidia.com/mig-*`` resource under ``mixed``, GFD's product
    ``<model>-MIG-<profile>`` under ``single`` (k8s-device-plugin v0.20.0 internal/lm/mig-strategy.go). The test
    for a node whose profiles were unknown: before the label changed it had MIG off, so no MIG device."""
    if strategy == "single":
        product = _labels(node).get(GPU_PRODUCT_LABEL, "")
        return "-MIG-" in product and not product.endswith("-MIG-INVALID")
    allocatable = (node.get("status") or {}).get("allocatable") or {}
    return any(key.startswith(MIG_RESOURCE_PREFIX) and str(value).isdigit() and int(value) > 0
               for key, value in allocatable.items())


def node_progress(document, name, node, strategy, before=None, report=None):
    """``(status, message)`` of one node: ``ready``, ``failed`` or ``waiting`` (see the module's docstring).
    ``before``: the same node as read before fairgpu set its label (None when unknown); ``report``: its own
    nvidia-smi outputs (``{"-L": ..., "mig -lgip": ..., "mig -lgipp": ...}``, the role's discovery), which count
    its GPUs and give its profiles (``nodes.physical_gpus``, ``nodes.node_catalogue``)."""
    node_name = node["metadata"]["name"]
    labels, previous = _labels(node), _labels(before)
    selected, state = labels.get(MIG_CONFIG_LABEL), labels.get(MIG_STATE_LABEL)
    if selected != name:
        return WAITING, "node %s: %s is %r, not yet %r" % (node_name, MIG_CONFIG_LABEL, selected, name)
    changed = before is not None and previous.get(MIG_CONFIG_LABEL) != name
    if state == "failed":
        if changed and previous.get(MIG_STATE_LABEL) == "failed":
            return WAITING, ("node %s: %s is still failed, the state of the previous config %r; the MIG manager has "
                             "not yet answered for %r" % (node_name, MIG_STATE_LABEL, previous.get(MIG_CONFIG_LABEL),
                                                          name))
        return FAILED, ("node %s: the MIG manager could not apply %r (%s=failed); the node keeps its previous "
                        "layout; the nvidia-mig-manager pod's log on that node says why"
                        % (node_name, name, MIG_STATE_LABEL))
    if state == "success" and mig_nodes.profiles_unknown(node, report):
        if _publishes_mig(node, strategy):
            return READY, ("node %s: %s applied (its profiles were unknown before MIG was on: the role checks the "
                           "result from the node's report read again)" % (node_name, name))
        return WAITING, ("node %s: %s is success but the node publishes no MIG device yet: either the state is the "
                         "previous config's or the device plugin has not republished" % (node_name, MIG_STATE_LABEL))
    if state == "success":
        try:
            reports = {node_name: report} if report else None
            problems = mig_nodes.node_result_errors(document, name, [node], strategy, [before] if before else None,
                                                    reports) or _label_errors(document, name, node, strategy,
                                                                              report, before)
        except (mig_layout.MigLayoutError, nvidia_smi.NvidiaSmiParseError) as exc:
            problems = ["node %s: %s" % (node_name, exc)]
        if not problems:
            return READY, "node %s: %s applied" % (node_name, name)
        return WAITING, ("node %s: %s is success but the node does not yet publish %r (%s): either the state is the "
                         "previous config's or the device plugin and GPU feature discovery have not republished"
                         % (node_name, MIG_STATE_LABEL, name, "; ".join(p.split(": ", 1)[-1] for p in problems)))
    if state == "pending":
        return WAITING, ("node %s: %s is pending: the MIG manager is applying %r (GPU clients stopped; if it stays "
                         "pending, the manager may have aborted: see its log)" % (node_name, MIG_STATE_LABEL, name))
    if state == "rebooting":
        return WAITING, ("node %s: %s is rebooting: the MIG mode change needs a reboot; the MIG manager applies %r "
                         "when the node is back" % (node_name, MIG_STATE_LABEL, name))
    return WAITING, ("node %s: %s is %r: the MIG manager has not yet answered (is it running on the node?)"
                     % (node_name, MIG_STATE_LABEL, state))


def progress(nodes, document, name, strategy, before=None, reports=None, lgip=None):
    """The wait's view of all ``nodes``: ``{"done": no node waiting, "ready": [node names], "failed": [messages],
    "waiting": [messages]}``. ``before``: the nodes as read before labelling (a list of Node dicts);
    ``reports`` and ``lgip``: the nodes' own nvidia-smi outputs as for ``nodes.node_errors``."""
    earlier = dict((n["metadata"]["name"], n) for n in before or [])
    result = {"ready": [], "failed": [], "waiting": []}
    for node in sorted(nodes, key=lambda n: n["metadata"]["name"]):
        node_name = node["metadata"]["name"]
        status, message = node_progress(document, name, node, strategy, earlier.get(node_name),
                                        mig_nodes.node_report(node_name, lgip, reports))
        if status == READY:
            result["ready"].append(node["metadata"]["name"])
        else:
            result[status].append(message)
    result["done"] = not result["waiting"]
    return result
