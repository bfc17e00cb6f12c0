"""Tune caches: which kernel the tuner chose per problem, and the validators that must all match
the artifacts and device a cache is loaded for. Read by the ops, written by runtime/tune.py."""

from __future__ import annotations

import json
import re
from pathlib import Path

from tritonforge.errors import TritonforgeError

SCHEMA = "tritonforge.tune/1"


class TuneCacheError(TritonforgeError, ValueError):
    pass


def validators(registry) -> dict[str, str]:
    m, b = registry.artifacts.manifest, registry.backend
    return {"tool_version": m["tool"]["version"], "triton_version": m["triton_version"],
            "archive_sha256": m["archive"]["sha256"], "target": m["target"]["arch_name"],
            "device_model": b.device_name, "cuda_driver_version": str(b.driver_version)}


def check_validators(cache: dict, registry, path: str = "tune cache") -> None:
    if cache.get("schema") != SCHEMA:
        raise TuneCacheError(f"{path}: not a {SCHEMA} file")
    here = validators(registry)
    for key in sorted(set(here) | set(cache["validators"])):
        have, want = cache["validators"].get(key), here.get(key)
        if have != want:
            raise TuneCacheError(f"{path}: validator '{key}' differs: cache has {have!r}, this "
                                 f"{'device/archive' if key in here else 'tool'} has {want!r}")


def load_cache(path: Path | str, registry) -> dict:
    try:
        cache = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise TuneCacheError(f"{path}: cannot read: {exc}") from None
    check_validators(cache, registry, str(path))
    return cache


def lookup(cache: dict, op_key: str, batch: int, n_cols: int) -> str | None:
    return lookup_signature(cache, op_key, f"{batch}_{n_cols}")


def lookup_signature(cache: dict, op_key: str, params_signature: str) -> str | None:
    """The tuned kernel for ORT's params signature of a problem, or None."""
    entry = cache["results"].get(op_key, {}).get(params_signature)
    return entry["kernel"] if entry else None


def device_slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "_", name).strip("_")
