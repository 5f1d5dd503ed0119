"""The noisy-neighbour measurement on a bare host (issue 28, item 9; a measurement, not a test): the load generator
(files/gpu_load.py) as processes, a victim alone and then beside a neighbour, judged and written by
plugins/module_utils/validation/noisy.py, the section the ``noisy_neighbour`` validate scenario writes on a cluster.

Placements, from ``nvidia-smi -L`` (parsed by plugins/module_utils/mig/nvidia_smi.py):
  - on the same GPU: both processes on the first GPU not in MIG mode (time-sliced: shown, not a promise);
  - each on its own GPU: the first two GPUs not in MIG mode, where the host has two (judged: at most 20 % below);
  - on other MIG instances of the same GPU: the first GPU with two MIG devices (judged: at most 5 % below).
Each run pins its process with ``CUDA_VISIBLE_DEVICES=<UUID>``; alone and beside runs alternate, ``--repeats``
of each, so that a drift of the host (clocks, heat) falls on both.

Without a GPU (no nvidia-smi, none listed, or ``--device cpu``) the same runs go to the CPU: one BLAS thread per
process, on the same core ("same GPU") and on two cores ("own GPU") where the host has two. The result says it
measured the CPU and judges nothing.

The load generator needs PyTorch with CUDA for a GPU; the project's virtualenv has no torch, so give an interpreter
that has it (``--python``, ``NOISY_PYTHON``). On GPUs each load runs with ``--device cuda``: one that finds no CUDA
device stops the measurement with gpu_load.py's message instead of running on the CPU under a GPU's name.

Usage: make noisy-neighbour [NOISY_SECONDS=30] [NOISY_REPEATS=3] [NOISY_DEVICE=auto|cpu] [NOISY_PYTHON=python3]
       python tests/bench/noisy_neighbour.py --seconds 30 --repeats 3 --python /usr/bin/python3
Writes <out>/noisy.json (the result) and <out>/noisy.md (the section); exit status 1 when a judged check failed,
2 for bad arguments.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, ".collections"))

from ansible_collections.fairgpu.tenancy.plugins.module_utils.mig import nvidia_smi  # noqa: E402
from ansible_collections.fairgpu.tenancy.plugins.module_utils.validation import noisy  # noqa: E402

LOAD = os.path.join(ROOT, "files", "gpu_load.py")
VICTIM, NEIGHBOUR = "victim", "neighbour"


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.partition("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=30.0, help="each run's length (seconds, default 30)")
    parser.add_argument("--repeats", type=int, default=3, help="runs alone and beside per placement (default 3)")
    parser.add_argument("--device", choices=["auto", "cpu"], default="auto", help="auto: the GPUs nvidia-smi lists")
    parser.add_argument("--out", default=os.path.join(ROOT, "results", "noisy-neighbour"), help="output directory")
    parser.add_argument("--python", default=sys.executable,
                        help="the interpreter that runs gpu_load.py (one with PyTorch and CUDA for a GPU)")
    args = parser.parse_args(argv)
    if args.seconds <= 0 or args.repeats < 1:
        parser.error("--seconds must be > 0 and --repeats >= 1")
    return args


def gpu_placements(listing):
    """``{placement: {"where", "victim": env, "neighbour": env}}`` from ``nvidia-smi -L``'s text (the GPUs as
    ``nvidia_smi.parse_list`` reads them); a placement the host cannot give is left out."""
    gpus = nvidia_smi.parse_list(listing)
    whole = [g for g in gpus if not g["mig_devices"]]
    split = [g for g in gpus if len(g["mig_devices"]) >= 2]
    out = {}
    if whole:
        device = {"CUDA_VISIBLE_DEVICES": whole[0]["uuid"]}
        out["shared_gpu"] = {"where": "GPU %d %s for both" % (whole[0]["index"], whole[0]["name"]),
                             "victim": device, "neighbour": device}
    if len(whole) >= 2:
        out["own_gpus"] = {"where": "GPU %d and GPU %d, %s" % (whole[0]["index"], whole[1]["index"], whole[0]["name"]),
                           "victim": {"CUDA_VISIBLE_DEVICES": whole[0]["uuid"]},
                           "neighbour": {"CUDA_VISIBLE_DEVICES": whole[1]["uuid"]}}
    if split:
        first, second = split[0]["mig_devices"][:2]
        out["mig_instances"] = {"where": "MIG %s and %s of GPU %d %s" % (first["profile"], second["profile"],
                                                                         split[0]["index"], split[0]["name"]),
                                "victim": {"CUDA_VISIBLE_DEVICES": first["uuid"]},
                                "neighbour": {"CUDA_VISIBLE_DEVICES": second["uuid"]}}
    return out


def cpu_placements(cores):
    """The CPU's stand-ins: both processes on the first core, and on two cores where there are two."""
    out = {"shared_gpu": {"where": "CPU core %d for both" % cores[0], "victim": {"cpus": [cores[0]]},
                          "neighbour": {"cpus": [cores[0]]}}}
    if len(cores) >= 2:
        out["own_gpus"] = {"where": "CPU cores %d and %d" % (cores[0], cores[1]), "victim": {"cpus": [cores[0]]},
                           "neighbour": {"cpus": [cores[1]]}}
    return out


