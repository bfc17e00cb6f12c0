"""benchmarks/fp8_linear_bench.py's graphs: the library's Linear and its Fp8Linear on the same weight compute what
they claim (float64 maths of their own here, the fp8 side on its quantized operands), so the bench times like
against like; run on the CPU EP with the library's CPU ops. And the shapes it times are the models' own."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("onnxruntime")

from tritonforge.runtime.ortlib.fp8 import from_e4m3_bytes, quantize_rows  # noqa: E402

from benchmarks import fp8_linear_bench as bench  # noqa: E402
from benchmarks import linear_bench  # noqa: E402

from .test_linear_bench import cpu_outputs  # noqa: E402

M, K, N = 10, 32, 48


@pytest.mark.parametrize("fp8", [False, True])
@pytest.mark.parametrize("epilogue", ["none", "gelu_tanh"])
def test_each_graph_computes_its_linear(ort_library, fp8, epilogue):
    model = bench.model(epilogue, M, K, N, "fp16", 2, fp8)
    x = np.random.default_rng(8).standard_normal((M, K)).astype(np.float16)
    w, b = (v.astype(np.float64) for v in linear_bench.weights(K, N))
    x64 = x.astype(np.float64)
    if fp8:  # both operands as the node quantizes them: X per row, W per output channel
        xq, xs = quantize_rows(x64)
        wq, ws = quantize_rows(w.T)
        x64, w = from_e4m3_bytes(xq) * xs[:, None], (from_e4m3_bytes(wq) * ws[:, None]).T
    want = linear_bench.linear_ref(x64, w, b, epilogue)
    for got in cpu_outputs(model, ort_library, x):
        np.testing.assert_allclose(got.astype(np.float64), want, rtol=2e-2, atol=2e-2 * np.abs(want).max())
    ops = [n.op_type for n in model.graph.node]
    assert ops.count("Fp8Linear" if fp8 else "Linear") == 2


def test_the_shapes_are_the_models_fp8_candidates():
    """A DiT's: linear_bench's projections and MLPs. A UNet's transformer blocks at each level: SD 1.5 at 512^2,
    batch 2, runs 2 x 4096 tokens at 320 channels down to 2 x 64 at 1280 (the mid block's); the GEGLU input is C to
    8C, the MLP output 4C to C."""
    assert bench.shapes_of("sd3_medium") == linear_bench.linear_shapes("sd3_medium")
    sd15 = bench.shapes_of("sd15_unet")
    assert ("none", 8192, 320, 320) in sd15 and ("none", 8192, 320, 2560) in sd15
    assert ("none", 8192, 1280, 320) in sd15 and ("none", 128, 1280, 1280) in sd15
    assert len(sd15) == 3 * 4
