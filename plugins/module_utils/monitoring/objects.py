# -*- coding: utf-8 -*-
# Copyright: fairgpu maintainers
# Apache License 2.0 (see LICENSE)
"""The monitoring role's configuration: the alert rule file with per-alert ``for:`` overrides, the local
Prometheus's configuration (monitoring_mode local) and the kube-prometheus-stack objects (monitoring_mode helm).
Pure logic, no cluster access.

Both modes scrape the same way, so one rule file serves both:

- Kueue's metrics endpoint over HTTPS with the bearer token of a ServiceAccount that RBAC allows ``get`` on the
  non-resource URL ``/metrics`` (Kueue checks it with a TokenReview and a SubjectAccessReview), job ``kueue``. In
  helm mode the token comes from a Secret, never from a file in the Prometheus container (``helm_objects``).
- The DCGM exporter over HTTP with ``honor_labels: false``, job ``nvidia-dcgm-exporter``: the target's own
  ``namespace``, ``pod``, ``container`` labels (the exporter's, as a ServiceMonitor sets them) win, so the GPU's pod
  arrives as ``exported_namespace``, ``exported_pod``, ``exported_container``. A metric relabelling adds ``tenant``
  from the tenants' namespaces (``tenant_relabelings``).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.fairgpu.tenancy.plugins.module_utils.common import pyyaml
from ansible_collections.fairgpu.tenancy.plugins.module_utils.common.names import MANAGED_BY_LABEL, RBAC_API
from ansible_collections.fairgpu.tenancy.plugins.module_utils.monitoring import placement as placing

KUEUE_JOB = "kueue"
DCGM_JOB = "nvidia-dcgm-exporter"
# kube-prometheus-stack's job for kube-state-metrics (its ServiceMonitor keeps the exporter's labels: honorLabels).
KUBE_STATE_METRICS_JOB = "kube-state-metrics"
# The label that names the cluster a series comes from, on every series of the local Prometheus (a target label of
# every job) and its external label: series of several clusters can then sit in one Prometheus (a MultiKueue manager's
# federation of its workers, below) and the rules and the dashboard keep them apart.
CLUSTER_LABEL = "cluster"
# The MultiKueue manager's job that federates its workers' Prometheus (``local_prometheus_config`` ``federate``): one
# target per worker, the worker's Kueue series (job KUEUE_JOB) pulled from its ``/federate`` endpoint.
FLEET_JOB = "fairgpu-fleet"
# What a worker's /federate gives the manager: every series of the worker's Kueue job, its own ``up`` and scrape
# series included (Prometheus stores them as series of the job: prometheus.io/docs/concepts/jobs_instances,
# "Automatically generated labels and time series").
FLEET_MATCH = ['{job="%s"}' % KUEUE_JOB]
# Prometheus's duration syntax (model.ParseDuration), units in descending order, at least one.
DURATION_RE = re.compile(r"^(?!$)(\d+y)?(\d+w)?(\d+d)?(\d+h)?(\d+m)?(\d+s)?(\d+ms)?$")
_UNITS = {"y": 365 * 86400, "w": 7 * 86400, "d": 86400, "h": 3600, "m": 60, "s": 1, "ms": 0.001}


class MonitoringError(ValueError):
    """Raised for monitoring input that cannot be used; the message names the variable."""


def duration_seconds(text):
    """Seconds of a Prometheus duration (``5m``, ``1h30m``, ``45s``); raises MonitoringError for anything else."""
    text = str(text)
    if not DURATION_RE.match(text):
        raise MonitoringError("%r is not a Prometheus duration (such as 45s, 5m, 1h30m)" % text)
    return sum(int(n) * _UNITS[u] for n, u in re.findall(r"(\d+)(ms|[ywdhms])", text))


def alerts(rules_text):
    """``{alert name: for}`` of a rule file's text (``for`` is None when the alert has none)."""
    doc = pyyaml.require().safe_load(rules_text) or {}
    return {rule["alert"]: rule.get("for") for group in doc.get("groups") or [] for rule in group.get("rules") or []
            if "alert" in rule}


def duration_errors(values):
    """Messages for the entries of ``values`` (``{variable name: value}``) that are no Prometheus duration above 0."""
    errors = []
    for name, value in sorted(values.items()):
        try:
            if duration_seconds(value) <= 0:
                errors.append("%s: the duration must be above 0, got %r" % (name, value))
        except MonitoringError as exc:
            errors.append("%s: %s" % (name, exc))
    return errors


