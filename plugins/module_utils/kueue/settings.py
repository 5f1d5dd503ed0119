# -*- coding: utf-8 -*-
# Copyright: fairgpu contributors
# Apache License 2.0 (see LICENSE)
"""One meaning per Kueue setting in every mode: what the kueue role's ``kueue_*`` variables become for the local
process (``kueue_mode: local``), Kueue's own chart (``kueue_mode: helm``) and the tree of ``playbooks/render.yml``
(``render``), what each mode refuses, and what Kueue would run with, read back from each mode's artefacts. Pure
logic, no cluster access.

``settings`` is a dict of the role's variables by their names (``kueue_integrations``,
``kueue_manage_jobs_without_queue_name``, ``kueue_fair_sharing``, ``kueue_fair_sharing_preemption_strategies``,
``kueue_admission_fair_sharing``, ``kueue_wait_for_pods_ready``, ``kueue_feature_gates``; missing ones take the role's
defaults).

How each reaches Kueue (Kueue v0.19.2):

- The Configuration (``config.kueue.x-k8s.io/v1beta2``): local - the file ``config.yaml`` given to ``--config``;
  helm - the chart value ``managerConfig.controllerManagerConfigYaml``, which ``templates/manager/manager-config.yaml``
  parses and writes back as the ConfigMap ``<fullname>-manager-config`` (key ``controller_manager_config.yaml``),
  adding ``internalCertManagement`` only when absent; render - a kustomize Component that patches the ConfigMap
  ``kueue-manager-config`` of Kueue's released manifests (``config/components/manager/kustomization.yaml``: a
  ``configMapGenerator`` ``manager-config`` without hash suffix, prefixed ``kueue-`` by ``config/default``), and
  the same chart values as ``kueue/values.yaml`` for a Kueue installed from its chart (an Argo CD app, say).
- Feature gates: Kueue reads them only from the flag ``--feature-gates`` (``cmd/kueue/main.go``, k8s.io/component-base
  featuregate: ``Name=bool`` pairs, comma separated; an unknown name stops Kueue at start). local - the process's
  flag; helm - the chart value ``controllerManager.featureGates`` (a list of ``{name, enabled}``; ``_helpers.tpl``
  ``kueue.featureGates`` writes ``--feature-gates=<name>=<enabled>,...`` into the manager's args,
  kubernetes-sigs/kueue#1230, #1314); render - a JSON patch that appends the same flag to the manager container of the
  released Deployment (appended, never replacing ``args``: a strategic merge patch of ``args`` replaces the whole list
  and Kueue then starts without ``--config``, kubernetes-sigs/kueue#1427), and ``featureGates`` in ``values.yaml``.
- Only the local process adds ``VisibilityOnDemand=false``: the visibility server writes its certificates to
  ``/visibility`` (``pkg/visibility/server.go``), which a process on the host cannot; ``kueue_feature_gates`` may
  therefore not turn it on in mode local (refused).
- Restart on change (Kueue reads its Configuration and flags only at start): local - the role stops and starts the
  process when ``config.yaml`` or the command line changed; helm - the chart's pod template annotation
  ``charts.kueue.x-k8s.io/config-checksum`` (sha256 of the rendered ConfigMap, ``templates/manager/manager.yaml``,
  kubernetes-sigs/kueue#2128) and the args themselves; render - the annotation ``CHECKSUM_ANNOTATION`` (sha256 of
  the Configuration and the feature gates) that the Component adds to the pod template.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import hashlib
import json
import re

from ansible_collections.fairgpu.tenancy.plugins.module_utils.common.drift import parse_duration

API_VERSION = "config.kueue.x-k8s.io/v1beta2"
MODES = ("local", "helm", "render")
DEFAULTS = {
    "kueue_integrations": ["batch/job"],
    "kueue_manage_jobs_without_queue_name": False,
    "kueue_fair_sharing": True,
    "kueue_fair_sharing_preemption_strategies": ["LessThanOrEqualToFinalShare", "LessThanInitialShare"],
    "kueue_admission_fair_sharing": None,
    "kueue_multikueue": None,
    "kueue_wait_for_pods_ready": None,
    "kueue_feature_gates": {},
}
# Admission fair sharing (KEP-4136; Kueue v0.19.2 apis/config/v1beta2/configuration_types.go AdmissionFairSharing,
# pkg/util/admissionfairsharing/admission_fair_sharing.go). Every usageSamplingInterval Kueue moves each LocalQueue's
# consumedResources towards its current usage by alpha = 1 - 0.5^(interval / usageHalfLifeTime), and charges a
# Workload's requests times alpha at admission (the entry penalty).
AFS_KEYS = ("usageHalfLifeTime", "usageSamplingInterval", "resourceWeights")
# Kueue's default interval (apis/config/v1beta2/defaults.go), written out when the inventory leaves it out.
AFS_DEFAULT_INTERVAL = "5m"
# The usage sums every resource a LocalQueue's admitted Workloads hold, each times its resourceWeights entry, 1 when
# absent (admission_fair_sharing.go CalculateUsage; the localqueue controller samples GetAdmittedUsage, every covered
# resource). fairgpu's ClusterQueues cover cpu, memory and pods beside the accelerator, and memory counts in bytes, so
# with no weights a Job's 2Gi outweighs its GPUs a billion times. Without resourceWeights fairgpu writes these, so
# that the accelerators alone (nvidia.com/gpu, nvidia.com/mig-*: weight 1) make the usage.
AFS_DEFAULT_RESOURCE_WEIGHTS = {"cpu": 0, "memory": 0, "pods": 0}
# The interval at most this part of the half-life: one sample then moves the usage by at most 1 - 0.5^(1/4) = 16 %,
# so the usage is a history of some ten samples and not the last sample (at interval = half-life each sample moves it
# by half, and the order follows whoever holds the most now).
AFS_MAX_INTERVAL_PART = 4
# Kueue keeps the scaled usage to 9 decimal places, rounded down (pkg/util/resource/resource.go mulByFloatScale): a
# step smaller than that is lost, and with a half-life long enough against the interval a LocalQueue's GPUs never
# enter its usage (kubernetes-sigs/kueue#13596, consumedResources stuck at 0). fairgpu asks for room above it.
AFS_MIN_ALPHA = 1e-6
# MultiKueue's part of the Configuration on a manager cluster (apis/config/v1beta2/configuration_types.go MultiKueue,
# Kueue v0.19.2; defaults.go: gcInterval 1m, origin multikueue, workerLostTimeout 15m, the all-at-once dispatcher).
MULTIKUEUE_KEYS = ("gcInterval", "origin", "workerLostTimeout", "dispatcherName")
# The dispatchers Kueue itself runs; it does not validate the name, and any other makes it wait for an external
# dispatcher that nominates the workers (pkg/controller/workloaddispatcher, v0.19.2): nothing would be dispatched.
MULTIKUEUE_DISPATCHERS = ("kueue.x-k8s.io/multikueue-dispatcher-all-at-once",
                          "kueue.x-k8s.io/multikueue-dispatcher-incremental")
_LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$")
# The gates only the local process sets (see the module docstring).
LOCAL_FEATURE_GATES = {"VisibilityOnDemand": False}
# The pod template annotation of the rendered tree's Deployment patch.
CHECKSUM_ANNOTATION = "fairgpu.io/kueue-configuration-checksum"
# The chart's own pod template annotation (charts/kueue/templates/manager/manager.yaml, v0.19.2).
CHART_CHECKSUM_ANNOTATION = "charts.kueue.x-k8s.io/config-checksum"
# The in-cluster listeners, certificates and leader election (Kueue's config/components/manager and the chart).
IN_CLUSTER = {"leaderElection": {"leaderElect": True}, "internalCertManagement": {"enable": True},
              "webhook": {"port": 9443}, "health": {"healthProbeBindAddress": ":8081"},
              "metrics": {"bindAddress": ":8443"}}
# Chart values that carry one of the settings above: given through kueue_extra_values they would replace
# fairgpu's (a values merge replaces a string or a list whole), so they are refused there.
CHART_SETTING_VALUES = (("managerConfig", "controllerManagerConfigYaml"), ("controllerManager", "featureGates"))
_GATE_NAME = re.compile(r"^[A-Z][A-Za-z0-9]*$")

# setting -> where it lands in each mode (docs/kueue.md's table is this, in words).
TABLE = [
    ("kueue_integrations", "integrations.frameworks"),
    ("kueue_manage_jobs_without_queue_name", "manageJobsWithoutQueueName"),
    ("kueue_fair_sharing", "fairSharing (present or absent)"),
    ("kueue_fair_sharing_preemption_strategies", "fairSharing.preemptionStrategies"),
    ("kueue_admission_fair_sharing", "admissionFairSharing (present or absent)"),
    ("kueue_multikueue", "multiKueue (present or absent)"),
    ("kueue_wait_for_pods_ready", "waitForPodsReady"),
    ("kueue_feature_gates", "--feature-gates"),
]


def _merge(base, over):
    out = copy.deepcopy(base)
    for key, value in (over or {}).items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def _plain(data):
    """JSON-shaped copy (Ansible hands filters dict and str subclasses)."""
    return json.loads(json.dumps(data))


def _get(settings, name):
    value = (settings or {}).get(name)
    return copy.deepcopy(DEFAULTS[name]) if value is None else _plain(value)


def _bool(value):
    """A bool from a bool or from the strings a command line (-e) gives."""
    if isinstance(value, str):
        return value.strip().lower() in ("true", "yes", "on", "1")
    return bool(value)


def configuration(settings, namespace, mode, local=None):
    """Kueue's Configuration dict for ``mode``. ``local`` (mode local only): the loopback listeners, a dict with
    ``health_port``, ``metrics_port``, ``webhook_port`` and ``cert_dir``. helm and render get the in-cluster
    listeners, certificates and leader election (``IN_CLUSTER``); the chart's release names its certificate objects
    on top (``chart.release_configuration``)."""
    if mode not in MODES:
        raise ValueError("kueue_mode: %r is not one of %s" % (mode, ", ".join(MODES)))
    config = {
        "apiVersion": API_VERSION,
        "kind": "Configuration",
        "namespace": namespace,
        "manageJobsWithoutQueueName": _bool(_get(settings, "kueue_manage_jobs_without_queue_name")),
        "integrations": {"frameworks": _get(settings, "kueue_integrations")},
        "metrics": {"enableClusterQueueResources": True},
    }
    wait = _get(settings, "kueue_wait_for_pods_ready")
    if wait is not None:
        config["waitForPodsReady"] = wait
    # Fair sharing is on exactly when the section is there (pkg/scheduler/preemption/fairsharing/strategy.go,
    # Enabled is `fairSharing != nil`).
    if _bool(_get(settings, "kueue_fair_sharing")):
        config["fairSharing"] = {"preemptionStrategies": _get(settings, "kueue_fair_sharing_preemption_strategies")}
    # Admission fair sharing acts only on ClusterQueues with admissionScope UsageBasedAdmissionFairSharing (the
    # tenants' admission_fair_sharing), and only with this section (pkg/util/admissionfairsharing Enabled).
    admission = _get(settings, "kueue_admission_fair_sharing")
    if admission:
        config["admissionFairSharing"] = {
            "usageHalfLifeTime": admission.get("usageHalfLifeTime"),
            "usageSamplingInterval": admission.get("usageSamplingInterval") or AFS_DEFAULT_INTERVAL,
            "resourceWeights": admission["resourceWeights"] if admission.get("resourceWeights") is not None
            else dict(AFS_DEFAULT_RESOURCE_WEIGHTS)}
    multikueue = _get(settings, "kueue_multikueue")
    if multikueue:
        config["multiKueue"] = dict(multikueue)
    if mode == "local":
        local = local or {}
        return _merge(config, {
            "health": {"healthProbeBindAddress": "127.0.0.1:%s" % local.get("health_port")},
            "metrics": {"bindAddress": "127.0.0.1:%s" % local.get("metrics_port")},
            "webhook": {"host": "127.0.0.1", "port": int(local.get("webhook_port") or 0),
                        "certDir": local.get("cert_dir")},
            "leaderElection": {"leaderElect": False},
            "internalCertManagement": {"enable": False},
        })
    return _merge(config, IN_CLUSTER)


def feature_gates(settings, mode):
    """The gates Kueue runs with in ``mode``, name -> bool: ``kueue_feature_gates``, over ``LOCAL_FEATURE_GATES`` in
    mode local."""
    gates = dict(LOCAL_FEATURE_GATES) if mode == "local" else {}
    gates.update({str(k): bool(v) for k, v in _get(settings, "kueue_feature_gates").items()})
    return gates


def feature_gates_arg(gates):
    """``Name=true,Other=false`` (names sorted) for ``--feature-gates``; "" for none."""
    return ",".join("%s=%s" % (name, "true" if gates[name] else "false") for name in sorted(gates))


def chart_feature_gates(gates):
    """The chart's ``controllerManager.featureGates`` list for ``gates`` (names sorted)."""
    return [{"name": name, "enabled": bool(gates[name])} for name in sorted(gates)]


