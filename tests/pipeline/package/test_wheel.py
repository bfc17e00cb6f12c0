"""The custom-op library as a wheel: tagged with what auditwheel says it meets, where onnxruntime-gpu
installs; the same bytes from the same inputs, never replaced by other bytes. Installed from a package index
into a fresh venv and used there: tests/test_tasks.py, as a user does; into an older Linux: tests/test_tasks.py
too (`invoke wheel --userland bullseye`)."""

from __future__ import annotations

import base64
import hashlib
import re
import subprocess
import sys
import zipfile

import pytest

pytest.importorskip("onnxruntime", reason="the wheel's models run in onnxruntime")
from tritonforge.pipeline.errors import PipelineError  # noqa: E402
from tritonforge.pipeline.package import wheel  # noqa: E402


@pytest.fixture(scope="module")
def built_wheel(ort_library, tmp_path_factory):
    return wheel.build_wheel(ort_library, tmp_path_factory.mktemp("wheels"), "0.9.0")


def test_the_wheel_is_the_package_the_library_and_a_record_that_checks(built_wheel, ort_library):
    tag = re.search(r"-py3-none-(.+)\.whl$", built_wheel.name).group(1)
    # the ecosystem's checker, run here as a user would: the library is built for glibc 2.17 (toolchain.py)
    show = subprocess.run([sys.executable, "-m", "auditwheel", "show", str(built_wheel)], capture_output=True,
                          text=True, check=True).stdout
    assert f'consistent with the following platform tag: "{tag}"' in " ".join(show.split())
    assert tag == "manylinux_2_17_x86_64"
    needed = re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", subprocess.run(
        ["readelf", "-d", str(ort_library)], capture_output=True, text=True).stdout)
    assert "libcuda.so.1" not in needed and not [n for n in needed if "stdc++" in n or "gcc_s" in n]
    with zipfile.ZipFile(built_wheel) as z:
        names = set(z.namelist())
        assert {"tritonforge_ort/__init__.py", "tritonforge_ort/cli.py", "tritonforge_ort/rewrite/patterns.py",
                "tritonforge_ort/libtritonforge_ort.so", "tritonforge_ort-0.9.0.dist-info/RECORD"} <= names
        assert not any(n.endswith(".cc") or "__pycache__" in n for n in names)
        assert z.read("tritonforge_ort/libtritonforge_ort.so") == ort_library.read_bytes()
        meta = z.read("tritonforge_ort-0.9.0.dist-info/METADATA").decode()
        assert "Requires-Dist: onnx>=1.16" in meta and 'Requires-Dist: onnxruntime-gpu>=1.18.0; extra == "gpu"' in meta
        assert 'Requires-Dist: optimum-onnx>=0.1.0; extra == "optimum"' in meta
        assert "Requires-Python: >=3.9" in meta
        assert "tritonforge-rewrite = tritonforge_ort.cli:main" in z.read(
            "tritonforge_ort-0.9.0.dist-info/entry_points.txt").decode()
        for line in z.read("tritonforge_ort-0.9.0.dist-info/RECORD").decode().splitlines():
            path, digest, size = line.split(",")
            if digest:
                data = z.read(path)
                want = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
                assert digest == f"sha256={want}" and int(size) == len(data), path


def test_the_same_inputs_make_the_same_wheel_and_other_bytes_never_replace_it(built_wheel, ort_library, tmp_path):
    again = wheel.build_wheel(ort_library, built_wheel.parent, "0.9.0")
    assert again == built_wheel
    other = tmp_path / "libtritonforge_ort.so"
    other.write_bytes(ort_library.read_bytes() + b"\0")
    before = built_wheel.read_bytes()
    with pytest.raises(PipelineError, match="exists with other contents: a version's wheel is never replaced"):
        wheel.build_wheel(other, built_wheel.parent, "0.9.0")
    assert built_wheel.read_bytes() == before and len(list(built_wheel.parent.iterdir())) == 1
    with pytest.raises(PipelineError, match="no library to put in the wheel"):
        wheel.build_wheel(tmp_path / "missing.so", tmp_path, "0.9.0")


def test_a_library_built_by_the_hosts_compiler_is_refused_with_auditwheels_verdict(tmp_path):
    """g++ on this machine links dlopen@GLIBC_2.34 (glibc 2.34 moved it into libc): auditwheel places such a
    library at manylinux_2_34 or newer, where pip on Ubuntu 22.04 or RHEL 8 and 9 refuses it."""
    import shutil

    cxx = shutil.which("g++") or pytest.skip("no g++")
    (tmp_path / "lib.cc").write_text('#include <dlfcn.h>\nextern "C" void* f() { return dlopen("x", RTLD_NOW); }\n')
    lib = tmp_path / "libtritonforge_ort.so"
    subprocess.run([cxx, "-shared", "-fPIC", str(tmp_path / "lib.cc"), "-o", str(lib), "-ldl"], check=True)
    glibc = max(int(v) for v in re.findall(r"GLIBC_2\.(\d+)", subprocess.run(
        ["objdump", "-T", str(lib)], capture_output=True, text=True).stdout))
    if glibc <= wheel.NEWEST_GLIBC:
        pytest.skip(f"this machine's glibc links dlopen@GLIBC_2.{glibc}, which every onnxruntime-gpu Linux has")
    with pytest.raises(PipelineError, match=rf"auditwheel places it at manylinux_2_{glibc}_x86_64; onnxruntime-gpu "
                                            r"installs on manylinux_2_28 and older"):
        wheel.build_wheel(lib, tmp_path / "wheels", "1.0.0")
    assert not (tmp_path / "wheels").exists() or not list((tmp_path / "wheels").iterdir())


def test_a_tags_version_is_the_wheels_and_an_unreadable_one_is_refused():
    assert wheel.wheel_version("v1.4.0") == "1.4.0" and wheel.wheel_version("1.4.0rc1") == "1.4.0rc1"
    with pytest.raises(PipelineError, match="'nightly' is not a version pip reads"):
        wheel.wheel_version("nightly")


def test_the_wheels_floors_are_the_ones_the_readme_and_the_library_state():
    """README: "(Python 3.9+, onnxruntime 1.18+)"; the library refuses an onnxruntime older than its oldest C API."""
    from ...conftest import ROOT

    said = re.search(r"\(Python (\d+\.\d+)\+, onnxruntime (\d+\.\d+)\+\)", " ".join((ROOT / "README.md").read_text()
                                                                                      .split()))
    assert said, "README.md no longer states the floors"
    assert wheel.REQUIRES_PYTHON == f">={said.group(1)}"
    assert wheel.OLDEST_ONNXRUNTIME == f"{said.group(2)}.0"
    assert wheel.EXTRAS["gpu"] == [f"onnxruntime-gpu>={said.group(2)}.0"]
    api = re.search(r"kOldestApi = (\d+)", (ROOT / "runtime/ortlib/src/ops.cc").read_text())
    assert api and said.group(2) == f"1.{api.group(1)}"
