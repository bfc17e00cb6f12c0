"""The whole matrix (`pytest -m full`; ci.yml's `full` job): every kernel of kernels/ for every default
arch of both platforms, the consumer check of each, and the README's main command in a fresh copy
(every kernel compiled in the container) compared byte for byte with the local build."""

from __future__ import annotations

import pytest
from tritonforge.pipeline.builds.dist import build_dist
from tritonforge.pipeline.compile.targets import parse_targets
from tritonforge.pipeline.package.consumer_check import check_artifacts
from tritonforge.pipeline.scripts.table import load_table

from ...cli import invoke, user_repo
from ...conftest import default_archs as invoke_yaml_archs
from ...conftest import require_tool, shared

pytestmark = pytest.mark.full

FILES = ("triton_kernel_infos.a", "triton_kernel_infos.h", "kernels.json")
# A whole platform's full profile is thousands of compiles: about 70 a minute on two cores, half that while the
# other worker compiles too. The job's own timeout (ci.yml) is the bound; this one only catches a hang.
BUILD_TIMEOUT = 4 * 3600


@pytest.fixture(scope="module")
def default_archs():
    return invoke_yaml_archs()


@pytest.fixture(scope="module")
def full_built(kernel_scripts, default_archs, tmp_path_factory):
    """Every kernel for every default arch, compiled cold once for all workers (each worker runs tests of this
    module: a module fixture of its own would compile the whole matrix once per worker)."""
    targets = parse_targets([a for archs in default_archs.values() for a in archs])

    def make(base):
        return build_dist(kernel_scripts, targets, base / "dist", cache_dir=base / "cache"), base / "dist"

    return shared(tmp_path_factory, "full_built", make)


def test_every_kernel_compiles_for_every_default_arch(full_built, kernel_scripts):
    report, _ = full_built
    table = load_table(kernel_scripts)
    for t in report.targets:
        assert t.compiled == t.kernels == sum(s.builds_for(t.target) for s in table.kernels) > 0, t.target


def test_consumer_check_of_every_arch(full_built):
    require_tool("g++", "builds the C++ consumer")
    report, out = full_built
    for t in report.targets:
        result = check_artifacts(out / t.target.platform / t.target.arch_name)
        assert result.kernels == t.kernels and result.stack_flags == "RW", t.target
    assert {m.platform for m in report.multi} == {"cuda", "rocm"}
    for m in report.multi:  # one archive per platform: the archs inside every blob listed and compared
        assert check_artifacts(out / m.platform / "multi").kernels == m.kernels > 0, m.platform


@pytest.mark.parametrize("platform", ["cuda", "rocm"])
def test_container_build_of_everything_matches_local(platform, docker_engine, full_built, root, tmp_path):
    """`invoke build --platform P --profile full` in a fresh copy with invoke.yaml as it is: kernels/, default
    archs; every arch and the multi-arch archive, byte for byte."""
    report, out = full_built
    repo, _ = user_repo(tmp_path / "repo", root / "kernels")
    proc = invoke(repo, "build", "--platform", platform, "--profile", "full", timeout=BUILD_TIMEOUT)
    assert proc.returncode == 0, proc.stdout[-4000:]
    for arch in [t.target.arch_name for t in report.targets if t.target.platform == platform] + ["multi"]:
        sub = f"{platform}/{arch}"
        for name in FILES:
            assert (repo / "dist/full" / sub / name).read_bytes() == (out / sub / name).read_bytes(), f"{sub}/{name}"


@pytest.mark.parametrize("platform", ["cuda", "rocm"])
def test_the_oldest_supported_triton_still_builds_everything(platform, docker_engine, default_archs, kernel_scripts,
                                                            root, tmp_path):
    """`--triton 3.5.0` (what ORT's own CI pins): an image made with that Triton builds both profiles for
    every default arch, the consumer checks pass, and every kernels.json says which Triton built it."""
    import json

    from tritonforge.pipeline.compile.pin import OLDEST

    repo, _ = user_repo(tmp_path / "repo", root / "kernels")
    for profile in ("ort", "full"):
        proc = invoke(repo, "build", "--platform", platform, "--profile", profile, "--triton", OLDEST,
                      timeout=BUILD_TIMEOUT)
        assert proc.returncode == 0, proc.stdout[-4000:]
        assert f"consumer check {platform}/multi" in proc.stdout
    table = load_table(kernel_scripts)
    for arch in default_archs[platform]:
        target = parse_targets([arch])[0]
        doc = json.loads((repo / "dist/full" / platform / arch / "kernels.json").read_text())
        assert doc["triton_version"] == OLDEST
        assert len(doc["kernels"]) == sum(k.builds_for(target) for k in table.kernels), arch
