"""Multi-arch blobs that `cuModuleLoadData` / `hipModuleLoadData` accept, and the tools that list them.

- CUDA: a fatbin made by NVIDIA's nvfatbin library (`cuda.bindings.nvfatbin`, library from the
  `nvidia-nvfatbin` wheel): one cubin per arch, plus PTX that a GPU newer than every cubin JIT-compiles.
  The driver loads the cubin made for the device's arch and falls back to the PTX.
- ROCm: a clang offload bundle, written here in the documented layout (what `clang-offload-bundler
  -type=o -bundle-align=4096` writes, the form hipcc gives `hipModuleLoadData`): a 24-byte magic, the
  entry count, then (offset, size, id length, id) per entry, each code object aligned to 4096 bytes.
  An empty host entry comes first, as the bundler requires one.
"""

from __future__ import annotations

import re
import shutil
import struct
import subprocess
from pathlib import Path

from tritonforge.pipeline.errors import PipelineError

BUNDLE_MAGIC = b"__CLANG_OFFLOAD_BUNDLE__"
BUNDLE_ALIGN = 4096
FATBIN_MAGIC = bytes.fromhex("50ed55ba")  # 0xBA55ED50, little-endian
HOST_TRIPLES = {"x86_64": "host-x86_64-unknown-linux-gnu-", "aarch64": "host-aarch64-unknown-linux-gnu-"}


def hip_bundle_id(gfx: str) -> str:
    return f"hipv4-amdgcn-amd-amdhsa--{gfx}"


def offload_bundle(code_objects: list[tuple[str, bytes]], host: str = "x86_64") -> bytes:
    """[(gfx arch, code object)] -> one bundle, entries in the given order after the host's."""
    entries = [(HOST_TRIPLES[host], b"")] + [(hip_bundle_id(gfx), data) for gfx, data in code_objects]
    head = bytearray(BUNDLE_MAGIC + struct.pack("<Q", len(entries)))
    size = len(head) + sum(24 + len(ident) for ident, _ in entries)
    offsets = []
    for _ident, data in entries:
        size = -(-size // BUNDLE_ALIGN) * BUNDLE_ALIGN
        offsets.append(size)
        size += len(data)
    for (ident, data), offset in zip(entries, offsets):
        head += struct.pack("<QQQ", offset, len(data), len(ident)) + ident.encode()
    out = bytearray(size)
    out[:len(head)] = head
    for (_ident, data), offset in zip(entries, offsets):
        out[offset:offset + len(data)] = data
    return bytes(out)


def fatbin(name: str, cubins: list[tuple[str, bytes]], ptx: list[tuple[str, str]]) -> bytes:
    """[(arch as in sm_80 / sm_90a, cubin)] and [(arch, text)] of PTX -> one fatbin (nvfatbin's defaults:
    PTX compressed, cubins as they are)."""
    try:
        from cuda.bindings import nvfatbin
    except ImportError as exc:
        raise PipelineError(f"writing fatbins needs cuda-python's nvfatbin binding ({exc}); "
                            "pip install cuda-python nvidia-nvfatbin") from None
    try:
        handle = nvfatbin.create([], 0)
    except Exception as exc:  # the binding is there, the library is not
        raise PipelineError(f"nvfatbin is not usable ({type(exc).__name__}: {exc}); "
                            "pip install nvidia-nvfatbin") from None
    try:
        for arch, data in cubins:
            nvfatbin.add_cubin(handle, data, len(data), arch.removeprefix("sm_"), name)
        for arch, source in ptx:
            text = source.encode() + b"\0"
            nvfatbin.add_ptx(handle, text, len(text), arch.removeprefix("sm_"), name, "")
        buf = bytearray(nvfatbin.size(handle))
        nvfatbin.get(handle, buf)
    except nvfatbin.nvFatbinError as exc:
        raise PipelineError(f"nvfatbin refused kernel {name}: {exc}") from None
    finally:
        nvfatbin.destroy(handle)
    return bytes(buf)


def _tool(names: list[str], hint: str) -> str:
    for name in names:
        path = shutil.which(name) or (name if Path(name).is_file() else None)
        if path:
            return path
    raise PipelineError(f"'{Path(names[0]).name}' not found ({hint})")


def cuobjdump() -> str:
    """cuobjdump from the CUDA toolkit on PATH, else the one the Triton wheel ships."""
    names = ["cuobjdump"]
    try:
        import triton

        names.append(str(Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"))
    except ImportError:
        pass
    return _tool(names, "install the CUDA toolkit or the pinned triton, which ships it")


def clang_offload_bundler() -> str:
    return _tool(["clang-offload-bundler", "clang-offload-bundler-19", "/usr/lib/llvm-19/bin/clang-offload-bundler"],
                 "apt-get install clang-tools-19, or run scripts/setup")


def _listing(argv: list[str], what: str) -> str:
    proc = subprocess.run(argv, capture_output=True, text=True)
    if proc.returncode:
        raise PipelineError(f"{' '.join(argv)} failed for {what}: {(proc.stderr or proc.stdout).strip()}")
    return proc.stdout


def list_fatbin(path: Path, what: str) -> list[str]:
    """What the fatbin holds, as cuobjdump lists it: `cubin:sm_80`, `cubin:sm_90a`, `ptx:sm_90`."""
    tool = cuobjdump()
    found = []
    for kind, flag in (("cubin", "--list-elf"), ("ptx", "--list-ptx")):
        out = _listing([tool, flag, str(path)], what)
        found += [f"{kind}:{m}" for m in re.findall(r"\.(sm_\d+a?)\.(?:cubin|ptx)\s*$", out, re.M)]
    return found


def list_bundle(path: Path, what: str) -> list[str]:
    """The device entries of an offload bundle, as clang-offload-bundler lists them: `hsaco:gfx942`."""
    out = _listing([clang_offload_bundler(), "-list", "-type=o", f"-input={path}"], what)
    return [f"hsaco:{line.split('--', 1)[1]}" for line in out.split() if line.startswith("hipv4-")]
