"""rewrite/patch_conv.py: a bfloat16 patch-embedding Conv to Reshapes, Transposes and the library's Linear. The
CPU EP has no bfloat16 Conv or Add to compare with, so the numbers are checked with the matcher let into float
(TYPES), on the CPU EP against ORT's own Conv; the bfloat16 export is checked for what the rewrite writes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

ort = pytest.importorskip("onnxruntime")
onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from tritonforge.runtime.ortlib.rewrite import patch_conv, rewrite, rewrite_file  # noqa: E402

EXPORTS = Path(__file__).resolve().parent / "exports"


@pytest.fixture
def in_float(monkeypatch):
    monkeypatch.setattr(patch_conv, "TYPES", ("bf16", "fp32"))


def _model(x_shape=(2, 4, 8, 6), kernel=(2, 2), strides=None, bias=True, out_channels=5, **attrs):
    rng = np.random.default_rng(3)
    w = rng.standard_normal((out_channels, x_shape[1], *kernel)).astype(np.float32)
    inits = [numpy_helper.from_array(w, "w")]
    inputs = ["x", "w"]
    if bias:
        inits.append(numpy_helper.from_array(rng.standard_normal(out_channels).astype(np.float32), "b"))
        inputs.append("b")
    conv = helper.make_node("Conv", inputs, ["y"], name="pos_embed/proj", kernel_shape=list(kernel),
                            strides=list(strides or kernel), **attrs)
    out = [d // k if isinstance(d, int) else None for d, k in zip(x_shape[2:], kernel)]
    g = helper.make_graph([conv], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x_shape))],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [x_shape[0], out_channels, *out])],
                          inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)], ir_version=9)


def _run(model, feeds, lib=None):
    so = ort.SessionOptions()
    so.log_severity_level = 4
    if lib:
        so.register_custom_ops_library(str(lib))
    return ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"]).run(None, feeds)[0]


@pytest.mark.parametrize("kernel, bias", [((2, 2), True), ((2, 3), False)])
def test_a_patch_conv_becomes_the_patches_times_the_weight_and_computes_the_same(ort_library, in_float, kernel,
                                                                                bias):
    model = _model(kernel=kernel, bias=bias)
    x = np.random.default_rng(4).standard_normal((2, 4, 8, 6)).astype(np.float32)
    want = _run(model, {"x": x})
    report = rewrite(model, ort_library)
    assert report.rewritten == {"Linear": 1} and not report.left, report.lines()
    onnx.checker.check_model(model)
    assert [n.op_type for n in model.graph.node] == ["Reshape", "Transpose", "Reshape", "Transpose", "Reshape",
                                                     "Linear", "Transpose"]
    assert model.graph.node[-1].output[0] == "y"
    got = _run(model, {"x": x}, ort_library)
    assert got.shape == want.shape == (2, 5, 8 // kernel[0], 6 // kernel[1])
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_dynamic_heights_and_widths_are_served(ort_library, in_float):
    model = _model(x_shape=("batch", 4, "height", "width"))
    before = _run(model, {"x": np.zeros((1, 4, 2, 2), np.float32)}) is not None and model.SerializeToString()
    rewrite(model, ort_library)
    assert "Conv" not in {n.op_type for n in model.graph.node}
    for shape in ((1, 4, 8, 6), (3, 4, 4, 10)):
        x = np.random.default_rng(shape[3]).standard_normal(shape).astype(np.float32)
        np.testing.assert_allclose(_run(model, {"x": x}, ort_library),
                                   _run(onnx.load_from_string(before), {"x": x}), rtol=1e-5, atol=1e-5)


def test_a_full_size_patch_kernel_kept_beside_the_model_is_read(ort_library, in_float, tmp_path):
    """SD3's patch kernel (1536 x 16 x 2 x 2) is past what the rewrite folds as a small constant, and a full-size
    export keeps it as external data: the matcher reads it whole, from beside the model."""
    model = _model(x_shape=(1, 16, 8, 8), out_channels=1536)
    x = np.random.default_rng(5).standard_normal((1, 16, 8, 8)).astype(np.float32)
    want = _run(model, {"x": x})
    src = tmp_path / "big.onnx"
    onnx.save_model(model, str(src), save_as_external_data=True, all_tensors_to_one_file=True, location="big.data",
                    size_threshold=0)
    report = rewrite_file(src, tmp_path / "big.tf.onnx", ort_library)
    assert report.rewritten == {"Linear": 1} and not report.left, report.lines()
    got = _run(onnx.load(str(tmp_path / "big.tf.onnx")), {"x": x}, ort_library)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("case, why", [
    ({"pads": [1, 1, 1, 1]}, "the patch Conv pads, dilates or groups: not a patch embedding"),
    ({"x_shape": (2, 4, 7, 6)}, "X's height 7 is not a multiple of the patch's 2"),
])
def test_a_patch_conv_it_cannot_take_is_left_with_the_reason(ort_library, in_float, case, why):
    report = rewrite(_model(**case), ort_library)
    assert not report.rewritten and report.left == [f"Conv node 'pos_embed/proj': {why}"]


@pytest.mark.parametrize("case, types", [({"kernel": (3, 3), "strides": (1, 1)}, ("bf16", "fp32")),
                                         ({"kernel": (1, 1)}, ("bf16", "fp32")),  # pointwise: no patches
                                         ({}, patch_conv.TYPES)])  # float, as shipped: bfloat16 only
def test_an_overlapping_or_pointwise_conv_or_a_float_one_is_not_the_matchers_business(ort_library, monkeypatch, case,
                                                                                     types):
    monkeypatch.setattr(patch_conv, "TYPES", types)
    report = rewrite(_model(**case), ort_library)
    assert not report.rewritten and not report.left


def test_sd3s_bfloat16_patch_embedding_goes_to_the_librarys_linear(ort_library, tmp_path):
    """The dynamo export at opset 23 in bfloat16, which onnxruntime's CUDA EP cannot run for its Conv: after the
    rewrite no Conv is left, and the load check finds nothing but ORT's own bfloat16 elementwise ops missing from
    the CPU EP."""
    src = EXPORTS / "sd3_medium_tiny.dynamo23.bf16.onnx"
    report = rewrite_file(src, tmp_path / "m.tf.onnx", ort_library)
    assert report.sources[("Linear", patch_conv.PatchConv.source)] == 1, report.lines()
    m = onnx.load(str(tmp_path / "m.tf.onnx"), load_external_data=False)
    assert "Conv" not in {n.op_type for n in m.graph.node}
    assert "which only a GPU EP runs" in report.loads and "Conv" not in report.loads, report.loads
