# -*- coding: utf-8 -*-
# Copyright: fairgpu maintainers
# Apache License 2.0 (see LICENSE)
"""fairgpu's dashboard: GPU tenancy per tenant, from Kueue's and the DCGM exporter's metrics. Pure logic.

One definition, two standard formats. ``panels()`` and ``VARIABLES`` define the dashboard once (titles,
descriptions, units, PromQL, legends, layout); ``grafana_dashboard()`` emits it in Grafana's classic JSON model through
Grafana's Foundation SDK (PyPI ``grafana-foundation-sdk``, the build for Grafana's next release: ``schemaVersion`` 41,
which Grafana 12 and 13 load and migrate; importable through Dashboards > New > Import, or loaded by
kube-prometheus-stack's Grafana sidecar from the ConfigMap the monitoring role writes), and ``perses_dashboard()``
emits it as a Perses ``Dashboard`` resource (Perses v0.53 API, ``docs/api/dashboard.md``: panels of kind
``TimeSeriesChart`` with ``PrometheusTimeSeriesQuery`` queries, one ``Grid`` layout, a ``ListVariable`` of
``PrometheusLabelValuesVariable``). ``files/monitoring/fairgpu-dashboard.json`` and
``files/monitoring/fairgpu-dashboard.perses.json`` are their outputs, kept equal by ``tests/unit/test_dashboard.py``.
The SDK is needed only to write the files again (``requirements-test.txt``); nothing at run time imports it.

Variables: ``datasource`` (Grafana: any Prometheus data source; Perses: the dashboard's default Prometheus
datasource), ``cluster`` (multi-value, from the ``cluster`` label on Kueue's nominal quota; All is ``.*``, which also
matches series without the label: a Prometheus of one cluster that sets none) and ``tenant`` (multi-value, from Kueue's
``cluster_queue`` label within the clusters chosen: a tenant is the ClusterQueue named after it; All is ``.+``).
Every selector is filtered by ``cluster=~"$cluster"``, every aggregation keeps ``cluster`` and every legend starts
with it, so the series of two clusters in one Prometheus (a MultiKueue manager's federation of its workers,
``objects.local_prometheus_config``) are never summed: the same ClusterQueue name on two clusters is two lines.
DCGM series are filtered on the ``tenant`` label the scrape adds (see
``monitoring.tenant_relabelings``) and attributed to pods through ``exported_namespace`` and ``exported_pod``
(honor_labels false). Units: GPU memory in MiB, utilisation as a ratio shown in percent, GPUs and workloads as
counts, admissions, preemptions and evictions per second.

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
# The cluster variable's matcher, on every selector of every panel.
IN_CLUSTER = 'cluster=~"$cluster"'
# GPU devices the DCGM exporter attributes to each tenant's pods, each (pod, GPU, MIG instance) once (as the alert
# FairgpuTenantGpusOutsideKueue counts them), per cluster.
HELD_BY_PODS = ('count by (cluster, tenant) (group by (cluster, tenant, exported_namespace, exported_pod, UUID, '
                'GPU_I_ID) (DCGM_FI_DEV_FB_USED{%s, tenant=~"$tenant", exported_pod!=""}))' % IN_CLUSTER)
# Per device, how busy it is (ratio 0 to 1), with the fallback to GPU_UTIL where profiling metrics are missing.
UTILISATION = "fairgpu:gpu_utilisation:ratio"
# The alert a tenant above 90 % of its guarantee fires (files/monitoring/fairgpu-alerts.rules.yml).
OVER_GUARANTEE = "FairgpuTenantOverGuarantee"
# What the panels' queries mean for Grafana's own variables when run directly against Prometheus.
DIRECT_VARIABLES = {"cluster": ".*", "tenant": ".+", "__rate_interval": "1m", "__interval": "30s"}


# Each unit of the definition, as Grafana and Perses spell it. Perses has no MiB unit (bytes and decbytes only), so
# GPU memory is shown there as a plain number of MiB, the unit in the panel's title.
UNITS = {
    "count": ("short", "decimal"),
    "per_second": ("ops", "ops/sec"),
    "mib": ("mbytes", "decimal"),
    "ratio": ("percentunit", "percent-decimal"),
}


def _panel(panel_id, title, description, unit, targets, x, y, w=12, h=8, stack=False):
    """One panel of the definition: a time series chart of ``targets`` (``(PromQL, legend)`` pairs, the legend in
    Grafana's ``{{label}}`` syntax), ``unit`` a key of ``UNITS``, placed on a 24-column grid at ``x``, ``y`` (width
    ``w``, height ``h`` in grid rows of 30 px), stacked when ``stack``."""
    if unit not in UNITS:
        raise ValueError("panel %r: unit %r is none of %s" % (title, unit, sorted(UNITS)))
    return {"id": panel_id, "title": title, "description": description, "unit": unit, "x": x, "y": y, "w": w,
            "h": h, "stack": stack,
            "targets": [{"expr": expr, "legend": legend, "ref": chr(ord("A") + i)}
                        for i, (expr, legend) in enumerate(targets)]}


def panels():
    """The panels, top to bottom: Kueue's view of each tenant first, then the GPUs (DCGM). Every legend starts with
    the series' cluster."""
    t = '%s, cluster_queue=~"$tenant", replica_role!="follower"' % IN_CLUSTER
    return [
        _panel(1, "GPUs held vs guaranteed per tenant",
               "Kueue: devices reserved by the tenant's admitted workloads (held) against its nominal quota "
               "(guaranteed). Above the guarantee it borrows idle GPUs of the cohort.", "count",
               [("sum by (cluster, cluster_queue) (kueue_cluster_queue_resource_reservation{%s, %s})"
                 % (t, GPU_RESOURCES), "{{cluster}} {{cluster_queue}} held"),
                ("sum by (cluster, cluster_queue) (kueue_cluster_queue_nominal_quota{%s, %s})" % (t, GPU_RESOURCES),
                 "{{cluster}} {{cluster_queue}} guaranteed")], 0, 0),
        _panel(2, "Pending workloads per tenant",
               "Kueue: workloads waiting for quota (active: in the queue; inadmissible: waiting for a change).",
               "count", [("sum by (cluster, cluster_queue, status) (kueue_pending_workloads{%s})" % t,
                          "{{cluster}} {{cluster_queue}} {{status}}")], 12, 0, stack=True),
        _panel(3, "Admissions per tenant", "Kueue: workloads admitted per second.", "per_second",
               [("sum by (cluster, cluster_queue) (rate(kueue_admitted_workloads_total{%s}[$__rate_interval]))" % t,
                 "{{cluster}} {{cluster_queue}}")], 0, 8, w=6),
        _panel(4, "Preemptions by preempting tenant",
               "Kueue: workloads preempted per second, by the ClusterQueue that preempted and the reason "
               "(InCohortReclamation: an owner took back its guarantee).", "per_second",
               [("sum by (cluster, preempting_cluster_queue, reason) (rate(kueue_preempted_workloads_total"
                 "{%s, preempting_cluster_queue=~\"$tenant\", replica_role!=\"follower\"}[$__rate_interval]))"
                 % IN_CLUSTER, "{{cluster}} {{preempting_cluster_queue}} {{reason}}")], 6, 8, w=6),
        _panel(5, "Evictions per tenant", "Kueue: workloads evicted per second, by reason.", "per_second",
               [("sum by (cluster, cluster_queue, reason) (rate(kueue_evicted_workloads_total{%s}[$__rate_interval]))"
                 % t, "{{cluster}} {{cluster_queue}} {{reason}}")], 12, 8, w=6),
        _panel(6, "Over-guarantee alert per tenant",
               "Prometheus: 1 while %s is pending (the tenant holds more than 90%% of its guarantee, its for: not "
               "yet over) or firing, by tenant and state; no series while it is inactive." % OVER_GUARANTEE,
               "count", [("max by (cluster, tenant, alertstate) (ALERTS{alertname=\"%s\", %s, tenant=~\"$tenant\"})"
                          % (OVER_GUARANTEE, IN_CLUSTER), "{{cluster}} {{tenant}} {{alertstate}}")], 18, 8, w=6),
        _panel(7, "GPU memory per pod and device (MiB)",
               "DCGM: framebuffer memory used by each pod on the GPU or MIG device it is bound to (MiB), with the "
               "device: each pod on its own GPU or MIG instance.", "mib",
               [("max by (cluster, Hostname, gpu, GPU_I_PROFILE, GPU_I_ID, exported_namespace, exported_pod) "
                 "(DCGM_FI_DEV_FB_USED{%s, tenant=~\"$tenant\", exported_pod!=\"\"})" % IN_CLUSTER,
                 "{{cluster}} {{exported_namespace}}/{{exported_pod}} on {{Hostname}} GPU {{gpu}} {{GPU_I_PROFILE}} "
                 "{{GPU_I_ID}}")], 0, 16),
        _panel(8, "GPU utilisation per GPU and MIG device, with its pod",
               "DCGM: how busy every device is, a whole GPU or a MIG instance, and the pod bound to it (idle: "
               "none): the graphics engine active ratio (DCGM_FI_PROF_GR_ENGINE_ACTIVE) where the exporter has "
               "profiling metrics, else GPU_UTIL / 100 (recording rule %s). A MIG instance without profiling "
               "metrics has no value (GPU_UTIL has none for MIG)." % UTILISATION, "ratio",
               [("avg by (cluster, Hostname, gpu, GPU_I_PROFILE, GPU_I_ID, bound_to) (label_replace(label_join("
                 "%s{%s}, \"bound_to\", \"/\", \"exported_namespace\", \"exported_pod\"), \"bound_to\", \"idle\", "
                 "\"bound_to\", \"/\"))" % (UTILISATION, IN_CLUSTER),
                 "{{cluster}} {{Hostname}} GPU {{gpu}} {{GPU_I_PROFILE}} {{GPU_I_ID}} {{bound_to}}")], 12, 16),
        _panel(9, "GPU utilisation per job",
               "DCGM: utilisation (%s: graphics engine active ratio, or GPU_UTIL / 100 where profiling "
               "metrics are missing) averaged over the devices of each job's pods (the job is the pod name without "
               "its last part)." % UTILISATION, "ratio",
               [("avg by (cluster, tenant, exported_namespace, job_name) (label_replace("
                 "%s{%s, tenant=~\"$tenant\", exported_pod!=\"\"}, "
                 "\"job_name\", \"$1\", \"exported_pod\", \"(.+)-[^-]+\"))" % (UTILISATION, IN_CLUSTER),
                 "{{cluster}} {{exported_namespace}}/{{job_name}}")], 0, 24, w=24),
        _panel(10, "GPUs outside Kueue per tenant",
               "GPU devices (whole GPUs and MIG instances, one each) the DCGM exporter attributes to the tenant's "
               "pods, against the devices Kueue reserved for its ClusterQueue, and the excess: GPUs its pods hold "
               "outside Kueue's accounting. An excess for a minute or two while preempted pods terminate is normal; "
               "FairgpuTenantGpusOutsideKueue fires when the pods hold more than the most Kueue reserved in the last "
               "5 minutes, for 2 minutes.", "count",
               [(HELD_BY_PODS, "{{cluster}} {{tenant}} held by its pods (DCGM)"),
                ("sum by (cluster, cluster_queue) (max by (cluster, cluster_queue, flavor, resource) "
                 "(kueue_cluster_queue_resource_reservation{%s, %s}))" % (t, GPU_RESOURCES),
                 "{{cluster}} {{cluster_queue}} accounted by Kueue"),
                ("clamp_min(%s - on (cluster, tenant) (sum by (cluster, tenant) (label_replace(max by (cluster, "
                 "cluster_queue, flavor, resource) (kueue_cluster_queue_resource_reservation{%s, %s}), \"tenant\", "
                 "\"$1\", \"cluster_queue\", \"(.+)\")) or 0 * %s), 0)"
                 % (HELD_BY_PODS, t, GPU_RESOURCES, HELD_BY_PODS),
                 "{{cluster}} {{tenant}} outside Kueue")], 0, 32, w=24),
        _panel(11, "GPU capacity: guaranteed vs offered by Ready nodes",
               "Per GPU resource (spelled as kube-state-metrics spells it: nvidia_com_gpu), the devices every "
               "ClusterQueue is guaranteed (nominal quotas, all tenants) against the allocatable devices of the "
               "nodes whose Ready condition is True (kube-state-metrics). A node NotReady or deleted lowers the "
               "offer; below the guarantees, Kueue still admits up to them and the excess waits for GPUs that are "
               "gone (FairgpuGuaranteesOverCapacity). Not filtered by tenant.", "count",
               [("fairgpu:gpu_nominal_quota:sum{%s}" % IN_CLUSTER, "{{cluster}} {{resource}} guaranteed"),
                ("fairgpu:gpu_allocatable_ready:sum{%s}" % IN_CLUSTER,
                 "{{cluster}} {{resource}} offered by Ready nodes")],
               0, 40, w=24),
    ]


