"""The host half of a build's numerics as a user runs it: `python -m tritonforge.pipeline.builds.numerics_check`
on a directory of kernel scripts passes on the real scripts and names the kernel that computes wrong."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest

pytest.importorskip("triton", reason="kernel scripts import triton")


def run(kernels, tmp_path):
    out = tmp_path / "numerics.json"
    proc = subprocess.run([sys.executable, "-m", "tritonforge.pipeline.builds.numerics_check", "--kernels-dir",
                           str(kernels), "--out", str(out)], capture_output=True, text=True, timeout=300)
    return proc, (json.loads(out.read_text()) if out.is_file() else None)


def test_a_kernel_that_computes_wrong_is_named(root, tmp_path):
    kernels = tmp_path / "kernels"
    kernels.mkdir()
    shutil.copy(root / "kernels" / "softmax_triton.py", kernels)
    proc, result = run(kernels, tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert result["passed"] and result["checked"] and not result["skipped"]
    assert "kernels passed (the first of each interpretable group" in proc.stdout.splitlines()[-1]

    script = kernels / "softmax_triton.py"
    script.write_text(script.read_text().replace("y = numerator / denominator", "y = numerator / (denominator + 1)"))
    proc, result = run(kernels, tmp_path)
    assert proc.returncode == 1 and not result["passed"]
    failed = [c for c in result["checked"] if c["error"]]
    assert failed and all(c["group"].startswith("softmax_") for c in failed)
    assert any(line.startswith(f"FAIL {failed[0]['name']} ") and "elements off" in line
               for line in proc.stdout.splitlines())


def test_bad_input_is_refused(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "tritonforge.pipeline.builds.numerics_check", "--kernels-dir",
                           str(tmp_path / "nowhere")], capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0 and "nowhere" in proc.stderr and "is not a directory" in proc.stderr
