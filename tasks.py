"""tritonforge tasks. `invoke --list` shows them; `invoke --help TASK` shows a task's flags.

All logic lives in `pipeline/` (and `runtime/`); these are thin typed wrappers. Defaults come from
invoke.yaml under `tritonforge:`.
"""

from __future__ import annotations

import sys
from pathlib import Path

from invoke import Context, Exit, task

PLATFORMS = ("cuda", "rocm")


def _cfg(c: Context):
    return c.config.tritonforge


def _targets(c: Context, platform: str, arch: str | None):
    from tritonforge.pipeline.compile.targets import parse_targets

    if platform not in PLATFORMS:
        raise Exit(f"error: --platform must be one of {', '.join(PLATFORMS)}, not '{platform}'", code=2)
    return parse_targets(arch if arch else list(_cfg(c).archs[platform]), platform=platform)


def _profile_out(c: Context, profile: str | None, out: str | None) -> tuple[str, Path]:
    """The profile (invoke.yaml's by default) and where its <platform>/<arch>/ go: <out>, or <out>/full."""
    from tritonforge.pipeline.scripts.profiles import check_profile, root

    profile = check_profile(profile or _cfg(c).profile)
    return profile, root(out or _cfg(c).out, profile)


def _full_dist(c: Context, dist: str | None) -> Path:
    """What the GPU tasks use: the full profile's builds (`--dist` names a root holding <platform>/<arch>/)."""
    from tritonforge.pipeline.scripts.profiles import root

    return Path(dist) if dist else root(_cfg(c).out, "full")


def _settings(c: Context, triton: str | None = None):
    from tritonforge.pipeline.builds.sequence import Settings

    cfg = _cfg(c)
    return Settings(cfg.kernels_dir, cfg.cache_dir, cfg.jobs, cfg.host, triton=triton or cfg.get("triton") or None)


def _log(quiet: bool = False):
    """One line per step on stderr (rich, no markup), or nothing when quiet."""
    from tritonforge.pipeline.report import console

    return (lambda line: None) if quiet else (
        lambda line: console.print(line, highlight=False, markup=False, soft_wrap=True))


def _require_gpu(platform: str, task_name: str) -> None:
    from tritonforge.pipeline.builds.runners import gpu_unavailable

    why = gpu_unavailable(platform)
    if why:
        raise Exit(f"error: invoke {task_name} runs on a GPU runner: this machine has {why}", code=1)


def _need(task_name: str, **given) -> None:
    """Flags a task cannot run without (flags, not positionals, so that `invoke TASK --help` works)."""
    missing = [f"--{name.replace('_', '-')}" for name, value in given.items() if not value]
    if missing:
        raise Exit(f"error: {task_name} needs {', '.join(missing)} (invoke --help {task_name})", code=2)


def _fail_on_pipeline_error(fn):
    """Turn tritonforge's errors (pipeline and runtime alike) into a one-line message and exit code 1
    instead of a traceback."""
    import functools

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        from tritonforge.errors import TritonforgeError

        try:
            return fn(*args, **kwargs)
        except TritonforgeError as exc:
            raise Exit(f"error: {exc}", code=1) from None

    return wrapper


@task(help={
    "platform": "cuda or rocm (default: cuda)",
    "arch": "comma-separated archs, e.g. sm_90,sm_80 or gfx942 (default: invoke.yaml archs)",
    "out": "output root; writes <out>/<platform>/<arch>/, the full profile <out>/full/... (default: dist)",
    "jobs": "parallel compile processes (default: invoke.yaml jobs; 0 = one per CPU)",
    "allow_unpinned_triton": "build even if the running triton is not the one in pins/triton.txt",
    "quiet": "no progress bar or summary table",
    "profile": "ort (the groups ORT's ops launch) or full (every group, for the runtime); default: ort",
    "triton": "build with this Triton release (3.5.0 to 3.9.0), not pins/triton.txt's (default: invoke.yaml triton)",
})
@_fail_on_pipeline_error
def compile(c: Context, platform: str = "cuda", arch: str | None = None, out: str | None = None,
            jobs: int = 0, allow_unpinned_triton: bool = False, quiet: bool = False, profile: str | None = None,
            triton: str | None = None):
    """Compile the kernels of kernels/ for each arch into ORT's archive + header + kernels.json."""
    from tritonforge.pipeline.builds.sequence import compile_here
    from tritonforge.pipeline.report import compile_progress, print_summary

    profile, root = _profile_out(c, profile, out)
    with compile_progress(not quiet) as progress:
        report = compile_here(_settings(c, triton), _targets(c, platform, arch), root, profile, jobs,
                              allow_unpinned_triton, progress)
    if not quiet:
        print_summary(report)


