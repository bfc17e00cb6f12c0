"""Each attention matcher on hand-made graphs: what it writes computes what the graph did (the library's CPU
op against onnxruntime's own), and near misses stay with the reason. The real exports are in test_rewrite."""

from __future__ import annotations

import math

import numpy as np
import pytest

ort = pytest.importorskip("onnxruntime", reason="the rewritten graphs run in onnxruntime")
onnx = pytest.importorskip("onnx", reason="onnx builds the test graphs")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from tritonforge.runtime.ortlib.rewrite import rewrite  # noqa: E402

B, SQ, SKV, H, D = 2, 6, 5, 2, 8


def _decomposed(mask: bool = False, div: bool = False, opset: int = 17, cast: bool = False):
    """torch.onnx's TorchScript form of SDPA with the scale folded (or divided on the scores); `cast`: the
    output cast to the type it has, as diffusers' `.to(query.dtype)` exports."""
    c = H * D
    inits = [numpy_helper.from_array(np.array(v, np.int64), n) for n, v in
             (("qs", [B, SQ, H, D]), ("ks", [B, SKV, H, D]), ("os", [B, SQ, c]))]
    inits += [numpy_helper.from_array(np.array(math.sqrt(1 / math.sqrt(D)), np.float32), "root"),
              numpy_helper.from_array(np.array(math.sqrt(D), np.float32), "d_root"),
              numpy_helper.from_array(np.zeros((1, 1, 1, SKV), np.float32), "mask")]
    n = helper.make_node
    nodes = [n("Reshape", ["q", "qs"], ["qr"]), n("Transpose", ["qr"], ["qt"], perm=[0, 2, 1, 3]),
             n("Reshape", ["k", "ks"], ["kr"]), n("Transpose", ["kr"], ["kt"], perm=[0, 2, 3, 1]),
             n("Reshape", ["v", "ks"], ["vr"]), n("Transpose", ["vr"], ["vt"], perm=[0, 2, 1, 3])]
    if div:
        nodes += [n("MatMul", ["qt", "kt"], ["s0"]), n("Div", ["s0", "d_root"], ["s"])]
    else:
        nodes += [n("Mul", ["qt", "root"], ["qm"]), n("Mul", ["root", "kt"], ["km"]), n("MatMul", ["qm", "km"], ["s"])]
    if mask:
        nodes += [n("Add", ["s", "mask"], ["sm_in"], name="add_mask")]
    nodes += [n("Softmax", ["sm_in" if mask else "s"], ["p"], axis=-1, name="attn.softmax"),
              n("MatMul", ["p", "vt"], ["o"]), n("Transpose", ["o"], ["ot"], perm=[0, 2, 1, 3]),
              n("Reshape", ["ot", "os"], ["yc" if cast else "y"])]
    if cast:
        nodes.append(n("Cast", ["yc"], ["y"], to=TensorProto.FLOAT))
    vi = helper.make_tensor_value_info
    ins = [vi("q", TensorProto.FLOAT, [B, SQ, c]), vi("k", TensorProto.FLOAT, [B, SKV, c]),
           vi("v", TensorProto.FLOAT, [B, SKV, c])]
    g = helper.make_graph(nodes, "attn", ins, [vi("y", TensorProto.FLOAT, [B, SQ, c])], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def _feeds(seed=0):
    rng = np.random.default_rng(seed)
    return {"q": rng.standard_normal((B, SQ, H * D)).astype(np.float32),
            "k": rng.standard_normal((B, SKV, H * D)).astype(np.float32),
            "v": rng.standard_normal((B, SKV, H * D)).astype(np.float32)}


def _run(model, lib=None):
    so = ort.SessionOptions()
    so.log_severity_level = 4
    if lib:
        so.register_custom_ops_library(str(lib))
    return ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"]).run(
        None, _feeds())[0]


def _ops(model):
    return sorted((n.domain, n.op_type) for n in model.graph.node)


@pytest.mark.parametrize("div", [False, True])
def test_the_decomposition_is_one_op_that_computes_the_same(ort_library, div):
    m = _decomposed(div=div)
    want = _run(m)
    report = rewrite(m, ort_library, attention="tritonforge")
    assert report.rewritten == {"MultiHeadAttention": 1} and not report.left, report.lines()
    assert _ops(m) == [("tritonforge", "MultiHeadAttention")]  # heads, scales and shapes all went
    node = m.graph.node[0]
    assert list(node.input) == ["q", "k", "v"] and node.output[0] == "y" and node.name == "attn.softmax_attention"
    scale = next(a.f for a in node.attribute if a.name == "scale")
    assert scale == pytest.approx(1 / math.sqrt(D), rel=1e-6)
    np.testing.assert_allclose(_run(m, ort_library), want, atol=1e-5, rtol=1e-5)


