"""The fp8 rewrite's check: each Linear tried on the model's own activations before it goes to fp8; one whose fp8
product strays stays in its type and the report names it."""

from __future__ import annotations

import numpy as np
import pytest

ort = pytest.importorskip("onnxruntime", reason="the check runs the model in onnxruntime")
onnx = pytest.importorskip("onnx", reason="the rewrite reads ONNX models")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from tritonforge.runtime.ortlib.fp8 import quantize_rows  # noqa: E402
from tritonforge.runtime.ortlib.rewrite import rewrite_file  # noqa: E402
from tritonforge.runtime.ortlib.rewrite.fp8_check import MIN_COSINE, fp8_cosine  # noqa: E402

from .test_fp8 import FP8_CASES  # noqa: E402
from .test_rewrite import EXPORTS  # noqa: E402


def _two_linears(path, batch=16):
    """x (batch, 32) fp16 -> `plain` = x @ W1, and `outlier` = (x * d) @ W2 where d lifts channel 0 by 3e4 and
    shrinks the rest to 1e-2: each row's fp8 scale is set by channel 0, every other channel rounds to zero, and W2's
    row 0 is near zero, so the fp8 product loses what the exact one is made of."""
    rng = np.random.default_rng(3)
    d = np.full(32, 1e-2)
    d[0] = 3e4
    w2 = rng.standard_normal((32, 32))
    w2[0] *= 1e-6
    inits = [numpy_helper.from_array(rng.standard_normal((32, 32)).astype(np.float16), "w1"),
             numpy_helper.from_array(w2.astype(np.float16), "w2"), numpy_helper.from_array(d.astype(np.float16), "d")]
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["plain"], name="plain_proj"),
             helper.make_node("Mul", ["x", "d"], ["xd"], name="lift"),
             helper.make_node("MatMul", ["xd", "w2"], ["outlier"], name="outlier_proj")]
    vi = lambda name, shape: helper.make_tensor_value_info(name, TensorProto.FLOAT16, shape)  # noqa: E731
    graph = helper.make_graph(nodes, "two", [vi("x", [batch, 32])], [vi("plain", [batch, 32]),
                                                                      vi("outlier", [batch, 32])], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


def test_a_linear_whose_fp8_product_strays_stays_in_its_type_and_is_named(ort_library, tmp_path):
    src = _two_linears(tmp_path / "two.onnx")
    report = rewrite_file(src, tmp_path / "two.fp8.onnx", ort_library, precision="fp8", fp8_min_features=0)
    assert [name for name, _ in report.fp8_kept] == ["outlier_proj"] and len(report.fp8) == 1, report.lines()
    assert report.fp8_kept[0][1] < MIN_COSINE
    said = "\n".join(report.lines())
    assert "fp8 checked on the model's own activations (random inputs, 2 distinct); kept in their type below " \
           f"cosine {MIN_COSINE}: outlier_proj (" in said, said
    ops = {(n.op_type, n.name) for n in onnx.load(str(tmp_path / "two.fp8.onnx")).graph.node}
    assert ("MatMul", "outlier_proj") in ops and not any(n == "plain_proj" for _, n in ops)
    # without the check both go, and the stray one shows what the check saw
    rewrite_file(src, tmp_path / "unchecked.onnx", ort_library, precision="fp8", fp8_min_features=0, fp8_check=False)
    sess = ort.InferenceSession(str(tmp_path / "unchecked.onnx"), _with(ort_library),
                                providers=["CPUExecutionProvider"])
    x = np.random.default_rng(1).standard_normal((16, 32)).astype(np.float16)
    _, outlier = sess.run(None, {"x": x})
    exact = (x.astype(np.float64) * np.where(np.arange(32) == 0, 3e4, 1e-2)) @ onnx.numpy_helper.to_array(
        onnx.load(str(src)).graph.initializer[1]).astype(np.float64)
    assert _cos(outlier, exact) < MIN_COSINE


def test_an_export_with_open_dims_is_not_checked_and_the_report_says_why(ort_library, tmp_path):
    src = _two_linears(tmp_path / "two.onnx")
    m = onnx.load(str(src))
    m.graph.input[0].type.tensor_type.shape.dim[0].dim_param = "batch"
    onnx.save(m, str(src))
    report = rewrite_file(src, tmp_path / "out.onnx", ort_library, precision="fp8", fp8_min_features=0)
    assert len(report.fp8) == 2 and not report.fp8_kept
    assert "fp8 not checked: input 'x' has dims the model leaves open (batch)" in report.lines()


@pytest.mark.parametrize("name", FP8_CASES[:2])
def test_the_tiny_transformers_linears_pass_the_check_on_their_own_activations(ort_library, tmp_path, name):
    report = rewrite_file(EXPORTS / name, tmp_path / "m.onnx", ort_library, precision="fp8", fp8_min_features=0)
    assert report.fp8 and not report.fp8_kept, report.lines()
    assert any(line.startswith("fp8 checked on the model's own activations") and
               line.endswith(f"every one within cosine {MIN_COSINE} of its exact product")
               for line in report.lines()), report.lines()


def test_the_cosine_is_one_where_fp8_holds_the_operands_exactly_and_falls_with_an_outlier_channel():
    rows = np.array([[448.0, 1.0, -2.0, 0.5], [3.0, 0.0, 0.25, -448.0]])  # e4m3 values, each row's scale 1
    weight = np.eye(4) * 0.875  # 448 * 2^-9 per channel: exact
    w_q, w_scale = quantize_rows(weight.T)
    assert fp8_cosine(rows, weight, w_q, w_scale) == pytest.approx(1.0, abs=1e-12)
    outlier = np.c_[np.full((2, 1), 3e4), np.random.default_rng(0).standard_normal((2, 3)) * 1e-2]
    skewed = np.diag([1e-9, 1.0, 1.0, 1.0])
    q, s = quantize_rows(skewed.T)
    assert fp8_cosine(outlier, skewed, q, s) < 0.5
    assert fp8_cosine(np.zeros((2, 4)), weight, w_q, w_scale) == 1.0


def _with(library):
    so = ort.SessionOptions()
    so.register_custom_ops_library(str(library))
    return so


def _cos(a, b) -> float:
    a, b = np.asarray(a, np.float64).ravel(), np.asarray(b, np.float64).ravel()
    return float(a @ b / np.linalg.norm(a) / np.linalg.norm(b))
