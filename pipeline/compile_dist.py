"""Compile entry point inside a build container (the image's ENTRYPOINT).

    python -m tritonforge.pipeline.compile_dist --platform cuda --arch sm_90,sm_80 --kernels-dir /src/kernels \
        --out /out --cache-dir /cache --report /out/report.json

Writes <out>/<platform>/<arch>/ exactly as `invoke compile` does on the host, and the build report
(counts and compile seconds per target) as JSON for the host to read back.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from tritonforge.pipeline.builds.dist import build_dist, discover_scripts
from tritonforge.pipeline.compile.targets import parse_targets
from tritonforge.pipeline.errors import PipelineError


class LineProgress:
    """Progress as plain lines (a container log has no terminal for a bar): one per tenth of the work,
    or every 30 s, whichever comes first."""

    def __init__(self, out=sys.stdout, every_s: float = 30.0):
        self.out, self.every_s = out, every_s
        self.total = self.done = 0
        self.next_at = 0
        self.last = time.monotonic()

    def __call__(self, event, **info):
        if event == "plan":
            self.total = info["total"] - info["cached"]
            self._say(f"compile: {info['total']} kernels, {info['cached']} cached, {self.total} to compile")
            self.next_at = max(1, self.total // 10)
        elif event == "done":
            self.done += 1
            if not info["ok"]:
                self._say(f"compile: FAILED {info['target']}/{info['name']}")
            now = time.monotonic()
            if self.done >= self.next_at or now - self.last >= self.every_s:
                self._say(f"compile: {self.done}/{self.total} compiled")
                self.next_at = self.done + max(1, self.total // 10)

    def _say(self, line):
        print(line, file=self.out, flush=True)
        self.last = time.monotonic()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tritonforge.pipeline.compile_dist",
                                 description=__doc__.splitlines()[0])
    ap.add_argument("--platform", required=True, choices=["cuda", "rocm"])
    ap.add_argument("--arch", required=True, help="comma-separated archs")
    ap.add_argument("--kernels-dir", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--cache-dir")
    ap.add_argument("--jobs", type=int, default=0)
    ap.add_argument("--host", default="x86_64")
    ap.add_argument("--report", help="write the build report (JSON) here")
    ap.add_argument("--profile", default="full", choices=["ort", "full"],
                    help="which kernels (pipeline/scripts/profiles.py)")
    ap.add_argument("--triton", help="the Triton release this build is made with, when not the pin's (the `triton` "
                                     "setting): the running one must be it")
    args = ap.parse_args(argv)
    try:
        targets = parse_targets(args.arch, platform=args.platform)
        report = build_dist(discover_scripts(args.kernels_dir), targets, args.out, cache_dir=args.cache_dir,
                            jobs=args.jobs, progress=LineProgress(), host=args.host, profile=args.profile,
                            triton=args.triton)
        if args.report:
            Path(args.report).write_text(report.to_json())
    except PipelineError as exc:
        print(f"error: {exc}", file=sys.stderr, flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
