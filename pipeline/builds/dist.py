"""Orchestrate a build: validate tables, compile (parallel, cached), embed, write outputs atomically.

Nothing appears at the destination unless every kernel of every target compiled: all outputs are
written in a staging directory next to the destination and renamed into place at the end.
"""

from __future__ import annotations

import contextlib
import json
import multiprocessing
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from tritonforge.pipeline.compile.cache import CompileCache, compile_key, ptx_checks
from tritonforge.pipeline.compile.compiler import CompileJob, compile_job, compile_spec
from tritonforge.pipeline.compile.pin import check_pin
from tritonforge.pipeline.compile.targets import Target
from tritonforge.pipeline.errors import PipelineError
from tritonforge.pipeline.package import embed, manifest
from tritonforge.pipeline.package.multi import MULTI, MultiReport, write_multi
from tritonforge.pipeline.package.outputs import MANIFEST_NAME, artifact_paths, package
from tritonforge.pipeline.scripts.profiles import select
from tritonforge.pipeline.scripts.table import KernelTable, load_table

from tritonforge.atomic import install_files, replace_dir

Progress = Callable[..., None]


@dataclass
class TargetReport:
    target: Target
    kernels: int = 0
    compiled: int = 0
    cached: int = 0
    compile_seconds: float = 0.0  # summed over kernels (work, not wall time)
    binary_bytes: int = 0
    archive_bytes: int = 0
    # {group: [kernel names]} of kernels ORT's plain launch cannot run (kernels.json says why)
    not_ort_launchable: dict[str, list[str]] = field(default_factory=dict)
    paths: dict[str, Path] = field(default_factory=dict)

    COUNTS = ("kernels", "compiled", "cached", "compile_seconds", "binary_bytes")

    def counts(self) -> dict:
        return {"target": self.target.spec(), **{k: getattr(self, k) for k in self.COUNTS}}


@dataclass
class BuildReport:
    targets: list[TargetReport]
    seconds: float
    triton_version: str
    multi: list[MultiReport] = field(default_factory=list)  # <platform>/multi/, one per platform built

    def to_json(self) -> str:
        """What a build in a container hands back to the host (the paths are the container's own)."""
        return json.dumps({"seconds": self.seconds, "triton_version": self.triton_version,
                           "targets": [t.counts() for t in self.targets],
                           "multi": [m.counts() for m in self.multi]}, indent=2) + "\n"

    @classmethod
    def from_json(cls, text: str) -> BuildReport:
        from tritonforge.pipeline.compile.targets import parse_target

        doc = json.loads(text)
        targets = [TargetReport(parse_target(t["target"]), **{k: t[k] for k in TargetReport.COUNTS})
                   for t in doc["targets"]]
        return cls(targets, doc["seconds"], doc["triton_version"], [MultiReport(**m) for m in doc["multi"]])

    @property
    def compiled(self) -> int:
        return sum(t.compiled for t in self.targets)

    @property
    def cached(self) -> int:
        return sum(t.cached for t in self.targets)


def discover_scripts(kernels_dir: Path | str) -> list[Path]:
    """Every `*.py` in the kernels directory not starting with `_`, in name order."""
    d = Path(kernels_dir)
    if not d.is_dir():
        raise PipelineError(f"kernels directory '{d}' does not exist")
    scripts = sorted(p for p in d.glob("*.py") if not p.name.startswith("_"))
    if not scripts:
        raise PipelineError(f"no kernel scripts in '{d}'")
    return scripts


@contextlib.contextmanager
def _compile_env():
    """Byte-identical builds (no line info) and a private Triton cache that cannot mask a real compile."""
    saved = {k: os.environ.get(k) for k in ("TRITON_DISABLE_LINE_INFO", "TRITON_CACHE_DIR")}
    with tempfile.TemporaryDirectory(prefix="tritonforge-triton-cache-") as tdir:
        os.environ["TRITON_DISABLE_LINE_INFO"] = "1"
        os.environ["TRITON_CACHE_DIR"] = tdir
        try:
            yield
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v


def _default_jobs() -> int:
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)


def kernel_key(spec, target: Target, triton_version: str) -> str:
    """The compile-cache key of one kernel for one target: a pure function of the inputs."""
    return compile_key(source_key=spec.source_key, sig=spec.sig_string(), constants=spec.constants,
                       options=spec.options, target=target.spec(), triton_version=triton_version)


