"""ORT's C API headers for the custom-op library, from the Debian package pinned in pins/ort_headers.txt.

The .deb is fetched once (from the first URL that answers), checked against its pinned sha256, and its
`usr/include/onnxruntime/` unpacked into the cache: `<cache>/ort-headers/<sha256[:16]>/onnxruntime/`.
A .deb is an `ar` archive whose `data.tar.*` member holds the files; both are read here with the
standard library, so no dpkg is needed. Nothing is left half-unpacked: the directory is renamed into
place whole.
"""

from __future__ import annotations

import hashlib
import io
import os
import tarfile
import tempfile
import urllib.request
from pathlib import Path

from tritonforge.pipeline.errors import PipelineError

from tritonforge import pins_dir
from tritonforge.atomic import replace_dir

PIN_FILE = Path(pins_dir()) / "ort_headers.txt"
INCLUDE = "usr/include/onnxruntime/"
NEEDED = ("onnxruntime_c_api.h", "onnxruntime_cxx_api.h", "onnxruntime_cxx_inline.h", "onnxruntime_float16.h")


def read_pin(path: Path | str = PIN_FILE) -> dict:
    """{version, sha256, urls} from a pin file of `key=value` lines (`url` may repeat)."""
    pin: dict = {"urls": []}
    try:
        lines = Path(path).read_text().splitlines()
    except OSError as exc:
        raise PipelineError(f"{path}: cannot read the ORT headers pin: {exc}") from None
    for n, line in enumerate(lines, 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition("=")
        if not sep or key not in ("version", "sha256", "url"):
            raise PipelineError(f"{path}:{n}: expected version=, sha256= or url=, got {line!r}")
        if key == "url":
            pin["urls"].append(value)
        else:
            pin[key] = value
    if not pin.get("sha256") or not pin["urls"]:
        raise PipelineError(f"{path}: needs a sha256= and at least one url=")
    return pin


def ar_members(data: bytes, what: str) -> dict[str, bytes]:
    """The members of a Unix `ar` archive (the container of a .deb)."""
    if not data.startswith(b"!<arch>\n"):
        raise PipelineError(f"{what}: not an ar archive (a .deb starts with '!<arch>')")
    members, pos = {}, 8
    while pos + 60 <= len(data):
        header = data[pos:pos + 60]
        name = header[:16].decode("ascii", "replace").strip().rstrip("/")
        try:
            size = int(header[48:58].decode("ascii").strip())
        except ValueError:
            raise PipelineError(f"{what}: a corrupt ar member header at byte {pos}") from None
        members[name] = data[pos + 60:pos + 60 + size]
        pos += 60 + size + (size % 2)
    return members


def unpack_headers(deb: bytes, dest: Path, what: str) -> None:
    """Write the .deb's usr/include/onnxruntime/ tree into `dest` (which must not exist)."""
    data = next((v for k, v in ar_members(deb, what).items() if k.startswith("data.tar")), None)
    if data is None:
        raise PipelineError(f"{what}: no data.tar member")
    dest.mkdir(parents=True)
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        for m in tar.getmembers():
            name = m.name.removeprefix("./")
            if not name.startswith(INCLUDE) or not m.isfile():
                continue
            rel = Path(name[len(INCLUDE):])
            if rel.is_absolute() or ".." in rel.parts:
                raise PipelineError(f"{what}: refusing the path {m.name!r}")
            out = dest / rel
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_bytes(tar.extractfile(m).read())
    missing = [h for h in NEEDED if not (dest / h).is_file()]
    if missing:
        raise PipelineError(f"{what}: the package has no {', '.join(missing)} under /{INCLUDE}")


def _download(urls: list[str], sha256: str) -> bytes:
    errors = []
    for url in urls:
        try:
            with urllib.request.urlopen(url, timeout=60) as resp:
                data = resp.read()
        except OSError as exc:
            errors.append(f"{url}: {exc}")
            continue
        got = hashlib.sha256(data).hexdigest()
        if got == sha256:
            return data
        errors.append(f"{url}: sha256 {got}, the pin says {sha256}")
    raise PipelineError("cannot fetch ORT's headers: " + "; ".join(errors))


def ensure_headers(cache_dir: Path | str, pin_file: Path | str = PIN_FILE) -> Path:
    """The directory holding onnxruntime_c_api.h and the C++ API, fetched and unpacked on first use.
    `TRITONFORGE_ORT_HEADERS` names a directory to use instead (offline machines)."""
    given = os.environ.get("TRITONFORGE_ORT_HEADERS")
    if given:
        if not (Path(given) / "onnxruntime_c_api.h").is_file():
            raise PipelineError(f"TRITONFORGE_ORT_HEADERS={given}: no onnxruntime_c_api.h there")
        return Path(given)
    pin = read_pin(pin_file)
    dest = Path(cache_dir) / "ort-headers" / pin["sha256"][:16] / "onnxruntime"
    if all((dest / h).is_file() for h in NEEDED):
        return dest
    deb = _download(pin["urls"], pin["sha256"])
    dest.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=dest.parent, prefix=".unpack-") as tmp:
        staged = Path(tmp) / "onnxruntime"
        unpack_headers(deb, staged, f"libonnxruntime-dev {pin.get('version', '?')}")
        replace_dir(staged, dest)
    return dest
