"""The README main job's compile cache, which the tests reuse, and the check that none of it is compiled again.

`.ci/run` runs the main job (`invoke build --platform cuda`) in the checkout before the tests: its cache holds
every kernel of the ORT profile for invoke.yaml's CUDA archs. A compile-cache key depends only on what a kernel's
code reaches (pipeline/scripts/sources.py), so the small kernel set's kernels have the main job's keys, and
the tests' builds take them from there. At the end of a default run, every cache entry written during the run
(under the run's temp directory, by this process, a worker or a container) whose key the main job had is
reported: that kernel was compiled twice.

What the main job compiled is computed from the scripts and invoke.yaml (`expected`), not read from whatever the
caches hold: after `invoke build --profile full` in the same checkout (a README command) the caches hold every
kernel, and a test that compiles one outside the main job's set on purpose is still right to.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# The docker runner's cache (what `.ci/run` leaves) and the local runner's (a machine without an engine).
CACHES = (ROOT / ".cache/tritonforge/compile-docker", ROOT / ".cache/tritonforge/compile")
ENTRY = re.compile(r"[0-9a-f]{64}\.json")


def _entries(cache: Path):
    """(key, metadata file) of every entry of a compile cache (`<key[:2]>/<key>.json` beside `<key>.bin`)."""
    if cache.is_dir():
        for sub in cache.iterdir():
            if len(sub.name) == 2 and sub.is_dir():
                for meta in sub.iterdir():
                    if ENTRY.fullmatch(meta.name) and meta.name.startswith(sub.name):
                        yield meta.name[:-5], meta


@functools.lru_cache(maxsize=1)
def expected() -> frozenset[str]:
    """The compile-cache keys of the README main job, `invoke build --platform cuda` as invoke.yaml configures it
    (its kernels directory, profile and CUDA archs), computed from the scripts; empty where they cannot be loaded
    (no triton: a GPU machine's plain run), which turns the check off."""
    try:
        import yaml
        from tritonforge.pipeline.builds.dist import discover_scripts
        from tritonforge.pipeline.compile.targets import parse_targets

        config = yaml.safe_load((ROOT / "invoke.yaml").read_text())["tritonforge"]
        scripts = discover_scripts(ROOT / config["kernels_dir"])
        keyed = kernel_keys(scripts, parse_targets(",".join(config["archs"]["cuda"])), config["profile"])
    except ImportError:
        return frozenset()
    return frozenset().union(*keyed.values())


def keys(caches=CACHES) -> set[str]:
    """The main job's keys its caches hold (any other entry, a full-profile build's, is not the main job's)."""
    return {key for cache in caches for key, _ in _entries(Path(cache))} & expected()


def seed(dest: Path, wanted: set[str] | None = None, caches=CACHES) -> int:
    """Copy the main job's entries (those of `wanted`, else every one the main job compiled) into the compile
    cache `dest`, keeping their times (a copy is not a compile); returns how many."""
    wanted = expected() if wanted is None else wanted
    n = 0
    for cache in caches:
        for key, meta in _entries(Path(cache)):
            if key not in wanted:
                continue
            target = Path(dest) / key[:2]
            target.mkdir(parents=True, exist_ok=True)
            if not (target / meta.name).exists():
                shutil.copy2(meta.with_suffix(".bin"), target / f"{key}.bin")
                shutil.copy2(meta, target / meta.name)
                n += 1
    return n


def compiled_again(under: Path, main: set[str], since: float) -> list[str]:
    """The cache entries under `under` written at or after `since` whose key the main job had."""
    found = []
    for dirpath, _, filenames in os.walk(under):
        if len(Path(dirpath).name) != 2:
            continue
        for name in filenames:
            if ENTRY.fullmatch(name) and name[:-5] in main:
                path = Path(dirpath) / name
                if path.stat().st_mtime >= since:
                    found.append(str(path))
    return sorted(found)


def _keyed(scripts, targets, profile: str):
    """{arch: [(kernel, compile-cache key)] of the scripts' `profile` kernels that build for that target}, in table
    order."""
    from tritonforge.pipeline.builds.dist import kernel_key
    from tritonforge.pipeline.compile.pin import pinned_version
    from tritonforge.pipeline.scripts.profiles import select
    from tritonforge.pipeline.scripts.table import load_table

    version, table = pinned_version(), select(load_table(scripts), profile)
    return {t.arch_name: [(k, kernel_key(k, t, version)) for k in table.kernels if k.builds_for(t)] for t in targets}


def kernel_keys(scripts, targets, profile: str = "full") -> dict[str, set[str]]:
    """{arch: the compile-cache keys of the scripts' `profile` kernels that build for that target}."""
    return {arch: {key for _, key in keyed} for arch, keyed in _keyed(scripts, targets, profile).items()}


def held(scripts, targets, profile: str = "full") -> dict[str, int]:
    """{arch: how many of the scripts' `profile` kernels for that target the main job's caches hold}: what a
    build seeded from them takes from the cache instead of compiling."""
    main = keys()
    return {arch: len(wanted & main) for arch, wanted in kernel_keys(scripts, targets, profile).items()}


def container_sample(scripts, targets) -> dict[str, set[str]]:
    """{arch: the compile-cache keys of the first full-profile kernel of each script that builds for that target
    and that the main job's caches do not hold}: what a container build seeded from a local build's cache, all but
    these, compiles itself (one kernel of every family, against the local bytes), rather than every kernel twice."""
    main = keys()
    out = {}
    for arch, keyed in _keyed(scripts, targets, "full").items():
        first: dict[str, str] = {}
        for k, key in keyed:
            if key not in main:
                first.setdefault(k.script, key)
        out[arch] = set(first.values())
    return out
