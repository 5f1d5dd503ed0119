# -*- coding: utf-8 -*-
# Copyright: fairgpu maintainers
# Apache License 2.0 (see LICENSE)
"""Simulated NVIDIA DCGM exporter for the embedded cluster (kwok nodes have no GPUs to read).

On every scrape of http://HOST:PORT/metrics it lists the simulated GPU nodes and the Running pods through the API
server, keeps which pod holds which GPU (plugins/module_utils/lab/dcgm.py) and answers with dcgm-exporter's metric
names, labels and units. Nothing else is published (no process or Python metrics), as with the real exporter. A
failed read of the cluster answers 500, so Prometheus marks the target down instead of showing stale GPUs.

    dcgm_exporter_sim.py --kubeconfig FILE [--context NAME] [--host 127.0.0.1] [--port 9400]

The monitoring role starts it (module local_service) with PYTHONPATH pointing at a directory that holds
ansible_collections/fairgpu/tenancy.
"""

import argparse
import logging
import signal
import sys
import threading

from kubernetes import client, config
from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import Metric

from ansible_collections.fairgpu.tenancy.plugins.module_utils.lab import dcgm as dcgm_sim

LOG = logging.getLogger("dcgm-exporter-sim")


class SimulatedDcgmCollector(object):
    """A prometheus_client collector that reads the cluster at each scrape."""

    def __init__(self, api):
        self.api = api
        self.assignment = {}
        self.lock = threading.Lock()
        self.reported = set()

    def read(self):
        """Simulated GPUs by node name, and the Running pods, as dicts shaped like the API's JSON."""
        serialize = client.ApiClient().sanitize_for_serialization
        devices = {}
        for node in serialize(self.api.list_node())["items"]:
            found = dcgm_sim.node_devices(node)
            if found:
                devices[node["metadata"]["name"]] = found
        pods = serialize(self.api.list_pod_for_all_namespaces(field_selector="status.phase=Running"))["items"]
        return devices, pods

    def collect(self):
        devices, pods = self.read()
        held = dcgm_sim.live_gpu_pods(pods, set(devices))
        with self.lock:
            self.assignment, unplaced = dcgm_sim.assign(self.assignment, devices, held)
            for name in set(unplaced) - self.reported:
                LOG.warning("pod %s holds no simulated device (more than its node has free of what it asks for)", name)
            self.reported = set(unplaced)
            rows = dcgm_sim.samples(devices, self.assignment, held)
        families = {}
        for name, labels, value in rows:
            kind, help_text = dcgm_sim.METRICS[name]
            family = families.setdefault(name, Metric(name, help_text, kind))
            family.add_sample(name, dict(labels), value)
        return list(families.values())


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.partition("\n\n")[0])
    parser.add_argument("--kubeconfig", required=True)
    # The inventory host's context (empty: the file's current one): never the current context by accident.
    parser.add_argument("--context", default="")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=9400)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    api = client.CoreV1Api(config.new_client_from_config(config_file=args.kubeconfig, context=args.context or None))
    registry = CollectorRegistry(auto_describe=False)
    registry.register(SimulatedDcgmCollector(api))
    start_http_server(args.port, addr=args.host, registry=registry)
    LOG.info("serving simulated DCGM metrics on http://%s:%d/metrics", args.host, args.port)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    stop.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
