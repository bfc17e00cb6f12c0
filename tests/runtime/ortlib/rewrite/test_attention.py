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


def _session(model, lib=None):
    so = ort.SessionOptions()
    so.log_severity_level = 4
    if lib:
        so.register_custom_ops_library(str(lib))
    return ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])


def _run(model, lib=None):
    return _session(model, lib).run(None, _feeds())[0]


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


# ---- the forms today's diffusion transformers export ---------------------------------------------------
S1, S2 = 6, 3  # image and text tokens


def _graph(nodes, inputs: dict, outputs: dict, inits=(), opset=23, elem=TensorProto.FLOAT):
    vi = helper.make_tensor_value_info
    g = helper.make_graph(nodes, "g", [vi(n, elem, s) for n, s in inputs.items()],
                          [vi(n, elem, s) for n, s in outputs.items()], list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def _shape(name, dims):
    return numpy_helper.from_array(np.array(dims, np.int64), name)


def _joint(onnx_attention: bool = False, norm_q: bool = False):
    """SD3's joint attention as the TorchScript exporter writes it (or, `onnx_attention`, the dynamo exporter at
    opset 23): each stream's q, k, v split into heads, the heads concatenated along the sequence, attention,
    back to tokens. `norm_q`: the query heads scaled per head dim after the split (SD3.5's norm on q)."""
    n = helper.make_node
    c, nodes = H * D, []
    for stream in ("x", "c"):
        for t in "qkv":
            nodes += [n("Reshape", [f"{t}_{stream}", "heads"], [f"{t}_{stream}_r"]),
                      n("Transpose", [f"{t}_{stream}_r"], [f"{t}_{stream}_h"], perm=[0, 2, 1, 3])]
    qs = ["q_x_h", "q_c_h"]
    if norm_q:
        nodes += [n("Mul", [h, "norm_w"], [f"{h}_n"]) for h in qs]
        qs = [f"{h}_n" for h in qs]
    nodes += [n("Concat", qs, ["q"], axis=2), n("Concat", ["k_x_h", "k_c_h"], ["k"], axis=2),
              n("Concat", ["v_x_h", "v_c_h"], ["v"], axis=2)]
    if onnx_attention:
        nodes.append(n("Attention", ["q", "k", "v"], ["o"], name="attn"))
    else:
        nodes += [n("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]), n("Mul", ["q", "root"], ["qm"]),
                  n("Mul", ["kt", "root"], ["km"]), n("MatMul", ["qm", "km"], ["s"]),
                  n("Softmax", ["s"], ["p"], axis=-1, name="attn/Softmax"), n("MatMul", ["p", "v"], ["o"])]
    nodes += [n("Transpose", ["o"], ["ot"], perm=[0, 2, 1, 3]), n("Reshape", ["ot", "tokens"], ["y"])]
    inits = [_shape("heads", [B, -1, H, D]), _shape("tokens", [B, -1, c]),
             numpy_helper.from_array(np.array(math.sqrt(1 / math.sqrt(D)), np.float32), "root"),
             numpy_helper.from_array(np.linspace(0.5, 1.5, D).astype(np.float32), "norm_w")]
    ins = {f"{t}_{stream}": [B, s, c] for stream, s in (("x", S1), ("c", S2)) for t in "qkv"}
    return _graph(nodes, ins, {"y": [B, S1 + S2, c]}, inits, 23 if onnx_attention else 17)


def _feed(model, seed=1):
    rng = np.random.default_rng(seed)
    return {i.name: rng.standard_normal([d.dim_value for d in i.type.tensor_type.shape.dim]).astype(np.float32)
            for i in model.graph.input}


def _runs(model, lib=None):
    """The model run on inputs of its declared shapes."""
    return _session(model, lib).run(None, _feed(model))[0]


def _attention_node(model):
    (node,) = [n for n in model.graph.node if n.op_type == "MultiHeadAttention"]
    return node, {a.name: helper.get_attribute_value(a) for a in node.attribute}


@pytest.mark.parametrize("onnx_attention", [False, True])
@pytest.mark.parametrize("attention", ["tritonforge", "ort"])
def test_joint_attention_over_two_streams_runs_on_the_streams_projections(ort_library, onnx_attention, attention):
    m = _joint(onnx_attention)
    want = _runs(m)
    report = rewrite(m, ort_library, attention=attention)
    assert report.rewritten == {"MultiHeadAttention": 1} and not report.left and not report.notes, report.lines()
    # the streams' projections joined once along the sequence; no head is transposed into (B, H, S, d) or back
    ops = sorted(n.op_type for n in m.graph.node)
    assert ops == ["Concat", "Concat", "Concat", "MultiHeadAttention"], ops
    assert all(list(n.input) in (["q_x", "q_c"], ["k_x", "k_c"], ["v_x", "v_c"]) and n.attribute[0].i == 1
               for n in m.graph.node if n.op_type == "Concat")
    node, a = _attention_node(m)
    assert node.domain == ("tritonforge" if attention == "tritonforge" else "com.microsoft")
    assert a["num_heads"] == H and "layout" not in a and node.output[0] == "y"
    np.testing.assert_allclose(_runs(m, ort_library), want, atol=1e-5, rtol=1e-5)


def test_heads_the_graph_has_only_as_bhsd_go_to_the_library_in_that_layout(ort_library):
    m = _joint(norm_q=True)  # the query normed after the head split: no token-major query anywhere
    want = _runs(m)
    report = rewrite(m, ort_library, attention="ort")
    assert report.rewritten == {"MultiHeadAttention": 1}, report.lines()
    node, a = _attention_node(m)
    assert node.domain == "tritonforge" and a["layout"] == b"BHSD" and a["num_heads"] == H
    assert report.lines()[1:] == ["note: attention=ort, but ORT's MultiHeadAttention takes no (B, H, S, d) heads: the "
                                  "library's op (1 node(s))"], report.lines()
    np.testing.assert_allclose(_runs(m, ort_library), want, atol=1e-5, rtol=1e-5)


def _four_d(transposed: bool, kv_heads: int = H, skv: int = SKV, causal: int = 0, opset: int = 23, extra=()):
    """ONNX Attention on 4-D (B, H, S, d) heads: graph inputs as they are, or (`transposed`) Transposes [0, 2, 1, 3] of
    (B, S, H, d) heads with the output transposed back and reshaped to tokens (Flux's blocks, dynamo at opset 23)."""
    n = helper.make_node
    shapes = {"q": (H, SQ), "k": (kv_heads, skv), "v": (kv_heads, skv)}
    if not transposed:
        return _graph([n("Attention", ["q", "k", "v", *extra], ["y"], name="attn", is_causal=causal)],
                      {t: [B, h, s, D] for t, (h, s) in shapes.items()}, {"y": [B, H, SQ, D]}, opset=opset)
    nodes = [n("Transpose", [t], [f"{t}h"], perm=[0, 2, 1, 3]) for t in "qkv"]
    nodes += [n("Attention", ["qh", "kh", "vh"], ["o"], name="attn", is_causal=causal),
              n("Transpose", ["o"], ["ot"], perm=[0, 2, 1, 3]), n("Reshape", ["ot", "tokens"], ["y"])]
    return _graph(nodes, {t: [B, s, h, D] for t, (h, s) in shapes.items()}, {"y": [B, SQ, H * D]},
                  [_shape("tokens", [B, -1, H * D])], opset)


@pytest.mark.parametrize("attention", ["tritonforge", "ort"])
@pytest.mark.parametrize("skv", [SKV, 77])
def test_onnx_attention_on_transposed_heads_drops_the_transposes(ort_library, attention, skv):
    m = _four_d(True, skv=skv)
    want = _runs(m)
    report = rewrite(m, ort_library, attention=attention)
    assert report.rewritten == {"MultiHeadAttention": 1} and not report.notes, report.lines()
    assert "Transpose" not in {n.op_type for n in m.graph.node}
    node, a = _attention_node(m)
    assert node.domain == ("tritonforge" if attention == "tritonforge" else "com.microsoft") and "layout" not in a
    np.testing.assert_allclose(_runs(m, ort_library), want, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("kv_heads,causal", [(H, 0), (1, 0), (1, 1)])
def test_onnx_attention_on_bhsd_inputs_and_grouped_heads(ort_library, kv_heads, causal):
    m = _four_d(False, kv_heads=kv_heads, skv=SQ if causal else SKV, causal=causal)
    want = _runs(m)
    report = rewrite(m, ort_library, attention="ort")
    assert report.rewritten == {"MultiHeadAttention": 1}, report.lines()
    node, a = _attention_node(m)
    assert node.domain == "tritonforge" and a["layout"] == b"BHSD" and a.get("kv_num_heads", H) == kv_heads
    assert a.get("unidirectional", 0) == causal
    np.testing.assert_allclose(_runs(m, ort_library), want, atol=1e-5, rtol=1e-5)


def test_grouped_heads_on_3d_inputs_go_to_the_library_with_kv_num_heads(ort_library):
    m = _graph([helper.make_node("Attention", ["q", "k", "v"], ["y"], name="gqa", q_num_heads=4, kv_num_heads=2)],
               {"q": [B, SQ, 4 * D], "k": [B, SKV, 2 * D], "v": [B, SKV, 2 * D]}, {"y": [B, SQ, 4 * D]})
    want = _runs(m)
    report = rewrite(m, ort_library, attention="ort")
    assert report.lines()[1:] == ["note: attention=ort, but ORT's MultiHeadAttention has no grouped key/value heads: "
                                  "the library's op (1 node(s))"], report.lines()
    node, a = _attention_node(m)
    assert node.domain == "tritonforge" and (a["num_heads"], a["kv_num_heads"]) == (4, 2)
    np.testing.assert_allclose(_runs(m, ort_library), want, atol=1e-5, rtol=1e-5)


def test_onnx_attention_with_unpadded_key_lengths_is_left(ort_library):
    m = _four_d(False, opset=24, extra=["", "", "", "lens"])
    m.graph.input.append(helper.make_tensor_value_info("lens", TensorProto.INT64, [B]))
    report = rewrite(m, ort_library)
    assert report.left == ["Attention node 'attn': it takes the keys' unpadded lengths (nonpad_kv_seqlen), which the "
                           "library's op does not"], report.left


def test_attention_orts_op_cannot_run_here_goes_to_the_library_with_the_reason(ort_library):
    """bfloat16: this onnxruntime's CPU EP has no bfloat16 MultiHeadAttention, and without its CUDA EP none runs
    it, so a bfloat16 attention ORT's op measured faster on goes to the library, and the report says why."""
    from tritonforge.runtime.ortlib.rewrite.loads import ort_runs

    if ort_runs("com.microsoft", "MultiHeadAttention", "bf16"):
        pytest.skip(f"onnxruntime {ort.__version__} runs a bfloat16 MultiHeadAttention here")
    m = _four_d(True, skv=64)
    for t in [*m.graph.input, *m.graph.output]:
        t.type.tensor_type.elem_type = TensorProto.BFLOAT16
    m.graph.input[0].type.tensor_type.shape.dim[1].dim_value = 4096  # a long self-attention: measured ORT's
    m.graph.input[1].type.tensor_type.shape.dim[1].dim_value = 4096
    m.graph.input[2].type.tensor_type.shape.dim[1].dim_value = 4096
    m.graph.output[0].type.tensor_type.shape.dim[1].dim_value = 4096
    report = rewrite(m, ort_library)
    node, _ = _attention_node(m)
    assert node.domain == "tritonforge", report.lines()
    assert any("has no bf16 kernel in the installed onnxruntime: the library's op" in line
               for line in report.lines()), report.lines()
