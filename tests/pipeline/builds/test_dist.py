"""A real build of kernels/: outputs, manifest, determinism, cache, and the ORT drop-in CLI."""

from __future__ import annotations

import json
import re
from pathlib import Path

from tritonforge.pipeline.builds.dist import build_dist
from tritonforge.pipeline.compile.targets import parse_targets

from ... import main_job
from ...conftest import TEST_TARGETS


def read(path):
    return path.read_bytes()


def test_layout_and_counts(built, small_scripts):
    """Each target's directory; what the README main job compiled taken from its cache, the rest compiled."""
    report, out, _ = built
    held = main_job.held(small_scripts, [t.target for t in report.targets])
    for t in report.targets:
        d = out / t.target.platform / t.target.arch_name
        ptx = ["ptx"] if t.target.platform == "cuda" else []  # the PTX a multi-arch merge takes
        assert sorted(p.name for p in d.iterdir()) == ["kernels.json", *ptx, "triton_kernel_infos.a",
                                                       "triton_kernel_infos.h"]
        n = held[t.target.arch_name]
        assert (t.compiled, t.cached) == (t.kernels - n, n)
        assert (t.compile_seconds > 0) == (t.compiled > 0)  # compile time is the time of what was compiled
    assert not [p for p in out.iterdir() if p.name.startswith(".")]  # no staging left over


def test_every_script_group_and_exclusion_of_the_small_set(built, small_scripts, kernel_scripts):
    """The small set keeps every script and group of kernels/, and each target leaves out exactly the
    scripts whose PLATFORMS, MIN_SM or MAX_SM exclude it."""
    from tritonforge.pipeline.scripts.table import load_table

    report, out, _ = built
    small, full = load_table(small_scripts), load_table(kernel_scripts)
    assert [Path(s).name for s in small.scripts] == [Path(s).name for s in full.scripts]
    assert {k.group for k in small.kernels} == {k.group for k in full.kernels}
    assert len(small.kernels) < len(full.kernels) / 3
    for t in report.targets:
        doc = json.loads((out / t.target.platform / t.target.arch_name / "kernels.json").read_text())
        assert [k["name"] for k in doc["kernels"]] == [s.name for s in small.kernels if s.builds_for(t.target)]
        left_out = {Path(s.script).name for s in small.kernels if not s.builds_for(t.target)}
        arch = int(t.target.arch) if t.target.platform == "cuda" else None
        expected = {Path(s.script).name for s in small.kernels
                    if t.target.platform not in s.platforms
                    or (arch is not None and not s.min_sm <= arch <= (s.max_sm or arch))}
        assert left_out == expected
        assert left_out == {"sm_80": {"softmax_cluster_triton.py", "group_norm_cluster_triton.py",
                                      "fp8_quant_rows_triton.py"},  # MIN_SM
                            "sm_90": {"group_norm_parts_triton.py"},  # MAX_SM
                            "gfx942": {"softmax_cluster_triton.py", "group_norm_cluster_triton.py",
                                       "softmax_packed_triton.py"}}[t.target.arch_name]  # PLATFORMS


ORT_GROUP = re.compile(r"softmax_(fp32|fp16|bf16|fp64)|GroupNormTriton_(Silu|Pass)_(fp16|fp32)")  # what ORT launches


def test_clean_rebuild_elsewhere_is_byte_identical(built, small_scripts, tmp_path, monkeypatch):
    """Two scripts compiled again from scratch (own empty cache, another directory, another working
    directory, a second later) give the same binaries. Scripts outside the ORT profile: the README main
    job's kernels are never compiled twice (tests/main_job.py). The kernels of the full profile are compiled
    again in the images by tests/test_tasks.py and compared file for file."""
    from tritonforge.pipeline.scripts.profiles import in_profile
    from tritonforge.pipeline.scripts.table import load_table

    report, out, _ = built
    some = [s for s in small_scripts if s.name in ("softmax_cluster_triton.py", "group_norm_whole_triton.py")]
    assert len(some) == 2 and not any(in_profile(k.group, "ort") for k in load_table(some).kernels)
    monkeypatch.chdir(tmp_path)
    again = build_dist(some, parse_targets("sm_90,gfx942"), tmp_path / "dist2", cache_dir=tmp_path / "c2", jobs=2)
    assert again.compiled == sum(t.kernels for t in again.targets) > 0
    for sub in ("cuda/sm_90", "rocm/gfx942"):
        full = {k["name"]: k for k in json.loads(read(out / sub / "kernels.json"))["kernels"]}
        subset = json.loads(read(tmp_path / "dist2" / sub / "kernels.json"))["kernels"]
        assert subset and all(k["binary"] == full[k["name"]]["binary"] for k in subset), f"{sub} differs"


def test_warm_rebuild_compiles_nothing_and_writes_the_same_bytes(built, small_scripts, tmp_path):
    report, out, cache = built
    warm = build_dist(small_scripts, parse_targets(TEST_TARGETS), tmp_path / "dist3", cache_dir=cache, jobs=2)
    assert warm.compiled == 0 and warm.cached == sum(t.kernels for t in warm.targets)
    for t in warm.targets:
        sub = f"{t.target.platform}/{t.target.arch_name}"
        for name in ("triton_kernel_infos.a", "triton_kernel_infos.h", "kernels.json"):
            assert read(tmp_path / "dist3" / sub / name) == read(out / sub / name), f"{sub}/{name}"



