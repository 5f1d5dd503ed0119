# -*- coding: utf-8 -*-
# Copyright: fairgpu maintainers
# Apache License 2.0 (see LICENSE)
"""MultiKueue across a fleet (Kueue v0.19.2; docs/multikueue.md). Pure logic, no cluster access.

A manager cluster reserves a tenant's quota in its ClusterQueue, then Kueue's MultiKueue admission check copies the
Workload to the worker clusters, the first worker that admits it runs the Job, and its status is copied back
(pkg/controller/admissionchecks/multikueue/workload.go). The manager reaches each worker with a kubeconfig kept in
a Secret of Kueue's namespace (key ``kubeconfig``; apis/kueue/v1beta2/multikueue_types.go).

- ``role_errors``: the fleet's MultiKueue roles, checked before any cluster is touched.
- ``guarantee_errors``: a tenant's guarantee on the manager is the sum of its guarantees on the workers, the rule of
  Kueue's documentation ("the quota in the manager cluster should equal the total quota available in all worker
  clusters", site/content/en/docs/concepts/multikueue.md) and what its alpha MultiKueueManagerQuotaAutomation
  computes; every worker carries every manager tenant with the same namespaces (Kueue copies the Workload's
  namespace and queueName as they are and does not create them: docs/tasks/manage/setup_multikueue.md).
- ``worker_identity``: what each worker gives the manager's Kueue: a ServiceAccount with the rules Kueue's
  create-multikueue-kubeconfig.sh grants for batch/v1 Jobs, and its token Secret.
- ``worker_kubeconfig``: the kubeconfig the manager keeps for a worker, in the form Kueue accepts.
- ``manager_objects``: the Secrets, MultiKueueClusters, MultiKueueConfig and AdmissionCheck on the manager.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import base64

from ansible_collections.fairgpu.tenancy.plugins.module_utils.common.names import (
    KUEUE_API,
    MANAGED_BY,
    MULTIKUEUE_ADMISSION_CHECK,
    MULTIKUEUE_CONFIG,
    MULTIKUEUE_CONTROLLER,
    MULTIKUEUE_ROLES,
    MULTIKUEUE_WORKER_IDENTITY,
    RBAC_API,
)

# The rules Kueue's site/static/examples/multikueue/create-multikueue-kubeconfig.sh (v0.19.2) grants a worker's
# ServiceAccount for the batch/v1 Job integration (the one fairgpu enables: kueue_integrations): Jobs, Workloads and
# their status, and reading the queues (used by the alpha quota automation). Every integration with a remote watch
# needs its rows, or the MultiKueueCluster goes inactive (multikueuecluster.go, ClientConnectionFailed).
WORKER_RULES = [
    {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["create", "delete", "get", "list", "watch"]},
    {"apiGroups": ["batch"], "resources": ["jobs/status"], "verbs": ["get"]},
    {"apiGroups": ["kueue.x-k8s.io"], "resources": ["workloads"],
     "verbs": ["create", "delete", "get", "list", "watch", "update", "patch"]},
    {"apiGroups": ["kueue.x-k8s.io"], "resources": ["workloads/status"], "verbs": ["get", "patch", "update"]},
    {"apiGroups": ["kueue.x-k8s.io"], "resources": ["clusterqueues", "localqueues"], "verbs": ["get", "list", "watch"]},
]
# The Secret key Kueue reads the kubeconfig from (MultiKueueConfigSecretKey).
KUBECONFIG_KEY = "kubeconfig"
# fairgpu's annotation on that Secret: when the token in it expires (epoch seconds), read back to renew it in time.
TOKEN_EXPIRES_ANNOTATION = "fairgpu.io/token-expires"
# Kubeconfig fields Kueue refuses in a worker's kubeconfig (multikueuecluster.go validateKubeConfig, reason
# InsecureKubeConfig): files on the manager, skipping TLS verification, and credentials that run or read elsewhere.
REFUSED_CLUSTER_FIELDS = ("insecure-skip-tls-verify", "certificate-authority")
REFUSED_USER_FIELDS = ("tokenFile", "exec", "auth-provider", "username", "password")


def secret_name(worker):
    """The Secret on the manager that holds ``worker``'s kubeconfig."""
    return "fairgpu-worker-" + worker


