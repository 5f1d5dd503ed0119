# -*- coding: utf-8 -*-
# Copyright: fairgpu maintainers
# Apache License 2.0 (see LICENSE)
"""Jinja2 filters of fairgpu.tenancy: thin wrappers over the pure logic in plugins/module_utils."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.fairgpu.tenancy.plugins.module_utils import (
    cluster_spec,
    kueue_webhooks,
    manifests,
    quota,
    tenant_plan,
    tenant_spec,
    validation,
)


class FilterModule(object):
    def filters(self):
        return {
            "node_pool_errors": cluster_spec.node_pool_errors,
            "node_pool_nodes": cluster_spec.node_pool_nodes,
            "node_pool_gpus": cluster_spec.total_gpus,
            "ready_node_names": cluster_spec.ready_node_names,
            "kueue_local_webhooks": kueue_webhooks.local_webhook_configurations,
            "tenant_plan": tenant_plan.tenant_plan,
            "tenant_errors": tenant_spec.tenant_errors,
            "node_pool_capacity": cluster_spec.pool_capacity,
            "node_pool_gpu_nodes": cluster_spec.pool_gpu_nodes,
            "kustomize_tree": manifests.kustomize_tree,
            "tenant_reachable": quota.reachable,
            "load_jobs": validation.load_jobs,
            "baseline_result": validation.baseline_result,
            "flood_result": validation.flood_result,
        }
