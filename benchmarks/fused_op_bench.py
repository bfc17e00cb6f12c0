"""What a bench of one fused op against the export's nodes does for every shape, shared: the library's node and the
export's graph each checked against float64, then K of each timed in onnxruntime-gpu's CUDA EP (ort_own.py); and
the command line that walks models, shapes and dtypes and writes the rows (results.py)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np

from benchmarks import e2e_models, ort_own
from benchmarks.results import RESULTS, write_rows


def check_then_time(own, ours, graph: Callable, feeds: Callable, nodes: int, export: str,
                    check: Callable, what: str) -> dict[str, tuple[float, str]]:
    """{export: (us per node, mode), "tritonforge": ...}: `graph(k, fused)` of k nodes, one node's output `y0`
    checked by `check(y) -> why or None` on both sides first, then `nodes` of each timed on `feeds(k)`."""
    sides = ((export, own, False), ("tritonforge", ours, True))
    for provider, rival, fused in sides:
        _, out, _ = rival.run(graph(1, fused), feeds(1), runs=1, graph=False)
        why = check(np.asarray(out["y0"]))
        if why:
            raise AssertionError(f"{what} {provider} against float64: {why}")
    results = {}
    for provider, rival, fused in sides:
        ms, _, mode = rival.run(graph(nodes, fused), feeds(nodes), fetch=False)
        results[provider] = (ms * 1e3 / nodes, mode)
    return results


def command_line(argv, doc: str, default_models: str, default_dtypes: str):
    """(parser, args, model names) of a per-op bench's command line: --library, --model (checked against
    e2e_models.MODELS), --dtypes, --results."""
    ap = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    ap.add_argument("--library", default=None, help="libtritonforge_ort.so (default: as ortlib.register finds it)")
    ap.add_argument("--model", default=default_models)
    ap.add_argument("--dtypes", default=default_dtypes)
    ap.add_argument("--results", type=Path, default=None, help="default: benchmarks/results/results.csv")
    args = ap.parse_args(argv)
    names = [n.strip() for n in args.model.split(",")]
    unknown = [n for n in names if n not in e2e_models.MODELS]
    if unknown:
        ap.error(f"unknown model {', '.join(unknown)}: choose from {', '.join(e2e_models.MODELS)}")
    return ap, args, names


def main(argv, doc: str, benchmark: str, default_models: str, shapes_of: Callable, none: str, measure: Callable,
         label: Callable, optimize: bool = False) -> int:
    """The bench's command line: `shapes_of(model)` the shapes a model runs the op on (none: refused with `none`),
    `measure(own, ours, *shape, dtype)` the rows of one, `label(model, shape)` their `shape` column. `optimize`: ORT's
    graph optimizations on in both sessions (ort_own.OrtRival)."""
    ap, args, names = command_line(argv, doc, default_models, "fp16,bf16,fp32")
    shapes = sorted({(n, s) for n in names for s in shapes_of(n)})
    if not shapes:
        ap.error(f"{', '.join(names)}: {none}")
    why = ort_own.unavailable()
    if why:
        print(f"{benchmark}_bench: {why}", file=sys.stderr)
        return 2
    import torch
    from tritonforge.runtime import ortlib

    library = ortlib.library_path(args.library)
    own = ort_own.OrtRival(optimize=optimize)
    ours = ort_own.OrtRival(custom_ops=str(library), optimize=optimize)
    device = torch.cuda.get_device_name(0)
    for dtype in args.dtypes.split(","):
        for name, shape in shapes:
            record(benchmark, device, label(name, shape), dtype, measure(own, ours, *shape, dtype), args.results)
    return 0


def record(benchmark: str, device: str, shape: str, dtype: str, rows: dict, results: Path | None,
           width: int = 32) -> None:
    """One shape's {provider: (us, timing mode)} as `us` rows of `benchmark` (results.csv by default), and a line."""
    write_rows(benchmark, device, [
        {"provider": p, "shape": shape, "dtype": dtype, "metric": "us", "unit": "us", "value": f"{us:.3f}",
         "extra": mode} for p, (us, mode) in rows.items()], results or RESULTS)
    print(f"{shape:{width}s} {dtype}  " + "  ".join(f"{p} {us:8.1f} us" for p, (us, _) in rows.items()), flush=True)
