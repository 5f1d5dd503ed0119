# -*- coding: utf-8 -*-
# Copyright: fairgpu contributors
# Apache License 2.0 (see LICENSE)
"""The run's settings, decided once per inventory host: which path, which install mode for each component,
which MIG strategy, and where the GPU nodes to plan against come from. Every playbook's first step (role
``fairgpu.tenancy.run``) calls ``run_settings`` and sets its result as the fact ``run_settings``; the roles read
that fact and their own prefixed variables.

Pure logic, no cluster access. The rules, one place each:

- **Path.** ``kueue`` (quotas with fair sharing) or ``mig`` (MIG partitions). The first of: ``-e path=``, the path
  the last ``site.yml`` recorded on the cluster (``tenants.yml`` and ``validate.yml`` only: they work on what site
  built), the inventory's ``run_path``, ``kueue``. ``tenants.yml`` and ``validate.yml`` refuse an ``-e path`` that
  differs from the recorded one: the cluster's GPUs are laid out for the recorded path.
- **Modes** from ``cluster_provider``: ``kwok`` (the embedded cluster) runs the GPU operator's simulated stand-in,
  Kueue and Prometheus as local processes; ``kind`` and ``existing`` install the charts with helm. The
  inventory's ``gpu_operator_mode``, ``kueue_mode`` and ``monitoring_mode`` override them here, once, so that no
  role decides from ``cluster_provider`` what the override changed (an existing cluster of kwok nodes runs the
  local stand-ins).
- **MIG strategy** (the GPU Operator's ``mig.strategy``, read by its device plugin and feature discovery, and the
  strategy the MIG layout is checked and the tenants planned under): ``run_mig_strategy`` when set, else
  ``mixed`` on path mig (the task's per-profile quotas need one resource per MIG profile,
  ``nvidia.com/mig-<profile>``) and ``single`` on path kueue. NVIDIA: "GPU Operator with MIG", strategies
  https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/gpu-operator-mig.html.
- **Nodes to plan against**: ``live`` (read from the cluster when the tenants are applied or validated) for every
  playbook that reaches the cluster; the pre-check of ``site.yml`` on the embedded cluster and ``render.yml`` plan
  against node pools (``lab_cluster_node_pools`` / ``render_node_pools``), since those touch no cluster first.
- **What one component needs of another**, so that no role reads another role's variables: the namespaces of Kueue,
  the GPU Operator and the monitoring (``run_namespaces``), the local ports of the embedded cluster's processes
  (``run_local_ports``: Kueue's webhook, metrics and health ports, Prometheus, the simulated DCGM exporter,
  kube-state-metrics and its own metrics), the
  machine's state directory and toolchain cache, and the pinned versions (``files/lab/toolchain/versions.env``,
  read once).
- **Local ports** (provider ``kwok`` only: the processes listen on 127.0.0.1 of this machine) are distinct and
  outside the kernel's ephemeral port range (``/proc/sys/net/ipv4/ip_local_port_range``, 32768-60999 by
  default): the kernel picks a free port of that range as the local end of every outgoing connection (the API
  server's and etcd's among them), so a listener there fails now and then with "address already in use"
  (Linux ``ip(7)``, ``ip_local_port_range``; https://docs.kernel.org/networking/ip-sysctl.html).
- **The connection** (``connection``): the kubeconfig and context every task of the run reaches the cluster with,
  never the user's current context by accident: ``cluster_kubeconfig`` when given (required for ``existing``), else
  the provider's own file (kwok: ``<state_dir>/kwok/clusters/<cluster_name>/kubeconfig.yaml``, where kwokctl
  writes it; kind: ``~/.kube/fairgpu-kind.yaml``, where the cluster role has kind write it); ``cluster_context``
  (empty: the file's current context). ``auth`` is what the playbooks' ``module_defaults`` give every module of the
  action group ``fairgpu.tenancy.cluster`` (kubernetes.core's ``kubeconfig`` and ``context`` options).
- **Loopback only on the embedded cluster** (``loopback_errors``): nothing of ``cluster_provider: kwok`` may dial
  off the machine, so a mode or chart that makes helm fetch from a chart repository or an OCI registry is refused
  before anything runs: ``gpu_operator_mode: helm`` (the NVIDIA chart repository), ``monitoring_mode: helm`` with
  ``monitoring_install_chart`` true (kube-prometheus-stack from its repository), a remote or repository
  ``monitoring_chart_ref`` / ``kueue_chart_ref``. The local ways stay: the simulated GPU Operator, the local
  Prometheus, a Prometheus Operator already there (``monitoring_install_chart: false``), Kueue's chart from the
  toolchain (``kueue_chart_ref`` empty) or a local chart path.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import difflib
import re

from ansible_collections.fairgpu.tenancy.plugins.module_utils.kueue.chart import chart_ref_kind
from ansible_collections.fairgpu.tenancy.plugins.module_utils.cluster import pod_security
from ansible_collections.fairgpu.tenancy.plugins.module_utils.common.names import MANAGED_BY

PATHS = ("kueue", "mig")
DEFAULT_PATH = "kueue"
PROVIDERS = ("kwok", "kind", "existing")
PLAYBOOKS = ("site", "tenants", "validate", "replay", "render", "teardown")
MIG_STRATEGIES = ("single", "mixed")
MIG_STRATEGY_BY_PATH = {"kueue": "single", "mig": "mixed"}
# The component -> mode rule: the embedded cluster runs local stand-ins, every other cluster the charts.
MODES_BY_PROVIDER = {
    "kwok": {"gpu_operator": "simulated", "kueue": "local", "monitoring": "local"},
    "kind": {"gpu_operator": "helm", "kueue": "helm", "monitoring": "helm"},
    "existing": {"gpu_operator": "helm", "kueue": "helm", "monitoring": "helm"},
}
# The modes a component can run in, and the inventory variable that overrides the provider's choice. An existing
# cluster of kwok nodes (one a person started with kwokctl) keeps the local stand-ins with all three overrides.
MODE_CHOICES = {"gpu_operator": ("simulated", "helm"), "kueue": ("local", "helm"), "monitoring": ("local", "helm")}
MODE_VARIABLES = {"gpu_operator": "gpu_operator_mode", "kueue": "kueue_mode", "monitoring": "monitoring_mode"}
# Playbooks that work on what site.yml built, and so follow the path it recorded on the cluster.
FOLLOWS_RECORD = ("tenants", "validate", "replay")
# The local ports of the embedded cluster's processes on 127.0.0.1; two embedded clusters on one machine need
# their own (run_local_ports). The dashboard page's port, when not given, is the one after Prometheus's
# (LOCAL_PORTS_AFTER), so an inventory that moved Prometheus moves the page with it.
LOCAL_PORT_DEFAULTS = {"kueue_webhook": 19443, "kueue_metrics": 18443, "kueue_health": 18081,
                       "prometheus": 19090, "dashboard": 19091, "dcgm_exporter": 19400, "kube_state_metrics": 19480,
                       "kube_state_metrics_telemetry": 19490}
LOCAL_PORTS_AFTER = {"dashboard": "prometheus"}
# Where each component is installed (run_namespaces).
NAMESPACE_DEFAULTS = {"kueue": "kueue-system", "gpu_operator": "gpu-operator", "monitoring": "fairgpu-monitoring"}
# The ConfigMap of mig-parted configurations: fairgpu writes it (role mig_config), the GPU Operator's MIG manager
# reads it (chart value migManager.config.name), both in the GPU Operator's namespace.
MIG_PARTED_CONFIG_NAME = "fairgpu-mig-parted-config"
# Inventory variables that moved into the run's settings, and where they went: one setting each, read by every
# role that needs it, instead of a role's variable that other roles copied.
MOVED_VARIABLES = {
    "kueue_local_webhook_port": "run_local_ports.kueue_webhook",
    "kueue_local_metrics_port": "run_local_ports.kueue_metrics",
    "kueue_local_health_port": "run_local_ports.kueue_health",
    "monitoring_prometheus_port": "run_local_ports.prometheus",
    "monitoring_dcgm_exporter_port": "run_local_ports.dcgm_exporter",
    "monitoring_kueue_metrics_port": "run_local_ports.kueue_metrics",
    "kueue_namespace": "run_namespaces.kueue",
    "monitoring_kueue_namespace": "run_namespaces.kueue",
    "gpu_operator_namespace": "run_namespaces.gpu_operator",
    "mig_config_namespace": "run_namespaces.gpu_operator",
    "monitoring_namespace": "run_namespaces.monitoring",
    "kueue_local_ca_dir": "run_state_dir (the CA is <run_state_dir>/kueue)",
    "monitoring_kueue_ca_file": "run_state_dir (the CA is <run_state_dir>/kueue/ca.crt)",
    "cluster_toolchain_cache": "run_toolchain_cache",
    "kueue_toolchain_cache": "run_toolchain_cache",
    "monitoring_toolchain_cache": "run_toolchain_cache",
    "gpu_operator_mig_config_name": "nothing: the MIG manager's ConfigMap is always " + MIG_PARTED_CONFIG_NAME,
    "mig_config_configmap_name": "nothing: the MIG manager's ConfigMap is always " + MIG_PARTED_CONFIG_NAME,
    # The embedded cluster became the lab's role (roles/lab_cluster), teardown's confirmation its own role's.
    "cluster_kwok_node_pools": "lab_cluster_node_pools",
    "cluster_kwok_apiserver_port": "lab_cluster_apiserver_port",
    "cluster_kwok_pod_security_defaults": "lab_cluster_pod_security_defaults",
    "cluster_kwok_pod_security_exemptions": "lab_cluster_pod_security_exemptions",
    "cluster_kwok_create_lock": "lab_cluster_create_lock",
    "cluster_kwok_workdir": "run_state_dir (the embedded clusters are under <run_state_dir>/kwok)",
    "cluster_kubernetes_version": "lab_cluster_kubernetes_version",
    "cluster_etcd_version": "lab_cluster_etcd_version",
    "cluster_kwok_version": "lab_cluster_kwok_version",
    "cluster_kind_kubeconfig": "cluster_kubeconfig (empty: kind's own file ~/.kube/fairgpu-kind.yaml)",
    "cluster_teardown_confirm": "teardown_confirm",
    "cluster_teardown_uninstall_releases": "teardown_uninstall_releases",
    "cluster_teardown_wait_timeout": "teardown_wait_timeout",
    # The lab's local processes became roles of their own (roles/lab_*); their working directories follow run_state_dir.
    "kueue_local_workdir": "run_state_dir (the local Kueue's files are under <run_state_dir>/kueue/<cluster_name>)",
    "kueue_local_metrics_cert_dir": "nothing: cmd/kueue reads its metrics certificate from /etc/kueue/metrics/certs",
    "monitoring_local_workdir": "run_state_dir (the local monitoring's files are under <run_state_dir>/monitoring)",
    "mig_config_simulated_workdir": "run_state_dir (the simulated MIG manager's files are under <run_state_dir>/mig-manager)",
    "mig_config_simulated_delay": "lab_mig_manager_delay",
}
# The smallest port a user process may bind without privileges.
UNPRIVILEGED_PORT = 1024
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
# The record site.yml leaves on the cluster (a ConfigMap in kube-system, which every cluster has).
RECORD_NAME = "fairgpu-run"
RECORD_NAMESPACE = "kube-system"


# The host's cluster: inventory input that the action plugin run_settings reads under these names (its argument spec
# holds their defaults); every other setting is an option of a role's meta/argument_specs.yml.
CLUSTER_VARIABLES = ("cluster_provider", "cluster_name", "cluster_kubeconfig", "cluster_context")
# How near a name must be to a setting to be taken for its misspelling (difflib's ratio: kueue_fair_shairng against
# kueue_fair_sharing is 0.89; a platform team's own cluster_region against cluster_name is 0.62).
MISSPELLING_CUTOFF = 0.85


def misspelled_settings(host_variables, settings, roles):
    """Warnings for the host's variables that look like a misspelt fairgpu setting: a name that begins with a role's
    prefix (``<role>_``), is no setting and no moved variable, and is within MISSPELLING_CUTOFF of a setting with the
    same prefix, and is not a setting's name with a suffix. Ansible ignores a variable no role reads, so ``-e
    kueue_fair_shairng=false`` would change nothing without a word. Names far from every setting are a platform
    team's own (``cluster_region``) and pass unsaid; a warning, not an error, since such a name may still be theirs.

    ``host_variables``: the names of the host's inventory and extra variables. ``settings``: every option of the
    roles' argument specs (CLUSTER_VARIABLES are added here). ``roles``: the roles' names. Returns ``[str]``, one warning a
    name, naming the setting meant."""
    known = set(settings) | set(CLUSTER_VARIABLES)
    warnings = []
    for name in sorted(set(host_variables or ())):
        # A setting's name grown by a suffix is a helper of the inventory's own (tenants_list_mig, which the
        # example inventory's tenants_by_path reads), not a slip of the keyboard.
        if name in known or name in MOVED_VARIABLES or any(name.startswith(n + "_") for n in known):
            continue
        prefixes = [role + "_" for role in roles if name.startswith(role + "_")]
        if not prefixes:
            continue
        prefix = max(prefixes, key=len)
        near = difflib.get_close_matches(name, sorted(n for n in known if n.startswith(prefix)), 1, MISSPELLING_CUTOFF)
        if near:
            warnings.append("%s: no role of fairgpu reads it, so it changes nothing; did you mean %s? (the settings: "
                            "docs/settings.md)" % (name, near[0]))
    return warnings


def _blank(value):
    return value is None or (isinstance(value, str) and not value.strip())


def ephemeral_range(text):
    """``(low, high)`` of the text of ``/proc/sys/net/ipv4/ip_local_port_range`` (two numbers), or None when the
    text is empty or not that (another system: no check)."""
    parts = str(text or "").split()
    if len(parts) == 2 and all(part.isdigit() for part in parts):
        return int(parts[0]), int(parts[1])
    return None


def _is_port(value):
    return not isinstance(value, bool) and str(value).isdigit() and 1 <= int(value) <= 65535


def local_port_errors(ports, ephemeral=None):
    """Messages for ``run_local_ports`` (``{name: port}``, names of LOCAL_PORT_DEFAULTS, values already merged
    with the defaults); ``ephemeral``: ``(low, high)`` or None. [] when fine."""
    errors = []
    unknown = sorted(set(ports) - set(LOCAL_PORT_DEFAULTS), key=str)
    if unknown:
        errors.append("run_local_ports: %s not a local port fairgpu uses; the names are %s"
                      % (", ".join(map(str, unknown)), ", ".join(sorted(LOCAL_PORT_DEFAULTS))))
    owners = {}
    for name in sorted(LOCAL_PORT_DEFAULTS):
        value = ports.get(name)
        if not _is_port(value) or int(value) < UNPRIVILEGED_PORT:
            errors.append("run_local_ports.%s: %r is not a TCP port a user process may listen on; give a number from "
                          "%d to 65535" % (name, value, UNPRIVILEGED_PORT))
            continue
        port = int(value)
        if port in owners:
            errors.append("run_local_ports.%s: %d is also run_local_ports.%s; give each process its own port"
                          % (name, port, owners[port]))
        owners.setdefault(port, name)
        if ephemeral and ephemeral[0] <= port <= ephemeral[1]:
            errors.append("run_local_ports.%s: %d lies in the kernel's ephemeral port range %d-%d, which outgoing "
                          "connections take their local ports from, so listening there fails now and then; choose "
                          "a port below %d" % (name, port, ephemeral[0], ephemeral[1], ephemeral[0]))
    return errors


# The chart settings the loopback rule reads (the host's inventory and extra variables only; unset: the role's
# default, given here). monitoring_install_chart defaults to true (roles/monitoring/defaults/main.yml).
CHART_SETTING_DEFAULTS = {"monitoring_install_chart": True, "monitoring_chart_ref": "", "kueue_chart_ref": "",
                          "kueue_extra_values": {}}


def _truthy(value):
    """Ansible's ``| bool`` for the values an inventory gives: true, yes, on, 1 (any case) and True."""
    return value is True or str(value).strip().lower() in ("true", "yes", "on", "1", "y")


