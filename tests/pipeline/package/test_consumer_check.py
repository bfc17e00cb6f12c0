"""ORT-style C++ consumer: include the header, link the archive --whole-archive, dlsym every kernel."""

from __future__ import annotations

import json
import re
import shutil

import pytest
from tritonforge.pipeline.errors import PipelineError
from tritonforge.pipeline.package.consumer_check import check_artifacts

from ...conftest import require_tool


@pytest.fixture
def cxx():
    return require_tool("g++", "builds the C++ consumer")


@pytest.mark.parametrize("sub", ["cuda/sm_80", "cuda/sm_90", "rocm/gfx942"])
def test_consumer_resolves_every_kernel(cxx, built, sub):
    _, out, _ = built
    doc = json.loads((out / sub / "kernels.json").read_text())
    header_entries = len(re.findall(r'\{ "_binary_', (out / sub / "triton_kernel_infos.h").read_text()))
    result = check_artifacts(out / sub)
    # Counted on the C++ side: the kernel_infos[] entries it resolved through dlsym and wrote out.
    assert result.kernels == header_entries == len(doc["kernels"]) > 0
    assert f"checked {header_entries} kernels, 0 failures" in result.program_output
    machine = "190" if sub.startswith("cuda") else "224"
    ok_lines = [line for line in result.program_output.splitlines() if line.startswith("OK")]
    assert len(ok_lines) == header_entries and all(f"machine={machine}" in line for line in ok_lines)
    assert "executable stack" not in result.link_output
    assert result.stack_flags == "RW"


@pytest.fixture
def copy(built, tmp_path):
    d = tmp_path / "a"
    shutil.copytree(built[1] / "cuda/sm_90", d)
    return d


def edit_manifest(d, change):
    doc = json.loads((d / "kernels.json").read_text())
    change(doc)
    (d / "kernels.json").write_text(json.dumps(doc))
    return doc


def test_a_blob_that_differs_from_the_manifest_is_named(cxx, copy):
    doc = edit_manifest(copy, lambda doc: doc["kernels"][3]["binary"].update(sha256="0" * 64))
    with pytest.raises(PipelineError, match=doc["kernels"][3]["name"]):
        check_artifacts(copy)


def test_header_fields_that_differ_from_the_manifest_are_named(cxx, copy):
    doc = edit_manifest(copy, lambda doc: doc["kernels"][5].update(shared=doc["kernels"][5]["shared"] + 16))
    with pytest.raises(PipelineError, match=doc["kernels"][5]["name"]):
        check_artifacts(copy)


def test_a_kernel_missing_from_the_header_is_caught(cxx, copy):
    edit_manifest(copy, lambda doc: doc["kernels"].append(dict(doc["kernels"][0], name="not_in_the_header")))
    with pytest.raises(PipelineError, match="the header lists .* kernels and kernels.json"):
        check_artifacts(copy)


def test_not_an_artifact_directory(cxx, tmp_path):
    with pytest.raises(PipelineError, match="not an artifact directory .*kernels.json"):
        check_artifacts(tmp_path)
