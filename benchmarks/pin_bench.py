"""The zoo's shapes under two builds of the same kernels (a Triton pin move): per shape, the runtime's best
and ORT's group's best with each build, in one process on one GPU, and the ratio candidate / current.

    python benchmarks/pin_bench.py --current pin-move/full/triton-3.5.0 --candidate pin-move/full/triton-3.9.0
        [--model all] [--dtypes fp16,fp32] [--ops group_norm,softmax] [--out pin-move/gpu.json]

Each root holds the full profile's cuda/sm_<this GPU>/, built with one Triton (kernels.json says which).
Per problem, each build is tuned by the tuner's method (every candidate checked against float64 before it
is timed); then the picks are re-timed alternately, current and candidate, three rounds, and the ratio is
median(candidate) / median(current): above 1 is slower. Rows go to results.csv (benchmark `pin_move`), and
`--out` keeps the per-shape ratios that `invoke pin-move --gpu` adds to its report.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
from tritonforge.runtime.ops.group_norm import GroupNormProblem, GroupNormSetup  # noqa: E402
from tritonforge.runtime.ops.softmax import SoftmaxProblem, SoftmaxSetup  # noqa: E402
from tritonforge.runtime.tune import tune_problem  # noqa: E402

from benchmarks.results import write_rows  # noqa: E402
from benchmarks.zoo_bench import add_selection, selected_models  # noqa: E402
from tritonforge.atomic import write_text  # noqa: E402

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
    from tritonforge.runtime import load_artifacts
    from tritonforge.runtime.cuda import CudaBackend
    from tritonforge.runtime.registry import Registry
    from tritonforge.runtime.timing import GraphTimer

    backend = CudaBackend(0)
    builds = {}
    for side, root in (("current", current), ("candidate", candidate)):
        arts = load_artifacts(Path(root) / "cuda" / f"sm_{backend.arch}")
        builds[side] = {"root": root, "triton": arts.manifest.get("triton_version", "?"),
                        "registry": Registry(arts, backend)}
    return backend, builds, GraphTimer(backend)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--current", required=True, help="root of the build with the current pin (cuda/sm_XX/)")
    ap.add_argument("--candidate", required=True, help="root of the build with the candidate Triton")
    add_selection(ap, "only the shapes whose label matches this regular expression ('softmax 1x50257 fp16')")
    ap.add_argument("--out", help="write the per-shape ratios and their summary here (JSON)")
    args = ap.parse_args(argv)
    models, where = selected_models(args)
    ops, dtypes = args.ops.split(","), args.dtypes.split(",")
    if not set(ops) <= {"group_norm", "softmax"} or not set(dtypes) <= {"fp16", "fp32"}:
        raise SystemExit("error: --ops takes group_norm,softmax and --dtypes fp16,fp32")
    backend, builds, timer = open_builds(args.current, args.candidate)
    cur, cand = builds["current"]["triton"], builds["candidate"]["triton"]
    print(f"{backend.device_name}: triton {cur} ({args.current}) against {cand} ({args.candidate})", flush=True)
    rng = np.random.default_rng(0)
    shapes, t0 = {}, time.perf_counter()
    for label, p in problems(models, dtypes, ops, where):
        res = shapes[label] = compare(label, p, builds, timer, rng)
        print(f"[{time.perf_counter() - t0:5.0f} s] {label}: " + " | ".join(
            f"{kind} {r['current_us']:.2f} -> {r['candidate_us']:.2f} us ({r['ratio']:.3f}x; {r['candidate']})"
            for kind, r in res.items()), flush=True)
        op, shape, dtype = label.split(" ")
        write_rows("pin_move", backend.device_name, [
            {"provider": f"{kind}@{side}", "shape": f"{op} {shape}", "dtype": dtype, "metric": "us", "unit": "us",
             "value": f"{r[side + '_us']:.3f}", "extra": f"triton {builds[side]['triton']}; {r[side]}"}
            for kind, r in res.items() for side in ("current", "candidate")] + [
            {"provider": kind, "shape": f"{op} {shape}", "dtype": dtype, "metric": "candidate_vs_current",
             "unit": "ratio", "value": f"{r['ratio']:.4f}", "extra": f"triton {cand} / {cur}"}
            for kind, r in res.items()], args.results)
    doc = {"schema": "tritonforge.pin-bench/1", "device": backend.device_name, "current": cur, "candidate": cand,
           "summary": summary(shapes), "shapes": shapes}
    for kind, s in doc["summary"].items():
        print(f"{kind}: {s['shapes']} shapes, median {s['median']:.3f}x, worst {s['worst'][1]:.3f}x "
              f"({s['worst'][0]}), {len(s['slower_than_target'])} over {SLOWER:.2f}x", flush=True)
    if args.out:
        write_text(args.out, json.dumps(doc, indent=1) + "\n")
        print("wrote", args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
