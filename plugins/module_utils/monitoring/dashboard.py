# -*- coding: utf-8 -*-
# Copyright: fairgpu maintainers
# Apache License 2.0 (see LICENSE)
"""fairgpu's Grafana dashboard: GPU tenancy per tenant, from Kueue's and the DCGM exporter's metrics. Pure logic.

``dashboard()`` builds the dashboard in Grafana's classic JSON model (``schemaVersion`` 42, what Grafana 12 and 13
export; importable through Dashboards > New > Import, or loaded by kube-prometheus-stack's Grafana sidecar from
the ConfigMap the monitoring role writes). ``files/monitoring/fairgpu-dashboard.json`` is its output, kept equal
by ``tests/unit/test_dashboard.py``.

Variables: ``datasource`` (any Prometheus data source) and ``tenant`` (multi-value, from Kueue's
``cluster_queue`` label: a tenant is the ClusterQueue named after it; All is ``.+``). DCGM series are filtered on
the ``tenant`` label the scrape adds (see ``monitoring.tenant_relabelings``) and attributed to pods through
``exported_namespace`` and ``exported_pod`` (honor_labels false). Units: GPU memory in MiB, utilisation as a
ratio shown in percent, GPUs and workloads as counts, admissions, preemptions and evictions per second.

Utilisation is read from the recording rule ``fairgpu:gpu_utilisation:ratio`` (``files/monitoring/
fairgpu-alerts.rules.yml``, loaded in both monitoring modes): ``DCGM_FI_PROF_GR_ENGINE_ACTIVE`` (ratio 0 to 1) where
the exporter publishes it, else ``DCGM_FI_DEV_GPU_UTIL`` / 100 (percent), chosen per GPU UUID. Profiling fields are
not among dcgm-exporter's default counters (NVIDIA/dcgm-exporter ``etc/default-counters.csv``) and are missing on
GPUs or set-ups without profiling (NVIDIA/dcgm-exporter#395, #439, #707), where panels reading them alone go empty.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import re

UID = "fairgpu-gpu-tenancy"
GPU_RESOURCES = 'resource=~"nvidia.com/gpu|nvidia.com/mig-.+"'
# GPU devices the DCGM exporter attributes to each tenant's pods, each (pod, GPU, MIG instance) once (as the alert
# FairgpuTenantGpusOutsideKueue counts them).
HELD_BY_PODS = ('count by (tenant) (group by (tenant, exported_namespace, exported_pod, UUID, GPU_I_ID) '
                '(DCGM_FI_DEV_FB_USED{tenant=~"$tenant", exported_pod!=""}))')
# Per device, how busy it is (ratio 0 to 1), with the fallback to GPU_UTIL where profiling metrics are missing.
UTILISATION = "fairgpu:gpu_utilisation:ratio"
# What the panels' queries mean for Grafana's own variables when run directly against Prometheus.
DIRECT_VARIABLES = {"tenant": ".+", "__rate_interval": "1m", "__interval": "30s"}


def _target(expr, legend, ref):
    return {"datasource": {"type": "prometheus", "uid": "${datasource}"}, "expr": expr, "legendFormat": legend,
            "refId": ref, "range": True, "instant": False, "editorMode": "code"}


def _panel(panel_id, title, description, unit, targets, x, y, w=12, h=8, stack=False):
    custom = {"drawStyle": "line", "lineWidth": 2, "fillOpacity": 10 if stack else 0, "showPoints": "never",
              "spanNulls": False, "stacking": {"mode": "normal" if stack else "none", "group": "A"}}
    return {
        "id": panel_id, "type": "timeseries", "title": title, "description": description,
        "datasource": {"type": "prometheus", "uid": "${datasource}"},
        "gridPos": {"h": h, "w": w, "x": x, "y": y},
        "fieldConfig": {"defaults": {"unit": unit, "min": 0, "custom": custom}, "overrides": []},
        "options": {"legend": {"displayMode": "table", "placement": "bottom", "calcs": ["lastNotNull", "max"],
                               "showLegend": True},
                    "tooltip": {"mode": "multi", "sort": "desc"}},
        "targets": [_target(expr, legend, chr(ord("A") + i)) for i, (expr, legend) in enumerate(targets)],
    }


def panels():
    """The panels, top to bottom: Kueue's view of each tenant first, then the GPUs (DCGM)."""
    t = 'cluster_queue=~"$tenant", replica_role!="follower"'
    return [
        _panel(1, "GPUs held vs guaranteed per tenant",
               "Kueue: devices reserved by the tenant's admitted workloads (held) against its nominal quota "
               "(guaranteed). Above the guarantee it borrows idle GPUs of the cohort.", "short",
               [("sum by (cluster_queue) (kueue_cluster_queue_resource_reservation{%s, %s})" % (t, GPU_RESOURCES),
                 "{{cluster_queue}} held"),
                ("sum by (cluster_queue) (kueue_cluster_queue_nominal_quota{%s, %s})" % (t, GPU_RESOURCES),
                 "{{cluster_queue}} guaranteed")], 0, 0),
        _panel(2, "Pending workloads per tenant",
               "Kueue: workloads waiting for quota (active: in the queue; inadmissible: waiting for a change).",
               "short", [("sum by (cluster_queue, status) (kueue_pending_workloads{%s})" % t,
                          "{{cluster_queue}} {{status}}")], 12, 0, stack=True),
        _panel(3, "Admissions per tenant", "Kueue: workloads admitted per second.", "ops",
               [("sum by (cluster_queue) (rate(kueue_admitted_workloads_total{%s}[$__rate_interval]))" % t,
                 "{{cluster_queue}}")], 0, 8, w=8),
        _panel(4, "Preemptions by preempting tenant",
               "Kueue: workloads preempted per second, by the ClusterQueue that preempted and the reason "
               "(InCohortReclamation: an owner took back its guarantee).", "ops",
               [("sum by (preempting_cluster_queue, reason) (rate(kueue_preempted_workloads_total"
                 "{preempting_cluster_queue=~\"$tenant\", replica_role!=\"follower\"}[$__rate_interval]))",
                 "{{preempting_cluster_queue}} {{reason}}")], 8, 8, w=8),
        _panel(5, "Evictions per tenant", "Kueue: workloads evicted per second, by reason.", "ops",
               [("sum by (cluster_queue, reason) (rate(kueue_evicted_workloads_total{%s}[$__rate_interval]))" % t,
                 "{{cluster_queue}} {{reason}}")], 16, 8, w=8),
        _panel(6, "GPU memory per pod", "DCGM: framebuffer memory used by each pod on its GPU or MIG slice (MiB).",
               "decmbytes",
               [("sum by (tenant, exported_namespace, exported_pod) "
                 "(DCGM_FI_DEV_FB_USED{tenant=~\"$tenant\", exported_pod!=\"\"})",
                 "{{exported_namespace}}/{{exported_pod}}")], 0, 16),
        _panel(7, "GPU utilisation per GPU and MIG slice",
               "DCGM: how busy every device is, a whole GPU or a MIG slice: the graphics engine active ratio "
               "(DCGM_FI_PROF_GR_ENGINE_ACTIVE) where the exporter has profiling metrics, else GPU_UTIL / 100 "
               "(recording rule %s). A MIG slice without profiling metrics has no value (GPU_UTIL has none for "
               "MIG)." % UTILISATION, "percentunit",
               [("avg by (Hostname, gpu, GPU_I_PROFILE, GPU_I_ID) (%s)" % UTILISATION,
                 "{{Hostname}} GPU {{gpu}} {{GPU_I_PROFILE}} {{GPU_I_ID}}")], 12, 16),
        _panel(8, "GPU utilisation per job",
               "DCGM: utilisation (%s: graphics engine active ratio, or GPU_UTIL / 100 where profiling "
               "metrics are missing) averaged over the devices of each job's pods (the job is the pod name without "
               "its last part)." % UTILISATION, "percentunit",
               [("avg by (tenant, exported_namespace, job_name) (label_replace("
                 "%s{tenant=~\"$tenant\", exported_pod!=\"\"}, "
                 "\"job_name\", \"$1\", \"exported_pod\", \"(.+)-[^-]+\"))" % UTILISATION,
                 "{{exported_namespace}}/{{job_name}}")], 0, 24, w=24),
        _panel(9, "GPUs outside Kueue per tenant",
               "GPU devices (whole GPUs and MIG instances, one each) the DCGM exporter attributes to the tenant's "
               "pods, against the devices Kueue reserved for its ClusterQueue, and the excess: GPUs its pods hold "
               "outside Kueue's accounting. An excess for a minute or two while preempted pods terminate is normal; "
               "FairgpuTenantGpusOutsideKueue fires when the pods hold more than the most Kueue reserved in the last "
               "5 minutes, for 2 minutes.", "short",
               [(HELD_BY_PODS, "{{tenant}} held by its pods (DCGM)"),
                ("sum by (cluster_queue) (max by (cluster_queue, flavor, resource) "
                 "(kueue_cluster_queue_resource_reservation{%s, %s}))" % (t, GPU_RESOURCES),
                 "{{cluster_queue}} accounted by Kueue"),
                ("clamp_min(%s - on (tenant) (sum by (tenant) (label_replace(max by (cluster_queue, flavor, resource) "
                 "(kueue_cluster_queue_resource_reservation{%s, %s}), \"tenant\", \"$1\", \"cluster_queue\", \"(.+)\")) "
                 "or 0 * %s), 0)" % (HELD_BY_PODS, t, GPU_RESOURCES, HELD_BY_PODS),
                 "{{tenant}} outside Kueue")], 0, 32, w=24),
        _panel(10, "GPU capacity: guaranteed vs offered by Ready nodes",
               "Per GPU resource (spelled as kube-state-metrics spells it: nvidia_com_gpu), the devices every "
               "ClusterQueue is guaranteed (nominal quotas, all tenants) against the allocatable devices of the "
               "nodes whose Ready condition is True (kube-state-metrics). A node NotReady or deleted lowers the "
               "offer; below the guarantees, Kueue still admits up to them and the excess waits for GPUs that are "
               "gone (FairgpuGuaranteesOverCapacity). Not filtered by tenant.", "short",
               [("fairgpu:gpu_nominal_quota:sum", "{{resource}} guaranteed"),
                ("fairgpu:gpu_allocatable_ready:sum", "{{resource}} offered by Ready nodes")], 0, 40, w=24),
    ]


