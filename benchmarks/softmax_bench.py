"""Softmax against the memory-bandwidth limit, on the GPU machine.

    python benchmarks/softmax_bench.py [--dist dist] [--dtypes fp32,fp16,bf16] [--quick | --sets long,...]
                                      [--candidates]

Every figure is GPU time per launch from CUDA-graph replay over rotating buffers larger than L2;
bytes = one read + one write of the tensor (2 * batch * n_cols * sizeof(dtype)); the ceiling is a
1 GiB device-to-device copy timed in the same run. For each problem it reports the exhaustive best
candidate overall, the best inside ORT's own contract (group softmax_<dtype>: one program per row,
grid (batch,1,1)), the tuner's choice (ORT TunableOp's method) and torch.softmax. Lines follow ORT's
kernel_explorer format; rows go to benchmarks/results/results.csv and a PNG plot beside it.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
from tritonforge.runtime.ops.softmax import SoftmaxProblem, SoftmaxSetup, default_shapes  # noqa: E402
from tritonforge.runtime.problem import gbps  # noqa: E402
from tritonforge.runtime.tune import tune_problem  # noqa: E402

from benchmarks.gpu_common import open_gpu, torch_graph_ms  # noqa: E402
from benchmarks.results import RESULTS, write_rows  # noqa: E402

TARGETS = [(32768, 2048), (16384, 8192), (8192, 16384), (65536, 4096)]
LONG_ROWS = [(2048, 32768), (1024, 65536), (512, 131072), (256, 262144)]
LATENCY = [(1, 2048), (1, 1024), (32, 4096), (256, 4096)]
# LLM vocabularies, most of them no multiple of 16: GPT-2 50257, Whisper 51865, BERT 30522, Qwen 151936,
# XLM-R 250002 (one row: a decoding step; 16 and 128: a batch, a prompt's last positions).
VOCAB = [(1, 50257), (16, 50257), (128, 50257), (16, 51865), (16, 30522), (16, 151936), (128, 151936),
         (1, 250002)]
SWEEP_COLS = [256, 512, 1000, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072, 262144]
SWEEP_ELEMENTS = 2**26


def torch_ms(p: SoftmaxProblem, slots: int, reps: int) -> float | None:
    try:
        import torch
    except ImportError:
        return None
    dt = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[p.dtype]
    xs = [torch.randn(p.batch, p.n_cols, device="cuda", dtype=dt) for _ in range(min(slots, 64))]
    fn = torch.log_softmax if p.op == "log_softmax" else torch.softmax
    return torch_graph_ms(lambda x: fn(x, -1), xs, reps)


def line(ms, p, name, ceiling, tag=""):
    g = gbps(p, ms)
    return (f"{ms * 1e3:8.2f} us {g:8.1f} GB/s {100 * g / ceiling:5.1f}% copy {p.dtype} "
            f"batch_count={p.batch:<6} softmax_elements={p.n_cols:<7} {tag}{name}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dist", default=str(ROOT / "dist" / "full"))
    ap.add_argument("--dtypes", default="fp32,fp16,bf16")
    ap.add_argument("--quick", action="store_true", help="targets, long rows and latency: no sweep")
    ap.add_argument("--label", default="", help="added to each row's shape, e.g. the Triton a --dist was built by")
    ap.add_argument("--sets", help="comma list of targets,long,latency,vocab,sweep,grid (grid: the tuner's 60 shapes; "
                                   "default: all but grid; --quick: no sweep)")
    ap.add_argument("--candidates", action="store_true", help="also print every candidate's time, fastest first")
    ap.add_argument("--results", default=str(RESULTS))
    args = ap.parse_args()
    backend, registry, timer, ceiling = open_gpu(args.dist)
    rows = [{"provider": "copy", "metric": "GB/s", "unit": "GB/s", "value": f"{ceiling:.1f}"}]
    rng = np.random.default_rng()
    plot = []
    sets = {"targets": TARGETS, "long": LONG_ROWS, "latency": LATENCY, "vocab": VOCAB,
            "sweep": [(max(1, SWEEP_ELEMENTS // n), n) for n in SWEEP_COLS], "grid": default_shapes()}
    default = ["targets", "long", "latency"] + ([] if args.quick else ["sweep"])
    chosen = args.sets.split(",") if args.sets else default
    unknown = sorted(set(chosen) - set(sets))
    if unknown:
        ap.error(f"unknown sets {unknown}; choose from {sorted(sets)}")
    for dtype in args.dtypes.split(","):
        shapes = [shape for k in chosen for shape in sets[k]]
        for batch, n in dict.fromkeys(shapes):
            p = SoftmaxProblem("softmax", dtype, batch, n)
            setup = SoftmaxSetup(registry, timer, p, rng)
            try:
                t0 = time.perf_counter()
                found = tune_problem(setup, exhaustive=True)  # every viable candidate timed the same way
                timed = found.timed
                tuned = tune_problem(setup)
                tune_s = time.perf_counter() - t0
                reps = max(3, min(100, int(10.0 / max(min(timed.values()), 1e-4))))
                ref = torch_ms(p, setup.slots, reps)
            finally:
                setup.free()
            best = min(timed, key=timed.get)
            ort_best = found.ort_best
            if ort_best:  # ORT's own group first: what an ORT build runs
                print(line(found.ort_ms, p, ort_best, ceiling, "ORT  "))
            print(line(timed[best], p, best, ceiling, "best "))
            print(line(tuned.best_ms, p, tuned.best, ceiling, "tune "))
            if ref:
                ort_speedup = f", ORT's group {ref / found.ort_ms:.2f}x" if ort_best else ""
                print(line(ref, p, "torch.softmax", ceiling, "ref  ") + f"  speedup {ref / timed[best]:.2f}x"
                      f"{ort_speedup}", flush=True)
            if args.candidates:
                for name in sorted(timed, key=timed.get):
                    print(line(timed[name], p, name, ceiling, "  "))
            shape = f"{batch}x{n}" + (f" {args.label}" if args.label else "")
            ort_ms = found.ort_ms if ort_best else None
            for provider, ms, name in (("ort_contract", ort_ms, ort_best), ("best", timed[best], best),
                                       ("tuned", tuned.best_ms, tuned.best), ("torch", ref, "torch.softmax")):
                if ms:
                    rows.append({"provider": provider, "shape": shape, "dtype": dtype, "metric": "us",
                                 "unit": "us", "value": f"{ms * 1e3:.3f}", "extra": name})
                    rows.append({"provider": provider, "shape": shape, "dtype": dtype, "metric": "pct_copy",
                                 "unit": "%", "value": f"{100 * gbps(p, ms) / ceiling:.1f}", "extra": name})
            rows.append({"provider": "tuned", "shape": shape, "dtype": dtype, "metric": "tuned_vs_best",
                         "unit": "ratio", "value": f"{tuned.best_ms / timed[best]:.4f}",
                         "extra": f"{len(timed)} candidates, exhaustive+tune {tune_s:.1f}s"})
            write_rows("softmax_bandwidth", backend.device_name, rows, args.results)  # survive a timeout
            if n in SWEEP_COLS and batch == max(1, SWEEP_ELEMENTS // n):
                groups = {}
                for k, v in timed.items():
                    g = registry.by_name[k].group
                    groups[g] = min(groups.get(g, v), v)
                plot.append((dtype, n, {g: gbps(p, v) for g, v in groups.items()}, gbps(p, ref) if ref else None))
    out = write_rows("softmax_bandwidth", backend.device_name, rows, args.results)
    print("wrote", out)
    if plot:
        write_plot(plot, ceiling, Path(args.results).with_name("softmax_bandwidth.png"))


def write_plot(points, ceiling, path: Path) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not installed: no plot")
        return
    dtypes = sorted({p[0] for p in points})
    fig, axes = plt.subplots(1, len(dtypes), figsize=(6 * len(dtypes), 4.5), squeeze=False)
    for ax, dt in zip(axes[0], dtypes):
        pts = sorted((n, groups, ref) for d, n, groups, ref in points if d == dt)
        for g in sorted({g for _, groups, _ in pts for g in groups}):
            xs = [n for n, groups, _ in pts if g in groups]
            ax.plot(xs, [groups[g] for _, groups, _ in pts if g in groups], marker="o", label=g)
        ax.plot([n for n, _, r in pts if r], [r for _, _, r in pts if r], "k--", marker="x", label="torch.softmax")
        ax.axhline(ceiling, color="gray", linestyle=":", label="device copy")
        ax.set_xscale("log", base=2)
        ax.set_xlabel(f"row length (batch = 2^26 / n), {dt}")
        ax.set_ylabel("GB/s (read + write)")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print("wrote", path)


if __name__ == "__main__":
    main()
