# -*- coding: utf-8 -*-
# Copyright: fairgpu maintainers
# Apache License 2.0 (see LICENSE)
"""Tainted, cordoned and NotReady GPU nodes, and the ResourceFlavor fields that follow from them. Pure logic.

Shapes:

- a taint is ``{"key": str, "value": str (optional), "effect": "NoSchedule" | "PreferNoSchedule" | "NoExecute"}``
  as in a Node's ``spec.taints`` (``timeAdded`` is dropped: the node lifecycle controller's bookkeeping);
- a toleration is ``{"key": str, "operator": "Equal" | "Exists", "value": str (Equal only), "effect": str}``
  as in a Pod's ``spec.tolerations``.

Rules from upstream:

- Kueue v0.19.2 ResourceFlavor (apis/kueue/v1beta2/resourceflavor_types.go): ``spec.nodeTaints`` and
  ``spec.tolerations`` hold at most 8 items each; taint effects NoSchedule, PreferNoSchedule, NoExecute; a
  workload is assigned a flavor with nodeTaints only when its pods tolerate them or the flavor's own
  ``tolerations`` do, and Kueue adds the flavor's tolerations to the admitted pods; only NoSchedule and
  NoExecute are evaluated at admission. A toleration with operator Exists has no value; tolerationSeconds only
  with NoExecute.
- Kueue's ResourceFlavor webhook (pkg/webhooks/resourceflavor_webhook.go, ``validateNodeTaints``): a taint key is
  a label name, its value a label value, and taints are unique by (key, effect).
- Kubernetes: ``kubectl cordon`` sets ``spec.unschedulable`` and the node lifecycle controller adds
  ``node.kubernetes.io/unschedulable:NoSchedule``; a node whose Ready condition is not True gets
  ``node.kubernetes.io/not-ready`` or ``/unreachable`` (well-known taints). These ``node.kubernetes.io/`` taints
  describe one node's state, not the pool: a flavor that declared them would need every admitted pod to
  tolerate a drain, so they are never taken into a flavor.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.fairgpu.tenancy.plugins.module_utils.common.fields import unknown_field_errors
from ansible_collections.fairgpu.tenancy.plugins.module_utils.common.names import NODE_LIFECYCLE_TAINT_PREFIX

MAX_FLAVOR_TAINTS = 8  # ResourceFlavorSpec nodeTaints / tolerations MaxItems=8 (Kueue v0.19.2)
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
# Kubernetes qualified names (label keys) and label values (apimachinery validation, IsQualifiedName and
# IsValidLabelValue).
_NAME = r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?"
_QUALIFIED = re.compile(r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?%s$" % _NAME)
_VALUE = re.compile(r"^(%s)?$" % _NAME)


def is_label_name(value):
    """A Kubernetes qualified name: optional DNS-subdomain prefix (<= 253) and '/', then a name of <= 63."""
    if not isinstance(value, str) or not _QUALIFIED.match(value):
        return False
    prefix, _slash, name = value.rpartition("/")
    return len(name) <= 63 and len(prefix) <= 253


def is_label_value(value):
    """A Kubernetes label value: empty, or <= 63 characters of the name alphabet."""
    return isinstance(value, str) and len(value) <= 63 and bool(_VALUE.match(value))


def unavailable_reason(node):
    """Why ``node`` (a Node dict as the API returns it) takes no new pods: ``"cordoned"`` (``spec.unschedulable``),
    ``"NotReady"`` (a Ready condition whose status is not True), or None. A Node without any Ready condition (the
    pool nodes render.yml plans against) counts as ready."""
    if (node.get("spec") or {}).get("unschedulable") is True:
        return "cordoned"
    for condition in (node.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Ready" and condition.get("status") != "True":
            return "NotReady"
    return None


def _taint(raw):
    taint = {"key": raw.get("key"), "effect": raw.get("effect")}
    if raw.get("value"):
        taint["value"] = raw["value"]
    return taint


def node_taints(node):
    """The pool taints of ``node``: its ``spec.taints`` without the ``node.kubernetes.io/`` ones, as
    ``[{"key", "value"?, "effect"}]`` (an empty value is left out, as the API server writes it back)."""
    return [_taint(t) for t in (node.get("spec") or {}).get("taints") or []
            if isinstance(t, dict) and not str(t.get("key", "")).startswith(NODE_LIFECYCLE_TAINT_PREFIX)]


def common_taints(nodes):
    """The taints every node of ``nodes`` carries (``node_taints``), sorted by key then effect; [] for no nodes."""
    common = None
    for node in nodes:
        taints = {(t["key"], t.get("value", ""), t["effect"]) for t in node_taints(node)}
        common = taints if common is None else common & taints
    return [_taint({"key": k, "value": v, "effect": e}) for k, v, e in sorted(common or (), key=lambda t: (t[0], t[2]))]


def tolerations_for(taints):
    """The tolerations that let a pod onto nodes with ``taints``: one per NoSchedule or NoExecute taint (Kueue and
    kube-scheduler ignore PreferNoSchedule for admission and filtering), operator Equal with the taint's value, or
    Exists when the taint has none."""
    tolerations = []
    for taint in taints:
        if taint["effect"] == "PreferNoSchedule":
            continue
        if taint.get("value"):
            tolerations.append({"key": taint["key"], "operator": "Equal", "value": taint["value"],
                                "effect": taint["effect"]})
        else:
            tolerations.append({"key": taint["key"], "operator": "Exists", "effect": taint["effect"]})
    return tolerations


def taint_errors(taints, where):
    """Check a list of taints (Node ``spec.taints`` shape); messages name ``where[i].field``. Never raises."""
    if not isinstance(taints, list):
        return ["%s: give a list of taints, each {key, value, effect} as in a Node's spec.taints" % where]
    errors, seen = [], set()
    for index, taint in enumerate(taints):
        at = "%s[%d]" % (where, index)
        if not isinstance(taint, dict):
            errors.append("%s: must be a mapping with key, value (optional) and effect" % at)
            continue
        for unknown in sorted(str(k) for k in taint if k not in ("key", "value", "effect")):
            errors.append("%s.%s: unknown field; a taint has key, value and effect" % (at, unknown))
        if not is_label_name(taint.get("key")):
            errors.append("%s.key: %r is not a label name (such as nvidia.com/gpu)" % (at, taint.get("key")))
        if not is_label_value(taint.get("value", "")):
            errors.append("%s.value: %r is not a label value (at most 63 characters)" % (at, taint.get("value")))
        if taint.get("effect") not in TAINT_EFFECTS:
            errors.append("%s.effect: %r is not one of %s" % (at, taint.get("effect"), ", ".join(TAINT_EFFECTS)))
        pair = (taint.get("key"), taint.get("effect"))
        if pair in seen:
            errors.append("%s: a second taint %s:%s; taints are unique by key and effect" % ((at,) + tuple(map(str, pair))))
        seen.add(pair)
    return errors


def toleration_errors(tolerations, where):
    """Check a list of tolerations against the rules of Kueue's ResourceFlavor ``spec.tolerations`` (see the
    module docstring). Never raises."""
    if not isinstance(tolerations, list):
        return ["%s: give a list of tolerations, each {key, operator, value, effect} as in a Pod" % where]
    errors = []
    for index, toleration in enumerate(tolerations):
        at = "%s[%d]" % (where, index)
        if not isinstance(toleration, dict):
            errors.append("%s: must be a mapping with key, operator, value and effect" % at)
            continue
        for unknown in sorted(str(k) for k in toleration
                              if k not in ("key", "operator", "value", "effect", "tolerationSeconds")):
            errors.append("%s.%s: unknown field of a toleration" % (at, unknown))
        operator = toleration.get("operator", "Equal")
        if operator not in ("Equal", "Exists"):
            errors.append("%s.operator: %r is not Equal or Exists" % (at, operator))
        if not toleration.get("key") and operator != "Exists":
            errors.append("%s.operator: must be Exists when key is empty (which tolerates every taint)" % at)
        if toleration.get("key") and not is_label_name(toleration["key"]):
            errors.append("%s.key: %r is not a label name" % (at, toleration["key"]))
        if operator == "Exists" and "value" in toleration:
            errors.append("%s.value: must be left out with operator Exists" % at)
        if "effect" in toleration and toleration["effect"] not in TAINT_EFFECTS:
            errors.append("%s.effect: %r is not one of %s" % (at, toleration["effect"], ", ".join(TAINT_EFFECTS)))
        if "tolerationSeconds" in toleration and toleration.get("effect") != "NoExecute":
            errors.append("%s.tolerationSeconds: only with effect NoExecute" % at)
    return errors


def flavor_settings_errors(settings, where="tenants_gpu_flavors"):
    """Check the inventory's flavor settings: ``{gpu product: {"node_taints": [taint], "tolerations":
    [toleration]}}`` (either key optional; a given list replaces the default from the nodes). Each list holds at
    most ``MAX_FLAVOR_TAINTS`` items and no ``node.kubernetes.io/`` taint. Never raises."""
    if settings is None:
        return []
    if not isinstance(settings, dict):
        return ["%s: give a mapping of GPU product (nvidia.com/gpu.product) to {node_taints, tolerations}" % where]
    errors = []
    for product, entry in sorted(settings.items(), key=lambda item: str(item[0])):
        at = "%s[%s]" % (where, product)
        if not isinstance(entry, dict):
            errors.append("%s: give a mapping with node_taints and/or tolerations" % at)
            continue
        errors.extend(unknown_field_errors(at, entry, ("node_taints", "tolerations")))
        if "node_taints" in entry:
            errors.extend(taint_errors(entry["node_taints"], at + ".node_taints"))
            if isinstance(entry["node_taints"], list):
                errors.extend("%s.node_taints: %s is a node's state, not its pool's; leave it out" % (at, t["key"])
                              for t in entry["node_taints"]
                              if isinstance(t, dict) and str(t.get("key", "")).startswith(NODE_LIFECYCLE_TAINT_PREFIX))
        if "tolerations" in entry:
            errors.extend(toleration_errors(entry["tolerations"], at + ".tolerations"))
        for field in ("node_taints", "tolerations"):
            if isinstance(entry.get(field), list) and len(entry[field]) > MAX_FLAVOR_TAINTS:
                errors.append("%s.%s: %d items; a Kueue ResourceFlavor takes at most %d"
                              % (at, field, len(entry[field]), MAX_FLAVOR_TAINTS))
    return errors
