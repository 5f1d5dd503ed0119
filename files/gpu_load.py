# Copyright: fairgpu maintainers
# Apache License 2.0 (see LICENSE)
"""fairgpu's load generator: hold a share of accelerator memory and keep the device busy with matrix
multiplications for a given time, then print one JSON line with what was achieved.

With PyTorch and CUDA it allocates ``--memory-fraction`` of the device's *free* memory (default 0.8) and runs
float16 matmuls (backend ``torch-cuda``). Without a CUDA device it does the same on the CPU in float32, holding
``--cpu-memory-mib`` MiB instead: with PyTorch when it is installed (``torch-cpu``, the same code as on the GPU, which
is how the tests run the torch path), else with NumPy (``numpy-cpu``) or pure Python (``python-cpu``), so it runs
on any machine.

Environment: ``TENANT`` (reported as is; default ``unknown``).
Output (stdout, one line): {"tenant", "device", "backend", "memory_held_mib", "seconds", "matmuls",
"tflops", "started", "ended", "visible_devices"} where tflops is achieved TFLOP/s over the run (2*n^3 floating
point operations per matmul), started and ended the run's wall-clock bounds (Unix seconds; the noisy-neighbour
measurement checks two runs overlapped) and visible_devices the ``CUDA_VISIBLE_DEVICES`` it ran with (or null).
Exit status 0, or 2 for bad arguments.
"""

import argparse
import json
import os
import sys
import time

MIB = 1024 * 1024


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.partition("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="how long to run (seconds, default 60)")
    parser.add_argument("--memory-fraction", type=float, default=0.8,
                        help="fraction of the GPU's free memory to hold (0 < f <= 0.95, default 0.8)")
    parser.add_argument("--matrix-size", type=int, default=None,
                        help="n of the n x n matmuls (default 8192 on a GPU, 512 on the CPU)")
    parser.add_argument("--cpu-memory-mib", type=int, default=64,
                        help="memory to hold when running on the CPU (MiB, default 64)")
    parser.add_argument("--device", choices=["auto", "cuda", "cpu"], default="auto",
                        help="auto: CUDA when available, else CPU")
    args = parser.parse_args(argv)
    if not 0 < args.memory_fraction <= 0.95:
        parser.error("--memory-fraction must be in (0, 0.95], got %s" % args.memory_fraction)
    if args.seconds <= 0:
        parser.error("--seconds must be > 0, got %s" % args.seconds)
    if args.matrix_size is not None and args.matrix_size < 1:
        parser.error("--matrix-size must be >= 1")
    if args.cpu_memory_mib < 0:
        parser.error("--cpu-memory-mib must be >= 0")
    return args


def _torch():
    try:
        import torch  # noqa: F401 (optional dependency)
        return torch
    except ImportError:
        return None


def run_torch(torch, args, on_gpu):
    """The matmul loop on ``cuda`` (float16, ``--memory-fraction`` of the free memory held) or on the CPU
    (float32, ``--cpu-memory-mib`` MiB held); the working matrices count in what is held."""
    device = torch.device("cuda" if on_gpu else "cpu")
    n = args.matrix_size or (8192 if on_gpu else 512)
    dtype = torch.float16 if on_gpu else torch.float32
    # The share to hold, measured before anything is allocated (the working matrices count in it).
    target = int(torch.cuda.mem_get_info(device)[0] * args.memory_fraction) if on_gpu else args.cpu_memory_mib * MIB
    a = torch.randn(n, n, device=device, dtype=dtype)
    b = torch.randn(n, n, device=device, dtype=dtype)
    working = 3 * n * n * a.element_size()
    hold_bytes = max(target - working, 0)
    ballast = torch.ones(hold_bytes, dtype=torch.uint8, device=device)  # written, so the memory is really held

    def synchronize():
        if on_gpu:
            torch.cuda.synchronize(device)

    matmuls, start = 0, time.perf_counter()
    while time.perf_counter() - start < args.seconds:
        c = a @ b
        matmuls += 1
        if matmuls % 16 == 0:
            synchronize()
    synchronize()
    elapsed = time.perf_counter() - start
    del c
    return {
        "device": torch.cuda.get_device_name(device) if on_gpu else "cpu",
        "backend": "torch-cuda" if on_gpu else "torch-cpu",
        "memory_held_mib": round((ballast.numel() + working) / MIB, 1),
        "seconds": round(elapsed, 3),
        "matmuls": matmuls,
        "tflops": round(2.0 * n ** 3 * matmuls / elapsed / 1e12, 6),
    }


def run_cpu(args):
    """Without PyTorch: float32 NumPy matmuls, or pure-Python ones on 64 x 64 at most without NumPy."""
    n = args.matrix_size or 512
    try:
        import numpy
    except ImportError:
        numpy = None
    ballast = bytearray(args.cpu_memory_mib * MIB)
    for offset in range(0, len(ballast), 4096):  # touch every page so the memory is really held
        ballast[offset] = 1
    matmuls, start = 0, time.perf_counter()
    if numpy is not None:
        a = numpy.random.rand(n, n).astype(numpy.float32)
        b = numpy.random.rand(n, n).astype(numpy.float32)
        while time.perf_counter() - start < args.seconds:
            a @ b
            matmuls += 1
        backend = "numpy-cpu"
    else:
        n = min(n, 64)
        a = [[float(i * j % 7) for j in range(n)] for i in range(n)]
        bt = [list(col) for col in zip(*a)]
        while time.perf_counter() - start < args.seconds:
            [[sum(x * y for x, y in zip(row, col)) for col in bt] for row in a]
            matmuls += 1
        backend = "python-cpu"
    elapsed = time.perf_counter() - start
    return {
        "device": "cpu",
        "backend": backend,
        "memory_held_mib": round(len(ballast) / MIB, 1),
        "seconds": round(elapsed, 3),
        "matmuls": matmuls,
        "tflops": round(2.0 * n ** 3 * matmuls / elapsed / 1e12, 6),
    }


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    torch = _torch()
    on_gpu = torch is not None and args.device != "cpu" and torch.cuda.is_available()
    if args.device == "cuda" and not on_gpu:
        print("gpu_load: --device cuda asked, but PyTorch with CUDA is not available", file=sys.stderr)
        return 2
    started = time.time()
    result = run_torch(torch, args, on_gpu) if torch is not None else run_cpu(args)
    result = dict(tenant=os.environ.get("TENANT", "unknown"), started=round(started, 3), ended=round(time.time(), 3),
                  visible_devices=os.environ.get("CUDA_VISIBLE_DEVICES"), **result)
    print(json.dumps(result, sort_keys=True))
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
