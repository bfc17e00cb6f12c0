"""The fastest kernel of each family, per problem: what a variant axis buys, on the GPU machine.

    python benchmarks/family_bench.py [--dist dist] [--ops softmax,group_norm] [--dtypes fp16,fp32,bf16] [--top 8]
                                      [--group-norm-shapes 2x16x640,2x64x320]

A family is a kernel name with its size numbers taken out (`_b8192`, `_s8`, `_w8`, `_c32`, `_t128`,
`_hw256`, `_e4096`): what is left names the group and the switches (`_v8`, `_l2`, `_one`, `_keep`).
Every candidate is timed the way the other benchmarks time it (runtime.tune.tune_problem, exhaustive);
the best of each family is printed and written to results/results.csv (provider `family`).
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from benchmarks.gpu_common import open_gpu  # noqa: E402
from benchmarks.results import RESULTS, write_rows  # noqa: E402
from runtime.problem import GroupNormProblem, GroupNormSetup, Problem, SoftmaxSetup, gbps  # noqa: E402
from runtime.tune import tune_problem  # noqa: E402

SOFTMAX = [(2048, 32768), (1024, 65536), (512, 131072), (256, 262144)]  # (batch, n_cols)
GROUP_NORM = [(2, 8, 1280), (2, 16, 640), (2, 16, 1280), (2, 32, 320), (2, 32, 640), (1, 32, 640), (2, 32, 1280),
              (2, 8, 320), (1, 16, 320)]  # (n, H = W, C), 32 groups, SiLU
SIZES = re.compile(r"_(b|c|t|w|e|s|hw)\d+")


def family(name: str) -> str:
    return SIZES.sub("", name)


def group_norm_shapes(text: str) -> list[tuple[int, int, int]]:
    """`2x16x640,1x8x320` -> [(2, 16, 640), (1, 8, 320)]: (n, H = W, C)."""
    shapes = []
    for item in text.split(","):
        parts = item.strip().split("x")
        if len(parts) != 3 or not all(p.isdigit() and int(p) > 0 for p in parts):
            raise argparse.ArgumentTypeError(f"{item!r} is not NxHxC (three positive integers)")
        shapes.append(tuple(int(p) for p in parts))
    return shapes


def best_per_family(timed: dict[str, float]) -> list[tuple[float, str]]:
    best: dict[str, tuple[float, str]] = {}
    for name, ms in timed.items():
        f = family(name)
        if f not in best or ms < best[f][0]:
            best[f] = (ms, name)
    return sorted(best.values())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dist", default=str(ROOT / "dist"))
    ap.add_argument("--ops", default="softmax,group_norm")
    ap.add_argument("--dtypes", default="fp16,fp32,bf16")
    ap.add_argument("--top", type=int, default=8, help="families printed per problem")
    ap.add_argument("--group-norm-shapes", type=group_norm_shapes, default=GROUP_NORM,
                    help="NxHxC,... (H = W, 32 groups, SiLU); default: the small UNet levels")
    ap.add_argument("--results", default=str(RESULTS))
    args = ap.parse_args()
    ops = args.ops.split(",")
    unknown = sorted(set(ops) - {"softmax", "group_norm"})
    if unknown:
        ap.error(f"unknown ops {unknown}; choose from softmax, group_norm")
    backend, registry, timer, ceiling = open_gpu(args.dist)
    rng = np.random.default_rng()
    problems = []
    for dtype in args.dtypes.split(","):
        if "softmax" in ops:
            problems += [(Problem("softmax", dtype, b, n), SoftmaxSetup, f"{b}x{n}") for b, n in SOFTMAX]
        if "group_norm" in ops:
            problems += [(GroupNormProblem(dtype, n, h * h, c), GroupNormSetup, f"{n}x{h}x{h}x{c}")
                         for n, h, c in args.group_norm_shapes]
    rows = []
    for p, setup_cls, shape in problems:
        setup = setup_cls(registry, timer, p, rng)
        try:
            timed = tune_problem(setup, exhaustive=True).timed
        finally:
            setup.free()
        print(f"{p.op_key} {shape}", flush=True)
        for ms, name in best_per_family(timed)[:args.top]:
            pct = 100 * gbps(p, ms) / ceiling
            print(f"  {ms * 1e3:8.2f} us {pct:5.1f}% {name}", flush=True)
            rows.append({"provider": "family", "shape": shape, "dtype": p.dtype, "metric": "us", "unit": "us",
                         "value": f"{ms * 1e3:.3f}", "extra": name})
        write_rows("family_best", backend.device_name, rows, args.results)  # survive a timeout


if __name__ == "__main__":
    main()