def listing():
    """``nvidia-smi -L``'s output, or None without nvidia-smi (or when it fails: no driver)."""
    if not shutil.which("nvidia-smi"):
        return None
    done = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, check=False, timeout=60)
    return done.stdout if done.returncode == 0 else None


def start(python, tenant, pin, seconds, device):
    """One load generator process for ``tenant`` pinned by ``pin`` (environment, or ``{"cpus": [...]}``)."""
    env = dict(os.environ, TENANT=tenant, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
    cpus = pin.get("cpus")
    env.update(dict((k, v) for k, v in pin.items() if k != "cpus"))
    command = [python, LOAD, "--seconds", str(seconds), "--device", device, "--cpu-memory-mib", "16"]
    return subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=(lambda: os.sched_setaffinity(0, cpus)) if cpus else None)


def finish(process, tenant):
    out, err = process.communicate(timeout=3600)
    if process.returncode != 0:
        raise SystemExit("gpu_load.py for %s failed (%d): %s" % (tenant, process.returncode, err.strip()))
    return noisy.load_records(out, "gpu_load.py of %s" % tenant)[0]


def measure(python, placements, seconds, repeats, device):
    """Per placement, ``repeats`` runs of the victim alone and as many beside the neighbour, alternating."""
    out = {}
    for name, spec in sorted(placements.items()):
        runs = {"where": spec["where"], "alone": [], "beside": []}
        for _repeat in range(repeats):
            runs["alone"].append(finish(start(python, VICTIM, spec["victim"], seconds, device), VICTIM))
            pair = (start(python, VICTIM, spec["victim"], seconds, device),
                    start(python, NEIGHBOUR, spec["neighbour"], seconds, device))
            runs["beside"].append((finish(pair[0], VICTIM), finish(pair[1], NEIGHBOUR)))
        out[name] = runs
    return out


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    text = listing() if args.device == "auto" else None
    placements = gpu_placements(text) if text else {}
    device = "cuda"
    if not placements:
        placements, device = cpu_placements(sorted(os.sched_getaffinity(0))), "cpu"
    result = noisy.judge(VICTIM, NEIGHBOUR, measure(args.python, placements, args.seconds, args.repeats, device),
                         expect_gpu=device == "cuda")
    result["notes"].insert(0, "Bare host, %s s per run, %d runs alone and %d beside per placement (%s)." % (
        args.seconds, args.repeats, args.repeats, "tests/bench/noisy_neighbour.py"))
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "noisy.json"), "w") as handle:
        json.dump(result, handle, indent=2, sort_keys=True)
    page = noisy.markdown(result)
    with open(os.path.join(args.out, "noisy.md"), "w") as handle:
        handle.write(page + "\n")
    print(page)
    return 0 if all(c["passed"] for c in result["checks"]) else 1


if __name__ == "__main__":
    sys.exit(main())
