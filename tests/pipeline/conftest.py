"""Fixtures for the pipeline tests: one real build of kernels/ for a CUDA and a ROCm arch, shared."""

from __future__ import annotations

import pytest

pytest.importorskip("triton", reason="the compile pipeline needs triton (pip install -r pins/triton.txt)")

from pipeline.build import build_dist, discover_scripts  # noqa: E402
from pipeline.targets import parse_targets  # noqa: E402

TEST_TARGETS = "sm_90,gfx942"


@pytest.fixture(scope="session")
def kernel_scripts(root):
    return discover_scripts(root / "kernels")


@pytest.fixture(scope="session")
def built(tmp_path_factory, kernel_scripts):
    """dist/ for sm_90 and gfx942, compiled cold with its own cache; returns (report, out, cache)."""
    base = tmp_path_factory.mktemp("built")
    out, cache = base / "dist", base / "cache"
    report = build_dist(kernel_scripts, parse_targets(TEST_TARGETS), out, cache_dir=cache, jobs=2)
    return report, out, cache
