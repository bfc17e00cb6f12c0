"""The wheel to a real package index (pypiserver on loopback): uploaded once, an identical re-upload left
alone, other bytes under the same name refused, credentials never printed."""

from __future__ import annotations

import hashlib
import zipfile

import pytest
from tritonforge.pipeline.errors import PipelineError
from tritonforge.pipeline.release import index


def _wheel(path, payload: bytes):
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("tritonforge_ort/__init__.py", payload)
    return path


def test_a_wheel_goes_up_once_and_is_never_replaced(index_server, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("TRITONFORGE_INDEX_USER", "publisher")
    monkeypatch.setenv("TRITONFORGE_INDEX_PASSWORD", "never-printed-0xdeadbeef")
    w = _wheel(tmp_path / "tritonforge_ort-1.2.3-py3-none-any.whl", b"x = 1\n")
    assert index.upload(index_server["url"], w) == "uploaded"
    held = index.held(index_server["simple"], "tritonforge_ort")
    assert held == {w.name: hashlib.sha256(w.read_bytes()).hexdigest()}
    assert (index_server["dir"] / w.name).read_bytes() == w.read_bytes()
    assert index.upload(index_server["url"], w) == "identical"
    other = tmp_path / "other"
    other.mkdir()
    changed = _wheel(other / w.name, b"x = 2\n")
    with pytest.raises(PipelineError, match="already there with other contents .* never replaced"):
        index.upload(index_server["url"], changed)
    assert (index_server["dir"] / w.name).read_bytes() == w.read_bytes()
    assert "never-printed" not in capsys.readouterr().out


def test_no_index_answering_is_one_line(tmp_path):
    w = _wheel(tmp_path / "tritonforge_ort-1.2.3-py3-none-any.whl", b"")
    with pytest.raises(PipelineError, match=r"http://127.0.0.1:9/simple/tritonforge-ort/: no index answers"):
        index.upload("http://127.0.0.1:9/", w)
