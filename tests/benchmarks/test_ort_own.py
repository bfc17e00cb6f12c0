"""ORT's own kernels as a rival: the graphs are valid ONNX, ORT runs them (the CPU EP here, the CUDA EP on
GPU runners) through IOBinding, and a machine without the CUDA EP is told so in one line."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="onnx builds the graphs (a dev dependency)")
pytest.importorskip("onnxruntime", reason="onnxruntime is a dev dependency")

from benchmarks import ort_own  # noqa: E402


def test_graphs_are_valid_onnx():
    onnx.checker.check_model(ort_own.softmax_model(3, 77, "fp16", nodes=4), full_check=True)
    gn = ort_own.group_norm_model(2, 8, 8, 640, 32, "fp32", True, 1e-6, nodes=3)
    onnx.checker.check_model(gn)
    node = gn.graph.node[0]
    assert (node.domain, node.op_type) == ("com.microsoft", "GroupNorm")
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    assert attrs["activation"] == 1 and attrs["channels_last"] == 1 and attrs["groups"] == 32
    assert attrs["epsilon"] == pytest.approx(1e-6)
    assert [i.name for i in gn.graph.input] == ["x0", "x1", "x2"]
    with pytest.raises(ValueError, match="fp16, bf16 and fp32, not 'fp64'"):
        ort_own.softmax_model(1, 8, "fp64")


def test_softmax_runs_in_ort_and_matches_float64():
    rival = ort_own.OrtRival("CPUExecutionProvider")
    rng = np.random.default_rng(1)
    x = [rng.standard_normal((5, 1000)).astype(np.float32) * 4 for _ in range(3)]
    ms, out, mode = rival.run(ort_own.softmax_model(5, 1000, "fp32", nodes=3), {f"x{i}": x[i] for i in range(3)},
                              runs=3)
    assert ms > 0 and mode == "plain"
    for i in range(3):
        ref = np.exp(x[i].astype(np.float64) - x[i].max(axis=1, keepdims=True))
        ref /= ref.sum(axis=1, keepdims=True)
        np.testing.assert_allclose(out[f"y{i}"], ref, rtol=1e-5, atol=1e-7)
    us, mode, nodes = rival.softmax_us(4, 513, "fp16", l2_bytes=1 << 20)
    assert us > 0 and nodes == ort_own.node_count(4 * 513 * 2, 1 << 20)


def test_an_op_ort_cannot_run_names_the_provider():
    rival = ort_own.OrtRival("CPUExecutionProvider")  # ORT's GroupNorm is a CUDA / ROCm kernel only
    x = np.zeros((1, 4, 4, 64), np.float32)
    with pytest.raises(RuntimeError, match="CPUExecutionProvider"):
        rival.run(ort_own.group_norm_model(1, 4, 4, 64, 32, "fp32", False), {"x0": x}, runs=1)


def test_node_counts_span_the_l2_and_stay_in_memory():
    assert ort_own.node_count(1 << 10, 50 << 20) == 200
    assert ort_own.node_count(64 << 20, 50 << 20) == 20  # 3x L2 needs 2, but 20 pairs fit
    assert ort_own.node_count(2 << 30, 50 << 20) == 2


def test_no_cuda_ep_is_one_line():
    import onnxruntime

    if "CUDAExecutionProvider" in onnxruntime.get_available_providers():
        pytest.skip("this onnxruntime has the CUDA EP")
    why = ort_own.unavailable()
    assert why and "\n" not in why and "CUDAExecutionProvider" in why
    with pytest.raises(RuntimeError, match="onnxruntime-gpu"):
        ort_own.OrtRival()
