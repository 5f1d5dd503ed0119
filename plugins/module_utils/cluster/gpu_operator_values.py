# -*- coding: utf-8 -*-
# Copyright: fairgpu maintainers
# Apache License 2.0 (see LICENSE)
"""Checks of the NVIDIA GPU Operator chart values the gpu_operator role hands to helm (chart v25.10.x).

Pure logic, no cluster access. ``values`` is the chart's values document (a dict, the shape of the chart's
``deployments/gpu-operator/values.yaml``); the parts read here::

    cdi.enabled:        bool (chart default true since v25.10.0; ClusterPolicy: absent = true)
    toolkit.env:        [{name, value}] environment of the container toolkit's installer container
    devicePlugin.env:   [{name, value}] environment of the device plugin container

How the operator (NVIDIA/gpu-operator v25.10.1, controllers/object_controls.go) applies them: with CDI on,
``transformToolkitCtrForCDI`` and ``transformDevicePluginCtrForCDI`` set their own variables first (the device
plugin gets ``DEVICE_LIST_STRATEGY=cdi-annotations,cdi-cri``), then ``TransformToolkit`` and
``TransformDevicePlugin`` apply ``toolkit.env`` / ``devicePlugin.env`` in order through ``setContainerEnv``,
which replaces a variable of the same name. So a later entry of a name wins over an earlier one and over the
operator's own value (:func:`effective_env`).

The toolkit's installer (NVIDIA/nvidia-container-toolkit v1.18.1, the chart's ``toolkit.version``,
cmd/nvidia-ctk-installer/toolkit/toolkit.go) reads ``ACCEPT_NVIDIA_VISIBLE_DEVICES_ENVVAR_WHEN_UNPRIVILEGED``
(default true) and ``ACCEPT_NVIDIA_VISIBLE_DEVICES_AS_VOLUME_MOUNTS`` (default false) as Go booleans
(``strconv.ParseBool``) and writes them to the runtime's config.toml. The runtime then takes a device list from
an unprivileged container's ``NVIDIA_VISIBLE_DEVICES`` only when the first is true, and from mounts of
``/dev/null`` under ``/var/run/nvidia-container-devices`` only when the second is true
(internal/config/image/cuda_image.go, ``VisibleDevices``).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

ACCEPT_ENVVAR_UNPRIVILEGED = "ACCEPT_NVIDIA_VISIBLE_DEVICES_ENVVAR_WHEN_UNPRIVILEGED"
ACCEPT_VOLUME_MOUNTS = "ACCEPT_NVIDIA_VISIBLE_DEVICES_AS_VOLUME_MOUNTS"
DEVICE_LIST_STRATEGY = "DEVICE_LIST_STRATEGY"
# What the operator sets on the device plugin with CDI on (transformDevicePluginCtrForCDI, v25.10.1).
CDI_DEVICE_LIST_STRATEGY = "cdi-annotations,cdi-cri"
# The installer's defaults when a variable is not given (toolkit.go, v1.18.1).
TOOLKIT_DEFAULTS = {ACCEPT_ENVVAR_UNPRIVILEGED: True, ACCEPT_VOLUME_MOUNTS: False}

# Go's strconv.ParseBool: the only spellings the installer accepts.
_GO_TRUE = ("1", "t", "T", "TRUE", "true", "True")
_GO_FALSE = ("0", "f", "F", "FALSE", "false", "False")


def parse_go_bool(text):
    """``text`` (str) as Go's ``strconv.ParseBool`` reads it: True, False, or None when Go would refuse it."""
    if text in _GO_TRUE:
        return True
    if text in _GO_FALSE:
        return False
    return None


def _section(values, key):
    section = (values or {}).get(key)
    return section if isinstance(section, dict) else {}


def effective_env(entries):
    """``{name: value}`` of a chart ``env`` list (``[{name, value}]``) as the operator applies it: in order,
    a later entry of a name replacing an earlier one (``setContainerEnv``)."""
    result = {}
    for entry in entries or []:
        if isinstance(entry, dict) and "name" in entry:
            result[entry["name"]] = entry.get("value")
    return result


def cdi_enabled(values):
    """Whether the operator injects GPUs through CDI: ``cdi.enabled``, true when absent (chart v25.10.x
    values.yaml; ClusterPolicy ``CDIConfigSpec.IsEnabled`` treats a missing value as true)."""
    enabled = _section(values, "cdi").get("enabled", True)
    return enabled is True or (isinstance(enabled, str) and parse_go_bool(enabled) is True)


def toolkit_setting(values, name):
    """The boolean the toolkit's installer ends up with for ``name`` (one of :data:`TOOLKIT_DEFAULTS`), or None
    when the given value is not a Go boolean string."""
    env = effective_env(_section(values, "toolkit").get("env"))
    if name not in env:
        return TOOLKIT_DEFAULTS[name]
    value = env[name]
    return parse_go_bool(value) if isinstance(value, str) else None


