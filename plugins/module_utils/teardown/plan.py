# -*- coding: utf-8 -*-
# Copyright: fairgpu maintainers
# Apache License 2.0 (see LICENSE)
"""What ``playbooks/teardown.yml`` removes from one inventory host's cluster, decided from what that cluster
holds. Pure logic, no cluster access: ``roles/cluster/tasks/teardown_plan.yml`` reads the objects (``QUERIES``)
and lists this plan for a person to read before anything is removed.

The rules, by ``cluster_provider``:

- ``kwok``: the embedded cluster is fairgpu's own (made by kwokctl under fairgpu's working directory): all of it
  goes (``kwokctl delete cluster``, the local Kueue and Prometheus), without confirmation.
- ``kind``: the whole kind cluster goes (``kind delete cluster``). ``roles/cluster/tasks/kind.yml`` uses a kind
  cluster of that name if one is there, so it may hold more than fairgpu's: the host's name must be confirmed.
- ``existing``: the cluster is never deleted and nothing is removed until the host's name is confirmed
  (``-e teardown_confirm=<inventory host>``). Then only fairgpu's own objects go: those of fairgpu's kinds
  (``QUERIES``) that carry fairgpu's label (``app.kubernetes.io/managed-by=fairgpu``; validation Jobs their
  ``fairgpu.io/validation`` / ``fairgpu.io/probe`` label) *and* a name fairgpu gives (``_fairgpu_name``).
  Kept although fairgpu's:

  * a Namespace some other field manager wrote to (it existed before fairgpu applied its labels, or someone
    else uses it): only the fields fairgpu's field manager owns (its labels and annotation) are removed, by a
    server-side apply of the bare Namespace;
  * a Cohort or ResourceFlavor that a ClusterQueue fairgpu did not make uses;
  * CustomResourceDefinitions and webhook configurations (Kueue's installation): never deleted on an existing
    cluster, but for the webhook configurations that call fairgpu's local Kueue process (``kueue_mode: local``:
    every webhook's ``clientConfig.url`` on ``https://127.0.0.1:<run_local_ports.kueue_webhook>``, as
    ``kueue/webhooks.py`` points them): teardown stops that process, and left behind with their
    ``failurePolicy: Fail`` they would make the API server refuse every Job (and every Kueue object) of the
    cluster ("failed calling webhook ... connection refused": the field report of a scheduler's webhooks left
    after ``helm uninstall``, kai-scheduler/KAI-Scheduler#751; kyverno/kyverno#1726). They go last, after the
    objects Kueue still had to release. Kueue's chart ships its CRDs as templates without ``helm.sh/resource-policy: keep`` (kueue v0.19.2
    ``charts/kueue/templates/crd/``), so deleting them, or uninstalling that chart, deletes every ClusterQueue,
    LocalQueue and Workload of the cluster, fairgpu's or not (the same trap: piraeusdatastore/helm-charts#101,
    volcano-sh/volcano#5727);
  * Helm releases: a release is fairgpu's only if its values carry ``RELEASE_MARKER`` (the kueue, gpu_operator
    and monitoring roles add it when they install a release, never to a release that was there before). Even
    then it is uninstalled only with the second flag ``-e teardown_uninstall_releases=true`` (``CHART_EFFECTS``
    says what each uninstall takes with it: NVIDIA/gpu-operator#1301 and #1302, the CRDs the operator's
    ``cleanupCRD`` hook deletes; NVIDIA/aicr#1553, driver modules left half unloaded on GPU nodes after
    ``helm uninstall gpu-operator``).

  A release is uninstalled, then every object of its manifest (``release_objects``) is deleted again and waited
  for: ``helm uninstall --wait`` of Kueue's chart never returns, because Kubernetes' clusterrole-aggregation
  controller re-creates the chart's aggregated ClusterRoles (``kueue-batch-admin-role``, ``kueue-batch-user-role``)
  right after helm deleted them. When their member roles go, the controller applies the aggregate's ``rules`` from
  its informer's (stale) copy, with server-side apply, which creates an object that is gone (kubernetes v1.36.3
  ``pkg/controller/clusterroleaggregation/clusterroleaggregation_controller.go``, ``syncClusterRole`` and
  ``applyClusterRoles``; seen on every uninstall here).

  Deletion order (``DELETE_ORDER``): admission policies first (they act on every tenant namespace), then
  leftover validation Jobs, the Namespaces fairgpu created (their Jobs and Workloads with them: a ClusterQueue
  keeps Kueue's ``kueue.x-k8s.io/resource-in-use`` finalizer while it has admitted Workloads,
  kubernetes-sigs/kueue#2835), the objects in namespaces that stay, then the cluster-wide Kueue objects (a
  MultiKueue manager's admission check, MultiKueueConfig and MultiKueueClusters after the ClusterQueues; a worker's
  identity for the manager is a ServiceAccount, ClusterRole and binding of fairgpu's).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import base64
import json
import zlib

from ansible_collections.fairgpu.tenancy.plugins.module_utils.common import pyyaml
from ansible_collections.fairgpu.tenancy.plugins.module_utils.common.names import (
    ADMISSION_API, ADMISSION_POLICIES, GPU_PRODUCT_LABEL, KUEUE_API, LIMIT_RANGE, LOAD_JOB_PREFIX, MANAGED_BY,
    MANAGED_BY_LABEL, PRIORITY_QUOTA, PROBE_LABEL, PROBE_PREFIX, RBAC_API, RESOURCE_QUOTA, TENANT_LABEL, TENANT_ROLE,
    VALIDATION_LABEL)
from ansible_collections.fairgpu.tenancy.plugins.module_utils.kueue.objects import flavor_name

# The field manager of fairgpu's server-side applies (field_manager: fairgpu in the roles).
FIELD_MANAGER = MANAGED_BY[MANAGED_BY_LABEL]
MANAGED_BY_SELECTOR = "%s=%s" % (MANAGED_BY_LABEL, FIELD_MANAGER)
# fairgpu's own names begin so (names.py: "fairgpu's own are prefixed fairgpu").
NAME_PREFIX = FIELD_MANAGER
# Objects whose names fairgpu fixes (names.py), by kind.
FIXED_NAMES = {
    "ResourceQuota": (RESOURCE_QUOTA, PRIORITY_QUOTA), "LimitRange": (LIMIT_RANGE,), "Role": (TENANT_ROLE,),
    "RoleBinding": (TENANT_ROLE,), "ValidatingAdmissionPolicy": ADMISSION_POLICIES,
    "ValidatingAdmissionPolicyBinding": ADMISSION_POLICIES,
}
# The value fairgpu puts into the values of a Helm release it installs (helm get values shows it).
RELEASE_MARKER = {"fairgpu": {"installedBy": "fairgpu.tenancy"}}
# The charts fairgpu installs on a cluster that is not the embedded one, and what uninstalling each takes along.
CHART_EFFECTS = {
    "kueue": "deletes Kueue's CRDs (chart templates without helm.sh/resource-policy: keep) and with them every "
             "ClusterQueue, LocalQueue and Workload of the cluster, fairgpu's or not",
    "gpu-operator": "deletes the ClusterPolicy and with it the driver, container toolkit, device plugin and MIG "
                    "manager of every GPU node: running GPU pods lose their devices",
    "kube-prometheus-stack": "removes the cluster's Prometheus, Alertmanager and Grafana with their stored data",
}
CONFIRM_FLAG = "teardown_confirm"
UNINSTALL_FLAG = "teardown_uninstall_releases"

_ADMISSION = ADMISSION_API
_RBAC = RBAC_API
_MONITORING = "monitoring.coreos.com/v1"
# (apiVersion, kind) in the order teardown deletes them; namespaced objects in a Namespace that goes are not
# deleted one by one.
DELETE_ORDER = (
    (_ADMISSION, "ValidatingAdmissionPolicyBinding"),
    (_ADMISSION, "ValidatingAdmissionPolicy"),
    ("batch/v1", "Job"),
    ("v1", "Namespace"),
    (KUEUE_API, "LocalQueue"),
    ("v1", "ResourceQuota"),
    ("v1", "LimitRange"),
    (_RBAC, "RoleBinding"),
    (_RBAC, "Role"),
    (_MONITORING, "ServiceMonitor"),
    (_MONITORING, "PrometheusRule"),
    ("v1", "ConfigMap"),
    ("v1", "Secret"),
    ("v1", "ServiceAccount"),
    (KUEUE_API, "ClusterQueue"),
    # A MultiKueue manager's (docs/multikueue.md): after the ClusterQueues, as Kueue keeps an AdmissionCheck that
    # a ClusterQueue names (its resource-in-use finalizer); each MultiKueueCluster's kubeconfig Secret went above.
    (KUEUE_API, "AdmissionCheck"),
    (KUEUE_API, "MultiKueueConfig"),
    (KUEUE_API, "MultiKueueCluster"),
    (KUEUE_API, "ResourceFlavor"),
    (KUEUE_API, "Cohort"),
    (KUEUE_API, "WorkloadPriorityClass"),
    (_RBAC, "ClusterRoleBinding"),
    (_RBAC, "ClusterRole"),
    # Only those that call the local Kueue (local_webhook_prefix), after everything Kueue had to release.
    (ADMISSION_API, "MutatingWebhookConfiguration"),
    (ADMISSION_API, "ValidatingWebhookConfiguration"),
)
# Part of Kueue's installation (the local Kueue's webhooks): listed, never deleted on an existing cluster.
KEPT_KINDS = ((_ADMISSION, "ValidatingWebhookConfiguration"), (_ADMISSION, "MutatingWebhookConfiguration"))
_CLUSTER_SCOPED = {"Namespace", "ClusterQueue", "ResourceFlavor", "Cohort", "WorkloadPriorityClass", "AdmissionCheck",
                   "MultiKueueConfig", "MultiKueueCluster",
                   "ClusterRoleBinding", "ClusterRole", "ValidatingAdmissionPolicy",
                   "ValidatingAdmissionPolicyBinding", "ValidatingWebhookConfiguration",
                   "MutatingWebhookConfiguration"}


def queries(provider="existing"):
    """The ``kubernetes.core.k8s_info`` queries teardown runs on an existing cluster (none for kwok and kind,
    whose whole cluster goes). ``purpose``: ``fairgpu`` (fairgpu's objects, by its labels), ``all`` (every
    ClusterQueue and Cohort, to see who else uses fairgpu's), ``helm`` (the deployed Helm releases' Secrets)."""
    if provider != "existing":
        return []
    found = [{"api_version": api, "kind": kind, "label_selectors": [MANAGED_BY_SELECTOR], "purpose": "fairgpu"}
             for api, kind in _unique(DELETE_ORDER + KEPT_KINDS) if kind != "Job"]
    found += [{"api_version": "batch/v1", "kind": "Job", "label_selectors": [label], "purpose": "fairgpu"}
              for label in (VALIDATION_LABEL, PROBE_LABEL)]
    found += [{"api_version": KUEUE_API, "kind": kind, "label_selectors": [], "purpose": "all"}
              for kind in ("ClusterQueue", "Cohort")]
    found.append({"api_version": "v1", "kind": "Secret", "label_selectors": ["owner=helm", "status=deployed"],
                  "purpose": "helm"})
    return found


def _unique(pairs):
    return tuple(p for i, p in enumerate(pairs) if p not in pairs[:i])


def local_webhook_prefix(port, host="127.0.0.1"):
    """The URL prefix of the webhooks of fairgpu's local Kueue on ``port`` (``run_local_ports.kueue_webhook``);
    the same host and scheme as ``kueue/webhooks.py`` writes."""
    return "https://%s:%d/" % (host, int(port))


def calls_local_kueue(obj, prefix):
    """Whether every webhook of a webhook configuration calls the local Kueue at URL ``prefix`` (and it has at
    least one): such a configuration is fairgpu's local Kueue's, not a chart's (a chart's call a Service)."""
    if not prefix:
        return False
    hooks = _list(_dict(obj).get("webhooks"))
    return bool(hooks) and all(str(_dict(_dict(h).get("clientConfig")).get("url") or "").startswith(prefix)
                               for h in hooks)


def _dict(value):
    return value if isinstance(value, dict) else {}


def _meta(obj):
    return _dict(_dict(obj).get("metadata"))


def _labels(obj):
    return _dict(_meta(obj).get("labels"))


def _list(value):
    return value if isinstance(value, list) else []


def _spec(obj):
    return _dict(_dict(obj).get("spec"))


def _ref(api_version, kind, obj):
    meta = _meta(obj)
    ref = {"apiVersion": api_version, "kind": kind, "metadata": {"name": meta.get("name")}}
    if meta.get("namespace") and kind not in _CLUSTER_SCOPED:
        ref["metadata"]["namespace"] = meta["namespace"]
    return ref


def describe(ref):
    """``Kind namespace/name`` (cluster-scoped: ``Kind name``)."""
    meta = ref["metadata"]
    return "%s %s%s" % (ref["kind"], meta["namespace"] + "/" if meta.get("namespace") else "", meta["name"])


def other_writers(obj):
    """Field managers other than fairgpu's that wrote an object (its ``metadata.managedFields``, status
    updates aside), sorted. ``None`` when the object has no managedFields (nothing says who made it)."""
    entries = [_dict(e) for e in _meta(obj).get("managedFields") or [] if isinstance(e, dict)]
    if not entries:
        return None
    return sorted({str(e.get("manager") or "?") for e in entries
                   if e.get("manager") != FIELD_MANAGER and e.get("subresource") != "status"})


def _fairgpu_name(kind, obj):
    """Whether ``obj`` (found by fairgpu's label) has a name fairgpu gives objects of its kind."""
    name, labels = str(_meta(obj).get("name") or ""), _labels(obj)
    tenant = labels.get(TENANT_LABEL)
    tenant = tenant if isinstance(tenant, str) else None
    if kind == "ClusterQueue":
        return bool(tenant) and name == tenant
    if kind == "LocalQueue":
        # "default" (Kueue's LocalQueueDefaulting) and <tenant><tenants_local_queue_suffix>.
        return bool(tenant) and (name == "default" or name.startswith(tenant))
    if kind == "ResourceFlavor":
        product = _dict(_spec(obj).get("nodeLabels")).get(GPU_PRODUCT_LABEL)
        return isinstance(product, str) and name == flavor_name(product)
    if kind == "Job":
        return name.startswith(LOAD_JOB_PREFIX) or (PROBE_LABEL in labels and name.startswith(PROBE_PREFIX))
    if kind in FIXED_NAMES:
        return name in FIXED_NAMES[kind]
    if kind in ("Namespace", "Cohort", "WorkloadPriorityClass", "ConfigMap", "MultiKueueCluster"):
        # Their names come from the inventory (tenant namespaces, tenants_cohort, tenants_workload_priority_classes,
        # the MIG manager's ConfigMap, the run record, a MultiKueue worker's inventory host): fairgpu's label is what
        # marks them.
        return True
    return name.startswith(NAME_PREFIX)


def _b64(text):
    return base64.b64decode(text + "=" * (-len(text) % 4))


def helm_release(secret):
    """A Helm 3 release from its storage Secret (type ``helm.sh/release.v1``: the Secret's data ``release`` is
    base64 of gzip'd JSON, base64-encoded again by Kubernetes): name, namespace, revision, chart, chart
    version, the user-supplied values (``config``) and whether they carry ``RELEASE_MARKER``. ``error`` instead
    of the values when the Secret cannot be read."""
    meta, labels = _meta(secret), _labels(secret)
    release = {"name": labels.get("name") or meta.get("name"), "namespace": meta.get("namespace"),
               "revision": labels.get("version"), "chart": None, "chart_version": None, "values": {},
               "marked": False}
    try:
        raw = _b64(_b64(_dict(secret.get("data"))["release"]).decode("ascii"))
        if raw[:2] == b"\x1f\x8b":
            raw = zlib.decompress(raw, 16 + zlib.MAX_WBITS)
        decoded = json.loads(raw.decode("utf-8"))
    except (KeyError, TypeError, ValueError, UnicodeError, zlib.error) as exc:
        release["error"] = "cannot read the release: %s" % exc
        return release
    decoded = _dict(decoded)
    chart = _dict(_dict(decoded.get("chart")).get("metadata"))
    release.update({"name": decoded.get("name") or release["name"],
                    "namespace": decoded.get("namespace") or release["namespace"],
                    "revision": decoded.get("version", release["revision"]),
                    "chart": chart.get("name"), "chart_version": chart.get("version"),
                    "values": _dict(decoded.get("config"))})
    release["marked"] = marked(release["values"])
    release["manifest"] = decoded.get("manifest") or ""
    return release


def release_objects(manifest, namespace):
    """The objects of a release's rendered manifest (``helm get manifest``), as ``{"apiVersion", "kind",
    "metadata": {"name"[, "namespace"]}}`` for a delete: a document without a namespace gets the release's
    (kubernetes.core.k8s applies it only to namespaced kinds). Documents that are not objects are skipped."""
    found = []
    for doc in pyyaml.require().safe_load_all(manifest or ""):
        if not isinstance(doc, dict) or not doc.get("kind") or not doc.get("apiVersion"):
            continue
        meta = _dict(doc.get("metadata"))
        if not meta.get("name"):
            continue
        ref = {"apiVersion": doc["apiVersion"], "kind": doc["kind"], "metadata": {"name": meta["name"]}}
        ref["metadata"]["namespace"] = meta.get("namespace") or namespace
        found.append(ref)
    return found


def marked(values):
    """Whether Helm values carry fairgpu's ``RELEASE_MARKER`` (its ``installedBy``; the marker may also record a
    digest of the values fairgpu passed, ``plan/helm_release.py``)."""
    key = next(iter(RELEASE_MARKER))
    mark = values.get(key) if isinstance(values, dict) else None
    return isinstance(mark, dict) and mark.get("installedBy") == RELEASE_MARKER[key]["installedBy"]


def confirmed_hosts(confirm):
    """The host names ``-e teardown_confirm=`` gives: one name, several separated by commas, or a list."""
    if isinstance(confirm, (list, tuple)):
        items = confirm
    else:
        items = str(confirm or "").split(",")
    return [str(item).strip() for item in items if str(item).strip()]


def _found(results):
    """``(purpose, apiVersion, kind, object)`` for each object of the registered k8s_info loop."""
    for result in results if isinstance(results, list) else []:
        query = _dict(_dict(result).get("item"))
        resources = _dict(result).get("resources")
        for obj in resources if isinstance(resources, list) else []:
            if isinstance(obj, dict) and isinstance(_meta(obj).get("name"), str):
                yield query.get("purpose", "fairgpu"), query.get("api_version"), query.get("kind"), obj


def _where(target):
    where = target.get("kubeconfig") or "?"
    if target.get("context"):
        where += ", context " + target["context"]
    if target.get("server"):
        where += ", API server " + target["server"]
    return where


def teardown_plan(results, target, confirm="", uninstall_releases=False):
    """The teardown of one inventory host. ``results``: the registered ``k8s_info`` loop over ``queries()``
    (each with ``item`` and ``resources``); ``target``: ``{"host", "provider", "name", "kubeconfig", "context",
    "server", "local_webhook"}`` (``local_webhook``: ``local_webhook_prefix`` of the local Kueue's port, "" when
    none); ``confirm``: ``-e teardown_confirm``; ``uninstall_releases``: ``-e teardown_uninstall_releases``.

    Returns ``confirmed`` (may anything be removed), ``flag`` (the exact confirmation flag), ``delete`` (object
    references in deletion order), ``strip`` (Namespaces that stay, whose fairgpu fields go), ``uninstall``
    (releases), ``keep`` (``{"what", "reason"}``), ``lines`` (the listing a person reads), ``message`` and
    ``needs_local_kueue``: whether the removal needs fairgpu's local Kueue process up (an existing cluster whose
    webhooks call it). Kueue removes the finalizer ``kueue.x-k8s.io/resource-in-use`` of the ClusterQueues and
    Workloads it is asked to delete, and while it is down its webhooks (``failurePolicy: Fail``) refuse every
    change to its objects, so without it the deletions would wait out their timeout and stop half-way."""
    host = str(target.get("host") or "")
    provider = target.get("provider") or "kwok"
    name = target.get("name") or host
    flag = "-e %s=%s" % (CONFIRM_FLAG, host)
    confirmed = provider == "kwok" or host in confirmed_hosts(confirm)
    plan = {"host": host, "provider": provider, "flag": flag, "confirmed": confirmed, "delete": [], "strip": [],
            "uninstall": [], "keep": [], "lines": [], "message": "", "needs_local_kueue": False}
    lines = plan["lines"]
    if provider == "kwok":
        lines.append("%s: the embedded cluster %s and everything in it goes: its processes (etcd, kube-apiserver, "
                     "kube-controller-manager, kube-scheduler, kwok-controller), their ports and files, and the "
                     "local Kueue and Prometheus of it. fairgpu made it; no confirmation is asked. The binary "
                     "cache stays." % (host, name))
        plan["message"] = "Removing the embedded cluster %s." % name
        return plan
    if provider == "kind":
        lines.append("%s: the whole kind cluster %s goes (kind delete cluster), with everything in it, fairgpu's "
                     "or not (%s)." % (host, name, _where(target)))
        total = "the kind cluster %s" % name
    else:
        _plan_existing(plan, results, uninstall_releases, str(target.get("local_webhook") or ""))
        plan["needs_local_kueue"] = any((ref["apiVersion"], ref["kind"]) in KEPT_KINDS for ref in plan["delete"])
        lines.insert(0, "%s: existing cluster (%s). The cluster itself stays; fairgpu removes only what it "
                        "created." % (host, _where(target)))
        total = "fairgpu's objects (%d deletions%s)" % (
            len(plan["delete"]), ", %d Helm releases" % len(plan["uninstall"]) if plan["uninstall"] else "")
    if confirmed:
        plan["message"] = "Confirmed for %s: removing %s." % (host, total)
    else:
        plan["message"] = ("Not confirmed: nothing was removed from %s. To remove what is listed above, run the "
                           "teardown again with %s" % (host, flag))
    return plan


def _plan_existing(plan, results, uninstall_releases, local_webhook=""):
    lines, keep = plan["lines"], plan["keep"]
    ours, queues, cohorts, releases = {}, [], [], []
    for purpose, api_version, kind, obj in _found(results):
        if purpose == "all":
            (queues if kind == "ClusterQueue" else cohorts).append(obj)
        elif purpose == "helm":
            releases.append(helm_release(obj))
        else:
            ref = _ref(api_version, kind, obj)
            ours.setdefault(describe(ref), (api_version, kind, obj, ref))

    def kept(ref, reason):
        keep.append({"what": describe(ref), "reason": reason})

    # Which of the labelled objects are fairgpu's, in deletion order.
    chosen = []
    for api_version, kind, obj, ref in sorted(ours.values(), key=lambda o: (_order(o[0], o[1]), describe(o[3]))):
        if (api_version, kind) in KEPT_KINDS and calls_local_kueue(obj, local_webhook):
            chosen.append((api_version, kind, obj, ref))
        elif (api_version, kind) in KEPT_KINDS:
            kept(ref, "part of Kueue's installation; never deleted on an existing cluster")
        elif not _fairgpu_name(kind, obj):
            kept(ref, "labelled %s but not named as fairgpu names a %s" % (MANAGED_BY_SELECTOR, kind))
        else:
            chosen.append((api_version, kind, obj, ref))

    # ClusterQueues that stay: those fairgpu did not make.
    going_queues = {c[3]["metadata"]["name"] for c in chosen if c[1] == "ClusterQueue"}
    staying = [q for q in queues if _meta(q).get("name") not in going_queues]
    going_namespaces, final = set(), []
    for api_version, kind, obj, ref in chosen:
        name = ref["metadata"]["name"]
        users = []
        if kind == "Cohort":
            users = [_meta(q).get("name") for q in staying if _spec(q).get("cohortName") == name]
            users += ["Cohort " + str(_meta(c).get("name")) for c in cohorts if _spec(c).get("parentName") == name]
        elif kind == "ResourceFlavor":
            users = [_meta(q).get("name") for q in staying
                     if any(_dict(f).get("name") == name for g in _list(_spec(q).get("resourceGroups"))
                            for f in _list(_dict(g).get("flavors")))]
        if users:
            kept(ref, "used by ClusterQueues fairgpu did not make: %s" % ", ".join(sorted(map(str, users))))
            continue
        if kind == "Namespace":
            writers = other_writers(obj)
            if writers is None or writers:
                plan["strip"].append(ref)
                kept(ref, ("other field managers wrote to it (%s): it existed before fairgpu or is shared"
                           % ", ".join(writers)) if writers else "nothing records who created it (no managedFields)")
                continue
            going_namespaces.add(name)
        final.append(ref)

    for ref in final:
        namespace = ref["metadata"].get("namespace")
        if namespace in going_namespaces:
            lines.append("  delete %s (with its namespace)" % describe(ref))
            continue
        plan["delete"].append(ref)
        note = " and everything in it" if ref["kind"] == "Namespace" else ""
        if (ref["apiVersion"], ref["kind"]) in KEPT_KINDS:
            note = (": it calls the local Kueue (%s), which teardown stops; left behind (failurePolicy Fail) it "
                    "would refuse every Job of the cluster" % local_webhook.rstrip("/"))
        lines.append("  delete %s%s" % (describe(ref), note))
    if plan["strip"]:
        lines.extend("  remove fairgpu's labels and annotation from %s (the namespace stays)" % describe(ref)
                     for ref in plan["strip"])

    # Helm releases: fairgpu's (marked) ones, and the unmarked releases of the charts fairgpu installs.
    for release in sorted(releases, key=lambda r: (_chart_order(r.get("chart")), str(r["namespace"]), str(r["name"]))):
        what = "Helm release %s/%s (chart %s %s)" % (release["namespace"], release["name"], release.get("chart"),
                                                     release.get("chart_version"))
        effect = CHART_EFFECTS.get(release.get("chart"), "removes what its chart installed")
        if release.get("error") or not release["marked"]:
            if release.get("chart") in CHART_EFFECTS or release.get("error"):
                keep.append({"what": what, "reason": release.get("error") or
                             "not installed by fairgpu (its values carry no fairgpu marker): never uninstalled"})
        elif not uninstall_releases:
            keep.append({"what": what, "reason": "installed by fairgpu; uninstalling it %s. Add -e %s=true to "
                                                 "uninstall it" % (effect, UNINSTALL_FLAG)})
        else:
            plan["uninstall"].append({"name": release["name"], "namespace": release["namespace"],
                                      "chart": release.get("chart"),
                                      "objects": release_objects(release.get("manifest"), release["namespace"])})
            lines.append("  uninstall %s: it %s" % (what, effect))
    if not plan["delete"] and not plan["uninstall"] and not plan["strip"]:
        lines.append("  nothing of fairgpu's to remove")
    lines.append("  keep every CustomResourceDefinition, and every object fairgpu did not create")
    lines.extend("  keep %s: %s" % (k["what"], k["reason"]) for k in keep)


def _order(api_version, kind):
    order = list(DELETE_ORDER) + list(KEPT_KINDS)
    key = (api_version, kind)
    return order.index(key) if key in order else len(order)


def _chart_order(chart):
    # Monitoring first, the GPU Operator last: the way site.yml installed them, reversed.
    return {"kube-prometheus-stack": 0, "kueue": 1, "gpu-operator": 2}.get(chart, -1)


def kubeconfig_server(kubeconfig, context=""):
    """The API server URL of ``context`` (empty: the current context) in a parsed kubeconfig dict; empty when
    it cannot be told."""
    if not isinstance(kubeconfig, dict):
        return ""
    name = context or kubeconfig.get("current-context") or ""
    ctx = next((c.get("context") or {} for c in kubeconfig.get("contexts") or [] if c.get("name") == name), {})
    cluster = next((c.get("cluster") or {} for c in kubeconfig.get("clusters") or []
                    if c.get("name") == ctx.get("cluster")), {})
    return str(cluster.get("server") or "")
