"""Bad input: a clear error naming script and kernel, a non-zero exit, and no output left behind."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from .bad_scripts import CASES, GOOD, table


def run_cli(root, tmp_path, *args):
    env = {**os.environ, "PYTHONPATH": str(root)}
    return subprocess.run([sys.executable, "-m", "tritonforge.pipeline.compile_triton", "--quiet", *args],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)


def files_under(path):
    return sorted(str(p.relative_to(path)) for p in path.rglob("*")) if path.exists() else []


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_script_is_refused(root, tmp_path, case):
    source, expected = CASES[case]
    script = tmp_path / f"{case}.py"
    script.write_text(source)
    out = tmp_path / "out"
    proc = run_cli(root, tmp_path, "--header", "out/inc/triton_kernel_infos.h", "--script_files", str(script),
                   "--obj_file", "out/lib/triton_kernel_infos.a", "--target", "cuda:90")
    assert proc.returncode != 0, proc.stdout
    for fragment in expected:
        assert fragment in proc.stderr, f"{fragment!r} not in:\n{proc.stderr}"
    assert "Traceback" not in proc.stderr
    assert not out.exists() or [p for p in out.rglob("*") if p.is_file()] == []


def test_unknown_target_is_refused(root, tmp_path):
    script = tmp_path / "good.py"
    script.write_text(table(GOOD))
    proc = run_cli(root, tmp_path, "--script_files", str(script), "--target", "cuda:77")
    assert proc.returncode != 0
    assert "unknown CUDA target 'cuda:77'" in proc.stderr
    assert files_under(tmp_path) == ["good.py"]


def test_no_target_and_no_gpu_is_a_clear_error(root, tmp_path):
    from tritonforge.pipeline.compile.targets import detect_local_target

    if detect_local_target() is not None:
        pytest.skip("this machine has a GPU, so the default target is valid")
    script = tmp_path / "good.py"
    script.write_text(table(GOOD))
    proc = run_cli(root, tmp_path, "--script_files", str(script))
    assert proc.returncode != 0
    assert "no --target given (nor TRITONFORGE_TARGET) and no GPU found" in proc.stderr
    assert files_under(tmp_path) == ["good.py"]


def test_wave64_limit_is_per_target(root, tmp_path):
    """32 warps fit a CUDA block (1024 threads) but not a wave64 one (2048 threads)."""
    script = tmp_path / "w32.py"
    script.write_text(table(GOOD.replace('"num_warps": 4', '"num_warps": 32')))
    ok = run_cli(root, tmp_path, "--script_files", str(script), "--target", "cuda:90", "--obj_file", "c/k.a",
                 "--header", "c/k.h")
    assert ok.returncode == 0, ok.stderr
    bad = run_cli(root, tmp_path, "--script_files", str(script), "--target", "hip:gfx942", "--obj_file",
                  "h/k.a", "--header", "h/k.h")
    assert bad.returncode != 0 and "2048 threads" in bad.stderr and "gfx942" in bad.stderr
    assert not (tmp_path / "h" / "k.a").exists()


def test_failed_build_leaves_existing_dist_untouched(tmp_path):
    from tritonforge.pipeline.builds.dist import build_dist
    from tritonforge.pipeline.compile.targets import parse_targets
    from tritonforge.pipeline.errors import PipelineError

    kernels = tmp_path / "kernels"
    kernels.mkdir()
    (kernels / "a_good.py").write_text(table(GOOD))
    out = tmp_path / "dist"
    build_dist(sorted(kernels.glob("*.py")), parse_targets("sm_90"), out, jobs=1)
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    assert {p.relative_to(out).as_posix() for p in before} >= {f"cuda/{d}/{f}" for d in ("sm_90", "multi") for f in
                                                              ("kernels.json", "triton_kernel_infos.a",
                                                               "triton_kernel_infos.h")}
    # A second script whose kernel fails inside Triton: nothing may change, nothing may be added.
    (kernels / "b_bad.py").write_text(CASES["triton_failure"][0].replace("copy_fp32", "copy_bad"))
    with pytest.raises(PipelineError, match="copy_bad"):
        build_dist(sorted(kernels.glob("*.py")), parse_targets("sm_90,gfx942"), out, jobs=1)
    after = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    assert after == before
    assert sorted(p.name for p in out.iterdir()) == ["cuda"]
