"""GPU fixtures: a CUDA backend and the artifacts for its arch, or a skip that says why."""

from __future__ import annotations

import importlib
import os
from pathlib import Path

import pytest

from ..conftest import IN_CI


def gpu_required(config) -> bool:
    """A missing GPU fails the run (instead of skipping) on a GPU runner: under `invoke gpu-test`
    (TRITONFORGE_REQUIRE_GPU=1), or in CI when the run selects the GPU tests (`-m gpu`)."""
    if os.environ.get("TRITONFORGE_REQUIRE_GPU") == "1":
        return True
    if not IN_CI or not config.option.markexpr:
        return False
    from _pytest.mark.expression import Expression

    selects = Expression.compile(config.option.markexpr)
    return selects.evaluate(lambda name: name == "gpu") and not selects.evaluate(lambda name: False)


@pytest.fixture(scope="session")
def cuda(request):
    required = gpu_required(request.config)
    if required:
        importlib.import_module("cuda.bindings")  # a GPU runner without cuda-python is broken: fail
    else:
        pytest.importorskip("cuda.bindings", reason="cuda-python is not installed")
    from tritonforge.runtime.cuda import CudaBackend, driver_available

    ok, why = driver_available()
    if not ok:
        if required:
            pytest.fail(f"this GPU run needs an NVIDIA GPU and has none: {why}")
        pytest.skip(f"no usable NVIDIA GPU: {why}")
    return CudaBackend(0)


@pytest.fixture
def one_at_a_time():
    """The machine to this test alone among pytest-xdist's workers (a lock file): the tests past 2^31 elements
    each take tens of GB of the GPU's memory and the host's."""
    import fcntl
    import tempfile

    with open(Path(tempfile.gettempdir()) / "tritonforge-big-gpu-tests.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def skip_unless_memory(cuda, nbytes: int, what: str) -> None:
    """Skip, saying why, a test whose tensors (`nbytes` together) this GPU cannot hold with room to spare."""
    have = cuda.limits["memory_bytes"]
    if nbytes * 5 // 4 + (2 << 30) > have:
        pytest.skip(f"{what} needs about {nbytes / 2**30:.0f} GiB of GPU memory; {cuda.device_name} has "
                    f"{have / 2**30:.0f} GiB")


@pytest.fixture(scope="session")
def gpu_artifacts_dir(cuda, root) -> Path:
    """Artifacts for this GPU: $TRITONFORGE_DIST/cuda/sm_<arch> (default dist/full/: the full profile)."""
    base = Path(os.environ.get("TRITONFORGE_DIST", root / "dist" / "full")).resolve()  # relative to where pytest runs
    d = base / "cuda" / f"sm_{cuda.arch}"
    if not (d / "kernels.json").is_file():
        pytest.fail(f"no artifacts for this GPU at {d}: run `invoke compile --platform cuda --arch "
                    f"sm_{cuda.arch} --profile full` on a build machine and bring dist/ along")
    return d


@pytest.fixture(scope="session")
def registry(cuda, gpu_artifacts_dir):
    from tritonforge.runtime import load_artifacts
    from tritonforge.runtime.registry import Registry

    return Registry(load_artifacts(gpu_artifacts_dir), cuda)
