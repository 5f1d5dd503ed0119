"""The simulated DCGM exporter against a real dcgm-exporter scrape (fixtures/dcgm/, copied from
shared/fixtures/dcgm/ with its comment lines): the same metric names, HELP, types, label names and label order,
units (MiB, ratio 0..1) and empty pod labels for a free device; and which pod holds which GPU."""

import json
import os

import pytest
from prometheus_client.core import Metric
from prometheus_client.exposition import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from ansible_collections.fairgpu.tenancy.plugins.module_utils.lab import dcgm as dcgm_sim
from ansible_collections.fairgpu.tenancy.plugins.module_utils.lab.nvidia_smi import simulated_gpus

FIXTURE = os.path.join(os.path.dirname(__file__), "fixtures", "dcgm", "a100-40gb-mig-mixed-metrics.txt")


def fixture_text():
    with open(FIXTURE) as handle:
        lines = handle.read().splitlines()
    # The two first lines say where the scrape comes from; they are no exposition format.
    assert lines[0].startswith("# real dcgm-exporter") and lines[1].startswith("# origin:")
    return "\n".join(lines[2:]) + "\n"


def fixture_families():
    return {f.name: f for f in text_string_to_metric_families(fixture_text())}


def fixture_label_order():
    """Label names of each metric line, in the order dcgm-exporter prints them."""
    orders = {}
    for line in fixture_text().splitlines():
        if line.startswith("#") or not line:
            continue
        name, rest = line.split("{", 1)
        orders.setdefault(name, [pair.split("=", 1)[0] for pair in rest.rsplit("}", 1)[0].split('",') if pair])
    return orders


def render(rows):
    """The exposition text prometheus_client serves for the exporter's rows (what Prometheus scrapes)."""
    families = {}
    for name, labels, value in rows:
        kind, help_text = dcgm_sim.METRICS[name]
        families.setdefault(name, Metric(name, help_text, kind)).add_sample(name, dict(labels), value)

    class Registry(object):
        def collect(self):
            return list(families.values())

    return generate_latest(Registry()).decode()


def node(name="gpu-node-0", product="NVIDIA-H100-80GB-HBM3", count=8, memory=None):
    annotations = {dcgm_sim.ANNOTATION_PRODUCT: product, dcgm_sim.ANNOTATION_COUNT: str(count)}
    if memory:
        annotations[dcgm_sim.ANNOTATION_MEMORY_MIB] = str(memory)
    return {"metadata": {"name": name, "annotations": annotations}}


def pod(name, namespace="team-a", node_name="gpu-node-0", gpus=1, phase="Running", fraction="0.8", util="100",
        start="2026-11-30T10:00:00Z", resource="nvidia.com/gpu"):
    annotations = {}
    if fraction is not None:
        annotations[dcgm_sim.ANNOTATION_MEMORY_FRACTION] = fraction
    if util is not None:
        annotations[dcgm_sim.ANNOTATION_UTILIZATION] = util
    return {"metadata": {"name": name, "namespace": namespace, "uid": "uid-" + name, "annotations": annotations},
            "spec": {"nodeName": node_name, "containers": [
                {"name": "load", "resources": {"requests": {"cpu": "2", resource: str(gpus)},
                                               "limits": {resource: str(gpus)}}}]},
            "status": {"phase": phase, "startTime": start}}


def test_metric_names_help_and_types_are_dcgm_exporters():
    real = fixture_families()
    for name, (kind, help_text) in dcgm_sim.METRICS.items():
        if name == "DCGM_FI_DEV_GPU_UTIL":
            # Not in a MIG scrape: dcgm-exporter has no GPU_UTIL for MIG instances (use GR_ENGINE_ACTIVE).
            assert name not in real
            continue
        assert real[name].type == kind and real[name].documentation == help_text, name


def test_mig_device_labels_match_the_real_scrape_in_names_and_order():
    order = fixture_label_order()
    device = {"node": "nvidia-dcgm-exporter-xxxxx", "gpu": 0, "uuid": "GPU-00000001-0000-4000-8000-000000000001",
              "model_name": "NVIDIA A100-SXM4-40GB", "mig_profile": "1g.5gb", "gi_id": 9}
    labels = dcgm_sim.device_labels(device, driver_version="520.56.06")
    for name in ("DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE", "DCGM_FI_PROF_GR_ENGINE_ACTIVE"):
        assert [k for k, _value in labels] == order[name]
    real = [s for s in fixture_families()["DCGM_FI_DEV_FB_USED"].samples if s.labels["GPU_I_ID"] == "9"][0]
    assert dict(labels) == real.labels


