"""The runtime finds each blob in the archive by the header's symbol and verifies it (CPU)."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest
from tritonforge.runtime import ArtifactError, load_artifacts, read_archive_symbols


@pytest.mark.parametrize("sub", ["cuda/sm_90", "rocm/gfx942"])
def test_blobs_match_binutils_extraction(built, tmp_path, sub):
    _, out, _ = built
    archive = out / sub / "triton_kernel_infos.a"
    symbols = read_archive_symbols(archive)
    doc = json.loads((out / sub / "kernels.json").read_text())
    assert set(symbols) == {k["symbol"] for k in doc["kernels"]}
    for k in doc["kernels"][::40]:
        member = f"{k['name']}.o"
        subprocess.run(["ar", "x", str(archive), member], cwd=tmp_path, check=True)
        subprocess.run(["objcopy", "-O", "binary", "--only-section=.rodata", member, "blob"], cwd=tmp_path, check=True)
        assert (tmp_path / "blob").read_bytes() == symbols[k["symbol"]]


def test_load_verifies_hashes(built, tmp_path):
    _, out, _ = built
    arts = load_artifacts(out / "cuda/sm_90")
    assert len(arts.kernels) == len(arts.blobs) == len(arts.manifest["kernels"]) > 0
    assert arts.contract("softmax_fp16")["params"][0] == "out"

    d = tmp_path / "a"
    shutil.copytree(out / "cuda/sm_90", d)
    doc = json.loads((d / "kernels.json").read_text())
    victim = doc["kernels"][7]
    victim["binary"]["sha256"] = "f" * 64
    (d / "kernels.json").write_text(json.dumps(doc))
    with pytest.raises(ArtifactError, match=f"kernel {victim['name']}: blob sha256 differs"):
        load_artifacts(d)

    data = bytearray((out / "cuda/sm_90/triton_kernel_infos.a").read_bytes())
    data[5000] ^= 0xFF
    (d / "triton_kernel_infos.a").write_bytes(bytes(data))
    with pytest.raises(ArtifactError, match="triton_kernel_infos.a: sha256 differs"):
        load_artifacts(d)


def test_missing_manifest_is_named(tmp_path):
    with pytest.raises(ArtifactError, match="kernels.json: not found"):
        load_artifacts(tmp_path)
