"""What an ORT build pays for the kernels it links: archive bytes, and the time g++ -O2 takes over the
translation unit that includes the header as ORT's triton_kernel.cu does (<string>, then the header).

    python benchmarks/ort_profile.py [--arch sm_80,sm_90,gfx90a,gfx942] [--profiles ort,full]

Each profile is built for each arch (from the compile cache when it holds the kernels), then the header
is compiled once per arch. Rows go to benchmarks/results/results.csv (benchmark ort_profile).
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tritonforge.pipeline.builds.dist import build_dist, discover_scripts  # noqa: E402
from tritonforge.pipeline.compile.targets import parse_targets  # noqa: E402
from tritonforge.pipeline.scripts.profiles import parse_profiles  # noqa: E402

from benchmarks.results import RESULTS, write_rows  # noqa: E402

# ORT's triton_kernel.cu includes <string> (and the CUDA headers) before the generated header, and reads
# kernel_infos[] in its loader: the array must be emitted, as there.
TRANSLATION_UNIT = """#include <string>
#include "triton_kernel_infos.h"
const void* tf_kernel_infos() { return kernel_infos; }
"""


def header_seconds(artifacts: Path, cxx: str = "g++") -> float:
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "triton_kernel.cc"
        src.write_text(TRANSLATION_UNIT)
        t0 = time.perf_counter()
        subprocess.run([cxx, "-std=c++17", "-O2", "-c", str(src), f"-I{artifacts}", "-o", str(Path(tmp) / "tu.o")],
                       check=True)
        return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--arch", default="sm_80,sm_90,gfx90a,gfx942")
    ap.add_argument("--profiles", default="ort")
    ap.add_argument("--cache-dir", default=str(ROOT / ".cache/tritonforge/compile"))
    ap.add_argument("--results", default=str(RESULTS))
    args = ap.parse_args()
    scripts = discover_scripts(ROOT / "kernels")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for profile in parse_profiles(args.profiles):
            report = build_dist(scripts, parse_targets(args.arch), Path(tmp) / profile, cache_dir=args.cache_dir,
                                profile=profile)
            builds = [(t.target.platform, t.target.arch_name, t.kernels, t.archive_bytes) for t in report.targets]
            builds += [(m.platform, "multi", m.kernels, m.archive_bytes) for m in report.multi]  # every arch in one
            for platform_name, arch, kernels, archive_bytes in builds:
                seconds = header_seconds(Path(tmp) / profile / platform_name / arch)
                name = arch if arch != "multi" else f"{platform_name}/multi"
                print(f"{profile:4} {name:11} {kernels:5} kernels  archive {archive_bytes / 2**20:6.2f} MiB  header "
                      f"at g++ -O2 {seconds:6.2f} s", flush=True)
                shape = f"{profile}/{name}"  # one row set per profile and arch
                rows += [{"provider": profile, "shape": shape, "metric": "archive_bytes", "unit": "B",
                          "value": str(archive_bytes), "extra": f"{kernels} kernels"},
                         {"provider": profile, "shape": shape, "metric": "header_gxx_O2", "unit": "s",
                          "value": f"{seconds:.2f}", "extra": f"{kernels} kernels"}]
    device = f"{platform.machine()} cpu x{len(os.sched_getaffinity(0))}"
    print("wrote", write_rows("ort_profile", device, rows, args.results))


if __name__ == "__main__":
    main()