def held_credentials(secrets, worker):
    """What the manager holds for ``worker`` among its ``secrets`` (API dicts, fairgpu's in Kueue's namespace):
    ``{"kubeconfig": text, "expires": epoch seconds or ""}``, or None when it holds nothing."""
    for secret in secrets or []:
        if (secret.get("metadata") or {}).get("name") == secret_name(worker):
            text = (secret.get("data") or {}).get(KUBECONFIG_KEY)
            return {"kubeconfig": base64.b64decode(text).decode("utf-8") if text else "",
                    "expires": ((secret["metadata"].get("annotations") or {}).get(TOKEN_EXPIRES_ANNOTATION) or "")}
    return None


def role_errors(roles):
    """Messages for the fleet's roles, ``{inventory host: multikueue_role}``; [] when fine or when no host takes
    part. A fleet with workers has exactly one manager; a manager has at least one worker."""
    errors = ["%s: multikueue_role %r is not one of %s" % (host, role, ", ".join(MULTIKUEUE_ROLES))
              for host, role in sorted(roles.items()) if role not in MULTIKUEUE_ROLES]
    managers = sorted(h for h, r in roles.items() if r == "manager")
    workers = sorted(h for h, r in roles.items() if r == "worker")
    if len(managers) > 1:
        errors.append("multikueue_role: %s are all managers; a fleet has one manager, which dispatches to the "
                      "workers (give the others multikueue_role: worker or none)" % ", ".join(managers))
    if workers and not managers:
        errors.append("multikueue_role: %s %s worker%s but no host is the manager; give one host multikueue_role: "
                      "manager" % (", ".join(workers), "is a" if len(workers) == 1 else "are",
                                   "" if len(workers) == 1 else "s"))
    if managers and not workers:
        errors.append("multikueue_role: %s is the manager but no host is a worker, so its ClusterQueues would admit "
                      "nothing; give the clusters that run the Jobs multikueue_role: worker" % managers[0])
    return errors


def _guarantee(tenant):
    gpus = tenant.get("gpus") if isinstance(tenant, dict) else None
    return gpus if isinstance(gpus, int) and not isinstance(gpus, bool) else None


def guarantee_errors(manager, manager_tenants, workers):
    """Messages for the tenants of a fleet: ``manager_tenants`` the manager host's tenants, ``workers`` ``{worker
    host: its tenants}`` (the inventory's tenants_list items). Each manager tenant is on every worker with the same
    namespaces, its ``gpus`` a number of devices, and its guarantee on the manager the sum of the workers'; no worker
    has a tenant the manager does not (its queues would never receive work)."""
    errors = []
    on_manager = {t.get("name"): t for t in manager_tenants or [] if isinstance(t, dict)}
    for name, tenant in sorted(on_manager.items()):
        if _guarantee(tenant) is None:
            errors.append("%s: tenant %s gpus %r: a MultiKueue manager takes a number of devices (a guarantee per GPU "
                          "product is not planned across a fleet)" % (manager, name, tenant.get("gpus")))
            continue
        total, parts = 0, []
        for worker, tenants in sorted(workers.items()):
            found = next((t for t in tenants or [] if isinstance(t, dict) and t.get("name") == name), None)
            if found is None:
                errors.append("%s: tenant %s is missing; every worker carries every tenant of the manager %s (Kueue "
                              "copies a Workload's namespace and LocalQueue to the workers as they are), with gpus 0 "
                              "where it has no guarantee" % (worker, name, manager))
                continue
            if sorted(found.get("namespaces") or []) != sorted(tenant.get("namespaces") or []):
                errors.append("%s: tenant %s has namespaces %s, the manager %s has %s; they must be the same"
                              % (worker, name, found.get("namespaces"), manager, tenant.get("namespaces")))
            if _guarantee(found) is None:
                errors.append("%s: tenant %s gpus %r is not a number of devices" % (worker, name, found.get("gpus")))
                continue
            total += found["gpus"]
            parts.append("%s %d" % (worker, found["gpus"]))
        if parts and len(parts) == len(workers) and total != tenant["gpus"]:
            errors.append("tenant %s: guaranteed %d GPUs on the manager %s and %d on the workers (%s); the manager's "
                          "guarantee is the sum of the workers' (Kueue's MultiKueue documentation): set gpus %d on %s, "
                          "or change the workers'" % (name, tenant["gpus"], manager, total, ", ".join(parts), total,
                                                      manager))
    for worker, tenants in sorted(workers.items()):
        for tenant in tenants or []:
            if isinstance(tenant, dict) and tenant.get("name") not in on_manager:
                errors.append("%s: tenant %s is not a tenant of the manager %s, so no work would reach its queues; "
                              "add it to the manager or remove it" % (worker, tenant.get("name"), manager))
    return errors


