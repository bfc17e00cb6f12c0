"""Content-addressed compile cache: key -> (binary, metadata). An unchanged rebuild compiles nothing."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from tritonforge.atomic import write_bytes

# Bump when what the compiler step records changes, so old entries are not reused.
CACHE_FORMAT = 4  # 4: CUDA records keep Triton's PTX (made portable when merged)


def compile_key(*, source_key: str, sig: str, constants: dict, options: dict, target: str,
                triton_version: str) -> str:
    blob = json.dumps({
        "format": CACHE_FORMAT, "source": source_key, "sig": sig, "constants": constants,
        "options": options, "target": target, "triton": triton_version,
    }, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()


def ptx_checks(cache_dir: Path | str | None) -> Path | None:
    """Where the PTX portability verdicts (compiler.portable_ptx) live beside a compile cache."""
    return Path(cache_dir) / "ptx" if cache_dir else None


class CompileCache:
    def __init__(self, root: Path | str | None):
        self.root = Path(root) if root else None
        self.write_failures = 0

    def _paths(self, key: str) -> tuple[Path, Path]:
        d = self.root / key[:2]
        return d / f"{key}.bin", d / f"{key}.json"

    def get(self, key: str) -> tuple[bytes, dict] | None:
        if self.root is None:
            return None
        bin_path, meta_path = self._paths(key)
        try:
            meta = json.loads(meta_path.read_text())
            binary = bin_path.read_bytes()
        except (OSError, ValueError):
            return None
        # A torn or tampered entry is a miss, never a wrong binary.
        if hashlib.sha256(binary).hexdigest() != meta.get("sha256"):
            return None
        return binary, meta

    def put(self, key: str, binary: bytes, meta: dict) -> bool:
        """Store an entry; a cache that cannot be written is skipped (it only saves time), returns False."""
        if self.root is None:
            return False
        bin_path, meta_path = self._paths(key)
        try:
            bin_path.parent.mkdir(parents=True, exist_ok=True)
            # Binary first, metadata (which carries the hash) last: readers check one against the other.
            for path, data in ((bin_path, binary), (meta_path, json.dumps(meta, sort_keys=True).encode())):
                write_bytes(path, data)
        except OSError:
            self.write_failures += 1
            return False
        return True