def test_a_mask_on_the_scores_is_named_and_the_softmax_goes_alone(ort_library):
    m = _decomposed(mask=True)
    report = rewrite(m, ort_library, attention="tritonforge", softmax_min_cols=0)
    assert report.rewritten == {"Softmax": 1}, report.lines()
    assert any("its scores come from Add 'add_mask'" in why and "alone went to tritonforge.Softmax" in why
               for why in report.left), report.left


def test_attention_to_orts_own_op_computes_the_same(ort_library):
    m = _decomposed()
    want = _run(m)
    report = rewrite(m, ort_library, attention="ort")
    assert report.rewritten == {"MultiHeadAttention": 1}
    assert _ops(m) == [("com.microsoft", "MultiHeadAttention")]
    np.testing.assert_allclose(_run(m, ort_library), want, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("attention", ["ort", "tritonforge"])
def test_the_outputs_cast_to_its_own_type_goes_with_the_attention(ort_library, attention):
    # left behind ORT's op, onnxruntime before 1.31 mistypes it on the CPU EP and refuses the model
    m = _decomposed(cast=True)
    want = _run(m)
    assert rewrite(m, ort_library, attention=attention).rewritten == {"MultiHeadAttention": 1}
    assert [n.op_type for n in m.graph.node] == ["MultiHeadAttention"] and m.graph.node[0].output[0] == "y"
    np.testing.assert_allclose(_run(m, ort_library), want, atol=1e-5, rtol=1e-5)


def _one(op, domain, inputs, opset, **attrs):
    vi = helper.make_tensor_value_info
    c = H * D
    g = helper.make_graph([helper.make_node(op, inputs, ["y"], domain=domain, name="a1", **attrs)], "one",
                          [vi("q", TensorProto.FLOAT, [B, SQ, c]), vi("k", TensorProto.FLOAT, [B, SKV, c]),
                           vi("v", TensorProto.FLOAT, [B, SKV, c])] + ([vi("m", TensorProto.FLOAT, [SQ, SKV])]
                                                                       if "m" in inputs else []),
                          [vi("y", TensorProto.FLOAT, [B, SQ, c])])
    opsets = [helper.make_opsetid("", opset)] + ([helper.make_opsetid(domain, 1)] if domain else [])
    return helper.make_model(g, opset_imports=opsets)


def test_onnx_attention_without_mask_is_rewritten_and_with_one_is_left(ort_library):
    m = _one("Attention", "", ["q", "k", "v"], 23, q_num_heads=H, kv_num_heads=H, scale=0.2)
    report = rewrite(m, ort_library, attention="tritonforge")
    assert _ops(m) == [("tritonforge", "MultiHeadAttention")], report.lines()
    assert next(a.f for a in m.graph.node[0].attribute if a.name == "scale") == pytest.approx(0.2)
    masked = _one("Attention", "", ["q", "k", "v", "m"], 23, q_num_heads=H, kv_num_heads=H)
    report = rewrite(masked, ort_library, attention="tritonforge")
    assert report.left == ["Attention node 'a1': it has an attention mask, which the library's op does not take"]
    grouped = _one("Attention", "", ["q", "k", "v"], 23, q_num_heads=H, kv_num_heads=1)
    assert "grouped heads are left" in rewrite(grouped, ort_library).left[0]


def test_orts_multi_head_attention_moves_to_the_library_and_computes_the_same(ort_library):
    m = _one("MultiHeadAttention", "com.microsoft", ["q", "k", "v"], 17, num_heads=H)
    feeds = _feeds()
    so = ort.SessionOptions()
    so.log_severity_level = 4
    want = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    report = rewrite(m, ort_library, attention="tritonforge")
    assert _ops(m) == [("tritonforge", "MultiHeadAttention")], report.lines()
    np.testing.assert_allclose(_run(m, ort_library), want, atol=1e-5, rtol=1e-5)
    left = _one("MultiHeadAttention", "com.microsoft", ["q", "k", "v", "", "m"], 17, num_heads=H)
    assert "packed QKV, a bias, mask or KV cache" in rewrite(left, ort_library).left[0]
