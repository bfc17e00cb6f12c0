"""The custom-op library's CPU ops in onnxruntime, against float64, and its errors on bad input."""

from __future__ import annotations

import numpy as np
import pytest

ort = pytest.importorskip("onnxruntime", reason="the library's ops run in onnxruntime")
onnx = pytest.importorskip("onnx", reason="onnx builds the test graphs")
from onnx import TensorProto, helper  # noqa: E402

T = {"fp32": (TensorProto.FLOAT, np.float32), "fp16": (TensorProto.FLOAT16, np.float16)}


def session(lib, nodes, inputs, outputs, inits=(), opset=21):
    graph = helper.make_graph(nodes, "t", inputs, outputs, list(inits))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset),
                                                    helper.make_opsetid("tritonforge", 1)])
    so = ort.SessionOptions()
    so.log_severity_level = 4
    so.register_custom_ops_library(str(lib))
    return ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])


def vi(name, dtype, shape):
    return helper.make_tensor_value_info(name, T[dtype][0] if isinstance(dtype, str) else dtype, shape)


def ref_group_norm_nhwc(x, gamma, beta, groups, eps, silu):
    n, h, w, c = x.shape
    v = x.astype(np.float64).reshape(n, h * w, groups, c // groups)
    mean = v.mean(axis=(1, 3), keepdims=True)
    var = v.var(axis=(1, 3), keepdims=True)
    y = ((v - mean) / np.sqrt(var + eps)).reshape(n, h, w, c) * gamma + beta
    return y / (1 + np.exp(-y)) if silu else y


def ref_group_norm_nchw(x, scale, bias, groups, eps, silu):
    n, c = x.shape[:2]
    v = x.astype(np.float64).reshape(n, groups, -1)
    y = ((v - v.mean(-1, keepdims=True)) / np.sqrt(v.var(-1, keepdims=True) + eps)).reshape(x.shape)
    shape = (1, c) + (1,) * (x.ndim - 2)
    y = y * scale.reshape(shape) + bias.reshape(shape)
    return y / (1 + np.exp(-y)) if silu else y


def close(got, ref, dtype):
    tol = 2e-2 if dtype == "fp16" else 1e-5
    np.testing.assert_allclose(got.astype(np.float64), ref, atol=tol, rtol=tol)


@pytest.mark.parametrize("dtype", ["fp32", "fp16"])
@pytest.mark.parametrize("silu", [0, 1])
def test_group_norm_nhwc_matches_float64(ort_library, dtype, silu):
    rng = np.random.default_rng(1)
    n, h, w, c, groups = 2, 3, 5, 12, 4  # 3 channels per group, 15 pixels
    x = (rng.standard_normal((n, h, w, c)) * 2 + 3).astype(T[dtype][1])
    gamma, beta = rng.uniform(0.5, 1.5, c).astype(np.float32), rng.uniform(-1, 1, c).astype(np.float32)
    s = session(ort_library, [helper.make_node("GroupNorm", ["x", "g", "b"], ["y"], domain="tritonforge",
                                               groups=groups, activation=silu, epsilon=1e-5, name="gn")],
                [vi("x", dtype, [n, h, w, c]), vi("g", "fp32", [c]), vi("b", "fp32", [c])], [vi("y", dtype, None)])
    y = s.run(None, {"x": x, "g": gamma, "b": beta})[0]
    assert y.dtype == T[dtype][1] and y.shape == x.shape
    close(y, ref_group_norm_nhwc(x, gamma, beta, groups, 1e-5, silu), dtype)


@pytest.mark.parametrize("skip_shape", ["full", "n1c", "nc"])
def test_skip_group_norm_adds_skip_and_bias_and_returns_the_sum(ort_library, skip_shape):
    rng = np.random.default_rng(2)
    n, h, w, c, groups = 2, 4, 4, 8, 2
    x = rng.standard_normal((n, h, w, c)).astype(np.float32)
    skip = rng.standard_normal({"full": (n, h, w, c), "n1c": (n, 1, 1, c), "nc": (n, c)}[skip_shape]).astype(np.float32)
    bias = rng.standard_normal(c).astype(np.float32)
    gamma, beta = rng.uniform(0.5, 1.5, c).astype(np.float32), rng.uniform(-1, 1, c).astype(np.float32)
    s = session(ort_library, [helper.make_node("SkipGroupNorm", ["x", "g", "b", "skip", "bias"], ["y", "s"],
                                               domain="tritonforge", groups=groups, activation=1)],
                [vi("x", "fp32", list(x.shape)), vi("g", "fp32", [c]), vi("b", "fp32", [c]),
                 vi("skip", "fp32", list(skip.shape)), vi("bias", "fp32", [c])],
                [vi("y", "fp32", None), vi("s", "fp32", None)])
    y, total = s.run(None, {"x": x, "g": gamma, "b": beta, "skip": skip, "bias": bias})
    want = x.astype(np.float64) + skip.reshape(n, 1, 1, c) if skip_shape != "full" else x + skip.astype(np.float64)
    want = want + bias
    close(total, want, "fp32")
    close(y, ref_group_norm_nhwc(want, gamma, beta, groups, 1e-5, True), "fp32")


def test_skip_group_norm_without_its_sum_output(ort_library):
    rng = np.random.default_rng(3)
    x, skip = (rng.standard_normal((1, 2, 2, 4)).astype(np.float32) for _ in range(2))
    g, b = np.ones(4, np.float32), np.zeros(4, np.float32)
    s = session(ort_library, [helper.make_node("SkipGroupNorm", ["x", "g", "b", "skip"], ["y"], domain="tritonforge",
                                               groups=2)],
                [vi("x", "fp32", [1, 2, 2, 4]), vi("g", "fp32", [4]), vi("b", "fp32", [4]),
                 vi("skip", "fp32", [1, 2, 2, 4])], [vi("y", "fp32", None)])
    close(s.run(None, {"x": x, "g": g, "b": b, "skip": skip})[0], ref_group_norm_nhwc(x + skip.astype(np.float64),
                                                                                     g, b, 2, 1e-5, False), "fp32")


@pytest.mark.parametrize("dtype", ["fp32", "fp16"])
@pytest.mark.parametrize("shape", [(2, 6, 7), (1, 6, 3, 5), (2, 4, 2, 3, 3)])
def test_group_normalization_nchw_matches_float64(ort_library, dtype, shape):
    rng = np.random.default_rng(4)
    c, groups = shape[1], 2
    x = (rng.standard_normal(shape) * 3 + 50).astype(T[dtype][1])  # a mean far from zero
    scale, bias = rng.uniform(0.5, 1.5, c).astype(np.float32), rng.uniform(-1, 1, c).astype(np.float32)
    for silu in (0, 1):
        s = session(ort_library, [helper.make_node("GroupNormalization", ["x", "s", "b"], ["y"], domain="tritonforge",
                                                   num_groups=groups, activation=silu, epsilon=1e-5)],
                    [vi("x", dtype, list(shape)), vi("s", "fp32", [c]), vi("b", "fp32", [c])], [vi("y", dtype, None)])
        close(s.run(None, {"x": x, "s": scale, "b": bias})[0],
              ref_group_norm_nchw(x.astype(np.float64), scale, bias, groups, 1e-5, silu), dtype)


@pytest.mark.parametrize("dtype", ["fp32", "fp16"])
@pytest.mark.parametrize("log", [False, True])
def test_softmax_last_axis_matches_float64(ort_library, dtype, log):
    rng = np.random.default_rng(5)
    x = (rng.standard_normal((3, 5, 77)) * 4).astype(T[dtype][1])
    op = "LogSoftmax" if log else "Softmax"
    s = session(ort_library, [helper.make_node(op, ["x"], ["y"], domain="tritonforge")],
                [vi("x", dtype, [3, 5, 77])], [vi("y", dtype, None)])
    v = x.astype(np.float64) - x.max(-1, keepdims=True)
    ref = v - np.log(np.exp(v).sum(-1, keepdims=True)) if log else np.exp(v) / np.exp(v).sum(-1, keepdims=True)
    close(s.run(None, {"x": x})[0], ref, dtype)


@pytest.mark.parametrize("dtype,causal,scale", [("fp32", 0, 0.0), ("fp16", 0, 0.3), ("fp32", 1, 0.0)])
@pytest.mark.parametrize("layout", ["3d", "BSHD", "BHSD"])
@pytest.mark.parametrize("kv_heads", [3, 1])
def test_multi_head_attention_matches_float64(ort_library, dtype, causal, scale, layout, kv_heads):
    from tritonforge.runtime.ops.attention import attention_ref

    rng = np.random.default_rng(6)
    b, sq, skv, heads, d = 2, 5, 7 if not causal else 5, 3, 40
    # (B, H, S, d) heads, passed in the layout under test
    q, k, v = (rng.standard_normal((b, n, s_, d)).astype(T[dtype][1]) for n, s_ in
               ((heads, sq), (kv_heads, skv), (kv_heads, skv)))
    laid = {"3d": lambda x: x.transpose(0, 2, 1, 3).reshape(b, x.shape[2], -1),
            "BSHD": lambda x: x.transpose(0, 2, 1, 3), "BHSD": lambda x: x}[layout]
    attrs = {"num_heads": heads, "scale": scale, "unidirectional": causal}
    if kv_heads != heads:
        attrs["kv_num_heads"] = kv_heads
    if layout != "3d":
        attrs["layout"] = layout
    feeds = {"q": laid(q), "k": laid(k), "v": laid(v)}
    s = session(ort_library, [helper.make_node("MultiHeadAttention", ["q", "k", "v"], ["y"], domain="tritonforge",
                                               **attrs)],
                [vi(n, dtype, list(x.shape)) for n, x in feeds.items()], [vi("y", dtype, None)])
    ref = attention_ref(q, k, v, scale or None, bool(causal))
    close(s.run(None, feeds)[0], laid(ref), dtype)


def run_error(lib, node, inputs, feeds, outputs=("y",)):
    s = session(lib, [node], inputs, [vi(o, "fp32", None) for o in outputs])
    with pytest.raises(Exception) as err:
        s.run(None, feeds)
    return str(err.value)


def test_bad_inputs_fail_the_node_naming_it_and_the_problem(ort_library):
    f32 = np.float32
    gn = helper.make_node("GroupNorm", ["x", "g", "b"], ["y"], domain="tritonforge", groups=5, name="unet.gn3")
    ins = [vi("x", "fp32", None), vi("g", "fp32", None), vi("b", "fp32", None)]
    msg = run_error(ort_library, gn, ins, {"x": np.zeros((1, 2, 2, 12), f32), "g": np.ones(12, f32),
                                           "b": np.zeros(12, f32)})
    assert "tritonforge.GroupNorm node 'unet.gn3'" in msg and "12 channels do not split into 5 groups" in msg
    msg = run_error(ort_library, gn, ins, {"x": np.zeros((2, 10), f32), "g": np.ones(10, f32), "b": np.zeros(10, f32)})
    assert "'unet.gn3'" in msg and "expected rank 4 (N, H, W, C)" in msg
    msg = run_error(ort_library, gn, ins, {"x": np.zeros((1, 1, 1, 10), f32), "g": np.ones(8, f32),
                                           "b": np.zeros(10, f32)})
    assert "input gamma has shape (8); expected (10)" in msg
    sm = helper.make_node("Softmax", ["x"], ["y"], domain="tritonforge", axis=0, name="attn")
    msg = run_error(ort_library, sm, [vi("x", "fp32", None)], {"x": np.zeros((2, 3), f32)})
    assert "'attn'" in msg and "only the last axis" in msg
    ints = helper.make_node("Softmax", ["x"], ["y"], domain="tritonforge", name="ints")
    s = session(ort_library, [ints], [vi("x", TensorProto.INT32, None)], [vi("y", TensorProto.INT32, None)])
    with pytest.raises(Exception, match="'ints'.*element type 6; float, float16 or bfloat16"):
        s.run(None, {"x": np.zeros((2, 3), np.int32)})
    nchw = helper.make_node("GroupNormalization", ["x", "s", "b"], ["y"], domain="tritonforge", num_groups=3, name="gn")
    msg = run_error(ort_library, nchw, [vi("x", "fp32", None), vi("s", "fp32", None), vi("b", "fp32", None)],
                    {"x": np.zeros((1, 4, 5), f32), "s": np.ones(4, f32), "b": np.zeros(4, f32)})
    assert "4 channels do not split into 3 groups" in msg
    mha = helper.make_node("MultiHeadAttention", ["q", "k", "v"], ["y"], domain="tritonforge", num_heads=3,
                           name="attn1")
    ins = [vi(n, "fp32", None) for n in "qkv"]
    z = lambda *shape: np.zeros(shape, f32)
    msg = run_error(ort_library, mha, ins, {"q": z(1, 4, 10), "k": z(1, 6, 10), "v": z(1, 6, 10)})
    assert "tritonforge.MultiHeadAttention node 'attn1'" in msg and "10 query channels do not split into 3 heads" in msg
    msg = run_error(ort_library, mha, ins, {"q": z(1, 4, 12), "k": z(2, 6, 12), "v": z(2, 6, 12)})
    assert "query (1, 4, 12), key (2, 6, 12), value (2, 6, 12): key and value need query's batch" in msg
    msg = run_error(ort_library, mha, ins, {"q": z(1, 4, 12), "k": z(1, 6, 12), "v": z(1, 5, 12)})
    assert "value (1, 5, 12): key and value need query's batch and one sequence" in msg
    msg = run_error(ort_library, mha, ins, {"q": z(1, 4, 12), "k": z(1, 6, 8), "v": z(1, 6, 8)})
    assert "key and value need 3 heads of 4 channels (12)" in msg
    grouped = helper.make_node("MultiHeadAttention", ["q", "k", "v"], ["y"], domain="tritonforge", name="gqa")
    msg = run_error(ort_library, grouped, ins, {"q": z(1, 3, 4, 8), "k": z(1, 2, 6, 8), "v": z(1, 2, 6, 8)})
    assert "'gqa'" in msg and "3 query heads do not share 2 key/value heads evenly" in msg
    msg = run_error(ort_library, grouped, ins, {"q": z(1, 4, 8), "k": z(1, 6, 8), "v": z(1, 6, 8)})
    assert "a 3-D query (batch, sequence, heads * head_dim) needs num_heads" in msg
    msg = run_error(ort_library, grouped, ins, {"q": z(1, 2, 4, 8), "k": z(1, 2, 6, 8), "v": z(1, 2, 6, 16)})
    assert "need one head dim" in msg
    bad = helper.make_node("MultiHeadAttention", ["q", "k", "v"], ["y"], domain="tritonforge", layout="SBHD",
                           name="odd")
    with pytest.raises(Exception, match="'odd'.*layout must be BHSD or BSHD, not 'SBHD'"):
        run_error(ort_library, bad, ins, {"q": z(1, 2, 4, 8), "k": z(1, 2, 6, 8), "v": z(1, 2, 6, 8)})


def test_a_missing_required_attribute_is_named_when_the_session_is_made(ort_library):
    gn = helper.make_node("GroupNorm", ["x", "g", "b"], ["y"], domain="tritonforge", name="nogroups")
    with pytest.raises(Exception, match="attribute 'groups' is required"):
        s = session(ort_library, [gn], [vi("x", "fp32", [1, 1, 1, 4]), vi("g", "fp32", [4]), vi("b", "fp32", [4])],
                    [vi("y", "fp32", None)])
        s.run(None, {"x": np.zeros((1, 1, 1, 4), np.float32), "g": np.ones(4, np.float32),
                     "b": np.zeros(4, np.float32)})


def test_the_library_says_what_it_was_built_from(ort_library, built):
    import json

    from tritonforge.runtime import ortlib

    doc = json.loads((built[1] / "cuda" / "multi" / "kernels.json").read_text())
    got = ortlib.info(ort_library)
    assert got["archive_sha256"] == doc["archive"]["sha256"] and got["target"] == "multi"
    left_out = {k["group"] for k in doc["left_out"]}  # built for some archs: linked as blobs of those
    assert set(got["groups"]) < set(doc["groups"]) | left_out  # the groups its ops launch, not the others
    assert left_out & set(got["groups"])
    assert any(g.startswith("GroupNormNCHW_") for g in got["groups"])
    assert {"fp16", "fp32"} <= set(got["cuda"]["GroupNormalization"])
    assert {"fp16", "fp32"} <= set(got["cuda"]["Softmax"])
    assert set(got["cuda"]["RotaryEmbedding"]) == set(got["cuda"]["BiasConcat"]) == {"fp16", "fp32", "bf16"}
    assert set(got["cuda"]["BiasSplitGelu"]) == {"fp16", "fp32", "bf16"}
    assert set(got["cuda"]["Linear"]) == {"fp16", "fp32", "bf16"}  # cuBLASLt's, opened at run time
    assert ortlib.choices(ort_library) == []  # nothing has run on a GPU here


def _ada(lib, dtype, gated, sum_out=True, name="ada", **clip):
    names = ["x", "s", "t", "b", "g", "bias"][:3 + 2 * bool(gated) + (gated == 2)]
    outs = ["y", "sum"] if gated and sum_out else ["y"]
    node = helper.make_node("AdaLayerNorm", names, outs, domain="tritonforge", epsilon=1e-6, name=name, **clip)
    return session(lib, [node], [vi(n, dtype, None) for n in names], [vi(o, dtype, None) for o in outs])


@pytest.mark.parametrize("dtype", ["fp32", "fp16"])
# gated 2: with the branch's bias; clip: the gated sum clipped where some of it passes the bounds
@pytest.mark.parametrize("gated, clip", [(0, None), (1, None), (2, None), (1, (-2.0, 3.5)), (2, (-2.0, 3.5))])
@pytest.mark.parametrize("rows", [(2, 1), (1, 1)])  # a row of scale per item, or one for all
def test_ada_layer_norm_matches_float64(ort_library, dtype, gated, rows, clip):
    from tritonforge.runtime.ops.ada_layer_norm import ada_layer_norm_ref
    rng = np.random.default_rng(gated)
    n, s, c = 2, 5, 24
    x, b = ((rng.standard_normal((n, s, c)) * 2 + 1).astype(T[dtype][1]) for _ in range(2))
    sc, sh, g = ((0.5 * rng.standard_normal(rows + (c,))).astype(T[dtype][1]) for _ in range(3))
    bias = rng.standard_normal(c).astype(T[dtype][1])
    feeds = {"x": x, "s": sc, "t": sh, **({"b": b, "g": g} if gated else {}), **({"bias": bias} if gated == 2 else {})}
    got = _ada(ort_library, dtype, gated, **({"clip_min": clip[0], "clip_max": clip[1]} if clip else {})).run(
        None, feeds)
    f = lambda a: np.broadcast_to(a.astype(np.float64).reshape(-1, c), (n, c))  # noqa: E731
    y, total = ada_layer_norm_ref(x.astype(np.float64), f(sc), f(sh), 1e-6, b.astype(np.float64) if gated else None,
                                  f(g) if gated else None, bias.astype(np.float64) if gated == 2 else None, clip)
    close(got[0], y, dtype)
    if gated:
        close(got[1], total, dtype)
        if clip:
            assert got[1].min() == clip[0] and got[1].max() == clip[1]  # the bounds were reached


def test_ada_layer_norm_gated_without_the_sum_output(ort_library):
    z = np.zeros((1, 3, 8), np.float32)
    out = _ada(ort_library, "fp32", 1, sum_out=False).run(None, {"x": z + 1, "s": z[:, :1], "t": z[:, :1] + 2,
                                                                 "b": z, "g": z[:, :1]})
    np.testing.assert_allclose(out[0], 2.0)  # a constant row normalises to zero: the shift alone


@pytest.mark.parametrize("gated", [0, 1, 2])
@pytest.mark.parametrize("shape", [(2, 4, 0), (2, 0, 8), (0, 4, 8)])  # no channels, no tokens, no items
def test_ada_layer_norm_of_nothing_is_nothing(ort_library, gated, shape):
    """A 0-sized X (a 0-wide normalized dim too) gives empty outputs of X's shape, and a bad row still fails."""
    n, _, c = shape
    z = lambda *s: np.zeros(s, np.float32)  # noqa: E731
    feeds = {"x": z(*shape), "s": z(n, 1, c), "t": z(n, 1, c), **({"b": z(*shape), "g": z(n, 1, c)} if gated else {}),
             **({"bias": z(c)} if gated == 2 else {})}
    got = _ada(ort_library, "fp32", gated).run(None, feeds)
    assert [o.shape for o in got] == [shape] * (2 if gated else 1)
    if c == 0:
        msg = run_error(ort_library, helper.make_node("AdaLayerNorm", ["x", "s", "t"], ["y"], domain="tritonforge",
                                                      name="empty"),
                        [vi(v, "fp32", None) for v in "xst"], {"x": z(*shape), "s": z(n + 1, 1, 0), "t": z(n, 1, 0)})
        assert "'empty'" in msg and f"input scale has shape ({n + 1}, 1, 0)" in msg


def test_ada_layer_norm_refuses_bad_inputs_naming_the_node_and_input(ort_library):
    z = lambda *shape: np.zeros(shape, np.float32)  # noqa: E731
    msg = run_error(ort_library, helper.make_node("AdaLayerNorm", ["x", "s", "t"], ["y"], domain="tritonforge",
                                                  name="norm1"),
                    [vi(n, "fp32", None) for n in "xst"], {"x": z(2, 4, 8), "s": z(3, 1, 8), "t": z(2, 1, 8)})
    assert "tritonforge.AdaLayerNorm node 'norm1'" in msg and "input scale has shape (3, 1, 8)" in msg
    msg = run_error(ort_library, helper.make_node("AdaLayerNorm", ["x", "s", "t", "b"], ["y"], domain="tritonforge",
                                                  name="norm2"),
                    [vi(n, "fp32", None) for n in "xstb"], {"x": z(2, 4, 8), "s": z(2, 1, 8), "t": z(2, 1, 8),
                                                            "b": z(2, 4, 8)})
    assert "'norm2'" in msg and "branch and gate come together" in msg
    msg = run_error(ort_library, helper.make_node("AdaLayerNorm", ["x", "s", "t", "b", "g"], ["y"],
                                                  domain="tritonforge", name="norm3"),
                    [vi(n, "fp32", None) for n in "xstbg"], {"x": z(2, 4, 8), "s": z(2, 1, 8), "t": z(2, 1, 8),
                                                             "b": z(2, 5, 8), "g": z(2, 1, 8)})
    assert "input branch has shape (2, 5, 8); expected X's (2, 4, 8)" in msg
    node = helper.make_node("AdaLayerNorm", ["x", "s", "t"], ["y", "sum"], domain="tritonforge", name="norm4")
    msg = run_error(ort_library, node, [vi(n, "fp32", None) for n in "xst"],
                    {"x": z(2, 4, 8), "s": z(2, 1, 8), "t": z(2, 1, 8)}, outputs=["y", "sum"])
    assert "'norm4'" in msg and "needs the inputs branch and gate" in msg
    msg = run_error(ort_library, helper.make_node("AdaLayerNorm", ["x", "s", "t", "b", "g", "bias"], ["y"],
                                                  domain="tritonforge", name="norm5"),
                    [vi(n, "fp32", None) for n in ("x", "s", "t", "b", "g", "bias")],
                    {"x": z(2, 4, 8), "s": z(2, 1, 8), "t": z(2, 1, 8), "b": z(2, 4, 8), "g": z(2, 1, 8), "bias": z(9)})
    assert "'norm5'" in msg and "input bias has shape (9); expected one row of 8" in msg
    msg = run_error(ort_library, helper.make_node("AdaLayerNorm", ["x", "s", "t", "", "", "bias"], ["y"],
                                                  domain="tritonforge", name="norm6"),
                    [vi(n, "fp32", None) for n in ("x", "s", "t", "bias")],
                    {"x": z(2, 4, 8), "s": z(2, 1, 8), "t": z(2, 1, 8), "bias": z(8)})
    assert "'norm6'" in msg and "input bias is the branch's: it needs the inputs branch and gate" in msg
    msg = run_error(ort_library, helper.make_node("AdaLayerNorm", ["x", "s", "t"], ["y"], domain="tritonforge",
                                                  name="norm7", clip_max=65504.0),
                    [vi(n, "fp32", None) for n in "xst"], {"x": z(2, 4, 8), "s": z(2, 1, 8), "t": z(2, 1, 8)})
    assert "'norm7'" in msg and "clip_min and clip_max bound the gated residual's sum" in msg
    with pytest.raises(Exception, match="clip_min 3.000000 is above clip_max -3.000000"):
        _ada(ort_library, "fp32", 1, clip_min=3.0, clip_max=-3.0)


# ---- RotaryEmbedding ----------------------------------------------------------------------------------
def _rotary(lib, dtype, name="rope"):
    node = helper.make_node("RotaryEmbedding", ["x", "cos", "sin"], ["y"], domain="tritonforge", name=name)
    return session(lib, [node], [vi("x", dtype, None), vi("cos", "fp32", None), vi("sin", "fp32", None)],
                   [vi("y", dtype, None)])


@pytest.mark.parametrize("dtype", ["fp32", "fp16"])
@pytest.mark.parametrize("x_shape, cos_shape", [
    ((2, 7, 3, 16), (1, 7, 1, 16)),  # Flux: (B, S, H, D) heads, one row per position
    ((2, 3, 7, 16), (7, 16)),  # (B, H, S, D) heads
    ((2, 7, 48), (2, 7, 48)),  # whole token rows, a row per token of each item
    ((1, 3, 7, 8), (1, 1, 7, 8)),  # X's unit axes take no part
    ((2, 5, 6), (6,)),  # one row for all
])
def test_rotary_embedding_matches_float64(ort_library, dtype, x_shape, cos_shape):
    from tritonforge.runtime.ops.rotary_embedding import rotary_embedding_ref

    rng = np.random.default_rng(3)
    x = rng.standard_normal(x_shape).astype(T[dtype][1])
    angle = rng.uniform(-np.pi, np.pi, cos_shape)
    cos, sin = np.cos(angle).astype(np.float32), np.sin(angle).astype(np.float32)
    (y,) = _rotary(ort_library, dtype).run(None, {"x": x, "cos": cos, "sin": sin})
    assert y.dtype == x.dtype and y.shape == x.shape
    close(y, rotary_embedding_ref(x.astype(np.float64), cos.astype(np.float64), sin.astype(np.float64)), dtype)


def test_rotary_embedding_turns_each_pair(ort_library):
    """A quarter turn takes (a, b) to (-b, a); no turn leaves x."""
    x = np.arange(1, 9, dtype=np.float32).reshape(1, 8)
    s = _rotary(ort_library, "fp32")
    (y,) = s.run(None, {"x": x, "cos": np.zeros((1, 8), np.float32), "sin": np.ones((1, 8), np.float32)})
    np.testing.assert_array_equal(y, [[-2, 1, -4, 3, -6, 5, -8, 7]])
    (y,) = s.run(None, {"x": x, "cos": np.ones((1, 8), np.float32), "sin": np.zeros((1, 8), np.float32)})
    np.testing.assert_array_equal(y, x)


def test_rotary_embedding_refuses_bad_inputs_naming_the_node_and_input(ort_library):
    z = lambda *shape: np.zeros(shape, np.float32)  # noqa: E731
    node = helper.make_node("RotaryEmbedding", ["x", "cos", "sin"], ["y"], domain="tritonforge", name="attn.rope_q")
    ins = [vi(n, "fp32", None) for n in ("x", "cos", "sin")]
    msg = run_error(ort_library, node, ins, {"x": z(2, 7, 3, 15), "cos": z(7, 15), "sin": z(7, 15)})
    assert "tritonforge.RotaryEmbedding node 'attn.rope_q'" in msg and "expected (..., D) with D even" in msg
    msg = run_error(ort_library, node, ins, {"x": z(2, 7, 3, 16), "cos": z(1, 7, 1, 8), "sin": z(1, 7, 1, 8)})
    assert "cos has shape (1, 7, 1, 8) against X's (2, 7, 3, 16)" in msg and "X's last dim" in msg
    msg = run_error(ort_library, node, ins, {"x": z(2, 7, 3, 16), "cos": z(1, 6, 1, 16), "sin": z(1, 6, 1, 16)})
    assert "dim 1 is neither 1 nor X's" in msg
    msg = run_error(ort_library, node, ins, {"x": z(2, 7, 3, 16), "cos": z(2, 1, 3, 16), "sin": z(2, 1, 3, 16)})
    assert "not one run of X's axes" in msg
    msg = run_error(ort_library, node, ins, {"x": z(2, 7, 3, 16), "cos": z(7, 1, 16), "sin": z(7, 16)})
    assert "inputs cos (7, 1, 16) and sin (7, 16) differ in shape" in msg
    half = [vi("x", "fp32", None), vi("cos", "fp16", None), vi("sin", "fp16", None)]
    with pytest.raises(Exception, match="Type Error|type"):  # cos and sin are float: ORT itself says so at load
        run_error(ort_library, node, half, {})


def _rotary_rms(lib, dtype, joined, name="rope_qk", axis=1):
    names = ["x", "cos", "sin", "gamma", *(["xb", "gamma_b"] if joined else [])]
    node = helper.make_node("RotaryEmbedding", names, ["y"], domain="tritonforge", name=name, epsilon=1e-6,
                            **({"axis": axis} if joined else {}))
    return session(lib, [node], [vi(n, dtype if n in ("x", "xb") else "fp32", None) for n in names],
                   [vi("y", dtype, None)])


@pytest.mark.parametrize("dtype", ["fp32", "fp16"])
@pytest.mark.parametrize("joined", [False, True])
def test_rotary_embedding_with_its_q_k_norm_matches_float64(ort_library, dtype, joined):
    """Flux's q/k norm before the rotation: (B, S, H, D) heads RMS-normalized over D with gamma; joined, 5 text
    tokens with gamma then 7 image tokens with gamma_b on the token axis, as its double blocks do."""
    from tritonforge.runtime.ops.rotary_embedding import rms_norm_ref, rotary_embedding_ref

    rng = np.random.default_rng(7)
    a = (rng.standard_normal((2, 5, 3, 16)) * 4).astype(T[dtype][1])
    b = rng.standard_normal((2, 7, 3, 16)).astype(T[dtype][1])
    ga, gb = (rng.uniform(0.5, 1.5, 16).astype(np.float32) for _ in range(2))
    tokens = 12 if joined else 5
    angle = rng.uniform(-np.pi, np.pi, (1, tokens, 1, 16))
    cos, sin = np.cos(angle).astype(np.float32), np.sin(angle).astype(np.float32)
    feeds = {"x": a, "cos": cos, "sin": sin, "gamma": ga, **({"xb": b, "gamma_b": gb} if joined else {})}
    (y,) = _rotary_rms(ort_library, dtype, joined).run(None, feeds)
    x = rms_norm_ref(a.astype(np.float64), ga, 1e-6)
    if joined:
        x = np.concatenate([x, rms_norm_ref(b.astype(np.float64), gb, 1e-6)], axis=1)
    assert y.dtype == a.dtype and y.shape == (2, tokens, 3, 16)
    close(y, rotary_embedding_ref(x, cos.astype(np.float64), sin.astype(np.float64)), dtype)


def test_rotary_embedding_with_its_q_k_norm_refuses_bad_inputs_naming_the_node_and_input(ort_library):
    z = lambda *shape: np.ones(shape, np.float32)  # noqa: E731
    feeds = {"x": z(2, 5, 3, 16), "cos": z(1, 12, 1, 16), "sin": z(1, 12, 1, 16), "gamma": z(16), "xb": z(2, 7, 3, 16),
             "gamma_b": z(16)}
    s = _rotary_rms(ort_library, "fp32", True)
    for bad, why in (({"gamma": z(8)}, "input gamma has shape (8); expected (16) (X's last dim)"),
                     ({"xb": z(2, 7, 4, 16)}, "input X_b has shape (2, 7, 4, 16); expected X's (2, 5, 3, 16) but on "
                                              "axis 1"),
                     ({"cos": z(1, 5, 1, 16), "sin": z(1, 5, 1, 16)},  # cos of X's tokens, not the join's
                      "cos has shape (1, 5, 1, 16) against the join of X and X_b's (2, 12, 3, 16)")):
        with pytest.raises(Exception) as err:
            s.run(None, {**feeds, **bad})
        assert "tritonforge.RotaryEmbedding node 'rope_qk'" in str(err.value) and why in str(err.value), err.value
    with pytest.raises(Exception, match="attribute axis 3 is not an axis of X"):
        _rotary_rms(ort_library, "fp32", True, name="r2", axis=3).run(None, feeds)
    node = helper.make_node("RotaryEmbedding", ["x", "cos", "sin", "", "xb"], ["y"], domain="tritonforge", name="r3")
    msg = run_error(ort_library, node, [vi(n, "fp32", None) for n in ("x", "cos", "sin", "xb")],
                    {k: feeds[k] for k in ("x", "cos", "sin", "xb")})
    assert "'r3'" in msg and "inputs X_b and gamma_b join a second stream to the norm's: they need gamma" in msg
    node = helper.make_node("RotaryEmbedding", ["x", "cos", "sin", "gamma", "xb"], ["y"], domain="tritonforge",
                            name="r4", axis=1)
    msg = run_error(ort_library, node, [vi(n, "fp32", None) for n in ("x", "cos", "sin", "gamma", "xb")],
                    {k: feeds[k] for k in ("x", "cos", "sin", "gamma", "xb")})
    assert "'r4'" in msg and "inputs X_b and gamma_b come together: one is missing" in msg


# ---- BiasConcat ---------------------------------------------------------------------------------------
def _bias_concat(lib, dtype, name="join"):
    node = helper.make_node("BiasConcat", ["a", "b", "ba", "bb"], ["y"], domain="tritonforge", name=name)
    return session(lib, [node], [vi(n, dtype, None) for n in ("a", "b", "ba", "bb")], [vi("y", dtype, None)])


@pytest.mark.parametrize("dtype", ["fp32", "fp16"])
def test_bias_concat_matches_float64(ort_library, dtype):
    """SD3's joint attention in small: 2 items of 6 image tokens and 3 text tokens, 16 channels."""
    from tritonforge.runtime.ops.bias_concat import bias_concat_ref

    rng = np.random.default_rng(5)
    a, b = (rng.standard_normal((2, s, 16)).astype(T[dtype][1]) for s in (6, 3))
    ba, bb = (rng.standard_normal(16).astype(T[dtype][1]) for _ in range(2))
    (y,) = _bias_concat(ort_library, dtype).run(None, {"a": a, "b": b, "ba": ba, "bb": bb})
    assert y.shape == (2, 9, 16) and y.dtype == a.dtype
    close(y, bias_concat_ref(*(v.astype(np.float64) for v in (a, b, ba, bb))), dtype)


def test_bias_concat_refuses_bad_inputs_naming_the_node_and_input(ort_library):
    z = lambda *shape: np.zeros(shape, np.float32)  # noqa: E731
    node = helper.make_node("BiasConcat", ["a", "b", "ba", "bb"], ["y"], domain="tritonforge", name="attn.join_q")
    ins = [vi(n, "fp32", None) for n in ("a", "b", "ba", "bb")]
    msg = run_error(ort_library, node, ins, {"a": z(2, 6, 16), "b": z(1, 3, 16), "ba": z(16), "bb": z(16)})
    assert "tritonforge.BiasConcat node 'attn.join_q'" in msg and "input B has shape (1, 3, 16)" in msg
    msg = run_error(ort_library, node, ins, {"a": z(2, 6, 16), "b": z(2, 3, 16), "ba": z(16), "bb": z(8)})
    assert "input bias_b has shape (8); expected (16)" in msg
    msg = run_error(ort_library, node, ins, {"a": z(12, 16), "b": z(2, 3, 16), "ba": z(16), "bb": z(16)})
    assert "input A has shape (12, 16); expected (items, tokens, channels)" in msg


# ---- BiasSplitGelu -------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["fp32", "fp16"])
def test_bias_split_gelu_matches_float64(ort_library, dtype):
    """A UNet's GEGLU in small: 2 items of 5 tokens, 2 x 24 channels to 24, the output's shape from the kernel."""
    from tritonforge.runtime.ops.bias_split_gelu import bias_split_gelu_ref

    rng = np.random.default_rng(7)
    x = rng.standard_normal((2, 5, 48)).astype(T[dtype][1])
    b = rng.standard_normal(48).astype(T[dtype][1])
    node = helper.make_node("BiasSplitGelu", ["x", "b"], ["y"], domain="tritonforge", name="ff.geglu")
    s = session(ort_library, [node], [vi(n, dtype, None) for n in "xb"], [vi("y", dtype, None)])
    (y,) = s.run(None, {"x": x, "b": b})
    assert y.shape == (2, 5, 24) and y.dtype == x.dtype
    close(y, bias_split_gelu_ref(x.astype(np.float64), b.astype(np.float64)), dtype)


def test_bias_split_gelu_refuses_bad_inputs_naming_the_node_and_input(ort_library):
    z = lambda *shape: np.zeros(shape, np.float32)  # noqa: E731
    node = helper.make_node("BiasSplitGelu", ["x", "b"], ["y"], domain="tritonforge", name="ff.geglu")
    ins = [vi(n, "fp32", None) for n in "xb"]
    msg = run_error(ort_library, node, ins, {"x": z(2, 5, 47), "b": z(47)})
    assert "tritonforge.BiasSplitGelu node 'ff.geglu'" in msg and "an even last dim" in msg
    msg = run_error(ort_library, node, ins, {"x": z(2, 5, 48), "b": z(24)})
    assert "input bias has shape (24); expected (48), X's last dim" in msg


# ---- Linear ----------------------------------------------------------------------------------------------
def _linear_ref(x, w, b, activation):
    y = x.astype(np.float64) @ w.astype(np.float64) + b.astype(np.float64)
    if activation == "gelu_tanh":
        y = 0.5 * y * (1 + np.tanh(np.sqrt(2 / np.pi) * (y + 0.044715 * y ** 3)))
    return y


@pytest.mark.parametrize("dtype", ["fp32", "fp16"])
@pytest.mark.parametrize("activation", ["none", "gelu_tanh"])
def test_linear_matches_float64(ort_library, dtype, activation):
    """A DiT's projection in small: 2 items of 5 tokens, 24 channels to 40, the output's shape inferred by the op."""
    rng = np.random.default_rng(11)
    x = rng.standard_normal((2, 5, 24)).astype(T[dtype][1])
    w = (rng.standard_normal((24, 40)) / 5).astype(T[dtype][1])
    b = rng.standard_normal(40).astype(T[dtype][1])
    node = helper.make_node("Linear", ["x", "w", "b"], ["y"], domain="tritonforge", activation=activation, name="ff")
    s = session(ort_library, [node], [vi(n, dtype, None) for n in "xwb"], [vi("y", dtype, None)])
    (y,) = s.run(None, {"x": x, "w": w, "b": b})
    assert y.shape == (2, 5, 40) and y.dtype == x.dtype
    close(y, _linear_ref(x, w, b, activation), dtype)


def test_linear_infers_the_output_shape_with_w_n_last():
    """ONNX inference sees the op's output as X's leading dims and W's N (the graph's output left unshaped)."""
    from tritonforge.runtime.ortlib.rewrite.graph import Graph

    node = helper.make_node("Linear", ["x", "w", "b"], ["y"], domain="tritonforge")
    g = helper.make_graph([node], "t", [vi("x", "fp16", ["batch", 7, 24]), vi("w", "fp16", [24, 40]),
                                        vi("b", "fp16", [40])], [vi("y", "fp16", None)])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid("tritonforge", 1)])
    assert Graph(model).dims("y")[1:] == [7, 40]


