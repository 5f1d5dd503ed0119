# -*- coding: utf-8 -*-
# Copyright: fairgpu maintainers
# Apache License 2.0 (see LICENSE)
"""Simulated NVIDIA MIG manager for the embedded cluster (kwok nodes have no GPUs to partition).

Like the real manager (one pod per GPU node, NVIDIA/mig-parted cmd/nvidia-mig-manager), it runs in the
background, follows the nodes' ``nvidia.com/mig.config`` label through the API server and, on the label's value
at start and on every change of it, plays the MIG manager's sequence on that node
(plugins/module_utils/lab/mig_manager.py): the old state stays while it checks, then ``failed``, or
``success`` for a config already applied, or ``pending`` [``rebooting``] then ``success`` or ``failed``, each
step after the delay. It reads the mig-parted file from the MIG manager's ConfigMap at each request, as the real
one reads its mounted file.

    mig_manager_sim.py --kubeconfig FILE [--context NAME] [--namespace gpu-operator] [--configmap NAME] [--strategy mixed]
                       [--delay 2] [--interval 0.5]

The mig_config role starts it (module local_service) with PYTHONPATH pointing at a directory that holds
ansible_collections/fairgpu/tenancy.
"""

import argparse
import logging
import signal
import sys
import threading

import yaml
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from ansible_collections.fairgpu.tenancy.plugins.module_utils.lab import mig_manager
from ansible_collections.fairgpu.tenancy.plugins.module_utils.lab.node import (
    ANNOTATION_PREFIX,
    MIG_CONFIG_LABEL,
    MIG_STATE_LABEL,
)

LOG = logging.getLogger("mig-manager-sim")


class NodeWorker(threading.Thread):
    """One node's MIG manager: handles the newest requested value, one request at a time."""

    def __init__(self, manager, name):
        threading.Thread.__init__(self, name="mig-manager-%s" % name, daemon=True)
        self.manager, self.node = manager, name
        self.wanted = threading.Condition()
        self.value = None
        self.pending = False

    def request(self, value):
        with self.wanted:
            self.value, self.pending = value, True
            self.wanted.notify()

    def run(self):
        while not self.manager.stop.is_set():
            with self.wanted:
                while not self.pending and not self.manager.stop.is_set():
                    self.wanted.wait(1)
                if self.manager.stop.is_set():
                    return
                value, self.pending = self.value, False
            try:
                self.manager.reconfigure(self.node, value)
            except Exception as exc:  # keep serving the other requests, as the real manager's loop does
                LOG.error("node %s: %s=%s: %s", self.node, MIG_CONFIG_LABEL, value, exc)


class SimulatedMigManager(object):
    def __init__(self, api, namespace, configmap, strategy, delay):
        self.api, self.namespace, self.configmap = api, namespace, configmap
        self.strategy, self.delay = strategy, delay
        self.stop = threading.Event()
        self.seen, self.workers = {}, {}
        self.serialize = client.ApiClient().sanitize_for_serialization

    def document(self):
        try:
            data = self.api.read_namespaced_config_map(self.configmap, self.namespace).data or {}
        except ApiException as exc:
            LOG.warning("cannot read ConfigMap %s/%s: %s %s", self.namespace, self.configmap, exc.status, exc.reason)
            return None
        return yaml.safe_load(data.get("config.yaml") or "null")

    def reconfigure(self, name, value):
        node = self.serialize(self.api.read_node(name))
        if (node["metadata"].get("labels") or {}).get(MIG_CONFIG_LABEL) != value:
            return  # superseded: the worker gets the newer value next
        sequence, steps, errors = mig_manager.reconfigure(node, self.document(), self.strategy, self.delay)
        LOG.info("node %s: %s=%s: %s%s", name, MIG_CONFIG_LABEL, value, sequence,
                 (" (%s)" % "; ".join(errors)) if errors else "")
        for kind, arg in steps:
            if self.stop.is_set():
                return
            if kind == "sleep":
                self.stop.wait(arg)
            elif kind == "state":
                self.api.patch_node(name, {"metadata": {"labels": {MIG_STATE_LABEL: arg}}})
                LOG.info("node %s: %s=%s", name, MIG_STATE_LABEL, arg)
            elif kind == "publish":
                if arg["status"]:
                    self.api.patch_node_status(name, {"status": arg["status"]})
                if arg["labels"] or arg["annotations"]:
                    self.api.patch_node(name, {"metadata": {"labels": arg["labels"],
                                                            "annotations": arg["annotations"]}})

    def poll(self):
        for node in self.api.list_node().items:
            annotations = node.metadata.annotations or {}
            if ANNOTATION_PREFIX + "product" not in annotations:
                continue
            name, value = node.metadata.name, (node.metadata.labels or {}).get(MIG_CONFIG_LABEL)
            if name in self.seen and self.seen[name] == value:
                continue
            self.seen[name] = value
            if value is None:
                continue
            if name not in self.workers:
                self.workers[name] = NodeWorker(self, name)
                self.workers[name].start()
            self.workers[name].request(value)

    def run(self, interval):
        while not self.stop.is_set():
            try:
                self.poll()
            except Exception as exc:  # the API server restarting: try again
                LOG.warning("cannot list nodes: %s", exc)
            self.stop.wait(interval)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.partition("\n\n")[0])
    parser.add_argument("--kubeconfig", required=True)
    # The inventory host's context (empty: the file's current one): never the current context by accident.
    parser.add_argument("--context", default="")
    parser.add_argument("--namespace", default="gpu-operator")
    parser.add_argument("--configmap", default="fairgpu-mig-parted-config")
    parser.add_argument("--strategy", default="mixed", choices=["none", "single", "mixed"])
    parser.add_argument("--delay", type=float, default=2.0, help="seconds before each step")
    parser.add_argument("--interval", type=float, default=0.5, help="seconds between reads of the nodes")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    api = client.CoreV1Api(config.new_client_from_config(config_file=args.kubeconfig, context=args.context or None))
    manager = SimulatedMigManager(api, args.namespace, args.configmap, args.strategy, args.delay)
    signal.signal(signal.SIGTERM, lambda *_: manager.stop.set())
    signal.signal(signal.SIGINT, lambda *_: manager.stop.set())
    LOG.info("watching nvidia.com/mig.config on the simulated GPU nodes (delay %.1f s)", args.delay)
    manager.run(args.interval)
    return 0


if __name__ == "__main__":
    sys.exit(main())
