"""The rewrite puts GroupNorm and softmax nodes into the library's domain and the model still computes
the same thing: ONNX Runtime's own CPU kernels on the original, the library's on the rewrite."""

from __future__ import annotations

import numpy as np
import pytest

ort = pytest.importorskip("onnxruntime", reason="the rewritten models run in onnxruntime")
onnx = pytest.importorskip("onnx", reason="the rewrite edits ONNX models")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from tritonforge.runtime.ortlib.rewrite import RewriteError, rewrite, rewrite_file  # noqa: E402


def model(nodes, inputs, outputs, inits, opset, extra=()):
    g = helper.make_graph(nodes, "m", inputs, outputs, inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset), *extra])


def run(m, feeds, lib=None):
    so = ort.SessionOptions()
    so.log_severity_level = 4
    if lib:
        so.register_custom_ops_library(str(lib))
    return ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"]).run(None, feeds)


def sd_block(opset: int, c=8, groups=4):
    """GroupNormalization -> SiLU (Sigmoid, Mul) -> Softmax over the last axis, and a softmax over axis 1."""
    rng = np.random.default_rng(0)
    n_scale = groups if opset < 21 else c
    inits = [numpy_helper.from_array(rng.uniform(0.5, 1.5, n_scale).astype(np.float32), "scale"),
             numpy_helper.from_array(rng.uniform(-1, 1, n_scale).astype(np.float32), "bias")]
    nodes = [helper.make_node("GroupNormalization", ["x", "scale", "bias"], ["gn"], num_groups=groups, epsilon=1e-5,
                              name="up.0.norm1"),
             helper.make_node("Sigmoid", ["gn"], ["sig"]), helper.make_node("Mul", ["gn", "sig"], ["act"]),
             helper.make_node("Softmax", ["act"], ["y"], axis=-1, name="attn"),
             helper.make_node("Softmax", ["act"], ["z"], axis=1, name="across")]
    f = TensorProto.FLOAT
    shape = [2, c, 5, 6]
    return model(nodes, [helper.make_tensor_value_info("x", f, shape)],
                 [helper.make_tensor_value_info("y", f, shape), helper.make_tensor_value_info("z", f, shape)],
                 inits, opset)


@pytest.mark.parametrize("opset", [18, 21])
def test_group_normalization_and_softmax_rewritten_compute_the_same(ort_library, opset):
    m = sd_block(opset)
    x = (np.random.default_rng(1).standard_normal((2, 8, 5, 6)) * 3 + 2).astype(np.float32)
    want = run(m, {"x": x})
    report = rewrite(m, ort_library, softmax_min_cols=0)  # its rows of 6: rewritten only when asked
    assert report.rewritten == {"GroupNormalization": 1, "Softmax": 1} and report.fused_silu == 1
    assert any("'across'" in why and "axis 1 is not the last" in why for why in report.left)
    ops = [(n.domain, n.op_type, n.name) for n in m.graph.node]
    assert ops == [("tritonforge", "GroupNormalization", "up.0.norm1"), ("tritonforge", "Softmax", "attn"),
                   ("", "Softmax", "across")]
    onnx.checker.check_model(m)
    got = run(m, {"x": x}, ort_library)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, atol=2e-5, rtol=1e-4)


def test_microsoft_group_norm_gets_fp32_parameters(ort_library):
    rng = np.random.default_rng(2)
    c = 16
    inits = [numpy_helper.from_array(rng.uniform(0.5, 1.5, c).astype(np.float16), "gamma"),
             numpy_helper.from_array(rng.uniform(-1, 1, c).astype(np.float16), "beta")]
    h = TensorProto.FLOAT16
    m = model([helper.make_node("GroupNorm", ["x", "gamma", "beta"], ["y"], domain="com.microsoft", groups=4,
                                activation=1, channels_last=1, epsilon=1e-5, name="gn")],
              [helper.make_tensor_value_info("x", h, [1, 3, 3, c])],
              [helper.make_tensor_value_info("y", h, [1, 3, 3, c])],
              inits, 17, [helper.make_opsetid("com.microsoft", 1)])
    report = rewrite(m, ort_library)
    assert report.rewritten == {"GroupNorm": 1}
    node = m.graph.node[0]
    assert (node.domain, node.op_type) == ("tritonforge", "GroupNorm")
    gammas = {t.name: t for t in m.graph.initializer}
    assert gammas[node.input[1]].data_type == TensorProto.FLOAT
    x = rng.standard_normal((1, 3, 3, c)).astype(np.float16)
    v = x.astype(np.float64).reshape(1, 9, 4, 4)
    y = ((v - v.mean((1, 3), keepdims=True)) / np.sqrt(v.var((1, 3), keepdims=True) + 1e-5)).reshape(x.shape)
    y = y * numpy_helper.to_array(inits[0]).astype(np.float64) + numpy_helper.to_array(inits[1])
    y = y / (1 + np.exp(-y))
    np.testing.assert_allclose(run(m, {"x": x}, ort_library)[0].astype(np.float64), y, atol=2e-2)