@task(help={
    "platform": "cuda or rocm",
    "arch": "comma-separated archs (default: invoke.yaml archs)",
    "runner": "auto (docker when an engine answers, else local), docker or local",
    "out": "output root (default: dist)",
    "jobs": "parallel compile processes (default: invoke.yaml jobs; 0 = one per CPU)",
    "allow_unpinned_triton": "local runner: build even if the running triton is not the pinned one",
    "quiet": "no progress bar or summary table",
    "profile": "ort (the groups ORT's ops launch; in <out>) or full (every group, in <out>/full); default: ort",
    "triton": "build with this Triton release (3.5.0 to 3.9.0), not pins/triton.txt's (default: invoke.yaml triton)",
    "plan": "resolve and check the arguments and say what would be built, without building anything",
})
@_fail_on_pipeline_error
def build(c: Context, platform: str = "cuda", arch: str | None = None, runner: str = "auto",
          out: str | None = None, jobs: int = 0, allow_unpinned_triton: bool = False, quiet: bool = False,
          profile: str | None = None, triton: str | None = None, plan: bool = False):
    """Build the platform's image and compile the kernels in it (or locally), then run the consumer check."""
    from tritonforge.pipeline.builds.sequence import check_build, compile_targets
    from tritonforge.pipeline.builds.sequence import plan as plan_build
    from tritonforge.pipeline.report import compile_progress, print_summary

    targets = _targets(c, platform, arch)
    profile, root = _profile_out(c, profile, out)
    if plan:
        print(plan_build(_settings(c, triton), targets, root, profile, runner))
        return
    _, report = compile_targets(_settings(c, triton), targets, root, platform, profile, runner, jobs,
                                allow_unpinned_triton, _log(quiet), lambda: compile_progress(not quiet))
    if not quiet:
        print_summary(report)
    check_build(_settings(c), report, _log())  # the checks' results are printed even when quiet


@task(help={
    "platform": "cuda or rocm",
    "arch": "comma-separated archs to merge (default: invoke.yaml archs)",
    "parts": "comma-separated output roots of per-arch builds, e.g. from other machines (default: --out itself)",
    "out": "output root: writes <out>/<platform>/multi/ and copies each arch's build beside it (default: dist)",
    "profile": "ort or full (which builds: <root>/... or <root>/full/...); default: ort",
})
@_fail_on_pipeline_error
def merge(c: Context, platform: str = "cuda", arch: str | None = None, parts: str | None = None,
          out: str | None = None, profile: str | None = None):
    """Merge per-arch builds into one multi-arch archive (<out>/<platform>/multi/) without compiling."""
    from tritonforge.pipeline.builds.sequence import merge as do_merge
    from tritonforge.pipeline.scripts.profiles import root as profile_root

    targets = _targets(c, platform, arch)
    profile, root = _profile_out(c, profile, out)
    roots = [profile_root(p.strip(), profile) for p in parts.split(",") if p.strip()] if parts else [root]
    do_merge(_settings(c), roots, platform, [t.arch_name for t in targets], root, _log())


@task(help={"platform": "cuda or rocm", "force": "rebuild even if an image with the content tag exists",
            "triton": "an image with this Triton release (3.5.0 to 3.9.0), not the pin (default: invoke.yaml triton)",
            "prune": "instead of building, remove the platform's images tagged with another content hash (the "
                     "pin's image stays, and --triton's)",
            "dry_run": "with --prune: name what would be removed, remove nothing"})
@_fail_on_pipeline_error
def image(c: Context, platform: str = "cuda", force: bool = False, triton: str | None = None, prune: bool = False,
          dry_run: bool = False):
    """Build the compile image for a platform (tag = content hash of its inputs; skipped when present), or --prune
    the ones other inputs made."""
    from tritonforge.pipeline.builds.images import build_image, prune_images

    if dry_run and not prune:
        raise Exit("error: --dry-run goes with --prune", code=2)
    if prune and force:
        raise Exit("error: --force builds and --prune removes; name one", code=2)
    other = _settings(c, triton).other_triton
    if prune:
        prune_images(platform, print, dry_run, other)
        return
    print(build_image(platform, force=force, triton=other))


@task(name="base-image")
@_fail_on_pipeline_error
def base_image(c: Context):
    """Make the local Debian base image (debootstrap + import) used when no registry answers."""
    from tritonforge.pipeline.builds.images import client, ensure_local_base

    print(ensure_local_base(client(), print))