def loopback_errors(provider, modes, chart_settings=None):
    """Messages for settings that would make helm dial a host off the machine on the embedded cluster
    (``provider`` ``kwok``; any other provider: []). ``modes``: the resolved ``{"gpu_operator", "kueue",
    "monitoring"}``. ``chart_settings``: the host's ``monitoring_install_chart``, ``monitoring_chart_ref`` and
    ``kueue_chart_ref`` (missing or None: CHART_SETTING_DEFAULTS). A chart ref is remote when ``oci://`` or
    ``http(s)://``, from a repository when ``<repo>/<chart>`` (``kueue.chart.chart_ref_kind``); helm then fetches
    it (https://helm.sh/docs/helm/helm_install/ "a chart reference", "an OCI registry"). Each message names the
    variable, its value and the local way. Never raises."""
    if provider != "kwok":
        return []
    given = dict(CHART_SETTING_DEFAULTS)
    given.update((key, value) for key, value in (chart_settings or {}).items() if value is not None)
    where = "on cluster_provider: kwok nothing may leave the machine"
    errors = []
    if modes.get("gpu_operator") == "helm":
        errors.append("gpu_operator_mode: 'helm' installs the NVIDIA GPU Operator chart from its repository "
                      "(gpu_operator_chart_repo_url), and %s; use gpu_operator_mode: simulated (the default there)"
                      % where)
    if modes.get("monitoring") == "helm" and _truthy(given["monitoring_install_chart"]):
        ref = str(given["monitoring_chart_ref"] or "")
        errors.append("monitoring_mode: 'helm' with monitoring_install_chart: true installs kube-prometheus-stack%s "
                      "from a chart repository (monitoring_chart_repo_url), and %s; use monitoring_mode: local (the "
                      "default there), or monitoring_install_chart: false against a Prometheus Operator already on "
                      "the cluster" % ((" (%s)" % ref) if ref else "", where))
    ref = str(given["kueue_chart_ref"] or "").strip()
    if modes.get("kueue") == "helm" and ref and chart_ref_kind(ref) != "path":
        errors.append("kueue_chart_ref: %r is %s, which helm would fetch, and %s; leave kueue_chart_ref empty for the "
                      "toolchain's copy of Kueue's chart, or give a local chart directory or .tgz"
                      % (ref, "a remote chart" if chart_ref_kind(ref) == "remote" else "a chart of a repository", where))
    return errors


