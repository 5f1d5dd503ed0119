# -*- coding: utf-8 -*-
# Copyright: fairgpu maintainers
# Apache License 2.0 (see LICENSE)
"""Adopt, don't overwrite: what fairgpu does with a Helm release that is already there (the kueue, gpu_operator
and monitoring roles' charts), decided before anything changes on the cluster. Pure logic, no cluster access:
the roles read the release with ``kubernetes.core.helm_info`` (``status.values`` is ``helm get values`` of the
release, the values its installer supplied, without the chart's defaults; ``status.chart`` is ``<name>-<version>``)
and the chart's defaults with ``helm show values``, and module ``fairgpu.tenancy.helm_release_adoption`` calls
``adoption`` and stops the play on ``refuse``.

Why: ``kubernetes.core.helm`` defaults to ``reset_values: true`` (kubernetes.core 6.2.0 plugins/modules/helm.py,
``deploy``: ``helm upgrade -i --reset-values``), and helm then drops every value the release had and applies
fairgpu's over the new chart's defaults (helm pkg/action/upgrade.go, ``reuseValues``: "If ResetValues is set, we
completely ignore current.Config"; read at v3.21.4, the newest v3 tag of the stored helm/helm mirror, unchanged on its
dev-v3 branch; the toolchain pins v3.22.0). A GPU Operator installed with ``driver.enabled=false`` would get its
driver container back.

The decision, by ``mode`` (the role's ``<role>_adopt``):

- no release: ``install`` (fairgpu's values and its marker).
- a release fairgpu installed (its values carry the marker ``fairgpu.installedBy``) whose values are exactly what
  fairgpu last passed (the marker's ``valuesDigest``, a SHA-256 of them): ``upgrade`` with fairgpu's values, in
  either mode, without a prompt; what it no longer sets were its own values. A marker of an earlier fairgpu,
  without a digest, counts as unchanged when nothing would be dropped.
- otherwise (a release someone else installed, one of fairgpu's whose values someone changed by hand, or one an
  earlier ``merge`` kept values in), the release's own values are at stake:

  * ``refuse`` (default): ``refuse`` when an upgrade with reset values would drop a value the release has
    (``dropped``: a value it sets that fairgpu does not, and that differs from the chart's default) or overwrite
    one (``changes`` whose old value came from the release); ``upgrade`` when nothing of the release's would be
    lost (all its values in ``<role>_extra_values``, say).
  * ``merge``: ``merge``, the release's values with fairgpu's merged over them (fairgpu's owned keys win). This is
    what ``helm upgrade --reset-then-reuse-values`` does (same ``reuseValues``: the new chart's defaults,
    ``chartutil.CoalesceTables(newVals, current.Config)``: the old values under the new; ResetValues checked first,
    so it wins when both are given), but
    computed here and passed in full with reset values: kubernetes.core.helm 6.2.0 passes ``--reset-values``
    together with ``--reset-then-reuse-values`` unless ``reset_values: false`` (``deploy``), and without the
    helm-diff plugin it decides "changed" by comparing the release's values with the values it is given
    (``default_check``), which would say changed on every run; the module shows no diff either. Passed in full,
    the stored values are the merged ones and a second run compares equal. (The same trap in the field:
    ansible-collections/kubernetes.core#1229 and #1230, "reset_then_reuse_values ... is also a no-op out of the box,
    since helm ignores it when either --reset-values or --reuse-values is set"; a silent value drop on upgrade:
    elewa-git/opencrane#148.)

  Merging differs from helm's coalescing in three places, each because a list is one value to helm: a list of
  objects that all have a ``name`` (``toolkit.env``, ``controllerManager.featureGates``) is merged by name (the
  release's entries stay, fairgpu's entry of the same name replaces one); a YAML document held in a string value
  (Kueue's ``managerConfig.controllerManagerConfigYaml``, ``EMBEDDED_YAML``) is parsed and merged key by key; and
  ``SET_LISTS`` (Kueue's ``integrations.frameworks``) are unions, so another team's PyTorchJob integration stays.

A release fairgpu did not install is never marked (teardown never uninstalls it, ``teardown/plan.py``).

Keys are written as helm's ``--set`` paths: ``a.b.c``, a named list entry ``toolkit.env[name=X]``, a set entry
``integrations.frameworks[kubeflow.org/pytorchjob]``, a key inside an embedded YAML document after a colon
(``managerConfig.controllerManagerConfigYaml: fairSharing``).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import hashlib
import json

from ansible_collections.fairgpu.tenancy.plugins.module_utils.common import pyyaml

MODES = ("refuse", "merge")
MARKER_KEY = "fairgpu"
INSTALLED_BY = "fairgpu.tenancy"
# A path element: the YAML document inside a string value.
_YAML = ("yaml",)
# String values that hold a YAML document, per chart (Kueue's chart parses it: charts/kueue/templates/manager/
# manager-config.yaml of kueue v0.19.2, ``fromYaml``).
EMBEDDED_YAML = {
    "kueue": [("managerConfig", "controllerManagerConfigYaml")],
}
# Lists that are sets: merged as unions (Kueue's integrations.frameworks: the frameworks Kueue manages; Kueue v0.19.2
# pkg/controller/jobframework/setup.go enables each one named).
SET_LISTS = {
    "kueue": [("managerConfig", "controllerManagerConfigYaml", _YAML, "integrations", "frameworks")],
}
_MISSING = object()


def _dict(value):
    return value if isinstance(value, dict) else {}


def _named(items):
    """Whether a list is a list of objects that all carry a distinct string ``name``."""
    if not isinstance(items, list) or not items:
        return False
    names = [i.get("name") if isinstance(i, dict) else None for i in items]
    return all(isinstance(n, str) for n in names) and len(set(names)) == len(names)


def _load_yaml(text):
    try:
        doc = pyyaml.require().safe_load(text)
    except Exception:  # pylint: disable=broad-except  # any YAML error: the string stays one value
        return None
    return doc if isinstance(doc, dict) else None


def _dump_yaml(doc):
    # Plain types first: Ansible hands over its own dict and str subclasses, which safe_dump refuses.
    doc = json.loads(json.dumps(doc, default=str))
    return pyyaml.require().safe_dump(doc, default_flow_style=False, indent=2, allow_unicode=True, sort_keys=True)


class _Chart(object):
    """The path rules of one chart (EMBEDDED_YAML, SET_LISTS)."""

    def __init__(self, chart):
        self.embedded = set(EMBEDDED_YAML.get(chart, []))
        self.sets = set(SET_LISTS.get(chart, []))

    def flatten(self, tree, path=()):
        """``{path: leaf value}``: dicts are walked (an empty one is a leaf), a named list gives one leaf per entry
        (``("name", X)``), a set list one per item (``("item", X)``: True), an embedded YAML document its keys."""
        flat = {}
        if path in self.embedded and isinstance(tree, str):
            doc = _load_yaml(tree)
            if doc is not None:
                return self.flatten(doc, path + (_YAML,))
        if isinstance(tree, dict) and tree:
            for key, value in tree.items():
                flat.update(self.flatten(value, path + (key,)))
        elif path in self.sets and isinstance(tree, list) and tree and \
                all(isinstance(i, (str, int, float, bool)) for i in tree):
            for item in tree:
                flat[path + (("item", item),)] = True
        elif _named(tree):
            for item in tree:
                flat[path + (("name", item["name"]),)] = item
        else:
            flat[path] = tree
        return flat

    def lookup(self, tree, path):
        """The value at ``path`` (the ``flatten`` path elements), or ``_MISSING``."""
        value = tree
        for element in path:
            if element == _YAML:
                value = _load_yaml(value) if isinstance(value, str) else None
                if value is None:
                    return _MISSING
            elif isinstance(element, tuple) and element[0] == "name":
                if not isinstance(value, list):
                    return _MISSING
                found = [i for i in value if isinstance(i, dict) and i.get("name") == element[1]]
                if not found:
                    return _MISSING
                value = found[0]
            elif isinstance(element, tuple) and element[0] == "item":
                if not isinstance(value, list) or element[1] not in value:
                    return _MISSING
                value = True
            else:
                if not isinstance(value, dict) or element not in value:
                    return _MISSING
                value = value[element]
        return value

    def merge(self, current, desired, path=()):
        """``desired`` merged over ``current`` (see the module docstring)."""
        if isinstance(current, dict) and isinstance(desired, dict):
            merged = copy.deepcopy(current)
            for key, value in desired.items():
                merged[key] = self.merge(current[key], value, path + (key,)) if key in current else copy.deepcopy(value)
            return merged
        if path in self.embedded and isinstance(current, str) and isinstance(desired, str):
            old, new = _load_yaml(current), _load_yaml(desired)
            if old is not None and new is not None:
                merged = self.merge(old, new, path + (_YAML,))
                return desired if merged == new else _dump_yaml(merged)
        if path in self.sets and isinstance(current, list) and isinstance(desired, list):
            return list(current) + [i for i in desired if i not in current]
        if _named(current) and _named(desired):
            new = {i["name"]: i for i in desired}
            merged = [copy.deepcopy(new.pop(i["name"], i)) for i in current]
            return merged + [copy.deepcopy(i) for i in desired if i["name"] in new]
        return copy.deepcopy(desired)


def _coalesce(base, top):
    """``top`` over ``base`` as helm coalesces values: maps merged key by key, any other value replaced whole."""
    if isinstance(base, dict) and isinstance(top, dict):
        merged = dict(base)
        for key, value in top.items():
            merged[key] = _coalesce(base[key], value) if key in base else value
        return merged
    return top


def _kueue_cert_manager(merged, current):
    """A Kueue release that takes its certificates from cert-manager (``enableCertManager: true``) keeps them: the
    merged Configuration gets the release's ``internalCertManagement``, or ``{enable: false}`` where the release's
    had none, which is what the chart sets then (kueue v0.19.2 charts/kueue/templates/manager/manager-config.yaml:
    with ``enableCertManager`` the default section is ``dict "enable" false``). fairgpu's Configuration turns
    internal certificate management on, and the two would fight over the webhook certificate."""
    if merged.get("enableCertManager") is not True:
        return merged
    root = EMBEDDED_YAML["kueue"][0]
    text = _Chart("kueue").lookup(merged, root)
    config = _load_yaml(text) if isinstance(text, str) else None
    if config is None:
        return merged
    theirs = _Chart("kueue").lookup(current, root + (_YAML, "internalCertManagement"))
    wanted = theirs if isinstance(theirs, dict) else {"enable": False}
    if config.get("internalCertManagement") == wanted:
        return merged
    config["internalCertManagement"] = wanted
    merged = copy.deepcopy(merged)
    _put(merged, root, _dump_yaml(config))
    return merged


def _put(tree, path, value):
    """Set ``tree[path[0]]...[path[-1]] = value`` (plain keys), making dicts on the way."""
    for key in path[:-1]:
        tree = tree.setdefault(key, {})
    tree[path[-1]] = value


def key_name(path):
    """A ``flatten`` path as text: ``a.b``, ``a[name=X]``, ``a[X]``, ``a.b: c.d`` (a key inside a YAML string)."""
    text = ""
    for element in path:
        if element == _YAML:
            text += ":"
        elif isinstance(element, tuple):
            text += "[%s]" % ("name=%s" % element[1] if element[0] == "name" else element[1])
        else:
            key = str(element).replace(".", "\\.")
            text += key if not text else (" " + key if text.endswith(":") else "." + key)
    return text


def _show(value):
    if value is _MISSING:
        return "(unset)"
    return json.dumps(value, sort_keys=True, default=str)


def without_marker(values):
    """The release's values without fairgpu's marker."""
    values = dict(_dict(values))
    values.pop(MARKER_KEY, None)
    return values


def marker_of(values):
    """fairgpu's marker in a release's values (``{"installedBy", "valuesDigest", "merged"}``), {} when none."""
    marker = _dict(_dict(values).get(MARKER_KEY))
    return marker if marker.get("installedBy") == INSTALLED_BY else {}


def digest(values):
    """SHA-256 (hex) of Helm values, canonical JSON: what the marker records of the values fairgpu passed."""
    text = json.dumps(values, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def marker(values, merged=False):
    """The marker for a release fairgpu installed, recording ``values`` (fairgpu's values as passed, without the
    marker); ``merged``: they include values the release had that fairgpu does not set."""
    mark = {"installedBy": INSTALLED_BY, "valuesDigest": digest(values)}
    if merged:
        mark["merged"] = True
    return {MARKER_KEY: mark}


def compare(chart, current, desired, defaults=None):
    """Key by key, what fairgpu's values do to a release's values. ``current``: the release's user-supplied values
    (without the marker); ``desired``: fairgpu's; ``defaults``: the chart's default values (``helm show values``),
    None when unknown (then every value the release sets counts as one an upgrade could drop).

    Returns ``{"changes": [{"key", "old", "new", "from"}], "dropped": [{"key", "value", "default"}]}``:
    ``changes`` the keys fairgpu sets whose value differs from the release's now (``from``: ``release`` when the
    release sets it, ``chart default`` when it comes from the chart); ``dropped`` what an upgrade with reset values
    would drop: a value the release sets, fairgpu does not, and the chart's default differs from (a value equal to
    the default is not lost)."""
    rules = _Chart(chart)
    current, desired = _dict(current), _dict(desired)
    defaults = defaults if isinstance(defaults, dict) else None
    want = rules.flatten(desired)
    have = rules.flatten(current)
    # What the release runs with now, and what an upgrade with reset values gives: values over the chart's
    # defaults as helm coalesces them (maps merged, anything else replaced whole).
    now = _coalesce(defaults or {}, current)
    reset = _coalesce(defaults or {}, desired)
    changes = []
    for path, new in sorted(want.items(), key=lambda kv: key_name(kv[0])):
        old = rules.lookup(now, path)
        default = rules.lookup(defaults, path) if defaults is not None else _MISSING
        if rules.lookup(current, path) is not _MISSING and not (default is not _MISSING and default == old):
            source = "release"
        elif old is not _MISSING:
            source = "chart default"
        else:
            source = "unset"
        if old != new:
            changes.append({"key": key_name(path), "old": None if old is _MISSING else old, "new": new,
                            "from": source})
    # A YAML document the release runs with from the chart's defaults (Kueue's Configuration when the release does
    # not set it): fairgpu's document replaces it whole, so its keys count too.
    sources = dict((path, "release") for path in have)
    for root in rules.embedded:
        if rules.lookup(current, root) is _MISSING:
            for path, value in rules.flatten(now).items():
                if path[:len(root) + 1] == root + (_YAML,):
                    have[path] = value
                    sources[path] = "chart default"
    dropped = []
    for path, value in sorted(have.items(), key=lambda kv: key_name(kv[0])):
        if any(path[:n] in want for n in range(len(path) + 1)) or any(p[:len(path)] == path for p in want):
            continue
        after = rules.lookup(reset, path)
        if after is not _MISSING and after == value:
            continue
        default = rules.lookup(defaults, path) if defaults is not None else _MISSING
        dropped.append({"key": key_name(path), "value": value, "from": sources[path],
                        "default": None if default is _MISSING else default})
    return {"changes": changes, "dropped": dropped}


def adoption(status, desired, mode="refuse", chart="", role="", defaults=None):
    """What the role does with its release. ``status``: ``kubernetes.core.helm_info``'s ``status`` ({} or None when
    the release is not there); ``desired``: fairgpu's values (the role's values with ``<role>_extra_values``, no
    marker); ``mode``: ``<role>_adopt``; ``chart``: ``kueue``, ``gpu-operator`` or ``kube-prometheus-stack``
    (the path rules); ``role``: the role's variable prefix, for the message; ``defaults``: the chart's default values
    (dict, or the YAML text of ``helm show values``), None when unknown.

    Returns ``{"decision", "reason", "values", "changes", "dropped", "kept", "lines", "message", "diff",
    "would_change"}``: ``decision`` ``install``, ``upgrade``, ``merge`` or ``refuse``; ``values`` what to pass to
    kubernetes.core.helm (with the marker where the release is fairgpu's; empty for ``refuse``); ``kept``: under
    ``merge``, the release's values that a reset would have dropped and the merge keeps; ``lines``: the listing a
    person reads; ``message``: for ``refuse``, the listing and the fix; ``diff``: ``{"before", "after"}`` (YAML of
    the release's values now and of ``values``) for ``--diff``. Raises ValueError for a mode not in ``MODES``."""
    if mode not in MODES:
        raise ValueError("%s_adopt: %r is not one of %s" % (role, mode, ", ".join(MODES)))
    desired = copy.deepcopy(_dict(desired))
    if isinstance(defaults, str):
        defaults = _load_yaml(defaults)
    result = {"decision": "install", "values": {}, "changes": [], "dropped": [], "kept": [], "lines": [],
              "message": "", "would_change": True,
              "release": {"name": None, "chart": None, "revision": None, "marked": False}}
    if not status:
        result["values"] = dict(desired, **marker(desired))
        result["reason"] = "no release yet: fairgpu installs it"
        result["diff"] = {"before": "", "after": _dump_yaml(result["values"])}
        result["lines"] = [result["reason"]]
        return result

    values_now = _dict(status.get("values"))
    mark = marker_of(values_now)
    current = without_marker(values_now)
    name = status.get("name")
    release = "release %s (%s, revision %s)" % (name, status.get("chart"), status.get("revision"))
    result["release"] = {"name": name, "chart": status.get("chart"), "revision": status.get("revision"),
                         "marked": bool(mark)}
    found = compare(chart, current, desired, defaults)
    result.update(found)
    lost = found["dropped"] + [c for c in found["changes"] if c["from"] == "release"]

    if mark and not mark.get("merged") and (
            mark.get("valuesDigest") == digest(current) if "valuesDigest" in mark else not found["dropped"]):
        decision, reason = "upgrade", "%s is fairgpu's and unchanged since fairgpu last set it" % release
        values = dict(desired, **marker(desired))
    else:
        if not mark:
            why = "%s was not installed by fairgpu" % release
        elif mark.get("merged") and mark.get("valuesDigest") == digest(current):
            why = "%s is fairgpu's and keeps values of its own (an earlier %s_adopt: merge)" % (release, role)
        else:
            why = "%s is fairgpu's but its values were changed since fairgpu set them" % release
        if mode == "merge":
            rules = _Chart(chart)
            base = copy.deepcopy(current)
            for root in rules.embedded:
                default = rules.lookup(defaults, root) if isinstance(defaults, dict) else _MISSING
                if rules.lookup(current, root) is _MISSING and isinstance(default, str):
                    _put(base, root, default)
            merged = rules.merge(base, desired)
            if chart == "kueue":
                merged = _kueue_cert_manager(merged, current)
            decision, reason = "merge", why + "; %s_adopt: merge keeps its values, fairgpu's merged over them" % role
            result["kept"] = found["dropped"]
            values = dict(merged, **marker(merged, merged=merged != desired)) if mark else merged
        elif lost:
            decision, reason = "refuse", why + "; an upgrade would drop or overwrite its values"
            values = {}
        else:
            decision, reason = "upgrade", why + "; nothing it sets would be lost"
            values = dict(desired, **marker(desired)) if mark else desired
    result.update({"decision": decision, "reason": reason, "values": values})
    result["would_change"] = decision != "refuse" and values != values_now
    result["diff"] = {"before": _dump_yaml(values_now), "after": _dump_yaml(values) if values else ""}
    result["lines"] = listing(result)
    if decision == "refuse":
        result["message"] = "\n".join(
            ["%s_adopt: refuse: %s." % (role, reason),
             "Nothing was changed on the cluster. Fix: set %s_adopt: merge to keep the release's values and merge "
             "fairgpu's over them, or put the values to keep into %s_extra_values (fairgpu then sets them itself)."
             % (role, role)] + result["lines"])
    return result


def listing(result):
    """The lines a person reads: the decision, then every change and every dropped (or kept) value."""
    lines = [result["reason"]]
    for change in result["changes"]:
        note = " (chart default)" if change["from"] == "chart default" else ""
        lines.append("  fairgpu sets %s: %s%s -> %s" % (change["key"], _show(change["old"]), note, _show(change["new"])))
    verb = "kept (merge)" if result["decision"] == "merge" else "dropped by an upgrade with reset values"
    for drop in result["dropped"]:
        if drop.get("from") == "chart default":
            lines.append("  %s: %s = %s (the chart's default the release runs with)" % (
                verb, drop["key"], _show(drop["value"])))
        else:
            lines.append("  %s: %s = %s (chart default %s)" % (
                verb, drop["key"], _show(drop["value"]), _show(drop["default"])))
    return lines


def owned_keys(chart, desired):
    """The keys fairgpu's values set (``key_name`` paths), sorted: what fairgpu owns in the chart's values."""
    return sorted(key_name(p) for p in _Chart(chart).flatten(_dict(desired)))


def chart_source(ref, repo_url="", variable="chart_ref"):
    """How kubernetes.core.helm gets a chart without a named repository: ``{"chart_ref", "chart_repo_url"}``.

    A named repository (``helm repo add`` + ``<repo>/<chart>``) is read from the control node's local index, which
    nothing refreshes: a stale one stops the install ("chart version not found ... helm repo update"), and on a fresh
    control node ``--check`` fails ("repo ... not found"). So, with ``ref``:

    - ``oci://...``: the chart's registry (helm pulls the manifest of the tag on every call, no index;
      https://helm.sh/docs/topics/registries/); a local chart (directory or ``.tgz``) or an ``http(s)://`` URL of a
      packaged chart as it is; ``chart_repo_url`` none.
    - a chart name, or ``<repo>/<chart>``, with ``repo_url``: ``chart_ref`` the chart's name and ``chart_repo_url``
      the repository (helm's ``--repo``: pkg/action/install.go ``LocateChart`` calls
      pkg/repo/chartrepo.go ``FindChartInAuthAndTLSAndPassRepoURL``, which downloads the index under a random name
      and removes it after; helm v3.21.4), so the index is fresh on every call, check mode included
      (kubernetes.core.helm runs ``helm show chart --repo`` then).
    - ``<repo>/<chart>`` without ``repo_url``: ValueError naming ``variable`` and the fix.
    """
    ref = str(ref or "").strip()
    repo_url = str(repo_url or "").strip()
    if not ref:
        raise ValueError("%s: empty; give an oci:// reference or a chart name with its repository URL" % variable)
    if ref.startswith(("oci://", "http://", "https://", "/", "./", "../", "~")) or \
            ref.endswith((".tgz", ".tar.gz")):
        return {"chart_ref": ref, "chart_repo_url": None}
    name = ref.rsplit("/", maxsplit=1)[-1]
    if repo_url:
        return {"chart_ref": name, "chart_repo_url": repo_url}
    if "/" in ref:
        raise ValueError("%s: %s names a chart of a local helm repository (helm repo add), whose index nothing "
                         "refreshes; give its repository URL too (the role's *_chart_repo_url) or an oci:// "
                         "reference" % (variable, ref))
    return {"chart_ref": ref, "chart_repo_url": None}