def test_linear_refuses_bad_inputs_naming_the_node_and_input(ort_library):
    z = lambda *shape: np.zeros(shape, np.float32)  # noqa: E731
    node = helper.make_node("Linear", ["x", "w", "b"], ["y"], domain="tritonforge", name="blocks.0.ff.net.0")
    ins = [vi(n, "fp32", None) for n in "xwb"]
    msg = run_error(ort_library, node, ins, {"x": z(2, 5, 24), "w": z(16, 40), "b": z(40)})
    assert "tritonforge.Linear node 'blocks.0.ff.net.0'" in msg
    assert "input W has shape (16, 40); expected (24, N)" in msg
    msg = run_error(ort_library, node, ins, {"x": z(2, 5, 24), "w": z(24, 40), "b": z(24)})
    assert "input bias has shape (24); expected (40), W's N" in msg
    msg = run_error(ort_library, node, ins, {"x": z(), "w": z(24, 40), "b": z(40)})
    assert "input X is a scalar" in msg
    bad = helper.make_node("Linear", ["x", "w", "b"], ["y"], domain="tritonforge", activation="relu", name="proj")
    with pytest.raises(Exception, match="activation 'relu' is not one of none, gelu_tanh"):
        session(ort_library, [bad], ins, [vi("y", "fp32", None)])


