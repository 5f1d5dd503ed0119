import json
import os
import shutil
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
    out = subprocess.run([sys.executable, SCRIPT] + args, check=False, capture_output=True, text=True)
    assert out.returncode == 2 and message in out.stderr


def test_cuda_asked_without_cuda():
    out = subprocess.run([sys.executable, SCRIPT, "--device", "cuda", "--seconds", "0.1"],
                         check=False, capture_output=True, text=True)
    assert out.returncode == 2 and "PyTorch with CUDA is not available" in out.stderr


# The load pods run as a numeric non-root user with no passwd entry in the image and HOME at an emptyDir
# (roles/validate/templates/load-jobs.yaml.j2); here, harder still: nobody, and a HOME that neither exists nor can be made.
NOBODY = 65534


def _as_nobody():
    os.setgroups([])
    os.setgid(NOBODY)
    os.setuid(NOBODY)


def _run_unprivileged(args, env):
    """Run ``args`` as uid/gid 65534 when the tests run as root (as the load pod runs as a non-root user), else as
    the current (already non-root) user."""
    preexec = _as_nobody if os.geteuid() == 0 else None
    return subprocess.run(args, check=False, capture_output=True, text=True, env=env, cwd="/", preexec_fn=preexec,
                          timeout=60)


def _interpreter():
    """A Python the unprivileged user can execute: the tests' own, else the system's python3 (the tests'
    interpreter may live under a directory only root can enter)."""
    for candidate in (sys.executable, shutil.which("python3", path="/usr/local/bin:/usr/bin:/bin")):
        try:
            if candidate and _run_unprivileged([candidate, "-c", "pass"], {"PATH": "/usr/bin:/bin"}).returncode == 0:
                return candidate
        except PermissionError:  # exec refused: a directory on its path is closed to the user
            continue
    pytest.skip("no Python interpreter the unprivileged user may run")


def test_runs_as_non_root_with_an_unwritable_home(tmp_path):
    home = tmp_path / "no-such-home"  # tmp_path belongs to the tests' user: the unprivileged one cannot create it
    script = os.path.abspath(SCRIPT)
    python = _interpreter()
    # As the Job runs it: no --device (auto), the pod's environment only.
    out = _run_unprivileged([python, script, "--seconds", "0.3", "--cpu-memory-mib", "8"],
                            {"PATH": "/usr/bin:/bin", "HOME": str(home), "TENANT": "team-b"})
    assert out.returncode == 0, (python, out.stderr)
    lines = out.stdout.strip().splitlines()
    assert len(lines) == 1, out.stdout
    result = json.loads(lines[0])
    assert result["tenant"] == "team-b" and result["memory_held_mib"] == 8.0 and result["matmuls"] >= 1
    assert not home.exists()


def _torch_python():
    """The interpreter with PyTorch that make unit passes (FAIRGPU_TORCH_PYTHON, the Makefile's loadgen-torch).
    Under make test (FAIRGPU_MAKE_TEST, set by tests/lanes.py) it must be there; elsewhere its absence skips."""
    python = os.environ.get("FAIRGPU_TORCH_PYTHON", "")
    if os.access(python, os.X_OK):
        return python
    if os.environ.get("FAIRGPU_MAKE_TEST") is not None:
        pytest.fail("make test installs PyTorch first (make loadgen-torch), but FAIRGPU_TORCH_PYTHON=%r is not an "
                    "interpreter" % python)
    pytest.skip("no PyTorch interpreter: make loadgen-torch installs one, make unit passes it")


def test_the_torch_path_on_the_cpu():
    """The torch code the GPU runs (tensors, the matmul loop, the ballast), on the CPU: backend torch-cpu, the
    working matrices counted in what is held, and --device cuda still refused without a GPU (CUDA hidden, so that
    a machine with one runs the same test)."""
    python = _torch_python()
    env = dict(os.environ, TENANT="team-a", CUDA_VISIBLE_DEVICES="")
    out = subprocess.run([python, SCRIPT, "--seconds", "0.5", "--device", "cpu", "--cpu-memory-mib", "16"],
                         capture_output=True, text=True, env=env, check=True, timeout=120)
    lines = out.stdout.strip().splitlines()
    assert len(lines) == 1, out.stdout
    result = json.loads(lines[0])
    assert (result["backend"], result["device"], result["tenant"]) == ("torch-cpu", "cpu", "team-a"), result
    assert result["memory_held_mib"] == 16.0 and result["matmuls"] >= 1 and result["tflops"] > 0
    assert result["seconds"] >= 0.5 and result["ended"] - result["started"] >= 0.5
    # auto on a machine without CUDA: the same torch path on the CPU.
    auto = subprocess.run([python, SCRIPT, "--seconds", "0.2", "--cpu-memory-mib", "8", "--matrix-size", "64"],
                          capture_output=True, text=True, env=env, check=True, timeout=120)
    assert json.loads(auto.stdout.strip().splitlines()[-1])["backend"] == "torch-cpu"
    cuda = subprocess.run([python, SCRIPT, "--device", "cuda", "--seconds", "0.1"],
                          capture_output=True, text=True, env=env, check=False, timeout=120)
    assert cuda.returncode == 2 and "PyTorch with CUDA is not available" in cuda.stderr
