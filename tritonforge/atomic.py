"""Replacing files and directories so that a reader sees the old one or the new one, never a half.

A file is written under a temporary name beside its destination (same file system), then renamed
over it; a set of files is copied beside each destination first and renamed only when every copy is
done; a directory is built elsewhere on the same file system, the old one moved aside, the new one
renamed into its place and the old one removed. A failure leaves the destination as it was and no
temporary file behind. Used by the pipeline (build outputs, lock files, fetched releases, image
records, the compile cache, the file store) and the runtime (tune caches).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path


def _beside(path: Path) -> Path:
    """A fresh temporary name in `path`'s directory (created with the usual permissions, not mkstemp's 0600)."""
    return path.with_name(f".{path.name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:12]}")


@contextlib.contextmanager
def staged(*dests: Path | str) -> Iterator[list[Path]]:
    """A temporary path beside each destination (parent directories made) for the block to write; when it
    succeeds they are renamed over their destinations in the order given (a reader of the last one finds
    the others in place), when it fails they are removed and the destinations stay as they were."""
    parts = []
    for dest in map(Path, dests):
        dest.parent.mkdir(parents=True, exist_ok=True)
        parts.append((_beside(dest), dest))
    try:
        yield [part for part, _ in parts]
        for part, dest in parts:
            os.replace(part, dest)
    finally:
        for part, _ in parts:
            part.unlink(missing_ok=True)


def write_bytes(path: Path | str, data: bytes) -> Path:
    """`data` at `path`, by a temporary file beside it renamed over it; parent directories made."""
    with staged(path) as (tmp,), open(tmp, "xb") as f:
        f.write(data)
    return Path(path)


def write_text(path: Path | str, text: str) -> Path:
    return write_bytes(path, text.encode())


def install_files(pairs: list[tuple[Path, Path]]) -> None:
    """Copy each (source, destination) beside its destination, then rename them all into place: the
    destinations change only once every copy has succeeded (they may lie on other file systems)."""
    with staged(*(dest for _, dest in pairs)) as parts:
        for (src, _), part in zip(pairs, parts):
            shutil.copyfile(src, part)


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
