"""The one reader of kernels.json: what a build writes passes, anything else is named and refused."""

from __future__ import annotations

import json

import pytest

from tritonforge import artifact_format as fmt


def doc(**changes) -> dict:
    base = {"schema": fmt.KERNELS_SCHEMA, "target": {"arch": "sm_90"}, "triton_version": "3.5.0",
            "archive": {"file": fmt.ARCHIVE_NAME, "sha256": "0" * 64},
            "header": {"file": fmt.HEADER_NAME, "sha256": "1" * 64}, "kernels": [], "groups": {}}
    return {k: v for k, v in {**base, **changes}.items() if v is not None}


def test_a_build_document_reads_from_its_file_or_directory(tmp_path):
    (tmp_path / fmt.MANIFEST_NAME).write_text(json.dumps(doc()))
    assert fmt.read_kernels_json(tmp_path) == fmt.read_kernels_json(tmp_path / fmt.MANIFEST_NAME) == doc()
    assert fmt.artifact_paths(tmp_path)["archive"] == tmp_path / "triton_kernel_infos.a"
    assert fmt.build_dir("dist", "cuda", fmt.MULTI) == fmt.build_dir("dist", "cuda", "multi")


@pytest.mark.parametrize("text, says", [
    ("{", "not JSON"),
    ("[]", "a JSON object is expected"),
    (json.dumps(doc(schema="tritonforge.kernels/0")), "schema 'tritonforge.kernels/0', not 'tritonforge.kernels/1'"),
    (json.dumps(doc(schema=None)), "schema None"),
    (json.dumps(doc(kernels=None)), "missing or malformed: kernels"),
    (json.dumps(doc(archive={"file": "x"})), "missing or malformed"),
])
def test_anything_else_is_named(tmp_path, text, says):
    path = tmp_path / fmt.MANIFEST_NAME
    path.write_text(text)
    with pytest.raises(fmt.FormatError, match=says) as err:
        fmt.read_kernels_json(path)
    assert str(path) in str(err.value) and str(err.value).endswith("rebuild")


def test_a_missing_file_is_not_found(tmp_path):
    with pytest.raises(FileNotFoundError):
        fmt.read_kernels_json(tmp_path)


def test_the_library_is_named_alike_in_the_format_and_in_its_own_package():
    """runtime/ortlib ships alone (the tritonforge_ort wheel) and names its library itself."""
    from tritonforge.runtime import ortlib

    from tritonforge import artifact_format

    assert ortlib.LIBRARY_NAME == artifact_format.LIBRARY_NAME