def test_whole_gpu_has_the_labels_without_the_mig_pair():
    order = fixture_label_order()["DCGM_FI_DEV_FB_USED"]
    device = dcgm_sim.node_devices(node(count=1))[0]
    names = [k for k, _value in dcgm_sim.device_labels(device)]
    assert names == [n for n in order if n not in ("GPU_I_PROFILE", "GPU_I_ID")]


def test_served_text_parses_like_the_real_scrape():
    devices = {"gpu-node-0": dcgm_sim.node_devices(node(count=2))}
    held = dcgm_sim.live_gpu_pods([pod("job-a-x1")], {"gpu-node-0"})
    assignment, _unplaced = dcgm_sim.assign({}, devices, held)
    ours = {f.name: f for f in text_string_to_metric_families(render(dcgm_sim.samples(devices, assignment, held)))}
    real = fixture_families()
    for name in ("DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE", "DCGM_FI_PROF_GR_ENGINE_ACTIVE"):
        assert ours[name].type == real[name].type and ours[name].documentation == real[name].documentation
        real_names = set(real[name].samples[0].labels) - {"GPU_I_PROFILE", "GPU_I_ID"}
        assert all(set(s.labels) == real_names for s in ours[name].samples)
    # A free device carries empty pod labels, as the real one does.
    assert all(s.labels["pod"] == "" and s.labels["namespace"] == "" for s in real["DCGM_FI_DEV_FB_USED"].samples)
    free = [s for s in ours["DCGM_FI_DEV_FB_USED"].samples if s.labels["gpu"] == "1"][0]
    assert (free.labels["pod"], free.labels["namespace"], free.labels["container"], free.value) == ("", "", "", 0)
    busy = [s for s in ours["DCGM_FI_DEV_FB_USED"].samples if s.labels["gpu"] == "0"][0]
    assert (busy.labels["namespace"], busy.labels["pod"], busy.labels["container"]) == ("team-a", "job-a-x1", "load")


def test_units_follow_the_real_scrape():
    """FB in whole MiB adding up to the device's memory, GR_ENGINE_ACTIVE a ratio in [0, 1], GPU_UTIL in %."""
    real = fixture_families()
    for s in real["DCGM_FI_PROF_GR_ENGINE_ACTIVE"].samples:
        assert 0 <= s.value <= 1
    sizes = {s.labels["GPU_I_ID"]: s.value for s in real["DCGM_FI_DEV_FB_USED"].samples}
    for s in real["DCGM_FI_DEV_FB_FREE"].samples:
        total = sizes[s.labels["GPU_I_ID"]] + s.value
        assert total == int(total) and 4000 < total < 10000  # a 1g.5gb or 2g.10gb instance, in MiB
    values = dcgm_sim.device_values(81559, memory_fraction=0.8, utilization=100)
    assert values["DCGM_FI_DEV_FB_USED"] + values["DCGM_FI_DEV_FB_FREE"] == 81559
    assert values["DCGM_FI_DEV_FB_USED"] == int(512 + 0.8 * (81559 - 512))
    assert values["DCGM_FI_PROF_GR_ENGINE_ACTIVE"] == 1.0 and values["DCGM_FI_DEV_GPU_UTIL"] == 100
    mig = dcgm_sim.device_values(9856, memory_fraction=0.5, utilization=37.5, mig=True)
    assert "DCGM_FI_DEV_GPU_UTIL" not in mig and mig["DCGM_FI_PROF_GR_ENGINE_ACTIVE"] == 0.375
    idle = dcgm_sim.device_values(81559, held=False)
    assert idle == {"DCGM_FI_DEV_FB_USED": 0, "DCGM_FI_DEV_FB_FREE": 81559, "DCGM_FI_PROF_GR_ENGINE_ACTIVE": 0.0,
                    "DCGM_FI_DEV_GPU_UTIL": 0}


def test_uuids_and_names_are_the_simulated_nvidia_smis():
    devices = dcgm_sim.node_devices(node(count=2))
    smi = simulated_gpus("gpu-node-0", "NVIDIA-H100-80GB-HBM3", 2)
    assert [d["uuid"] for d in devices] == [g["uuid"] for g in smi]
    assert [d["model_name"] for d in devices] == [g["name"] for g in smi]
    assert devices[0]["memory_mib"] == 81559 and dcgm_sim.node_devices(node(memory=40000))[0]["memory_mib"] == 40000


