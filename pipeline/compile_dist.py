"""Compile entry point inside a build container (the image's ENTRYPOINT).

    python -m pipeline.compile_dist --platform cuda --arch sm_90,sm_80 --kernels-dir /src/kernels \
        --out /out --cache-dir /cache

Writes <out>/<platform>/<arch>/ exactly as `invoke compile` does on the host.
"""

from __future__ import annotations

import argparse
import sys

from .build import build_dist, discover_scripts
from .errors import PipelineError
from .targets import parse_targets


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m pipeline.compile_dist", description=__doc__.splitlines()[0])
    ap.add_argument("--platform", required=True, choices=["cuda", "rocm"])
    ap.add_argument("--arch", required=True, help="comma-separated archs")
    ap.add_argument("--kernels-dir", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--cache-dir")
    ap.add_argument("--jobs", type=int, default=0)
    ap.add_argument("--host", default="x86_64")
    args = ap.parse_args(argv)
    try:
        targets = parse_targets(args.arch, platform=args.platform)

        def progress(event, **info):  # plain lines: a container log has no terminal for a bar
            if event == "plan":
                print(f"compile: {info['total']} kernels, {info['cached']} cached", flush=True)
            elif event == "done" and not info["ok"]:
                print(f"compile: FAILED {info['target']}/{info['name']}", flush=True)

        report = build_dist(discover_scripts(args.kernels_dir), targets, args.out, cache_dir=args.cache_dir,
                            jobs=args.jobs, progress=progress, host=args.host)
        for t in report.targets:
            print(f"compile: {t.target.platform}/{t.target.arch_name}: {t.kernels} kernels, {t.compiled} compiled, "
                  f"{t.cached} cached, {t.archive_bytes} archive bytes", flush=True)
    except PipelineError as exc:
        print(f"error: {exc}", file=sys.stderr, flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