def parse_feature_gates_arg(arg):
    """The gates of a ``--feature-gates`` value, as component-base's featuregate ``Set`` reads it (``k=v`` pairs,
    comma separated, values through Go's strconv.ParseBool). ValueError for a malformed pair."""
    gates = {}
    for pair in str(arg or "").split(","):
        pair = pair.strip()
        if not pair:
            continue
        name, sep, value = pair.partition("=")
        if not sep or value not in ("1", "t", "T", "TRUE", "true", "True", "0", "f", "F", "FALSE", "false", "False"):
            raise ValueError("--feature-gates: %r is not Name=bool" % pair)
        gates[name.strip()] = value in ("1", "t", "T", "TRUE", "true", "True")
    return gates


def _seconds(value):
    """Seconds (a float) of a Go duration string, or None (drift.parse_duration)."""
    nanoseconds = parse_duration(value)
    return None if nanoseconds is None else float(nanoseconds) / 1e9


def usage_alpha(interval_seconds, half_life_seconds):
    """The part of the way to its current usage a LocalQueue's consumedResources moves in one sample (Kueue's
    ``calculateAlphaRate``): ``1 - 0.5 ** (interval / half_life)``; 0 for a half-life of 0 (then nothing moves)."""
    if not half_life_seconds:
        return 0.0
    return 1.0 - 0.5 ** (float(interval_seconds) / float(half_life_seconds))


