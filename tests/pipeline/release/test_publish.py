"""Publish / fetch: immutable versions on a file store and on a real S3 server (SeaweedFS)."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess

import pytest
from tritonforge.pipeline.compile.pin import pinned_version
from tritonforge.pipeline.errors import PipelineError
from tritonforge.pipeline.release.publish import fetch, publish, read_manifest, versions
from tritonforge.pipeline.release.stores import FileStore, S3Store, check_key, open_store

from ...cli import invoke_argv
from ...conftest import require_tool


def publisher(root, version, store_url, dist, *extra) -> list[str]:
    """`invoke publish` of the full-profile builds under dist, run in the repository."""
    return [*invoke_argv(root), "publish", "--version", version, "--store", store_url, "--dist", str(dist),
            "--profile", "full", *extra]


def cli(root, argv, env=None, **kw):
    return subprocess.run(argv, cwd=root, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}, **kw)


FULL = ("full",)  # the small set's builds are full-profile builds: they live in dist/full/


@pytest.fixture
def dist_copy(built, tmp_path):
    _, out, _ = built
    d = tmp_path / "dist"
    shutil.copytree(out, d / "full")
    return d


def add_tune_cache(dist, note: str):
    """A tune cache made for the sm_90 archive; `note` makes its bytes differ between publishers."""
    doc = json.loads((dist / "full/cuda/sm_90/kernels.json").read_text())
    tune = dist.parent / "tune" / "cuda" / "sm_90"
    tune.mkdir(parents=True, exist_ok=True)
    (tune / "NVIDIA_H200.json").write_text(json.dumps({
        "schema": "tritonforge.tune/1", "validators": {"archive_sha256": doc["archive"]["sha256"]},
        "results": {}, "note": note}))
    return dist.parent / "tune"


@pytest.fixture
def s3(s3_server, monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", s3_server["access_key"])
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", s3_server["secret_key"])
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    bucket = "tf-" + os.urandom(4).hex()
    store = S3Store(bucket, "releases", s3_server["endpoint"])
    store.client.create_bucket(Bucket=bucket)
    store.env = {"AWS_ACCESS_KEY_ID": s3_server["access_key"], "AWS_SECRET_ACCESS_KEY": s3_server["secret_key"],
                 "AWS_DEFAULT_REGION": "us-east-1", "AWS_ENDPOINT_URL": s3_server["endpoint"]}
    return store


@pytest.mark.parametrize("bad", ["../x", "/abs", "a b", "v1/../../etc", ".hidden", "", "x\\y", "v" * 65, "-rc"])
def test_keys_and_versions_cannot_escape(bad, dist_copy, tmp_path):
    if bad not in ("v" * 65, "-rc"):  # a valid key, but not a valid version
        with pytest.raises(PipelineError, match="refusing object key"):
            check_key(bad)
    store = FileStore(tmp_path / "store")
    for attempt in (lambda: publish(store, bad, dist_copy, None, lambda _: None, profiles=FULL),
                    lambda: fetch(store, bad, "cuda", "sm_90", tmp_path / "dest", lambda _: None, "full")):
        with pytest.raises(PipelineError, match=f"bad version {re.escape(repr(bad))}: a version is 1 to 64"):
            attempt()
    assert not (tmp_path / "store").exists() and not (tmp_path / "dest").exists()


@pytest.mark.parametrize("good", ["1.0.0", "v1.4.0-rc1", "2026.12.01+cuda", "0"])
def test_good_versions_are_taken(good):
    from tritonforge.pipeline.release.publish import check_version

    assert check_version(good) == good


def test_file_store_round_trip(dist_copy, tmp_path):
    store = open_store(f"file://{tmp_path / 'store'}")
    tune = add_tune_cache(dist_copy, "a")
    assert publish(store, "1.0.0", dist_copy, tune, lambda _: None, profiles=FULL) == "published"
    assert publish(store, "1.0.0", dist_copy, tune, lambda _: None, profiles=FULL) == "identical"
    assert versions(store) == ["1.0.0"]
    doc = read_manifest(store, "1.0.0")
    assert doc["triton_version"] == pinned_version()
    assert set(doc["builds"]) == {"full/cuda/sm_80", "full/cuda/sm_90", "full/rocm/gfx942", "full/cuda/multi",
                                  "full/rocm/multi"}
    multi = fetch(store, "1.0.0", "cuda", "multi", tmp_path / "multi", lambda _: None, "full")
    for name in ("triton_kernel_infos.a", "triton_kernel_infos.h", "kernels.json"):  # like any arch
        assert (multi / name).read_bytes() == (dist_copy / "full/cuda/multi" / name).read_bytes()
    got = fetch(store, "1.0.0", "cuda", "sm_90", tmp_path / "ort" / "kernels", lambda _: None, "full")
    for name in ("triton_kernel_infos.a", "triton_kernel_infos.h", "kernels.json"):
        assert (got / name).read_bytes() == (dist_copy / "full/cuda/sm_90" / name).read_bytes()
    assert (got / "tune" / "NVIDIA_H200.json").is_file() and (got / "tritonforge-kernels.cmake").is_file()
    cmake = (got / "tritonforge-kernels.cmake").read_text()  # the driver library ORT's provider links
    assert "target_link_libraries(tritonforge_kernels INTERFACE CUDA::cuda_driver)" in cmake
    rocm = fetch(store, "1.0.0", "rocm", "gfx942", tmp_path / "rocm", lambda _: None, "full")
    rocm_cmake = (rocm / "tritonforge-kernels.cmake").read_text()
    assert "target_link_libraries(tritonforge_kernels INTERFACE hip::host)" in rocm_cmake
    # A different build under the same version is refused, and nothing about 1.0.0 changes.
    (dist_copy / "full/cuda/sm_90/triton_kernel_infos.h").write_text("changed")
    with pytest.raises(PipelineError, match="does not match its kernels.json"):
        publish(store, "1.0.0", dist_copy, tune, lambda _: None, profiles=FULL)
    tune2 = add_tune_cache(dist_copy, "b")
    shutil.copy(tmp_path / "ort/kernels/triton_kernel_infos.h", dist_copy / "full/cuda/sm_90/triton_kernel_infos.h")
    with pytest.raises(PipelineError, match="already published .* with different content"):
        publish(store, "1.0.0", dist_copy, tune2, lambda _: None, profiles=FULL)
    assert read_manifest(store, "1.0.0") == doc


def test_tune_cache_for_another_archive_is_refused(dist_copy, tmp_path):
    tune = add_tune_cache(dist_copy, "x")
    cache = tune / "cuda/sm_90/NVIDIA_H200.json"
    doc = json.loads(cache.read_text())
    doc["validators"]["archive_sha256"] = "0" * 64
    cache.write_text(json.dumps(doc))
    with pytest.raises(PipelineError, match="made for another archive"):
        publish(FileStore(tmp_path / "s"), "1", dist_copy, tune, lambda _: None, profiles=FULL)


def test_s3_round_trip_refusal_and_idempotence(s3, dist_copy, tmp_path):
    assert publish(s3, "2.0.0", dist_copy, None, lambda _: None, profiles=FULL) == "published"
    assert publish(s3, "2.0.0", dist_copy, None, lambda _: None, profiles=FULL) == "identical"
    assert versions(s3) == ["2.0.0"]
    tune = add_tune_cache(dist_copy, "changed")
    with pytest.raises(PipelineError, match="already published"):
        publish(s3, "2.0.0", dist_copy, tune, lambda _: None, profiles=FULL)
    got = fetch(s3, "2.0.0", "rocm", "gfx942", tmp_path / "got", lambda _: None, "full")
    want = (dist_copy / "full/rocm/gfx942/triton_kernel_infos.a").read_bytes()
    assert (got / "triton_kernel_infos.a").read_bytes() == want
    with pytest.raises(PipelineError, match="has no full/cuda/sm_86"):
        fetch(s3, "2.0.0", "cuda", "sm_86", tmp_path / "none", lambda _: None, "full")
    with pytest.raises(PipelineError, match=r"9.9.9 is not published .*\(published: 2.0.0\)"):
        fetch(s3, "9.9.9", "cuda", "sm_90", tmp_path / "none", lambda _: None, "full")


@pytest.mark.full  # 8 s; the default suite keeps gc's race of eight publishers on one version (test_gc.py)
def test_sixteen_concurrent_publishers_one_winner(root, s3, dist_copy, tmp_path):
    procs = []
    for i in range(16):
        d = tmp_path / f"p{i}"
        shutil.copytree(dist_copy, d / "dist")
        tune = add_tune_cache(d / "dist", f"publisher {i}")
        procs.append(subprocess.Popen(
            publisher(root, "3.0.0", f"s3://{s3.bucket}/{s3.prefix}", d / "dist", "--tune", str(tune)),
            cwd=root, env={**os.environ, **s3.env}, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    results = [(p.wait(timeout=300), p.stdout.read(), p.stderr.read()) for p in procs]
    winners = [r for r in results if r[0] == 0]
    assert len(winners) == 1, results
    assert all("already published" in r[2] for r in results if r[0] != 0)
    note = json.loads(s3.get(f"blobs/sha256/{_tune_sha(read_manifest(s3, '3.0.0'))}"))["note"]
    assert "published 3.0.0" in winners[0][1] and note.startswith("publisher ")


def kill_when(proc, prefix: str) -> None:
    """SIGKILL `proc` as soon as it prints a line starting with `prefix`: killed in the middle of its work."""
    for line in proc.stdout:
        if line.startswith(prefix):
            proc.send_signal(signal.SIGKILL)
            break
    proc.wait()
    assert proc.returncode == -signal.SIGKILL


def _tune_sha(doc):
    return next(e["sha256"] for e in doc["files"] if e["path"].endswith("tune/NVIDIA_H200.json"))


def test_killed_publish_leaves_no_version_and_resumes(root, s3, dist_copy):
    store_url = f"s3://{s3.bucket}/{s3.prefix}"
    proc = subprocess.Popen(publisher(root, "4.0.0", store_url, dist_copy), cwd=root,
                            env={**os.environ, "PYTHONUNBUFFERED": "1", **s3.env}, stdout=subprocess.PIPE, text=True)
    kill_when(proc, "uploaded 1/")
    assert "4.0.0" not in versions(s3) and s3.get("versions/4.0.0/manifest.json") is None
    assert any(k.startswith("blobs/") for k in s3.list("blobs"))  # the upload had begun
    again = cli(root, publisher(root, "4.0.0", store_url, dist_copy), env=s3.env)
    assert again.returncode == 0, again.stderr
    assert "already stored" in again.stdout and versions(s3) == ["4.0.0"]


def test_tampered_object_is_caught_and_dest_kept(s3, dist_copy, tmp_path):
    publish(s3, "5.0.0", dist_copy, None, lambda _: None, profiles=FULL)
    dest = tmp_path / "ort-kernels"
    dest.mkdir()
    (dest / "keep.txt").write_text("from before")
    doc = read_manifest(s3, "5.0.0")
    victim = next(e for e in doc["files"] if e["path"] == "full/cuda/sm_90/triton_kernel_infos.a")
    s3.client.put_object(Bucket=s3.bucket, Key=f"{s3.prefix}/blobs/sha256/{victim['sha256']}", Body=b"evil")
    with pytest.raises(PipelineError, match="full/cuda/sm_90/triton_kernel_infos.a of 5.0.0 does not match"):
        fetch(s3, "5.0.0", "cuda", "sm_90", dest, lambda _: None, "full")
    assert sorted(p.name for p in dest.iterdir()) == ["keep.txt"]
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


def test_fetched_artifacts_build_with_cmake(root, dist_copy, tmp_path):
    cmake = require_tool("cmake", "builds the ORT-style consumer project")
    require_tool("g++", "compiles it")
    store = FileStore(tmp_path / "store")
    publish(store, "7.0.0", dist_copy, None, lambda _: None, profiles=FULL)
    kernels = fetch(store, "7.0.0", "cuda", "sm_90", tmp_path / "third_party" / "tritonforge", lambda _: None,
                    "full")
    templates = root / "pipeline" / "templates"
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "CMakeLists.txt").write_text(f"""cmake_minimum_required(VERSION 3.16)
project(provider CXX)
include("{kernels}/tritonforge-kernels.cmake")
add_library(provider SHARED "{templates}/ort_consumer.cc")
target_link_libraries(provider PRIVATE tritonforge::kernels dl "-Wl,--version-script={templates}/provider.lds")
add_executable(consumer "{templates}/ort_consumer_main.cc")
target_link_libraries(consumer PRIVATE provider)
""")
    subprocess.run([cmake, "-S", str(proj), "-B", str(proj / "build")], check=True, capture_output=True)
    build = subprocess.run([cmake, "--build", str(proj / "build")], capture_output=True, text=True)
    assert build.returncode == 0, build.stdout + build.stderr
    run = subprocess.run([str(proj / "build" / "consumer"), "190"], capture_output=True, text=True)
    n = len(json.loads((kernels / "kernels.json").read_text())["kernels"])
    assert run.returncode == 0 and f"checked {n} kernels, 0 failures" in run.stdout, run.stdout[-2000:]


def test_ort_sources_are_published_with_the_version_and_fetched_verified(dist_copy, tmp_path):
    import hashlib

    from tritonforge.pipeline.package import ort_sources as gen
    from tritonforge.pipeline.release.publish import fetch_ort_sources

    files = {"sparse_attention_v1/sparse_attention_v1_api.cc": b"// v1\n",
             "sparse_attention_v2/sparse_attention_v2_fp16_d128_m64_16_n64_b1_sm90.cc": b"// v2\n",
             gen.PATCH_NAME: gen.PATCH.read_bytes()}
    manifest = {"files": {k: hashlib.sha256(v).hexdigest() for k, v in files.items()}, "kernels": []}
    gen.write({**files, gen.MANIFEST_NAME: json.dumps(manifest).encode()}, dist_copy / "ort-sources")
    store = open_store(f"file://{tmp_path / 'store'}")
    assert publish(store, "2.0.0", dist_copy, None, lambda _: None, profiles=FULL) == "published"
    got = fetch_ort_sources(store, "2.0.0", tmp_path / "got", lambda _: None)
    assert len(got) == 4
    for rel, data in files.items():
        assert (tmp_path / "got" / rel).read_bytes() == data  # the folders as generated
    assert gen.check_folder(tmp_path / "got")["files"] == manifest["files"]
    # a folder changed after it was generated is not published
    (dist_copy / "ort-sources" / "sparse_attention_v1" / "sparse_attention_v1_api.cc").write_bytes(b"// edited\n")
    with pytest.raises(PipelineError, match="sparse_attention_v1_api.cc: missing or not what ort-sources.json says"):
        publish(store, "2.0.1", dist_copy, None, lambda _: None, profiles=FULL)
    shutil.rmtree(dist_copy / "ort-sources")
    assert publish(store, "1.0.0", dist_copy, None, lambda _: None, profiles=FULL) == "published"
    with pytest.raises(PipelineError, match="version 1.0.0 has no ORT sources"):
        fetch_ort_sources(store, "1.0.0", tmp_path / "x", lambda _: None)
