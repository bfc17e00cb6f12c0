"""The CUDA backend's probe says why there is no GPU instead of raising; its errors are tritonforge errors."""

from __future__ import annotations

import pytest

pytest.importorskip("cuda.bindings", reason="cuda-python is not installed")

from tritonforge.runtime.cuda import CudaError, driver_available  # noqa: E402

from tritonforge.errors import TritonforgeError  # noqa: E402


def test_the_probe_answers_either_way():
    ok, what = driver_available()
    assert isinstance(ok, bool) and isinstance(what, str) and what
    if not ok:  # this machine: the reason, not an exception
        assert any(w in what for w in ("cuda", "CUDA", "cuInit", "device"))
    assert issubclass(CudaError, TritonforgeError) and issubclass(CudaError, RuntimeError)