def admission_fair_sharing_errors(value, gates=None):
    """Messages for ``kueue_admission_fair_sharing`` (null or {} is off; usageSamplingInterval absent is Kueue's
    default of 5m), each naming the field and the fix.
    Refused beyond what Kueue refuses (it takes a half-life of 0 and any interval): no half-life or 0, which makes
    every LocalQueue's usage 0 and admission a silent FIFO (kubernetes-sigs/kueue#11134); an interval above a
    quarter of the half-life (``AFS_MAX_INTERVAL_PART``); one sample moving the usage by less than ``AFS_MIN_ALPHA``
    (kubernetes-sigs/kueue#13596); a resource weight below 0 (Kueue's validation) or not a number; the feature gate
    AdmissionFairSharing turned off in ``gates`` (then Kueue ignores the section)."""
    where = "kueue_admission_fair_sharing"
    if value is None or value == {}:
        return []
    if not isinstance(value, dict):
        return ["%s: %r is not a mapping with usageHalfLifeTime and usageSamplingInterval (or null: off)" % (where, value)]
    errors = ["%s.%s: unknown key; the keys are %s" % (where, key, ", ".join(AFS_KEYS))
              for key in sorted(str(k) for k in value if k not in AFS_KEYS)]
    half_life = _seconds(value.get("usageHalfLifeTime"))
    interval = _seconds(value.get("usageSamplingInterval") or AFS_DEFAULT_INTERVAL)
    if half_life is None or half_life <= 0:
        errors.append("%s.usageHalfLifeTime: %r; give a Go duration above 0 such as 1h. Absent or 0, Kueue keeps every "
                      "LocalQueue's usage at 0 and admits first come, first served without a word "
                      "(kubernetes-sigs/kueue#11134)" % (where, value.get("usageHalfLifeTime")))
    if interval is None or interval <= 0:
        errors.append("%s.usageSamplingInterval: %r; give a Go duration above 0 such as 5m, or leave it out for "
                      "Kueue's default of 5m" % (where, value.get("usageSamplingInterval")))
    if half_life and interval and half_life > 0 and interval > 0:
        if interval * AFS_MAX_INTERVAL_PART > half_life:
            errors.append("%s.usageSamplingInterval: %s is more than a quarter of usageHalfLifeTime %s, so the usage "
                          "follows the last sample rather than the history; sample at most every %gs or give a "
                          "longer half-life" % (where, value.get("usageSamplingInterval") or AFS_DEFAULT_INTERVAL,
                                                value["usageHalfLifeTime"], half_life / AFS_MAX_INTERVAL_PART))
        elif usage_alpha(interval, half_life) < AFS_MIN_ALPHA:
            errors.append("%s: usageSamplingInterval %s against usageHalfLifeTime %s moves the usage by %.3g of a GPU "
                          "per sample, within 1000x of Kueue's rounding to 9 decimal places, which loses the steps "
                          "below it (kubernetes-sigs/kueue#13596: the usage stayed 0); sample less rarely against "
                          "the half-life: a shorter half-life or a longer interval"
                          % (where, value.get("usageSamplingInterval") or AFS_DEFAULT_INTERVAL,
                             value["usageHalfLifeTime"], usage_alpha(interval, half_life)))
    weights = value.get("resourceWeights")
    if weights is not None:
        if not isinstance(weights, dict):
            errors.append("%s.resourceWeights: %r is not a mapping of resource name to a number >= 0" % (where, weights))
        else:
            for name, weight in sorted(weights.items(), key=lambda kv: str(kv[0])):
                if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not weight >= 0 \
                        or weight == float("inf"):
                    errors.append("%s.resourceWeights.%s: %r is not a finite number >= 0 (Kueue refuses a negative one)"
                                  % (where, name, weight))
    if (gates or {}).get("AdmissionFairSharing") is False:
        errors.append("%s: set, while kueue_feature_gates turns AdmissionFairSharing off, so Kueue would ignore it; "
                      "remove the gate (on by default since Kueue v0.15) or the section" % where)
    return errors


