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
  Kueue and Prometheus as local processes; ``kind`` and ``existing`` install the charts with helm.
- **MIG strategy** (the GPU Operator's ``mig.strategy``, read by its device plugin and feature discovery, and the
  strategy the MIG layout is checked and the tenants planned under): ``run_mig_strategy`` when set, else
  ``mixed`` on path mig (the task's per-profile quotas need one resource per MIG profile,
  ``nvidia.com/mig-<profile>``) and ``single`` on path kueue. NVIDIA: "GPU Operator with MIG", strategies
  https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/gpu-operator-mig.html.
- **Nodes to plan against**: ``live`` (read from the cluster when the tenants are applied or validated) for every
  playbook that reaches the cluster; the pre-check of ``site.yml`` on the embedded cluster and ``render.yml`` plan
  against node pools (``cluster_kwok_node_pools`` / ``render_node_pools``), since those touch no cluster first.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

PATHS = ("kueue", "mig")
DEFAULT_PATH = "kueue"
PROVIDERS = ("kwok", "kind", "existing")
PLAYBOOKS = ("site", "tenants", "validate", "render", "teardown")
MIG_STRATEGIES = ("single", "mixed")
MIG_STRATEGY_BY_PATH = {"kueue": "single", "mig": "mixed"}
# The component -> mode rule: the embedded cluster runs local stand-ins, every other cluster the charts.
MODES_BY_PROVIDER = {
    "kwok": {"gpu_operator": "simulated", "kueue": "local", "monitoring": "local"},
    "kind": {"gpu_operator": "helm", "kueue": "helm", "monitoring": "helm"},
    "existing": {"gpu_operator": "helm", "kueue": "helm", "monitoring": "helm"},
}
# Playbooks that work on what site.yml built, and so follow the path it recorded on the cluster.
FOLLOWS_RECORD = ("tenants", "validate")
# The record site.yml leaves on the cluster (a ConfigMap in kube-system, which every cluster has).
RECORD_NAME = "fairgpu-run"
RECORD_NAMESPACE = "kube-system"


def _blank(value):
    return value is None or (isinstance(value, str) and not value.strip())


def run_settings(playbook, provider, requested_path=None, recorded_path=None, inventory_path=None,
                 mig_strategy=None, cluster=""):
    """The run's settings for one inventory host.

    ``playbook``: one of PLAYBOOKS. ``provider``: ``cluster_provider``. ``requested_path``: ``-e path`` (None or ""
    when not given). ``recorded_path``: the ``path`` of the cluster's record (None when there is none or it was not
    read). ``inventory_path``: ``run_path``. ``mig_strategy``: ``run_mig_strategy`` ("" or None: by path).
    ``cluster``: the inventory host, named in messages.

    Returns ``{"errors": [str], "playbook", "cluster", "path", "path_source", "provider", "modes":
    {"gpu_operator", "kueue", "monitoring"}, "mig_strategy", "nodes_source": "live" | "node_pools"}``. Errors
    name the variable and the fix; with errors the other keys hold the defaults and must not be used.
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
    strategy = mig_strategy if mig_strategy in MIG_STRATEGIES else MIG_STRATEGY_BY_PATH[path]
    nodes_source = "node_pools" if playbook == "render" else "live"
    return {
        "errors": errors, "playbook": playbook, "cluster": cluster, "path": path, "path_source": path_source,
        "provider": provider, "modes": modes, "mig_strategy": strategy, "nodes_source": nodes_source,
    }


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