def _merged(given, defaults, variable, errors):
    if given in (None, ""):
        return dict(defaults)
    if not isinstance(given, dict):
        errors.append("%s: must be a mapping (%s), got %r" % (variable, ", ".join(sorted(defaults)), given))
        return dict(defaults)
    merged = dict(defaults)
    merged.update(given)
    return merged


KIND_KUBECONFIG = "~/.kube/fairgpu-kind.yaml"


def connection(provider, cluster_name, state_dir, kubeconfig="", context=""):
    """``{"kubeconfig": path, "context": name or "", "auth": {kubeconfig, context if any}}`` of the inventory host's
    cluster (the rule in the module docstring); ``{"errors": [str]}`` added when provider ``existing`` has no
    kubeconfig."""
    errors = []
    if not _blank(kubeconfig):
        path = str(kubeconfig)
    elif provider == "existing":
        errors.append("cluster_kubeconfig: provider 'existing' needs the path of a kubeconfig that reaches the cluster")
        path = ""
    elif provider == "kind":
        path = KIND_KUBECONFIG
    else:
        path = "%s/kwok/clusters/%s/kubeconfig.yaml" % (str(state_dir or "").rstrip("/"), cluster_name)
    context = "" if _blank(context) else str(context)
    auth = {"kubeconfig": path}
    if context:
        auth["context"] = context
    return {"kubeconfig": path, "context": context, "auth": auth, "errors": errors}


