"""One build directory's three files: the blobs wrapped and archived in order, the header, and kernels.json
with both files' digests; the objects' scratch directory does not stay."""

from __future__ import annotations

import hashlib
import subprocess

from tritonforge.pipeline.package.outputs import package

from ...conftest import require_tool


def test_a_build_directory_is_archive_header_and_manifest(built, tmp_path):
    require_tool("ar", "lists the archive")
    src = built[1] / "cuda" / "sm_90"
    import json

    doc = json.loads((src / "kernels.json").read_text())
    kernels = doc["kernels"][:3]
    blobs = [(k["name"], "cubin", f"blob of {k['name']}".encode()) for k in kernels]
    paths = package(tmp_path, blobs, kernels, "x86_64",
                    lambda archive, header: {"archive": archive, "header": header, "kernels": kernels})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kernels.json", "triton_kernel_infos.a",
                                                          "triton_kernel_infos.h"]
    members = subprocess.run(["ar", "t", str(paths["archive"])], capture_output=True, text=True, check=True).stdout
    assert members.split() == [f"{k['name']}.o" for k in kernels]
    written = json.loads(paths["manifest"].read_text())
    for part in ("archive", "header"):
        data = paths[part].read_bytes()
        assert written[part]["sha256"] == hashlib.sha256(data).hexdigest() and written[part]["size"] == len(data)
    assert all(k["name"] in paths["header"].read_text() for k in kernels)