def worker_identity(namespace):
    """The worker's objects for the manager, in apply order: ServiceAccount ``MULTIKUEUE_WORKER_IDENTITY`` in Kueue's
    ``namespace``, its ClusterRole (``WORKER_RULES``) and binding. Its token is a bound one from the TokenRequest API
    with an expiry (module ``multikueue_credentials``), not the never-expiring token Secret of Kueue's script."""
    name = MULTIKUEUE_WORKER_IDENTITY
    labels = dict(MANAGED_BY)
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name, "namespace": namespace, "labels": labels}},
        {"apiVersion": RBAC_API, "kind": "ClusterRole", "metadata": {"name": name, "labels": labels},
         "rules": [dict(rule) for rule in WORKER_RULES]},
        {"apiVersion": RBAC_API, "kind": "ClusterRoleBinding", "metadata": {"name": name, "labels": labels},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
         "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}]},
    ]


def worker_kubeconfig(kubeconfig, context, token, name, read_file=None):
    """The kubeconfig the manager keeps for a worker: the server and CA of ``context`` in the worker's
    ``kubeconfig`` (a dict; its current context when ``context`` is empty), the CA as data (a file is read with
    ``read_file(path) -> bytes``), the ServiceAccount ``token`` inline, one context ``name``. Raises ValueError
    naming the field when the worker's context has no server or skips TLS verification, which Kueue refuses."""
    context = context or kubeconfig.get("current-context")
    entry = next((c.get("context") or {} for c in kubeconfig.get("contexts") or [] if c.get("name") == context), None)
    if entry is None:
        raise ValueError("the worker's kubeconfig has no context %r" % context)
    cluster = next((c.get("cluster") or {} for c in kubeconfig.get("clusters") or []
                    if c.get("name") == entry.get("cluster")), None)
    if not cluster or not cluster.get("server"):
        raise ValueError("the worker's kubeconfig context %r names no cluster with a server" % context)
    if cluster.get("insecure-skip-tls-verify"):
        raise ValueError("the worker's kubeconfig context %r skips TLS verification (insecure-skip-tls-verify), "
                         "which Kueue refuses in a MultiKueue kubeconfig; give it the API server's CA" % context)
    authority = cluster.get("certificate-authority-data")
    if not authority and cluster.get("certificate-authority"):
        if read_file is None:
            raise ValueError("the worker's CA is a file (%s) and no reader was given" % cluster["certificate-authority"])
        authority = base64.b64encode(read_file(cluster["certificate-authority"])).decode("ascii")
    if not authority:
        raise ValueError("the worker's kubeconfig context %r has no certificate-authority(-data); Kueue needs the "
                         "API server's CA" % context)
    return {
        "apiVersion": "v1", "kind": "Config", "current-context": name,
        "clusters": [{"name": name, "cluster": {"server": cluster["server"], "certificate-authority-data": authority}}],
        "users": [{"name": name, "user": {"token": token}}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": name}}],
    }


def kubeconfig_errors(kubeconfig):
    """What Kueue would refuse in a kubeconfig for a worker (reason InsecureKubeConfig), as messages."""
    errors = []
    for entry in kubeconfig.get("clusters") or []:
        for field in REFUSED_CLUSTER_FIELDS:
            if (entry.get("cluster") or {}).get(field):
                errors.append("cluster %s: %s" % (entry.get("name"), field))
    for entry in kubeconfig.get("users") or []:
        for field in REFUSED_USER_FIELDS:
            if (entry.get("user") or {}).get(field):
                errors.append("user %s: %s" % (entry.get("name"), field))
    return errors


def manager_objects(namespace, credentials):
    """The manager's objects, in apply order: a Secret per worker (``credentials``: ``[{"name": worker,
    "kubeconfig": text, "expires": epoch seconds of its token}]``, module multikueue_credentials' results) in Kueue's
    ``namespace``, the expiry in annotation
    ``TOKEN_EXPIRES_ANNOTATION``, a MultiKueueCluster per worker, the MultiKueueConfig ``MULTIKUEUE_CONFIG`` of them
    all and the AdmissionCheck ``MULTIKUEUE_ADMISSION_CHECK`` that the manager's ClusterQueues carry."""
    labels = dict(MANAGED_BY)
    by_worker = {c["name"]: c for c in credentials}
    workers = sorted(by_worker)
    objects = [{"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                "metadata": {"name": secret_name(w), "namespace": namespace, "labels": labels,
                             "annotations": {TOKEN_EXPIRES_ANNOTATION: str(by_worker[w]["expires"])}},
                "stringData": {KUBECONFIG_KEY: by_worker[w]["kubeconfig"]}} for w in workers]
    objects += [{"apiVersion": KUEUE_API, "kind": "MultiKueueCluster", "metadata": {"name": w, "labels": labels},
                 "spec": {"clusterSource": {"kubeConfig": {"locationType": "Secret", "location": secret_name(w)}}}}
                for w in workers]
    objects.append({"apiVersion": KUEUE_API, "kind": "MultiKueueConfig",
                    "metadata": {"name": MULTIKUEUE_CONFIG, "labels": labels}, "spec": {"clusters": workers}})
    objects.append({"apiVersion": KUEUE_API, "kind": "AdmissionCheck",
                    "metadata": {"name": MULTIKUEUE_ADMISSION_CHECK, "labels": labels},
                    "spec": {"controllerName": MULTIKUEUE_CONTROLLER,
                             "parameters": {"apiGroup": "kueue.x-k8s.io", "kind": "MultiKueueConfig",
                                            "name": MULTIKUEUE_CONFIG}}})
    return objects