def dashboard():
    """The dashboard as a dict (Grafana classic JSON model)."""
    return {
        "uid": UID, "title": "fairgpu: GPU tenancy", "tags": ["fairgpu", "gpu", "kueue", "dcgm"],
        "description": "GPUs held against each tenant's guarantee, queues, admissions, preemptions and evictions "
                       "(Kueue), GPU memory and utilisation per pod, job and MIG slice (DCGM exporter).",
        "editable": True, "graphTooltip": 1, "timezone": "browser", "schemaVersion": 42, "version": 1,
        "refresh": "10s", "time": {"from": "now-1h", "to": "now"}, "links": [], "annotations": {"list": []},
        "templating": {"list": [
            {"name": "datasource", "label": "Data source", "type": "datasource", "query": "prometheus",
             "current": {}, "hide": 0, "refresh": 1, "regex": "", "options": []},
            {"name": "tenant", "label": "Tenant", "type": "query",
             "datasource": {"type": "prometheus", "uid": "${datasource}"},
             "definition": "label_values(kueue_cluster_queue_nominal_quota, cluster_queue)",
             "query": {"query": "label_values(kueue_cluster_queue_nominal_quota, cluster_queue)",
                       "refId": "PrometheusVariableQueryEditor-VariableQuery", "qryType": 1},
             "multi": True, "includeAll": True, "allValue": ".+", "current": {}, "hide": 0, "refresh": 2,
             "regex": "", "sort": 1, "options": []},
        ]},
        "panels": panels(),
    }


def dashboard_json():
    """The dashboard file's text: the dict as indented JSON with sorted keys and a final newline."""
    return json.dumps(dashboard(), indent=2, sort_keys=True) + "\n"


def queries(board):
    """Every panel query of a dashboard dict: a list of ``(panel title, refId, expr)``."""
    return [(p["title"], t["refId"], t["expr"]) for p in board["panels"] for t in p.get("targets", [])]


def direct_query(expr, variables=None):
    """``expr`` with Grafana's variables (``$name``, ``${name}``) replaced by ``variables`` (default
    ``DIRECT_VARIABLES``), for Prometheus's HTTP API. Raises KeyError naming a variable it does not know."""
    values = dict(DIRECT_VARIABLES, **(variables or {}))

    def value(match):
        return values[match.group(1) or match.group(2)]

    return re.sub(r"\$\{([A-Za-z_]\w*)\}|\$([A-Za-z_]\w*)", value, expr)
