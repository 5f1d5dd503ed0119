# -*- coding: utf-8 -*-
# Copyright: fairgpu maintainers
# Apache License 2.0 (see LICENSE)
"""Where fairgpu's monitoring objects go (monitoring_mode helm) for the Prometheus custom resources a cluster
already runs, and what fairgpu refuses. Pure logic, no cluster access: the role reads the Prometheus objects
(monitoring.coreos.com/v1) and the namespaces, and passes them here.

What a Prometheus custom resource decides (Prometheus Operator v0.85.0, pkg/apis/monitoring/v1/prometheus_types.go):

- ``serviceMonitorSelector``, ``ruleSelector``: label selectors of the ServiceMonitors and PrometheusRules it
  takes; "an empty label selector matches all objects. A null label selector matches no objects."
- ``serviceMonitorNamespaceSelector``, ``ruleNamespaceSelector``: label selectors of the namespaces it looks in;
  "an empty label selector matches all namespaces. A null label selector (default value) matches the current
  namespace only."
- ``enforcedNamespaceLabel``: the label added, with the object's namespace as value, to every series a
  ServiceMonitor scrapes (the last relabelling of the target and of the metrics), to every recorded series and
  alert of a PrometheusRule, and as a matcher to every vector selector of the rules' expressions (pkg/namespacelabeler
  labeler.go: EnforceNamespaceLabel with prom-label-proxy's injectproxy, GetRelabelingConfigs). A rule in namespace
  X then reads only series labelled X: fairgpu's rules in fairgpu's monitoring namespace read nothing (the tenants'
  alerts never fire, ``absent(up{job="kueue"})`` fires for ever).
- ``excludedFromEnforcement`` (and the deprecated ``prometheusRulesExcludedFromEnforce``): objects the enforcement
  skips, by group, resource, namespace and name (an empty name: every object of the namespace;
  pkg/prometheus/server/rules.go, labeler.go IsExcluded).
- ``ignoreNamespaceSelectors``: every ServiceMonitor discovers targets only in its own namespace
  (pkg/prometheus/promcfg.go getNamespacesFromNamespaceSelector).

fairgpu's answer:

- Both ServiceMonitors live in the namespace they scrape (Kueue's, the DCGM exporter's): ``namespaceSelector`` is
  then never needed, and under enforcement the enforced label is the namespace the series come from.
- The rules: one PrometheusRule ``fairgpu-alerts`` in the monitoring namespace (``single``) while no Prometheus
  enforces a namespace label on it; else (``split``) each rule goes to the namespace whose series it reads:
  Kueue's rules in Kueue's namespace (``fairgpu-kueue-alerts``), the DCGM exporter's in the exporter's
  (``fairgpu-gpu-alerts``), so the enforced matcher holds. A rule that joins the series of both (``cross``) can hold
  in no namespace: refused, or left out with ``monitoring_enforced_cross_namespace_rules: omit``; the fix that keeps
  them is to exclude ``fairgpu-alerts`` from enforcement, which brings back ``single``.
- Every object must be selected by some Prometheus; else refused, naming each Prometheus's selectors and the labels
  to add (``monitoring_labels`` on fairgpu's objects, labels on the namespace).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.fairgpu.tenancy.plugins.module_utils.common import pyyaml

KUEUE, DCGM, CROSS = "kueue", "dcgm", "cross"
SINGLE, SPLIT = "single", "split"
RULE_NAME = "fairgpu-alerts"
SPLIT_RULE_NAMES = {KUEUE: "fairgpu-kueue-alerts", DCGM: "fairgpu-gpu-alerts"}
KUEUE_SM, DCGM_SM = "fairgpu-kueue", "fairgpu-dcgm-exporter"
GROUP = "monitoring.coreos.com"
CROSS_MODES = ("refuse", "omit")
# Labels fairgpu's rules group, join or match by: an enforced label of one of these names would be overwritten
# with a namespace by the operator's last relabelling and the rules would mean something else.
RULE_LABELS = ("tenant", "exported_namespace", "exported_pod", "exported_container", "cluster_queue", "cohort",
               "flavor", "resource", "replica_role", "status", "UUID", "GPU_I_ID", "GPU_I_PROFILE", "Hostname", "gpu",
               "job", "severity")

_KUEUE_SERIES = re.compile(r"\bkueue_[A-Za-z0-9_]+|\bup\s*\{[^}]*job\s*=\s*\"kueue\"")
_DCGM_SERIES = re.compile(r"\bDCGM_[A-Za-z0-9_]+")
# kube-state-metrics' series (the nodes' allocatable and readiness): scraped in kube-state-metrics' own namespace,
# which fairgpu writes no rule into; a rule that reads them is ``cross`` whatever else it reads.
_KUBE_STATE_METRICS_SERIES = re.compile(r"\bkube_[a-z]+_[A-Za-z0-9_]+")
_RECORDED = re.compile(r"\bfairgpu:[A-Za-z0-9_:]+")
# A trailing "unless on () NAME" or "unless on (cluster) NAME" (the guard of each cluster's own series, when one
# Prometheus holds several clusters'): a guard that only holds the alert back while NAME has series; without them
# (NAME left out, or read in a namespace where it has none) the alert is what it is without the guard.
_GUARD = re.compile(r"\bunless\s+on\s*\(\s*(?:cluster\s*)?\)\s*(fairgpu:[A-Za-z0-9_:]+)\s*$")


class PlacementError(ValueError):
    """Raised for input that cannot be placed; the message names the variable."""


def _rule_name(rule):
    return rule.get("alert") or rule.get("record")


def rule_sources(rules_text):
    """``{rule name: (source, guards)}`` of a rule file's text: ``source`` is ``kueue`` (reads only Kueue's series:
    ``kueue_*``, ``up{job="kueue"}``), ``dcgm`` (only the DCGM exporter's ``DCGM_*``) or ``cross`` (both, or
    kube-state-metrics' ``kube_*``, whose namespace is neither); a
    recorded series (``fairgpu:*``) counts as what its rule reads. ``guards``: recorded series read only by a
    trailing ``unless on () NAME`` or ``unless on (cluster) NAME`` (not counted). Raises PlacementError for a rule
    that reads neither."""
    doc = pyyaml.require().safe_load(rules_text) or {}
    rules = [r for g in doc.get("groups") or [] for r in g.get("rules") or []]
    recorded = {r["record"]: r for r in rules if "record" in r}
    found = {}

    def source(rule, seen=()):
        name = _rule_name(rule)
        if name in found:
            return found[name][0]
        expr = str(rule.get("expr", "")).strip()
        guard = _GUARD.search(expr)
        guards = [guard.group(1)] if guard else []
        body = expr[:guard.start()] if guard else expr
        kinds = set()
        if _KUEUE_SERIES.search(body):
            kinds.add(KUEUE)
        if _DCGM_SERIES.search(body):
            kinds.add(DCGM)
        if _KUBE_STATE_METRICS_SERIES.search(body):
            kinds.add(CROSS)
        for used in _RECORDED.findall(body):
            if used in recorded and used not in seen and used != name:
                kinds.add(source(recorded[used], seen + (name,)))
        if not kinds:
            raise PlacementError("rule %s reads neither Kueue's series nor the DCGM exporter's: fairgpu cannot tell "
                                 "which namespace it belongs in" % name)
        kind = CROSS if CROSS in kinds or len(kinds) > 1 else kinds.pop()
        found[name] = (kind, guards)
        return kind

    for rule in rules:
        source(rule)
    return found


def split_groups(rules_text, omit_cross=True):
    """The rule file's groups, split by source: ``{"kueue": [groups], "dcgm": [groups], "cross": [groups]}``. Each
    group keeps its name, interval and the order of its rules; a group left with no rule is dropped. Every rule is
    in exactly one list (one home: the rule file)."""
    doc = pyyaml.require().safe_load(rules_text) or {}
    sources = rule_sources(rules_text)
    out = {KUEUE: [], DCGM: [], CROSS: []}
    for group in doc.get("groups") or []:
        for kind in (KUEUE, DCGM, CROSS):
            rules = [r for r in group.get("rules") or [] if sources[_rule_name(r)][0] == kind]
            if rules:
                out[kind].append(dict(group, rules=rules))
    return out


def label_selector_matches(selector, labels):
    """Whether a Kubernetes label selector matches ``labels``. ``None`` matches nothing, ``{}`` everything;
    ``matchLabels`` and ``matchExpressions`` (In, NotIn, Exists, DoesNotExist; NotIn and DoesNotExist match an
    absent label) are ANDed (k8s.io/apimachinery pkg/apis/meta/v1 LabelSelector)."""
    if selector is None:
        return False
    labels = labels or {}
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != str(value):
            return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr.get("key"), expr.get("operator"), [str(v) for v in expr.get("values") or []]
        if op == "In" and labels.get(key) not in values:
            return False
        if op == "NotIn" and key in labels and labels[key] in values:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
        if op not in ("In", "NotIn", "Exists", "DoesNotExist"):
            return False
    return True


def prometheus_key(prom):
    meta = prom.get("metadata") or {}
    return "%s/%s" % (meta.get("namespace"), meta.get("name"))


def selects(prom, kind, namespace, labels, namespace_labels):
    """Whether Prometheus ``prom`` (a custom resource as read) takes a fairgpu object of ``kind`` (``ServiceMonitor``
    or ``PrometheusRule``) in ``namespace`` with ``labels``; ``namespace_labels``: ``{namespace: labels}``."""
    spec = prom.get("spec") or {}
    prefix = "serviceMonitor" if kind == "ServiceMonitor" else "rule"
    if not label_selector_matches(spec.get(prefix + "Selector"), labels):
        return False
    ns_selector = spec.get(prefix + "NamespaceSelector")
    if ns_selector is None:
        return namespace == (prom.get("metadata") or {}).get("namespace")
    return label_selector_matches(ns_selector, namespace_labels.get(namespace) or {})


def excludes(prom, resource, namespace, name):
    """Whether ``prom``'s ``excludedFromEnforcement`` (or the deprecated ``prometheusRulesExcludedFromEnforce``)
    skips the object ``resource`` (``prometheusrules``, ``servicemonitors``) ``namespace``/``name``: an entry of
    group monitoring.coreos.com (the default), that resource, that namespace (required) and that name or none."""
    spec = prom.get("spec") or {}
    for ref in spec.get("excludedFromEnforcement") or []:
        if ((ref.get("group") or GROUP) == GROUP and ref.get("resource") == resource
                and ref.get("namespace") == namespace and ref.get("name") in (None, "", name)):
            return True
    if resource == "prometheusrules":
        for ref in spec.get("prometheusRulesExcludedFromEnforce") or []:
            if ref.get("ruleNamespace") == namespace and ref.get("ruleName") == name:
                return True
    return False


def enforces(prom):
    """The label ``prom`` enforces (``enforcedNamespaceLabel``), or ``""``."""
    return (prom.get("spec") or {}).get("enforcedNamespaceLabel") or ""


def _plain(value):
    """``value`` as plain dicts, lists and strings: what Ansible passes in (its own dict and str subclasses) is
    nothing YAML's safe dumper can represent."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, (bool, int, float)) or value is None:
        return value
    return str(value)


def _selector_text(selector):
    if selector is None:
        return "null"
    return pyyaml.require().safe_dump(_plain(selector), default_flow_style=True, width=1000).strip()


def _fix(prom, kind, namespace, labels, namespace_labels):
    """What would make ``prom`` select the object: the labels missing from its selectors' matchLabels."""
    spec = prom.get("spec") or {}
    prefix = "serviceMonitor" if kind == "ServiceMonitor" else "rule"
    selector, ns_selector = spec.get(prefix + "Selector"), spec.get(prefix + "NamespaceSelector")
    parts = []
    if selector is None:
        parts.append("its %sSelector is null (selects nothing): set it" % prefix)
    elif not label_selector_matches(selector, labels):
        missing = {k: str(v) for k, v in (selector.get("matchLabels") or {}).items() if labels.get(k) != str(v)}
        # fairgpu sets release itself (objects.object_labels): monitoring_release_name, not monitoring_labels.
        release = missing.pop("release", None)
        fixes = ["set monitoring_release_name: %s" % release] if release is not None else []
        if missing or release is None:
            fixes.append("add %s to monitoring_labels" % (
                _selector_text(missing) if missing else "labels its matchExpressions take"))
        parts.append("%sSelector %s: %s" % (prefix, _selector_text(selector), " and ".join(fixes)))
    if ns_selector is None:
        if namespace != (prom.get("metadata") or {}).get("namespace"):
            parts.append("%sNamespaceSelector is null (its own namespace only): set it to select %s"
                         % (prefix, namespace))
    elif not label_selector_matches(ns_selector, namespace_labels.get(namespace) or {}):
        missing = {k: str(v) for k, v in (ns_selector.get("matchLabels") or {}).items()
                   if (namespace_labels.get(namespace) or {}).get(k) != str(v)}
        parts.append("%sNamespaceSelector %s: label namespace %s %s" % (
            prefix, _selector_text(ns_selector), namespace,
            _selector_text(missing) if missing else "as its matchExpressions take"))
    return "; ".join(parts)


def plan(prometheuses, namespace_labels, monitoring_namespace, kueue_namespace, dcgm_namespace, labels,
         rules_text, chosen="", cross="refuse"):
    """Where fairgpu's objects go, and why.

    ``prometheuses``: the Prometheus custom resources on the cluster (dicts as read); ``namespace_labels``:
    ``{namespace: labels}`` of the three namespaces (a namespace not there yet: the labels fairgpu gives it, or
    ``{}``); ``labels``: the labels on fairgpu's ServiceMonitors and PrometheusRules; ``rules_text``: the rule file
    as the role renders it; ``chosen``: ``""`` (every Prometheus counts) or ``namespace/name`` (only that one);
    ``cross``: ``refuse`` or ``omit`` (monitoring_enforced_cross_namespace_rules).

    Returns ``{"layout": "single"|"split", "rules": [{"namespace", "name", "source"}], "monitors":
    [{"namespace", "name"}], "selected_by": {"Kind namespace/name": [prometheus keys]}, "enforcing": [keys],
    "omitted": [rule names], "stale": [{"kind", "namespace", "name"}], "errors": [messages]}``. ``stale``: objects of
    the other layout and of earlier fairgpu versions, for the role to remove.

    ``prometheuses`` None: not known (kube-prometheus-stack installed by fairgpu, in check mode before its
    Prometheus exists; its Prometheus selects every object, ``objects.chart_values``): layout ``single``, nothing
    checked."""
    errors = []
    unknown = prometheuses is None
    if cross not in CROSS_MODES:
        errors.append("monitoring_enforced_cross_namespace_rules: must be one of %s, got %r"
                      % (", ".join(CROSS_MODES), cross))
    candidates = list(prometheuses or [])
    if chosen:
        candidates = [p for p in candidates if prometheus_key(p) == chosen]
        if not candidates:
            errors.append("monitoring_prometheus: no Prometheus %s on the cluster; there are: %s" % (
                chosen, ", ".join(sorted(prometheus_key(p) for p in prometheuses or [])) or "none"))
    elif not candidates and not unknown:
        errors.append("no Prometheus custom resource (monitoring.coreos.com/v1) on the cluster to read fairgpu's "
                      "ServiceMonitors and rules: create the Prometheus first (its selectors decide where fairgpu "
                      "places its objects), or set monitoring_install_chart: true")
    for prom in candidates:
        label = enforces(prom)
        if label in RULE_LABELS:
            errors.append("Prometheus %s: enforcedNamespaceLabel %r is a label fairgpu's rules read; the operator "
                          "would overwrite it with a namespace on every series. Use another label name (OpenShift "
                          "uses namespace)" % (prometheus_key(prom), label))
    enforcing = sorted(prometheus_key(p) for p in candidates
                       if enforces(p) and not excludes(p, "prometheusrules", monitoring_namespace, RULE_NAME))
    layout = SPLIT if enforcing else SINGLE
    monitors = [{"namespace": kueue_namespace, "name": KUEUE_SM}, {"namespace": dcgm_namespace, "name": DCGM_SM}]
    omitted = []
    if layout == SINGLE:
        rules = [{"namespace": monitoring_namespace, "name": RULE_NAME, "source": "all"}]
    else:
        sources = rule_sources(rules_text)
        crossing = sorted(name for name, (kind, _g) in sources.items() if kind == CROSS)
        guarded = sorted(name for name, (kind, guards) in sources.items() if kind != CROSS and guards)
        if crossing and cross == "refuse":
            errors.append(
                "Prometheus %s enforces the namespace label (enforcedNamespaceLabel): each rule then reads only the "
                "series of its PrometheusRule's namespace, and %s join Kueue's series (namespace %s) with the DCGM "
                "exporter's (namespace %s) or kube-state-metrics', which no namespace can hold. Fix: exclude fairgpu's rules from "
                "enforcement (add {group: monitoring.coreos.com, resource: prometheusrules, namespace: %s, name: %s} "
                "to the Prometheus's spec.excludedFromEnforcement; fairgpu then keeps them as written), or set "
                "monitoring_enforced_cross_namespace_rules: omit to go without them (the guard of %s, which holds "
                "it back while a tenant's pods hold GPUs outside Kueue, then finds nothing)"
                % (", ".join(enforcing), ", ".join(crossing), kueue_namespace, dcgm_namespace, monitoring_namespace,
                   RULE_NAME, ", ".join(guarded) or "no alert"))
        omitted = crossing
        rules = [{"namespace": kueue_namespace, "name": SPLIT_RULE_NAMES[KUEUE], "source": KUEUE},
                 {"namespace": dcgm_namespace, "name": SPLIT_RULE_NAMES[DCGM], "source": DCGM}]
    selected_by = {}
    for kind, objs in (("ServiceMonitor", monitors), ("PrometheusRule", rules)):
        for obj in objs:
            key = "%s %s/%s" % (kind, obj["namespace"], obj["name"])
            selected_by[key] = sorted(prometheus_key(p) for p in candidates
                                      if selects(p, kind, obj["namespace"], labels, namespace_labels))
            if candidates and not selected_by[key]:
                errors.append("no Prometheus selects fairgpu's %s; %s" % (key, "; ".join(
                    "%s: %s" % (prometheus_key(p), _fix(p, kind, obj["namespace"], labels, namespace_labels))
                    for p in sorted(candidates, key=prometheus_key))))
    every_rule = [{"kind": "PrometheusRule", "namespace": monitoring_namespace, "name": RULE_NAME},
                  {"kind": "PrometheusRule", "namespace": kueue_namespace, "name": SPLIT_RULE_NAMES[KUEUE]},
                  {"kind": "PrometheusRule", "namespace": dcgm_namespace, "name": SPLIT_RULE_NAMES[DCGM]}]
    kept = {(r["namespace"], r["name"]) for r in rules}
    stale = [r for r in every_rule if (r["namespace"], r["name"]) not in kept]
    # Earlier fairgpu versions put the DCGM ServiceMonitor in the monitoring namespace, which a Prometheus with
    # ignoreNamespaceSelectors reads as "scrape the monitoring namespace".
    if monitoring_namespace != dcgm_namespace:
        stale.append({"kind": "ServiceMonitor", "namespace": monitoring_namespace, "name": DCGM_SM})
    return {"layout": layout, "rules": rules, "monitors": monitors, "selected_by": selected_by,
            "enforcing": enforcing, "omitted": omitted, "stale": stale, "errors": errors}


NAME_LABEL = "kubernetes.io/metadata.name"


def namespace_labels(found, names, created=None):
    """``{namespace: labels}`` for ``names``: the labels of the Namespace objects ``found`` (as read), and for a
    namespace not there yet the labels it will get: the API server's ``kubernetes.io/metadata.name: <name>``
    (Kubernetes docs, "Automatic labelling" of namespaces) and ``created.get(name)`` (what fairgpu creates it with)."""
    out = {}
    for ns in found or []:
        meta = ns.get("metadata") or {}
        out[meta.get("name")] = dict(meta.get("labels") or {})
    for name in names:
        if name not in out:
            out[name] = dict((created or {}).get(name) or {}, **{NAME_LABEL: name})
        elif created and name in created:
            out[name] = dict(out[name], **created[name])  # fairgpu applies its labels to a namespace it creates
    return out


def rule_objects(rules_text, placement):
    """``[(namespace, name, groups)]`` of the PrometheusRules of ``placement`` (``plan``'s result; ``None``: one
    ``fairgpu-alerts`` in the namespace the caller gives, as ``[(None, RULE_NAME, groups)]``)."""
    if not placement or placement["layout"] == SINGLE:
        namespace = placement["rules"][0]["namespace"] if placement else None
        return [(namespace, RULE_NAME, pyyaml.require().safe_load(rules_text)["groups"])]
    groups = split_groups(rules_text)
    return [(r["namespace"], r["name"], groups[r["source"]]) for r in placement["rules"]]