def alert_for_errors(rules_text, overrides, field="monitoring_alert_for"):
    """Messages for ``overrides`` (``{alert name: duration}``) that cannot apply to the rule file; [] when fine."""
    if not isinstance(overrides, dict):
        return ["%s: must be a mapping of alert name to duration, got %r" % (field, overrides)]
    known = alerts(rules_text)
    errors = []
    for name, value in sorted(overrides.items(), key=lambda kv: str(kv[0])):
        if name not in known:
            errors.append("%s.%s: no such alert in the rule file; known: %s" % (field, name, ", ".join(sorted(known))))
            continue
        try:
            if duration_seconds(value) <= 0:
                errors.append("%s.%s: the duration must be above 0, got %r" % (field, name, value))
        except MonitoringError as exc:
            errors.append("%s.%s: %s" % (field, name, exc))
        if known[name] is None:
            errors.append("%s.%s: the alert has no for: line to change" % (field, name))
    return errors


def rules_with_for(rules_text, overrides):
    """The rule file's text with the ``for:`` of each alert in ``overrides`` replaced, everything else (comments
    included) as written. Raises MonitoringError with ``alert_for_errors``'s messages."""
    errors = alert_for_errors(rules_text, overrides or {})
    if errors:
        raise MonitoringError("; ".join(errors))
    lines = rules_text.splitlines(True)
    current = None
    for index, line in enumerate(lines):
        start = re.match(r"^\s*-\s+(alert|record):\s*(\S+)\s*$", line)
        if start:
            current = start.group(2) if start.group(1) == "alert" else None
            continue
        found = re.match(r"^(\s*)for:\s*\S+\s*$", line)
        if found and current in (overrides or {}):
            lines[index] = "%sfor: %s\n" % (found.group(1), overrides[current])
    text = "".join(lines)
    result = alerts(text)
    missed = sorted(name for name, value in (overrides or {}).items() if result[name] != value)
    if missed:
        # The line-wise edit only knows "- alert: NAME" and "for: DURATION" lines; a rule written otherwise is refused.
        raise MonitoringError("; ".join("monitoring_alert_for.%s: the rule's for: is not written as 'for: DURATION' "
                                        "on a line of its own" % name for name in missed))
    return text


def tenant_namespaces(tenants):
    """``{namespace: tenant}`` of normalised tenants (``name``, ``namespaces``)."""
    return {ns: t["name"] for t in tenants for ns in t.get("namespaces") or [t["name"]]}


def tenant_relabelings(tenants, style="prometheus", source="exported_namespace"):
    """Metric relabellings that set ``tenant`` on DCGM series from the pod's namespace (``source``): one rule per
    tenant. ``style``: ``prometheus`` (metric_relabel_configs keys) or ``operator`` (ServiceMonitor
    metricRelabelings keys)."""
    by_tenant = {}
    for namespace, tenant in sorted(tenant_namespaces(tenants).items()):
        by_tenant.setdefault(tenant, []).append(namespace)  # DNS labels: no regex metacharacters
    rules = []
    for tenant, namespaces in sorted(by_tenant.items()):
        rule = {"source_labels": [source], "regex": "|".join(namespaces), "target_label": "tenant",
                "replacement": tenant, "action": "replace"}
        if style == "operator":
            rule = {"sourceLabels": rule["source_labels"], "regex": rule["regex"], "targetLabel": "tenant",
                    "replacement": tenant, "action": "replace"}
        rules.append(rule)
    return rules


