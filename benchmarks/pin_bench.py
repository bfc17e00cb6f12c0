"""The zoo's shapes under two builds of the same kernels (a Triton pin move): per shape, the runtime's best
and ORT's group's best with each build, in one process on one GPU, and the ratio candidate / current.

    python benchmarks/pin_bench.py --current pin-move/full/triton-3.5.0 --candidate pin-move/full/triton-3.9.0
        [--model all] [--dtypes fp16,fp32] [--ops group_norm,softmax] [--out pin-move/gpu.json]

Each root holds the full profile's cuda/sm_<this GPU>/, built with one Triton (kernels.json says which).
The comparison is tritonforge.runtime.build_speed's (what `invoke pin-move --gpu` runs); this script adds
the results rows (benchmark `pin_move`) and `--out`, the per-shape ratios and their summary.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tritonforge.runtime.build_speed import SLOWER, compare_builds  # noqa: E402

from benchmarks.results import write_rows  # noqa: E402
from benchmarks.zoo_bench import add_selection, selected_models  # noqa: E402
from tritonforge.atomic import write_text  # noqa: E402


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
    t0 = time.perf_counter()

    def on_shape(label, res, builds):
        cur, cand = builds["current"]["triton"], builds["candidate"]["triton"]
        print(f"[{time.perf_counter() - t0:5.0f} s] {label}: " + " | ".join(
            f"{kind} {r['current_us']:.2f} -> {r['candidate_us']:.2f} us ({r['ratio']:.3f}x; {r['candidate']})"
            for kind, r in res.items()), flush=True)
        op, shape, dtype = label.split(" ")
        device = builds["current"]["registry"].backend.device_name
        write_rows("pin_move", device, [
            {"provider": f"{kind}@{side}", "shape": f"{op} {shape}", "dtype": dtype, "metric": "us", "unit": "us",
             "value": f"{r[side + '_us']:.3f}", "extra": f"triton {builds[side]['triton']}; {r[side]}"}
            for kind, r in res.items() for side in ("current", "candidate")] + [
            {"provider": kind, "shape": f"{op} {shape}", "dtype": dtype, "metric": "candidate_vs_current",
             "unit": "ratio", "value": f"{r['ratio']:.4f}", "extra": f"triton {cand} / {cur}"}
            for kind, r in res.items()], args.results)

    doc = compare_builds(args.current, args.candidate, models, dtypes, ops, where, on_shape)
    for kind, s in doc["summary"].items():
        print(f"{kind}: {s['shapes']} shapes, median {s['median']:.3f}x, worst {s['worst'][1]:.3f}x "
              f"({s['worst'][0]}), {len(s['slower_than_target'])} over {SLOWER:.2f}x", flush=True)
    if args.out:
        write_text(args.out, json.dumps(doc, indent=1) + "\n")
        print("wrote", args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