@task(name="pin-move", help={
    "candidate": "the Triton version to move the pin to, e.g. 3.9.0 (default: pins/triton.txt's, as a PR changes it)",
    "current": "the version to compare with (default: pins/triton.txt's)",
    "current_ref": "read the current version from pins/triton.txt at this git revision instead (a PR's base)",
    "platform": "cuda or rocm",
    "arch": "comma-separated archs (default: invoke.yaml archs)",
    "runner": "auto (docker when an engine answers, else local), docker (an image each) or local (a venv each)",
    "out": "where both builds and report.md / report.json go (default: pin-move)",
    "jobs": "parallel compile processes (default: invoke.yaml jobs; 0 = one per CPU)",
    "numerics": "the host half of the numerics under both Tritons: Triton's interpreter (--no-numerics skips it)",
    "gpu": "on a CUDA GPU runner: the full profile for this GPU built by both, every kernel checked against "
           "float64 (compiled code), and the zoo's shapes timed under both",
})
@_fail_on_pipeline_error
def pin_move(c: Context, candidate: str | None = None, current: str | None = None, current_ref: str | None = None,
             platform: str = "cuda", arch: str | None = None, runner: str = "auto", out: str = "pin-move",
             jobs: int = 0, numerics: bool = True, gpu: bool = False):
    """Prove a Triton pin move: the ORT profile built with the current pin and the candidate, every kernel's
    launch, registers, spills and size compared, numerics checked under both (the interpreter; with --gpu,
    every compiled kernel); fails when ORT's launch of a kernel would change or numerics fail."""
    from tritonforge.pipeline.builds import pin_move as pm
    from tritonforge.pipeline.builds.runners import choose_runner
    from tritonforge.pipeline.compile.pin import pin_at_revision, pinned_version

    targets = _targets(c, platform, arch)
    if gpu:
        _require_gpu(platform, "pin-move --gpu")
    now = current or (pin_at_revision(current_ref) if current_ref else pinned_version())
    cand = candidate or pinned_version()
    used = choose_runner(runner, print)
    venvs, cache = Path(_cfg(c).cache_dir).parent / "pin-move", Path(_cfg(c).cache_dir)
    doc = pm.run(Path(_cfg(c).kernels_dir), platform, [t.arch_name for t in targets], now, cand, used, Path(out),
                 venvs, cache, jobs or _cfg(c).jobs, _cfg(c).host, numerics, print)
    if gpu and not doc["failures"]:
        doc = pm.gpu_half(doc, Path(_cfg(c).kernels_dir), used, Path(out), venvs, cache, jobs or _cfg(c).jobs,
                           _cfg(c).host, print)
    print(f"{out}/report.md: triton {now} -> {cand}, {len(doc['failures'])} problem(s)")
    if doc["failures"]:
        raise Exit(f"error: the pin move to triton {cand} fails: " + "; ".join(doc["failures"][:5]), code=1)


@task(help={"fix": "let ruff fix what it can"})
def lint(c: Context, fix: bool = False):
    """ruff on the Python, hadolint on the Dockerfiles, actionlint on the workflows, shellcheck on scripts."""
    import glob
    import sys

    bindir = Path(sys.executable).parent  # linters installed in this venv (pins/dev.txt)
    tool = lambda name: str(bindir / name) if (bindir / name).exists() else name
    c.run(f"{tool('ruff')} check {'--fix ' if fix else ''}.")
    c.run(f"{tool('hadolint')} {' '.join(sorted(glob.glob('docker/*.Dockerfile')))}")
    c.run(f"{tool('actionlint')} -no-color")
    c.run(f"{tool('shellcheck')} scripts/setup .ci/run")


@task(help={"platform": "cuda or rocm", "dist": "artifact root holding <platform>/<arch>/ (default: dist/full)"})
@_fail_on_pipeline_error
def gpu_test(c: Context, platform: str = "cuda", dist: str | None = None):
    """Run the GPU tests inside the platform image against dist/ (CUDA: all GPUs; ROCm: /dev/kfd, /dev/dri)."""
    from tritonforge.pipeline.builds.images import build_image
    from tritonforge.pipeline.builds.runners import run_gpu_tests

    if platform not in PLATFORMS:
        raise Exit(f"error: --platform must be one of {', '.join(PLATFORMS)}, not '{platform}'", code=2)
    root = _full_dist(c, dist)
    if not any((root / platform).glob("*/kernels.json")):
        raise Exit(f"error: no {platform} artifacts under {root / platform}: run `invoke build --platform "
                   f"{platform} --profile full` first, or pass --dist", code=2)
    _require_gpu(platform, "gpu-test")
    image_tag = build_image(platform, print)
    code = run_gpu_tests(image_tag, platform, root.resolve(), Path.cwd(), print)
    if code:
        raise Exit(f"GPU tests failed in {image_tag} (exit {code})", code=code)


@task(help={"path": "a kernels.json, or a directory holding one"})
@_fail_on_pipeline_error
def check(c: Context, path: str | None = None):
    """Run the C++ consumer check (g++, --whole-archive, dlsym) on one built artifact directory."""
    _need("check", path=path)
    from tritonforge.pipeline.package.consumer_check import check_artifacts

    p = Path(path)
    result = check_artifacts(p.parent if p.is_file() else p)
    print(result.program_output.strip().splitlines()[-1])


@task(help={
    "platform": "cuda (ROCm runners are not supported by the runtime yet)",
    "arch": "the artifacts' arch, e.g. sm_90 (default: this GPU's)",
    "shapes": "file of 'batch,n_cols' lines (default: the model zoo's softmax shapes)",
    "group_norm_shapes": "file of 'n,hw,c,groups' lines (default: the model zoo's GroupNorms)",
    "ops": "comma list of tune keys, each op of runtime/ops declaring its own (softmax, log_softmax, "
           "group_norm_silu, group_norm_pass)",
    "dtypes": "comma list of fp32,fp16,bf16",
    "dist": "artifact root holding cuda/<arch>/ (default: dist/full)",
    "out": "tune cache to write (default: tune/<platform>/<arch>/<device>.json)",
    "budget_ms": "timing budget per candidate, ms",
})
@_fail_on_pipeline_error
def tune(c: Context, platform: str = "cuda", arch: str | None = None, shapes: str | None = None,
         ops: str = "softmax", dtypes: str = "fp16", dist: str | None = None, out: str | None = None,
         budget_ms: float = 10.0, group_norm_shapes: str | None = None):
    """Benchmark every candidate on this machine's GPU (TunableOp's method) and write a tune cache."""
    import sys

    from tritonforge.runtime.tune import tune_to_file

    if platform != "cuda":
        raise Exit(f"error: tuning runs on CUDA GPUs only for now, not '{platform}'", code=2)
    _require_gpu(platform, "tune")
    _, summary = tune_to_file(_full_dist(c, dist), ops.split(","), dtypes.split(","), shapes, group_norm_shapes, out,
                              budget_ms, arch, log=lambda line: print(line, file=sys.stderr, flush=True))
    print(summary)