def local_prometheus_config(cluster, kueue_target, kueue_ca_file, token_file, dcgm_target, rules_glob, tenants,
                            scrape_interval="5s", evaluation_interval="5s", kueue_namespace="kueue-system",
                            dcgm_namespace="gpu-operator", kube_state_metrics_target=None,
                            monitoring_namespace="fairgpu-monitoring", federate=()):
    """The local Prometheus's configuration (a dict for prometheus.yml).

    ``kueue_target``, ``dcgm_target``, ``kube_state_metrics_target`` (None: not scraped): ``host:port``;
    ``kueue_ca_file``: the CA that signed Kueue's metrics certificate; ``token_file``: the ServiceAccount token file;
    ``rules_glob``: rule files to load. Target labels are those a ServiceMonitor gives (namespace, service, pod,
    container, endpoint), so the series look as in a cluster; kube-state-metrics is scraped with honor_labels as
    kube-prometheus-stack's ServiceMonitor does, its series keeping their own ``node`` and ``namespace``.

    Every job's targets carry ``cluster: <cluster>`` (CLUSTER_LABEL; also the external label), so every series this
    Prometheus scrapes names its cluster. A scraped label of that name gives way to it where the job does not honor
    labels (Prometheus's ``honor_labels: false``: "renaming conflicting labels in the scraped data to
    exported_<original-label>", docs/configuration/configuration.md): Kueue's MultiKueue counters
    ``multikueue_workloads_dispatched_total`` and ``multikueue_workloads_admitted_total`` name the worker as ``cluster``
    (sigs.k8s.io/kueue v0.19.2 pkg/metrics/metrics.go), which arrives as ``exported_cluster``.

    ``federate`` (a MultiKueue manager): ``[{"cluster": worker name, "url": "http://127.0.0.1:PORT"}]``, the workers'
    own Prometheus. One job FLEET_JOB scrapes each one's ``/federate`` for the series of FLEET_MATCH (its Kueue job),
    with ``honor_labels: true``, as Prometheus's federation documentation configures it ("to not overwrite any labels
    exposed by the source server", docs/federation.md "Configuring federation"): the worker's series keep their own
    ``job="kueue"``, ``instance`` and ``cluster="<worker>"``, so the manager's rules and dashboard see the fleet's
    Kueue series side by side, its own among them (``cluster="<manager>"``). The worker's ``up{job="kueue"}`` comes
    along: /federate exports what the source's TSDB holds for the matchers (web/federate.go), and Prometheus stores
    ``up`` as a series of the job. Each target is labelled with its worker's ``cluster`` too, so the manager's own
    ``up{job="fairgpu-fleet", cluster="<worker>"}`` says whose Prometheus did not answer; the worker's external
    labels (``cluster``) are added by /federate only to series without that label (web/federate.go "Attach global
    labels if they do not exist yet"), which a worker's scraped series all have.
    """
    for name, value in (("scrape_interval", scrape_interval), ("evaluation_interval", evaluation_interval)):
        try:
            duration_seconds(value)
        except MonitoringError as exc:
            raise MonitoringError("monitoring_%s: %s" % (name, exc))
    fleet = _fleet_targets(federate, cluster)
    return {
        "global": {"scrape_interval": scrape_interval, "evaluation_interval": evaluation_interval,
                   "external_labels": {"cluster": cluster}},
        "rule_files": [rules_glob],
        "scrape_configs": [
            {"job_name": KUEUE_JOB, "scheme": "https", "metrics_path": "/metrics",
             "authorization": {"type": "Bearer", "credentials_file": token_file},
             "tls_config": {"ca_file": kueue_ca_file},
             "static_configs": [{"targets": [kueue_target], "labels": {
                 CLUSTER_LABEL: cluster, "namespace": kueue_namespace,
                 "service": "kueue-controller-manager-metrics-service", "pod": "kueue-controller-manager-local",
                 "container": "manager", "endpoint": "https"}}]},
            {"job_name": DCGM_JOB, "scheme": "http", "metrics_path": "/metrics", "honor_labels": False,
             "static_configs": [{"targets": [dcgm_target], "labels": {
                 CLUSTER_LABEL: cluster, "namespace": dcgm_namespace, "service": "nvidia-dcgm-exporter",
                 "pod": "nvidia-dcgm-exporter-simulated", "container": "nvidia-dcgm-exporter",
                 "endpoint": "gpu-metrics"}}],
             "metric_relabel_configs": tenant_relabelings(tenants)},
        ] + ([
            {"job_name": KUBE_STATE_METRICS_JOB, "scheme": "http", "metrics_path": "/metrics", "honor_labels": True,
             "static_configs": [{"targets": [kube_state_metrics_target], "labels": {
                 CLUSTER_LABEL: cluster, "namespace": monitoring_namespace, "service": "kube-state-metrics",
                 "pod": "kube-state-metrics-local", "container": "kube-state-metrics", "endpoint": "http"}}]},
        ] if kube_state_metrics_target else []) + ([
            {"job_name": FLEET_JOB, "scheme": "http", "metrics_path": "/federate", "honor_labels": True,
             "params": {"match[]": list(FLEET_MATCH)},
             "static_configs": [{"targets": [target], "labels": {CLUSTER_LABEL: worker}} for worker, target in fleet]},
        ] if fleet else []),
    }