def multikueue_errors(value):
    """Messages for ``kueue_multikueue`` (null or {}: Kueue's defaults), each naming the field and the fix: an
    unknown key, a duration that is not a Go duration >= 0 (gcInterval 0 turns the garbage collection of remote
    objects off), an origin that is not a label value (Kueue labels the remote objects with it), a dispatcherName
    other than Kueue's two, which Kueue takes without a word and then dispatches nothing."""
    where = "kueue_multikueue"
    if value is None or value == {}:
        return []
    if not isinstance(value, dict):
        return ["%s: %r is not a mapping of Kueue's multiKueue fields (%s), or null" % (where, value, ", ".join(MULTIKUEUE_KEYS))]
    errors = ["%s.%s: unknown key; the keys are %s" % (where, key, ", ".join(MULTIKUEUE_KEYS))
              for key in sorted(str(k) for k in value if k not in MULTIKUEUE_KEYS)]
    for key in ("gcInterval", "workerLostTimeout"):
        if key in value and (_seconds(value[key]) is None or _seconds(value[key]) < 0):
            errors.append("%s.%s: %r is not a Go duration >= 0 such as 1m" % (where, key, value[key]))
    if "origin" in value and (not isinstance(value["origin"], str) or not value["origin"]
                              or not _LABEL_VALUE.match(value["origin"])):
        errors.append("%s.origin: %r is not a label value (at most 63 letters, digits, '-', '_' or '.'); Kueue labels "
                      "the objects it creates on the workers with it" % (where, value["origin"]))
    if "dispatcherName" in value and value["dispatcherName"] not in MULTIKUEUE_DISPATCHERS:
        errors.append("%s.dispatcherName: %r is not one of Kueue's dispatchers (%s): Kueue would wait for an external "
                      "dispatcher and send no workload to any worker" % (where, value["dispatcherName"],
                                                                         ", ".join(MULTIKUEUE_DISPATCHERS)))
    return errors


