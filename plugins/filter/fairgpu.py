# -*- coding: utf-8 -*-
# Copyright: fairgpu maintainers
# Apache License 2.0 (see LICENSE)
"""Jinja2 filters of fairgpu.tenancy: thin wrappers over the pure logic in plugins/module_utils."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.fairgpu.tenancy.plugins.module_utils.cluster import node_pools as cluster_spec
from ansible_collections.fairgpu.tenancy.plugins.module_utils.cluster import gpu_operator_values
from ansible_collections.fairgpu.tenancy.plugins.module_utils.cluster import kubeconfig as cluster_kubeconfig
from ansible_collections.fairgpu.tenancy.plugins.module_utils.cluster import pod_security
from ansible_collections.fairgpu.tenancy.plugins.module_utils.common import drift
from ansible_collections.fairgpu.tenancy.plugins.module_utils.kueue import chart as kueue_chart
from ansible_collections.fairgpu.tenancy.plugins.module_utils.kueue import configuration as kueue_configuration
from ansible_collections.fairgpu.tenancy.plugins.module_utils.kueue import multikueue
from ansible_collections.fairgpu.tenancy.plugins.module_utils.kueue import settings as kueue_settings
from ansible_collections.fairgpu.tenancy.plugins.module_utils.kueue import webhooks as kueue_webhooks
from ansible_collections.fairgpu.tenancy.plugins.module_utils.plan import fleet
from ansible_collections.fairgpu.tenancy.plugins.module_utils.plan import helm_release
from ansible_collections.fairgpu.tenancy.plugins.module_utils.plan import manifests
from ansible_collections.fairgpu.tenancy.plugins.module_utils.mig import layout as mig_layout
from ansible_collections.fairgpu.tenancy.plugins.module_utils.replay import schedule as replay_schedule
from ansible_collections.fairgpu.tenancy.plugins.module_utils.mig import nodes as mig_nodes
from ansible_collections.fairgpu.tenancy.plugins.module_utils.teardown.plan import other_writers


def pod_security_plan(rows, namespaces, probes=None):
    """``pod_security.plan`` from what the roles read: ``namespaces``, the Namespace objects of a k8s_info
    (``resources``); ``probes``, the ``results`` of the looped dry-run creates (``item``: the namespace, ``result``:
    the object the API server would have created, else ``msg``) or None."""
    found = {}
    for obj in namespaces or []:
        name = ((obj or {}).get("metadata") or {}).get("name")
        if name:
            found[name] = {"object": obj, "other_writers": other_writers(obj)}
    answered = None
    if probes is not None:
        # failed_when: false clears "failed": a create that returned no object was refused.
        answered = dict((r.get("item"), {"failed": bool(r.get("failed")) or not isinstance(r.get("result"), dict)
                                         or not r.get("result"), "msg": r.get("msg") or r.get("error") or ""})
                        for r in probes or [] if isinstance(r, dict) and not r.get("skipped"))
    return pod_security.plan(rows, found, answered)


def _smi(smi):
    """The nodes' own nvidia-smi outputs as ``mig/nodes.py`` takes them: ``(lgip, reports)`` of ``smi``,
    ``{"lgip": {node: mig -lgip stdout}, "reports": {node: report}}`` (the inventory's and the discovered)."""
    smi = smi or {}
    return smi.get("lgip") or {}, smi.get("reports") or {}


def mig_result_errors(layout, states, before, smi=None):
    """``nodes.node_result_errors`` of the nodes as read after the MIG manager (``states``), ``before`` it."""
    lgip, reports = _smi(smi)
    return mig_nodes.node_result_errors(layout["document"], layout["name"], states, layout["strategy"], before,
                                        reports, lgip)


class FilterModule(object):
    def filters(self):
        return {
            "pod_security_plan": pod_security_plan,
            "pod_security_probe_pod": pod_security.probe_pod,
            "fleet_errors": fleet.fleet_errors,
            "helm_chart_source": helm_release.chart_source,
            "fleet_policy_errors": fleet.policy_errors,
            "fleet_batches": fleet.batches,
            "kubeconfig_context_errors": cluster_kubeconfig.context_errors,
            "kubeconfig_single_context": cluster_kubeconfig.single_context,
            "node_pool_errors": cluster_spec.node_pool_errors,
            "node_pool_nodes": cluster_spec.node_pool_nodes,
            "node_pool_node_spec": cluster_spec.node_spec,
            "kueue_local_webhooks": kueue_webhooks.local_webhook_configurations,
            "kueue_release_configuration": kueue_chart.release_configuration,
            "kueue_chart_values": kueue_chart.chart_values,
            "kueue_configuration": kueue_settings.configuration,
            "kueue_feature_gates": kueue_settings.feature_gates,
            "kueue_feature_gates_arg": kueue_settings.feature_gates_arg,
            "kueue_setting_errors": kueue_settings.setting_errors,
            "kueue_chart_ref_kind": kueue_chart.chart_ref_kind,
            "kueue_chart_ref_errors": kueue_chart.chart_ref_errors,
            "kueue_chart_object_names": kueue_chart.object_names,
            "kueue_configuration_differences": kueue_configuration.configuration_differences,
            "multikueue_role_errors": multikueue.role_errors,
            "multikueue_guarantee_errors": multikueue.guarantee_errors,
            "multikueue_worker_identity": multikueue.worker_identity,
            "multikueue_manager_objects": multikueue.manager_objects,
            "multikueue_held_credentials": multikueue.held_credentials,
            "multikueue_removed_workers": multikueue.removed_workers,
            "drift_lines": drift.difference_lines,
            "gpu_operator_cluster_policy_fields": gpu_operator_values.cluster_policy_fields,
            "node_pool_gpu_nodes": cluster_spec.pool_gpu_nodes,
            "kustomize_tree": manifests.kustomize_tree,
            "mig_config_document": mig_nodes.config_document,
            "mig_config_name": mig_layout.fairgpu_config_name,
            "mig_config_result_errors": mig_result_errors,
            "gpu_operator_values_errors": gpu_operator_values.values_errors,
            "replay_tenant_queues": replay_schedule.tenant_queues,
        }
