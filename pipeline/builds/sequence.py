"""What a build is: compile every target (in this Python or in the platform's image), then prove each
build directory consumable (the C++ consumer check on every arch and on `multi/`) and make and check the
custom-op library beside every CUDA `multi/`. A merge of builds made elsewhere runs the same checks.

The `build`, `compile` and `merge` tasks call these; each step reports through `log` (one line per
build directory) and the first failure raises a PipelineError naming the directory at fault.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path

from tritonforge.pipeline.builds.dist import BuildReport
from tritonforge.pipeline.builds.runners import choose_runner, run_docker, run_local
from tritonforge.pipeline.compile.cache import ptx_checks
from tritonforge.pipeline.errors import PipelineError
from tritonforge.pipeline.package import toolchain
from tritonforge.pipeline.package.consumer_check import check_artifacts
from tritonforge.pipeline.package.multi import MultiReport, merge_builds
from tritonforge.pipeline.package.ortlib import build_library, check_library


@dataclass(frozen=True)
class Settings:
    """invoke.yaml's `tritonforge:` section, as a build reads it."""

    kernels_dir: str
    cache_dir: str
    jobs: int
    host: str
    tools_dir: str | None = None
    triton: str | None = None  # build with this supported release instead of pins/triton.txt's

    @property
    def other_triton(self) -> str | None:
        """The `triton` setting when it names another release than the pin (None: the pin)."""
        from tritonforge.pipeline.compile.pin import check_supported, pinned_version

        return check_supported(self.triton) if self.triton and self.triton != pinned_version() else None

    @property
    def tools_cache(self) -> Path:
        """Where fetched tools (ORT's headers) live: beside the compile cache unless named."""
        return Path(self.tools_dir) if self.tools_dir else Path(self.cache_dir).parent


def compile_here(settings: Settings, targets, out: Path, profile: str, jobs: int = 0,
                 allow_unpinned_triton: bool = False, progress=None) -> BuildReport:
    """Compile in this Python (progress gets the compile events)."""
    return run_local(settings.kernels_dir, targets, out, settings.cache_dir, jobs or settings.jobs, settings.host,
                     progress, allow_unpinned_triton, profile, settings.other_triton)


def compile_targets(settings: Settings, targets, out: Path, platform: str, profile: str, runner: str = "auto",
                    jobs: int = 0, allow_unpinned_triton: bool = False, log=print, progress=contextlib.nullcontext
                    ) -> tuple[str, BuildReport]:
    """Compile where `runner` says (auto: docker when an engine answers); returns (runner used, report).
    `progress()` is entered around a local compile and yields its event callback (the image logs lines)."""
    used = choose_runner(runner, log)  # a bad runner is refused before anything starts
    if platform == "cuda":
        toolchain.warm(settings.host)  # the library's C++ runtime builds while the kernels compile
    if used == "local":
        with progress() as events:
            return used, compile_here(settings, targets, out, profile, jobs, allow_unpinned_triton, events)
    if allow_unpinned_triton:
        raise PipelineError("--allow-unpinned-triton is for the local runner: the image holds the pinned triton")
    return used, run_docker(settings.kernels_dir, targets, out, settings.cache_dir, jobs or settings.jobs, log,
                            settings.host, platform, profile, triton=settings.other_triton)


def plan(settings: Settings, targets, out: Path, profile: str, runner: str = "auto") -> str:
    """What `compile_targets` would do, resolved and checked but not run: the runner, the kernels of the profile
    that the scripts declare, the targets and where they go (one line)."""
    from tritonforge.pipeline.builds.dist import discover_scripts
    from tritonforge.pipeline.scripts.profiles import select
    from tritonforge.pipeline.scripts.table import load_table

    used = choose_runner(runner, lambda line: None)
    table = select(load_table(discover_scripts(settings.kernels_dir)), profile)
    dirs = ", ".join(str(out / t.platform / t.arch_name) for t in targets)
    return (f"plan: {len(table.kernels)} kernels of the {profile} profile from {settings.kernels_dir} for "
            f"{', '.join(t.arch_name for t in targets)} on the {used} runner, into {dirs} (nothing compiled)")


def consumer_check(name: str, path: Path, log=print) -> None:
    result = check_artifacts(path)
    inside = ", archs inside each blob match kernels.json" if path.name == "multi" else ""
    log(f"consumer check {name}: {result.kernels} kernels resolved by dlsym, blobs match kernels.json"
        f"{inside}, stack {result.stack_flags}")


def ort_library(settings: Settings, platform: str, build_dir: Path, log=print) -> Path | None:
    """The custom-op library of a CUDA multi build, built beside it and checked (ROCm: none)."""
    if platform != "cuda":
        return None
    lib = build_library(build_dir, settings.tools_cache)
    log(f"ORT library {platform}/multi: {lib} ({check_library(lib, build_dir)})")
    return lib


def check_build(settings: Settings, report: BuildReport, log=print) -> None:
    """Every directory a build wrote: consumer checks, then the library of each CUDA multi."""
    for t in report.targets:
        consumer_check(t.target.arch_name, t.paths["archive"].parent, log)
    for m in report.multi:
        consumer_check(f"{m.platform}/multi", m.paths["archive"].parent, log)
    for m in report.multi:
        ort_library(settings, m.platform, m.paths["archive"].parent, log)


def merge(settings: Settings, roots: list[Path], platform: str, archs: list[str], out: Path,
          log=print) -> MultiReport:
    """Merge per-arch builds into <out>/<platform>/multi/, then check it as a build's multi is checked."""
    if platform == "cuda":
        toolchain.warm(settings.host)
    report = merge_builds(roots, platform, archs, out, ptx_checks(settings.cache_dir))
    log(f"{platform}/multi ({'+'.join(report.archs)}): {report.kernels} kernels, "
        f"{report.archive_bytes:,} B archive: {report.paths['archive'].parent}")
    for line in report.warnings():
        log(line)
    consumer_check(f"{platform}/multi", report.paths["archive"].parent, log)
    ort_library(settings, platform, report.paths["archive"].parent, log)
    return report
