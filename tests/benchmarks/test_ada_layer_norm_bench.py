"""benchmarks/ada_layer_norm_bench.py's graphs: the export's nodes and the library's node compute the same block
(float64 maths of its own here) for every form, so the bench times like against like; run on the CPU EP with the
library's CPU op."""

from __future__ import annotations

import numpy as np
import pytest

ort = pytest.importorskip("onnxruntime")
onnx = pytest.importorskip("onnx")

from benchmarks import ada_layer_norm_bench as bench  # noqa: E402

ITEMS, TOKENS, C = 2, 5, 16


def _expected(form: str, x, b, s, t, g):
    w, bias = (a.astype(np.float64) for a in bench._linear(C))
    if form == "affine":  # the weight and bias in place of the per-item modulation
        weight, shift = (a.astype(np.float64) for a in bench._affine(C, "fp32"))
        s, t = weight - 1, shift
    h = x
    if form.startswith("gated"):
        h = x + g * (b @ w + bias if form == "gated_bias" else b)
    centred = h - h.mean(-1, keepdims=True)
    return centred / np.sqrt((centred ** 2).mean(-1, keepdims=True) + bench.EPS) * (1 + s) + t, h


@pytest.mark.parametrize("fused", [False, True])
@pytest.mark.parametrize("form", [*bench.FORMS, *bench.UNET_FORMS])
def test_each_form_computes_the_block(ort_library, form, fused):
    model = bench.model(form, ITEMS, TOKENS, C, "fp32", 2, fused)
    onnx.checker.check_model(model)
    rng = np.random.default_rng(2)
    x, b = (rng.standard_normal((ITEMS, TOKENS, C)).astype(np.float32) for _ in range(2))
    s, t, g = (0.5 * rng.standard_normal((ITEMS, 1, C)).astype(np.float32) for _ in range(3))
    so = ort.SessionOptions()
    so.register_custom_ops_library(str(ort_library))
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    feeds = {"x0": x, "x1": x, "b0": b, "b1": b, "s": s, "t": t, "g": g}
    out = dict(zip([o.name for o in sess.get_outputs()],
                   sess.run(None, {i.name: feeds[i.name] for i in sess.get_inputs()})))
    y, total = _expected(form, *(a.astype(np.float64) for a in (x, b, s, t, g)))
    for i in (0, 1):
        np.testing.assert_allclose(out[f"y{i}"], y, rtol=1e-4, atol=1e-4)
        if form.startswith("gated"):
            np.testing.assert_allclose(out[f"y{i}s"], total, rtol=1e-4, atol=1e-4)
    ops = [n.op_type for n in model.graph.node]
    assert ops.count("MatMul") == (2 if form == "gated_bias" else 0)
    assert ops.count("AdaLayerNorm") == (2 if fused else 0)