def setting_errors(settings, mode, extra_values=None):
    """Messages for settings ``mode`` cannot take, each naming the variable, the mode and the fix; [] when fine.
    Checked before anything changes (the kueue role's main.yml, render.yml through configuration.yml)."""
    errors = []
    if mode not in MODES:
        return ["kueue_mode: %r is not one of %s" % (mode, ", ".join(MODES))]
    gates = (settings or {}).get("kueue_feature_gates") or {}
    if not isinstance(gates, dict):
        errors.append("kueue_feature_gates: %r is not a mapping of gate name to true/false (mode %s)" % (gates, mode))
        gates = {}
    for name, value in sorted(gates.items(), key=lambda kv: str(kv[0])):
        if not _GATE_NAME.match(str(name)):
            errors.append("kueue_feature_gates: %r is not a Kueue feature gate name (CamelCase, as in Kueue's "
                          "pkg/features/kube_features.go) (mode %s)" % (name, mode))
        if not isinstance(value, bool):
            errors.append("kueue_feature_gates.%s: %r is not true or false (mode %s); write it unquoted"
                          % (name, value, mode))
    errors.extend(admission_fair_sharing_errors((settings or {}).get("kueue_admission_fair_sharing"), gates))
    errors.extend(multikueue_errors((settings or {}).get("kueue_multikueue")))
    if (settings or {}).get("kueue_multikueue") and gates.get("MultiKueue") is False:
        errors.append("kueue_multikueue: set, while kueue_feature_gates turns MultiKueue off, so Kueue runs no "
                      "MultiKueue controller; remove the gate (on by default since Kueue v0.9) or the section")
    if mode == "local" and gates.get("VisibilityOnDemand") is True:
        errors.append("kueue_feature_gates.VisibilityOnDemand: true cannot run in kueue_mode local (the visibility "
                      "server writes its certificates to /visibility, which a process on this machine cannot); "
                      "leave it out here, or use kueue_mode helm on a real cluster")
    frameworks = (settings or {}).get("kueue_integrations")
    if frameworks is not None:
        if not isinstance(frameworks, list) or not all(isinstance(f, str) and f for f in frameworks):
            errors.append("kueue_integrations: %r is not a list of framework names such as batch/job (mode %s)"
                          % (frameworks, mode))
        elif len(set(frameworks)) != len(frameworks):
            errors.append("kueue_integrations: %s name a framework twice (mode %s)" % (frameworks, mode))
    if mode in ("helm", "render"):
        for path in CHART_SETTING_VALUES:
            node = extra_values or {}
            for key in path:
                node = node.get(key) if isinstance(node, dict) else None
            if node is not None:
                errors.append("kueue_extra_values.%s: set in kueue_mode %s, it would replace what fairgpu's "
                              "kueue_* settings give the chart; set %s instead and remove it from kueue_extra_values"
                              % (".".join(path), mode,
                                 "kueue_feature_gates" if path[-1] == "featureGates"
                                 else "kueue_integrations, kueue_fair_sharing, kueue_admission_fair_sharing, "
                                 "kueue_multikueue, kueue_wait_for_pods_ready"))
    return errors


