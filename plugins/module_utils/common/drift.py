# -*- coding: utf-8 -*-
# Copyright: fairgpu maintainers
# Apache License 2.0 (see LICENSE)
"""Drift: what differs between what runs on a cluster and what fairgpu would apply. Pure logic.

A difference is a dict ``{"object": "<Kind>/<namespace>/<name>" (or a file path), "path": "<field path>",
"live": <value or None>, "fairgpu": <value or None>, "absent": "live" | "fairgpu" | None}``; ``path`` is dotted, with
``[i]`` for a list index and ``[name=x]`` for a list item matched by its ``name``. ``absent`` says which side has no
such field (a value of null is not the same as no field).

Two ways to compare:

- ``subset_differences``: the fields fairgpu sets, and only those (for API objects, which the API server and other
  controllers fill with defaults, status and fields of their own; server-side apply owns exactly the fields an
  applier sends: https://kubernetes.io/docs/reference/using-api/server-side-apply/#field-management). A field
  another field manager added beside fairgpu's is not drift; a field fairgpu sets with another value, or that is
  gone, is.
- ``document_differences``: two whole documents (Kueue's Configuration), where a key present on one side only is
  drift unless its value is the one the reader assumes when the key is absent (``defaults``, by path).

Scalars compare by meaning, not by spelling: Kubernetes quantities by value (``8`` and ``"8"``, ``"1Gi"`` and
``"1024Mi"``: apimachinery's grammar, plugins/module_utils/common/quantity.py) and Go durations by length
(``"10m"`` and ``"10m0s"`` and ``"600s"``: Go's time.ParseDuration, which Kueue's metav1.Duration fields use).
Key order never counts (the documents are parsed, not compared as text).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import re
from decimal import Decimal

from ansible_collections.fairgpu.tenancy.plugins.module_utils.common.quantity import parse_quantity

_ABSENT = object()
VALUE_LIMIT = 160

# Go's time.ParseDuration units (https://pkg.go.dev/time#ParseDuration), in nanoseconds.
_DURATION_UNITS = {"ns": 1, "us": 10 ** 3, "\u00b5s": 10 ** 3, "\u03bcs": 10 ** 3, "ms": 10 ** 6, "s": 10 ** 9,
                   "m": 60 * 10 ** 9, "h": 3600 * 10 ** 9}
_DURATION = re.compile(r"^([-+]?)((?:[0-9]*\.?[0-9]+(?:ns|us|\u00b5s|\u03bcs|ms|s|m|h))+)$")
_DURATION_PART = re.compile(r"([0-9]*\.?[0-9]+)(ns|us|\u00b5s|\u03bcs|ms|s|m|h)")


def parse_duration(value):
    """Nanoseconds (a Decimal) of Go duration string ``value`` (``"1h30m"``, ``"600s"``, ``"0"``), or None when
    ``value`` is not one (Go requires a unit on every number except a lone ``0``)."""
    if not isinstance(value, str):
        return None
    if value in ("0", "+0", "-0"):
        return Decimal(0)
    match = _DURATION.match(value)
    if not match:
        return None
    total = sum(Decimal(number) * _DURATION_UNITS[unit] for number, unit in _DURATION_PART.findall(match.group(2)))
    return -total if match.group(1) == "-" else total


def _quantity(value):
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        return None
    try:
        return parse_quantity(value)
    except (ValueError, TypeError):
        return None


def same_scalar(live, desired):
    """Whether two scalars mean the same: equal, or the same quantity (one side a string), or the same duration.
    Booleans never equal numbers or strings (``true`` and ``"true"`` differ: the reader's schema decides)."""
    if isinstance(live, bool) or isinstance(desired, bool):
        return isinstance(live, bool) and isinstance(desired, bool) and live == desired
    # Equal values are the same whatever their classes (Ansible hands filters str and dict subclasses).
    if live == desired:
        return True
    if isinstance(live, (int, float)) and isinstance(desired, (int, float)):
        return False
    if isinstance(live, str) and isinstance(desired, str):
        durations = parse_duration(live), parse_duration(desired)
        if None not in durations:
            return durations[0] == durations[1]
    if isinstance(live, str) or isinstance(desired, str):
        quantities = _quantity(live), _quantity(desired)
        if None not in quantities:
            return quantities[0] == quantities[1]
    return False


def _join(path, key):
    return "%s.%s" % (path, key) if path else str(key)


def _named(items):
    """A list whose items are all mappings with a string ``name``, distinct: matched by name, not by index
    (containers, env, ClusterQueue flavors and resources, PrometheusRule groups: listType=map keyed by name)."""
    if not items or not all(isinstance(i, dict) and isinstance(i.get("name"), str) for i in items):
        return False
    return len(set(i["name"] for i in items)) == len(items)


def _difference(path, live, desired):
    return {"path": path, "live": None if live is _ABSENT else live, "fairgpu": None if desired is _ABSENT else desired,
            "absent": "live" if live is _ABSENT else ("fairgpu" if desired is _ABSENT else None)}


def subset_differences(live, desired, path=""):
    """The differences in the fields ``desired`` sets (a parsed object: dicts, lists, scalars) between ``live`` and
    ``desired``; fields only ``live`` has are not differences. Lists of named items are matched by name (a live
    item fairgpu does not name is not a difference); other lists item by item, and a list of another length is one
    difference (the whole list). A null or empty value (``{}``, ``[]``, ``""``) fairgpu sends matches an absent
    field. Returns a list of differences (see the module docstring) without ``object``."""
    if live is _ABSENT:
        # Null or empty: the API server stores no field for it (omitempty; a null removes the field).
        return [] if desired is None or desired in ({}, [], "") else [_difference(path, live, desired)]
    if isinstance(desired, dict):
        if not isinstance(live, dict):
            return [_difference(path, live, desired)]
        found = []
        for key in desired:
            found.extend(subset_differences(live.get(key, _ABSENT), desired[key], _join(path, key)))
        return found
    if isinstance(desired, list):
        if not isinstance(live, list):
            return [_difference(path, live, desired)]
        if _named(desired) and all(isinstance(i, dict) for i in live):
            by_name = dict((i.get("name"), i) for i in live)
            found = []
            for item in desired:
                found.extend(subset_differences(by_name.get(item["name"], _ABSENT), item,
                                                "%s[name=%s]" % (path, item["name"])))
            return found
        if len(live) != len(desired):
            return [_difference(path, live, desired)]
        found = []
        for index, (one, other) in enumerate(zip(live, desired)):
            found.extend(subset_differences(one, other, "%s[%d]" % (path, index)))
        return found
    return [] if same_scalar(live, desired) else [_difference(path, live, desired)]


def document_differences(live, desired, defaults=None, path=""):
    """The differences between two whole documents ``live`` and ``desired`` (parsed: dicts, lists, scalars), both
    ways. ``defaults``: ``{"<dotted path>": value}``, the value the reader assumes where the key is absent: an absent
    key is compared as its default (``{}`` for a section that means the same absent and empty, whose keys then have
    defaults of their own); a key without a default that one side lacks is a difference (a section whose presence
    means something, such as Kueue's ``fairSharing``, has none). Lists compare item by item (order counts: Kueue
    reads preemptionStrategies and frameworks as ordered lists). Returns a list of differences without ``object``."""
    defaults = defaults or {}
    if isinstance(live, dict) and isinstance(desired, dict):
        found = []
        for key in list(desired) + [k for k in live if k not in desired]:
            sub = _join(path, key)
            one, other = live.get(key, _ABSENT), desired.get(key, _ABSENT)
            if one is _ABSENT or other is _ABSENT:
                default = defaults.get(sub, _ABSENT)
                if default is _ABSENT:
                    found.append(_difference(sub, one, other))
                    continue
                inner = document_differences(default if one is _ABSENT else one,
                                             default if other is _ABSENT else other, defaults, sub)
                for difference in inner:
                    if difference["path"] == sub:
                        difference.update(_difference(sub, one, other))
                found.extend(inner)
                continue
            found.extend(document_differences(one, other, defaults, sub))
        return found
    if isinstance(live, list) and isinstance(desired, list):
        if len(live) != len(desired):
            return [_difference(path, live, desired)]
        found = []
        for index, (one, other) in enumerate(zip(live, desired)):
            found.extend(document_differences(one, other, None, "%s[%d]" % (path, index)))
        return found
    if isinstance(live, (dict, list)) or isinstance(desired, (dict, list)):
        return [_difference(path, live, desired)]
    return [] if same_scalar(live, desired) else [_difference(path, live, desired)]


def object_key(obj):
    """``"<Kind>/<namespace>/<name>"`` of an API object (``"<Kind>/<name>"`` when cluster-scoped)."""
    metadata = obj.get("metadata") or {}
    parts = [obj.get("kind", "?")] + ([metadata["namespace"]] if metadata.get("namespace") else []) + \
        [metadata.get("name", "?")]
    return "/".join(parts)


# Fields of an object fairgpu sends that are its identity or are written by the API server, not content.
_IDENTITY = ("apiVersion", "kind")
_METADATA_CONTENT = ("labels", "annotations")


def object_content(obj):
    """What of ``obj`` (an API object as fairgpu applies it) is content to compare: everything except apiVersion,
    kind and metadata other than labels and annotations."""
    content = dict((k, v) for k, v in obj.items() if k not in _IDENTITY + ("metadata",))
    metadata = dict((k, v) for k, v in (obj.get("metadata") or {}).items() if k in _METADATA_CONTENT)
    if metadata:
        content["metadata"] = metadata
    return content


def object_differences(live, desired):
    """The differences of one API object: ``live`` (as read, or None when it is not there) against ``desired`` (as
    fairgpu applies it), in the fields fairgpu sets. A missing object is one difference with path ``""``. Values of
    a Secret's ``data`` and ``stringData`` are never returned (``"(hidden)"``)."""
    key = object_key(desired)
    if live is None:
        found = [{"path": "", "live": None, "fairgpu": "(the object)", "absent": "live"}]
    else:
        found = subset_differences(live, object_content(desired))
    if desired.get("kind") == "Secret":
        for one in found:
            if one["path"].split(".")[0] in ("data", "stringData"):
                one["live"] = None if one["live"] is None else "(hidden)"
                one["fairgpu"] = None if one["fairgpu"] is None else "(hidden)"
    for one in found:
        one["object"] = key
    return found


def objects_differences(live_objects, desired_objects):
    """The differences of every object of ``desired_objects`` (a list of API objects) against ``live_objects``: a
    dict keyed by ``object_key`` (missing keys: the object is not there). Returns the concatenated list."""
    found = []
    for desired in desired_objects:
        found.extend(object_differences(live_objects.get(object_key(desired)), desired))
    return found


def _show(value, absent):
    if absent:
        return "(absent)"
    text = json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= VALUE_LIMIT else text[:VALUE_LIMIT] + "..."


def difference_lines(differences):
    """One line per difference: ``<object> <path>: live <value>, fairgpu <value>`` (values as JSON, cut at
    VALUE_LIMIT characters; ``(absent)`` for a missing field)."""
    lines = []
    for one in differences:
        where = one.get("object", "")
        if one.get("path"):
            where = "%s %s" % (where, one["path"]) if where else one["path"]
        lines.append("%s: live %s, fairgpu %s" % (where, _show(one["live"], one.get("absent") == "live"),
                                                  _show(one["fairgpu"], one.get("absent") == "fairgpu")))
    return lines
