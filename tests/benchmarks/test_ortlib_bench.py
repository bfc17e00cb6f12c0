"""The library benchmark's checks and graphs, on the CPU: its float64 checks catch a wrong output, and
its synthetic graphs are valid models the rewrite turns into the library's ops."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("onnx", reason="the benchmark builds ONNX graphs")

from benchmarks import ortlib_bench as bench  # noqa: E402


def test_checks_measure_the_error_against_float64():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 3, 16)).astype(np.float32)
    gamma, beta = np.ones(16, np.float32), np.zeros(16, np.float32)
    v = x.astype(np.float64).reshape(2, 9, 8, 2)
    y = ((v - v.mean((1, 3), keepdims=True)) / np.sqrt(v.var((1, 3), keepdims=True) + 1e-5)).reshape(x.shape)
    assert bench.check_nhwc(x, y, gamma, beta, 8, False) < 1e-9
    y[0, 1, 1, 0] += 0.1
    assert bench.check_nhwc(x, y, gamma, beta, 8, False) == pytest.approx(0.1)
    xs = rng.standard_normal((300, 77))
    e = np.exp(xs - xs.max(-1, keepdims=True))
    assert bench.check_softmax(xs, e / e.sum(-1, keepdims=True)) < 1e-12
    assert bench.check_softmax(xs, e) > 0.1


def test_synthetic_up_block_rewrites_every_group_norm_and_drops_them_for_the_baseline(ort_library):
    import onnx
    from tritonforge.runtime.ortlib.rewrite import rewrite

    model, shape = bench.unet_up_block("fp32", np.random.default_rng(0), side=2, width=64)
    gns = sum(n.op_type == "GroupNormalization" for n in model.graph.node)
    assert gns == 6 and shape == [1, 64, 2, 2]
    none = bench.without_group_norm(model)
    assert not any(n.op_type in ("GroupNormalization", "Sigmoid") for n in none.graph.node)
    report = rewrite(model, ort_library, layout="nchw")
    assert report.rewritten == {"GroupNormalization": gns} and report.fused_silu == gns
    onnx.checker.check_model(none)
