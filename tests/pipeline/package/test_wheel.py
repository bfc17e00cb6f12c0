"""The custom-op library as a wheel: audited for the manylinux tag it meets, the same bytes from the same
inputs, never replaced by other bytes. Installed from a package index into a fresh venv and used there:
tests/test_tasks.py, as a user does."""

from __future__ import annotations

import base64
import hashlib
import re
import subprocess
import zipfile

import pytest

pytest.importorskip("onnxruntime", reason="the wheel's models run in onnxruntime")
from tritonforge.pipeline.errors import PipelineError  # noqa: E402
from tritonforge.pipeline.package import wheel  # noqa: E402


@pytest.fixture(scope="module")
def built_wheel(ort_library, tmp_path_factory):
    return wheel.build_wheel(ort_library, tmp_path_factory.mktemp("wheels"), "0.9.0")


def test_the_wheel_is_the_package_the_library_and_a_record_that_checks(built_wheel, ort_library):
    tag, needed = wheel.audit(ort_library)
    glibc = max(int(v) for v in re.findall(r"GLIBC_2\.(\d+)", subprocess.run(
        ["objdump", "-T", str(ort_library)], capture_output=True, text=True).stdout))
    assert tag == f"manylinux_2_{max(glibc, 17)}_x86_64" and set(needed) <= wheel.ALLOWED
    assert "libcuda.so.1" not in needed  # the driver is opened at run time
    assert built_wheel.name == f"tritonforge_ort-0.9.0-py3-none-{tag}.whl"
    with zipfile.ZipFile(built_wheel) as z:
        names = set(z.namelist())
        assert {"tritonforge_ort/__init__.py", "tritonforge_ort/cli.py", "tritonforge_ort/rewrite/patterns.py",
                "tritonforge_ort/libtritonforge_ort.so", "tritonforge_ort-0.9.0.dist-info/RECORD"} <= names
        assert not any(n.endswith(".cc") or "__pycache__" in n for n in names)
        assert z.read("tritonforge_ort/libtritonforge_ort.so") == ort_library.read_bytes()
        meta = z.read("tritonforge_ort-0.9.0.dist-info/METADATA").decode()
        assert "Requires-Dist: onnx>=1.16" in meta and 'Requires-Dist: onnxruntime-gpu; extra == "gpu"' in meta
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


def test_a_tags_version_is_the_wheels_and_an_unreadable_one_is_refused():
    assert wheel.wheel_version("v1.4.0") == "1.4.0" and wheel.wheel_version("1.4.0rc1") == "1.4.0rc1"
    with pytest.raises(PipelineError, match="'nightly' is not a version pip reads"):
        wheel.wheel_version("nightly")
