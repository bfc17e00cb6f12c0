"""GPU fixtures: a CUDA backend and the artifacts for its arch, or a skip that says why."""

from __future__ import annotations

import os
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def cuda():
    pytest.importorskip("cuda.bindings", reason="cuda-python is not installed")
    from runtime.cuda import CudaBackend, driver_available

    ok, why = driver_available()
    if not ok:
        pytest.skip(f"no usable NVIDIA GPU: {why}")
    return CudaBackend(0)


@pytest.fixture(scope="session")
def gpu_artifacts_dir(cuda, root) -> Path:
    """Artifacts for this GPU: $TRITONFORGE_DIST/cuda/sm_<arch> (default dist/), built beforehand."""
    base = Path(os.environ.get("TRITONFORGE_DIST", root / "dist"))
    d = base / "cuda" / f"sm_{cuda.arch}"
    if not (d / "kernels.json").is_file():
        pytest.fail(f"no artifacts for this GPU at {d}: run `invoke compile --platform cuda --arch sm_{cuda.arch}` "
                    "on a build machine and bring dist/ along")
    return d


@pytest.fixture(scope="session")
def registry(cuda, gpu_artifacts_dir):
    from runtime import load_artifacts
    from runtime.registry import Registry

    return Registry(load_artifacts(gpu_artifacts_dir), cuda)
