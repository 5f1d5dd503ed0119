import json
import os
import subprocess
import sys

import pytest

SCRIPT = os.path.join(os.path.dirname(__file__), "..", "..", "files", "gpu_load.py")


def test_runs_on_the_cpu_and_prints_one_json_line():
    out = subprocess.run([sys.executable, SCRIPT, "--seconds", "0.3", "--device", "cpu", "--cpu-memory-mib", "8"],
                         capture_output=True, text=True, env=dict(os.environ, TENANT="team-a"), check=True)
    lines = out.stdout.strip().splitlines()
    assert len(lines) == 1
    result = json.loads(lines[0])
    assert result["tenant"] == "team-a" and result["device"] == "cpu"
    assert result["memory_held_mib"] == 8.0 and result["matmuls"] >= 1 and result["tflops"] > 0
    assert result["seconds"] >= 0.3


@pytest.mark.parametrize("args, message", [
    (["--memory-fraction", "0"], "--memory-fraction must be in (0, 0.95]"),
    (["--seconds", "-1"], "--seconds must be > 0"),
])
def test_bad_arguments(args, message):
    out = subprocess.run([sys.executable, SCRIPT] + args, capture_output=True, text=True)
    assert out.returncode == 2 and message in out.stderr


def test_cuda_asked_without_cuda():
    out = subprocess.run([sys.executable, SCRIPT, "--device", "cuda", "--seconds", "0.1"], capture_output=True, text=True)
    assert out.returncode == 2 and "PyTorch with CUDA is not available" in out.stderr
