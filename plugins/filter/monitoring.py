# -*- coding: utf-8 -*-
# Copyright: fairgpu maintainers
# Apache License 2.0 (see LICENSE)
"""Jinja2 filters of fairgpu.tenancy's monitoring role: thin wrappers over plugins/module_utils/monitoring/objects.py."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.fairgpu.tenancy.plugins.module_utils.monitoring import objects as monitoring
from ansible_collections.fairgpu.tenancy.plugins.module_utils.monitoring import placement as monitoring_placement


def _rules(rules_text, overrides=None):
    try:
        return monitoring.rules_with_for(rules_text, overrides or {})
    except monitoring.MonitoringError as exc:
        raise AnsibleFilterError(str(exc))


def _local_config(cluster, **kwargs):
    try:
        return monitoring.local_prometheus_config(cluster, **kwargs)
    except monitoring.MonitoringError as exc:
        raise AnsibleFilterError(str(exc))


def _helm_objects(*args, **kwargs):
    try:
        return monitoring.helm_objects(*args, **kwargs)
    except monitoring.MonitoringError as exc:
        raise AnsibleFilterError(str(exc))


def _placement(prometheuses, namespaces, monitoring_namespace, kueue_namespace, dcgm_namespace, release, labels,
               rules_text, chosen="", cross="refuse", created=None):
    """placement.plan over the Prometheus objects and Namespace objects as k8s_info read them (``prometheuses``
    None: not known); ``created``: ``{namespace: labels}`` fairgpu gives the namespaces it creates."""
    try:
        names = [monitoring_namespace, kueue_namespace, dcgm_namespace]
        return monitoring_placement.plan(
            prometheuses, monitoring_placement.namespace_labels(namespaces, names, created), monitoring_namespace,
            kueue_namespace, dcgm_namespace, monitoring.object_labels(release, labels), rules_text, chosen, cross)
    except monitoring_placement.PlacementError as exc:
        raise AnsibleFilterError(str(exc))


class FilterModule(object):
    def filters(self):
        return {
            "monitoring_rules": _rules,
            "monitoring_alert_errors": monitoring.alert_for_errors,
            "monitoring_duration_errors": monitoring.duration_errors,
            "monitoring_alert_names": lambda text: sorted(monitoring.alerts(text)),
            "monitoring_alert_seconds": monitoring.alert_seconds,
            "monitoring_local_config": _local_config,
            "monitoring_helm_objects": _helm_objects,
            "monitoring_placement": _placement,
            "monitoring_kueue_tls_errors": monitoring.kueue_metrics_tls_errors,
            "monitoring_chart_values": monitoring.chart_values,
        }
