"""GroupNorm + SiLU on Stable Diffusion UNet shapes (NHWC) against the memory-bandwidth limit.

    python benchmarks/group_norm_bench.py [--dist dist] [--dtypes fp16,fp32,bf16]

GPU time per launch by CUDA-graph replay over rotating buffers larger than L2; bytes = one read of x
and one write of y (2 * n * h * w * c * sizeof(dtype)); ceiling = device-to-device copy in the same
run; baseline = torch.nn.functional.group_norm + silu (NCHW, as models call it). Every candidate of
the ORT group is timed (exhaustive); rows go to benchmarks/results/results.csv.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from benchmarks.gpu_common import open_gpu, torch_graph_ms  # noqa: E402
from benchmarks.results import RESULTS, write_rows  # noqa: E402
from runtime import Unsupported  # noqa: E402
from runtime.memory import element_size, to_storage  # noqa: E402
from runtime.ops.group_norm import GroupNorm  # noqa: E402
from runtime.timing import rotation_slots  # noqa: E402

SHAPES = [(2, 64, 64, 320), (2, 32, 32, 640), (2, 16, 16, 1280), (2, 8, 8, 1280), (1, 64, 64, 320)]
GROUPS = 32


def torch_ms(n, h, w, c, dtype, reps=50) -> float | None:
    try:
        import torch
    except ImportError:
        return None
    dt = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[dtype]
    xs = [torch.randn(n, c, h, w, device="cuda", dtype=dt) for _ in range(8)]
    weight = torch.randn(c, device="cuda", dtype=dt)
    bias = torch.randn(c, device="cuda", dtype=dt)
    fn = lambda x: torch.nn.functional.silu(torch.nn.functional.group_norm(x, GROUPS, weight, bias, 1e-5))
    return torch_graph_ms(fn, xs, reps)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dist", default=str(ROOT / "dist"))
    ap.add_argument("--dtypes", default="fp16,fp32,bf16")
    ap.add_argument("--results", default=str(RESULTS))
    args = ap.parse_args()
    backend, registry, timer, ceiling = open_gpu(args.dist)
    rows = [{"provider": "copy", "metric": "GB/s", "unit": "GB/s", "value": f"{ceiling:.1f}"}]
    rng = np.random.default_rng()
    for dtype in args.dtypes.split(","):
        op = GroupNorm(registry, dtype, silu=True)
        for n, h, w, c in SHAPES:
            size = n * h * w * c * element_size(dtype)
            slots = rotation_slots(2 * size, backend.limits["l2_bytes"])
            inp, out = backend.alloc(slots * size), backend.alloc(slots * size)
            gamma, beta = backend.alloc(4 * c), backend.alloc(4 * c)
            host = np.ascontiguousarray(to_storage(rng.standard_normal((n * h * w, c)).astype(np.float32), dtype))
            for s in range(slots):
                backend.copy_htod(inp + s * size, host.ctypes.data, size)
            ones = np.ones(c, np.float32)
            backend.copy_htod(gamma, ones.ctypes.data, 4 * c)
            backend.copy_htod(beta, ones.ctypes.data, 4 * c)
            timed = {}
            for name, _ in op.candidates(n, h * w, c, GROUPS):
                try:
                    launch = op.prepare(out=out, inp=inp, gamma=gamma, beta=beta, n=n, hw=h * w, c=c, groups=GROUPS,
                                        kernel=name)
                except Unsupported:
                    continue
                params = dict(zip(registry.artifacts.contract(op.group)["params"],
                                  (p["name"] for p in launch.kernel.info.params)))

                def body(stream, i, launch=launch, params=params, slots=slots, inp=inp, out=out, size=size):
                    s = i % slots  # rotate over slots larger than L2
                    launch.update({params["in"]: inp + s * size, params["out"]: out + s * size})
                    launch.fire(stream)

                timed[name] = timer.per_launch_ms(body, 50)
            for p in (inp, out, gamma, beta):
                backend.free(p)
            best = min(timed, key=timed.get)
            ms = timed[best]
            gbps = 2 * size / (ms * 1e-3) / 1e9
            ref = torch_ms(n, h, w, c, dtype)
            ref_note = f"  torch {ref * 1e3:.2f} us, speedup {ref / ms:.2f}x" if ref else ""
            print(f"{ms * 1e3:8.2f} us {gbps:8.1f} GB/s {100 * gbps / ceiling:5.1f}% copy {dtype} "
                  f"n={n} {h}x{w}x{c} groups={GROUPS} silu {best} ({len(timed)} candidates){ref_note}", flush=True)
            shape = f"{n}x{h}x{w}x{c}"
            rows += [{"provider": "best", "shape": shape, "dtype": dtype, "metric": "us", "unit": "us",
                      "value": f"{ms * 1e3:.3f}", "extra": best},
                     {"provider": "best", "shape": shape, "dtype": dtype, "metric": "pct_copy", "unit": "%",
                      "value": f"{100 * gbps / ceiling:.1f}", "extra": best}]
            if ref:
                rows.append({"provider": "torch", "shape": shape, "dtype": dtype, "metric": "us", "unit": "us",
                             "value": f"{ref * 1e3:.3f}", "extra": "group_norm+silu NCHW"})
            write_rows("group_norm_bandwidth", backend.device_name, rows, args.results)
    print("wrote", args.results)


if __name__ == "__main__":
    main()
