"""The build sequence: compile where the runner says, then a consumer check of every directory the build
wrote and the custom-op library beside each CUDA multi; a merge is checked the same way."""

from __future__ import annotations

import shutil

import pytest
from tritonforge.pipeline.builds.sequence import Settings, check_build, compile_targets, merge
from tritonforge.pipeline.compile.targets import parse_targets
from tritonforge.pipeline.errors import PipelineError

from ...conftest import ROOT, require_tool


def test_unpinned_triton_is_refused_for_the_image(small_kernels, tmp_path):
    settings = Settings(str(small_kernels), str(tmp_path / "cache"), 2, "x86_64")
    with pytest.raises(PipelineError, match="--allow-unpinned-triton is for the local runner"):
        compile_targets(settings, parse_targets("sm_90"), tmp_path / "dist", "cuda", "full", "docker",
                        allow_unpinned_triton=True)
    assert not (tmp_path / "dist").exists()
    with pytest.raises(PipelineError, match="--runner must be one of"):
        compile_targets(settings, parse_targets("sm_90"), tmp_path / "dist", "cuda", "full", "podman")


@pytest.mark.full  # 21 s (the library compiled once more); the workflows' build lines run the same checks by default
def test_a_local_build_is_checked_directory_by_directory(small_kernels, built, tmp_path):
    require_tool("g++", "the consumer check and the library are compiled with it")
    cache = tmp_path / "compile"
    shutil.copytree(built[2], cache)  # warm: nothing is compiled again
    settings = Settings(str(small_kernels), str(cache), 2, "x86_64", str(ROOT / ".cache" / "tritonforge"))
    lines = []
    used, report = compile_targets(settings, parse_targets("sm_80,sm_90"), tmp_path / "dist", "cuda", "full",
                                   "local", log=lines.append)
    assert used == "local" and lines == []  # a runner asked for by name is not announced
    check_build(settings, report, lines.append)
    checked = [line.split(":")[0] for line in lines]
    assert checked == ["consumer check sm_80", "consumer check sm_90", "consumer check cuda/multi",
                       "ORT library cuda/multi"]
    assert (tmp_path / "dist/cuda/multi/libtritonforge_ort.so").is_file()

    # the per-arch builds merged again elsewhere: the same checks of the one multi
    lines.clear()
    merged = merge(settings, [tmp_path / "dist"], "cuda", ["sm_80", "sm_90"], tmp_path / "merged", lines.append)
    assert merged.archs == ["sm_80", "sm_90"]
    assert lines[0].startswith("cuda/multi (sm_80+sm_90): ")
    assert "leaves out" in lines[1]  # the per-arch families (clusters on sm_90 only) are named, not dropped quietly
    assert [line.split(":")[0] for line in lines[-2:]] == ["consumer check cuda/multi", "ORT library cuda/multi"]
    assert (tmp_path / "merged/cuda/multi/libtritonforge_ort.so").is_file()
