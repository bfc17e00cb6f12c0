"""Host wall time per launch from Python for a tiny softmax (1 x 1024 fp16), on the GPU machine.

    python benchmarks/launch_overhead.py [--dist dist] [--results FILE]

Two figures per provider:
- host_us_per_launch: host time per call in bursts of 256 launches (fewer than the driver's queue
  holds, synchronized between bursts), median over bursts: the Python + driver cost of one launch;
- sustained_us_per_launch: 20000 back-to-back launches then one synchronize, divided by 20000: bounded
  below by how fast the GPU itself retires tiny kernels.

Providers:
- tritonforge: runtime.PreparedLaunch.fire (argument struct packed once, one cuLaunchKernel per call)
- cuda-python-tuple: cuLaunchKernel with a fresh ((values), (types)) tuple per call
- triton-jit: the same kernel source through Triton's own launcher (if triton is installed)
- torch: torch.softmax eager (if torch is installed)
"""

from __future__ import annotations

import argparse
import ctypes
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
from tritonforge.runtime import load_artifacts  # noqa: E402
from tritonforge.runtime.cuda import CudaBackend  # noqa: E402
from tritonforge.runtime.memory import DeviceArray  # noqa: E402
from tritonforge.runtime.ops.softmax import Softmax  # noqa: E402
from tritonforge.runtime.registry import Registry  # noqa: E402

from benchmarks.results import RESULTS, write_rows  # noqa: E402

N_LAUNCHES = 20000
BATCH, COLS, KERNEL = 1, 1024, "softmax_fp16_1024"


BURST, BURSTS = 256, 100


def per_launch_us(fn, sync, n=N_LAUNCHES, repeats=5) -> tuple[float, float]:
    """(host us per launch in bursts, sustained us per launch)."""
    for _ in range(200):
        fn()
    sync()
    host = []
    for _ in range(BURSTS):
        sync()
        t0 = time.perf_counter()
        for _ in range(BURST):
            fn()
        host.append((time.perf_counter() - t0) / BURST * 1e6)
    sync()
    sustained = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        sync()
        sustained.append((time.perf_counter() - t0) / n * 1e6)
    return float(np.median(host)), float(np.median(sustained))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dist", default=str(ROOT / "dist" / "full"))
    ap.add_argument("--results", default=str(RESULTS))
    args = ap.parse_args()
    cuda = CudaBackend(0)
    reg = Registry(load_artifacts(Path(args.dist) / "cuda" / f"sm_{cuda.arch}"), cuda)
    x = DeviceArray.from_numpy(cuda, np.random.default_rng().standard_normal((BATCH, COLS)), "fp16")
    y = DeviceArray(cuda, BATCH, COLS, "fp16")
    results = {}

    launch = Softmax(reg, "fp16").prepare(y.ptr, x.ptr, BATCH, COLS, kernel=KERNEL)
    results["tritonforge"] = per_launch_us(launch.fire, cuda.synchronize)

    from cuda.bindings import driver as cu

    k = reg.kernel(KERNEL)
    types = (ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_void_p,
             ctypes.c_void_p)

    def tuple_launch():
        cu.cuLaunchKernel(k.function, BATCH, 1, 1, k.info.threads_per_block, 1, 1, k.info.shared, 0,
                          ((y.ptr, x.ptr, COLS, COLS, COLS, 0, 0), types), 0)

    results["cuda-python-tuple"] = per_launch_us(tuple_launch, cuda.synchronize)

    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None:
        tx = torch.randn(BATCH, COLS, device="cuda", dtype=torch.float16)
        results["torch"] = per_launch_us(lambda: torch.softmax(tx, -1), torch.cuda.synchronize)
        try:
            import importlib.util

            spec = importlib.util.spec_from_file_location("softmax_triton", ROOT / "kernels" / "softmax_triton.py")
            mod = importlib.util.module_from_spec(spec)
            sys.modules["softmax_triton"] = mod
            spec.loader.exec_module(mod)
            ty = torch.empty_like(tx)
            jit = mod.softmax_kernel[(BATCH,)]
            fn = lambda: jit(ty, tx, COLS, COLS, COLS, BLOCK_SIZE=1024, LOG=0, num_warps=4)
            results["triton-jit"] = per_launch_us(fn, torch.cuda.synchronize)
        except Exception as exc:  # triton missing or too old: report, don't fail the run
            print(f"triton-jit skipped: {type(exc).__name__}: {exc}")

    print(f"{'provider':22s} {'host us/launch':>15s} {'sustained us/launch':>20s}")
    rows = []
    for provider, (host, sustained) in results.items():
        print(f"{provider:22s} {host:15.2f} {sustained:20.2f}")
        common = {"provider": provider, "shape": f"{BATCH}x{COLS}", "dtype": "fp16", "unit": "us"}
        rows.append(common | {"metric": "host_us_per_launch", "value": f"{host:.3f}",
                              "extra": f"median of {BURSTS} bursts of {BURST}"})
        rows.append(common | {"metric": "sustained_us_per_launch", "value": f"{sustained:.3f}",
                              "extra": f"{N_LAUNCHES} launches, median of 5"})
    print("wrote", write_rows("launch_overhead", cuda.device_name, rows, args.results))


if __name__ == "__main__":
    main()
