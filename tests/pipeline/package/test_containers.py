"""Inspect the shipped binaries with real GPU tools: the cuobjdump/nvdisasm inside the triton wheel for
cubins, LLVM 19 for hsaco. Binaries are cut back out of the archive, so this checks what ships."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from ...conftest import IN_CI, require_tool


def extract(archive: Path, member: str, dest: Path) -> Path:
    subprocess.run(["ar", "x", str(archive), member], cwd=dest, check=True)
    blob = dest / (member[:-2] + ".bin")
    subprocess.run(["objcopy", "-O", "binary", "--only-section=.rodata", member, blob.name], cwd=dest, check=True)
    return blob


def nvidia_tool(name):
    import triton

    path = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / name
    if not path.exists():
        pytest.fail(f"the triton wheel ships no {name} at {path}")
    return str(path)


def first_of(d, group: str, func: str = "softmax_kernel") -> str:
    """The archive member of the first kernel of `group` made from the jit function `func` in the artifact
    directory d."""
    kernels = json.loads((d / "kernels.json").read_text())["kernels"]
    return next(k["name"] for k in kernels if k["group"] == group and k["func_name"] == func) + ".o"


def test_cubin_arch_matches(built, tmp_path):
    _, out, _ = built
    d = out / "cuda/sm_90"
    blob = extract(d / "triton_kernel_infos.a", first_of(d, "softmax_fp16"), tmp_path)
    listing = subprocess.run([nvidia_tool("cuobjdump"), "-elf", str(blob)], capture_output=True, text=True,
                             check=True).stdout
    assert "sm=90a" in listing
    sass = subprocess.run([nvidia_tool("nvdisasm"), "-c", str(blob)], capture_output=True, text=True,
                          check=True).stdout
    assert re.search(r"^\s*\.target\s+sm_90a$", sass, re.M) and ".text.softmax_kernel" in sass


def llvm19(tool):
    path = Path("/usr/lib/llvm-19/bin") / tool
    if not path.exists():
        if IN_CI:
            pytest.fail(f"{path} missing in CI (apt-get install llvm-19)")
        pytest.skip(f"{path} not installed (apt-get install llvm-19)")
    return str(path)


def test_hsaco_arch_matches(built, tmp_path):
    require_tool("objcopy", "extracts blobs")
    _, out, _ = built
    d = out / "rocm/gfx942"
    blob = extract(d / "triton_kernel_infos.a", first_of(d, "softmax_fp16"), tmp_path)
    header = subprocess.run([llvm19("llvm-readelf"), "-h", "--notes", str(blob)], capture_output=True, text=True,
                            check=True).stdout
    assert "EM_AMDGPU" in header and "gfx942" in header
    assert re.search(r"^amdhsa\.target:\s+\S+-amd-amdhsa-\S*gfx942$", header, re.M)  # the note's target ID
    dis = subprocess.run([llvm19("llvm-objdump"), "-d", str(blob)], capture_output=True, text=True,
                         check=True).stdout
    assert "<softmax_kernel>:" in dis and "s_endpgm" in dis
