"""Drop-in for ONNX Runtime's tools/ci_build/compile_triton.py, working with Triton 3.x and no GPU.

    python -m pipeline.compile_triton --header H --script_files S [S ...] --obj_file A --target cuda:90

Same flags and defaults as ORT's script (`--ort_root` accepted and ignored), plus `--target`: without
it the GPU of this machine is used, and with no GPU the command stops with an error.
"""

from __future__ import annotations

import argparse
import sys

from .build import build_ort
from .errors import PipelineError
from .targets import detect_local_target, parse_target


def parse_args(argv=None):
    p = argparse.ArgumentParser(
        prog="python -m pipeline.compile_triton",
        description="Compile Triton kernel scripts into ORT's triton_kernel_infos.a and .h (plus kernels.json).")
    p.add_argument("--header", default="triton_kernel_infos.h", help="header to generate")
    p.add_argument("--ort_root", default="onnxruntime", help="accepted for compatibility; ignored")
    p.add_argument("--script_files", nargs="+", required=True, help="kernel scripts with get_function_table()")
    p.add_argument("--obj_file", default="triton_kernel_infos.a", help="static archive to generate")
    p.add_argument("--target", help="BACKEND:ARCH[:WARP], e.g. cuda:90, hip:gfx942 (default: this machine's GPU)")
    p.add_argument("--cache_dir", default=None, help="compile cache directory (default: no cache)")
    p.add_argument("--jobs", type=int, default=0, help="parallel compile processes (default: one per CPU)")
    p.add_argument("--allow_unpinned_triton", action="store_true",
                   help="build with a Triton other than the pinned one")
    p.add_argument("--quiet", action="store_true", help="no progress bar or summary")
    return p.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    try:
        if args.target:
            target = parse_target(args.target)
        else:
            target = detect_local_target()
            if target is None:
                raise PipelineError("no --target given and no GPU found on this machine; "
                                    "name one, e.g. --target cuda:90 or --target hip:gfx942")
        from .report import compile_progress, print_summary

        with compile_progress(not args.quiet) as progress:
            report = build_ort(args.script_files, target, args.header, args.obj_file, cache_dir=args.cache_dir,
                               jobs=args.jobs, allow_unpinned=args.allow_unpinned_triton, progress=progress)
        if not args.quiet:
            print_summary(report)
    except PipelineError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
