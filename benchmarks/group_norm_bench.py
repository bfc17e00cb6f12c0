"""GroupNorm + SiLU on Stable Diffusion UNet shapes (NHWC) against the memory-bandwidth limit.

    python benchmarks/group_norm_bench.py [--dist dist] [--dtypes fp16,fp32,bf16] [--shapes 2x16x640,2x8x1280]
                                          [--no-silu]

GPU time per launch by CUDA-graph replay over rotating buffers larger than L2; bytes = one read of x
and one write of y (2 * n * h * w * c * sizeof(dtype)); ceilings, in the same run: a 1 GiB
device-to-device copy (% copy) and a copy of the tensor's own size timed the same way as the kernels
(% same-size copy: what launch and DRAM latency leave reachable at this size) and a copy by ORT's
grid of n * groups programs (what ORT's launch leaves reachable); baseline =
torch.nn.functional.group_norm + silu (NCHW, as models call it; with --no-silu, the Pass kernels against
group_norm alone, written as benchmark `group_norm_pass_bandwidth`). Every candidate is timed
(exhaustive) and checked against float64 first; it reports the best overall, the best in ORT's own
group (one program per (image, group)) and the tuner's pick. Rows go to benchmarks/results/results.csv.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
from tritonforge.runtime.ops.group_norm import GroupNormProblem, GroupNormSetup  # noqa: E402
from tritonforge.runtime.problem import gbps  # noqa: E402
from tritonforge.runtime.tune import tune_problem  # noqa: E402

from benchmarks.gpu_common import open_gpu, torch_graph_ms  # noqa: E402
from benchmarks.results import RESULTS, write_rows  # noqa: E402

SHAPES = [(2, 128, 128, 320), (2, 64, 64, 1280), (2, 64, 64, 320), (2, 64, 64, 640), (2, 32, 32, 640),
          (2, 32, 32, 1280), (2, 16, 16, 640), (2, 16, 16, 1280), (2, 8, 8, 1280), (1, 64, 64, 320)]
GROUPS = 32


def group_norm_shapes(text: str) -> list[tuple[int, int, int]]:
    """`2x16x640,1x8x320` -> [(2, 16, 640), (1, 8, 320)]: (n, H = W, C)."""
    shapes = []
    for item in text.split(","):
        parts = item.strip().split("x")
        if len(parts) != 3 or not all(p.isdigit() and int(p) > 0 for p in parts):
            raise argparse.ArgumentTypeError(f"{item!r} is not NxHxC (three positive integers)")
        shapes.append(tuple(int(p) for p in parts))
    return shapes


def torch_ms(n, h, w, c, dtype, silu: bool, reps=50) -> float | None:
    try:
        import torch
    except ImportError:
        return None
    dt = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[dtype]
    xs = [torch.randn(n, c, h, w, device="cuda", dtype=dt) for _ in range(8)]
    weight = torch.randn(c, device="cuda", dtype=dt)
    bias = torch.randn(c, device="cuda", dtype=dt)
    norm = lambda x: torch.nn.functional.group_norm(x, GROUPS, weight, bias, 1e-5)
    fn = (lambda x: torch.nn.functional.silu(norm(x))) if silu else norm
    return torch_graph_ms(fn, xs, reps)


def ort_grid_copy_ms(n, h, w, c, dtype, reps=50) -> float | None:
    """The ceiling of ORT's launch: a copy of the tensor by n * groups programs, each moving its (image,
    group) as ORT's GroupNorm kernels do, tuned (benchmarks/ort_grid_copy.py). One read and one write,
    where a GroupNorm also reads the group a second time."""
    try:
        import torch
    except ImportError:
        return None
    from benchmarks.ort_grid_copy import ort_grid_copy_ms as tuned_copy

    dt = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[dtype]
    xs = [torch.randn(n, h * w, c, device="cuda", dtype=dt) for _ in range(8)]
    return tuned_copy(n, h * w, c, dtype, 1, xs, torch.empty_like(xs[0]), reps)[0]


def result_row(at: tuple[str, str], provider, metric, unit, value, extra) -> dict:
    """One long-format row for `at` = (shape, dtype)."""
    shape, dtype = at
    return {"provider": provider, "shape": shape, "dtype": dtype, "metric": metric, "unit": unit, "value": value,
            "extra": extra}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dist", default=str(ROOT / "dist" / "full"))
    ap.add_argument("--dtypes", default="fp16,fp32,bf16")
    ap.add_argument("--shapes", type=group_norm_shapes,
                    help="NxHxC,... (H = W); default: ten Stable Diffusion UNet shapes")
    ap.add_argument("--no-silu", dest="silu", action="store_false",
                    help="the Pass kernels (no SiLU) against torch group_norm alone")
    ap.add_argument("--results", default=str(RESULTS))
    args = ap.parse_args()
    act, torch_name = ("silu", "torch group_norm+silu") if args.silu else ("pass", "torch group_norm")
    benchmark = "group_norm_bandwidth" if args.silu else "group_norm_pass_bandwidth"
    shapes = [(n, h, h, c) for n, h, c in args.shapes] if args.shapes else SHAPES
    backend, registry, timer, ceiling = open_gpu(args.dist)
    rows = [{"provider": "copy", "metric": "GB/s", "unit": "GB/s", "value": f"{ceiling:.1f}"}]
    rng = np.random.default_rng()
    for dtype in args.dtypes.split(","):
        for n, h, w, c in shapes:
            p = GroupNormProblem(dtype, n, h * w, c, GROUPS, silu=args.silu)
            setup = GroupNormSetup(registry, timer, p, rng)
            try:
                found = tune_problem(setup, exhaustive=True)
                tuned = tune_problem(setup)
            finally:
                setup.free()
            if found.rejected:
                print(f"rejected: {found.rejected}", flush=True)
            timed = found.timed
            best = min(timed, key=timed.get)
            ms = timed[best]
            ref = torch_ms(n, h, w, c, dtype, args.silu)
            shape = f"{n}x{h}x{w}x{c}"
            copy_ms = timer.rotating_copy_ms(p.bytes_moved // 2)
            copy_gbps = gbps(p, copy_ms)
            print(f"{copy_ms * 1e3:8.2f} us {copy_gbps:8.1f} GB/s {100 * copy_gbps / ceiling:5.1f}% copy "
                  f"{dtype} n={n} {h}x{w}x{c} same-size device-to-device copy", flush=True)
            grid_ms = ort_grid_copy_ms(n, h, w, c, dtype)
            if grid_ms:
                print(f"{grid_ms * 1e3:8.2f} us {gbps(p, grid_ms):8.1f} GB/s {100 * gbps(p, grid_ms) / ceiling:5.1f}% "
                      f"copy {dtype} n={n} {h}x{w}x{c} copy on ORT's grid ({n}x{GROUPS} programs)", flush=True)
            # ORT's own group first: what an ORT build runs
            for tag, t, name in (("ORT  ", found.ort_ms, found.ort_best), ("best ", ms, best),
                                 ("tune ", tuned.best_ms, tuned.best), ("ref  ", ref, torch_name)):
                if t and name:
                    g = gbps(p, t)
                    speed = ""
                    if tag == "ref  ":
                        speed = f"  speedup {ref / ms:.2f}x" + (f", ORT's group {ref / found.ort_ms:.2f}x"
                                                               if found.ort_best else "")
                    print(f"{t * 1e3:8.2f} us {g:8.1f} GB/s {100 * g / ceiling:5.1f}% copy "
                          f"{100 * copy_ms / t:5.1f}% same-size {dtype} n={n} {h}x{w}x{c} "
                          f"groups={GROUPS} {act} {tag}{name}{speed}", flush=True)
            at = (shape, dtype)
            for provider, t, name in (("ort_contract", found.ort_ms, found.ort_best), ("best", ms, best),
                                      ("tuned", tuned.best_ms, tuned.best), ("torch", ref, f"{torch_name[6:]} NCHW")):
                if t and name:
                    rows += [result_row(at, provider, "us", "us", f"{t * 1e3:.3f}", name),
                             result_row(at, provider, "pct_copy", "%", f"{100 * gbps(p, t) / ceiling:.1f}", name),
                             result_row(at, provider, "pct_same_size_copy", "%", f"{100 * copy_ms / t:.1f}", name)]
            if grid_ms:
                rows += [result_row(at, "copy_ort_grid", "us", "us", f"{grid_ms * 1e3:.3f}", f"{n}x{GROUPS} programs"),
                         result_row(at, "copy_ort_grid", "pct_copy", "%", f"{100 * gbps(p, grid_ms) / ceiling:.1f}",
                                    f"{n}x{GROUPS} programs")]
            rows += [result_row(at, "copy_same_size", "us", "us", f"{copy_ms * 1e3:.3f}",
                                "cuMemcpyDtoDAsync, rotating"),
                     result_row(at, "tuned", "tuned_vs_best", "ratio", f"{tuned.best_ms / ms:.4f}",
                                f"{len(timed)} candidates")]
            write_rows(benchmark, backend.device_name, rows, args.results)
    print("wrote", args.results)


if __name__ == "__main__":
    main()
