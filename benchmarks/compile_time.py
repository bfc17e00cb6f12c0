"""Cold and warm compile time of the whole kernel matrix for the default archs.

    python benchmarks/compile_time.py [--jobs N]

Cold: empty compile cache (and a private Triton cache). Warm: the same build again, served from the
cache. Rows go to benchmarks/results/results.csv.
"""

from __future__ import annotations

import argparse
import platform
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tritonforge.pipeline.builds.dist import build_dist, discover_scripts  # noqa: E402
from tritonforge.pipeline.compile.targets import parse_targets  # noqa: E402

from benchmarks.results import write_rows  # noqa: E402

DEFAULT_ARCHS = "sm_80,sm_90,gfx90a,gfx942"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=0)
    ap.add_argument("--arch", default=DEFAULT_ARCHS)
    args = ap.parse_args()
    targets = parse_targets(args.arch)
    scripts = discover_scripts(ROOT / "kernels")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        cache = Path(tmp) / "cache"
        for phase in ("cold", "warm"):
            r = build_dist(scripts, targets, Path(tmp) / phase, cache_dir=cache, jobs=args.jobs)
            kernels = sum(t.kernels for t in r.targets)
            print(f"{phase}: {kernels} kernels ({len(targets)} archs) in {r.seconds:.2f} s wall, "
                  f"{r.compiled} compiled, {r.cached} from cache")
            shape, extra = args.arch, f"{kernels} kernels"  # a later run over the same archs replaces these rows
            rows += [{"provider": phase, "shape": shape, "metric": "wall", "unit": "s", "value": f"{r.seconds:.3f}",
                      "extra": extra},
                     {"provider": phase, "shape": shape, "metric": "compiled", "unit": "kernels",
                      "value": str(r.compiled), "extra": extra}]
    device = f"{platform.machine()} cpu x{len(__import__('os').sched_getaffinity(0))}"
    print("wrote", write_rows("compile_time", device, rows))


if __name__ == "__main__":
    main()
