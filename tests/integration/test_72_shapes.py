"""Issue 14, real cluster shapes on an embedded cluster of its own: a tainted GPU pool (GKE's
nvidia.com/gpu=present:NoSchedule), a cordoned node of it, and a second GPU product with a provider taint of its own.
site.yml warns about the drain and does not fail, the ResourceFlavors declare and tolerate the taints, a Job pinned
to one product lands on that product's tainted node with the flavor's tolerations, the validation's baseline runs
(nothing admitted stays Pending for lack of a toleration) and its report shows the capacity per product, and a second
run changes nothing."""

import json
import os
import uuid

import pytest
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from conftest import KWOK_WORKDIR, ROOT, load_job, playbook, wait_until

pytestmark = pytest.mark.own_cluster

H100, A100 = "NVIDIA-H100-80GB-HBM3", "NVIDIA-A100-SXM4-80GB"
GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
SKU_TAINT = {"key": "sku", "value": "gpu", "effect": "NoSchedule"}
SHAPES = {
    "cluster_name": "fairgpu-it-shapes", "validate_results_dir": os.path.join(ROOT, "results", "it-shapes"),
    "run_local_ports": {"kueue_webhook": 29743, "kueue_metrics": 28743, "kueue_health": 28381, "prometheus": 29290,
                        "dcgm_exporter": 29600, "kube_state_metrics": 29680, "kube_state_metrics_telemetry": 29690},
    "lab_cluster_node_pools": [
        {"name": "h100", "count": 2, "gpu_product": H100, "gpu_count": 8, "cpu": "96", "memory": "1Ti",
         "taints": [GPU_TAINT]},
        {"name": "h100-drained", "count": 1, "gpu_product": H100, "gpu_count": 8, "cpu": "96", "memory": "1Ti",
         "taints": [GPU_TAINT], "unschedulable": True},
        {"name": "a100", "count": 1, "gpu_product": A100, "gpu_count": 8, "cpu": "96", "memory": "1Ti",
         "taints": [GPU_TAINT, SKU_TAINT]},
    ],
    "tenants_list": [
        {"name": "team-a", "products": {H100: {"gpus": 12}, A100: {"gpus": 4}}},
        {"name": "team-b", "products": {A100: {"gpus": 4}, H100: {"gpus": 12}}},
    ],
}
KUBECONFIG = os.path.join(KWOK_WORKDIR, "clusters", SHAPES["cluster_name"], "kubeconfig.yaml")


def warnings(run):
    return [str(host.get("msg")) for play in run.result.get("plays", []) for task in play["tasks"]
            if task["task"]["name"].endswith("Say what the plan warns about") for host in task["hosts"].values()]


def plan_tasks(run):
    """What the plan tasks reported, for a failure message."""
    return [(task["task"]["name"], {k: v for k, v in host.items() if k in ("skipped", "msg", "false_condition")})
            for play in run.result.get("plays", []) for task in play["tasks"]
            if "plan" in task["task"]["name"].lower() for host in task["hosts"].values()]


@pytest.fixture(scope="module")
def shaped():
    run = playbook("site.yml", "-e", json.dumps(SHAPES), timeout=1500)
    try:
        assert run.rc == 0, run.messages()
        yield run, k8s_config.new_client_from_config(config_file=KUBECONFIG)
    finally:
        playbook("teardown.yml", "-e", json.dumps(SHAPES))


def test_a_drained_node_warns_and_does_not_fail(shaped):
    run, _api = shaped
    said = " ".join(warnings(run))
    nodes = k8s.CoreV1Api(_api).list_node(label_selector="fairgpu.io/node-pool")
    shapes = [(n.metadata.name, n.spec.unschedulable, n.spec.taints and [t.key for t in n.spec.taints]) for n in nodes.items]
    assert "nvidia.com/gpu on %s: the tenants are guaranteed 24 but the schedulable nodes offer 16" % H100 in said, \
        (said, plan_tasks(run), shapes)
    assert "h100-drained-0 (cordoned)" in said and A100 not in said


def test_flavors_declare_and_tolerate_the_pools_taints(shaped):
    _run, api = shaped
    kueue = k8s.CustomObjectsApi(api)
    flavors = {f["metadata"]["name"]: f["spec"] for f in
               kueue.list_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "resourceflavors")["items"]}
    assert flavors["nvidia-h100-80gb-hbm3"]["nodeTaints"] == [GPU_TAINT]
    assert flavors["nvidia-a100-sxm4-80gb"]["nodeTaints"] == [GPU_TAINT, SKU_TAINT]
    assert {"key": "sku", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"} in \
        flavors["nvidia-a100-sxm4-80gb"]["tolerations"]
    queue = kueue.get_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "clusterqueues", "team-a")["spec"]
    assert [f["name"] for f in queue["resourceGroups"][0]["flavors"]] == ["nvidia-h100-80gb-hbm3", "nvidia-a100-sxm4-80gb"]
    assert queue["flavorFungibility"]["whenCanBorrow"] == "TryNextFlavor"
    assert k8s.CoreV1Api(api).read_node("h100-drained-0").spec.unschedulable is True


@pytest.mark.parametrize("product, nodes, taints", [
    (A100, {"a100-0"}, {("nvidia.com/gpu", "present", "NoSchedule"), ("sku", "gpu", "NoSchedule")}),
    (H100, {"h100-0", "h100-1"}, {("nvidia.com/gpu", "present", "NoSchedule")}),
])
def test_a_job_pinned_to_a_product_lands_on_its_tainted_node(shaped, product, nodes, taints):
    _run, api = shaped
    core, batch = k8s.CoreV1Api(api), k8s.BatchV1Api(api)
    name = "it-shape-%s" % uuid.uuid4().hex[:6]
    job = load_job(name, "team-a", queue="team-a-queue", seconds=20)
    job["spec"]["template"]["spec"]["nodeSelector"] = {"nvidia.com/gpu.product": product}
    batch.create_namespaced_job("team-a", job)
    try:
        pod = wait_until(lambda: next((p for p in core.list_namespaced_pod("team-a", label_selector="job-name=" + name).items
                                       if p.spec.node_name), None), 90, what="the pod to be scheduled")
        # Kueue admitted it on the flavor of its product (the other flavor's nodes do not match its selector) and
        # added that flavor's tolerations; the scheduler put it on a schedulable node of the product.
        assert pod.spec.node_name in nodes
        tolerated = {(t.key, t.value, t.effect) for t in pod.spec.tolerations or []}
        assert taints <= tolerated
    finally:
        batch.delete_namespaced_job(name, "team-a", propagation_policy="Background")


def test_the_report_shows_capacity_per_product(shaped):
    run = playbook("validate.yml", "-e", json.dumps(dict(SHAPES, validate_scenarios=["baseline"],
                                                         validate_baseline_seconds=5)))
    assert run.rc == 0, run.messages()
    with open(os.path.join(SHAPES["validate_results_dir"], "report.md")) as handle:
        page = handle.read()
    assert "| %s | nvidia.com/gpu | 24 | 16 | 24 | none | h100-drained-0 (cordoned) |" % H100 in page, page
    assert "| %s | nvidia.com/gpu | 8 | 8 | 8 | none | none |" % A100 in page, page


def test_second_run_changes_nothing(shaped):
    run = playbook("site.yml", "-e", json.dumps(SHAPES), timeout=1500)
    assert run.rc == 0, run.messages()
    assert run.stats["changed"] == 0, run.changed_tasks()