def test_only_live_pods_on_simulated_gpu_nodes_hold_gpus():
    pods = [pod("run"), pod("done", phase="Succeeded"), pod("pending", phase="Pending"),
            pod("elsewhere", node_name="cpu-node"), pod("cpu-only", gpus=0),
            pod("mig", resource="nvidia.com/mig-1g.10gb")]
    held = dcgm_sim.live_gpu_pods(pods, {"gpu-node-0"})
    assert [p["name"] for p in held] == ["mig", "run"]
    assert held[1]["memory_fraction"] == 0.8 and held[1]["utilization"] == 100.0
    assert held[0]["containers"] == [("load", "nvidia.com/mig-1g.10gb", 1)]
    # A node without MIG has no 1g.10gb instance for it: reported, never invented.
    assert dcgm_sim.assign({}, {"gpu-node-0": dcgm_sim.node_devices(node(count=1))}, held)[1] == ["team-a/mig"]


def test_a_pod_without_annotations_is_idle_and_bad_annotations_are_named():
    held = dcgm_sim.live_gpu_pods([pod("quiet", fraction=None, util=None)], {"gpu-node-0"})
    assert (held[0]["memory_fraction"], held[0]["utilization"]) == (0.0, 0.0)
    with pytest.raises(dcgm_sim.DcgmSimError, match="team-a/bad: annotation fairgpu.io/simulated-gpu-memory-fraction"):
        dcgm_sim.live_gpu_pods([pod("bad", fraction="1.5")], {"gpu-node-0"})
    with pytest.raises(dcgm_sim.DcgmSimError, match="unknown fairgpu.io/simulated-gpu-product"):
        dcgm_sim.node_devices(node(product="NVIDIA-B999"))


def test_pods_keep_their_gpus_and_new_pods_take_the_lowest_free_ones():
    devices = {"gpu-node-0": dcgm_sim.node_devices(node(count=4))}
    first = dcgm_sim.live_gpu_pods([pod("a", gpus=2, start="t1"), pod("b", start="t2")], {"gpu-node-0"})
    assignment, unplaced = dcgm_sim.assign({}, devices, first)
    assert assignment == {"uid-a": [("load", "gpu-node-0", 0), ("load", "gpu-node-0", 1)],
                          "uid-b": [("load", "gpu-node-0", 2)]} and unplaced == []
    # a finishes; c arrives and takes GPU 0; b keeps GPU 2; d wants 3 of the 2 left: not invented.
    second = dcgm_sim.live_gpu_pods([pod("b", start="t2"), pod("c", start="t3"), pod("d", gpus=3, start="t4")],
                                    {"gpu-node-0"})
    assignment, unplaced = dcgm_sim.assign(assignment, devices, second)
    assert assignment == {"uid-b": [("load", "gpu-node-0", 2)], "uid-c": [("load", "gpu-node-0", 0)]}
    assert unplaced == ["team-a/d"]
    rows = dcgm_sim.samples(devices, assignment, second)
    used = {dict(labels)["gpu"]: (dict(labels)["pod"], value) for name, labels, value in rows
            if name == "DCGM_FI_DEV_FB_USED"}
    assert used["0"][0] == "c" and used["2"][0] == "b" and used["1"] == ("", 0) and used["3"] == ("", 0)


def test_mig_instances_are_devices_of_their_own():
    mig_node = node(count=2)
    mig_node["metadata"]["annotations"]["fairgpu.io/simulated-mig-layout"] = json.dumps([{"2g.20gb": 2}, None])
    devices = {"gpu-node-0": dcgm_sim.node_devices(mig_node)}
    smi = simulated_gpus("gpu-node-0", "NVIDIA-H100-80GB-HBM3", 2, [{"2g.20gb": 2}, None])
    instances = [d for d in devices["gpu-node-0"] if d.get("mig_profile")]
    assert [(d["gpu"], d["gi_id"], d["resource"]) for d in instances] == [
        (0, gi["id"], "nvidia.com/mig-2g.20gb") for gi in smi[0]["gpu_instances"]]
    assert [d["key"] for d in devices["gpu-node-0"] if not d.get("mig_profile")] == [1], "GPU 1 stays whole"
    assert instances[0]["memory_mib"] == 20096 and instances[0]["uuid"] == smi[0]["uuid"]
    held = dcgm_sim.live_gpu_pods([pod("slice", resource="nvidia.com/mig-2g.20gb"), pod("whole", start="t9")],
                                  {"gpu-node-0"})
    assignment, unplaced = dcgm_sim.assign({}, devices, held)
    assert unplaced == [] and assignment["uid-whole"] == [("load", "gpu-node-0", 1)]
    assert assignment["uid-slice"] == [("load", "gpu-node-0", instances[0]["key"])]
    rows = dcgm_sim.samples(devices, assignment, held)
    slice_rows = [(name, dict(labels)) for name, labels, _value in rows if dict(labels)["pod"] == "slice"]
    assert {name for name, _labels in slice_rows} == {"DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE",
                                                      "DCGM_FI_PROF_GR_ENGINE_ACTIVE"}, "no GPU_UTIL for MIG"
    assert slice_rows[0][1]["GPU_I_PROFILE"] == "2g.20gb" and slice_rows[0][1]["GPU_I_ID"] == str(instances[0]["gi_id"])


