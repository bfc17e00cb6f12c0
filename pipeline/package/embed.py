"""Wrap each binary into an ELF relocatable with GNU objcopy, and archive them with ar.

objcopy names the symbols after the input file *as given on its command line*, so it runs inside the
output directory with a bare `<name>.<ext>`: that yields `_binary_<name>_<ext>_start` / `_end` /
`_size`, exactly what ORT's header spells. Unlike ORT's script we move the blob to read-only data and
add an empty `.note.GNU-stack`, so linking the archive never asks for an executable stack.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from tritonforge.pipeline.errors import PipelineError

# BFD output format and architecture of the *host* the archive is linked into (ORT's .so).
HOST_BFD = {
    "x86_64": ("elf64-x86-64", "i386:x86-64"),
    "aarch64": ("elf64-littleaarch64", "aarch64"),
}


def symbol_base(name: str, ext: str) -> str:
    return f"_binary_{name}_{ext}"


def tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise PipelineError(f"'{name}' not found on PATH (install GNU binutils)")
    return path


def _run(argv: list[str], cwd: Path, what: str) -> None:
    try:
        subprocess.run(argv, cwd=cwd, check=True, capture_output=True, text=True)
    except subprocess.CalledProcessError as exc:
        raise PipelineError(f"{what} failed: {' '.join(argv)}: {exc.stderr.strip()}") from None
    except OSError as exc:
        raise PipelineError(f"{what} failed: {' '.join(argv)}: {exc}") from None


def binary_to_object(binary_file: str, out_dir: Path, host: str = "x86_64") -> str:
    """`<name>.<ext>` in out_dir -> `<name>.o` in out_dir; returns the object's file name."""
    if host not in HOST_BFD:
        raise PipelineError(f"unknown host architecture '{host}' (known: {', '.join(HOST_BFD)})")
    fmt, arch = HOST_BFD[host]
    stem = binary_file.rsplit(".", 1)[0]
    obj = f"{stem}.o"
    empty = out_dir / ".empty"
    empty.touch()
    _run([tool("objcopy"), "-I", "binary", "-O", fmt, "-B", arch,
          "--rename-section", ".data=.rodata,alloc,load,readonly,data,contents",
          "--set-section-alignment", ".data=16",  # applies to the input section name
          "--add-section", f".note.GNU-stack={empty.name}",
          "--set-section-flags", ".note.GNU-stack=readonly",
          binary_file, obj], out_dir, f"objcopy of {binary_file}")
    empty.unlink()
    if not (out_dir / obj).is_file():
        raise PipelineError(f"objcopy did not create {out_dir / obj}")
    return obj


def archive(objects: list[str], out_dir: Path, archive_name: str) -> Path:
    """`ar rcsD` (deterministic: zero timestamps and ids), members in the given order."""
    target = out_dir / archive_name
    if target.exists():
        target.unlink()
    _run([tool("ar"), "rcsD", archive_name, *objects], out_dir, f"ar of {archive_name}")
    return target