def test_what_does_not_qualify_is_left_with_the_reason(ort_library):
    f = TensorProto.FLOAT
    m = model([helper.make_node("GroupNormalization", ["x", "s", "b"], ["y"], num_groups=2, name="dyn")],
              [helper.make_tensor_value_info(n, f, shape) for n, shape in (("x", [1, 4, 3]), ("s", [4]), ("b", [4]))],
              [helper.make_tensor_value_info("y", f, [1, 4, 3])], [], 21)
    report = rewrite(m, ort_library)
    assert not report.rewritten
    assert report.left == ["GroupNormalization node 'dyn': scale and bias are not initializers"]
    assert m.graph.node[0].domain == ""


def test_rewrite_skips_ops_the_library_has_no_cuda_kernel_for(ort_library_ort_profile):
    m = sd_block(21)
    report = rewrite(m, ort_library_ort_profile, softmax_min_cols=0)
    assert "GroupNormalization" not in report.rewritten
    assert any("no CUDA GroupNormalization kernel for fp32" in why for why in report.left)
    assert report.rewritten["Softmax"] == 1  # ORT's softmax groups are in its profile


def _softmax_model(cols, elem=TensorProto.FLOAT16):
    shape = [2, 8, 64, cols]
    return model([helper.make_node("Softmax", ["x"], ["y"], axis=-1, name="attn")],
                 [helper.make_tensor_value_info("x", elem, shape)], [helper.make_tensor_value_info("y", elem, shape)],
                 [], 17)


def test_short_softmax_rows_stay_orts_where_orts_kernel_measured_faster(ort_library):
    for cols, elem, why in ((77, TensorProto.FLOAT16, "rows of 77: ORT's own kernel measured faster under 256 "
                                                       "columns (fp16)"),
                            (256, TensorProto.FLOAT16, None),
                            (512, TensorProto.FLOAT, "rows of 512: ORT's own kernel measured faster under 1024 "
                                                     "columns (fp32)"),
                            (4096, TensorProto.FLOAT, None),
                            ("k", TensorProto.FLOAT16, "the last axis' length is not known")):
        m = _softmax_model(cols, elem)
        report = rewrite(m, ort_library)
        assert (m.graph.node[0].domain == "tritonforge") == (why is None), (cols, report.left)
        if why:
            assert report.left[0].startswith(f"Softmax node 'attn': {why}"), report.left
    m = _softmax_model(77)
    assert rewrite(m, ort_library, softmax_min_cols=0).rewritten == {"Softmax": 1}
    m = _softmax_model(300)
    assert rewrite(m, ort_library, softmax_min_cols={"fp16": 512}).left[0].endswith(
        "rewrites it anyway") and m.graph.node[0].domain == ""


def test_rewrite_file_writes_a_new_model_and_refuses_its_own_input(ort_library, tmp_path):
    src = tmp_path / "block.onnx"
    onnx.save(sd_block(18), str(src))
    with pytest.raises(RewriteError, match="would overwrite"):
        rewrite_file(src, src, ort_library)
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"not a model")
    with pytest.raises(RewriteError, match="bad.onnx: cannot read an ONNX model"):
        rewrite_file(bad, tmp_path / "out.onnx", ort_library)
    assert not (tmp_path / "out.onnx").exists()
    report = rewrite_file(src, tmp_path / "block.tf.onnx", ort_library)
    assert report.rewritten["GroupNormalization"] == 1
    assert {n.domain for n in onnx.load(str(tmp_path / "block.tf.onnx")).graph.node} == {"tritonforge", ""}


def test_nodes_after_convolutions_are_typed_and_rewritten(ort_library):
    """GroupNormalization -> SiLU -> Conv -> GroupNormalization: ONNX infers nothing past the first
    GroupNormalization (onnx 1.23); the rewrite still types and rewrites both."""
    rng = np.random.default_rng(3)
    c = 8
    f = TensorProto.FLOAT
    inits = [numpy_helper.from_array(rng.uniform(0.5, 1.5, c).astype(np.float32), n) for n in ("s1", "s2")]
    inits += [numpy_helper.from_array(rng.uniform(-1, 1, c).astype(np.float32), n) for n in ("b1", "b2")]
    inits.append(numpy_helper.from_array((rng.standard_normal((c, c, 3, 3)) * 0.2).astype(np.float32), "w"))
    nodes = [helper.make_node("GroupNormalization", ["x", "s1", "b1"], ["g1"], num_groups=2, name="n1"),
             helper.make_node("Sigmoid", ["g1"], ["a1"]), helper.make_node("Mul", ["g1", "a1"], ["h1"]),
             helper.make_node("Conv", ["h1", "w"], ["h2"], pads=[1, 1, 1, 1]),
             helper.make_node("GroupNormalization", ["h2", "s2", "b2"], ["y"], num_groups=4, name="n2")]
    m = model(nodes, [helper.make_tensor_value_info("x", f, [1, c, 6, 6])],
              [helper.make_tensor_value_info("y", f, [1, c, 6, 6])], inits, 21)
    x = rng.standard_normal((1, c, 6, 6)).astype(np.float32)
    want = run(m, {"x": x})[0]
    report = rewrite(m, ort_library)
    assert report.rewritten == {"GroupNormalization": 2} and report.fused_silu == 1 and not report.left
    np.testing.assert_allclose(run(m, {"x": x}, ort_library)[0], want, atol=2e-5, rtol=1e-4)
