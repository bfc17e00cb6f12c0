"""benchmarks/fused_op_bench.py's check-then-time step as the fused-op benches call it, through benchmarks/ort_own.py's
sessions (IOBinding, outputs bound by name), on the CPU EP with the library's CPU ops: each bench's two graphs run
and are checked against float64 there, so a graph the GPU run cannot bind fails here first."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("onnxruntime")
pytest.importorskip("onnx")

from tritonforge.runtime.ops.bias_concat import bias_concat_mismatch, bias_concat_ref  # noqa: E402
from tritonforge.runtime.ops.rotary_embedding import rotary_embedding_mismatch, rotary_embedding_ref  # noqa: E402

from benchmarks import bias_concat_bench, fused_op_bench, ort_own, rotary_embedding_bench  # noqa: E402

CPU = "CPUExecutionProvider"


@pytest.fixture(scope="module")
def rivals(ort_library):
    return ort_own.OrtRival(CPU), ort_own.OrtRival(CPU, custom_ops=str(ort_library))


def test_the_bias_concat_bench_checks_and_times_both_graphs(rivals):
    items, image, text, c = 2, 6, 3, 16
    rng = np.random.default_rng(3)
    a = rng.standard_normal((items, image, c)).astype(np.float32)
    b = rng.standard_normal((items, text, c)).astype(np.float32)
    (wa, ba), (wb, bb) = bias_concat_bench.linears(c)
    ref = bias_concat_ref(a.astype(np.float64) @ wa, b.astype(np.float64) @ wb, ba, bb)
    results = fused_op_bench.check_then_time(
        *rivals, lambda k, fused: bias_concat_bench.model(items, image, text, c, "fp32", k, fused),
        lambda n: {k: v for i in range(n) for k, v in ((f"x{i}", a), (f"t{i}", b))}, 2, "joined",
        lambda y: bias_concat_mismatch(y, ref, "fp32"), "BiasConcat")
    assert set(results) == {"joined", "tritonforge"} and all(us > 0 for us, _ in results.values())


def test_the_rotary_bench_checks_and_times_both_graphs(rivals):
    items, tokens, heads, d = 1, 5, 2, 8
    rng = np.random.default_rng(4)
    x = rng.standard_normal((items, tokens, heads, d)).astype(np.float32)
    cos, sin = rotary_embedding_bench.angles(tokens, d, rng)
    ref = rotary_embedding_ref(x.astype(np.float64), cos.astype(np.float64), sin.astype(np.float64))
    results = fused_op_bench.check_then_time(
        *rivals, lambda k, fused: rotary_embedding_bench.model(items, tokens, heads, d, "fp32", k, fused),
        lambda n: {**{f"x{i}": x for i in range(n)}, "cos": cos, "sin": sin}, 2, "decomposed",
        lambda y: rotary_embedding_mismatch(y, ref, "fp32"), "RotaryEmbedding")
    assert set(results) == {"decomposed", "tritonforge"} and all(us > 0 for us, _ in results.values())


def test_a_graph_whose_output_has_no_x_input_is_named(rivals):
    from onnx import TensorProto, helper

    own, _ = rivals
    model = ort_own._model([helper.make_node("Identity", ["a0"], ["y0"])],
                           [helper.make_tensor_value_info("a0", TensorProto.FLOAT, [2])],
                           [helper.make_tensor_value_info("y0", TensorProto.FLOAT, [2])], [], {"": 17})
    with pytest.raises(RuntimeError, match="output y0 has no input x0"):
        own.run(model, {"a0": np.ones(2, np.float32)}, runs=1, graph=False)
