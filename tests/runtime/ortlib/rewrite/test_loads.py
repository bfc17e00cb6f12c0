"""A rewritten model is written only once onnxruntime loads it: what it refuses never reaches the disk."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("onnxruntime", reason="the check is onnxruntime's own load")
onnx = pytest.importorskip("onnx", reason="the rewrite edits ONNX models")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from tritonforge.runtime.ortlib.rewrite import RewriteError, rewrite_file  # noqa: E402


def test_a_model_onnxruntime_refuses_is_not_written_and_the_error_names_the_node(ort_library, tmp_path):
    """The checker passes it (it runs no shape inference); onnxruntime's load does not: MatMul's inner
    dims differ (6 against 7)."""
    f = TensorProto.FLOAT
    nodes = [helper.make_node("Softmax", ["x"], ["s"], axis=-1, name="attn"),
             helper.make_node("MatMul", ["s", "w"], ["y"], name="proj/MatMul")]
    g = helper.make_graph(nodes, "m", [helper.make_tensor_value_info("x", f, [2, 8, 5, 6])],
                          [helper.make_tensor_value_info("y", f, [2, 8, 5, 3])],
                          [numpy_helper.from_array(np.ones((7, 3), np.float32), "w")])
    src = tmp_path / "m.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(src))
    onnx.checker.check_model(str(src))
    with pytest.raises(RewriteError) as err:
        rewrite_file(src, tmp_path / "m.tf.onnx", ort_library, softmax_min_cols=0)
    said = str(err.value)
    assert said.startswith(f"{tmp_path / 'm.tf.onnx'}: not written: onnxruntime ")
    assert "proj/MatMul" in said and "Incompatible dimensions" in said and "\n" not in said
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.onnx"]  # no model, no data file, no scratch


def test_a_written_model_says_it_loads(ort_library, tmp_path):
    from .test_rewrite import sd_block

    src = tmp_path / "block.onnx"
    onnx.save(sd_block(21), str(src))
    report = rewrite_file(src, tmp_path / "block.tf.onnx", ort_library)
    assert report.loads.startswith("loads in onnxruntime ") and report.wrote == [str(tmp_path / "block.tf.onnx")]
