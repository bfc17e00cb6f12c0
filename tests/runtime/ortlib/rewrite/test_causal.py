"""A causal mask added to attention scores (CLIP's text encoder): read by running the nodes that make it, taken into
the attention as `unidirectional`; a value of the scores' shape that is not causal (T5's position bias) goes to ORT's
MultiHeadAttention as its attention_bias; masks that read an input's values are named and left."""

from __future__ import annotations

import math

import numpy as np
import pytest

ort = pytest.importorskip("onnxruntime", reason="the rewritten graphs run in onnxruntime")
onnx = pytest.importorskip("onnx", reason="onnx builds the test graphs")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from tritonforge.runtime.ortlib.rewrite import rewrite  # noqa: E402

from .test_layout import _run  # noqa: E402  (random feeds for every input, on the CPU EP)

B, S, H, D = 2, 6, 2, 8
LOWEST = float(np.finfo(np.float32).min)


def _masked(mask: str, seq=S):
    """q, k, v (B, S, H*D) -> heads -> scaled scores + a mask -> softmax -> output; `mask`: how the mask is made."""
    c = H * D
    inits = [numpy_helper.from_array(np.array(v, np.int64), n) for n, v in
             (("hs", [B, seq, H, D]), ("os", [B, seq, c]), ("one", [1]), ("two", [2]))]
    inits.append(numpy_helper.from_array(np.array(1 / math.sqrt(D), np.float32), "scale"))
    n = helper.make_node
    nodes = [n("Reshape", ["q", "hs"], ["qr"]), n("Transpose", ["qr"], ["qt"], perm=[0, 2, 1, 3]),
             n("Reshape", ["k", "hs"], ["kr"]), n("Transpose", ["kr"], ["kt"], perm=[0, 2, 3, 1]),
             n("Reshape", ["v", "hs"], ["vr"]), n("Transpose", ["vr"], ["vt"], perm=[0, 2, 1, 3]),
             n("MatMul", ["qt", "kt"], ["s0"]), n("Mul", ["s0", "scale"], ["s"])]
    ins = [helper.make_tensor_value_info(x, TensorProto.FLOAT, [B, seq, c]) for x in "qkv"]
    if mask == "causal constant":
        inits.append(numpy_helper.from_array(np.triu(np.full((1, 1, seq, seq), LOWEST, np.float32), 1), "mask"))
    elif mask == "zeros":
        inits.append(numpy_helper.from_array(np.zeros((1, 1, seq, seq), np.float32), "mask"))
    elif mask == "a bias per head":
        bias = np.random.default_rng(5).standard_normal((1, H, seq, seq)).astype(np.float32)
        inits.append(numpy_helper.from_array(bias, "mask"))
    elif mask == "causal from the shape":  # the shape's sequence length, a square of the lowest value, its upper part
        nodes += [n("Shape", ["q"], ["qshape"]), n("Slice", ["qshape", "one", "two"], ["len"]),
                  n("Concat", ["len", "len"], ["square"], axis=0),
                  n("ConstantOfShape", ["square"], ["full"],
                    value=numpy_helper.from_array(np.array([LOWEST], np.float32))),
                  n("Trilu", ["full", "one"], ["mask"], upper=1)]
    elif mask == "an input's values":
        ins.append(helper.make_tensor_value_info("am", TensorProto.FLOAT, [B, 1, 1, seq]))
        nodes += [n("Mul", ["am", "scale"], ["mask"])]
    nodes += [n("Add", ["s", "mask"], ["sm_in"], name="add_mask"),
              n("Softmax", ["sm_in"], ["p"], axis=-1, name="attn.softmax"),
              n("MatMul", ["p", "vt"], ["o"]), n("Transpose", ["o"], ["ot"], perm=[0, 2, 1, 3]),
              n("Reshape", ["ot", "os"], ["y"])]
    g = helper.make_graph(nodes, "attn", ins, [helper.make_tensor_value_info("y", TensorProto.FLOAT, [B, seq, c])],
                          inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("mask", ["causal constant", "causal from the shape"])
def test_a_causal_mask_goes_into_the_attention_as_unidirectional(ort_library, mask):
    m = _masked(mask)
    want = _run(m)
    report = rewrite(m, ort_library)
    assert report.rewritten == {"MultiHeadAttention": 1} and not report.left, report.lines()
    node = next(x for x in m.graph.node if x.op_type == "MultiHeadAttention")
    assert node.domain == "tritonforge" and helper.get_attribute_value(
        next(a for a in node.attribute if a.name == "unidirectional")) == 1
    assert "Add" not in {x.op_type for x in m.graph.node}  # the mask and what made it went
    np.testing.assert_allclose(_run(m, ort_library), want, atol=1e-5, rtol=1e-5)


def test_a_mask_that_is_not_causal_is_named_and_the_attention_left(ort_library):
    m = _masked("an input's values")  # (B, 1, 1, S): a padding mask, not an attention bias of the scores' shape
    report = rewrite(m, ort_library, softmax_min_cols=0)
    assert "MultiHeadAttention" not in report.rewritten
    why = "it reads the values of input 'am' (a padding mask?)"
    assert any(f"the value added is not a causal mask: {why}" in line for line in report.left), report.left


@pytest.mark.parametrize("mask", ["zeros", "a bias per head"])
def test_a_value_of_the_scores_shape_that_is_not_causal_is_ort_attentions_bias(ort_library, mask):
    """(1, 1, S, S) or (1, H, S, S) added to the scores (T5's relative position bias): not causal, so ORT's
    MultiHeadAttention takes it as its attention_bias, the scale kept."""
    m = _masked(mask)
    want = _run(m)
    report = rewrite(m, ort_library)
    assert report.rewritten == {"MultiHeadAttention": 1} and not report.left, report.lines()
    node = next(x for x in m.graph.node if x.op_type == "MultiHeadAttention")
    assert node.domain == "com.microsoft" and list(node.input[3:]) == ["", "", "mask"]
    assert helper.get_attribute_value(next(a for a in node.attribute if a.name == "scale")) == pytest.approx(
        1 / math.sqrt(D))
    np.testing.assert_allclose(_run(m, ort_library), want, atol=1e-5, rtol=1e-5)