TITLE = "fairgpu: GPU tenancy"
DESCRIPTION = ("GPUs held against each tenant's guarantee, queues, admissions, preemptions and evictions (Kueue), the "
               "over-guarantee alert (Prometheus), GPU memory and utilisation per pod, device, MIG instance and job "
               "(DCGM exporter).")
TAGS = ["fairgpu", "gpu", "kueue", "dcgm"]
# The cluster variable: the values of the cluster label on Kueue's nominal quota (one per cluster whose Kueue this
# Prometheus holds), several at once; All is ".*", which also matches series without a cluster label (a Prometheus
# of one cluster that sets none: kube-prometheus-stack's default), so the dashboard works there as before.
CLUSTER_LABEL = ("kueue_cluster_queue_nominal_quota", "cluster")
CLUSTER_ALL = ".*"
# The tenant variable: the values of Kueue's cluster_queue label on the nominal quota (a tenant is the ClusterQueue
# named after it) within the clusters chosen, several at once, All meaning any.
TENANT_LABEL = ('kueue_cluster_queue_nominal_quota{%s}' % IN_CLUSTER, "cluster_queue")
TENANT_ALL = ".+"
REFRESH = "10s"
TIME_RANGE = "1h"


def queries():
    """Every panel query of the definition: a list of ``(panel title, refId, expr)``."""
    return [(p["title"], t["ref"], t["expr"]) for p in panels() for t in p["targets"]]