def test_under_the_single_strategy_a_pod_asking_for_nvidia_com_gpu_gets_a_mig_device():
    """Under mig.strategy=single the device plugin advertises each MIG device as nvidia.com/gpu
    (k8s-device-plugin v0.20.0 internal/rm/rm.go): a pod asking for nvidia.com/gpu holds a GPU instance, and
    DCGM still labels it with its profile (the exporter reads the node's GFD label nvidia.com/mig.strategy)."""
    single = node(count=1)
    single["metadata"]["annotations"]["fairgpu.io/simulated-mig-layout"] = json.dumps([{"1g.10gb": 7}])
    single["metadata"]["labels"] = {"nvidia.com/mig.strategy": "single"}
    devices = {"gpu-node-0": dcgm_sim.node_devices(single)}
    assert {d["resource"] for d in devices["gpu-node-0"]} == {"nvidia.com/gpu"} and len(devices["gpu-node-0"]) == 7
    held = dcgm_sim.live_gpu_pods([pod("a", gpus=2)], {"gpu-node-0"})
    assignment, unplaced = dcgm_sim.assign({}, devices, held)
    assert unplaced == [] and len(assignment["uid-a"]) == 2
    rows = dcgm_sim.samples(devices, assignment, held)
    assert {dict(labels)["GPU_I_PROFILE"] for name, labels, _value in rows if dict(labels)["pod"] == "a"} == {"1g.10gb"}
    # The same node under mixed: nvidia.com/gpu finds no device (the GPU is all MIG), the MIG resource does.
    single["metadata"]["labels"]["nvidia.com/mig.strategy"] = "mixed"
    devices = {"gpu-node-0": dcgm_sim.node_devices(single)}
    assert dcgm_sim.assign({}, devices, held)[1] == ["team-a/a"]


def test_a_node_without_profiling_publishes_gpu_util_and_no_prof_fields():
    """Field reports: dcgm-exporter skips DCGM_FI_PROF_GR_ENGINE_ACTIVE on GPUs without profiling support or without
    DCGM's profiling module (NVIDIA/dcgm-exporter#395, #439, #707); GPU_UTIL stays on whole GPUs, MIG instances then
    have no utilisation field. The rule fairgpu:gpu_utilisation:ratio falls back to GPU_UTIL for such GPUs."""
    plain = node(name="gpu-node-1", count=1)
    plain["metadata"]["annotations"][dcgm_sim.ANNOTATION_PROFILING] = "false"
    mig = node(name="gpu-node-2", count=1)
    mig["metadata"]["annotations"][dcgm_sim.ANNOTATION_PROFILING] = "false"
    mig["metadata"]["annotations"]["fairgpu.io/simulated-mig-layout"] = json.dumps([{"2g.20gb": 1}])
    profiled = node(name="gpu-node-3", count=1)
    devices = {n["metadata"]["name"]: dcgm_sim.node_devices(n) for n in (plain, mig, profiled)}
    assert [d["profiling"] for n in sorted(devices) for d in devices[n]] == [False, False, True]
    held = dcgm_sim.live_gpu_pods([pod("a", node_name="gpu-node-1", util="40"),
                                   pod("b", node_name="gpu-node-2", resource="nvidia.com/mig-2g.20gb"),
                                   pod("c", node_name="gpu-node-3", util="60")],
                                  {"gpu-node-1", "gpu-node-2", "gpu-node-3"})
    assignment, unplaced = dcgm_sim.assign({}, devices, held)
    assert unplaced == []
    names = {}
    for name, labels, value in dcgm_sim.samples(devices, assignment, held):
        names.setdefault(dict(labels)["pod"], {})[name] = value
    assert names["a"] == {"DCGM_FI_DEV_GPU_UTIL": 40, "DCGM_FI_DEV_FB_USED": names["a"]["DCGM_FI_DEV_FB_USED"],
                          "DCGM_FI_DEV_FB_FREE": names["a"]["DCGM_FI_DEV_FB_FREE"]}
    assert set(names["b"]) == {"DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE"}
    assert names["c"]["DCGM_FI_PROF_GR_ENGINE_ACTIVE"] == 0.6 and names["c"]["DCGM_FI_DEV_GPU_UTIL"] == 60