# ---- Fp8Linear -------------------------------------------------------------------------------------------
def _fp8_weight(w, name="w"):
    """(the FLOAT8E4M3FN initializer of W (K, N) as the rewrite writes it, (N, K), its scales, W as they give it)."""
    from tritonforge.runtime.ortlib.fp8 import from_e4m3_bytes, quantize_rows

    q, scale = quantize_rows(w.T.astype(np.float64))
    init = helper.make_tensor(name, TensorProto.FLOAT8E4M3FN, q.shape, q.tobytes(), raw=True)
    return init, scale, (from_e4m3_bytes(q) * scale[:, None].astype(np.float64)).T


def _fp8_session(ort_library, init, scale, dtype, activation="none"):
    node = helper.make_node("Fp8Linear", ["x", "w", "s", "b"], ["y"], domain="tritonforge", activation=activation,
                            name="ff")
    return session(ort_library, [node], [vi("x", dtype, None), vi("b", dtype, None)], [vi("y", dtype, None)],
                   inits=[init, helper.make_tensor("s", TensorProto.FLOAT, scale.shape, scale)])


@pytest.mark.parametrize("dtype", ["fp32", "fp16"])
@pytest.mark.parametrize("activation", ["none", "gelu_tanh"])
def test_fp8_linear_on_the_cpu_computes_what_the_gpu_does_in_float64(ort_library, dtype, activation):
    """On the CPU, X's rows quantized as the GPU's kernel quantizes them and the e4m3 weight times its per-channel
    scale, multiplied in double: the float64 product of those operands, and within e4m3's rounding (2^-4 relative
    an operand) of the unquantized product."""
    from tritonforge.runtime.ortlib.fp8 import from_e4m3_bytes, quantize_rows

    rng = np.random.default_rng(12)
    x = (rng.standard_normal((2, 5, 32)) * rng.uniform(0.1, 8, (2, 5, 1))).astype(T[dtype][1])  # rows of all sizes
    w = rng.standard_normal((32, 48)) * rng.uniform(0.01, 1, 48)  # channels of different magnitudes
    b = rng.standard_normal(48).astype(T[dtype][1])
    init, scale, w_deq = _fp8_weight(w)
    (y,) = _fp8_session(ort_library, init, scale, dtype, activation).run(None, {"x": x, "b": b})
    assert y.shape == (2, 5, 48) and y.dtype == x.dtype
    xq, xs = quantize_rows(x.astype(np.float64))
    close(y, _linear_ref(from_e4m3_bytes(xq) * xs[..., None].astype(np.float64), w_deq, b, activation), dtype)
    assert np.abs(y - _linear_ref(x, w, b, activation)).max() < 0.15 * np.abs(_linear_ref(x, w, b, "none")).max()