def _grafana_sdk():
    try:
        from grafana_foundation_sdk.builders import common as common_builders
        from grafana_foundation_sdk.builders import dashboard as dashboard_builders
        from grafana_foundation_sdk.builders import prometheus, timeseries
        from grafana_foundation_sdk.cog.encoder import JSONEncoder
        from grafana_foundation_sdk.models import common as common_models
        from grafana_foundation_sdk.models import dashboard as dashboard_models
        from grafana_foundation_sdk.models import prometheus as prometheus_models
    except ImportError:
        raise ImportError("writing the Grafana dashboard needs Grafana's Foundation SDK: pip install -r "
                          "requirements-test.txt (grafana-foundation-sdk)")
    return (common_builders, dashboard_builders, prometheus, timeseries, JSONEncoder, common_models,
            dashboard_models, prometheus_models)


def grafana_dashboard():
    """The dashboard as a dict in Grafana's classic JSON model, built with Grafana's Foundation SDK.

    Raises ImportError naming the package when the SDK is not installed."""
    cb, db, prometheus, timeseries, encoder, cm, dm, pm = _grafana_sdk()
    source = dm.DataSourceRef(type_val="prometheus", uid="${datasource}")
    board = (db.Dashboard(TITLE).uid(UID).tags(TAGS).description(DESCRIPTION).editable()
             .tooltip(dm.DashboardCursorSync.CROSSHAIR).timezone("browser").refresh(REFRESH)
             .time("now-" + TIME_RANGE, "now").version(1)
             .with_variable(db.DatasourceVariable("datasource").label("Data source").type("prometheus"))
             .with_variable(db.QueryVariable("cluster").label("Cluster").datasource(source)
                            .query("label_values(%s, %s)" % CLUSTER_LABEL).multi(True).include_all(True)
                            .all_value(CLUSTER_ALL).refresh(dm.VariableRefresh.ON_TIME_RANGE_CHANGED)
                            .sort(dm.VariableSort.ALPHABETICAL_ASC))
             .with_variable(db.QueryVariable("tenant").label("Tenant").datasource(source)
                            .query("label_values(%s, %s)" % TENANT_LABEL).multi(True).include_all(True)
                            .all_value(TENANT_ALL).refresh(dm.VariableRefresh.ON_TIME_RANGE_CHANGED)
                            .sort(dm.VariableSort.ALPHABETICAL_ASC)))
    for panel in panels():
        chart = (timeseries.Panel().id(panel["id"]).title(panel["title"]).description(panel["description"])
                 .datasource(source).grid_pos(dm.GridPos(h=panel["h"], w=panel["w"], x=panel["x"], y=panel["y"]))
                 .unit(UNITS[panel["unit"]][0]).min(0)
                 .draw_style(cm.GraphDrawStyle.LINE).line_width(2).fill_opacity(10 if panel["stack"] else 0)
                 .show_points(cm.VisibilityMode.NEVER).span_nulls(False)
                 .stacking(cb.StackingConfig().mode(cm.StackingMode.NORMAL if panel["stack"] else cm.StackingMode.NONE)
                           .group("A"))
                 .legend(cb.VizLegendOptions().display_mode(cm.LegendDisplayMode.TABLE)
                         .placement(cm.LegendPlacement.BOTTOM).calcs(["lastNotNull", "max"]).show_legend(True))
                 .tooltip(cb.VizTooltipOptions().mode(cm.TooltipDisplayMode.MULTI).sort(cm.SortOrder.DESCENDING)))
        for target in panel["targets"]:
            chart = chart.with_target(prometheus.Dataquery().datasource(source).expr(target["expr"])
                                      .legend_format(target["legend"]).ref_id(target["ref"]).range()
                                      .editor_mode(pm.QueryEditorMode.CODE))
        board = board.with_panel(chart)
    return json.loads(encoder(sort_keys=True).encode(board.build()))


