"""Replacing files and directories so that a reader sees the old one or the new one, never a half.

A file is written under a temporary name beside its destination (same file system), then renamed
over it; a set of files is copied beside each destination first and renamed only when every copy is
done; a directory is built elsewhere on the same file system, the old one moved aside, the new one
renamed into its place and the old one removed. A failure leaves the destination as it was and no
temporary file behind. Used by the pipeline (build outputs, lock files, fetched releases, image
records, the compile cache, the file store) and the runtime (tune caches).
"""

from __future__ import annotations

import os
import shutil
import uuid
from pathlib import Path


def _beside(path: Path) -> Path:
    """A fresh temporary name in `path`'s directory (created with the usual permissions, not mkstemp's 0600)."""
    return path.with_name(f".{path.name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:12]}")


def write_bytes(path: Path | str, data: bytes) -> Path:
    """`data` at `path`, by a temporary file beside it renamed over it; parent directories made."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = _beside(path)
    try:
        with open(tmp, "xb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


def write_text(path: Path | str, text: str) -> Path:
    return write_bytes(path, text.encode())


def install_files(pairs: list[tuple[Path, Path]]) -> None:
    """Copy each (source, destination) beside its destination, then rename them all into place: the
    destinations change only once every copy has succeeded (they may lie on other file systems)."""
    staged = []
    try:
        for src, dest in pairs:
            dest = Path(dest)
            dest.parent.mkdir(parents=True, exist_ok=True)
            part = _beside(dest)
            staged.append((part, dest))
            shutil.copyfile(src, part)
        for part, dest in staged:
            os.replace(part, dest)
    finally:
        for part, _ in staged:
            part.unlink(missing_ok=True)


def replace_dir(new: Path | str, dest: Path | str, aside: Path | str | None = None) -> Path:
    """Rename directory `new` to `dest`, the old `dest` (if any) moved aside first and then removed.
    `aside`: where the old one goes (default beside `dest`); both must be on `dest`'s file system."""
    new, dest = Path(new), Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    old = Path(aside) if aside is not None else dest.parent / f".{dest.name}.old-{os.getpid()}"
    moved = dest.exists()
    if moved:
        os.replace(dest, old)
    try:
        os.replace(new, dest)
    except BaseException:
        if moved:
            os.replace(old, dest)
        raise
    if moved:
        shutil.rmtree(old, ignore_errors=True)
    return dest
