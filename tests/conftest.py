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
    path = shutil.which(name)
    if path is None:
        if IN_CI:
            pytest.fail(f"{name} is required in CI ({why}); .ci/run should install it")
        pytest.skip(f"{name} not installed ({why})")
    return path


@pytest.fixture(scope="session")
def root() -> Path:
    return ROOT
