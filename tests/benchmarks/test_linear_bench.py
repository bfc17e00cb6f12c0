"""benchmarks/linear_bench.py's graphs: the export's MatMul with its bias Add or ORT's FastGelu, and the library's
Linear, compute the same Linear (float64 maths of its own here), so the bench times like against like; run on the CPU
EP with the library's CPU op (ORT's FastGelu has a CPU kernel)."""

from __future__ import annotations

import numpy as np
import pytest

ort = pytest.importorskip("onnxruntime")
onnx = pytest.importorskip("onnx")

from benchmarks import choices as choice_file  # noqa: E402
from benchmarks import linear_bench as bench  # noqa: E402

M, K, N = 10, 16, 24


def cpu_outputs(model, library, x: np.ndarray) -> list:
    """The outputs of a bench graph of two Linears on the CPU EP, `x` fed to both, once the model checks."""
    onnx.checker.check_model(model)
    so = ort.SessionOptions()
    so.register_custom_ops_library(str(library))
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    return sess.run(None, {"x0": x, "x1": x})


@pytest.mark.parametrize("fused", [False, True])
@pytest.mark.parametrize("epilogue", bench.EPILOGUES)
def test_each_graph_computes_the_linear(ort_library, fused, epilogue):
    model = bench.model(epilogue, M, K, N, "fp32", 2, fused)
    x = np.random.default_rng(4).standard_normal((M, K)).astype(np.float32)
    w, b = (v.astype(np.float64) for v in bench.weights(K, N))
    y = x @ w + b
    want = 0.5 * y * (1 + np.tanh(np.sqrt(2 / np.pi) * (y + 0.044715 * y ** 3))) if epilogue == "gelu_tanh" else y
    for got in cpu_outputs(model, ort_library, x):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(bench.linear_ref(x.astype(np.float64), w, b, epilogue), want, rtol=1e-12)
    ops = [n.op_type for n in model.graph.node]
    assert ops.count("Linear") == (2 if fused else 0) and ops.count("MatMul") == (0 if fused else 2)


def test_the_shapes_are_the_models_linears():
    """SD3 at 1024^2, batch 2: its image (2 x 4096 tokens) and text (2 x 333) streams, width 1536; Flux's single
    blocks' output projection reads the attention and the MLP together (5 x 3072); SDXL's proj_in/out; SD 1.5's
    projections are 1x1 convolutions."""
    sd3 = bench.linear_shapes("sd3_medium")
    assert ("none", 8192, 1536, 1536) in sd3 and ("gelu_tanh", 8192, 1536, 6144) in sd3
    assert ("none", 666, 6144, 1536) in sd3 and len(sd3) == 6
    assert ("none", 4608, 15360, 3072) in bench.linear_shapes("flux_dev")
    assert bench.linear_shapes("sdxl_unet") == [("none", 8192, 640, 640), ("none", 2048, 1280, 1280)]
    assert bench.linear_shapes("sd15_unet") == []


def test_a_model_without_a_linear_is_refused_by_name(capsys):
    with pytest.raises(SystemExit) as err:
        bench.main(["--model", "sd15_unet"])
    assert err.value.code == 2 and "sd15_unet: no Linear the rewrite writes" in capsys.readouterr().err


def test_the_speed_up_is_per_epilogue_from_the_shapes_label(tmp_path):
    from benchmarks.results import write_rows

    path = tmp_path / "r.csv"
    row = lambda shape, provider, us: {"provider": provider, "shape": shape, "dtype": "fp16",  # noqa: E731
                                       "metric": "us", "unit": "us", "value": str(us)}
    write_rows("linear", "GPU", [row("none m 8x4x4", "export", 30), row("none m 8x4x4", "tritonforge", 20),
                                 row("gelu_tanh m 8x4x16", "export", 10), row("gelu_tanh m 8x4x16", "tritonforge", 20),
                                 row("none m 8x16x4", "torch", 1)], path)
    assert choice_file.build(path)["tables"]["linear"]["GPU"] == {"SPEEDUP": {"fp16": {"gelu_tanh": 0.5, "none": 1.5}}}
