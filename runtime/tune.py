"""Offline tuning of every op's candidates (the ops of runtime/ops), written as tune caches.

Method per problem, after ORT's TunableOp (FindFastestImpl) with what PyTorch's TunableOp adds:
  1. skip candidates the contract or device rejects (Unsupported);
  2. a quick estimate (3 launches, after a warm-up); skip if over 2x the best so far;
  3. numerical check against float64 on sampled rows of every candidate still in the running, before
     it may win (one that was skipped cannot win, so it is not checked);
  4. iterations = clamp(budget / (6 x estimate), 1, 100), timed by graph replay (one warm-up replay,
     the median of five timed) over rotating buffers larger than L2.

    invoke tune [--ops softmax,log_softmax,group_norm_silu,group_norm_pass] [--dtypes fp16,fp32] [--out FILE]
    python -m tritonforge.runtime.tune --dist dist/full ...   (the same, where invoke is not installed)
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from tritonforge.atomic import write_text
from tritonforge.errors import TritonforgeError

from . import ops as ops_registry
from .launch import Unsupported
from .tune_cache import SCHEMA, device_slug, validators


class TuneError(TritonforgeError, ValueError):
    """A tuning request that cannot run: a bad shapes file, an unknown op, a GPU of another arch, or a
    problem no candidate solves."""


@dataclass
class Outcome:
    best: str | None = None
    best_ms: float = math.inf
    ort_best: str | None = None
    ort_ms: float = math.inf
    timed: dict[str, float] = field(default_factory=dict)
    rejected: dict[str, str] = field(default_factory=dict)
    skipped: int = 0


def tune_problem(setup, budget_ms: float = 10.0, exhaustive: bool = False) -> Outcome:
    out = Outcome()
    for name in setup.candidates():
        try:
            setup.launch(name)
        except Unsupported as why:
            out.rejected[name] = str(why)
            continue
        ort = setup.is_ort(name)
        approx = setup.time_ms(name, 3)
        if not exhaustive and approx > 2 * out.best_ms and not (ort and approx <= 2 * out.ort_ms):
            out.skipped += 1
            continue
        problem = setup.check(name)
        if problem:
            out.rejected[name] = f"numerical check failed: {problem}"
            continue
        # The budget covers the whole measurement: a warm-up replay and five timed ones.
        iters = int(max(1, min(100, budget_ms / (6 * max(approx, 1e-6)))))
        if exhaustive:  # every candidate timed, with four times the budget (slow ones: fewer launches)
            iters = int(max(3, min(100, 4 * budget_ms / (6 * max(approx, 1e-6)))))
        ms = setup.time_ms(name, max(iters, 3))
        out.timed[name] = ms
        if ms < out.best_ms:
            out.best, out.best_ms = name, ms
        if ort and ms < out.ort_ms:
            out.ort_best, out.ort_ms = name, ms
    return out


def read_shapes(path: Path | str, fields: tuple[str, ...] = ("batch", "n_cols")) -> list[tuple[int, ...]]:
    """One problem per line: the op's shape fields (Tuning.shape_fields) as positive integers separated by
    commas or spaces; # starts a comment."""
    shapes = []
    for lineno, line in enumerate(Path(path).read_text().splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        parts = re.split(r"[,\s]+", line)
        if len(parts) != len(fields) or not all(p.isdigit() and int(p) > 0 for p in parts):
            raise TuneError(f"{path}:{lineno}: expected '{','.join(fields)}' with positive integers, got {line!r}")
        shapes.append(tuple(int(p) for p in parts))
    if not shapes:
        raise TuneError(f"{path}: no shapes")
    return shapes


def problems_for(ops, dtypes, shapes: dict[str, list] | None = None) -> list:
    """Every (op, dtype, shape) problem in that order; `shapes` by op family (runtime/ops: a Tuning's
    family), the zoo's where a family has none."""
    try:
        found = [(key, ops_registry.tuning_of(key)) for key in ops]
    except KeyError as exc:
        raise TuneError(exc.args[0]) from None
    shapes = shapes or {}
    return [t.problem(dt, shape, **t.keys[key]) for key, t in found for dt in dtypes
            for shape in shapes.get(t.family) or t.default_shapes()]


def read_shape_files(files: dict[str, str | None]) -> dict[str, list]:
    """{family: shapes} from {family: shapes file} (None entries left out); an unknown family is an error."""
    fields = {t.family: t.shape_fields for t in ops_registry.tunings()}
    for family in files:
        if family not in fields:
            raise TuneError(f"no op family '{family}' (runtime/ops has {', '.join(sorted(fields))})")
    return {family: read_shapes(path, fields[family]) for family, path in files.items() if path}


def tune(registry, shapes: dict[str, list] | None = None, ops=("softmax",), dtypes=("fp16",),
         budget_ms: float = 10.0, progress=None, seed: int | None = None) -> dict:
    """Tune every problem of problems_for(ops, dtypes, shapes); the tune cache as a dict."""
    from .timing import GraphTimer

    timer = GraphTimer(registry.backend)
    rng = np.random.default_rng(seed)
    results: dict[str, dict] = {}
    problems = problems_for(ops, dtypes, shapes)
    t0 = time.perf_counter()
    for i, p in enumerate(problems):
        setup = p.setup(registry, timer, rng)
        try:
            o = tune_problem(setup, budget_ms)
        finally:
            setup.free()
        if o.best is None:
            raise TuneError(f"no viable kernel for {p}: {o.rejected}")
        results.setdefault(p.op_key, {})[p.params_signature] = {
            "kernel": o.best, "us": round(o.best_ms * 1e3, 3),
            "ort_kernel": o.ort_best, "ort_us": round(o.ort_ms * 1e3, 3) if o.ort_best else None,
            "timed": len(o.timed), "skipped": o.skipped, "rejected": len(o.rejected)}
        if progress:
            progress(i + 1, len(problems), p, o)
    return {"schema": SCHEMA, "validators": validators(registry), "seconds": round(time.perf_counter() - t0, 2),
            "results": results}


def tune_to_file(dist: Path | str, ops=("softmax",), dtypes=("fp16",), shape_files: dict[str, str | None] | None = None,
                 out: str | None = None, budget_ms: float = 10.0, arch: str | None = None, log=None
                 ) -> tuple[Path, str]:
    """Tune on GPU 0 with the archive of its arch under `dist` (a root holding cuda/sm_XX/), on shapes read
    from {op family: file} (default: the zoo's), and write the cache to `out` (default:
    tune/cuda/sm_XX/<device>.json). Returns the path and a line that sums it up."""
    from . import load_artifacts
    from .cuda import CudaBackend
    from .registry import Registry

    ops, dtypes = list(ops), list(dtypes)
    shapes = read_shape_files(shape_files or {})
    problems_for(ops, dtypes, shapes)  # a bad op fails before the GPU is opened
    backend = CudaBackend(0)
    here = f"sm_{backend.arch}"
    if arch and arch != here:
        raise TuneError(f"--arch {arch} but this GPU is {here}; tune on a {arch} runner")
    registry = Registry(load_artifacts(Path(dist) / "cuda" / here), backend)

    def progress(i, n, p, o):
        ort = f"{o.ort_best} {o.ort_ms * 1e3:.2f} us" if o.ort_best else "none"
        if log:
            log(f"[{i}/{n}] {p.op_key} {p.params_signature}: {o.best} {o.best_ms * 1e3:.2f} us "
                f"(ORT group: {ort}; {len(o.timed)} timed, {o.skipped} skipped)")

    cache = tune(registry, shapes, ops, dtypes, budget_ms, progress)
    path = Path(out or f"tune/cuda/{here}/{device_slug(backend.device_name)}.json")
    write_text(path, json.dumps(cache, indent=1) + "\n")
    return path, f"wrote {path}: {sum(len(v) for v in cache['results'].values())} problems in {cache['seconds']} s"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tritonforge.runtime.tune", description=__doc__.splitlines()[0])
    ap.add_argument("--dist", default="dist/full", help="artifact root holding cuda/sm_XX/ (default: dist/full)")
    ap.add_argument("--out", help="tune cache to write (default: tune/cuda/sm_XX/<device>.json)")
    ap.add_argument("--shapes", help="file of softmax 'batch,n_cols' lines (default: the model zoo's)")
    ap.add_argument("--group-norm-shapes", help="file of GroupNorm 'n,hw,c,groups' lines (default: the model zoo's)")
    ap.add_argument("--ops", default="softmax", help=f"comma list of {','.join(ops_registry.tune_keys())}")
    ap.add_argument("--dtypes", default="fp16", help="comma list: fp32,fp16,bf16")
    ap.add_argument("--budget-ms", type=float, default=10.0, help="timing budget per candidate")
    args = ap.parse_args(argv)
    try:
        _, summary = tune_to_file(args.dist, args.ops.split(","), args.dtypes.split(","),
                                  {"softmax": args.shapes, "group_norm": args.group_norm_shapes}, args.out,
                                  args.budget_ms,
                                  log=lambda line: print(line, file=sys.stderr, flush=True))
    except TritonforgeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