def test_fp8_linear_rounds_activations_to_nearest_even_and_saturates_as_the_gpu(ort_library):
    """A row whose largest magnitude is 448 keeps scale 1, so the output through an identity weight is X's e4m3
    values themselves: ties go to the even mantissa, subnormals keep their 2^-9 step, signs stay."""
    from tritonforge.runtime.ortlib.fp8 import round_e4m3

    row = np.array([448, 1.0625, 1.1875, 3 * 2.0 ** -10, -5 * 2.0 ** -10, -447.9, 2.0 ** -12, 0.0, -1e-3, 239.9,
                    1.0 + 2.0 ** -4 + 2.0 ** -12, -17.0, 7.5 * 2.0 ** -9, 0.3, -0.3, 100.0], np.float32)
    # 448/512 on the diagonal: each channel's scale is 2^-9 and its e4m3 448, so the weight is exact
    init, scale, _ = _fp8_weight(np.eye(16) * 0.875)
    (y,) = _fp8_session(ort_library, init, scale, "fp32").run(None, {"x": row[None], "b": np.zeros(16, np.float32)})
    np.testing.assert_array_equal(y[0] / 0.875, round_e4m3(row).astype(np.float32))
    assert list(y[0, :5] / 0.875) == [448, 1.0, 1.25, 2 * 2.0 ** -9, -2 * 2.0 ** -9]


