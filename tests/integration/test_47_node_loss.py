"""A GPU node goes away (issue 27, fault 3; docs/failures.md "A GPU node goes away"), on an embedded cluster of its
own. Both tenants use their guarantees; the node running most of their pods stops reporting (its Lease taken from
kwok, Ready False), the node lifecycle controller taints it, Prometheus fires FairgpuGuaranteesOverCapacity, the
Node is deleted, PodGC removes its pods, a node of the same name joins again, and every Job finishes: the lost ones
on a new pod, with no failure counted against backoffLimit 0, their Workloads evicted only by waitForPodsReady
(tests/integration/vars.yml gives it 60 s) and requeued. Then site.yml changes nothing: the node that joined again is
the node the lab made."""

import json
import os

import pytest
from kubernetes import client as k8s

from conftest import ROOT, own_cluster, playbook

pytestmark = pytest.mark.own_cluster

NAME = "fairgpu-it-node-loss"
RESULTS = os.path.join(ROOT, "results", "it-node-loss")
SETTINGS = {
    "cluster_name": NAME, "lab_cluster_apiserver_port": 24300,
    "run_local_ports": {"kueue_webhook": 24343, "kueue_metrics": 24344, "kueue_health": 24381, "prometheus": 24390,
                        "dcgm_exporter": 24400, "kube_state_metrics": 24480, "kube_state_metrics_telemetry": 24490},
    "validate_results_dir": RESULTS,
}


def site():
    return playbook("site.yml", "-e", json.dumps(SETTINGS), timeout=900)


@pytest.fixture(scope="module")
def api():
    yield from own_cluster(SETTINGS)


def test_a_gpu_node_lost_and_replaced_loses_no_job_and_the_next_site_run_changes_nothing(api):
    nodes_before = sorted(n.metadata.name for n in k8s.CoreV1Api(api).list_node().items)
    run = playbook("validate.yml", "-e", json.dumps(dict(SETTINGS, validate_scenarios=["gpu_node_loss"])),
                   timeout=900)
    with open(os.path.join(RESULTS, "report.json")) as handle:
        (result,) = [s for s in json.load(handle)["scenarios"] if s["name"] == "gpu_node_loss"]
    failed = [(c["check"], c["observed"]) for c in result["checks"] if not c["passed"]]
    assert run.rc == 0 and failed == [], (failed, run.messages())
    metrics = result["metrics"]
    # What the real components did: a node of 8 GPUs with pods of both tenants lost, the Ready nodes' offer down
    # by its GPUs below the 16 guaranteed (kube-state-metrics and Kueue as Prometheus read them), its pods gone.
    assert metrics["gpus_lost"] == 8 and metrics["pods_lost"] >= 1, metrics
    assert metrics["gpus_offered_during"] == metrics["gpus_offered_before"] - 8 < metrics["gpus_guaranteed"] == 16
    assert metrics["jobs_lost"] == 0 and metrics["jobs_run_twice"] == 0
    alert = next(c for c in result["checks"] if c["check"].startswith("FairgpuGuaranteesOverCapacity fires"))
    assert "guaranteed 16.0, offered 8.0" in alert["observed"], alert
    # The node is back as the lab made it: same nodes, Ready, and site.yml finds nothing to change.
    assert sorted(n.metadata.name for n in k8s.CoreV1Api(api).list_node().items) == nodes_before
    again = site()
    assert again.rc == 0 and again.changed_tasks() == [], again.changed_tasks()