def fleet_federation(workers):
    """``local_prometheus_config``'s ``federate`` for a MultiKueue manager: ``workers`` are its workers' run settings
    (``run_settings`` of each host of group ``multikueue_worker``: plan/resolve.py ``settings``); each worker whose
    monitoring mode is ``local`` runs its Prometheus on 127.0.0.1 of this machine, on ``local.ports.prometheus``,
    and is federated as ``{"cluster": its cluster_name, "url": "http://127.0.0.1:<port>"}``. A worker monitored in
    mode ``helm`` (kube-prometheus-stack in its own cluster) is left out: its Prometheus is not reachable here, and
    fleet monitoring across such clusters is the platform's own federation or remote-write (docs/multikueue.md
    "Monitoring a fleet")."""
    # Sorted by cluster: a group made by group_by lists its hosts in the order they ran it, which differs between runs,
    # and a reordered target list is a changed configuration (a second site.yml must change nothing).
    return sorted(({"cluster": w["cluster_name"], "url": "http://127.0.0.1:%s" % w["local"]["ports"]["prometheus"]}
                   for w in workers or [] if w.get("modes", {}).get("monitoring") == "local"),
                  key=lambda entry: entry["cluster"])


def _fleet_targets(federate, cluster):
    """``[(worker, "host:port")]`` of ``local_prometheus_config``'s ``federate``, in the order given; raises
    MonitoringError naming ``monitoring_federate`` for an entry that cannot be scraped."""
    out, seen = [], set()
    for i, entry in enumerate(federate or ()):
        field = "monitoring_federate[%d]" % i
        if not isinstance(entry, dict) or set(entry) != {"cluster", "url"}:
            raise MonitoringError("%s: give {cluster: <worker cluster_name>, url: http://127.0.0.1:<port>}, got %r"
                                  % (field, entry))
        name, url = str(entry["cluster"]), str(entry["url"])
        match = re.match(r"^http://([^/:]+|\[[0-9a-fA-F:]+\]):(\d+)/?$", url)
        if not name or not match or not 0 < int(match.group(2)) < 65536:
            raise MonitoringError("%s: %r, %r: a cluster name and a Prometheus URL http://<host>:<port> (no path)"
                                  % (field, name, url))
        if name == cluster or name in seen:
            raise MonitoringError("%s: cluster %s is %s" % (
                field, name, "this Prometheus's own" if name == cluster else "federated twice"))
        seen.add(name)
        out.append((name, "%s:%s" % (match.group(1), match.group(2))))
    return out


def alert_seconds(rules_text, name):
    """Seconds of the ``for:`` of alert ``name`` in a rule file's text (0 without one)."""
    value = alerts(rules_text)[name]
    return duration_seconds(value) if value else 0


def _labelled(obj, release, extra=None):
    obj["metadata"].setdefault("labels", {}).update(dict(extra or {}, **{MANAGED_BY_LABEL: "fairgpu", "release": release}))
    return obj


def object_labels(release, extra=None):
    """The labels on fairgpu's monitoring objects: ``extra`` (monitoring_labels), ``release: <release>`` and
    fairgpu's managed-by label (these two win)."""
    return dict(extra or {}, **{MANAGED_BY_LABEL: "fairgpu", "release": release})


KUEUE_METRICS_READER = "fairgpu-kueue-metrics-reader"
KUEUE_METRICS_TOKEN_SECRET = KUEUE_METRICS_READER + "-token"
# tlsConfig keys that name files inside the Prometheus container: a Prometheus with
# spec.arbitraryFSAccessThroughSMs.deny refuses a ServiceMonitor that sets any of them (Prometheus Operator,
# pkg/prometheus/resource_selector.go testForArbitraryFSAccess: bearerTokenFile, tlsConfig caFile/certFile/keyFile).
_FILE_TLS_KEYS = ("caFile", "certFile", "keyFile")