def run_settings(playbook, provider, requested_path=None, recorded_path=None, inventory_path=None,
                 mig_strategy=None, cluster="", cluster_name="fairgpu", local_ports=None, namespaces=None,
                 ephemeral_ports="", state_dir="", toolchain_cache="", versions=None, host_variables=(),
                 mode_overrides=None, helm_binary="", chart_settings=None, kubeconfig="", context=""):
    """The run's settings for one inventory host.

    ``playbook``: one of PLAYBOOKS. ``provider``: ``cluster_provider``. ``requested_path``: ``-e path`` (None or ""
    when not given). ``recorded_path``: the ``path`` of the cluster's record (None when there is none or it was not
    read). ``inventory_path``: ``run_path``. ``mig_strategy``: ``run_mig_strategy`` ("" or None: by path).
    ``cluster``: the inventory host, named in messages. ``cluster_name``: the cluster's name (``cluster_name``),
    which names its local state. ``local_ports``: ``run_local_ports``, a mapping over LOCAL_PORT_DEFAULTS (the
    names not given keep their default). ``namespaces``: ``run_namespaces``, likewise over NAMESPACE_DEFAULTS.
    ``ephemeral_ports``: the text of ``/proc/sys/net/ipv4/ip_local_port_range`` ("" when unknown).
    ``state_dir``: the machine's fairgpu state directory (``~/.local/share/fairgpu``). ``toolchain_cache``: where
    the toolchain is built (``FAIRGPU_CACHE`` or ``~/.cache/fairgpu``). ``versions``: the pinned versions
    (``{NAME: value}`` of versions.env). ``host_variables``: the names of the variables the inventory and extra
    vars set for the host; one of MOVED_VARIABLES is refused, naming where it went. ``mode_overrides``: the
    inventory's ``gpu_operator_mode``, ``kueue_mode``, ``monitoring_mode`` by component (None or "": the provider's
    mode), so that every role reads the modes the run really uses (the MIG layout and the validation follow the GPU
    Operator's mode, the teardown the local processes'). ``helm_binary``: ``run_helm_binary``, the helm client of
    the helm modes and of teardown's uninstalls ("": ``helm`` on PATH; on the embedded cluster the toolchain's
    helm, built when a role first needs it). ``chart_settings``: the host's chart variables the loopback rule and
    the Pod Security rows read (``loopback_errors``, ``cluster.pod_security.rows``; None: the roles' defaults).
    ``kubeconfig``, ``context``: ``cluster_kubeconfig`` and ``cluster_context`` (``connection``).

    Returns ``{"errors": [str], "playbook", "cluster", "cluster_name", "path", "path_source", "provider", "modes":
    {"gpu_operator", "kueue", "monitoring"}, "mig_strategy", "nodes_source": "live" | "node_pools", "namespaces":
    {"kueue", "gpu_operator", "monitoring"}, "mig_parted_config_name": the MIG manager's ConfigMap, "local":
    {"ports": {name: int}, "state_dir", "toolchain_cache", "kueue_ca_dir"}, "versions": {NAME: value},
    "helm_binary": str, "pod_security": [cluster.pod_security.rows row], "connection": ``connection``'s result
    without its errors, "record": the ConfigMap ``run_record`` makes}``. Errors name the variable and the fix; with
    errors the other keys hold the defaults and must not be used.
    """
    errors = []
    if playbook not in PLAYBOOKS:
        errors.append("playbook: %r is not one of %s" % (playbook, ", ".join(PLAYBOOKS)))
    if provider not in PROVIDERS:
        errors.append("cluster_provider: %r is not a provider; use one of %s" % (provider, ", ".join(PROVIDERS)))
    for name, value, fix in (("path", requested_path, "use -e path=kueue or -e path=mig"),
                             ("run_path", inventory_path, "set it to kueue or mig"),
                             ("the cluster's record %s/%s" % (RECORD_NAMESPACE, RECORD_NAME), recorded_path,
                              "run playbooks/site.yml -e path=kueue|mig to record the path again")):
        if not _blank(value) and value not in PATHS:
            errors.append("%s: %r is not a fairgpu path; %s" % (name, value, fix))
    for name in sorted(set(host_variables or ()) & set(MOVED_VARIABLES)):
        errors.append("%s: no longer read; set %s instead" % (name, MOVED_VARIABLES[name]))
    if not _blank(mig_strategy) and mig_strategy not in MIG_STRATEGIES:
        errors.append("run_mig_strategy: %r is not a MIG strategy fairgpu plans under; use single or mixed, or leave "
                      "it empty for the path's own (single on kueue, mixed on mig)" % (mig_strategy,))

    follows_record = playbook in FOLLOWS_RECORD and not _blank(recorded_path)
    if follows_record and not _blank(requested_path) and requested_path != recorded_path:
        errors.append(
            "path: -e path=%s conflicts with path %s that the last site.yml recorded on %s (%s/%s); its GPUs and "
            "queues are set up for %s. Drop -e path, or run playbooks/site.yml -e path=%s first"
            % (requested_path, recorded_path, cluster or "the cluster", RECORD_NAMESPACE, RECORD_NAME, recorded_path,
               requested_path))

    for value, source in ((requested_path, "-e path"),
                          (recorded_path if playbook in FOLLOWS_RECORD else None, "the cluster's record"),
                          (inventory_path, "run_path"), (DEFAULT_PATH, "default")):
        if not _blank(value):
            path, path_source = value, source
            break
    if path not in PATHS:
        path = DEFAULT_PATH
    modes = dict(MODES_BY_PROVIDER.get(provider, MODES_BY_PROVIDER["kwok"]))
    overrides = mode_overrides if isinstance(mode_overrides, dict) else {}
    for component in sorted(MODE_CHOICES):
        value = overrides.get(component)
        if _blank(value):
            continue
        if value not in MODE_CHOICES[component]:
            errors.append("%s: %r is not a mode of the %s; use %s, or leave it unset for the provider's (%s on %s)"
                          % (MODE_VARIABLES[component], value, component.replace("_", " "),
                             " or ".join(MODE_CHOICES[component]), modes[component], provider))
            continue
        modes[component] = value
    errors.extend(loopback_errors(provider, modes, chart_settings))
    charts = dict(CHART_SETTING_DEFAULTS)
    charts.update((k, v) for k, v in (chart_settings if isinstance(chart_settings, dict) else {}).items()
                  if v is not None)
    strategy = mig_strategy if mig_strategy in MIG_STRATEGIES else MIG_STRATEGY_BY_PATH[path]
    nodes_source = "node_pools" if playbook == "render" else "live"

    namespaces = _merged(namespaces, NAMESPACE_DEFAULTS, "run_namespaces", errors)
    for name in sorted(set(namespaces) - set(NAMESPACE_DEFAULTS), key=str):
        errors.append("run_namespaces.%s: fairgpu installs no component by that name; the names are %s"
                      % (name, ", ".join(sorted(NAMESPACE_DEFAULTS))))
    for name in sorted(NAMESPACE_DEFAULTS):
        value = namespaces.get(name)
        if not (isinstance(value, str) and len(value) <= 63 and _DNS_LABEL.match(value)):
            errors.append("run_namespaces.%s: %r is not a namespace name (a lower-case DNS label)" % (name, value))
    ports = _merged(local_ports, LOCAL_PORT_DEFAULTS, "run_local_ports", errors)
    for name, before in LOCAL_PORTS_AFTER.items():
        if name not in (local_ports if isinstance(local_ports, dict) else {}) and _is_port(ports.get(before)):
            ports[name] = int(ports[before]) + 1
    # Local processes listen on these ports: the embedded cluster's, or an existing cluster's with a local mode.
    if provider == "kwok" or "local" in (modes["kueue"], modes["monitoring"]):
        errors.extend(local_port_errors(ports, ephemeral_range(ephemeral_ports)))
    ports = dict((name, int(value) if _is_port(value) else value) for name, value in ports.items())
    state_dir = str(state_dir or "").rstrip("/")
    reached = connection(provider, cluster_name, state_dir, kubeconfig, context)
    unreachable = reached.pop("errors")
    if playbook != "render":  # render.yml reaches no cluster
        errors.extend(unreachable)
    if helm_binary is None:
        helm_binary = ""
    if not isinstance(helm_binary, str) or (helm_binary.strip() and not helm_binary.startswith(("/", "~"))):
        errors.append("run_helm_binary: %r is not the absolute path of a helm client; give one (such as "
                      "/usr/local/bin/helm) or leave it empty for helm on PATH" % (helm_binary,))
        helm_binary = ""
    settings = {
        "errors": errors, "playbook": playbook, "cluster": cluster, "cluster_name": cluster_name, "path": path,
        "path_source": path_source, "provider": provider, "modes": modes, "mig_strategy": strategy,
        "nodes_source": nodes_source,
        "namespaces": dict((name, namespaces[name]) for name in NAMESPACE_DEFAULTS),
        "mig_parted_config_name": MIG_PARTED_CONFIG_NAME,
        "local": {"ports": ports, "state_dir": state_dir, "toolchain_cache": toolchain_cache,
                  "kueue_ca_dir": state_dir + "/kueue"},
        "versions": dict(versions or {}),
        "helm_binary": helm_binary.strip(),
        # The namespaces fairgpu installs into and their Pod Security levels (cluster/pod_security.py), read by the
        # cluster role's pre-check and each role's namespace task.
        "pod_security": pod_security.rows(modes, namespaces, charts["monitoring_install_chart"],
                                          charts["kueue_extra_values"]),
        "connection": reached,
    }
    settings["record"] = run_record(settings, MANAGED_BY)
    return settings


def run_record(settings, labels=None):
    """The ConfigMap site.yml applies to record the run's path on the cluster: ``kube-system/fairgpu-run`` with
    data ``path`` and ``mig_strategy`` (strings). ``labels``: extra metadata labels (fairgpu's managed-by label)."""
    return {
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": RECORD_NAME, "namespace": RECORD_NAMESPACE, "labels": dict(labels or {})},
        "data": {"path": settings["path"], "mig_strategy": settings["mig_strategy"]},
    }


def recorded_path(configmaps):
    """The recorded path from the result of reading the record (a list of ConfigMap dicts, empty when absent)."""
    for configmap in configmaps or []:
        return (configmap.get("data") or {}).get("path")
    return None
