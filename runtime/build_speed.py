"""The same shapes under two builds of the same kernels (a Triton pin move), on this GPU: per shape, the
runtime's best and ORT's group's best with each build, tuned by the tuner's method (every candidate
checked against float64 before it is timed), then the picks re-timed alternately, current and candidate,
in one process; the ratio is median(candidate) / median(current): above 1 is slower.

`invoke pin-move --gpu` runs it on the zoo's shapes (runtime/zoo.py); benchmarks/pin_bench.py is the same
with results rows.
"""

from __future__ import annotations

import statistics
from pathlib import Path

from .ops.group_norm import GroupNormProblem, GroupNormSetup
from .ops.softmax import SoftmaxProblem, SoftmaxSetup
from .tune import tune_problem

ROUNDS = 3
SLOWER = 1.03  # the move's target: no shape more than 3% slower


def problems(models, dtypes: list[str], ops: list[str], where=None):
    """(label, problem) for every distinct shape of the models, each dtype: GroupNorm (+SiLU or not, as the
    model runs it) and softmax, at each model's batches."""
    seen = set()
    for model in models:
        for batch in model.batches:
            for dtype in dtypes:
                if "group_norm" in ops:
                    for s in model.group_norm:
                        n, hw, c, groups, silu = s.problem(batch)
                        label = f"group_norm{'_silu' if silu else '_pass'} {n}x{s.side}x{s.side}x{c} {dtype}"
                        if label not in seen and not (where and not where.search(label)):
                            seen.add(label)
                            yield label, GroupNormProblem(dtype, n, hw, c, groups, silu, s.eps)
                if "softmax" in ops:
                    for s in model.softmax:
                        rows, cols = s.problem(batch)
                        label = f"softmax {rows}x{cols} {dtype}"
                        if label not in seen and not (where and not where.search(label)):
                            seen.add(label)
                            yield label, SoftmaxProblem("softmax", dtype, rows, cols)


def setup_for(registry, timer, p, rng):
    return (GroupNormSetup if isinstance(p, GroupNormProblem) else SoftmaxSetup)(registry, timer, p, rng)


def retime(setups, names, timer) -> list[float]:
    """Median µs of each (setup, candidate), timed alternately for ROUNDS rounds."""
    approx = max(setups[0].time_ms(names[0], 3), 1e-6)
    iters = int(max(3, min(100, 40 / (6 * approx))))
    times = [[] for _ in setups]
    for _ in range(ROUNDS):
        for i, (setup, name) in enumerate(zip(setups, names)):
            times[i].append(setup.time_ms(name, iters) * 1e3)
    return [statistics.median(t) for t in times]


def compare(label: str, p, builds: dict, timer, rng) -> dict:
    """Both builds on one problem: {kind: {current_us, candidate_us, ratio, current, candidate}}."""
    setups = [setup_for(b["registry"], timer, p, rng) for b in builds.values()]
    try:
        found = [tune_problem(s) for s in setups]
        out = {}
        for kind, attr in (("best", "best"), ("ort_group", "ort_best")):
            names = [getattr(f, attr) for f in found]
            if None in names:
                continue
            cur, cand = retime(setups, names, timer)
            out[kind] = {"current_us": round(cur, 3), "candidate_us": round(cand, 3), "ratio": round(cand / cur, 4),
                         "current": names[0], "candidate": names[1]}
        if "best" not in out:
            raise RuntimeError(f"{label}: no candidate passed the float64 check in one build: "
                               + "; ".join(f"{k}: {v}" for f in found for k, v in list(f.rejected.items())[:2]))
        return out
    finally:
        for s in setups:
            s.free()


def summary(shapes: dict) -> dict:
    out = {}
    for kind in ("best", "ort_group"):
        ratios = {label: r[kind]["ratio"] for label, r in shapes.items() if kind in r}
        if not ratios:
            continue
        worst = max(ratios, key=ratios.get)
        out[kind] = {"shapes": len(ratios), "median": round(statistics.median(ratios.values()), 4),
                     "worst": [worst, ratios[worst]], "slower_than_target": sorted(
                         (label for label, r in ratios.items() if r > SLOWER), key=ratios.get, reverse=True)}
    return out


def open_builds(current: str, candidate: str):
    from . import load_artifacts
    from .cuda import CudaBackend
    from .registry import Registry
    from .timing import GraphTimer

    backend = CudaBackend(0)
    builds = {}
    for side, root in (("current", current), ("candidate", candidate)):
        arts = load_artifacts(Path(root) / "cuda" / f"sm_{backend.arch}")
        builds[side] = {"root": root, "triton": arts.manifest.get("triton_version", "?"),
                        "registry": Registry(arts, backend)}
    return backend, builds, GraphTimer(backend)


def compare_builds(current: str | Path, candidate: str | Path, models, dtypes=("fp16", "fp32"),
                   ops=("group_norm", "softmax"), where=None, on_shape=None) -> dict:
    """Every shape of `models` under both builds (roots holding cuda/sm_<this GPU>/); `on_shape(label, result,
    builds)` after each. Returns {schema, device, current, candidate, summary, shapes}."""
    import numpy as np

    backend, builds, timer = open_builds(str(current), str(candidate))
    rng = np.random.default_rng(0)
    shapes = {}
    for label, p in problems(models, list(dtypes), list(ops), where):
        shapes[label] = compare(label, p, builds, timer, rng)
        if on_shape:
            on_shape(label, shapes[label], builds)
    return {"schema": "tritonforge.pin-bench/1", "device": backend.device_name,
            "current": builds["current"]["triton"], "candidate": builds["candidate"]["triton"],
            "summary": summary(shapes), "shapes": shapes}