def kueue_metrics_tls_errors(ca, field="monitoring_kueue_metrics_ca"):
    """Messages for a CA reference that cannot go into the Kueue ServiceMonitor's ``tlsConfig.ca``; [] when fine.

    ``ca``: ``{}`` (no CA: Kueue's metrics certificate is not verified) or a Prometheus Operator SecretOrConfigMap,
    exactly one of ``{"secret": {"name", "key"}}`` and ``{"configMap": {"name", "key"}}``, naming an object in Kueue's
    namespace (the ServiceMonitor's: the operator reads references from the monitor's own namespace). File paths are
    refused: they are what a Prometheus that denies file access from ServiceMonitors rejects."""
    if ca in (None, {}):
        return []
    if not isinstance(ca, dict):
        return ["%s: must be a mapping such as {secret: {name: kueue-metrics-server-cert, key: ca.crt}}, got %r"
                % (field, ca)]
    files = sorted(k for k in ca if k in _FILE_TLS_KEYS or k.endswith("File"))
    if files:
        return ["%s: %s name a file in the Prometheus container, which a Prometheus with "
                "arbitraryFSAccessThroughSMs.deny refuses; give {secret: {name, key}} or {configMap: {name, key}}"
                % (field, ", ".join(files))]
    kinds = sorted(k for k in ca if k in ("secret", "configMap"))
    errors = []
    if len(kinds) != 1 or set(ca) != set(kinds):
        errors.append("%s: give exactly one of secret or configMap (with name and key), got keys %s"
                      % (field, ", ".join(sorted(map(str, ca))) or "none"))
    for kind in kinds:
        ref = ca[kind]
        if not isinstance(ref, dict) or not ref.get("name") or not ref.get("key"):
            errors.append("%s.%s: needs name and key, got %r" % (field, kind, ref))
    return errors


def kueue_tls_config(ca=None, server_name=""):
    """The Kueue ServiceMonitor endpoint's ``tlsConfig`` (Prometheus Operator SafeTLSConfig, no file paths).

    With ``ca`` (a SecretOrConfigMap, see ``kueue_metrics_tls_errors``): ``{"ca": ca, "serverName": server_name}``
    (the certificate's DNS name, e.g. ``kueue-controller-manager-metrics-service.kueue-system.svc`` as Kueue's
    chart issues it with cert-manager, Secret ``kueue-metrics-server-cert`` key ``ca.crt``). Without: Kueue's own
    internal certificate management leaves the metrics server to controller-runtime, which serves a self-signed
    certificate no CA vouches for (sigs.k8s.io/controller-runtime pkg/metrics/server), so the certificate is not
    verified (``insecureSkipVerify``, as Kueue's chart's own ServiceMonitor does by default); the bearer token still
    goes only to the Service's endpoints. Raises MonitoringError for a ``ca`` that cannot be used."""
    errors = kueue_metrics_tls_errors(ca)
    if errors:
        raise MonitoringError("; ".join(errors))
    if not ca:
        return {"insecureSkipVerify": True}
    tls = {"ca": dict(ca)}
    if server_name:
        tls["serverName"] = server_name
    return tls


def kueue_metrics_reader_objects(kueue_namespace, name=KUEUE_METRICS_READER):
    """The identity Prometheus scrapes Kueue with (helm mode), all named ``name``:

    - ServiceAccount in ``kueue_namespace``;
    - ClusterRole allowing ``get`` on the non-resource URL ``/metrics`` (what Kueue's metrics filter asks RBAC with a
      SubjectAccessReview), and a ClusterRoleBinding to the ServiceAccount;
    - Secret ``<name>-token`` of type ``kubernetes.io/service-account-token`` with annotation
      ``kubernetes.io/service-account.name``: the control plane's token controller fills in ``token`` (and
      ``ca.crt``, the cluster's CA, not Kueue's) for that ServiceAccount, a long-lived token that lives as long as
      the Secret (Kubernetes docs, "Manually create a long-lived API token for a ServiceAccount",
      https://kubernetes.io/docs/tasks/configure-pod-container/configure-service-account/#manually-create-an-api-token-for-a-serviceaccount,
      and Secret type ``kubernetes.io/service-account-token``,
      https://kubernetes.io/docs/concepts/configuration/secret/#serviceaccount-token-secrets). The ServiceAccount
      must exist first: the list is in apply order.

    In Kueue's namespace because the ServiceMonitor that names the Secret is there (the Prometheus Operator reads a
    ServiceMonitor's Secret and ConfigMap references in the monitor's own namespace)."""
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name, "namespace": kueue_namespace}},
        {"apiVersion": RBAC_API, "kind": "ClusterRole", "metadata": {"name": name},
         "rules": [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]},
        {"apiVersion": RBAC_API, "kind": "ClusterRoleBinding", "metadata": {"name": name},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
         "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": kueue_namespace}]},
        {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/service-account-token",
         "metadata": {"name": name + "-token", "namespace": kueue_namespace,
                      "annotations": {"kubernetes.io/service-account.name": name}}},
    ]


