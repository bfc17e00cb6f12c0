"""Acceptance tests: every task the README, `invoke --help` and the workflows show, run as a user types
it (`.venv/bin/invoke ...` in a fresh copy, invoke.yaml's defaults, relative paths), on the small kernel
set (tests/kernel_subset.py) named through INVOKE_TRITONFORGE_KERNELS_DIR."""

from __future__ import annotations

import json
import os
import re
import shutil

import pytest
from tritonforge.pipeline.compile.targets import parse_targets

from . import main_job
from .cli import ROOT, fresh_venv, invoke, readme_lines, seed_cache, user_repo, userland_said
from .conftest import FULL_ARCHS

pytest.importorskip("invoke", reason="the tasks need invoke (scripts/setup installs it)")

FILES = ("triton_kernel_infos.a", "triton_kernel_infos.h", "kernels.json")
NO_ENGINE = {"DOCKER_HOST": "unix:///nonexistent/docker.sock"}


def same_bytes(a, b) -> list[str]:
    """The artifact files that differ between two target directories."""
    return [name for name in FILES if (a / name).read_bytes() != (b / name).read_bytes()]


def summary_rows(output: str) -> dict[str, tuple[int, int, int, float]]:
    """{platform/arch: (kernels, compiled, cached, cpu s)} from the build's summary table."""
    rows = {}
    for m in re.finditer(r"(\w+/\w+)\s*│\s*(\d+)\s*│\s*(\d+)\s*│\s*(\d+)\s*│\s*([\d.]+)\s*│", output):
        rows[m.group(1)] = (int(m.group(2)), int(m.group(3)), int(m.group(4)), float(m.group(5)))
    return rows


@pytest.fixture
def repo(tmp_path, small_kernels):
    """(fresh copy, env) with the small kernel set as its kernels_dir."""
    return user_repo(tmp_path / "repo", small_kernels)


@pytest.fixture
def warm_repo(repo, built):
    """A fresh copy whose default compile cache already holds the small set (as after an earlier build)."""
    seed_cache(repo[0], built[2])
    return repo


# --- invoke build: auto, docker, local, and auto with no engine answering ---------------------------------------


def test_readme_main_command_builds_in_docker_with_default_paths(docker_builds, built_ort, small_scripts):
    """`invoke build --platform cuda`: the ORT profile, in the image, for invoke.yaml's archs, into dist/."""
    proc = docker_builds["cuda"]
    assert proc.returncode == 0, proc.stdout[-4000:]
    out = proc.stdout
    assert "runner: docker (a Docker engine answered)" in out
    repo, (report, local) = docker_builds["repo"], built_ort
    archs = ["sm_75", "sm_80", "sm_90", "sm_100", "sm_120"]  # invoke.yaml's default CUDA archs, in dist/
    for arch in archs:
        assert json.loads((repo / "dist/cuda" / arch / "kernels.json").read_text())["profile"] == "ort"
        image = json.loads((repo / "dist" / "cuda" / f"{arch}.image.json").read_text())
        assert image["tag"].startswith("tritonforge/cuda:")
        assert f"consumer check {arch}: " in out
        if (local / "cuda" / arch).is_dir():  # the archs the local build made: the same bytes
            assert not same_bytes(repo / "dist" / "cuda" / arch, local / "cuda" / arch), arch
    # ... and one archive for every arch, its fatbins made in the image
    assert json.loads((repo / "dist/cuda/multi/kernels.json").read_text())["target"]["archs"] == archs
    assert "consumer check cuda/multi: " in out and "archs inside each blob match kernels.json" in out
    assert "ORT library cuda/multi: " in out and (repo / "dist/cuda/multi/libtritonforge_ort.so").is_file()
    rows = summary_rows(out)
    # what the README main job compiled comes from its cache (tests/main_job.py); the rest, the container compiles
    held = main_job.held(small_scripts, parse_targets(",".join(archs)), "ort")
    for t in report.targets:
        if t.target.platform == "cuda":
            kernels, compiled, cached, _ = rows[f"cuda/{t.target.arch_name}"]
            assert (kernels, compiled, cached) == (t.kernels, t.kernels - held[t.target.arch_name],
                                                   held[t.target.arch_name])
    assert "bytes" not in out.replace("archive B", "")
    assert sorted(p.name for p in (repo / "dist").iterdir()) == ["cuda", "full"]  # no work dirs left
    assert (repo / ".cache/tritonforge/compile-docker").is_dir()  # relative cache dir, the container's own


