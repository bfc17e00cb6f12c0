"""The locks publishers and gc exclude each other with."""

from __future__ import annotations

import pytest
from tritonforge.pipeline.errors import PipelineError
from tritonforge.pipeline.release.gc import collect_garbage
from tritonforge.pipeline.release.stores import FileStore

from .test_gc import QUIET, orphans
from .test_publish import FULL, add_tune_cache, dist_copy, kill_when, s3  # noqa: F401 (fixtures)


def test_gc_waits_for_no_one_and_refuses_while_a_publish_holds_its_lock(dist_copy, tmp_path):  # noqa: F811
    from tritonforge.pipeline.release.locks import PublishLock

    store = FileStore(tmp_path / "store")
    junk = orphans(store, 2, "x")
    with PublishLock(store):
        with pytest.raises(PipelineError, match="1 publish\\(es\\) under way"):
            collect_garbage(store, grace_s=0, log=QUIET)
    assert all(store.get(k) is not None for k in junk)
    assert collect_garbage(store, grace_s=0, log=QUIET)["deleted"] == 2