def grafana_json():
    """The Grafana dashboard file's text: indented JSON with sorted keys and a final newline."""
    return json.dumps(grafana_dashboard(), indent=2, sort_keys=True) + "\n"


def perses_dashboard(project="fairgpu"):
    """The dashboard as a Perses ``Dashboard`` resource (a dict) in ``project``. It names no datasource: its panels
    and variable use the Perses instance's default Prometheus datasource (of the project, or global), which the
    dashboard page provides as its run's Prometheus. The legend's values are the last number and the largest (Grafana's
    lastNotNull and max); Perses's seriesNameFormat takes Grafana's legend syntax ({{label}}) as it is."""
    items, charts = [], {}
    for panel in panels():
        key = "panel%d" % panel["id"]
        charts[key] = {"kind": "Panel", "spec": {
            "display": {"name": panel["title"], "description": panel["description"]},
            "plugin": {"kind": "TimeSeriesChart", "spec": {
                "legend": {"position": "bottom", "mode": "table", "values": ["last-number", "max"]},
                "yAxis": {"format": {"unit": UNITS[panel["unit"]][1]}, "min": 0},
                "visual": {"display": "line", "lineWidth": 2, "areaOpacity": 0.1 if panel["stack"] else 0,
                           "stack": "all" if panel["stack"] else "none", "connectNulls": False}}},
            "queries": [{"kind": "TimeSeriesQuery", "spec": {"plugin": {
                "kind": "PrometheusTimeSeriesQuery",
                "spec": {"query": t["expr"], "seriesNameFormat": t["legend"]}}}}
                for t in panel["targets"]]}}
        items.append({"x": panel["x"], "y": panel["y"], "width": panel["w"], "height": panel["h"],
                      "content": {"$ref": "#/spec/panels/%s" % key}})
    spec = {
        "display": {"name": TITLE, "description": DESCRIPTION},
        "duration": TIME_RANGE, "refreshInterval": REFRESH,
        "variables": [_perses_list_variable("cluster", "Cluster", CLUSTER_LABEL, CLUSTER_ALL),
                      _perses_list_variable("tenant", "Tenant", TENANT_LABEL, TENANT_ALL)],
        "panels": charts,
        "layouts": [{"kind": "Grid", "spec": {"items": items}}],
    }
    return {"kind": "Dashboard", "metadata": {"name": UID, "project": project}, "spec": spec}