@pytest.mark.parametrize("platform", ["cuda", "rocm"])
def test_docker_runner_full_profile_matches_local_bytes(docker_builds, built, small_scripts, platform):
    """ci.yml's full-profile line for one arch in the platform's image: of what the README main job did not
    compile, the container compiles the first kernel of each script and takes the rest from the local build's
    cache (conftest's docker_builds), and the bytes are the local build's."""
    arch = FULL_ARCHS[platform]
    proc = docker_builds[f"{platform}_full"]
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert "runner:" not in proc.stdout  # asked for docker by name
    assert f"consumer check {arch}: " in proc.stdout
    held = main_job.held(small_scripts, parse_targets(arch))[arch] + docker_builds["seeded"][arch]
    kernels, compiled, cached, _ = summary_rows(proc.stdout)[f"{platform}/{arch}"]
    assert compiled == docker_builds["sample"][arch] > 1 and (compiled, cached) == (kernels - held, held)
    assert not same_bytes(docker_builds["repo"] / "dist/full" / platform / arch, built[1] / platform / arch)
    assert json.loads((built[1] / platform / arch / "kernels.json").read_text())["profile"] == "full"


def test_local_runner_default_archs_and_out(warm_repo, built_ort):
    repo, env = warm_repo
    proc = invoke(repo, "build", "--platform", "cuda", "--runner", "local", env=env)
    assert proc.returncode == 0, proc.stdout[-4000:]
    for arch in ("sm_80", "sm_90"):
        assert not same_bytes(repo / "dist/cuda" / arch, built_ort[1] / "cuda" / arch), arch
        assert f"consumer check {arch}: " in proc.stdout
        assert summary_rows(proc.stdout)[f"cuda/{arch}"][1] == 0  # every kernel from the default cache
    # the custom-op library of the multi build, checked in onnxruntime
    assert "ORT library cuda/multi: dist/cuda/multi/libtritonforge_ort.so" in proc.stdout
    assert "loads in onnxruntime" in proc.stdout and (repo / "dist/cuda/multi/libtritonforge_ort.so").is_file()


@pytest.mark.full  # 5 s; the default suite keeps the local runner's CUDA build with its default archs and out
def test_local_runner_rocm_with_a_relative_out(warm_repo, built):
    repo, env = warm_repo
    proc = invoke(repo, "build", "--platform", "rocm", "--arch", "gfx942", "--runner", "local", "--out", "out/x",
                  "--profile", "full", env=env)
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert not same_bytes(repo / "out/x/full/rocm/gfx942", built[1] / "rocm/gfx942")
    assert not (repo / "dist").exists()


def test_auto_runner_without_an_engine_builds_locally(warm_repo, built_ort):
    repo, env = warm_repo
    stale = repo / "dist/cuda/sm_90.image.json"  # left by an earlier docker build
    stale.parent.mkdir(parents=True)
    stale.write_text('{"tag": "tritonforge/cuda:old"}\n')
    proc = invoke(repo, "build", "--platform", "cuda", "--arch", "sm_90", env={**env, **NO_ENGINE})
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert "runner: local (no Docker engine reachable" in proc.stdout
    assert not same_bytes(repo / "dist/cuda/sm_90", built_ort[1] / "cuda/sm_90")
    assert not stale.exists()  # no image built these bytes


def test_docker_runner_without_an_engine_is_a_clear_error(repo):
    repo, env = repo
    proc = invoke(repo, "build", "--platform", "cuda", "--runner", "docker", env={**env, **NO_ENGINE})
    assert proc.returncode == 1
    assert "error: no Docker engine reachable" in proc.stdout and "--runner local" in proc.stdout
    assert "Traceback" not in proc.stdout
    assert not (repo / "dist").exists()


def test_build_argument_errors(repo):
    repo, env = repo
    for args, message in ((["--platform", "metal"], "--platform must be one of cuda, rocm, not 'metal'"),
                          (["--platform", "cuda", "--arch", "gfx942"], "'gfx942' is not a cuda target"),
                          (["--platform", "cuda", "--arch", "sm_91"], "unknown CUDA target 'sm_91'"),
                          (["--platform", "cuda", "--runner", "podman"],
                           "--runner must be one of auto, docker, local"),
                          (["--platform", "cuda", "--triton", "3.4.0"],
                           "triton 3.4.0 is not supported: choose a release from 3.5.0 to 3.9.0"),
                          (["--platform", "cuda", "--runner", "local", "--triton", "3.5.0"],
                           "running triton 3.9.0, but the triton setting asks for 3.5.0")):
        proc = invoke(repo, "build", *args, env=env)
        assert proc.returncode != 0 and message in proc.stdout, (args, proc.stdout)
        assert "Traceback" not in proc.stdout
    proc = invoke(repo, "build", "--platform", "cuda", env={"INVOKE_TRITONFORGE_KERNELS_DIR": "no-such-dir"})
    assert proc.returncode == 1 and "kernels directory 'no-such-dir' does not exist" in proc.stdout
    assert not (repo / "dist").exists()


