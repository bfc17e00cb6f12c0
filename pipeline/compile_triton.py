"""Drop-in for ONNX Runtime's tools/ci_build/compile_triton.py, working with Triton 3.x and no GPU.

    python -m tritonforge.pipeline.compile_triton --header H --script_files S [S ...] --obj_file A --target cuda:90

Same flags and defaults as ORT's script (`--ort_root` accepted and ignored), plus `--target`: without
it the GPU of this machine is used, and with no GPU the command stops with an error.

Fetch mode: given a store and a version (`--store`, `--version`, or TRITONFORGE_STORE and
TRITONFORGE_VERSION in the environment, as ORT's CMake passes no flags of ours) and a target
(`--target` or TRITONFORGE_TARGET; `cuda:multi` or `hip:multi` for the build that serves every GPU of
the platform), it fetches the published build of the ORT profile, verifies every
sha256, and writes the header and archive where ORT's CMake asked: no compiling and no triton on the
machine that builds ORT. `--script_files` are then not compiled: the published build is what ORT gets.
A lock file (`--lock` or TRITONFORGE_LOCK, from `invoke lock`) names the store, version and build and
pins their bytes; TRITONFORGE_TRUST (or `--trust`) names the public key the manifest must be signed with.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

from tritonforge.pipeline.compile.targets import detect_local_target, parse_target
from tritonforge.pipeline.errors import PipelineError

from tritonforge.artifact_format import ARCHIVE_NAME, HEADER_NAME, MANIFEST_NAME
from tritonforge.atomic import install_files


def parse_args(argv=None):
    p = argparse.ArgumentParser(
        prog="python -m tritonforge.pipeline.compile_triton",
        description="Compile Triton kernel scripts into ORT's triton_kernel_infos.a and .h (plus kernels.json), "
                    "or fetch a published build of them.")
    p.add_argument("--header", default="triton_kernel_infos.h", help="header to generate")
    p.add_argument("--ort_root", default="onnxruntime", help="accepted for compatibility; ignored")
    p.add_argument("--script_files", nargs="*", default=[], help="kernel scripts with get_function_table()")
    p.add_argument("--obj_file", default="triton_kernel_infos.a", help="static archive to generate")
    p.add_argument("--target", default=os.environ.get("TRITONFORGE_TARGET"),
                   help="BACKEND:ARCH[:WARP], e.g. cuda:90, hip:gfx942, or in fetch mode cuda:multi / hip:multi "
                        "(default: TRITONFORGE_TARGET, else this machine's GPU)")
    p.add_argument("--cache_dir", default=None, help="compile cache directory (default: no cache)")
    p.add_argument("--jobs", type=int, default=0, help="parallel compile processes (default: one per CPU)")
    p.add_argument("--allow_unpinned_triton", action="store_true",
                   help="build with a Triton other than the pinned one")
    p.add_argument("--triton", default=os.environ.get("TRITONFORGE_TRITON") or None,
                   help="the supported Triton release (3.5.0 to 3.9.0) expected instead of the pin, e.g. 3.5.0 to "
                        "match ORT's own CI (default: TRITONFORGE_TRITON)")
    p.add_argument("--quiet", action="store_true", help="no progress bar or summary")
    p.add_argument("--store", default=os.environ.get("TRITONFORGE_STORE"),
                   help="fetch mode: file://DIR or s3://bucket/prefix (default: TRITONFORGE_STORE)")
    p.add_argument("--version", default=os.environ.get("TRITONFORGE_VERSION"),
                   help="fetch mode: the published version to fetch, or latest (default: TRITONFORGE_VERSION)")
    p.add_argument("--lock", default=os.environ.get("TRITONFORGE_LOCK"),
                   help="fetch mode: a lock file naming store, version and build (default: TRITONFORGE_LOCK)")
    p.add_argument("--trust", default=os.environ.get("TRITONFORGE_TRUST"),
                   help="fetch mode: public key the manifest must be signed with (default: TRITONFORGE_TRUST)")
    return p.parse_args(argv)


def _target(args):
    if args.target and args.target.endswith(":multi"):
        raise PipelineError(f"--target {args.target}: a multi-arch build is fetched, not compiled here; set "
                            "--version (or TRITONFORGE_VERSION) and a store to fetch it")
    if args.target:
        return parse_target(args.target)
    target = detect_local_target()
    if target is None:
        raise PipelineError("no --target given (nor TRITONFORGE_TARGET) and no GPU found on this machine; "
                            "name one, e.g. --target cuda:90 or --target hip:gfx942")
    return target


def _fetch_target(args) -> tuple[str, str]:
    """(platform, arch directory) to fetch: a target as in compile mode, or BACKEND:multi."""
    backend, _, arch = (args.target or "").partition(":")
    if arch == "multi":
        platform = {"cuda": "cuda", "hip": "rocm", "rocm": "rocm"}.get(backend.lower())
        if platform is None:
            raise PipelineError(f"unknown backend in target '{args.target}' (expected cuda:multi or hip:multi)")
        return platform, "multi"
    target = _target(args)
    return target.platform, target.arch_name


def fetch_into(args, log=print) -> None:
    """Fetch mode: the published ORT-profile build of the target (or the locked build), its header and
    archive where ORT asked."""
    from tritonforge.pipeline.release.lockfile import read_lock
    from tritonforge.pipeline.release.publish import fetch, fetch_locked, resolve_version
    from tritonforge.pipeline.release.stores import open_store

    say = lambda line: log(f"tritonforge: {line}") if line.startswith("warning") else None
    header, archive = Path(args.header), Path(args.obj_file)
    if args.lock:
        lock = read_lock(args.lock)
        platform, arch, version = lock["platform"], lock["arch"], lock["version"]
        store_url = args.store or lock["store"]
    else:
        if not args.store:
            raise PipelineError("fetch mode needs a store: --store or TRITONFORGE_STORE (file://DIR or "
                                "s3://bucket/prefix), or a lock file")
        platform, arch = _fetch_target(args)
        store_url = args.store
    for d in (header.parent, archive.parent):
        d.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".tritonforge-fetch-", dir=archive.parent) as tmp:
        store = open_store(store_url)
        if args.lock:
            got = fetch_locked(args.lock, Path(tmp) / "build", store, args.trust, say)
        else:
            version = resolve_version(store, args.version)
            got = fetch(store, version, platform, arch, Path(tmp) / "build", say, "ort", args.trust)
        pending = [(got / ARCHIVE_NAME, archive), (got / HEADER_NAME, header),
                   (got / MANIFEST_NAME, archive.parent / MANIFEST_NAME)]
        install_files(pending)  # copied next to each destination first, then renamed: no half-written pair
    ignored = f"; --script_files not compiled ({len(args.script_files)} given)" if args.script_files else ""
    how = f"locked by {args.lock}" if args.lock else "every sha256 verified"
    log(f"tritonforge: fetched {platform}/{arch} (ort profile) of version {version} from "
        f"{store_url}, {how}{', signature verified' if args.trust else ''}: header {header}, archive {archive}"
        f"{ignored}")


def compile_into(args) -> None:
    from tritonforge.pipeline.builds.dist import build_ort
    from tritonforge.pipeline.report import compile_progress, print_summary

    target = _target(args)
    if not args.script_files:
        raise PipelineError("--script_files names no kernel script (or set TRITONFORGE_VERSION to fetch a build)")
    with compile_progress(not args.quiet) as progress:
        report = build_ort(args.script_files, target, args.header, args.obj_file, cache_dir=args.cache_dir,
                           jobs=args.jobs, allow_unpinned=args.allow_unpinned_triton, progress=progress,
                           triton=args.triton)
    if not args.quiet:
        print_summary(report)


def main(argv=None) -> int:
    args = parse_args(argv)
    try:
        if args.version or args.lock:
            fetch_into(args)
        else:
            compile_into(args)
    except PipelineError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
