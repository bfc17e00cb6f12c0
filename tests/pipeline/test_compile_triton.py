"""The drop-in for ORT's compile_triton.py in fetch mode: ORT's build gets a published build of the ORT
profile, verified, where its CMake asks, without triton; and ORT's own CMake flow links and loads it."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from tritonforge.pipeline.release.publish import publish
from tritonforge.pipeline.release.stores import FileStore

from ..conftest import require_tool
from .builds.test_dist import read

NO_TRITON = ("import sys; sys.modules['triton'] = None; from tritonforge.pipeline.compile_triton import main; "
             "sys.exit(main())")
FILES = ("triton_kernel_infos.a", "triton_kernel_infos.h", "kernels.json")


@pytest.fixture
def store(built_ort, tmp_path):
    url = f"file://{tmp_path / 'store'}"
    publish(FileStore(tmp_path / "store"), "1.4.0", built_ort[1], None, lambda _: None)
    return url


def drop_in(root, cwd, env, *args):
    """ORT's command line, in a Python where importing triton fails."""
    return subprocess.run([sys.executable, "-c", NO_TRITON, *args], cwd=cwd, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(root), **env}, timeout=300)


@pytest.mark.parametrize("target, build", [("gfx942", "rocm/gfx942"), ("cuda:multi", "cuda/multi"),
                                           ("hip:multi", "rocm/multi")])
def test_fetch_mode_writes_where_ort_asks_without_triton(root, built_ort, store, tmp_path, target, build):
    env = {"TRITONFORGE_STORE": store, "TRITONFORGE_VERSION": "1.4.0", "TRITONFORGE_TARGET": target}
    proc = drop_in(root, tmp_path, env, "--header", "inc/triton_kernel_infos.h", "--script_files",
                   "onnxruntime/core/providers/rocm/math/softmax_triton.py", "--obj_file", "lib/triton_kernel_infos.a")
    assert proc.returncode == 0, proc.stderr
    assert f"fetched {build} (ort profile) of version 1.4.0" in proc.stdout and "not compiled" in proc.stdout
    want = built_ort[1] / build
    assert (tmp_path / "lib/triton_kernel_infos.a").read_bytes() == (want / "triton_kernel_infos.a").read_bytes()
    assert (tmp_path / "inc/triton_kernel_infos.h").read_bytes() == (want / "triton_kernel_infos.h").read_bytes()
    assert json.loads((tmp_path / "lib/kernels.json").read_text())["profile"] == "ort"
    assert sorted(p.name for p in (tmp_path / "lib").iterdir()) == ["kernels.json", "triton_kernel_infos.a"]


@pytest.mark.parametrize("env, message", [
    ({"TRITONFORGE_VERSION": "9.9.9", "TRITONFORGE_TARGET": "gfx942"}, "9.9.9 is not published"),
    ({"TRITONFORGE_VERSION": "1.4.0", "TRITONFORGE_TARGET": "gfx90a"}, "version 1.4.0 has no rocm/gfx90a"),
    ({"TRITONFORGE_VERSION": "1.4.0"}, "no --target given (nor TRITONFORGE_TARGET)"),
    ({"TRITONFORGE_VERSION": "1.4.0", "TRITONFORGE_TARGET": "metal:multi"}, "unknown backend in target 'metal:multi'"),
    ({"TRITONFORGE_TARGET": "cuda:multi"}, "a multi-arch build is fetched, not compiled here"),
])
def test_fetch_mode_errors_leave_nothing(root, store, tmp_path, env, message, monkeypatch):
    monkeypatch.delenv("TRITONFORGE_TARGET", raising=False)
    proc = drop_in(root, tmp_path, {"TRITONFORGE_STORE": store, **env}, "--header", "inc/h.h", "--script_files",
                   "--obj_file", "lib/a.a")
    assert proc.returncode == 1 and message in proc.stderr, proc.stderr
    assert not (tmp_path / "inc/h.h").exists() and not (tmp_path / "lib/a.a").exists()