def checksum(configuration_dict, gates):
    """sha256 (hex) of the Configuration and the feature gates, canonical JSON: the rendered tree's pod template
    annotation, which changes exactly when what Kueue reads at start changes."""
    text = json.dumps({"configuration": _plain(configuration_dict), "featureGates": _plain(gates)},
                      sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def effective(configuration_dict, gates):
    """What Kueue runs with, in the parts the settings decide: the Configuration without the mode's own listeners,
    certificates and leader election, and the gates without ``LOCAL_FEATURE_GATES``. Equal across modes exactly when
    every setting has one meaning."""
    config = copy.deepcopy(_plain(configuration_dict))
    for key in ("health", "webhook", "leaderElection", "internalCertManagement"):
        config.pop(key, None)
    config.get("metrics", {}).pop("bindAddress", None)
    gates = dict(gates)
    for name, value in LOCAL_FEATURE_GATES.items():
        if gates.get(name) == value:
            gates.pop(name)
    return {"configuration": config, "featureGates": gates,
            "integrations": list(config.get("integrations", {}).get("frameworks", []))}


def effective_from_args(config_text, args):
    """``effective`` from a Configuration file's text and a container's (or process's) arguments."""
    from ansible_collections.fairgpu.tenancy.plugins.module_utils.common import pyyaml
    gates = {}
    for arg in args or []:
        if str(arg).startswith("--feature-gates="):
            gates.update(parse_feature_gates_arg(str(arg).split("=", 1)[1]))
    return effective(pyyaml.require().safe_load(config_text), gates)


def effective_from_chart_values(values):
    """``effective`` from chart values as Kueue's chart turns them into the manager's ConfigMap and args
    (``managerConfig.controllerManagerConfigYaml``, ``controllerManager.featureGates``)."""
    from ansible_collections.fairgpu.tenancy.plugins.module_utils.common import pyyaml
    config = pyyaml.require().safe_load(values["managerConfig"]["controllerManagerConfigYaml"])
    gates = {g["name"]: bool(g["enabled"]) for g in (values.get("controllerManager") or {}).get("featureGates") or []}
    return effective(config, gates)
