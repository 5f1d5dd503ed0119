# -*- coding: utf-8 -*-
# Copyright: fairgpu maintainers
# Apache License 2.0 (see LICENSE)
"""Jinja2 filters of fairgpu.tenancy's monitoring role: thin wrappers over plugins/module_utils/monitoring/objects.py."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.fairgpu.tenancy.plugins.module_utils.monitoring import objects as monitoring
from ansible_collections.fairgpu.tenancy.plugins.module_utils.monitoring.objects import MonitoringError


def _rules(rules_text, overrides=None):
    try:
        return monitoring.rules_with_for(rules_text, overrides or {})
    except monitoring.MonitoringError as exc:
        raise AnsibleFilterError(str(exc))


def _local_config(spec):
    """``objects.local_prometheus_config`` of ``spec``, a mapping of its arguments by name (``cluster``,
    ``kueue_target``, ``kueue_ca_file``, ``token_file``, ``dcgm_target``, ``rules_glob``, ``tenants``,
    ``scrape_interval``, ``evaluation_interval``, ``kueue_namespace``, ``dcgm_namespace``,
    ``kube_state_metrics_target``, ``monitoring_namespace``, ``federate``: a MultiKueue manager's workers'
    Prometheus, ``[{cluster, url}]``)."""
    try:
        return monitoring.local_prometheus_config(**spec)
    except MonitoringError as exc:
        raise AnsibleFilterError(str(exc))


class FilterModule(object):
    def filters(self):
        return {
            "monitoring_rules": _rules,
            "monitoring_alert_errors": monitoring.alert_for_errors,
            "monitoring_duration_errors": monitoring.duration_errors,
            "monitoring_local_config": _local_config,
            "monitoring_fleet_federation": monitoring.fleet_federation,
            "monitoring_kueue_tls_errors": monitoring.kueue_metrics_tls_errors,
            "monitoring_chart_values": monitoring.chart_values,
        }
