"""ORT's headers from the pinned Debian package: the pin, the .deb's ar container, the sha256 check."""

from __future__ import annotations

import io
import tarfile

import pytest
from tritonforge.pipeline.errors import PipelineError
from tritonforge.pipeline.package.ort_headers import NEEDED, ar_members, ensure_headers, read_pin, unpack_headers


def deb(files: dict[str, bytes]) -> bytes:
    """A .deb-shaped ar archive whose data.tar.xz holds `files`."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:xz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    out = b"!<arch>\n"
    for name, data in (("debian-binary", b"2.0\n"), ("data.tar.xz", buf.getvalue())):
        out += f"{name + '/':<16}{0:<12}{0:<6}{0:<6}{100644:<8}{len(data):<10}`\n".encode() + data
        out += b"\n" if len(data) % 2 else b""
    return out


def test_the_pin_names_a_version_a_digest_and_urls():
    pin = read_pin()
    assert pin["version"].startswith("1.21.0") and len(pin["sha256"]) == 64 and pin["urls"]


def test_a_bad_pin_line_is_named(tmp_path):
    p = tmp_path / "pin.txt"
    p.write_text("version=1\nsha=abc\n")
    with pytest.raises(PipelineError, match=r"pin.txt:2: expected version=, sha256= or url="):
        read_pin(p)


def test_unpack_takes_the_include_tree_and_refuses_escapes(tmp_path):
    files = {f"./usr/include/onnxruntime/{h}": b"// header\n" for h in NEEDED}
    files["./usr/include/onnxruntime/core/providers/x.h"] = b"// nested\n"
    files["./usr/lib/libonnxruntime.so"] = b"not taken"
    unpack_headers(deb(files), tmp_path / "inc", "test.deb")
    assert sorted(p.name for p in (tmp_path / "inc").rglob("*.h")) == sorted([*NEEDED, "x.h"])
    assert not list((tmp_path / "inc").rglob("*.so"))
    with pytest.raises(PipelineError, match="refusing the path"):
        unpack_headers(deb({"./usr/include/onnxruntime/../../../evil.h": b""}), tmp_path / "bad", "evil.deb")
    with pytest.raises(PipelineError, match="not an ar archive"):
        ar_members(b"PK\x03\x04", "a.zip")
    with pytest.raises(PipelineError, match="the package has no"):
        unpack_headers(deb({"./usr/include/onnxruntime/onnxruntime_c_api.h": b""}), tmp_path / "few", "few.deb")


def test_a_download_with_another_digest_is_refused_and_nothing_is_left(tmp_path):
    bad = tmp_path / "bad.deb"
    bad.write_bytes(deb({f"./usr/include/onnxruntime/{h}": b"" for h in NEEDED}))
    pin = tmp_path / "pin.txt"
    pin.write_text(f"version=9\nsha256={'0' * 64}\nurl={bad.as_uri()}\n")
    with pytest.raises(PipelineError, match="sha256 .* the pin says 0000"):
        ensure_headers(tmp_path / "cache", pin)
    assert not (tmp_path / "cache" / "ort-headers" / ("0" * 16) / "onnxruntime").exists()


def test_the_pinned_headers_are_unpacked_once(tmp_path):
    """The real package (the set-up fetched it into the checkout's cache): unpacked, then found again."""
    from ...conftest import ROOT

    d = ensure_headers(ROOT / ".cache" / "tritonforge")
    assert (d / "onnxruntime_c_api.h").read_text().count("ORT_API_VERSION 21")
    assert ensure_headers(ROOT / ".cache" / "tritonforge") == d
