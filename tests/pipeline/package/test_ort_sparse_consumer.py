"""The generated SparseAttention kernels launched as ORT's op launches them, on a GPU, against float64."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.runtime.conftest import gpu_required

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.gpu
def test_every_case_of_orts_sparse_attention_test_passes_with_the_generated_kernels(tmp_path, request):
    torch = pytest.importorskip("torch", reason="the cases are built with torch")
    if not torch.cuda.is_available():
        why = "no CUDA GPU that torch can use"
        pytest.fail(why) if gpu_required(request.config) else pytest.skip(why)
    major, minor = torch.cuda.get_device_capability()
    gpu_sm = major * 10 + minor
    lib = os.environ.get("TRITONFORGE_SPARSE_CONSUMER")
    if not lib:
        root = os.environ.get("TRITONFORGE_ORT_ROOT")
        if not root:
            pytest.skip("TRITONFORGE_ORT_ROOT names no ONNX Runtime checkout to build the consumer from "
                        "(or TRITONFORGE_SPARSE_CONSUMER a built one)")
        from tritonforge.pipeline.package.ort_sparse_consumer import build_pair

        lib, _ = build_pair(Path(root), tmp_path, gpu_sm, ROOT / "kernels")
    proc = subprocess.run([sys.executable, "benchmarks/sparse_attention_bench.py", "--consumer", str(lib),
                           "--cases", "ort,long", "--results", str(tmp_path / "r.csv")], cwd=ROOT,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "every case within tolerance" in proc.stdout
    assert proc.stdout.count(" ok") == 48  # 24 cases, fp16 and bf16
