"""The GPU half of a build's numerics: every kernel of the build for this GPU, compiled code, against
float64, and the command a pin move runs."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest


@pytest.mark.gpu
def test_every_kernel_of_the_build_passes(registry):
    from tritonforge.runtime.verify import verify

    result = verify(registry)
    failed = [f"{c['name']} {c['problem']}: {c['error']}" for c in result["checked"] if c["error"]]
    assert not failed, "\n".join(failed[:20])
    assert sorted(c["name"] for c in result["checked"]) == sorted(k.name for k in registry.artifacts.kernels)
    assert result["passed"] and result["arch"] == f"sm_{registry.backend.arch}"


@pytest.mark.gpu
def test_the_command_checks_and_writes_its_result(gpu_artifacts_dir, tmp_path, root):
    out = tmp_path / "verify.json"
    proc = subprocess.run([sys.executable, "-m", "tritonforge.runtime.verify", str(gpu_artifacts_dir), "--only",
                           "^softmax_cluster_fp16|^GroupNormNCHWTeam_Silu_fp16", "--out", str(out)],
                          capture_output=True, text=True, timeout=300, cwd=root)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    result = json.loads(out.read_text())
    assert result["checked"] and all(c["error"] is None for c in result["checked"])
    assert {c["group"] for c in result["checked"]} <= {"softmax_cluster_fp16", "GroupNormNCHWTeam_Silu_fp16"}
    assert "kernels passed on" in proc.stdout.splitlines()[-1]


def test_without_a_gpu_the_command_says_why_and_writes_nothing(tmp_path, root):
    pytest.importorskip("cuda.bindings", reason="cuda-python is not installed")
    from tritonforge.runtime.cuda import driver_available

    if driver_available()[0]:
        pytest.skip("this machine has a GPU: the GPU tests above run the command")
    out = tmp_path / "verify.json"
    proc = subprocess.run([sys.executable, "-m", "tritonforge.runtime.verify", str(tmp_path / "nowhere"), "--out",
                           str(out)], capture_output=True, text=True, timeout=60, cwd=root)
    assert proc.returncode == 2 and proc.stderr.startswith("error: no usable NVIDIA GPU: ") and not out.exists()