# --- compile, check ----------------------------------------------------------------------------------------------


def test_compile_then_check(warm_repo, built_ort):
    repo, env = warm_repo
    proc = invoke(repo, "compile", "--platform", "rocm", "--arch", "gfx942", env=env)
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert not same_bytes(repo / "dist/rocm/gfx942", built_ort[1] / "rocm/gfx942")
    n = len(json.loads((repo / "dist/rocm/gfx942/kernels.json").read_text())["kernels"])
    for path in ("dist/rocm/gfx942", "dist/rocm/gfx942/kernels.json"):
        proc = invoke(repo, "check", "--path", path, env=env)
        assert proc.returncode == 0, proc.stdout
        assert proc.stdout.strip().endswith(f"checked {n} kernels, 0 failures")
    proc = invoke(repo, "check", "--path", "dist/rocm/nothing", env=env)
    assert proc.returncode == 1 and "dist/rocm/nothing" in proc.stdout and "Traceback" not in proc.stdout


# --- image, base-image --------------------------------------------------------------------------------------------


def test_image_and_base_image(docker_builds):
    repo, env = docker_builds["repo"], docker_builds["env"]
    proc = invoke(repo, "base-image", env=env)
    assert proc.returncode == 0 and proc.stdout.strip().splitlines()[-1] == "tritonforge/debian-base:bookworm"
    tag = json.loads((repo / "dist/cuda/sm_90.image.json").read_text())["tag"]
    proc = invoke(repo, "image", "--platform", "cuda", env=env)
    assert proc.returncode == 0, proc.stdout
    assert "build skipped" in proc.stdout and proc.stdout.strip().splitlines()[-1] == tag
    proc = invoke(repo, "image", "--platform", "metal", env=env)
    assert proc.returncode == 1 and "unknown platform 'metal'" in proc.stdout


def test_image_prune_removes_the_tags_other_inputs_made(docker_builds, docker_engine):
    repo, env = docker_builds["repo"], docker_builds["env"]
    tag = json.loads((repo / "dist/cuda/sm_90.image.json").read_text())["tag"]
    name = tag.rpartition(":")[0]
    stale, mine = f"{name}:{'0' * 16}", f"{name}:mine"  # a build before the inputs last changed; a user's own tag
    for t in (stale, mine):
        docker_engine.images.get(tag).tag(t)
    # an image of its own (a commit of a container) that a container still uses: docker keeps it, and says so
    maker = docker_engine.containers.create(tag, command=["true"])
    used = f"{name}:{'1' * 16}"
    maker.commit(name, "1" * 16)
    maker.remove()
    user = docker_engine.containers.create(used, command=["true"])
    try:
        proc = invoke(repo, "image", "--platform", "cuda", "--prune", "--dry-run", env=env)
        assert proc.returncode == 0 and f"would remove {stale}" in proc.stdout, proc.stdout
        assert stale in docker_engine.images.get(tag).tags
        proc = invoke(repo, "image", "--platform", "cuda", "--prune", env=env)
        assert proc.returncode == 0 and f"removed {stale}" in proc.stdout and f"kept {tag}" in proc.stdout, proc.stdout
        assert f"kept {used}: " in proc.stdout
        assert sorted(docker_engine.images.get(tag).tags) == sorted([tag, mine])
    finally:
        user.remove()
        docker_engine.images.remove(mine)
    proc = invoke(repo, "image", "--platform", "cuda", "--prune", env=env)
    assert proc.returncode == 0 and f"removed {used}" in proc.stdout, proc.stdout
    proc = invoke(repo, "image", "--dry-run", env=env)
    assert proc.returncode == 2 and "--dry-run goes with --prune" in proc.stdout
    proc = invoke(repo, "image", "--prune", "--force", env=env)
    assert proc.returncode == 2 and "name one" in proc.stdout


# --- publish, versions, fetch ------------------------------------------------------------------------------------


@pytest.fixture
def repo_with_dist(repo, built, built_ort):
    """A fresh copy whose dist/ holds the ORT profile's builds, and dist/full/ the full profile's."""
    copy, env = repo
    shutil.copytree(built_ort[1], copy / "dist")
    shutil.copytree(built[1], copy / "dist" / "full")
    return copy, env


def test_wheel_refuses_an_unknown_userland_before_it_writes_a_wheel(repo):
    repo, env = repo
    proc = invoke(repo, "wheel", "--version", "5.1.0", "--out", "old", "--userland", "nowhere", env=env)
    assert proc.returncode == 1 and "unknown userland 'nowhere' (known: bullseye)" in proc.stdout, proc.stdout
    assert not (repo / "old").exists()