def removed_workers(clusters, workers, namespace):
    """The manager's objects of workers no longer in the fleet, to delete: for each MultiKueueCluster of fairgpu's
    (``clusters``, read by its label) whose name is not in ``workers``, it and its kubeconfig Secret in Kueue's
    ``namespace``. The MultiKueueConfig, applied with the workers there are, already no longer names them."""
    gone = sorted(set(c["metadata"]["name"] for c in clusters) - set(workers))
    return [obj for worker in gone for obj in (
        {"apiVersion": KUEUE_API, "kind": "MultiKueueCluster", "metadata": {"name": worker}},
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": secret_name(worker), "namespace": namespace}})]


def token_due(expires, now, renew_before_seconds):
    """Whether a worker's token must be issued again: none yet (``expires`` None or empty), or its expiry (epoch
    seconds) within ``renew_before_seconds`` of ``now``."""
    if expires in (None, ""):
        return True
    try:
        return float(expires) - now <= renew_before_seconds
    except (TypeError, ValueError):
        return True


def same_cluster(kubeconfig_text, server, authority):
    """Whether the kubeconfig the manager holds (``kubeconfig_text``, YAML) reaches ``server`` with CA
    ``authority`` (base64): a worker whose address or CA changed gets a new kubeconfig even with a fresh token."""
    import yaml  # only where a kubeconfig is read (the module), not for the plain rules above

    try:
        held = yaml.safe_load(kubeconfig_text or "") or {}
    except yaml.YAMLError:
        return False
    clusters = [c.get("cluster") or {} for c in held.get("clusters") or [] if isinstance(c, dict)]
    return len(clusters) == 1 and clusters[0].get("server") == server and \
        clusters[0].get("certificate-authority-data") == authority
