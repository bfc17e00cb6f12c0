"""The check that a run compiles none of the README main job's kernels again (tests/main_job.py): a copy of
an entry is not a compile, a new entry of the same key is; what the main job compiled is computed from the
scripts, so entries of another build in the same cache (`invoke build --profile full`) are not the main job's."""

from __future__ import annotations

import os
import shutil
import time

import pytest
from tritonforge.pipeline.compile.cache import CompileCache

from . import main_job


def test_a_copy_is_not_a_compile_and_a_compile_is(tmp_path):
    pytest.importorskip("triton", reason="the main job's keys come from loading the kernel scripts")
    main, run = tmp_path / "main", tmp_path / "run"
    k1, k2 = sorted(main_job.expected())[:2]  # two kernels the README main job compiles
    full = "f" * 64  # a full-profile build's kernel in the same cache
    for key in (k1, k2, full):
        assert CompileCache(main).put(key, b"binary", {"sha256": "x"})
        for path in (main / key[:2]).iterdir():
            os.utime(path, (time.time() - 3600,) * 2)  # compiled an hour ago
    assert main_job.keys([main]) == {k1, k2}
    since = time.time()
    assert main_job.seed(run / "seeded", {k1}, caches=[main]) == 1  # a build's cache, seeded
    assert not (run / "seeded" / k2[:2] / f"{k2}.json").exists()
    assert main_job.seed(run / "restored", caches=[main]) == 2  # a runner's restore: the main job's, not `full`
    assert not (run / "restored" / "ff").exists()
    CompileCache(run / "compiled").put(k2, b"binary", {"sha256": "x"})  # compiled again in this run
    CompileCache(run / "new").put(full, b"binary", {"sha256": "x"})  # not the main job's: compiled on purpose
    assert main_job.compiled_again(run, main_job.keys([main]), since) == [str(run / "compiled" / k2[:2] / f"{k2}.json")]
    shutil.rmtree(run / "compiled")  # under the run's own temp directory, the end-of-run check would count it too


def test_the_main_jobs_keys_are_its_profile_on_every_cuda_arch():
    pytest.importorskip("triton", reason="the main job's keys come from loading the kernel scripts")
    import yaml
    from tritonforge.pipeline.builds.dist import discover_scripts
    from tritonforge.pipeline.compile.targets import parse_targets

    archs = yaml.safe_load((main_job.ROOT / "invoke.yaml").read_text())["tritonforge"]["archs"]["cuda"]
    scripts = discover_scripts(main_job.ROOT / "kernels")
    ort = main_job.kernel_keys(scripts, parse_targets(",".join(archs)), "ort")
    full = main_job.kernel_keys(scripts, parse_targets(",".join(archs)), "full")
    assert main_job.expected() == set().union(*ort.values())
    assert set().union(*full.values()) > main_job.expected()  # the full profile's extra kernels are not the job's
