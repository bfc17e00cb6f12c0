"""A prepared launch on a real GPU: a grid the device cannot run is Unsupported, a driver error names the kernel."""

from __future__ import annotations

import pytest
from tritonforge.runtime import Unsupported
from tritonforge.runtime.cuda import CudaError

pytestmark = pytest.mark.gpu


def test_grid_guard_returns_unsupported(registry):
    k = registry.kernel("softmax_fp32_1024")
    values = {p["name"]: 0 for p in k.info.params}
    with pytest.raises(Unsupported, match=r"grid\[1\]=70000"):
        k.prepare(values, (1, 70000, 1))
    with pytest.raises(Unsupported, match=r"grid\[0\]=0"):
        k.prepare(values, (0, 1, 1))


def test_driver_error_names_kernel(registry):
    k = registry.kernel("softmax_fp32_1024")
    with pytest.raises(CudaError, match=r"cuLaunchKernel\(softmax_fp32_1024\).*CUDA_ERROR_INVALID_VALUE"):
        k.backend.launch(k.function, (1, 1, 1), 4096, 0, 0, 0, "softmax_fp32_1024")