def compile_table(table: KernelTable, targets: list[Target], cache: CompileCache, triton_version: str,
                  jobs: int = 0, progress: Progress | None = None):
    """Compile every (target, kernel) the kernel's script builds for; returns {target: [(spec, binary, record,
    cached)]} in table order, and reports."""
    progress = progress or (lambda *a, **k: None)
    for t in targets:
        if not any(spec.builds_for(t) for spec in table.kernels):
            raise PipelineError(f"no kernel script builds for {t.platform}", target=t.arch_name)
        for spec in table.kernels:
            if spec.builds_for(t):
                spec.check_target(t)
    script_index = {s: i for i, s in enumerate(table.scripts)}
    # results[t][i] stays None for a kernel whose script does not build for t's platform.
    results: dict[Target, list] = {t: [None] * len(table.kernels) for t in targets}
    reports = {t: TargetReport(t, kernels=sum(spec.builds_for(t) for spec in table.kernels)) for t in targets}
    pending: list[tuple[CompileJob, Target, int]] = []
    for t in targets:
        for i, spec in enumerate(table.kernels):
            if not spec.builds_for(t):
                continue
            key = kernel_key(spec, t, triton_version)
            hit = cache.get(key)
            if hit is not None:
                results[t][i] = (spec, hit[0], hit[1], True)
                reports[t].cached += 1
            else:
                pending.append((CompileJob(spec.script, script_index[spec.script], spec.index, spec.name,
                                           t.spec(), key), t, i))
    total = sum(r.kernels for r in reports.values())
    progress("plan", total=total, cached=total - len(pending))

    errors: list[str] = []

    def accept(job, t, i, binary, record):
        if binary is None:
            errors.append(record)
        else:
            cache.put(job.key, binary, record)
            results[t][i] = (table.kernels[i], binary, record, False)
            reports[t].compiled += 1
            reports[t].compile_seconds += record["compile_seconds"]
        progress("done", name=job.name, target=t.arch_name, ok=binary is not None)

    jobs = jobs or _default_jobs()
    with _compile_env():
        if jobs <= 1 or len(pending) < 8:
            for job, t, i in pending:
                try:
                    binary, record = compile_spec(table.kernels[i], t)
                    accept(job, t, i, binary, record)
                except PipelineError as exc:
                    accept(job, t, i, None, str(exc))
        elif pending:
            ctx = multiprocessing.get_context("spawn")  # no fork of a process holding Triton/LLVM state
            with ProcessPoolExecutor(max_workers=min(jobs, len(pending)), mp_context=ctx) as pool:
                where = {job: (t, i) for job, t, i in pending}
                for job, binary, record in pool.map(compile_job, [p[0] for p in pending], chunksize=4):
                    t, i = where[job]
                    accept(job, t, i, binary, record)
    if errors:
        more = f"\n(and {len(errors) - 5} more failures)" if len(errors) > 5 else ""
        raise PipelineError("\n".join(errors[:5]) + more)
    for t in targets:
        results[t] = [r for r in results[t] if r is not None]
        reports[t].binary_bytes = sum(r[2]["size"] for r in results[t])
    return results, reports


def write_artifacts(table: KernelTable, target: Target, compiled: list, out_dir: Path,
                    triton_version: str, host: str = "x86_64", profile: str = "full") -> dict[str, Path]:
    """Write archive, header, kernels.json (and CUDA's ptx/) into out_dir (a staging dir)."""
    kernels, blobs = [], []
    for index, (spec, binary, record, _cached) in enumerate(compiled):
        symbol = embed.symbol_base(spec.name, target.binary_ext)
        kernels.append(manifest.kernel_entry(index, spec, target, record, symbol, table.contracts.get(spec.group)))
        blobs.append((spec.name, target.binary_ext, binary))
        if record.get("ptx") is not None:
            ptx = out_dir / manifest.ptx_file(spec.name)
            ptx.parent.mkdir(exist_ok=True)
            ptx.write_text(record["ptx"])
    return package(out_dir, blobs, kernels, host, lambda archive, header_file: manifest.build_manifest(
        manifest.target_doc(target), triton_version, kernels, table.contracts, archive=archive,
        header=header_file, host=host, profile=profile))


def _prepare(scripts, targets, allow_unpinned: bool, profile: str = "full", triton: str | None = None):
    version = check_pin(allow_unpinned, triton)
    if not targets:
        raise PipelineError("no target given")
    return version, select(load_table(scripts), profile)