@pytest.mark.full  # with the workflow test, which runs `invoke wheel --userland bullseye` on its own model
def test_the_wheel_installs_and_runs_a_users_export_on_an_older_linux(repo_with_dist, userland_image):
    """`invoke wheel --userland bullseye --model`: Debian 11's own pip installs the wheel beside onnxruntime 1.18.0
    and the newest (userland_said), rewrites a dynamo export with dynamic axes with `tritonforge-rewrite` and runs
    it on the CPU EP against onnxruntime's own run of the export."""
    repo, env = repo_with_dist
    assert invoke(repo, "ortlib", env=env).returncode == 0
    export = ROOT / "tests/runtime/ortlib/rewrite/exports/sd15_vae_decoder_tiny.dynamo.dynamic.fp32.onnx"
    for f in (export, export.with_name(export.name + ".data")):
        shutil.copy(f, repo / f.name)
    proc = invoke(repo, "wheel", "--version", "5.1.0", "--out", "old", "--userland", "bullseye", "--model",
                  export.name, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert all(int(rewritten) == 15 for rewritten in userland_said(proc.stdout))
    assert not (repo / export.name.replace(".onnx", ".tf.onnx")).exists()  # it ran in the container, on a copy


def test_publish_versions_fetch_on_the_default_store(repo_with_dist):
    repo, env = repo_with_dist
    proc = invoke(repo, "publish", "--version", "1.0.0", "--manifest-out", "release-manifest.json", env=env)
    assert proc.returncode == 0, proc.stdout
    stored = repo / "artifacts/versions/1.0.0/manifest.json"  # invoke.yaml's store: file://artifacts
    assert (repo / "release-manifest.json").read_bytes() == stored.read_bytes()
    builds = json.loads(stored.read_text())["builds"]
    assert builds.keys() == {"cuda/sm_80", "cuda/sm_90", "cuda/multi", "rocm/gfx942", "rocm/multi"}  # ORT profile
    assert {b["profile"] for b in builds.values()} == {"ort"}
    proc = invoke(repo, "versions", env=env)
    assert proc.returncode == 0 and proc.stdout.split() == ["1.0.0"]
    proc = invoke(repo, "fetch", "--version", "1.0.0", "--platform", "cuda", "--arch", "sm_90",
                  "--dest", "third_party/tritonforge", env=env)
    assert proc.returncode == 0, proc.stdout
    assert not same_bytes(repo / "third_party/tritonforge", repo / "dist/cuda/sm_90")
    assert (repo / "third_party/tritonforge/tritonforge-kernels.cmake").is_file()
    proc = invoke(repo, "fetch", "--version", "1.0.0", "--platform", "cuda", "--arch", "multi",
                  "--dest", "third_party/multi", env=env)
    assert proc.returncode == 0, proc.stdout
    assert not same_bytes(repo / "third_party/multi", repo / "dist/cuda/multi")
    proc = invoke(repo, "publish", "--version", "1.0.0", env=env)
    assert proc.returncode == 0 and "already published with identical content" in proc.stdout
    (repo / "dist/cuda/sm_90/kernels.json").write_text("{}")
    proc = invoke(repo, "publish", "--version", "1.0.0", env=env)
    assert proc.returncode == 1 and "cuda/sm_90" in proc.stdout and "Traceback" not in proc.stdout
    assert stored.read_bytes() == (repo / "release-manifest.json").read_bytes()  # never overwritten
    proc = invoke(repo, "fetch", "--version", "2.0.0", "--platform", "cuda", "--arch", "sm_90", "--dest", "x",
                  env=env)
    assert proc.returncode == 1 and "2.0.0 is not published" in proc.stdout and not (repo / "x").exists()


def test_publish_and_fetch_both_profiles(repo_with_dist):
    repo, env = repo_with_dist
    proc = invoke(repo, "publish", "--version", "2.0.0", "--profile", "ort,full", env=env)
    assert proc.returncode == 0, proc.stdout
    builds = json.loads((repo / "artifacts/versions/2.0.0/manifest.json").read_text())["builds"]
    each = (("cuda", "sm_80"), ("cuda", "sm_90"), ("cuda", "multi"), ("rocm", "gfx942"), ("rocm", "multi"))
    assert {rel: b["profile"] for rel, b in builds.items()} == {
        **{f"{p}/{a}": "ort" for p, a in each}, **{f"full/{p}/{a}": "full" for p, a in each}}
    for profile, source in (("ort", "dist/cuda/sm_90"), ("full", "dist/full/cuda/sm_90")):
        proc = invoke(repo, "fetch", "--version", "2.0.0", "--platform", "cuda", "--arch", "sm_90", "--dest",
                      f"got-{profile}", "--profile", profile, env=env)
        assert proc.returncode == 0, proc.stdout
        assert not same_bytes(repo / f"got-{profile}", repo / source), profile
    proc = invoke(repo, "publish", "--version", "3.0.0", "--profile", "some", env=env)
    assert proc.returncode == 1 and "--profile must be one of ort, full, not 'some'" in proc.stdout


def test_publish_versions_fetch_on_s3(repo_with_dist, s3_server):
    import boto3

    repo, env = repo_with_dist
    env = {**env, "AWS_ACCESS_KEY_ID": s3_server["access_key"], "AWS_SECRET_ACCESS_KEY": s3_server["secret_key"],
           "AWS_DEFAULT_REGION": "us-east-1", "AWS_ENDPOINT_URL": s3_server["endpoint"]}
    boto3.client("s3", endpoint_url=s3_server["endpoint"], aws_access_key_id=s3_server["access_key"],
                 aws_secret_access_key=s3_server["secret_key"], region_name="us-east-1").create_bucket(Bucket="tasks")
    store = "s3://tasks/releases"
    proc = invoke(repo, "publish", "--version", "v1.2.3", "--store", store, "--manifest-out", "m.json", env=env)
    assert proc.returncode == 0, proc.stdout
    assert s3_server["secret_key"] not in proc.stdout
    proc = invoke(repo, "versions", "--store", store, env=env)
    assert proc.returncode == 0 and proc.stdout.split() == ["v1.2.3"]
    proc = invoke(repo, "fetch", "--version", "v1.2.3", "--platform", "rocm", "--arch", "gfx942", "--dest", "got",
                  "--store", store, env=env)
    assert proc.returncode == 0, proc.stdout
    assert not same_bytes(repo / "got", repo / "dist/rocm/gfx942")


# --- keygen, signed publish, fetch --trust, lock, fetch --lock, yank, gc -----------------------------------------


def test_signed_locked_yanked_and_collected_through_invoke(repo_with_dist):
    """The README's release recipe as typed, on invoke.yaml's default store."""
    repo, env = repo_with_dist
    run = lambda *args: invoke(repo, *args, env=env)
    proc = run("keygen")
    assert proc.returncode == 0 and "tritonforge-signing.key" in proc.stdout, proc.stdout
    assert run("keygen").returncode == 1  # never overwrites a key
    proc = run("publish", "--version", "1.0.0", "--sign-key", "tritonforge-signing.key", "--manifest-out", "m.json")
    assert proc.returncode == 0 and "(signed)" in proc.stdout, proc.stdout
    assert (repo / "m.json.sig").is_file()
    proc = run("fetch", "--version", "1.0.0", "--platform", "cuda", "--arch", "multi", "--dest", "got",
               "--trust", "tritonforge-signing.pub")
    assert proc.returncode == 0 and "signed by trusted key" in proc.stdout, proc.stdout
    assert not same_bytes(repo / "got", repo / "dist/cuda/multi")
    assert run("publish", "--version", "2.0.0").returncode == 0  # unsigned
    proc = run("fetch", "--version", "2.0.0", "--platform", "cuda", "--arch", "sm_90", "--dest", "got",
               "--trust", "tritonforge-signing.pub")
    assert proc.returncode == 1 and "unsigned" in proc.stdout and "Traceback" not in proc.stdout
    assert not same_bytes(repo / "got", repo / "dist/cuda/multi")  # the earlier fetch, untouched

    proc = run("lock", "--version", "latest", "--platform", "rocm", "--arch", "gfx942")
    assert proc.returncode == 0 and "of 2.0.0" in proc.stdout, proc.stdout
    proc = run("fetch", "--lock", "tritonforge.lock", "--dest", "locked")
    assert proc.returncode == 0, proc.stdout
    assert not same_bytes(repo / "locked", repo / "dist/rocm/gfx942")
    proc = run("fetch", "--lock", "tritonforge.lock", "--dest", "locked", "--version", "1.0.0")
    assert proc.returncode == 2 and "--lock names the version" in proc.stdout

    proc = run("yank", "--version", "2.0.0", "--reason", "wrong tune cache")
    assert proc.returncode == 0, proc.stdout
    assert run("versions").stdout.splitlines() == ["1.0.0", "2.0.0  yanked: wrong tune cache"]
    proc = run("fetch", "--version", "latest", "--platform", "rocm", "--arch", "gfx942", "--dest", "newest")
    assert proc.returncode == 0 and "version 1.0.0" not in proc.stdout, proc.stdout
    assert json.loads((repo / "newest/release.json").read_text())["version"] == "1.0.0"  # 2.0.0 skipped
    proc = run("fetch", "--lock", "tritonforge.lock", "--dest", "locked")
    assert proc.returncode == 0 and "warning: version 2.0.0 is yanked" in proc.stdout, proc.stdout

    stray = repo / "artifacts/blobs/sha256" / ("0" * 64)  # a blob no manifest names
    stray.write_bytes(b"left by a killed publish")
    proc = run("gc", "--dry-run", "--grace", "0")
    assert proc.returncode == 0 and f"would delete blobs/sha256/{'0' * 64}" in proc.stdout and stray.exists()
    proc = run("gc", "--grace", "0")
    assert proc.returncode == 0 and "deleted 1 unreferenced" in proc.stdout and not stray.exists(), proc.stdout
    for version, dest in (("1.0.0", "after-gc-1"), ("2.0.0", "after-gc-2")):
        assert run("fetch", "--version", version, "--platform", "cuda", "--arch", "sm_80", "--dest",
                   dest).returncode == 0


# --- GPU tasks on a machine without a GPU, lint, help ------------------------------------------------------------


def test_gpu_tasks_say_what_is_wrong_without_a_gpu(repo_with_dist):
    from tritonforge.pipeline.builds.runners import gpu_unavailable

    repo, env = repo_with_dist
    usage = [(["tune", "--platform", "rocm"], "tuning runs on CUDA GPUs only for now, not 'rocm'"),
             (["bench", "--op", "layer_norm"], "--op must be one of ['group_norm', 'softmax'], not 'layer_norm'"),
             (["bench", "--model", "sd3"], "--model: unknown model 'sd3': choose from all, sd15_unet"),
             (["bench", "--e2e", "sd3_unet"], "--e2e: unknown model(s) sd3_unet; known: sd15_vae_decoder, "),
             (["bench", "--e2e", "mine.onnx"], "--e2e: mine.onnx: no such model"),
             (["gpu-test", "--platform", "metal"], "--platform must be one of cuda, rocm, not 'metal'"),
             (["gpu-test", "--platform", "cuda", "--dist", "nowhere"], "no cuda artifacts under nowhere/cuda")]
    for args, message in usage:
        proc = invoke(repo, *args, env=env)
        assert proc.returncode == 2 and message in proc.stdout, (args, proc.stdout)
    if gpu_unavailable("cuda") is None:
        pytest.skip("this machine has an NVIDIA GPU: the no-GPU errors cannot be seen here")
    for args in (["tune", "--platform", "cuda"], ["bench", "--quick"], ["bench", "--op", "group_norm"],
                 ["bench", "--model", "sd15_unet"], ["bench", "--e2e", "sd15_vae_decoder"],
                 ["gpu-test", "--platform", "cuda"]):
        proc = invoke(repo, *args, env=env)
        assert proc.returncode == 1, (args, proc.stdout)
        assert f"invoke {args[0]} runs on a GPU runner: this machine has no usable NVIDIA GPU" in proc.stdout
        assert "Traceback" not in proc.stdout
    proc = invoke(repo, "gpu-test", "--platform", "rocm", env=env)
    assert proc.returncode == 1 and "no ROCm GPU (/dev/kfd does not exist)" in proc.stdout


def test_lint_is_clean(repo):
    proc = invoke(repo[0], "lint")
    assert proc.returncode == 0, proc.stdout


def test_every_task_has_help(repo):
    proc = invoke(repo[0], "--list", "--list-format", "json")
    assert proc.returncode == 0
    listed = json.loads(proc.stdout)["tasks"]
    assert all(t["help"] for t in listed)
    tasks = [t["name"] for t in listed]
    assert {"build", "compile", "check", "merge", "image", "base-image", "gpu-test", "tune", "bench", "publish",
            "fetch", "versions", "lint", "keygen", "lock", "yank", "gc"} <= set(tasks)
    for name in tasks:
        proc = invoke(repo[0], "--help", name)
        assert proc.returncode == 0 and f"Usage: inv[oke] [--core-opts] {name}" in proc.stdout, name
        proc = invoke(repo[0], name, "--help")
        assert proc.returncode == 0 and f"Usage: inv[oke] [--core-opts] {name}" in proc.stdout, name


@pytest.mark.parametrize("args, missing", [(["publish"], "--version"), (["fetch", "--version", "1.0"], "--dest"),
                                           (["lock", "--version", "1.0"], "--platform, --arch"),
                                           (["yank", "--version", "1.0"], "--reason"), (["rewrite"], "--model"),
                                           (["check"], "--path")])
def test_missing_flags_are_named(repo, args, missing):
    proc = invoke(repo[0], *args)
    assert proc.returncode == 2 and f"error: {args[0]} needs {missing}" in proc.stdout, proc.stdout


RUN_REWRITTEN = """
import numpy as np, onnxruntime as ort
from tritonforge.runtime import ortlib
so = ort.SessionOptions()
print("library", ortlib.register(so))
s = ort.InferenceSession("block.tf.onnx", so, providers=["CPUExecutionProvider"])
x = np.random.default_rng(0).standard_normal((2, 8, 5, 6)).astype(np.float32)
y = s.run(None, {"x": x})[0]
print("rows sum to", float(y.sum(-1).mean()))
"""


RUN_WHEEL = """
import numpy as np, onnxruntime as ort, tritonforge_ort
so = ort.SessionOptions()
tritonforge_ort.register(so)
ours = ort.InferenceSession("vae_decoder.tf.onnx", so, providers=["CPUExecutionProvider"])
theirs = ort.InferenceSession("vae_decoder.onnx", providers=["CPUExecutionProvider"])
x = np.random.default_rng(0).standard_normal(theirs.get_inputs()[0].shape).astype(np.float16)
a, b = (s.run(None, {"latent": x})[0].astype(np.float64) for s in (ours, theirs))
print(float(np.abs(a - b).max() / np.abs(b).max()))
"""


def test_ortlib_rewrite_run_and_publish_the_library_through_invoke(repo_with_dist, index_server):
    """The README's three lines for ONNX Runtime users (build the library, rewrite, run), then the library
    published and fetched with its build, and as a wheel: in the release (fetched and verified) and on a
    package index, from which a fresh venv (no checkout, no tritonforge) installs it, rewrites an export
    with `tritonforge-rewrite` and runs it on onnxruntime's CPU EP as the export runs."""
    import subprocess
    import sys

    onnx = pytest.importorskip("onnx", reason="the rewrite edits ONNX models")
    from .runtime.ortlib.rewrite.test_rewrite import sd_block

    repo, env = repo_with_dist
    # a GPU runner's tune cache (invoke tune) for the sm_90 archive: two choices, one of a kernel the build lacks
    sm90 = json.loads((repo / "dist/full/cuda/sm_90/kernels.json").read_text())
    softmax = next(k["name"] for k in sm90["kernels"] if k["group"] == "softmax_fp16")
    cache = repo / "tune/cuda/sm_90/NVIDIA_H200.json"
    cache.parent.mkdir(parents=True)
    cache.write_text(json.dumps({"schema": "tritonforge.tune/1", "validators": {
        "triton_version": sm90["triton_version"], "target": "sm_90", "archive_sha256": sm90["archive"]["sha256"],
        "device_model": "NVIDIA H200"}, "results": {"softmax_fp16": {
            "512_77": {"kernel": softmax}, "8_4096": {"kernel": "softmax_gone_fp16"}}}}))
    proc = invoke(repo, "ortlib", env=env)  # default: dist/full/cuda/multi, and the choices of tune/
    assert proc.returncode == 0, proc.stdout
    lib = repo / "dist/full/cuda/multi/libtritonforge_ort.so"
    assert f"{lib.relative_to(repo)}: " in proc.stdout and "loads in onnxruntime" in proc.stdout and lib.is_file()
    tuned = lib.with_suffix(".tune")
    assert "1 choices name kernels this build does not hold" in proc.stdout
    assert f"{tuned.relative_to(repo)}: 1 kernel choices from the tune caches" in proc.stdout
    assert tuned.read_text().splitlines()[1:] == [f"NVIDIA H200\tsoftmax_fp16\t512_77\t{softmax}"]
    seen = subprocess.run([sys.executable, "-c", "import json, sys; from tritonforge.runtime import ortlib; "
                           "print(json.dumps(ortlib.info(sys.argv[1])))", str(lib)], cwd=repo, capture_output=True,
                          text=True, timeout=60)
    assert json.loads(seen.stdout)["tune_choices"] == 1, seen.stderr  # the library found its .tune beside it
    assert json.loads(seen.stdout)["tune_file"] == str(tuned.resolve())
    onnx.save(sd_block(21), str(repo / "block.onnx"))
    proc = invoke(repo, "rewrite", "--model", "block.onnx", env=env)
    assert proc.returncode == 0, proc.stdout
    assert "GroupNormalization: 1 node(s) -> tritonforge.GroupNormalization" in proc.stdout
    assert "SiLU fused into 1" in proc.stdout and "wrote block.tf.onnx" in proc.stdout
    assert "left as is: Softmax node 'across': axis 1 is not the last of rank 4" in proc.stdout
    assert "left as is: Softmax node 'attn': rows of 6: shorter than every row length measured" in proc.stdout
    proc = invoke(repo, "rewrite", "--model", "block.onnx", "--out", "all.onnx", "--all-softmax", env=env)
    assert proc.returncode == 0 and "Softmax: 1 node(s) -> tritonforge.Softmax" in proc.stdout, proc.stdout
    run = subprocess.run([str(repo / ".venv/bin/python") if (repo / ".venv").exists() else sys.executable, "-c",
                          RUN_REWRITTEN], cwd=repo, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "library " + str(lib.resolve()) in run.stdout and "rows sum to 1.0" in run.stdout
    # the README's lines on a torch.onnx (dynamo) export, whose weights are external data
    export = onnx.load(str(ROOT / "tests/runtime/ortlib/rewrite/exports/sd15_vae_decoder_tiny.dynamo.fp16.onnx"))
    onnx.save(export, str(repo / "vae_decoder.onnx"), save_as_external_data=True, location="vae_decoder.onnx.data")
    proc = invoke(repo, "rewrite", "--model", "vae_decoder.onnx", env=env)
    assert proc.returncode == 0, proc.stdout
    assert "from 14 InstanceNormalization pattern" in proc.stdout and "SiLU fused into 13" in proc.stdout
    assert "wrote vae_decoder.tf.onnx.data and vae_decoder.tf.onnx" in proc.stdout, proc.stdout
    run = subprocess.run(readme_lines("--model vae_decoder.onnx", repo)[-1], shell=True, cwd=repo,
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-3000:]
    for args, says in ((["rewrite", "--model", "nothing.onnx"], "nothing.onnx: cannot read an ONNX model"),
                       (["ortlib", "--dist", "dist/rocm/multi"], "the ORT library is CUDA only"),
                       (["ortlib", "--dist", "nowhere"], "nowhere/kernels.json: missing")):
        proc = invoke(repo, *args, env=env)
        assert proc.returncode == 1 and says in proc.stdout and "Traceback" not in proc.stdout, proc.stdout
    proc = invoke(repo, "wheel", "--version", "5.0.0", env=env)  # default: dist/full/cuda/multi's library
    assert proc.returncode == 0, proc.stdout
    built_wheel = next((repo / "dist/wheels").glob("tritonforge_ort-5.0.0-py3-none-manylinux_2_*_x86_64.whl"))
    proc = invoke(repo, "publish", "--version", "5.0.0", "--profile", "full", "--index", index_server["url"], env=env)
    assert proc.returncode == 0, proc.stdout
    assert f"uploaded {built_wheel.name}" in proc.stdout
    proc = invoke(repo, "fetch", "--version", "5.0.0", "--platform", "cuda", "--arch", "multi", "--profile", "full",
                  "--dest", "got", env=env)
    assert proc.returncode == 0, proc.stdout
    assert (repo / "got/libtritonforge_ort.so").read_bytes() == lib.read_bytes()
    assert (repo / "got/libtritonforge_ort.tune").read_bytes() == tuned.read_bytes()
    proc = invoke(repo, "fetch", "--version", "5.0.0", "--wheel", "--dest", "wheels", env=env)
    assert proc.returncode == 0 and (repo / "wheels" / built_wheel.name).read_bytes() == built_wheel.read_bytes()
    # a user's machine: a fresh venv, then the README's first three lines as typed (the wheel from the index,
    # an export rewritten, a session on it); its dependencies (onnx, numpy) are already there
    user = repo.parent / "user"
    user.mkdir()
    python = fresh_venv(user / "venv")
    export = onnx.load(str(ROOT / "tests/runtime/ortlib/rewrite/exports/sd15_vae_decoder_tiny.dynamo.fp16.onnx"))
    onnx.save(export, str(user / "vae_decoder.onnx"), save_as_external_data=True, location="vae_decoder.onnx.data")
    user_env = {**os.environ, "PATH": f"{user / 'venv/bin'}:{os.environ['PATH']}", "TRITONFORGE_INDEX":
                index_server["simple"]}
    said = []
    for line in readme_lines("tritonforge-rewrite vae_decoder.onnx"):
        step = subprocess.run(line, shell=True, cwd=user, env=user_env, capture_output=True, text=True, timeout=300)
        assert step.returncode == 0, (line, step.stdout, step.stderr[-2000:])
        said.append(step.stdout)
    assert "from 14 InstanceNormalization pattern" in said[1]
    assert "wrote vae_decoder.tf.onnx.data and vae_decoder.tf.onnx" in said[1]
    probe = subprocess.run([str(python), "-c", "import sys, time; t = time.perf_counter(); import tritonforge_ort; "
                            "print(time.perf_counter() - t, *sorted(m for m in ('onnxruntime', 'numpy', 'onnx', "
                            "'tritonforge') if m in sys.modules))"], capture_output=True, text=True, cwd=user)
    assert probe.returncode == 0 and float(probe.stdout.split()[0]) < 0.2 and len(probe.stdout.split()) == 1, probe
    run = subprocess.run([str(python), "-c", RUN_WHEEL], capture_output=True, text=True, cwd=user, timeout=120)
    assert run.returncode == 0 and float(run.stdout) < 2e-2, run.stderr[-2000:]
    proc = invoke(repo, "publish", "--version", "5.0.0", "--profile", "full", "--index", index_server["url"], env=env)
    assert proc.returncode == 0 and "already there, identical" in proc.stdout, proc.stdout
