"""Lock files: one build pinned to its bytes, and a lock that no longer matches refused."""

from __future__ import annotations

import hashlib
import json

import pytest
from tritonforge.pipeline.errors import PipelineError
from tritonforge.pipeline.release.lockfile import read_lock
from tritonforge.pipeline.release.publish import (
    fetch_locked,
    lock_build,
    publish,
)

from .test_publish import FULL, add_tune_cache, dist_copy, s3  # noqa: F401 (fixtures)
from .test_signing import QUIET, keys, store  # noqa: F401 (fixtures)


def test_lock_round_trip_and_a_lock_that_no_longer_matches(store, dist_copy, keys, tmp_path):  # noqa: F811
    publish(store, "1.0.0", dist_copy, None, QUIET, profiles=FULL, sign_key=keys["a"][0])
    lock = lock_build(store, "1.0.0", "cuda", "multi", "full", tmp_path / "tritonforge.lock", keys["a"][1], QUIET)
    assert read_lock(tmp_path / "tritonforge.lock") == lock and lock["store"] == store.url
    assert set(lock["files"]) == {"kernels.json", "triton_kernel_infos.a", "triton_kernel_infos.h"}
    got = fetch_locked(tmp_path / "tritonforge.lock", tmp_path / "got", store, keys["a"][1], QUIET)
    for name, want in lock["files"].items():
        assert hashlib.sha256((got / name).read_bytes()).hexdigest() == want["sha256"]
    stale = dict(lock, files={**lock["files"], "triton_kernel_infos.a": {"size": 1, "sha256": "0" * 64}})
    (tmp_path / "stale.lock").write_text(json.dumps(stale))
    with pytest.raises(PipelineError, match="differ from the lock: triton_kernel_infos.a"):
        fetch_locked(tmp_path / "stale.lock", tmp_path / "never", store, None, QUIET)
    moved = dict(lock, manifest_sha256="f" * 64)
    (tmp_path / "moved.lock").write_text(json.dumps(moved))
    with pytest.raises(PipelineError, match="is not the locked one"):
        fetch_locked(tmp_path / "moved.lock", tmp_path / "never", store, None, QUIET)
    (tmp_path / "bad.lock").write_text("{}")
    with pytest.raises(PipelineError, match="not a tritonforge.lock/1 lock file"):
        fetch_locked(tmp_path / "bad.lock", tmp_path / "never", store, None, QUIET)
    assert not (tmp_path / "never").exists()