@task(help={
    "op": "softmax or group_norm",
    "dtypes": "comma list of fp32,fp16,bf16 (with --model: fp16,fp32, ORT's dtypes)",
    "quick": "softmax: target, long-row and latency shapes only (no row-length sweep)",
    "dist": "artifact root holding cuda/<arch>/ (default: dist/full)",
    "model": "a model of the zoo (runtime/zoo.py: sd15_unet, sdxl_vae_decoder, llama3, ...) or all: its "
             "GroupNorm and softmax shapes against ORT's own kernels, torch and the copy ceilings",
    "e2e": "end to end: sd15_vae_decoder, sd15_unet, sdxl_vae_decoder, sdxl_unet, sd3_medium, sd35_medium, "
           "flux_dev, pixart_sigma (comma list, or all) exported from diffusers by torch.onnx (TorchScript and "
           "dynamo) and ORT's optimizer, or an .onnx file of your own: the model as is against it rewritten, in "
           "onnxruntime-gpu's CUDA EP (needs torch and diffusers for the exports)",
    "library": "--e2e: the custom-op library (default: the one ortlib.register finds)",
})
@_fail_on_pipeline_error
def bench(c: Context, op: str = "softmax", dtypes: str | None = None, quick: bool = False,
          dist: str | None = None, model: str | None = None, e2e: str | None = None, library: str | None = None):
    """Bandwidth of an op on this GPU vs torch and the copy ceiling, a model's shapes (--model) vs ORT's
    own kernels, or whole models as users export them, as is vs rewritten (--e2e); writes
    benchmarks/results/ (+ PNG for softmax)."""
    import shlex
    import subprocess
    import sys

    scripts = {"softmax": "benchmarks/softmax_bench.py", "group_norm": "benchmarks/group_norm_bench.py"}
    if op not in scripts:
        raise Exit(f"error: --op must be one of {sorted(scripts)}, not '{op}'", code=2)
    if e2e is not None:
        if e2e.endswith(".onnx"):
            if not Path(e2e).is_file():
                raise Exit(f"error: --e2e: {e2e}: no such model", code=2)
            what = f"--onnx {shlex.quote(e2e)}"
        else:
            # the benchmark knows its models (the task runs it, never imports it)
            known = subprocess.run([sys.executable, "benchmarks/e2e_bench.py", "--list-models"], capture_output=True,
                                   text=True, check=True).stdout.split()
            names = [m for m in (s.strip() for s in e2e.split(",")) if m]
            unknown = [m for m in names if m not in known] if e2e != "all" else []
            if unknown or not names:
                said = f"unknown model(s) {', '.join(unknown)}" if unknown else "no model named"
                raise Exit(f"error: --e2e: {said}; known: {', '.join(known)} or all", code=2)
            what = f"--model {shlex.quote(e2e)} --dtypes {dtypes or 'fp16,fp32'}"
        _require_gpu("cuda", "bench")
        lib = f" --library {shlex.quote(library)}" if library else ""
        _run_script(c, f"{sys.executable} benchmarks/e2e_bench.py {what}{lib}")
        return
    if model is not None:
        from tritonforge.runtime import zoo

        try:
            zoo.models(model)
        except KeyError as exc:
            raise Exit(f"error: --model: {exc.args[0]}", code=2) from None
    _require_gpu("cuda", "bench")
    if model is not None:
        cmd = (f"{sys.executable} benchmarks/zoo_bench.py --model {model} --dist {_full_dist(c, dist)} "
               f"--dtypes {dtypes or 'fp16,fp32'}")
    else:
        flags = " --quick" if quick and op == "softmax" else ""
        cmd = (f"{sys.executable} {scripts[op]} --dist {_full_dist(c, dist)} "
               f"--dtypes {dtypes or 'fp32,fp16,bf16'}{flags}")
    _run_script(c, cmd)


def _run_script(c: Context, cmd: str) -> None:
    # the script prints its own error line; invoke's report of a failed command would repeat it at length
    result = c.run(cmd, pty=False, warn=True)
    if result.exited:
        raise Exit(f"error: {cmd.split()[1]} exited with {result.exited}", code=result.exited)


def _store(c: Context, store: str | None, endpoint_url: str | None = None):
    from tritonforge.pipeline.release.stores import open_store

    return open_store(store or _cfg(c).store, endpoint_url)


def _trust(c: Context, trust: str | None) -> str | None:
    """The public key fetch verifies signatures with: --trust, else invoke.yaml's trust (empty: none)."""
    return trust or _cfg(c).get("trust") or None