def helm_objects(tenants, rules_text, dashboard_json, namespace, release, kueue_namespace, kueue_service_labels,
                 dcgm_namespace, dcgm_service_labels, interval="30s", kueue_metrics_ca=None, kueue_server_name="",
                 placement=None, labels=None):
    """fairgpu's objects for kube-prometheus-stack (monitoring_mode helm), labelled ``release: <release>`` (what the
    chart's Prometheus selects), in apply order:

    - ``kueue_metrics_reader_objects(kueue_namespace)``: ServiceAccount, ClusterRole (``get`` on ``/metrics``),
      ClusterRoleBinding and the ServiceAccount's token Secret.
    - ServiceMonitor ``fairgpu-kueue`` in ``kueue_namespace``: Kueue's metrics Service (``kueue_service_labels``),
      port ``https``, job ``kueue``, with the token from that Secret (``authorization.credentials``, a
      SecretKeySelector) and ``kueue_tls_config(kueue_metrics_ca, kueue_server_name)``: no ``bearerTokenFile`` and
      no ``tlsConfig`` file paths, which a Prometheus with ``arbitraryFSAccessThroughSMs.deny`` (hardened set-ups,
      OpenShift user workload monitoring) refuses (Prometheus Operator API reference: Endpoint ``authorization``
      SafeAuthorization, ``tlsConfig`` SafeTLSConfig with ``ca`` SecretOrConfigMap; ``bearerTokenFile`` deprecated).
      In Kueue's namespace because the operator resolves those references in the monitor's namespace.
    - ServiceMonitor ``fairgpu-dcgm-exporter`` in ``dcgm_namespace``: the GPU Operator's DCGM exporter Service
      there (``dcgm_service_labels``), port ``gpu-metrics``, honorLabels false, job ``nvidia-dcgm-exporter``,
      ``tenant`` relabelling (plain HTTP, no credentials). In the exporter's namespace because a Prometheus with
      ``ignoreNamespaceSelectors`` lets a ServiceMonitor discover targets only in its own namespace, and one with
      ``enforcedNamespaceLabel`` labels its series with the monitor's namespace (placement.py).
    - The PrometheusRules of ``placement`` (``placement.plan``'s result; None: layout ``single``): PrometheusRule
      ``fairgpu-alerts`` in ``namespace`` with the groups of ``rules_text``, or (layout ``split``, a Prometheus that
      enforces a namespace label) ``fairgpu-kueue-alerts`` in ``kueue_namespace`` and ``fairgpu-gpu-alerts`` in
      ``dcgm_namespace``, each with the rules that read that namespace's series.
    - ConfigMap ``fairgpu-dashboard`` in ``namespace``: the dashboard, labelled ``grafana_dashboard: "1"`` for the
      chart's Grafana sidecar.

    Every object carries ``object_labels(release, labels)``. Raises MonitoringError for a ``kueue_metrics_ca`` that
    cannot be used (``kueue_metrics_tls_errors``).
    """
    def job(name):
        return [{"action": "replace", "targetLabel": "job", "replacement": name}]

    tls = kueue_tls_config(kueue_metrics_ca, kueue_server_name)
    reader = [_labelled(o, release, labels) for o in kueue_metrics_reader_objects(kueue_namespace)]
    rules = [_labelled({"apiVersion": "monitoring.coreos.com/v1", "kind": "PrometheusRule",
                        "metadata": {"name": name, "namespace": rule_namespace or namespace},
                        "spec": {"groups": groups}}, release, labels)
             for rule_namespace, name, groups in placing.rule_objects(rules_text, placement)]
    return reader + [
        _labelled({"apiVersion": "monitoring.coreos.com/v1", "kind": "ServiceMonitor",
                   "metadata": {"name": "fairgpu-kueue", "namespace": kueue_namespace},
                   "spec": {"namespaceSelector": {"matchNames": [kueue_namespace]},
                            "selector": {"matchLabels": dict(kueue_service_labels)},
                            "endpoints": [{"port": "https", "scheme": "https", "path": "/metrics", "interval": interval,
                                           "authorization": {"type": "Bearer", "credentials": {
                                               "name": KUEUE_METRICS_TOKEN_SECRET, "key": "token"}},
                                           "tlsConfig": tls, "relabelings": job(KUEUE_JOB)}]}},
                  release, labels),
        _labelled({"apiVersion": "monitoring.coreos.com/v1", "kind": "ServiceMonitor",
                   "metadata": {"name": "fairgpu-dcgm-exporter", "namespace": dcgm_namespace},
                   "spec": {"namespaceSelector": {"matchNames": [dcgm_namespace]},
                            "selector": {"matchLabels": dict(dcgm_service_labels)},
                            "endpoints": [{"port": "gpu-metrics", "path": "/metrics", "interval": interval,
                                           "honorLabels": False, "relabelings": job(DCGM_JOB),
                                           "metricRelabelings": tenant_relabelings(tenants, "operator")}]}},
                  release, labels),
    ] + rules + [
        _labelled({"apiVersion": "v1", "kind": "ConfigMap",
                   "metadata": {"name": "fairgpu-dashboard", "namespace": namespace,
                                "labels": {"grafana_dashboard": "1"}},
                   "data": {"fairgpu-gpu-tenancy.json": dashboard_json}}, release, labels),
    ]


