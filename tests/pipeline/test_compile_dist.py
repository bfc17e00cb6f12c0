"""The images' command (python -m tritonforge.pipeline.compile_dist), run here as the image runs it:
a build directory per arch and the report, or one error line and exit 1."""

from __future__ import annotations

import json
import os
import subprocess
import sys


def _run(root, *args):
    return subprocess.run([sys.executable, "-m", "tritonforge.pipeline.compile_dist", *args], cwd=root,
                          capture_output=True, text=True, timeout=600, env={**os.environ, "PYTHONPATH": str(root)})


def test_the_image_command_builds_and_reports(root, small_kernels, built, tmp_path):
    out, report = tmp_path / "dist", tmp_path / "report.json"
    proc = _run(root, "--platform", "cuda", "--arch", "sm_90", "--kernels-dir", str(small_kernels), "--out", str(out),
                "--cache-dir", str(built[2]), "--report", str(report))
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(report.read_text())
    assert [t["target"] for t in doc["targets"]] == ["cuda:90:32"] and doc["targets"][0]["compiled"] == 0  # warm
    assert (out / "cuda/sm_90/kernels.json").is_file() and (out / "cuda/sm_90/triton_kernel_infos.a").is_file()
    proc = _run(root, "--platform", "cuda", "--arch", "sm_7", "--kernels-dir", str(small_kernels), "--out",
                str(tmp_path / "bad"))
    assert proc.returncode == 1 and proc.stderr.startswith("error: ") and "sm_7" in proc.stderr
    assert "Traceback" not in proc.stderr and not (tmp_path / "bad").exists()