@task(help={
    "version": "release version, e.g. 1.4.0 (immutable once published)",
    "store": "file://DIR or s3://bucket/prefix (default: invoke.yaml store)",
    "dist": "built artifacts root (default: invoke.yaml out)",
    "tune": "tune caches root (default: tune)",
    "endpoint_url": "S3-compatible endpoint (default: AWS_ENDPOINT_URL or AWS)",
    "manifest_out": "also write the published manifest here (for a provenance attestation; the signature "
                    "goes beside it as <FILE>.sig)",
    "profile": "ort, full or ort,full: which builds of dist/ (ort in dist/, full in dist/full/); default: ort",
    "sign_key": "Ed25519 private key (PEM file, from `invoke keygen`) to sign the manifest with "
                "(default: the PEM in $TRITONFORGE_SIGNING_KEY, if set)",
    "index": "also upload the version's tritonforge_ort wheel (invoke wheel --version V) to this package index's "
             "upload URL (credentials: TRITONFORGE_INDEX_USER / TRITONFORGE_INDEX_PASSWORD)",
})
@_fail_on_pipeline_error
def publish(c: Context, version: str | None = None, store: str | None = None, dist: str | None = None,
            tune: str = "tune", endpoint_url: str | None = None, manifest_out: str | None = None,
            profile: str | None = None, sign_key: str | None = None, index: str | None = None):
    """Publish every built arch of the profiles (and matching tune caches, and the version's tritonforge_ort
    wheel) as an immutable version; with --index, the wheel to a package index too."""
    import os

    from tritonforge.pipeline.release.publish import publish as do_publish
    from tritonforge.pipeline.scripts.profiles import parse_profiles

    _need("publish", version=version)
    profiles = parse_profiles(profile or _cfg(c).profile)
    key = sign_key or os.environ.get("TRITONFORGE_SIGNING_KEY") or None
    if do_publish(_store(c, store, endpoint_url), version, dist or _cfg(c).out, tune, print, manifest_out,
                  profiles, key) == "identical":
        print(f"{version} is already published with identical content: nothing to do")
    if index:
        from tritonforge.pipeline.package.wheel import wheel_version
        from tritonforge.pipeline.release.index import upload
        from tritonforge.pipeline.release.publish import WHEELS

        wheels = sorted((Path(dist or _cfg(c).out) / WHEELS).glob(f"tritonforge_ort-{wheel_version(version)}-*.whl"))
        if not wheels:
            raise Exit(f"error: --index: no tritonforge_ort wheel of {version} in {Path(dist or _cfg(c).out) / WHEELS} "
                       f"(invoke wheel --version {version})", code=1)
        for w in wheels:
            upload(index, w)


@task(help={
    "version": "release version, or latest (the newest not yanked)",
    "platform": "cuda or rocm",
    "arch": "e.g. sm_90, gfx942, or multi (one archive for every arch of the platform)",
    "dest": "directory to fill (replaced only after every file verified)",
    "store": "file://DIR or s3://bucket/prefix (default: invoke.yaml store; with --lock: the lock's)",
    "endpoint_url": "S3-compatible endpoint (default: AWS_ENDPOINT_URL or AWS)",
    "profile": "ort (what ORT's build links) or full (every group, for the runtime); default: ort",
    "trust": "public key (PEM file) the manifest must be signed with (default: invoke.yaml trust)",
    "lock": "a lock file (`invoke lock`): fetch exactly its bytes; it names version, platform, arch, profile",
    "wheel": "fetch the version's tritonforge_ort wheel into --dest instead of a build (no --platform, --arch)",
    "ort_sources": "fetch the version's ONNX Runtime SparseAttention sources (invoke ort-sources) into --dest",
})
@_fail_on_pipeline_error
def fetch(c: Context, dest: str | None = None, version: str | None = None, platform: str | None = None,
          arch: str | None = None, store: str | None = None, endpoint_url: str | None = None,
          profile: str | None = None, trust: str | None = None, lock: str | None = None, wheel: bool = False,
          ort_sources: bool = False):
    """Download one build of a version (or its wheel, --wheel, or its ORT sources, --ort-sources), verify every
    sha256 (and signature, lock), add a CMake file."""
    from tritonforge.pipeline.release.publish import fetch as do_fetch
    from tritonforge.pipeline.release.publish import fetch_locked, resolve_version
    from tritonforge.pipeline.scripts.profiles import check_profile

    _need("fetch", dest=dest)
    if wheel:
        from tritonforge.pipeline.release.publish import fetch_wheels

        _need("fetch --wheel", version=version)
        s = _store(c, store, endpoint_url)
        for w in fetch_wheels(s, resolve_version(s, version), dest, print, _trust(c, trust)):
            print(f"fetched {w}; pip install {w}")
        return
    if ort_sources:
        from tritonforge.pipeline.release.publish import fetch_ort_sources

        _need("fetch --ort-sources", version=version)
        s = _store(c, store, endpoint_url)
        files = fetch_ort_sources(s, resolve_version(s, version), dest, print, _trust(c, trust))
        print(f"fetched {len(files)} files into {dest}; lay them into ONNX Runtime: "
              f"invoke ort-sources --fetched {dest} --ort-root ORT")
        return
    if lock:
        if version or platform or arch or profile:
            raise Exit("error: --lock names the version, platform, arch and profile; give none of them", code=2)
        out = fetch_locked(lock, dest, _store(c, store, endpoint_url) if store else None, _trust(c, trust), print)
    else:
        if not (version and platform and arch):
            raise Exit("error: fetch needs --version, --platform and --arch (or --lock FILE)", code=2)
        s = _store(c, store, endpoint_url)
        out = do_fetch(s, resolve_version(s, version), platform, arch, dest, print,
                       check_profile(profile or _cfg(c).profile), _trust(c, trust))
    print(f"fetched into {out}; in CMake: include({out}/tritonforge-kernels.cmake) and link tritonforge::kernels")


