"""The noisy-neighbour measurement (issue 28, item 9): the judge (plugins/module_utils/validation/noisy.py) on the
load generator's lines, the validate scenario's runs against a small fake of the API server, and the bare-host
script (tests/bench/noisy_neighbour.py) planning from real nvidia-smi -L captures and measuring this machine's CPU.

The CPU lines are the load generator's own, run here (``run_load``); no GPU was at hand, so the GPU lines are written
in the shape files/gpu_load.py's run_cuda prints (backend torch-cuda), with made-up figures."""

import importlib.util
import json
import os
import subprocess
import sys

import pytest

from ansible_collections.fairgpu.tenancy.plugins.module_utils.validation import engine, noisy
from ansible_collections.fairgpu.tenancy.plugins.module_utils.common.waiter import Waiter

from fake_clock import FakeClock
from test_nvidia_smi import fixture
from test_validation_engine import SETTINGS, TENANTS, CAPACITY

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LOAD = os.path.join(ROOT, "files", "gpu_load.py")
BARE_HOST = os.path.join(ROOT, "tests", "bench", "noisy_neighbour.py")


def gpu(tenant, tflops, started=100.0, ended=160.0, backend="torch-cuda"):
    return {"tenant": tenant, "device": "NVIDIA H100 80GB HBM3", "backend": backend, "memory_held_mib": 65536.0,
            "seconds": ended - started, "matmuls": 1000, "tflops": tflops, "started": started, "ended": ended,
            "visible_devices": None}


def runs(alone, beside, where="node gpu-1", neighbour_start=100.0):
    return {"where": where, "alone": [gpu("team-a", t) for t in alone],
            "beside": [(gpu("team-a", t), gpu("team-b", 500.0, neighbour_start, neighbour_start + 60))
                       for t in beside]}


def run_load(tenant, seconds="0.3"):
    out = subprocess.run([sys.executable, LOAD, "--seconds", seconds, "--device", "cpu", "--cpu-memory-mib", "8"],
                         capture_output=True, text=True, env=dict(os.environ, TENANT=tenant), check=True)
    return out.stdout


def test_the_load_generators_line_is_read_from_a_log_among_other_lines():
    log = "WARNING: a library said something\n" + run_load("team-a") + "{not json\n"
    (record,) = noisy.load_records(log, "pod team-a/x")
    assert record["tenant"] == "team-a" and record["backend"] == "numpy-cpu" and record["tflops"] > 0
    assert record["ended"] > record["started"]


@pytest.mark.parametrize("text, words", [
    ("nothing here\n", "pod p: no line of the load generator"),
    ('{"tenant": "a", "tflops": 1.0, "backend": "torch-cuda"}\n', "pod p: the load generator's line lacks started, ended"),
])
def test_a_log_without_a_whole_line_is_refused_naming_the_pod(text, words):
    with pytest.raises(noisy.LoadOutputError) as raised:
        noisy.load_records(text, "pod p")
    assert str(raised.value).startswith(words)


def test_whole_gpus_within_20_percent_pass():
    result = noisy.judge("team-a", "team-b", {"own_gpus": runs([400, 410, 405], [380, 390, 385])})
    overlapped, throughput = result["checks"]
    assert overlapped["passed"] and throughput["passed"], result["checks"]
    assert throughput["check"] == "team-a each on its own device (node gpu-1)'s throughput beside team-b"
    assert throughput["observed"].startswith("4.9 % below alone (alone 405, beside 385 TFLOP/s")
    assert result["metrics"]["own_gpus"]["degradation"] == pytest.approx(1 - 385 / 405.0, abs=1e-4)


def test_a_neighbour_taking_more_than_20_percent_fails():
    result = noisy.judge("team-a", "team-b", {"own_gpus": runs([400, 410, 405], [300, 310, 320])})
    assert not result["checks"][1]["passed"] and "23.5 % below alone" in result["checks"][1]["observed"]


def test_on_mig_the_bound_is_5_percent():
    result = noisy.judge("team-a", "team-b", {"mig_instances": runs([100, 100, 100], [93, 94, 93])})
    assert not result["checks"][1]["passed"] and result["checks"][1]["expected"] == "at most 5 % below alone"
    assert noisy.judge("team-a", "team-b", {"mig_instances": runs([100] * 3, [98] * 3)})["checks"][1]["passed"]


