"""rewrite/einsum.py: a bfloat16 Einsum that only permutes its input's axes as the Transpose it is; every other
Einsum stays as exported."""

from __future__ import annotations

import numpy as np
import pytest

ort = pytest.importorskip("onnxruntime")
onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402
from tritonforge.runtime.ortlib.rewrite import rewrite, rewrite_file  # noqa: E402
from tritonforge.runtime.ortlib.rewrite.einsum import permutation  # noqa: E402

SHAPE = [2, 3, 4, 2, 2, 5]  # (n, h, w, p, q, c): a DiT's patches before they are put back in place


@pytest.mark.parametrize("equation,perm", [("nhwpqc->nchpwq", [0, 5, 1, 3, 2, 4]), ("ij -> ji", [1, 0]),
                                           ("abc->abc", [0, 1, 2])])
def test_a_permuting_equation_is_its_axes_order(equation, perm):
    x = np.random.default_rng(0).standard_normal([2, 3, 4, 2, 2, 5][:len(perm)])
    assert permutation(equation) == perm
    np.testing.assert_array_equal(np.einsum(equation.replace(" ", ""), x), x.transpose(perm))


@pytest.mark.parametrize("equation", ["ij,jk->ik", "ii->i", "ij->i", "...ij->...ji", "ij", "ij->jk"])
def test_anything_else_is_not_a_permutation(equation):
    assert permutation(equation) is None


def _model(elem, equation="nhwpqc->nchpwq"):
    out = [SHAPE[permutation(equation)[i]] for i in range(len(SHAPE))] if permutation(equation) else None
    g = helper.make_graph([helper.make_node("Einsum", ["x"], ["y"], equation=equation, name="unpatchify")], "g",
                          [helper.make_tensor_value_info("x", elem, SHAPE)],
                          [helper.make_tensor_value_info("y", elem, out)])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 23)], ir_version=10)


def test_a_bfloat16_permutation_becomes_a_transpose_that_onnxruntime_loads(ort_library, tmp_path):
    src = tmp_path / "m.onnx"
    onnx.save(_model(TensorProto.BFLOAT16), str(src))
    with pytest.raises(Exception, match="Einsum"):  # as exported: refused, Einsum has no bfloat16
        ort.InferenceSession(str(src), providers=["CPUExecutionProvider"])
    report = rewrite_file(src, tmp_path / "m.tf.onnx", ort_library)
    assert report.rewritten == {"Transpose": 1}, report.lines()
    model = onnx.load(str(tmp_path / "m.tf.onnx"))
    (node,) = model.graph.node
    assert node.op_type == "Transpose" and node.name == "unpatchify" and list(node.output) == ["y"]
    assert list(node.attribute[0].ints) == [0, 5, 1, 3, 2, 4]
    assert "-> ONNX Transpose" in report.lines()[0]


def test_other_types_and_other_equations_keep_the_einsum(ort_library):
    for model in (_model(TensorProto.FLOAT), _model(TensorProto.FLOAT16), _model(TensorProto.BFLOAT16, "nhwpqc->nhwc")):
        report = rewrite(model, ort_library)
        assert not report.rewritten and not report.left and [n.op_type for n in model.graph.node] == ["Einsum"]