def build_dist(scripts: list[Path], targets: list[Target], out: Path | str, cache_dir=None, jobs: int = 0,
               allow_unpinned: bool = False, progress: Progress | None = None,
               host: str = "x86_64", profile: str = "full", triton: str | None = None) -> BuildReport:
    """Build `<out>/<platform>/<arch>/{archive, header, kernels.json}` for each target and
    `<out>/<platform>/multi/` from all of a platform's targets, all or nothing, from the kernels of
    `profile` (pipeline/scripts/profiles.py), with the pinned Triton (or `triton`, when it is running)."""
    t0 = time.perf_counter()
    version, table = _prepare(scripts, targets, allow_unpinned, profile, triton)
    results, reports = compile_table(table, targets, CompileCache(cache_dir), version, jobs, progress)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".staging-", dir=out))
    try:
        for t in targets:
            stage = staging / t.platform / t.arch_name
            stage.mkdir(parents=True)
            write_artifacts(table, t, results[t], stage, version, host, profile)
        multi = []
        for platform in dict.fromkeys(t.platform for t in targets):
            parts = [staging / t.platform / t.arch_name for t in targets if t.platform == platform]
            multi.append(write_multi(parts, staging / platform / MULTI, ptx_checks(cache_dir)))
        # Everything is built: now swap each target directory into place.
        install_targets(staging, targets, out, [reports[t] for t in targets], multi)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return BuildReport([reports[t] for t in targets], time.perf_counter() - t0, version, multi)


def install_targets(staged_root: Path, targets: list[Target], out: Path, reports: list[TargetReport],
                    multi: list[MultiReport] = ()) -> None:
    """Move each `<staged_root>/<platform>/<arch>` (and `<platform>/multi`) over its place in `out`
    (rename: no half state), and fill each report's paths, archive size and ORT warnings from what was
    installed."""
    dirs = [(t.platform, t.arch_name, rep) for t, rep in zip(targets, reports)]
    dirs += [(m.platform, MULTI, m) for m in multi]
    for platform, name, rep in dirs:
        final = out / platform / name
        final.parent.mkdir(parents=True, exist_ok=True)
        replace_dir(staged_root / platform / name, final, staged_root / f".old-{platform}-{name}")
        rep.paths = artifact_paths(final)
        if isinstance(rep, TargetReport):
            _read_installed(rep)
        else:
            rep.archive_bytes = rep.paths["archive"].stat().st_size
    for platform, name, _ in dirs:  # old copies were moved under staged_root; drop them now
        shutil.rmtree(staged_root / f".old-{platform}-{name}", ignore_errors=True)


def build_ort(scripts: list[Path], target: Target, header_path: Path | str, obj_file: Path | str,
              cache_dir=None, jobs: int = 0, allow_unpinned: bool = False,
              progress: Progress | None = None, host: str = "x86_64", triton: str | None = None) -> BuildReport:
    """ORT's layout: the archive and header where the flags say, kernels.json beside the archive."""
    t0 = time.perf_counter()
    version, table = _prepare(scripts, [target], allow_unpinned, triton=triton)
    results, reports = compile_table(table, [target], CompileCache(cache_dir), version, jobs, progress)
    obj_file, header_path = Path(obj_file), Path(header_path)
    dests = {"archive": obj_file, "header": header_path, "manifest": obj_file.parent / MANIFEST_NAME}
    for d in dests.values():
        d.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".staging-", dir=obj_file.parent))
    try:
        produced = write_artifacts(table, target, results[target], staging, version, host)
        install_files([(produced[kind], dest) for kind, dest in dests.items()])  # the header may be elsewhere
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    rep = reports[target]
    rep.paths = dests
    _read_installed(rep)
    return BuildReport([rep], time.perf_counter() - t0, version)


def _read_installed(rep: TargetReport) -> None:
    """Fill a report's archive size and ORT warnings from the files installed at rep.paths."""
    rep.archive_bytes = rep.paths["archive"].stat().st_size
    doc = json.loads(rep.paths["manifest"].read_text())
    rep.kernels = rep.kernels or len(doc["kernels"])
    rep.not_ort_launchable = {}
    for k in doc["kernels"]:
        if not k["ort_launchable"]:
            rep.not_ort_launchable.setdefault(k["group"], []).append(k["name"])