def chart_values(interval="30s", evaluation_interval="30s"):
    """kube-prometheus-stack values fairgpu needs: its Prometheus picks up ServiceMonitors and PrometheusRules of
    any release label, scrapes and evaluates at the given intervals; Grafana's dashboard sidecar is on."""
    return {
        "prometheus": {"prometheusSpec": {"serviceMonitorSelectorNilUsesHelmValues": False,
                                          "ruleSelectorNilUsesHelmValues": False,
                                          "scrapeInterval": interval, "evaluationInterval": evaluation_interval}},
        "grafana": {"sidecar": {"dashboards": {"enabled": True, "label": "grafana_dashboard", "labelValue": "1",
                                               "searchNamespace": "ALL"}}},
    }


def _helm_truthy(value):
    """Helm's ``if``: false for nil, false, 0, "" and an empty map or list (text/template's truth)."""
    return bool(value)


def chart_prometheus_selectors(values, release):
    """The ServiceMonitor and PrometheusRule selectors kube-prometheus-stack puts on its Prometheus custom resource
    for the chart values ``values`` and the release name ``release``, as its template decides them
    (prometheus-community/helm-charts, charts/kube-prometheus-stack/templates/prometheus/prometheus.yaml, with the
    defaults of its values.yaml: ``prometheus.prometheusSpec.serviceMonitorSelectorNilUsesHelmValues`` and
    ``ruleSelectorNilUsesHelmValues`` true, the selectors and namespace selectors empty):

    - ``serviceMonitorSelector``: the value when it is set and not empty; else, while
      ``serviceMonitorSelectorNilUsesHelmValues`` is true, ``{matchLabels: {release: <release>}}``; else ``{}``
      (every ServiceMonitor). ``ruleSelector`` likewise with ``ruleSelectorNilUsesHelmValues``.
    - ``serviceMonitorNamespaceSelector``, ``ruleNamespaceSelector``: the value when set and not empty, else ``{}``
      (every namespace; a Prometheus without the field would look only in its own namespace).

    Helm's truth applies: an empty map counts as unset. Pure: the test that runs the real Prometheus Operator builds
    its Prometheus from this; the chart itself is not reachable here."""
    spec = ((values or {}).get("prometheus") or {}).get("prometheusSpec") or {}
    selectors = {}
    for kind in ("serviceMonitor", "rule"):
        given = spec.get(kind + "Selector")
        nil_uses_helm = spec.get(kind + "SelectorNilUsesHelmValues", True)
        if _helm_truthy(given):
            selectors[kind + "Selector"] = given
        elif _helm_truthy(nil_uses_helm):
            selectors[kind + "Selector"] = {"matchLabels": {"release": release}}
        else:
            selectors[kind + "Selector"] = {}
        namespaces = spec.get(kind + "NamespaceSelector")
        selectors[kind + "NamespaceSelector"] = namespaces if _helm_truthy(namespaces) else {}
    return selectors