@task(help={
    "version": "release version, or latest (the newest not yanked)",
    "platform": "cuda or rocm",
    "arch": "e.g. sm_90, gfx942, or multi",
    "profile": "ort or full (default: invoke.yaml profile)",
    "out": "lock file to write (default: tritonforge.lock)",
    "store": "file://DIR or s3://bucket/prefix (default: invoke.yaml store); recorded in the lock",
    "endpoint_url": "S3-compatible endpoint (default: AWS_ENDPOINT_URL or AWS)",
    "trust": "public key (PEM file) the manifest must be signed with (default: invoke.yaml trust)",
})
@_fail_on_pipeline_error
def lock(c: Context, version: str | None = None, platform: str | None = None, arch: str | None = None,
         profile: str | None = None,
         out: str = "tritonforge.lock", store: str | None = None, endpoint_url: str | None = None,
         trust: str | None = None):
    """Pin one build of a published version to its exact bytes (manifest and file sha256s) in a lock file."""
    from tritonforge.pipeline.release.publish import lock_build
    from tritonforge.pipeline.scripts.profiles import check_profile

    _need("lock", version=version, platform=platform, arch=arch)
    doc = lock_build(_store(c, store, endpoint_url), version, platform, arch, check_profile(profile or _cfg(c).profile),
                     out, _trust(c, trust), print)
    print(f"locked {doc['platform']}/{doc['arch']} ({doc['profile']}) of {doc['version']}: {len(doc['files'])} files, "
          f"manifest sha256 {doc['manifest_sha256']} -> {out}")


@task(help={
    "version": "the published version to withdraw",
    "reason": "why (shown to everyone who fetches it)",
    "store": "file://DIR or s3://bucket/prefix (default: invoke.yaml store)",
    "endpoint_url": "S3-compatible endpoint (default: AWS_ENDPOINT_URL or AWS)",
})
@_fail_on_pipeline_error
def yank(c: Context, version: str | None = None, reason: str | None = None, store: str | None = None,
         endpoint_url: str | None = None):
    """Withdraw a version: it stays fetchable by name or lock (with a warning), `latest` skips it; nothing
    is deleted."""
    from tritonforge.pipeline.release.publish import yank as do_yank

    _need("yank", version=version, reason=reason)
    doc = do_yank(_store(c, store, endpoint_url), version, reason)
    print(f"yanked {version} at {doc['yanked_at']}: {doc['reason']}")


@task(help={
    "private": "where to write the private key (PEM, mode 0600; keep it secret, e.g. as a CI secret)",
    "public": "where to write the public key (PEM; give it to consumers for `fetch --trust`)",
})
@_fail_on_pipeline_error
def keygen(c: Context, private: str = "tritonforge-signing.key", public: str = "tritonforge-signing.pub"):
    """Make an Ed25519 key pair for signing releases (never overwrites a key)."""
    from tritonforge.pipeline.release.signing import keygen as make

    kid = make(private, public)
    print(f"key {kid}: private {private} (publish --sign-key), public {public} (fetch --trust)")


@task(help={
    "grace": "keep unreferenced blobs younger than this: seconds, or 90s, 15m, 2h, 7d (default: 1h)",
    "dry_run": "list what would be deleted, delete nothing",
    "store": "file://DIR or s3://bucket/prefix (default: invoke.yaml store)",
    "endpoint_url": "S3-compatible endpoint (default: AWS_ENDPOINT_URL or AWS)",
})
@_fail_on_pipeline_error
def gc(c: Context, grace: str = "1h", dry_run: bool = False, store: str | None = None,
       endpoint_url: str | None = None):
    """Delete blobs no version references (left by refused or killed publishes), safely beside publishers."""
    from tritonforge.pipeline.release.gc import collect_garbage, parse_duration

    collect_garbage(_store(c, store, endpoint_url), parse_duration(grace), dry_run, print)


@task(help={"store": "file://DIR or s3://bucket/prefix (default: invoke.yaml store)",
            "endpoint_url": "S3-compatible endpoint"})
@_fail_on_pipeline_error
def versions(c: Context, store: str | None = None, endpoint_url: str | None = None):
    """List the published versions in a store, oldest first; yanked ones say so."""
    from tritonforge.pipeline.release.publish import listing

    for version, yank_doc in listing(_store(c, store, endpoint_url)):
        print(version if yank_doc is None else f"{version}  yanked: {yank_doc['reason']}")