def test_a_neighbour_that_did_not_run_beside_fails_the_overlap():
    # The neighbour started 30 s into the victim's 60 s run: half of it alone, a degradation that is not measured.
    result = noisy.judge("team-a", "team-b", {"own_gpus": runs([400], [399], neighbour_start=130.0)})
    overlapped = result["checks"][0]
    assert not overlapped["passed"] and overlapped["observed"] == [0.5]


def test_one_shared_gpu_and_the_cpu_are_shown_not_judged():
    result = noisy.judge("team-a", "team-b", {"shared_gpu": runs([400], [200])})
    assert result["checks"] == [] and "50.0 % below alone" in result["notes"][0] and "not a promise" in result["notes"][0]
    cpu = {"where": "CPU cores 0 and 1", "alone": [json.loads(run_load("team-a"))],
           "beside": [(json.loads(run_load("team-a")), json.loads(run_load("team-b")))]}
    result = noisy.judge("team-a", "team-b", {"own_gpus": cpu})
    assert result["checks"] == [] and "Measured the CPU, not a GPU (backends numpy-cpu)" in result["notes"][0]
    assert "| each on its own device | CPU cores 0 and 1 |" in noisy.markdown(result)


def test_on_a_cluster_with_gpus_a_load_that_ran_on_the_cpu_fails():
    # gpu_load.py falls back to the CPU where it finds no CUDA device; a neighbour that did so took nothing from
    # the victim's GPU, and its run must not pass the bound.
    runs_ = runs([400], [399])
    runs_["beside"] = [(runs_["beside"][0][0], gpu("team-b", 0.05, backend="numpy-cpu"))]
    result = noisy.judge("team-a", "team-b", {"own_gpus": runs_}, expect_gpu=True)
    on_gpu = result["checks"][0]
    assert not on_gpu["passed"] and on_gpu["observed"] == ["numpy-cpu", "torch-cuda"], on_gpu
    assert noisy.judge("team-a", "team-b", {"own_gpus": runs([400], [399])}, expect_gpu=True)["checks"][0]["passed"]


def test_simulated_gpus_measure_nothing_and_say_so():
    scenario = engine.SCENARIOS["noisy_neighbour"]
    executor = engine.Run(None, Waiter(FakeClock().monotonic, FakeClock().sleep, FakeClock().time), TENANTS[:2],
                          TENANTS, CAPACITY, "-queue", dict(SETTINGS), {"simulated": True}, "")
    plan = scenario.plan(executor)
    assert plan["placement"] == "own_gpus" and not plan["real_gpus"]
    (result,) = [judge(plan, {}, SETTINGS) for judge in scenario.judges]
    assert result["checks"] == [] and result["notes"][0].startswith("Not measured: the GPUs are simulated")


class _Log(object):
    def __init__(self, text):
        self.data = text.encode("utf-8")


class _Resource(object):
    def __init__(self, kind, client):
        self.kind, self.client = kind, client
        self.log = self

    def get(self, name, namespace, serialize):
        return _Log(self.client.logs[name])


class _Items(object):
    def __init__(self, items):
        self.items = items

    def to_dict(self):
        return {"items": self.items}


class FakeApi(object):
    """Nodes, the Jobs created (each succeeds at once with one Succeeded pod), and the pods' logs: the victim's line
    says ``alone`` or ``beside`` TFLOP/s by whether the neighbour's Job of the same repeat exists."""

    def __init__(self, nodes, alone=400.0, beside=380.0, fail=None, running=()):
        self.nodes, self.jobs, self.logs, self.fail, self.running = nodes, [], {}, fail, list(running)
        self.alone, self.beside = alone, beside

    def resource(self, kind, api_version):
        return _Resource(kind, self)

    def create(self, resource, body, namespace=None):
        self.jobs.append(body)

    def _line(self, job):
        tenant = job["metadata"]["labels"]["fairgpu.io/tenant"]
        index = int(job["metadata"]["name"].rsplit("-", 1)[1])
        tflops = 500.0 if tenant == "team-b" else (self.beside if index % 2 else self.alone)
        return json.dumps(gpu(tenant, tflops)) + "\n"

    def get(self, resource, namespace=None, label_selector=None, field_selector=None):
        if resource.kind == "Node":
            return _Items(self.nodes)
        if resource.kind == "Pod" and label_selector is None:
            assert field_selector == "status.phase!=Succeeded,status.phase!=Failed"
            return _Items(self.running)
        if resource.kind == "Job":
            name = field_selector.split("=", 1)[1]
            job = next(j for j in self.jobs if j["metadata"]["name"] == name)
            failed = self.fail == name
            return _Items([dict(job, status={"failed": 1} if failed else {"succeeded": 1})])
        name = label_selector.split("=", 1)[1]
        job = next(j for j in self.jobs if j["metadata"]["name"] == name)
        self.logs[name + "-pod"] = self._line(job)
        return _Items([{"metadata": {"name": name + "-pod"}, "status": {"phase": "Succeeded"}}])


