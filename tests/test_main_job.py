"""The check that a run compiles none of the README main job's kernels again (tests/main_job.py): a copy of
an entry is not a compile, a new entry of the same key is."""

from __future__ import annotations

import os
import time

from tritonforge.pipeline.compile.cache import CompileCache

from . import main_job


def test_a_copy_is_not_a_compile_and_a_compile_is(tmp_path):
    main, run = tmp_path / "main", tmp_path / "run"
    k1, k2, k3 = ("1" * 64, "2" * 64, "3" * 64)
    for key in (k1, k2):
        assert CompileCache(main).put(key, b"binary", {"sha256": "x"})
        for path in (main / key[:2]).iterdir():
            os.utime(path, (time.time() - 3600,) * 2)  # compiled by the main job, an hour ago
    assert main_job.keys([main]) == {k1, k2}
    since = time.time()
    assert main_job.seed(run / "seeded", {k1}, caches=[main]) == 1  # a build's cache, seeded
    assert not (run / "seeded" / k2[:2]).exists()
    CompileCache(run / "compiled").put(k2, b"binary", {"sha256": "x"})  # compiled again in this run
    CompileCache(run / "new").put(k3, b"binary", {"sha256": "x"})  # not the main job's
    assert main_job.compiled_again(run, main_job.keys([main]), since) == [str(run / "compiled" / "22" / f"{k2}.json")]
