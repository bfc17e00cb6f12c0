"""Garbage collection: unreferenced blobs past the grace period go, referenced ones never do, also while
eight publishers race on SeaweedFS and when a gc is killed midway."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import threading
import time

import pytest
from tritonforge.pipeline.errors import PipelineError
from tritonforge.pipeline.release.gc import GC_LOCK, collect_garbage, parse_duration
from tritonforge.pipeline.release.publish import fetch, publish, read_manifest, versions
from tritonforge.pipeline.release.stores import FileStore, S3Store

from .test_publish import FULL, add_tune_cache, dist_copy, kill_when, s3  # noqa: F401 (fixtures)

QUIET = lambda _: None  # noqa: E731


def orphans(store, n: int, tag: str) -> list[str]:
    """n blobs no manifest names, as a refused or killed publish leaves them."""
    keys = []
    for i in range(n):
        data = f"orphan {tag} {i}".encode()
        keys.append(f"blobs/sha256/{hashlib.sha256(data).hexdigest()}")
        store.create(keys[-1], data)
    return keys


def referenced(store) -> set[str]:
    return {f"blobs/sha256/{e['sha256']}" for v in versions(store) for e in read_manifest(store, v)["files"]}


def fetch_all(store, tmp_path) -> None:
    """Every file of every version comes back and matches its manifest (fetch verifies each sha256)."""
    for v in versions(store):
        for build in read_manifest(store, v)["builds"]:
            platform, arch = build.split("/")[-2:]
            fetch(store, v, platform, arch, tmp_path / "fetched" / v / build, QUIET, "full")


def test_durations():
    assert [parse_duration(t) for t in ("90", "90s", "15m", "2h", "7d")] == [90, 90, 900, 7200, 604800]
    with pytest.raises(PipelineError, match="bad duration"):
        parse_duration("soon")


def test_dry_run_then_gc_on_the_file_store(dist_copy, tmp_path):  # noqa: F811
    store = FileStore(tmp_path / "store")
    publish(store, "1.0.0", dist_copy, None, QUIET, profiles=FULL)
    junk = orphans(store, 3, "old")
    said = []
    report = collect_garbage(store, grace_s=0, dry_run=True, log=said.append)
    assert report["would_delete"] == 3 and all(any(k in line for line in said) for k in junk)
    assert all(store.get(k) is not None for k in junk)  # a dry run deletes nothing
    assert collect_garbage(store, grace_s=3600, log=QUIET)["deleted"] == 0  # all younger than an hour
    assert collect_garbage(store, grace_s=0, log=QUIET)["deleted"] == 3
    assert all(store.get(k) is None for k in junk) and store.list("blobs") and store.get(GC_LOCK) is None
    assert set(store.list("blobs")) == referenced(store)
    fetch_all(store, tmp_path)


def test_gc_races_eight_publishers_on_seaweedfs(s3, dist_copy, tmp_path):  # noqa: F811
    """Each publisher's tune cache is already stored as an orphan (an earlier publish that died), so every
    publisher finds its blob there and skips the upload: the case that loses data without the locks."""
    dists = []
    for i in range(8):
        d = tmp_path / f"p{i}" / "dist"
        d.parent.mkdir()
        shutil.copytree(dist_copy, d)
        tune = add_tune_cache(d, f"publisher {i}")
        data = (tune / "cuda/sm_90/NVIDIA_H200.json").read_bytes()
        s3.create(f"blobs/sha256/{hashlib.sha256(data).hexdigest()}", data)  # the orphan it will reuse
        dists.append((d, tune))
    junk = orphans(s3, 5, "dead publishes")
    results, stop = {}, threading.Event()

    def publisher(i):
        store = S3Store(s3.bucket, s3.prefix, s3.env["AWS_ENDPOINT_URL"])
        try:
            results[i] = publish(store, f"7.{i}.0", dists[i][0], dists[i][1], QUIET, profiles=FULL)
        except PipelineError as exc:
            results[i] = f"error: {exc}"

    runs = {"deleted": 0, "busy": 0}

    def collector():
        store = S3Store(s3.bucket, s3.prefix, s3.env["AWS_ENDPOINT_URL"])
        while not stop.is_set():
            try:
                runs["deleted"] += collect_garbage(store, grace_s=0, log=QUIET, lease_s=5)["deleted"]
            except PipelineError:
                runs["busy"] += 1  # a publish or another gc held the store: it changed nothing
            time.sleep(0.01)

    gc_thread = threading.Thread(target=collector)
    gc_thread.start()
    threads = [threading.Thread(target=publisher, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    stop.set()
    gc_thread.join(timeout=60)
    assert all(results[i] == "published" for i in range(8)), results
    collect_garbage(s3, grace_s=0, log=QUIET)
    assert set(s3.list("blobs")) == referenced(s3)  # every orphan gone, nothing referenced lost
    assert all(s3.get(k) is None for k in junk)
    fetch_all(s3, tmp_path)
    assert sorted(versions(s3)) == sorted(f"7.{i}.0" for i in range(8))


LEASE_S = 10  # the killed gc's lease: long enough to see it held, short enough to wait out


@pytest.mark.full  # 16 s (it waits out a killed gc's lease); the default suite keeps the eight-publisher race
def test_a_killed_gc_leaves_every_version_fetchable(root, s3, dist_copy, tmp_path):  # noqa: F811
    publish(s3, "8.0.0", dist_copy, None, QUIET, profiles=FULL)
    orphans(s3, 400, "many")
    env = {**os.environ, "PYTHONPATH": str(root), **s3.env}
    code = ("import sys; from tritonforge.pipeline.release.gc import collect_garbage; "
            "from tritonforge.pipeline.release.stores import open_store; "
            f"collect_garbage(open_store(sys.argv[1]), grace_s=0, lease_s={LEASE_S})")
    proc = subprocess.Popen([sys.executable, "-u", "-c", code, f"s3://{s3.bucket}/{s3.prefix}"], cwd=root, env=env,
                            stdout=subprocess.PIPE, text=True)
    kill_when(proc, "deleted ")
    killed = time.monotonic()
    # first, while its lease surely runs (listing the store below takes seconds on a slow machine)
    with pytest.raises(PipelineError, match="another gc holds"):
        collect_garbage(s3, grace_s=0, log=QUIET)
    assert time.monotonic() - killed < LEASE_S, "the check came after the lease ran out: the machine stalled"
    left = [k for k in s3.list("blobs") if k not in referenced(s3)]
    assert left and s3.get(GC_LOCK) is not None  # killed midway, holding its lease
    fetch_all(s3, tmp_path)
    time.sleep(max(0.0, killed + LEASE_S + 1 - time.monotonic()))
    assert collect_garbage(s3, grace_s=0, log=QUIET)["deleted"] == len(left)  # lease over: taken over
    fetch_all(s3, tmp_path / "again")
