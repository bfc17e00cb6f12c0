"""benchmarks/linear_epilogue_bench.py's graphs: each form of a UNet block's Linear and what follows it computes the
block (float64 maths of its own here), so the bench times like against like; the CPU EP runs every form but ORT's
BiasSplitGelu (CUDA only), whose graph is checked to be the op as the rewrite writes it (the library's runs on its CPU
op)."""

from __future__ import annotations

import math

import numpy as np
import pytest

ort = pytest.importorskip("onnxruntime")
onnx = pytest.importorskip("onnx")

from benchmarks import linear_epilogue_bench as bench  # noqa: E402

ITEMS, TOKENS, C = 2, 5, 16


def _weights(op: str) -> dict:
    rng = np.random.default_rng(0)
    width = 8 * C if op == "bias_split_gelu" else C
    w = {"W": rng.standard_normal((C, width)) / 4, "b": rng.uniform(-0.5, 0.5, width)}
    if op == "skip_layer_norm":
        w.update(gamma=rng.uniform(0.5, 1.5, C), beta=rng.uniform(-0.5, 0.5, C))
    return w


def _expected(op: str, x: np.ndarray, r: np.ndarray, w: dict) -> np.ndarray:
    v = x @ w["W"] + w["b"]
    if op == "bias_split_gelu":
        a, g = np.split(v, 2, axis=-1)
        return a * 0.5 * g * (1 + np.vectorize(math.erf)(g / math.sqrt(2)))
    s = v + r
    return (s - s.mean(-1, keepdims=True)) / np.sqrt(s.var(-1, keepdims=True) + bench.EPS) * w["gamma"] + w["beta"]


@pytest.mark.parametrize("dtype,tol", [("fp32", 1e-5), ("fp16", 2e-2)])
@pytest.mark.parametrize("op,form", [("skip_layer_norm", "export"), ("skip_layer_norm", "skip_layer_norm"),
                                     ("bias_split_gelu", "decomposed"), ("bias_split_gelu", "onnx_gelu"),
                                     ("bias_split_gelu", "tritonforge"), ("skip_layer_norm", "matmul"),
                                     ("bias_split_gelu", "matmul")])
def test_each_form_computes_the_block(request, op, form, dtype, tol):
    w = _weights(op)
    model = bench.model(op, form, ITEMS, TOKENS, C, dtype, 2, w)
    onnx.checker.check_model(model)
    rng = np.random.default_rng(1)
    np_type = np.float32 if dtype == "fp32" else np.float16
    x, r = (rng.standard_normal((ITEMS, TOKENS, C)).astype(np_type) for _ in range(2))
    feeds = {"x0": x, "x1": x}
    if op == "skip_layer_norm" and form != "matmul":
        feeds |= {"x0r": r, "x1r": r}
    so = ort.SessionOptions()
    if form in bench.LIBRARY_FORMS:
        so.register_custom_ops_library(str(request.getfixturevalue("ort_library")))
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    out = dict(zip([o.name for o in sess.get_outputs()], sess.run(None, feeds)))
    host = {k: v.astype(np_type).astype(np.float64) for k, v in w.items()}  # as the model holds them
    x64, r64 = x.astype(np.float64), r.astype(np.float64)
    want = x64 @ host["W"] if form == "matmul" else _expected(op, x64, r64, host)
    for name in ("y0", "y1"):
        np.testing.assert_allclose(out[name].astype(np.float64), want, rtol=tol, atol=tol)
    if op == "skip_layer_norm" and form != "matmul":  # the sum, as the next residual reads it
        np.testing.assert_allclose(out["y0s"].astype(np.float64), x64 @ host["W"] + host["b"] + r64, rtol=tol,
                                   atol=tol)


def test_the_fused_geglu_is_one_bias_split_gelu_on_the_matmul_per_block():
    model = bench.model("bias_split_gelu", "bias_split_gelu", ITEMS, TOKENS, C, "fp16", 3, _weights("bias_split_gelu"))
    onnx.checker.check_model(model)
    ops = [(n.domain, n.op_type, list(n.input)) for n in model.graph.node]
    assert ops == [op for i in range(3) for op in (("", "MatMul", [f"x{i}", "W"]),
                                                   ("com.microsoft", "BiasSplitGelu", [f"mm{i}", "b"]))]
    assert [d.dim_value for d in model.graph.output[0].type.tensor_type.shape.dim] == [ITEMS, TOKENS, 4 * C]


def test_an_unknown_op_is_refused_by_name(capsys):
    with pytest.raises(SystemExit):
        bench.main(["--op", "skip_layer_norm,matmul_gelu"])
    assert "unknown --op matmul_gelu; known: skip_layer_norm, bias_split_gelu" in capsys.readouterr().err
