"""Lock files: one build of one published version pinned to its exact bytes, kept in the consumer's repo.

    {"schema": "tritonforge.lock/1", "store": URL, "version": V, "profile": P, "platform": ..., "arch": ...,
     "manifest_sha256": ..., "files": {name: {"size": N, "sha256": ...}}}

`fetch --lock` brings exactly those bytes or fails: the store's manifest must be the locked one (a
version never changes, so a different manifest is a different store or tampering), and the build's
files must be the locked ones, each checked again as it is downloaded.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from tritonforge.pipeline.errors import PipelineError
from tritonforge.pipeline.scripts.profiles import check_profile, store_prefix

from tritonforge.atomic import write_text

SCHEMA = "tritonforge.lock/1"
FIELDS = ("store", "version", "profile", "platform", "arch", "manifest_sha256", "files")


def make_lock(store, version: str, platform: str, arch: str, profile: str, manifest: dict, data: bytes) -> dict:
    build = f"{store_prefix(check_profile(profile))}{platform}/{arch}"
    files = {e["path"][len(build) + 1:]: {"size": e["size"], "sha256": e["sha256"]}
             for e in manifest["files"] if e["path"].startswith(build + "/")}
    if not files:
        raise PipelineError(f"version {version} has no {build} (it has: {', '.join(sorted(manifest['builds']))})")
    return {"schema": SCHEMA, "store": store.url, "version": version, "profile": profile, "platform": platform,
            "arch": arch, "manifest_sha256": hashlib.sha256(data).hexdigest(), "files": dict(sorted(files.items()))}


def write_lock(lock: dict, path: Path | str) -> Path:
    return write_text(path, json.dumps(lock, indent=2) + "\n")


def read_lock(path: Path | str) -> dict:
    try:
        lock = json.loads(Path(path).read_text())
    except OSError as exc:
        raise PipelineError(f"cannot read lock file {path}: {exc.strerror}") from None
    except ValueError:
        raise PipelineError(f"{path}: not a lock file (not JSON)") from None
    if not isinstance(lock, dict) or lock.get("schema") != SCHEMA or any(f not in lock for f in FIELDS):
        raise PipelineError(f"{path}: not a {SCHEMA} lock file (needs {', '.join(FIELDS)})")
    return lock


def check_against(lock: dict, manifest_data: bytes, build_files: dict[str, dict]) -> None:
    """The store's manifest bytes and the build's files ({name: manifest entry}) must be the locked ones."""
    got = hashlib.sha256(manifest_data).hexdigest()
    if got != lock["manifest_sha256"]:
        raise PipelineError(f"the manifest of {lock['version']} in the store (sha256 {got}) is not the locked one "
                            f"({lock['manifest_sha256']}): the lock no longer matches the store")
    have = {name: {"size": e["size"], "sha256": e["sha256"]} for name, e in build_files.items()}
    if have != lock["files"]:
        differ = sorted(set(have) ^ set(lock["files"]) | {n for n in have.keys() & lock["files"].keys()
                                                          if have[n] != lock["files"][n]})
        raise PipelineError(f"the {lock['platform']}/{lock['arch']} files of {lock['version']} differ from the "
                            f"lock: {', '.join(differ)}")
