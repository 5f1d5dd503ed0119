# -*- coding: utf-8 -*-
# Copyright: fairgpu maintainers
# Apache License 2.0 (see LICENSE)
"""The simulated MIG manager's script: what NVIDIA's MIG manager does to a node after its ``nvidia.com/mig.config``
label changes, as a list of steps for the background process ``files/lab/mig_manager_sim.py`` to play against
the API server. Pure logic, no cluster access.

Upstream (NVIDIA/mig-parted v0.13.1, the MIG manager of GPU Operator v25.10.x):

- ``cmd/nvidia-mig-manager/main.go`` (``start``, ``ContinuouslySyncMigConfigChanges``): the manager acts on the
  label's value when it starts and on every *change* of the label, one request at a time; the node keeps its
  old ``nvidia.com/mig.config.state`` while the manager checks the request.
- ``pkg/mig/reconfigure/reconfigure.go`` (``Run``): a config that is not in the file or does not suit the GPUs
  -> ``failed`` without ``pending``; already applied -> ``success`` without ``pending``; otherwise ``pending``,
  GPU clients stopped, ``rebooting`` when a MIG mode change needs a reboot (``WithReboot``; after the reboot
  the manager runs again and applies the config), the config applied (a failure -> ``failed``, the previous
  layout stays), GPU clients restarted, then ``success``. The device plugin and GFD are among those clients:
  they republish resources and labels when they come back, which can be after the state says ``success``.

Per node, annotations choose the sequence (tests set them): ``fairgpu.io/simulated-mig-reboot: "true"`` (a reboot
before applying), ``fairgpu.io/simulated-mig-apply-fails: "true"`` (the apply fails after ``pending``) and
``fairgpu.io/simulated-mig-delay-seconds`` (this node's delay instead of the process's).

A step is ``("sleep", seconds)``, ``("state", value)`` (set ``nvidia.com/mig.config.state``) or ``("publish",
{"labels", "status", "annotations"})`` (merge patches of the node's GFD labels, capacity/allocatable and the
simulated hardware annotations, as the device plugin and GFD publish them).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.fairgpu.tenancy.plugins.module_utils.lab.node import (
    LAYOUT_ANNOTATION,
    MIG_CONFIG_LABEL,
    MIG_STATE_LABEL,
    SimulatedNodeError,
    desired_node,
    node_patches,
)

REBOOT_ANNOTATION = "fairgpu.io/simulated-mig-reboot"
APPLY_FAILS_ANNOTATION = "fairgpu.io/simulated-mig-apply-fails"
DELAY_ANNOTATION = "fairgpu.io/simulated-mig-delay-seconds"
SEQUENCES = ("stale-failed", "stale-success", "pending-success", "pending-failed", "pending-rebooting-success")


def _flag(annotations, key):
    return str(annotations.get(key, "")).lower() in ("true", "1", "yes")


def node_delay(node, default):
    """The delay of this node's steps: its ``DELAY_ANNOTATION`` when a number >= 0, else ``default``."""
    raw = ((node.get("metadata") or {}).get("annotations") or {}).get(DELAY_ANNOTATION)
    try:
        value = float(raw)
    except (TypeError, ValueError):
        return default
    return value if value >= 0 else default


def reconfigure(node, document, strategy, delay):
    """``(sequence, steps, errors)`` for ``node`` (a Node dict as the API returns it) whose label asks for a config
    of ``document`` (the ConfigMap's parsed mig-parted file; None when the manager could not read it).
    ``sequence`` is one of ``SEQUENCES``; ``errors`` says why a config failed."""
    metadata, status = node.get("metadata") or {}, node.get("status") or {}
    name = metadata["name"]
    annotations, labels = metadata.get("annotations") or {}, metadata.get("labels") or {}
    delay = node_delay(node, delay)
    if document is None:
        desired, errors = None, ["the MIG manager cannot read its config file (the ConfigMap is missing)"]
    else:
        try:
            desired = desired_node(name, annotations, labels, strategy, document)
            errors = desired["errors"]
        except SimulatedNodeError as exc:
            desired, errors = None, [str(exc)]
    checking = [("sleep", delay)]  # the old state stays while the request is checked
    if desired is None or desired["mig_state"] != "success":
        return "stale-failed", checking + [("state", "failed")], errors or ["no config selected"]
    label_patch, status_patch, _diff = node_patches(labels, status, desired["labels"], desired["resources"])
    label_patch.pop(MIG_STATE_LABEL, None)
    annotation_patch = dict((k, v) for k, v in desired["annotations"].items() if annotations.get(k) != v)
    publish = ("publish", {"labels": label_patch, "status": status_patch, "annotations": annotation_patch})
    if desired["annotations"][LAYOUT_ANNOTATION] == annotations.get(LAYOUT_ANNOTATION):
        steps = checking + [("state", "success")]
        if label_patch or status_patch or annotation_patch:
            steps.append(publish)
        return "stale-success", steps, []
    steps = checking + [("state", "pending"), ("sleep", delay)]
    sequence = "pending-success"
    if _flag(annotations, REBOOT_ANNOTATION):
        steps += [("state", "rebooting"), ("sleep", delay)]
        sequence = "pending-rebooting-success"
    if _flag(annotations, APPLY_FAILS_ANNOTATION):
        return "pending-failed", steps + [("state", "failed")], [
            "%s=%s: applying the config failed (%s)" % (MIG_CONFIG_LABEL, labels.get(MIG_CONFIG_LABEL),
                                                        APPLY_FAILS_ANNOTATION)]
    # success is set once the GPU clients are told to restart; the device plugin and GFD publish after it.
    return sequence, steps + [("state", "success"), ("sleep", delay / 2.0), publish], []
