"""The artifact format, in one place: what a build directory holds, where builds go, and the one reader of
kernels.json, which every consumer uses.

A build directory holds ORT's archive and header and `kernels.json` (schema `KERNELS_SCHEMA`: the target,
Triton's version, both files' names and digests, every kernel and each group's launch contract). Builds
go to `<root>/<platform>/<arch>/` (`multi` for the archive of every arch of a platform); the full profile's
root is `<out>/full/`, the ort profile's `<out>/` (pipeline/scripts/profiles.py). CUDA builds also keep each
kernel's PTX in `ptx/`, which merging reads and publishing leaves out.
"""

from __future__ import annotations

import json
from pathlib import Path

from tritonforge.errors import TritonforgeError

ARCHIVE_NAME = "triton_kernel_infos.a"
HEADER_NAME = "triton_kernel_infos.h"
MANIFEST_NAME = "kernels.json"
# The custom-op library for onnxruntime-gpu (pipeline/package/ortlib.py), beside a CUDA build's files.
LIBRARY_NAME = "libtritonforge_ort.so"
# Its kernel choices per device and shape, from the release's tune caches; the library reads it from beside itself.
LIBRARY_TUNE_NAME = "libtritonforge_ort.tune"
FILES = (ARCHIVE_NAME, HEADER_NAME, MANIFEST_NAME)  # what a published build holds, in this order
MULTI = "multi"  # the arch name of a platform's archive for every arch
KERNELS_SCHEMA = "tritonforge.kernels/1"


class FormatError(TritonforgeError, ValueError):
    """A file that is not what the format says; the message names the file."""


def build_dir(root: Path | str, platform: str, arch: str) -> Path:
    return Path(root) / platform / arch


def artifact_paths(d: Path | str) -> dict[str, Path]:
    """{archive, header, manifest} of build directory `d`."""
    d = Path(d)
    return {"archive": d / ARCHIVE_NAME, "header": d / HEADER_NAME, "manifest": d / MANIFEST_NAME}


def read_kernels_json(path: Path | str) -> dict:
    """A build's kernels.json (the file, or the directory holding it), checked against the schema: the
    tag, the target, Triton's version, the archive's and header's file and sha256, a list of kernels and
    the groups. Raises FileNotFoundError when absent, FormatError otherwise."""
    path = Path(path)
    if path.is_dir():
        path = path / MANIFEST_NAME
    text = path.read_text()
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise FormatError(f"{path}: not JSON ({exc}); rebuild") from None
    if not isinstance(doc, dict):
        raise FormatError(f"{path}: not a kernels.json (a JSON object is expected); rebuild")
    if doc.get("schema") != KERNELS_SCHEMA:
        raise FormatError(f"{path}: schema {doc.get('schema')!r}, not {KERNELS_SCHEMA!r}: written by another "
                          "version of tritonforge; rebuild")
    missing = [k for k in ("target", "triton_version", "archive", "header", "kernels", "groups") if k not in doc]
    files_ok = all(isinstance(doc.get(p), dict) and {"file", "sha256"} <= doc[p].keys() for p in ("archive", "header"))
    if missing or not files_ok or not isinstance(doc["kernels"], list) or not isinstance(doc["groups"], dict):
        raise FormatError(f"{path}: not a kernels.json written by a build (missing or malformed: "
                          f"{', '.join(missing) or 'archive/header/kernels/groups'}); rebuild")
    return doc