def _perses_list_variable(name, title, label, all_value):
    """A Perses ``ListVariable`` of the values of ``label`` (``(series selector, label name)``), several at once,
    All (the default) written as ``all_value``. The plugin fills the dashboard's variables into its matchers and
    makes the variable depend on those it names (@perses-dev/prometheus-plugin 0.53.4, PrometheusLabelValuesVariable
    ``getVariableOptions``: ``replaceVariables`` on each matcher; ``dependsOn``), so the tenant's ``$cluster``
    follows the cluster variable."""
    return {"kind": "ListVariable", "spec": {
        "name": name, "display": {"name": title, "hidden": False},
        "allowAllValue": True, "allowMultiple": True, "customAllValue": all_value, "defaultValue": "$__all",
        "sort": "alphabetical-asc",
        "plugin": {"kind": "PrometheusLabelValuesVariable", "spec": {"labelName": label[1], "matchers": [label[0]]}}}}


def perses_json():
    """The Perses dashboard file's text: indented JSON with sorted keys and a final newline."""
    return json.dumps(perses_dashboard(), indent=2, sort_keys=True) + "\n"


def direct_query(expr, variables=None):
    """``expr`` with Grafana's variables (``$name``, ``${name}``) replaced by ``variables`` (default
    ``DIRECT_VARIABLES``), for Prometheus's HTTP API. Raises KeyError naming a variable it does not know."""
    values = dict(DIRECT_VARIABLES, **(variables or {}))

    def value(match):
        return values[match.group(1) or match.group(2)]

    return re.sub(r"\$\{([A-Za-z_]\w*)\}|\$([A-Za-z_]\w*)", value, expr)
