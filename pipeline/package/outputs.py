"""The step that writes a build directory (tritonforge/artifact_format.py says what it holds): ORT's
archive (each blob wrapped by objcopy, archived in kernel order), ORT's header, then kernels.json with
both files' digests. Used for one arch (build.py) and for the multi-arch containers (multi.py)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

from tritonforge.pipeline.package import embed, header

from tritonforge.artifact_format import ARCHIVE_NAME, HEADER_NAME, MANIFEST_NAME, artifact_paths

__all__ = ["ARCHIVE_NAME", "HEADER_NAME", "MANIFEST_NAME", "artifact_paths", "package"]

def package(out_dir: Path, blobs: list[tuple[str, str, bytes]], kernels: list[dict], host: str,
            make_manifest: Callable[[dict, dict], dict]) -> dict[str, Path]:
    """Each (name, ext, bytes) blob wrapped by objcopy and archived in order, the header rendered from the
    kernels.json entries, then kernels.json itself (made by make_manifest(archive, header) digests)."""
    work = out_dir / ".objects"
    work.mkdir(parents=True)
    objects = []
    for name, ext, data in blobs:
        (work / f"{name}.{ext}").write_bytes(data)
        objects.append(embed.binary_to_object(f"{name}.{ext}", work, host))
    final_archive = out_dir / ARCHIVE_NAME
    os.replace(embed.archive(objects, work, ARCHIVE_NAME), final_archive)
    shutil.rmtree(work)
    header_path = out_dir / HEADER_NAME
    header_path.write_text(header.render(kernels))  # reads the fields ORT's header has
    doc = make_manifest({"file": ARCHIVE_NAME, **_file_digest(final_archive)},
                        {"file": HEADER_NAME, **_file_digest(header_path)})
    manifest_path = out_dir / MANIFEST_NAME
    manifest_path.write_text(json.dumps(doc, indent=2) + "\n")
    return {"archive": final_archive, "header": header_path, "manifest": manifest_path}


def _file_digest(path: Path) -> dict:
    data = path.read_bytes()
    return {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