@task(help={
    "dist": "a CUDA build directory (default: dist/full/cuda/multi, else dist/cuda/multi)",
    "out": "where the library goes (default: <dist>/libtritonforge_ort.so)",
    "tune": "tune caches (a file, or a root holding cuda/<arch>/*.json from invoke tune) whose choices go "
            "into the library's .tune file beside it (default: tune, when it holds any)",
})
@_fail_on_pipeline_error
def ortlib(c: Context, dist: str | None = None, out: str | None = None, tune: str = "tune"):
    """Build the custom-op library for onnxruntime-gpu from a CUDA build (invoke build makes it too), with
    the kernel choices of the tune caches beside it."""
    from tritonforge.pipeline.package.ortlib import (
        build_library,
        check_library,
        default_build,
        tune_caches,
        write_tune_file,
    )

    d = Path(dist) if dist else default_build()
    lib = build_library(d, _settings(c).tools_cache, out)
    print(f"{lib}: {check_library(lib, d)}")
    tuned, notes = write_tune_file(lib, d, tune_caches(tune))
    for note in notes:
        print(note)
    if tuned:
        print(f"{tuned}: {sum(1 for line in tuned.read_text().splitlines() if not line.startswith('#'))} "
              "kernel choices from the tune caches")


@task(help={
    "dist": "the CUDA build whose library goes in (default: dist/full/cuda/multi, every GPU of the full profile)",
    "version": "the wheel's version (default: the project's)",
    "out": "where the wheel goes (default: dist/wheels)",
    "userland": "then install and run it in this older Linux: bullseye (Debian 11, glibc 2.31, Python 3.9), "
                "made with debootstrap (needs Docker and root)",
    "model": "with --userland: the model to rewrite and run there (default: a GroupNorm + SiLU + softmax block)",
})
@_fail_on_pipeline_error
def wheel(c: Context, dist: str | None = None, version: str | None = None, out: str = "dist/wheels",
          userland: str | None = None, model: str | None = None):
    """The custom-op library as a wheel onnxruntime-gpu users pip install (tritonforge_ort: the library,
    get_library_path / register / info, the rewrite and tritonforge-rewrite), tagged with the manylinux
    platform auditwheel says it meets; --userland proves it installs and runs on an older Linux."""
    from tritonforge.pipeline.package.wheel import build_wheel

    from tritonforge import __version__
    from tritonforge.artifact_format import LIBRARY_NAME

    if userland:  # a wrong name fails before a wheel is written
        from tritonforge.pipeline.package.userland import known

        known(userland)
    d = Path(dist) if dist else _full_dist(c, None) / "cuda" / "multi"
    path = build_wheel(d / LIBRARY_NAME, out, version or __version__)
    print(f"{path}: {path.stat().st_size / 2**20:.1f} MiB (auditwheel: {path.name.rsplit('-', 1)[1][:-4]})")
    if userland:
        from tritonforge.pipeline.package.userland import check_wheel, summary

        print(summary(check_wheel(path, userland, model, _settings(c).tools_cache), userland))