def node(name, gpus, ready=True, unschedulable=False, product="NVIDIA-H100-80GB-HBM3"):
    return {"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name + "-host",
                                                  "nvidia.com/gpu.product": product}},
            "spec": {"unschedulable": unschedulable},
            "status": {"allocatable": {"nvidia.com/gpu": str(gpus)},
                       "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


def pod_on(node_name, gpus):
    return {"spec": {"nodeName": node_name, "containers": [{"resources": {"requests": {"nvidia.com/gpu": str(gpus)}}}]}}


H100 = [{"product": "NVIDIA-H100-80GB-HBM3", "gpus": 8}]


def real_run(api, repeats=2, tenants=None):
    clock = FakeClock()
    settings = dict(SETTINGS, noisy_repeats=repeats, noisy_seconds=30)
    tenants = tenants or [dict(t, products=H100) for t in TENANTS]
    return engine.Run(api, Waiter(clock.monotonic, clock.sleep, clock.time), tenants[:2], tenants, CAPACITY, "-queue",
                      settings, {"simulated": False}, "")


def test_the_runs_alternate_on_one_node_with_room_for_both_and_read_each_pods_line():
    api = FakeApi([node("small", 1), node("cordoned", 8, unschedulable=True), node("down", 8, ready=False),
                   node("busy", 8), node("a100", 8, product="NVIDIA-A100-SXM4-80GB"), node("gpu-2", 8)],
                  running=[pod_on("busy", 4), pod_on("busy", 3), pod_on("gpu-2", 6)])
    executor = real_run(api)
    plan = engine.SCENARIOS["noisy_neighbour"].plan(executor)
    kept = {}
    executor.do_noisy_runs(plan, kept, "runs", "noisy")
    assert kept["noisy"]["node"] == "gpu-2-host", "busy has 1 GPU free, a100 is of no tenant's flavor"
    assert all(j["spec"]["template"]["spec"]["containers"][0]["command"][-2:] == ["--device", "cuda"] for j in api.jobs)
    assert [(j["metadata"]["name"], j["spec"]["template"]["spec"]["nodeSelector"]["kubernetes.io/hostname"])
            for j in api.jobs] == [
        ("fairgpu-val-noisy-neighbour-team-a-0", "gpu-2-host"), ("fairgpu-val-noisy-neighbour-team-a-1", "gpu-2-host"),
        ("fairgpu-val-noisy-neighbour-team-b-0", "gpu-2-host"), ("fairgpu-val-noisy-neighbour-team-a-2", "gpu-2-host"),
        ("fairgpu-val-noisy-neighbour-team-a-3", "gpu-2-host"), ("fairgpu-val-noisy-neighbour-team-b-1", "gpu-2-host")]
    assert [r["tflops"] for r in kept["noisy"]["alone"]] == [400.0, 400.0]
    assert [(v["tflops"], n["tenant"]) for v, n in kept["noisy"]["beside"]] == [(380.0, "team-b")] * 2
    result = engine.judge_noisy_neighbour(dict(plan, real_gpus=True), kept, SETTINGS)
    assert all(c["passed"] for c in result["checks"]) and len(result["checks"]) == 3
    assert "node gpu-2-host, nvidia.com/gpu and nvidia.com/gpu" in result["checks"][2]["check"]


def test_no_node_with_room_for_both_or_a_failed_load_stops_the_scenario_naming_it():
    executor = real_run(FakeApi([node("gpu-1", 1)]))
    plan = engine.SCENARIOS["noisy_neighbour"].plan(executor)
    with pytest.raises(engine.StepFailed) as raised:
        executor.do_noisy_runs(plan, {}, "runs", "noisy")
    assert str(raised.value) == "runs: no Ready, schedulable node of NVIDIA-H100-80GB-HBM3 has 2 nvidia.com/gpu free"
    executor = real_run(FakeApi([node("gpu-1", 8)], fail="fairgpu-val-noisy-neighbour-team-a-0"))
    with pytest.raises(engine.StepFailed) as raised:
        executor.do_noisy_runs(plan, {}, "runs", "noisy")
    assert "Job team-a/fairgpu-val-noisy-neighbour-team-a-0 did not succeed" in str(raised.value)


def _bare_host():
    spec = importlib.util.spec_from_file_location("noisy_neighbour_bench", BARE_HOST)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_bare_host_plans_its_placements_from_nvidia_smi():
    bench = _bare_host()
    mig = bench.gpu_placements(fixture("L-h100-80gb-mixed-all-balanced.txt"))
    assert sorted(mig) == ["mig_instances"]
    assert mig["mig_instances"]["where"] == "MIG 3g.40gb and 2g.20gb of GPU 0 NVIDIA H100 80GB HBM3"
    assert mig["mig_instances"]["victim"] == {"CUDA_VISIBLE_DEVICES": "MIG-00000002-0000-4000-8000-000000000002"}
    # A pod's view of two containers' MIG devices: one device per listed GPU, no placement of two instances.
    assert bench.gpu_placements(fixture("L-h200-two-containers.txt")) == {}
    whole = "GPU 0: NVIDIA H100 (UUID: GPU-a)\nGPU 1: NVIDIA H100 (UUID: GPU-b)\n"
    placements = bench.gpu_placements(whole)
    assert sorted(placements) == ["own_gpus", "shared_gpu"]
    assert placements["own_gpus"]["neighbour"] == {"CUDA_VISIBLE_DEVICES": "GPU-b"}
    assert placements["shared_gpu"]["victim"] == placements["shared_gpu"]["neighbour"]


def test_the_bare_host_measures_this_cpu_and_says_it_is_not_a_gpu(tmp_path):
    done = subprocess.run([sys.executable, BARE_HOST, "--seconds", "0.5", "--repeats", "1", "--device", "cpu",
                           "--out", str(tmp_path)], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    with open(tmp_path / "noisy.json") as handle:
        result = json.load(handle)
    assert result["checks"] == []
    assert all("Measured the CPU, not a GPU" in note for note in result["notes"][1:]), result["notes"]
    measured = [p for p in ("shared_gpu", "own_gpus") if p in result["metrics"]]
    assert measured[0] == "shared_gpu" and len(measured) == min(2, len(os.sched_getaffinity(0)))
    for placement in measured:
        figures = result["metrics"][placement]
        assert figures["alone_tflops"] > 0 and figures["beside_tflops"] > 0 and figures["backends"] == ["numpy-cpu"]
        assert figures["overlap"][0] > 0.5, figures
    assert "## Noisy neighbour: victim beside neighbour" in (tmp_path / "noisy.md").read_text()


@pytest.mark.parametrize("resources, products, placement", [
    (("nvidia.com/gpu", "nvidia.com/gpu"), None, "own_gpus"),
    (("nvidia.com/mig-1g.10gb", "nvidia.com/mig-2g.20gb"), None, "mig_instances"),
    (("nvidia.com/mig-1g.10gb", "nvidia.com/gpu"), None, "own_gpus"),   # a MIG victim beside a whole GPU
    (("nvidia.com/gpu", "nvidia.com/gpu"), [{"product": "NVIDIA-H100-80GB-HBM3", "gpus": 8, "replicas": 4}],
     "shared_gpu"),                                                       # time-slicing: two "GPUs" may be one
])
def test_the_placement_follows_what_the_tenants_hold(resources, products, placement):
    tenants = [dict(t, gpu_resource=r, products=products or H100) for t, r in zip(TENANTS, resources)]
    assert engine.SCENARIOS["noisy_neighbour"].plan(real_run(None, tenants=tenants))["placement"] == placement


def test_on_a_gpu_host_without_torch_the_bare_host_stops_rather_than_measure_the_cpu(tmp_path):
    # A stand-in nvidia-smi (the format of fixtures/nvidia-smi's -L captures) lists two GPUs; this machine's
    # interpreter has no PyTorch with CUDA, so gpu_load.py --device cuda refuses and the measurement says why.
    fake = tmp_path / "bin" / "nvidia-smi"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\necho 'GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-a)'\n"
                    "echo 'GPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-b)'\n")
    fake.chmod(0o755)
    env = dict(os.environ, PATH="%s:%s" % (fake.parent, os.environ["PATH"]))
    done = subprocess.run([sys.executable, BARE_HOST, "--seconds", "0.2", "--repeats", "1", "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=120, check=False, env=env)
    assert done.returncode == 1 and "PyTorch with CUDA is not available" in done.stderr, done.stderr
    assert not (tmp_path / "noisy.json").exists()
