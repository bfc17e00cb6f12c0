"""The custom-op library in onnxruntime-gpu's CUDA EP: the session module and the library, or a skip
that says why."""

from __future__ import annotations

import os

import pytest

from ..conftest import gpu_required

CUDA = "CUDAExecutionProvider"


@pytest.fixture(scope="session")
def ort_cuda():
    try:
        import onnx  # noqa: F401
        import onnxruntime as ort
    except ImportError as exc:
        why = f"onnx and onnxruntime-gpu are needed: {exc}"
    else:
        if CUDA in ort.get_available_providers():
            return ort
        why = f"onnxruntime {ort.__version__} has no CUDA EP (install onnxruntime-gpu)"
    # onnxruntime-gpu is the rival's package, not the runtime's: the platform image's GPU tests run without
    # it, and gpu.yml runs these once it has installed pins/gpu.txt
    pytest.skip(why)


@pytest.fixture(scope="session")
def library(ort_cuda, request):
    from tritonforge.runtime import ortlib

    try:
        return ortlib.library_path(os.environ.get("TRITONFORGE_ORT_LIBRARY"))
    except ortlib.LibraryNotFound as exc:
        if gpu_required(request.config):
            pytest.fail(str(exc))
        pytest.skip(str(exc))