def test_fp8_linear_refuses_bad_inputs_naming_the_node_and_input(ort_library):
    rng = np.random.default_rng(13)
    init, scale, _ = _fp8_weight(rng.standard_normal((32, 48)))
    node = helper.make_node("Fp8Linear", ["x", "w", "s", "b"], ["y"], domain="tritonforge", name="blocks.3.attn.to_q")

    def error(x, s, b):
        sess = session(ort_library, [node], [vi("x", "fp32", None), vi("s", "fp32", None), vi("b", "fp32", None)],
                       [vi("y", "fp32", None)], inits=[init])
        with pytest.raises(Exception) as err:
            sess.run(None, {"x": x, "s": s, "b": b})
        return str(err.value)

    z = lambda *shape: np.zeros(shape, np.float32)  # noqa: E731
    msg = error(z(2, 24), scale, z(48))
    assert "tritonforge.Fp8Linear node 'blocks.3.attn.to_q'" in msg
    assert "input W has shape (48, 32); expected (N, 24)" in msg
    assert "input w_scale has shape (47); expected (48)" in error(z(2, 32), scale[:47], z(48))
    assert "input bias has shape (40); expected (48), W's N" in error(z(2, 32), scale, z(40))
    (y,) = session(ort_library, [node], [vi("x", "fp32", None), vi("s", "fp32", None), vi("b", "fp32", None)],
                   [vi("y", "fp32", None)], inits=[init]).run(None, {"x": z(0, 32), "s": scale, "b": z(48)})
    assert y.shape == (0, 48)  # no tokens: an empty output, nothing run
