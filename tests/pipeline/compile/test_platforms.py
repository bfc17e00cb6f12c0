"""Scripts that build for one platform only (PLATFORMS), from one CUDA architecture up (MIN_SM) or up to one
(MAX_SM): left out of the other targets' artifacts."""

from __future__ import annotations

import json
import subprocess

import pytest

pytest.importorskip("triton")

from tritonforge.pipeline.builds.dist import build_dist  # noqa: E402
from tritonforge.pipeline.compile.targets import parse_targets  # noqa: E402
from tritonforge.pipeline.errors import PipelineError  # noqa: E402

from ..scripts.bad_scripts import GOOD, table  # noqa: E402

CUDA_ONLY = 'PLATFORMS = ("cuda",)\n' + table(GOOD.replace("copy_fp32", "copy_cuda_fp32"))


def members(archive):
    return subprocess.run(["ar", "t", str(archive)], capture_output=True, text=True, check=True).stdout.split()


def test_cuda_only_script_is_left_out_of_rocm_artifacts(tmp_path):
    (tmp_path / "a.py").write_text(table(GOOD))
    (tmp_path / "b.py").write_text(CUDA_ONLY)
    out = tmp_path / "dist"
    report = build_dist([tmp_path / "a.py", tmp_path / "b.py"], parse_targets("sm_90,gfx942"), out,
                        cache_dir=tmp_path / "cache", jobs=1)
    assert {t.target.arch_name: t.kernels for t in report.targets} == {"sm_90": 2, "gfx942": 1}
    for sub, names in (("cuda/sm_90", ["copy_fp32", "copy_cuda_fp32"]), ("rocm/gfx942", ["copy_fp32"])):
        doc = json.loads((out / sub / "kernels.json").read_text())
        assert [k["name"] for k in doc["kernels"]] == names, sub
        assert sorted(doc["groups"]) == sorted(names), sub
        assert members(out / sub / "triton_kernel_infos.a") == [f"{n}.o" for n in names], sub
        header = (out / sub / "triton_kernel_infos.h").read_text()
        assert ("copy_cuda_fp32" in header) == (sub.startswith("cuda")), sub


def test_no_script_for_the_platform_is_an_error(tmp_path):
    (tmp_path / "b.py").write_text(CUDA_ONLY)
    with pytest.raises(PipelineError, match="no kernel script builds for rocm"):
        build_dist([tmp_path / "b.py"], parse_targets("gfx942"), tmp_path / "dist", cache_dir=tmp_path / "c", jobs=1)
    assert not (tmp_path / "dist" / "rocm").exists()


def build_beside_good(tmp_path, script: str):
    """Build a.py (GOOD, every platform) and b.py (`script`) for sm_80, sm_90 and gfx942: (report, out)."""
    (tmp_path / "a.py").write_text(table(GOOD))
    (tmp_path / "b.py").write_text(script)
    out = tmp_path / "dist"
    return build_dist([tmp_path / "a.py", tmp_path / "b.py"], parse_targets("sm_80,sm_90,gfx942"), out,
                      cache_dir=tmp_path / "cache", jobs=1), out


def test_min_sm_script_is_left_out_of_older_cuda_artifacts(tmp_path):
    report, out = build_beside_good(tmp_path, "MIN_SM = 90\n" + CUDA_ONLY)
    assert {t.target.arch_name: t.kernels for t in report.targets} == {"sm_80": 1, "sm_90": 2, "gfx942": 1}
    assert members(out / "cuda" / "sm_80" / "triton_kernel_infos.a") == ["copy_fp32.o"]
    assert members(out / "cuda" / "sm_90" / "triton_kernel_infos.a") == ["copy_fp32.o", "copy_cuda_fp32.o"]


BAD_VALUES = [("PLATFORMS", v) for v in ('"cuda"', "()", '("cuda", "metal")', "None or 3")] + [
    ("MIN_SM", v) for v in ('"90"', "-1", "9.0")]


@pytest.mark.parametrize("constant, value", BAD_VALUES)
def test_bad_platforms_or_min_sm_value_names_the_script(tmp_path, constant, value):
    script = tmp_path / "odd.py"
    script.write_text(f"{constant} = {value}\n" + table(GOOD))
    with pytest.raises(PipelineError) as err:
        build_dist([script], parse_targets("sm_90"), tmp_path / "dist", cache_dir=tmp_path / "c", jobs=1)
    assert constant in str(err.value) and "odd.py" in str(err.value)


def test_max_sm_script_is_left_out_of_newer_cuda_artifacts(tmp_path):
    report, out = build_beside_good(tmp_path, "MAX_SM = 89\n" + table(GOOD.replace("copy_fp32", "copy_old_fp32")))
    assert {t.target.arch_name: t.kernels for t in report.targets} == {"sm_80": 2, "sm_90": 1, "gfx942": 2}
    assert members(out / "cuda" / "sm_90" / "triton_kernel_infos.a") == ["copy_fp32.o"]
    assert members(out / "rocm" / "gfx942" / "triton_kernel_infos.a") == ["copy_fp32.o", "copy_old_fp32.o"]


@pytest.mark.parametrize("values, message", [("MAX_SM = '89'", "MAX_SM must be"), ("MAX_SM = -1", "MAX_SM must be"),
                                             ("MIN_SM = 90\nMAX_SM = 89", "MAX_SM = 89 is below MIN_SM = 90")])
def test_bad_max_sm_names_the_script(tmp_path, values, message):
    script = tmp_path / "odd.py"
    script.write_text(f"{values}\n" + table(GOOD))
    with pytest.raises(PipelineError, match=message) as err:
        build_dist([script], parse_targets("sm_90"), tmp_path / "dist", cache_dir=tmp_path / "c", jobs=1)
    assert "odd.py" in str(err.value) and not (tmp_path / "dist" / "cuda").exists()


TARGET_AWARE = '''
import triton
import triton.language as tl
from triton.language.target_info import cuda_capability_geq, is_cuda


@triton.jit
def which_kernel(out_ptr):
    if cuda_capability_geq(9, 0):
        v = tl.inline_asm_elementwise("mov.u32 $0, 9; // hopper-path", "=r", [], dtype=tl.int32, is_pure=True,
                                      pack=1)
    elif is_cuda():
        v = tl.inline_asm_elementwise("mov.u32 $0, 8; // older-cuda-path", "=r", [], dtype=tl.int32,
                                      is_pure=True, pack=1)
    else:
        v = 7
    tl.store(out_ptr, v)


def get_function_table():
    return [{"name": "which", "group": "which", "func": which_kernel, "sig": "*i32",
             "kwargs": {"num_warps": 1, "constants": {}}}]
'''


def test_target_info_checks_see_the_target_being_compiled(tmp_path):
    """A kernel may branch on `triton.language.target_info` (inline PTX for one arch, say): on a build
    machine with no GPU the checks answer for the compile target, so each arch gets its own path and
    ROCm never sees the PTX."""
    (tmp_path / "which.py").write_text(TARGET_AWARE)
    out = tmp_path / "dist"
    build_dist([tmp_path / "which.py"], parse_targets("sm_80,sm_90,gfx942"), out, cache_dir=tmp_path / "cache",
               jobs=1)
    hopper = (out / "cuda" / "sm_90" / "ptx" / "which.ptx").read_text()
    older = (out / "cuda" / "sm_80" / "ptx" / "which.ptx").read_text()
    assert "hopper-path" in hopper and "older-cuda-path" not in hopper
    assert "older-cuda-path" in older and "hopper-path" not in older
    assert (out / "rocm" / "gfx942" / "kernels.json").is_file()
