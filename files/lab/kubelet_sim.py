# -*- coding: utf-8 -*-
# Copyright: fairgpu maintainers
# Apache License 2.0 (see LICENSE)
"""The device admission of the embedded cluster's kubelets (kwok runs every pod bound to a node, even past the
node's devices).

It watches every pod through the API server and decides, for each pod bound to a node and not yet admitted,
as the kubelet's device manager does (plugins/module_utils/lab/kubelet.py): a pod whose devices fit what
the node's admitted active pods leave free gets condition ``PodReadyToStartContainers=True``; one that does not
fit gets phase ``Failed``, reason ``UnexpectedAdmissionError`` and the kubelet's message, and a Warning Event.

Race: kwok's ``pod-create`` stage, which starts a pod's containers, only matches a pod with that condition (the
cluster role's kwokctl.yaml.j2 adds it to the stage's selector), so kwok never acts on a pod before this process
has admitted it, and a refused pod never gets a kwok stage (its phase is Failed before any other write to it).
The decisions follow the watch, which gives the writes in the API server's order: a pod whose phase became
terminal, or that is gone, frees its devices before a later pod is decided, as the scheduler sees it. One
thread decides, so two pods never take the same device. After a restart (or an expired watch) it lists every
pod again: those already admitted hold their devices, the others are decided in creation order.

    kubelet_sim.py --kubeconfig FILE [--context NAME]

The lab_cluster role starts it (module local_service) with PYTHONPATH pointing at a directory that
holds ansible_collections/fairgpu/tenancy.
"""

import argparse
import datetime
import json
import logging
import signal
import sys
import time

from kubernetes import client, config, watch
from kubernetes.client.exceptions import ApiException

from ansible_collections.fairgpu.tenancy.plugins.module_utils.lab.kubelet import (
    REFUSED_REASON,
    Kubelets,
    admitted,
)

LOG = logging.getLogger("kubelet-sim")
WATCH_SECONDS = 300


class SimulatedKubelets(object):
    def __init__(self, api):
        self.api = api
        self.kubelets = None

    def allocatable(self, name):
        try:
            return self.api.read_node(name).status.allocatable or {}
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise

    def handle(self, pod):
        decision = self.kubelets.observe(pod)
        if decision is None:
            return
        metadata = pod["metadata"]
        name, namespace, node = metadata["name"], metadata["namespace"], pod["spec"]["nodeName"]
        try:
            self.api.patch_namespaced_pod_status(name, namespace, {"status": decision[1]})
        except ApiException as exc:  # gone meanwhile, or refused: decided again at its next change
            self.kubelets.forget(metadata["uid"])
            LOG.warning("pod %s/%s on %s: cannot write the %s: %s %s", namespace, name, node, decision[0],
                        exc.status, exc.reason)
            return
        if decision[0] == "admit":
            LOG.info("pod %s/%s on %s: admitted", namespace, name, node)
            return
        LOG.info("pod %s/%s on %s: refused: %s", namespace, name, node, decision[2])
        now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        self.api.create_namespaced_event(namespace, {
            "metadata": {"generateName": name + "."},
            "involvedObject": {"apiVersion": "v1", "kind": "Pod", "name": name, "namespace": namespace,
                               "uid": metadata["uid"]},
            "type": "Warning", "reason": REFUSED_REASON, "message": decision[2], "count": 1,
            "firstTimestamp": now, "lastTimestamp": now,
            "source": {"component": "kubelet", "host": node},
            "reportingComponent": "kubelet", "reportingInstance": node,
        })

    def resync(self):
        """Every pod again, admitted ones first, the others in creation order; returns the list's
        resourceVersion."""
        self.kubelets = Kubelets(self.allocatable)
        listed = json.loads(self.api.list_pod_for_all_namespaces(_preload_content=False).data)
        pods = sorted(listed["items"], key=lambda p: (p["metadata"]["creationTimestamp"], p["metadata"]["uid"]))
        for pod in sorted(pods, key=lambda p: not admitted(p)):
            self.handle(pod)
        return listed["metadata"]["resourceVersion"]

    def run(self):
        while True:
            try:
                version = self.resync()
                while True:
                    for event in watch.Watch().stream(self.api.list_pod_for_all_namespaces, resource_version=version,
                                                      timeout_seconds=WATCH_SECONDS, deserialize=False):
                        pod = event["object"]
                        version = pod["metadata"]["resourceVersion"]
                        if event["type"] == "DELETED":
                            self.kubelets.forget(pod["metadata"]["uid"])
                        else:
                            self.handle(pod)
            except Exception as exc:  # an expired watch (410) or the API server restarting: list again
                LOG.warning("watch ended (%s); listing the pods again", exc)
                time.sleep(1)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.partition("\n\n")[0])
    parser.add_argument("--kubeconfig", required=True)
    # The inventory host's context (empty: the file's current one): never the current context by accident.
    parser.add_argument("--context", default="")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    api = client.CoreV1Api(config.new_client_from_config(config_file=args.kubeconfig, context=args.context or None))
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    LOG.info("admitting the pods bound to the embedded cluster's nodes")
    SimulatedKubelets(api).run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