@task(help={
    "model": "the ONNX model to read, or a pipeline folder as optimum-cli export onnx writes it",
    "out": "where the rewritten model goes (default: <model>.tf.onnx beside it; a folder's: <folder>.tf)",
    "library": "the library whose CUDA kernels decide what is rewritten (default: the one ortlib.register finds)",
    "any_dtype": "rewrite every qualifying node, whatever the library's CUDA kernels serve",
    "all_softmax": "also the softmax nodes at row lengths where ORT's own kernel measured faster (77 and 197 "
                   "columns; runtime/ortlib/rewrite/choices.json)",
    "attention": "measured (default: the fastest measured per class of shape), tritonforge (the library's op) or "
                 "ort (com.microsoft.MultiHeadAttention)",
    "layout": "nhwc (default: GroupNorms channels-last, for tritonforge_ort.session's prefer_nhwc) or nchw (the "
              "export's layout, for sessions without prefer_nhwc)",
    "no_load_check": "write even where onnxruntime is not installed to load the rewrite first (unchecked)",
    "gpu": "the GPU the model will run on (e.g. 'NVIDIA L4'): its measurements, or the nearest GPU's, decide "
           "between the library's nodes and ORT's (default: the GPU nvidia-smi shows, else the shipped tables')",
    "precision": "fp8: the float16 / bfloat16 model's large Linears as fp8 e4m3 GEMMs (GPUs with fp8 tensor "
                 "cores, sm_89+)",
    "fp8_min_features": "with --precision fp8: Linears with fewer input or output features stay in their type "
                        "(default: the break-even measured per shape, runtime/ortlib/rewrite/fp8.py; 0 takes every "
                        "one)",
    "no_fp8_check": "with --precision fp8: skip trying each Linear on the model's own activations (one run on "
                    "random inputs) before it goes to fp8",
    "measure": "auto (default: time the choices on this machine's GPU where it has one and onnxruntime-gpu, "
               "for the model's own shapes), on, or off (the shipped tables decide)",
    "measure_budget": "seconds the rewrite may take with its timing; shapes not timed by then are left to the "
                      "tables (default 60)",
    "dims": "sizes of the dims the model leaves symbolic, NAME=SIZE[,NAME=SIZE...], so those choices can be timed",
})
@_fail_on_pipeline_error
def rewrite(c: Context, model: str | None = None, out: str | None = None, library: str | None = None,
            any_dtype: bool = False, all_softmax: bool = False, attention: str = "measured", layout: str = "nhwc",
            no_load_check: bool = False, gpu: str | None = None, precision: str | None = None,
            fp8_min_features: int | None = None, no_fp8_check: bool = False, measure: str = "auto",
            measure_budget: float = 60.0, dims: str | None = None):
    """Put a model's GroupNorms (as exporters write them: InstanceNormalization patterns, GroupNormalization,
    ORT's fused GroupNorm), last-axis softmaxes and unfused attention into the library's ops (attention: or
    ORT's own, where it measured faster); any size (external data); or every model of a pipeline folder that
    optimum-cli export onnx wrote, into a new folder."""
    from tritonforge.runtime.ortlib.cli import dims_arg, rewrite_and_say

    _need("rewrite", model=model)
    if attention not in ("measured", "tritonforge", "ort"):
        raise Exit(f"error: --attention must be measured, tritonforge or ort, not '{attention}'", code=2)
    if layout not in ("nchw", "nhwc"):
        raise Exit(f"error: --layout must be nchw or nhwc, not '{layout}'", code=2)
    if precision not in (None, "fp8"):
        raise Exit(f"error: --precision must be fp8 (or left out: the model's own), not '{precision}'", code=2)
    if fp8_min_features is not None and not str(fp8_min_features).isdigit():
        raise Exit(f"error: --fp8-min-features must be a count of features >= 0, not '{fp8_min_features}'", code=2)
    if measure not in ("auto", "on", "off"):
        raise Exit(f"error: --measure must be auto, on or off, not '{measure}'", code=2)
    try:
        sizes = None if dims is None else dims_arg(dims)
    except ValueError as exc:
        raise Exit(f"error: --dims: {exc}", code=2) from None
    rewrite_and_say(model, out, library, any_dtype, all_softmax,
                    attention=None if attention == "measured" else attention, layout=layout,
                    check_load=not no_load_check, gpu=gpu, precision=precision,
                    fp8_min_features=None if fp8_min_features is None else int(fp8_min_features),
                    fp8_check=not no_fp8_check, measure=measure, dims=sizes, measure_budget=float(measure_budget),
                    progress=lambda line: print(line, file=sys.stderr, flush=True))


@task(name="ort-sources", help={
    "arch": "comma-separated archs among sm_75,sm_80,sm_90,sm_100,sm_103,sm_120,sm_121 (default: all seven)",
    "out": "where the two folders, the patch and ort-sources.json go (default: dist/ort-sources)",
    "ort_root": "an ONNX Runtime checkout to lay the files into (its generated files replaced, the patch applied)",
    "jobs": "parallel compile processes (default: invoke.yaml jobs; 0 = one per CPU)",
    "allow_unpinned_triton": "generate even if the running triton is not the pinned one",
    "fetched": "lay these already generated files (invoke fetch --ort-sources) into --ort-root; no compile",
})
@_fail_on_pipeline_error
def ort_sources(c: Context, arch: str | None = None, out: str = "dist/ort-sources", ort_root: str | None = None,
                jobs: int = 0, allow_unpinned_triton: bool = False, fetched: str | None = None):
    """Write ONNX Runtime's SparseAttention kernel sources (sparse_attention_v1/, sparse_attention_v2/) from
    kernels/sparse_attention/, compiled here by the pinned Triton for each arch."""
    from tritonforge.pipeline.compile.pin import check_pin
    from tritonforge.pipeline.package import ort_sources as gen
    from tritonforge.pipeline.report import compile_progress

    if fetched:
        _need("ort-sources --fetched", ort_root=ort_root)
        gen.check_folder(Path(fetched))
        removed = gen.lay_into(Path(fetched), Path(ort_root))
        print(f"{ort_root}: {len(removed)} generated files replaced by {fetched}'s, {gen.PATCH_NAME} applied")
        return
    archs = gen.parse_archs(arch)
    check_pin(allow_unpinned_triton)
    cfg = _cfg(c)
    with compile_progress(True) as progress:
        compiled, triton = gen.compile_kernels(Path(cfg.kernels_dir), archs, Path(cfg.cache_dir),
                                               jobs or cfg.jobs, progress)
    data = gen.render(compiled, archs, triton)
    path = gen.write(data, Path(out))
    kernels = sum(1 for k in data if k.endswith(".cc") and not k.endswith("_api.cc"))
    print(f"{path}: {kernels} kernels for {', '.join(f'sm_{a}' for a in archs)} (Triton {triton}), "
          f"{sum(len(b) for b in data.values()) / 2**20:.1f} MiB")
    if ort_root:
        removed = gen.lay_into(path, Path(ort_root))
        print(f"{ort_root}: {len(removed)} generated files replaced, {gen.PATCH_NAME} applied")
