"""ORT-style C++ consumer: include the header, link the archive --whole-archive, dlsym every kernel."""

from __future__ import annotations

import pytest

from pipeline.consumer_check import check_artifacts
from pipeline.errors import PipelineError

from ..conftest import require_tool


@pytest.mark.parametrize("sub", ["cuda/sm_90", "rocm/gfx942"])
def test_consumer_resolves_every_kernel(built, sub):
    require_tool("g++", "builds the C++ consumer")
    _, out, _ = built
    import json

    result = check_artifacts(out / sub)
    n = len(json.loads((out / sub / "kernels.json").read_text())["kernels"])
    assert result.kernels == n > 0
    assert f"checked {n} kernels, 0 failures" in result.program_output
    machine = "190" if sub.startswith("cuda") else "224"
    assert all(f"machine={machine}" in line for line in result.program_output.splitlines()
               if line.startswith("OK"))
    assert "executable stack" not in result.link_output
    assert result.stack_flags == "RW"


def test_consumer_catches_a_blob_that_differs_from_the_manifest(built, tmp_path):
    import json
    import shutil

    _, out, _ = built
    d = tmp_path / "a"
    shutil.copytree(out / "cuda/sm_90", d)
    doc = json.loads((d / "kernels.json").read_text())
    doc["kernels"][3]["binary"]["sha256"] = "0" * 64
    (d / "kernels.json").write_text(json.dumps(doc))
    with pytest.raises(PipelineError, match=doc["kernels"][3]["name"]):
        check_artifacts(d)
