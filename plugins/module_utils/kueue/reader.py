# -*- coding: utf-8 -*-
# Copyright: fairgpu maintainers
# Apache License 2.0 (see LICENSE)
"""Reading what Kueue decided from a cluster, once or until a condition holds: the one reader of the module
``kueue_admission_info`` and of the validation scenarios' executor (``validation/engine.py``).

``client`` is kubernetes.core's K8SClient (``resource``, ``get``); the summaries are ``kueue/status.py``'s, the pods
outside Kueue's accounting ``kueue/attribution.py``'s. Raises ``ReadError`` with a message a person can act on.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import time

from ansible_collections.fairgpu.tenancy.plugins.module_utils.common.names import GPU_RESOURCE, KUEUE_API
from ansible_collections.fairgpu.tenancy.plugins.module_utils.kueue import attribution
from ansible_collections.fairgpu.tenancy.plugins.module_utils.kueue.status import admission_info, condition_met, sample

try:
    from kubernetes.dynamic.exceptions import DynamicApiError, ResourceNotFoundError
except ImportError:
    # The modules that use this report the missing library.
    class DynamicApiError(Exception):
        pass

    class ResourceNotFoundError(Exception):
        pass


class ReadError(Exception):
    """The cluster could not be read (Kueue's API missing, a request refused, a ClusterQueue that is not there)."""


def _items(client, kind, api_version=KUEUE_API, namespace=None):
    return client.get(client.resource(kind, api_version), namespace=namespace).to_dict().get("items", [])


def read(client, namespaces=(), cluster_queues=(), resource=GPU_RESOURCE, workloads=True, pods=False, gpu_pods=False,
         now=time.time):
    """``admission_info`` of the ClusterQueues of ``namespaces``' LocalQueues and of ``cluster_queues``, with the
    Workloads of ``namespaces`` (every ClusterQueue and Workload when both are empty), the devices of ``resource``
    counted; ``pods``: the namespaces' pods counted too; ``gpu_pods``: ``outside_kueue`` added, every pod on the
    nodes that holds devices no admitted Workload accounts for (``now()``: Unix time, for their deadlines)."""
    namespaces = list(namespaces or [])
    if pods and not namespaces:
        raise ReadError("pods: name the tenant namespaces whose pods to read (namespaces)")
    try:
        queues = _items(client, "ClusterQueue")
        if namespaces:
            local_queues = [lq for ns in namespaces for lq in _items(client, "LocalQueue", namespace=ns)]
            by_namespace = {ns: _items(client, "Workload", namespace=ns) for ns in namespaces} if workloads else {}
            found = [w for ns in namespaces for w in by_namespace.get(ns, [])]
        else:
            local_queues = _items(client, "LocalQueue")
            found = _items(client, "Workload") if workloads else []
            by_namespace = {}
    except ResourceNotFoundError as exc:
        raise ReadError("Kueue's API %s is not installed on this cluster: %s" % (KUEUE_API, exc))
    except DynamicApiError as exc:
        raise ReadError("cannot read Kueue objects: %s %s" % (exc.status, exc.reason))
    pod_list = []
    if pods:
        try:
            pod_list = [p for ns in namespaces for p in _items(client, "Pod", "v1", namespace=ns)]
        except DynamicApiError as exc:
            raise ReadError("cannot read Pods: %s %s" % (exc.status, exc.reason))
    names = set(cluster_queues or [])
    if namespaces:
        names.update(lq["spec"]["clusterQueue"] for lq in local_queues)
    missing = sorted(names - {cq["metadata"]["name"] for cq in queues})
    if missing:
        raise ReadError("ClusterQueue(s) %s do not exist" % ", ".join(missing))
    info = admission_info(queues, local_queues, found, resource=resource, queue_names=names or None, pods=pod_list)
    if gpu_pods:
        try:
            node_pods, node_workloads = attribution.read(client, by_namespace)
        except DynamicApiError as exc:
            raise ReadError("cannot read the pods on the nodes: %s %s" % (exc.status, exc.reason))
        info["outside_kueue"] = attribution.outside_kueue(node_pods, node_workloads, namespaces, now())
    return info


def wait(client, waiter, wait_for, timeout, interval=1, **reading):
    """Read (``read`` with ``reading``) every ``interval`` seconds until ``wait_for`` holds
    (``status.condition_met``) or ``timeout`` seconds passed. Returns ``(met, info, elapsed, timeline)``: every read
    is a timeline sample (``status.sample``) on ``waiter``'s clock."""
    timeline = []
    met, info, elapsed = waiter.wait(
        lambda: read(client, **reading), timeout, interval,
        predicate=lambda found: condition_met(found, wait_for),
        observe=lambda found, seconds: timeline.append(sample(found, seconds, waiter.wall())))
    return met, info, round(elapsed, 3), timeline
