# -*- coding: utf-8 -*-
# Copyright: fairgpu maintainers
# Apache License 2.0 (see LICENSE)
"""Pod Security Admission for the namespaces fairgpu installs into: the one table of levels, the labels fairgpu
writes, and the pre-check that reads the cluster before anything is installed.

Pure logic, no cluster access. Kubernetes' Pod Security admission (built into kube-apiserver; k8s.io/pod-security-
admission v0.36.3) evaluates each pod against the level of its namespace's ``pod-security.kubernetes.io/enforce``
label and, where that label is missing, against the cluster's default (the PodSecurity plugin's
AdmissionConfiguration ``defaults``; ``privileged`` when none is configured):
https://kubernetes.io/docs/concepts/security/pod-security-admission/ and
https://kubernetes.io/docs/tasks/configure-pod-container/enforce-standards-admission-controller/. The levels, from
the most to the least permissive: ``privileged``, ``baseline``, ``restricted``
(https://kubernetes.io/docs/concepts/security/pod-security-standards/).

The cluster's default is not readable from the API. It shows in a server-side dry run of a pod (admission runs on
dry-run requests; nothing is stored: https://kubernetes.io/docs/reference/using-api/api-concepts/#dry-run): a pod
that needs what the operands need, created with ``dryRun=All`` in the namespace, is refused with
``violates PodSecurity "<level>:<version>": <what>`` (admission/admission.go, ``EvaluatePod``, of
k8s.io/pod-security-admission v0.36.3) when the level in force is below, and admitted otherwise.

Rules (docs/existing-cluster.md "Pod Security"):

- A namespace fairgpu creates carries ``enforce``, ``audit`` and ``warn`` (each with ``-version: latest``) at the
  level of ``LEVELS`` for its component, and ``app.kubernetes.io/managed-by: fairgpu``.
- A namespace that exists is fairgpu's when it carries that label and no other field manager wrote to it
  (``teardown.plan.other_writers``, the rule teardown uses). fairgpu sets the labels of its own namespaces only;
  another's it never relabels: the pre-check stops when its level is below what the operands need, naming the
  namespace, its level (label or cluster default), the level needed, what would be refused, and the fix.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.fairgpu.tenancy.plugins.module_utils.common.names import MANAGED_BY, MANAGED_BY_LABEL, PROBE_IMAGE

LABEL = "pod-security.kubernetes.io/"
MODES = ("enforce", "audit", "warn")
# From the most to the least permissive.
ORDER = ("privileged", "baseline", "restricted")
FAIRGPU = MANAGED_BY[MANAGED_BY_LABEL]

# What runs in each namespace fairgpu installs into, the level its operands need and the level fairgpu labels the
# namespace with when it creates it. needs None: fairgpu runs no pod there (any level admits what it does).
# Kueue v0.19.2's controller pod meets restricted: runAsNonRoot, seccompProfile RuntimeDefault,
# allowPrivilegeEscalation false, capabilities drop ALL (charts/kueue/values.yaml controllerManager.manager
# podSecurityContext / containerSecurityContext; config/components/manager/manager.yaml); Kueue's manifests label
# no namespace (git grep pod-security at v0.19.2: nothing in config/ or charts/).
# The GPU Operator's operands (driver, container toolkit, device plugin, DCGM exporter, MIG manager, NFD worker)
# run privileged with hostPath volumes; NVIDIA: "If your cluster uses Pod Security Admission (PSA) to restrict
# the behavior of pods, label the namespace for the Operator to set the enforcement policy to privileged"
# (https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/getting-started.html#pod-security-admission).
# kube-prometheus-stack 81.6.2 brings prometheus-node-exporter 4.51.1 (its Chart.yaml), whose values.yaml sets
# hostNetwork: true, hostPID: true and hostRootFsMount.enabled: true (a hostPath volume of /): baseline refuses all
# three ("Host Namespaces", "HostPath Volumes" of the Pod Security Standards), so its namespace needs privileged.
LEVELS = {
    "gpu_operator": {"needs": "privileged", "label": "privileged",
                     "what": "the NVIDIA GPU Operator's operands (driver, container toolkit, device plugin, DCGM "
                             "exporter, MIG manager, NFD worker: privileged containers, hostPath volumes)",
                     "source": "https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/"
                               "getting-started.html#pod-security-admission"},
    # The simulated GPU operator runs on this machine; its namespace holds what the real one's would for fairgpu:
    # the MIG manager's configuration (roles/mig_config) and, in monitoring's helm mode, the DCGM exporter's
    # ServiceMonitor and GPU rules (plugins/module_utils/monitoring/placement.py), as the real operator's does.
    "gpu_operator_simulated": {"needs": None, "label": "restricted",
                               "what": "no pod (the simulated GPU operator runs on this machine; the MIG manager's "
                                       "ConfigMaps and the DCGM exporter's monitoring objects)",
                               "source": "roles/monitoring/tasks/helm.yml (the DCGM exporter's namespace)"},
    "monitoring_chart": {"needs": "privileged", "label": "privileged",
                         "what": "kube-prometheus-stack's node-exporter (hostNetwork, hostPID, a hostPath volume of /)",
                         "source": "prometheus-community/helm-charts charts/prometheus-node-exporter/values.yaml, "
                                   "the node-exporter of the pinned kube-prometheus-stack"},
    "monitoring": {"needs": None, "label": "restricted",
                   "what": "no pod of fairgpu's (ServiceMonitors, a PrometheusRule, a token Secret, a ConfigMap)",
                   "source": "roles/monitoring"},
    "kueue_chart": {"needs": "restricted", "label": "restricted",
                    "what": "Kueue's controller (runAsNonRoot, RuntimeDefault seccomp, no privilege escalation, "
                            "capabilities dropped)",
                    "source": "kubernetes-sigs/kueue charts/kueue/values.yaml of the pinned Kueue"},
    "kueue": {"needs": None, "label": "restricted",
              "what": "no pod (Kueue runs as a local process; its CRDs, certificates and webhooks only)",
              "source": "roles/kueue/tasks/local.yml"},
}
# The tenants' namespaces: their levels are the tenants role's (tenants_isolation pod_security_enforce and
# pod_security_warn, kueue/objects.py DEFAULT_ISOLATION); privileged is never allowed there.
TENANTS = {"enforce": "baseline", "warn": "restricted", "allowed": ("baseline", "restricted")}
# Where a component's namespace has no pods that need more than the label (a helm mode's chart), its key here.
CHART_COMPONENTS = {"gpu_operator": "gpu_operator", "monitoring": "monitoring_chart", "kueue": "kueue_chart"}

# The refusal PodSecurity answers (admission/admission.go of k8s.io/pod-security-admission v0.36.3):
#   pods "x" is forbidden: violates PodSecurity "baseline:latest": privileged (container "c" must not set ...)
_REFUSAL = re.compile(r'violates PodSecurity \\?"([a-z]+):([^"\\]+)\\?": (.*?)(?:\\?"[,}]|$)', re.S)


def policy(component, mode, install_chart=True, kueue_values=None):
    """The row of LEVELS for ``component`` (``gpu_operator``, ``kueue``, ``monitoring``) in ``mode`` (``helm`` or
    the local/simulated mode); ``install_chart``: ``monitoring_install_chart``; ``kueue_values``:
    ``kueue_extra_values``, where ``controllerManager.hostNetwork: true`` puts Kueue's controller pod on the host's
    network (charts/kueue values.yaml and templates/manager/manager.yaml of the pinned Kueue), which baseline and
    restricted refuse ("Host Namespaces"), so the namespace needs privileged. Returns ``{"component", "needs",
    "label", "what", "source"}``."""
    key = "gpu_operator_simulated" if component == "gpu_operator" and mode != "helm" else component
    if mode == "helm" and (component != "monitoring" or _truthy(install_chart)):
        key = CHART_COMPONENTS[component]
    row = dict(LEVELS[key])
    row["component"] = key
    manager = ((kueue_values if isinstance(kueue_values, dict) else {}).get("controllerManager") or {})
    if key == "kueue_chart" and isinstance(manager, dict) and _truthy(manager.get("hostNetwork")):
        row.update(needs="privileged", label="privileged",
                   what=row["what"] + " with controllerManager.hostNetwork: true (kueue_extra_values)")
    return row


def rows(modes, namespaces, install_chart=True, kueue_values=None):
    """The ``policy`` rows of a run, each with its ``namespace``: ``modes`` and ``namespaces`` as
    ``run_settings`` has them (``{"gpu_operator", "kueue", "monitoring"}``). Sorted by component."""
    result = []
    for component in ("gpu_operator", "kueue", "monitoring"):
        row = policy(component, (modes or {}).get(component), install_chart, kueue_values)
        if row is not None:
            row["namespace"] = (namespaces or {}).get(component)
            result.append(row)
    return result


def _truthy(value):
    return value is True or str(value).strip().lower() in ("true", "yes", "on", "1", "y")


def labels(level, version="latest"):
    """The Pod Security labels of a namespace at ``level``: enforce, audit and warn, each with ``-version``."""
    if level not in ORDER:
        raise ValueError("not a Pod Security level: %r (use one of %s)" % (level, ", ".join(ORDER)))
    result = {}
    for mode in MODES:
        result[LABEL + mode] = level
        result[LABEL + mode + "-version"] = version
    return result


def admits(enforced, needed):
    """Whether a namespace enforcing ``enforced`` admits pods that need ``needed`` (None: no pods, always)."""
    if needed is None:
        return True
    return ORDER.index(enforced) <= ORDER.index(needed)


def owned(namespace, other_writers):
    """Whether an existing Namespace object is fairgpu's: fairgpu's managed-by label and no other field manager
    (``other_writers``: the list of ``teardown.plan.other_writers``; None when the object has no managedFields)."""
    meta = (namespace or {}).get("metadata") or {}
    return (meta.get("labels") or {}).get(MANAGED_BY_LABEL) == FAIRGPU and not other_writers


def refusal(message):
    """``{"level", "version", "detail"}`` of a PodSecurity refusal in an API error text (the message, or the
    Status body as JSON, quotes escaped or not), or None when the text is no PodSecurity refusal."""
    match = _REFUSAL.search(str(message or ""))
    if not match:
        return None
    return {"level": match.group(1), "version": match.group(2), "detail": match.group(3).replace('\\"', '"')}


def probe_pod(namespace, row, name="fairgpu-pod-security-probe"):
    """A pod that needs what the operands of ``row`` (a LEVELS row) need, for a server-side dry run in
    ``namespace``: privileged for ``needs: privileged`` (a privileged container, host network and PID, a hostPath
    volume, so the refusal names each control that would refuse the operands), a restricted-conformant pod
    otherwise. Never created: the role sends it with ``dryRun=All`` (kubernetes.core.k8s in check mode)."""
    container = {"name": "probe", "image": PROBE_IMAGE}
    spec = {"containers": [container], "automountServiceAccountToken": False}
    if row.get("needs") == "privileged":
        container["securityContext"] = {"privileged": True}
        container["volumeMounts"] = [{"name": "host", "mountPath": "/host", "readOnly": True}]
        spec.update(hostNetwork=True, hostPID=True, volumes=[{"name": "host", "hostPath": {"path": "/"}}])
    else:
        container["securityContext"] = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]},
                                        "runAsNonRoot": True, "runAsUser": 65532,
                                        "seccompProfile": {"type": "RuntimeDefault"}}
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "labels": {MANAGED_BY_LABEL: FAIRGPU}},
            "spec": spec}


def plan(rows, found, probes=None):
    """The pre-check and what fairgpu does with each namespace.

    ``rows``: ``[{"namespace", "component", "needs", "label", "what", "source"}]`` (``policy`` rows with their
    namespace). ``found``: ``{namespace: {"object": Namespace dict or None, "other_writers": list or None}}``
    (a namespace missing from it counts as absent). ``probes``: ``{namespace: {"failed": bool, "msg": str}}``, the
    result of the dry-run create of ``probe_pod`` in each existing namespace that is not fairgpu's and has no
    enforce label (None: not probed).

    Returns ``{"errors": [str], "namespaces": {namespace: {"action": "create" | "label" | "keep", "labels":
    {label: value}, "level": level in force or None, "source": "label" | "cluster default" | None}}, "probe":
    [namespace], "lines": [str] (one per row, for the play's output)}``: ``probe`` lists the namespaces whose level only a dry run can tell (call again with
    ``probes``); ``create``/``label``: fairgpu applies ``labels`` (its own namespace); ``keep``: another's, left
    as it is. Errors name the namespace, its level and where it comes from, the level needed, what would be
    refused, and the fix. Never raises on odd input."""
    probes = probes if isinstance(probes, dict) else {}
    errors, namespaces, to_probe = [], {}, []
    for row in rows or []:
        name = row["namespace"]
        entry = (found or {}).get(name) or {}
        obj = entry.get("object")
        want = dict(labels(row["label"]))
        want[MANAGED_BY_LABEL] = FAIRGPU
        if not obj:
            namespaces[name] = {"action": "create", "labels": want, "level": None, "source": None}
            continue
        if owned(obj, entry.get("other_writers")):
            namespaces[name] = {"action": "label", "labels": want, "level": row["label"], "source": "label"}
            continue
        current = ((obj.get("metadata") or {}).get("labels") or {}).get(LABEL + "enforce")
        result = {"action": "keep", "labels": {}, "level": None, "source": None}
        namespaces[name] = result
        if current in ORDER:
            result.update(level=current, source="label")
            if not admits(current, row["needs"]):
                errors.append(_refused(name, row, current, "its label %senforce" % LABEL, None))
            continue
        if current is not None:
            # PodSecurity reads an unknown enforce level as restricted (fails closed: api/helpers.go ParseLevel and
            # PolicyToEvaluate, k8s.io/pod-security-admission v0.36.3).
            result.update(level="restricted", source="label")
            if not admits("restricted", row["needs"]):
                errors.append(_refused(name, row, "restricted", "its label %senforce: %r, which Pod Security reads "
                                       "as restricted" % (LABEL, current), None))
            continue
        if row["needs"] is None:
            continue
        if name not in probes:
            to_probe.append(name)
            continue
        probe = probes[name] or {}
        if not probe.get("failed"):
            result.update(level="admitted", source="cluster default")
            continue
        refused = refusal(probe.get("msg"))
        if refused is None:
            errors.append("Pod Security pre-check: a dry-run create of a pod like %s in namespace %s failed for "
                          "another reason, so the level in force there is unknown: %s. Fix what the message says, or "
                          "label the namespace %senforce=%s yourself"
                          % (row["what"], name, probe.get("msg"), LABEL, row["needs"]))
            continue
        result.update(level=refused["level"], source="cluster default")
        errors.append(_refused(name, row, refused["level"], "the cluster's default (it has no %senforce label)"
                               % LABEL, refused["detail"]))
    lines = []
    for row in rows or []:
        result = namespaces[row["namespace"]]
        if result["action"] == "create":
            lines.append("%s: created by fairgpu, Pod Security %s (enforce, audit, warn)" % (row["namespace"], row["label"]))
        elif result["action"] == "label":
            lines.append("%s: fairgpu's, Pod Security %s (enforce, audit, warn)" % (row["namespace"], row["label"]))
        else:
            lines.append("%s: not fairgpu's, labels kept as they are (%s)" % (row["namespace"], "enforces %s by %s" % (
                result["level"], result["source"]) if result["level"] else "level not checked: fairgpu runs no pods there"))
    return {"errors": errors, "namespaces": namespaces, "probe": to_probe, "lines": lines}


def _refused(name, row, level, where, detail):
    return ("Pod Security: namespace %s exists, is not fairgpu's and enforces %s (%s), but %s need %s (%s); the API "
            "server would refuse them%s. fairgpu does not relabel a namespace it does not own. Fix: kubectl label "
            "--overwrite namespace %s %senforce=%s (and audit/warn), or install into a namespace fairgpu creates "
            "(run_namespaces)"
            % (name, level, where, row["what"], row["needs"], row["source"],
               (": " + detail) if detail else "", name, LABEL, row["needs"]))


# The embedded cluster's API server can enforce a default level, as hardened distributions do: an
# AdmissionConfiguration (apiserver.config.k8s.io/v1) for the PodSecurity plugin, whose configuration is a
# PodSecurityConfiguration (pod-security.admission.config.k8s.io/v1) with defaults and exemptions, given to
# kube-apiserver by --admission-control-config-file
# (https://kubernetes.io/docs/tasks/configure-pod-container/enforce-standards-admission-controller/; the types:
# k8s.io/pod-security-admission v0.36.3 admission/api/v1/types.go). Role variables lab_cluster_pod_security_defaults
# and lab_cluster_pod_security_exemptions.
DEFAULT_KEYS = tuple(k for mode in MODES for k in (mode, mode + "-version"))
EXEMPTION_KEYS = ("usernames", "runtimeClasses", "namespaces")
_VERSION = re.compile(r"^(latest|v1\.(0|[1-9][0-9]*))$")


def admission_configuration_errors(defaults, exemptions=None):
    """Messages for ``lab_cluster_pod_security_defaults`` (``{enforce|audit|warn: level, <mode>-version:
    "latest" | "v1.<minor>"}``; None or {}: no configuration) and ``lab_cluster_pod_security_exemptions``
    (``{usernames|runtimeClasses|namespaces: [str]}``). [] when fine."""
    errors = []
    where = "lab_cluster_pod_security_defaults"
    if defaults not in (None, "") and not isinstance(defaults, dict):
        return ["%s: give a mapping of %s, got %r" % (where, ", ".join(DEFAULT_KEYS), defaults)]
    for key in sorted(str(k) for k in (defaults or {}) if k not in DEFAULT_KEYS):
        errors.append("%s.%s: unknown key; the keys are %s" % (where, key, ", ".join(DEFAULT_KEYS)))
    for key, value in sorted((defaults or {}).items(), key=lambda kv: str(kv[0])):
        if key in MODES and value not in ORDER:
            errors.append("%s.%s: %r is not a Pod Security level; use %s" % (where, key, value, ", ".join(ORDER)))
        if key in DEFAULT_KEYS and key not in MODES and not _VERSION.match(str(value)):
            errors.append("%s.%s: %r is not a Pod Security version; use latest or v1.<minor>" % (where, key, value))
    where = "lab_cluster_pod_security_exemptions"
    if exemptions not in (None, "") and not isinstance(exemptions, dict):
        return errors + ["%s: give a mapping of %s, got %r" % (where, ", ".join(EXEMPTION_KEYS), exemptions)]
    for key, value in sorted((exemptions or {}).items(), key=lambda kv: str(kv[0])):
        if key not in EXEMPTION_KEYS:
            errors.append("%s.%s: unknown key; the keys are %s" % (where, key, ", ".join(EXEMPTION_KEYS)))
        elif not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            errors.append("%s.%s: give a list of names, got %r" % (where, key, value))
    if exemptions and not defaults:
        errors.append("%s: exemptions without lab_cluster_pod_security_defaults change nothing; set the defaults "
                      "too, or drop the exemptions" % where)
    return errors


def admission_configuration(defaults, exemptions=None):
    """The AdmissionConfiguration of the PodSecurity plugin with ``defaults`` (missing modes stay PodSecurity's
    own: privileged, latest) and ``exemptions``; None when ``defaults`` is empty (the API server runs without
    one). Call ``admission_configuration_errors`` first."""
    if not defaults:
        return None
    config = {"apiVersion": "pod-security.admission.config.k8s.io/v1", "kind": "PodSecurityConfiguration",
              "defaults": dict((k, str(defaults[k])) for k in DEFAULT_KEYS if k in defaults),
              "exemptions": dict((k, list((exemptions or {}).get(k) or [])) for k in EXEMPTION_KEYS)}
    return {"apiVersion": "apiserver.config.k8s.io/v1", "kind": "AdmissionConfiguration",
            "plugins": [{"name": "PodSecurity", "configuration": config}]}