def test_orts_cmake_flow_builds_against_a_version_fetched_from_s3(root, built_ort, s3_server, tmp_path, monkeypatch):
    """ORT's flow (custom command, include dir, USE_TRITON_KERNEL, --whole-archive, a version script that
    exports _binary_*) against a version on the S3 server; the provider dlopened RTLD_LOCAL resolves every
    entry with dlsym(RTLD_DEFAULT) from its own code and finds the blobs kernels.json names."""
    import boto3
    from tritonforge.pipeline.release.stores import S3Store

    cmake = require_tool("cmake", "builds ORT's flow")
    require_tool("g++", "compiles it")
    creds = {"AWS_ACCESS_KEY_ID": s3_server["access_key"], "AWS_SECRET_ACCESS_KEY": s3_server["secret_key"],
             "AWS_DEFAULT_REGION": "us-east-1", "AWS_ENDPOINT_URL": s3_server["endpoint"]}
    boto3.client("s3", endpoint_url=s3_server["endpoint"], aws_access_key_id=creds["AWS_ACCESS_KEY_ID"],
                 aws_secret_access_key=creds["AWS_SECRET_ACCESS_KEY"], region_name="us-east-1").create_bucket(
        Bucket="ort")
    for k, v in creds.items():
        monkeypatch.setenv(k, v)
    publish(S3Store("ort", "releases", s3_server["endpoint"]), "1.4.0", built_ort[1], None, lambda _: None)
    project, build = root / "tests/pipeline/ort_flow", tmp_path / "build"
    env = {**os.environ, **creds, "PYTHONPATH": str(root), "TRITONFORGE_STORE": "s3://ort/releases",
           "TRITONFORGE_VERSION": "1.4.0", "TRITONFORGE_TARGET": "sm_90"}
    configure = subprocess.run(
        [cmake, "-S", str(project), "-B", str(build), f"-DPython3_EXECUTABLE={sys.executable}",
         f"-DCOMPILE_TRITON={root / 'pipeline/templates/ort_compile_triton.py'}",
         f"-DTEMPLATES={root / 'pipeline/templates'}", f"-DTRITON_KERNEL_SCRIPTS={project / 'CMakeLists.txt'}"],
        capture_output=True, text=True, env=env)
    assert configure.returncode == 0, configure.stdout + configure.stderr
    made = subprocess.run([cmake, "--build", str(build)], capture_output=True, text=True, env=env)
    assert made.returncode == 0, made.stdout + made.stderr
    assert "fetched cuda/sm_90 (ort profile) of version 1.4.0 from s3://ort/releases" in made.stdout
    assert creds["AWS_SECRET_ACCESS_KEY"] not in made.stdout + made.stderr
    doc = json.loads((build / "triton_kernels/kernels.json").read_text())
    run = subprocess.run([str(build / "loader"), str(build / "libprovider.so"), "190", doc["kernels"][0]["symbol"]],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stdout[-3000:]
    assert f"checked {len(doc['kernels'])} kernels, 0 failures" in run.stdout
    assert all(k["ort_launchable"] for k in doc["kernels"])  # the ORT profile: what ORT's plain launch runs


def test_ort_drop_in_cli(root, tmp_path, built, small_scripts):
    """ORT's flags: header and archive where asked, --ort_root ignored, kernels.json beside the archive."""
    _, out, cache = built
    env = {**os.environ, "PYTHONPATH": str(root)}
    scripts = [str(p) for p in small_scripts]
    proc = subprocess.run(
        [sys.executable, "-m", "tritonforge.pipeline.compile_triton", "--header", "inc/triton_kernel_infos.h",
         "--ort_root", "/nonexistent", "--script_files", *scripts, "--cache_dir", str(cache),
         "--obj_file", "lib/triton_kernel_infos.a", "--target", "cuda:90", "--quiet"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert read(tmp_path / "lib/triton_kernel_infos.a") == read(out / "cuda/sm_90/triton_kernel_infos.a")
    assert read(tmp_path / "inc/triton_kernel_infos.h") == read(out / "cuda/sm_90/triton_kernel_infos.h")
    assert (tmp_path / "lib/kernels.json").is_file()
    assert sorted(p.name for p in (tmp_path / "lib").iterdir()) == ["kernels.json", "triton_kernel_infos.a"]
    # TRITONFORGE_TRITON names the release ORT's CI expects: another one running is refused, nothing written
    for want, message in (("3.5.0", "running triton 3.9.0, but the triton setting asks for 3.5.0"),
                          ("3.4.1", "triton 3.4.1 is not supported: choose a release from 3.5.0 to 3.9.0")):
        proc = subprocess.run(
            [sys.executable, "-m", "tritonforge.pipeline.compile_triton", "--script_files", *scripts,
             "--obj_file", "other/triton_kernel_infos.a", "--header", "other/h.h", "--target", "cuda:90", "--quiet"],
            cwd=tmp_path, env={**env, "TRITONFORGE_TRITON": want}, capture_output=True, text=True, timeout=600)
        assert proc.returncode == 1 and message in proc.stderr, proc.stderr
        assert not (tmp_path / "other").exists()
