"""A Python package index as one more place a release goes: the `tritonforge_ort` wheel uploaded by the
upload API every index speaks (PyPI's legacy upload: a multipart POST with `:action=file_upload`), its
file never replaced.

`--index URL` names the upload endpoint (a pypiserver's root, `https://upload.pypi.org/legacy/`); the
files already there are read from `<URL>/simple/<project>/` (pypiserver's layout; `--index-simple` names
another). A file the index already holds is left alone when its sha256 is the wheel's, else the upload
is refused. Credentials come from TRITONFORGE_INDEX_USER / TRITONFORGE_INDEX_PASSWORD and are never
printed.
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
import urllib.error
import urllib.request
import uuid
from pathlib import Path

from tritonforge.pipeline.errors import PipelineError


def _auth() -> dict:
    user, password = os.environ.get("TRITONFORGE_INDEX_USER"), os.environ.get("TRITONFORGE_INDEX_PASSWORD")
    if not user:
        return {}
    token = base64.b64encode(f"{user}:{password or ''}".encode()).decode()
    return {"Authorization": f"Basic {token}"}


def _project(wheel: Path) -> tuple[str, str]:
    m = re.match(r"([A-Za-z0-9_.]+)-([^-]+)-", wheel.name)
    if not m:
        raise PipelineError(f"{wheel}: not a wheel's file name")
    return m.group(1), m.group(2)


def held(simple: str, project: str) -> dict[str, str]:
    """{file name: sha256} of what the index holds for `project` (empty when it holds nothing)."""
    url = f"{simple.rstrip('/')}/{project.lower().replace('_', '-')}/"
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=_auth()), timeout=30) as r:
            page = r.read().decode()
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            return {}
        raise PipelineError(f"{url}: the index answered {exc.code} {exc.reason}") from None
    except urllib.error.URLError as exc:
        raise PipelineError(f"{url}: no index answers ({exc.reason})") from None
    return {name: digest for digest, name in re.findall(r'href="[^"#]*#sha256=([0-9a-f]{64})"[^>]*>([^<]+)</a>', page)}


def upload(index: str, wheel: Path | str, log=print, simple: str | None = None) -> str:
    """Upload `wheel` to `index`; returns "uploaded" or "identical". Refuses a different file of the same name."""
    wheel = Path(wheel)
    data = wheel.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    name, version = _project(wheel)
    there = held(simple or f"{index.rstrip('/')}/simple/", name)
    if wheel.name in there:
        if there[wheel.name] != digest:
            raise PipelineError(f"{index}: {wheel.name} is already there with other contents (sha256 "
                                f"{there[wheel.name]}); a published file is never replaced")
        log(f"{index}: {wheel.name} is already there, identical")
        return "identical"
    boundary = uuid.uuid4().hex
    fields = {":action": "file_upload", "protocol_version": "1", "name": name, "version": version,
              "filetype": "bdist_wheel", "pyversion": "py3", "metadata_version": "2.1", "sha256_digest": digest}
    body = b"".join(f'--{boundary}\r\nContent-Disposition: form-data; name="{k}"\r\n\r\n{v}\r\n'.encode()
                    for k, v in fields.items())
    body += (f'--{boundary}\r\nContent-Disposition: form-data; name="content"; filename="{wheel.name}"\r\n'
             f"Content-Type: application/octet-stream\r\n\r\n").encode() + data + f"\r\n--{boundary}--\r\n".encode()
    req = urllib.request.Request(index, data=body, method="POST", headers={
        **_auth(), "Content-Type": f"multipart/form-data; boundary={boundary}"})
    try:
        with urllib.request.urlopen(req, timeout=300):
            pass
    except urllib.error.HTTPError as exc:
        raise PipelineError(f"{index}: uploading {wheel.name} was refused: {exc.code} {exc.reason}") from None
    except urllib.error.URLError as exc:
        raise PipelineError(f"{index}: no index answers ({exc.reason})") from None
    log(f"{index}: uploaded {wheel.name} ({len(data)} B, sha256 {digest})")
    return "uploaded"