def values_errors(values):
    """Messages (list of str, empty when fine) for chart values that would open the device door again or leave
    GPU pods without their GPUs:

    - a toolkit or device plugin ``env`` value that is not a string (the ClusterPolicy's ``EnvVar.value`` is a
      string: helm's apply fails), or a toolkit switch that is not a Go boolean (the installer exits);
    - CDI on and ``DEVICE_LIST_STRATEGY`` in ``devicePlugin.env``: it replaces the operator's
      ``cdi-annotations,cdi-cri`` and pods lose their GPUs (NVIDIA/gpu-operator issue 1876, after v25.10.0);
    - CDI off, the runtime refusing ``NVIDIA_VISIBLE_DEVICES`` from unprivileged containers, and the device plugin
      not handing devices over as volume mounts the runtime accepts: every unprivileged GPU pod starts without
      its GPUs (the device plugin's default ``envvar`` strategy is exactly what the runtime then ignores;
      the volume-mounts recipe is from NVIDIA/gpu-operator issue 372).
    """
    errors = []
    for section in ("toolkit", "devicePlugin"):
        for entry in _section(values, section).get("env") or []:
            if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
                errors.append("%s.env: every entry needs a name, got %r" % (section, entry))
            elif not isinstance(entry.get("value", ""), str):
                errors.append("%s.env %s: the value must be a string (quote it), got %r"
                              % (section, entry["name"], entry.get("value")))
    for name in (ACCEPT_ENVVAR_UNPRIVILEGED, ACCEPT_VOLUME_MOUNTS):
        value = effective_env(_section(values, "toolkit").get("env")).get(name)
        if isinstance(value, str) and parse_go_bool(value) is None:
            errors.append("toolkit.env %s: %r is not a boolean the toolkit's installer reads (true or false)"
                          % (name, value))
    plugin_env = effective_env(_section(values, "devicePlugin").get("env"))
    strategy = plugin_env.get(DEVICE_LIST_STRATEGY)
    if cdi_enabled(values):
        if DEVICE_LIST_STRATEGY in plugin_env:
            errors.append(
                "devicePlugin.env %s=%s: with CDI on the GPU Operator sets it to %s itself and an entry here "
                "replaces that, so GPU pods lose their devices; remove it" % (DEVICE_LIST_STRATEGY, strategy,
                                                                              CDI_DEVICE_LIST_STRATEGY))
    elif toolkit_setting(values, ACCEPT_ENVVAR_UNPRIVILEGED) is False:
        strategies = [s.strip() for s in str(strategy or "envvar").split(",")]
        if "volume-mounts" not in strategies or toolkit_setting(values, ACCEPT_VOLUME_MOUNTS) is not True:
            errors.append(
                "CDI is off and the toolkit ignores NVIDIA_VISIBLE_DEVICES of unprivileged containers, but the "
                "device plugin hands devices over that way: unprivileged GPU pods would start without GPUs. Keep "
                "CDI on, or set devicePlugin.env %s=volume-mounts and toolkit.env %s=true"
                % (DEVICE_LIST_STRATEGY, ACCEPT_VOLUME_MOUNTS))
    return errors


# The ClusterPolicy fields the chart writes from the values fairgpu sets (deployments/gpu-operator/templates/
# clusterpolicy.yaml: ``mig.strategy``, ``migManager.enabled`` and ``toolkit.env`` are written under ``spec`` with
# the values' own names, read on NVIDIA/gpu-operator's template at commit 01549ba; ``cdi.enabled``,
# ``migManager.config`` and ``dcgmExporter.enabled`` follow the same rule in the v25.10.x template, not read here).
# The chart names its one ClusterPolicy ``cluster-policy``.
CLUSTER_POLICY_NAME = "cluster-policy"
CLUSTER_POLICY_FIELDS = (("cdi", "enabled"), ("toolkit", "env"), ("mig", "strategy"), ("migManager", "enabled"),
                         ("migManager", "config", "name"), ("migManager", "config", "default"),
                         ("dcgmExporter", "enabled"))


def cluster_policy_fields(role_values, helm_values=None):
    """The ClusterPolicy (``nvidia.com/v1``, named CLUSTER_POLICY_NAME) with only the spec fields fairgpu sets: the
    CLUSTER_POLICY_FIELDS that ``role_values`` (the role's own chart values, gpu_operator_chart_values) has, with
    the value helm gets (``helm_values``, the role's values with gpu_operator_extra_values merged over them; the
    role's when None). ``toolkit.env`` keeps only the entries of the names the role sets, at the value that wins
    (the last of a name, :func:`effective_env`). For the drift check (plugins/module_utils/common/drift.py): the
    other fields of the ClusterPolicy are the platform team's."""
    helm_values = role_values if helm_values is None else helm_values
    spec = {}
    for field in CLUSTER_POLICY_FIELDS:
        role, value = role_values, helm_values
        for key in field:
            role = role.get(key) if isinstance(role, dict) else None
            value = value.get(key) if isinstance(value, dict) else None
        if role is None or value is None:
            continue
        if field == ("toolkit", "env"):
            names = [item.get("name") for item in role if isinstance(item, dict)]
            last = dict((item.get("name"), item) for item in value if isinstance(item, dict))
            value = [{"name": name, "value": str(last[name].get("value", ""))} for name in names if name in last]
        target = spec
        for key in field[:-1]:
            target = target.setdefault(key, {})
        target[field[-1]] = value
    return {"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy", "metadata": {"name": CLUSTER_POLICY_NAME},
            "spec": spec}
