# -*- coding: utf-8 -*-
# Copyright: fairgpu maintainers
# Apache License 2.0 (see LICENSE)
"""Jinja2 filters of fairgpu.tenancy's monitoring role: thin wrappers over plugins/module_utils/monitoring/objects.py."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.fairgpu.tenancy.plugins.module_utils.monitoring import objects as monitoring
from ansible_collections.fairgpu.tenancy.plugins.module_utils.monitoring.objects import MonitoringError
from ansible_collections.fairgpu.tenancy.plugins.module_utils.monitoring import placement as monitoring_placement


def _rules(rules_text, overrides=None):
    try:
        return monitoring.rules_with_for(rules_text, overrides or {})
    except monitoring.MonitoringError as exc:
        raise AnsibleFilterError(str(exc))


def _local_config(spec):
    """``objects.local_prometheus_config`` of ``spec``, a mapping of its arguments by name (``cluster``,
    ``kueue_target``, ``kueue_ca_file``, ``token_file``, ``dcgm_target``, ``rules_glob``, ``tenants``,
    ``scrape_interval``, ``evaluation_interval``, ``kueue_namespace``, ``dcgm_namespace``)."""
    try:
        return monitoring.local_prometheus_config(**spec)
    except MonitoringError as exc:
        raise AnsibleFilterError(str(exc))


def _helm_objects(tenants, spec, placement=None):
    """``objects.helm_objects`` of ``tenants`` with the monitoring role's ``spec`` (its monitoring_spec: rules_text,
    dashboard, namespace, release, labels, interval, kueue (namespace, service_labels, metrics_ca, server_name) and
    dcgm (namespace, service_labels)); ``placement``: ``placement.plan``'s, or None (render.yml places nothing)."""
    kueue, dcgm = spec["kueue"], spec["dcgm"]
    try:
        return monitoring.helm_objects(tenants, spec["rules_text"], spec["dashboard"], spec["namespace"], spec["release"],
                                       kueue["namespace"], kueue["service_labels"], dcgm["namespace"],
                                       dcgm["service_labels"], spec["interval"], kueue.get("metrics_ca"),
                                       kueue.get("server_name") or "", placement=placement, labels=spec.get("labels"))
    except MonitoringError as exc:
        raise AnsibleFilterError(str(exc))


def _placement(prometheuses, namespaces, spec, choice=None):
    """``placement.plan`` over the Prometheus objects and Namespace objects as k8s_info read them (``prometheuses``
    None: not known), with the role's ``spec`` (as ``_helm_objects``) and ``choice``: ``prometheus`` (the selecting
    Prometheus chosen by name, "" none), ``cross_namespace_rules`` (refuse or omit), ``created`` (``{namespace:
    labels}`` fairgpu gives the namespaces it creates)."""
    choice = choice or {}
    names = [spec["namespace"], spec["kueue"]["namespace"], spec["dcgm"]["namespace"]]
    try:
        return monitoring_placement.plan(
            prometheuses, monitoring_placement.namespace_labels(namespaces, names, choice.get("created")),
            spec["namespace"], spec["kueue"]["namespace"], spec["dcgm"]["namespace"],
            monitoring.object_labels(spec["release"], spec.get("labels")), spec["rules_text"],
            choice.get("prometheus") or "", choice.get("cross_namespace_rules") or "refuse")
    except monitoring_placement.PlacementError as exc:
        raise AnsibleFilterError(str(exc))


class FilterModule(object):
    def filters(self):
        return {
            "monitoring_rules": _rules,
            "monitoring_alert_errors": monitoring.alert_for_errors,
            "monitoring_duration_errors": monitoring.duration_errors,
            "monitoring_local_config": _local_config,
            "monitoring_helm_objects": _helm_objects,
            "monitoring_placement": _placement,
            "monitoring_kueue_tls_errors": monitoring.kueue_metrics_tls_errors,
            "monitoring_chart_values": monitoring.chart_values,
        }
