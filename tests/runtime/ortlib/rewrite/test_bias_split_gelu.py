"""rewrite/bias_split_gelu.py: a UNet's GEGLU, as each exporter writes it, to ORT's BiasSplitGelu with the Linear's
bias folded in, where the measured table says so and the installed onnxruntime has the kernel (CUDA only).

On a machine without the CUDA EP every GEGLU is left with that reason; what the node would compute is checked
against the export's own numbers on the CPU EP through the op's definition (first half times the erf GELU of the
second, after the bias)."""

from __future__ import annotations

import math

import numpy as np
import pytest

ort = pytest.importorskip("onnxruntime")
onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from tritonforge.runtime.ortlib.rewrite import loads, rewrite  # noqa: E402

from tests.runtime.ortlib.rewrite.measured import measured_as  # noqa: E402

C, S, D = 8, 3, 2560  # D: the GEGLU width of a 320-channel UNet level, one ORT's kernel serves
CUDA = "CUDAExecutionProvider" in ort.get_available_providers()


@pytest.fixture
def measured(monkeypatch):
    measured_as(monkeypatch, "bias_split_gelu", "fp32", {"decomposed": 2.0, "onnx_gelu": 1.5})


@pytest.fixture
def runs_anywhere(monkeypatch):
    """As on a machine whose onnxruntime has the CUDA EP: the matcher's structure, checked on any machine."""
    monkeypatch.setattr(loads, "ort_runs", lambda domain, op, dtype: True)


def _const(name, v, dtype=np.float32):
    return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(np.array(v, dtype)))


def _model(form: str, width: int = D, half_first: bool = False, bounds: str = "shape"):
    """x (1, S, C) -> MatMul W (C, width) -> Add b -> GEGLU as `form` writes it: "decomposed" (TorchScript's two
    Slices, bounds computed from Shape(X) or constant, and the erf GELU) or "onnx_gelu" (Split and Gelu)."""
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array((rng.standard_normal((C, width)) / 3).astype(np.float32), "W"),
             numpy_helper.from_array(rng.uniform(-1, 1, width).astype(np.float32), "b")]
    n = [helper.make_node("MatMul", ["x", "W"], ["mm"]), helper.make_node("Add", ["b", "mm"], ["h"])]
    if form == "onnx_gelu":
        n += [helper.make_node("Split", ["h"], ["a", "v"], axis=-1, num_outputs=2),
              helper.make_node("Gelu", ["v"], ["g"])]
    else:
        n += [_const("zero", [0], np.int64), _const("last", [-1], np.int64)]
        if bounds == "shape":  # as TorchScript computes chunk(2, -1)'s bounds
            n += [helper.make_node("Shape", ["h"], ["shape"]), _const("minus1", -1, np.int64),
                  helper.make_node("Gather", ["shape", "minus1"], ["dim"], axis=0), _const("one_i", [1], np.int64),
                  _const("two_i", [2], np.int64), helper.make_node("Add", ["dim", "one_i"], ["dim1"]),
                  helper.make_node("Div", ["dim1", "two_i"], ["half"]),
                  helper.make_node("Mul", ["half", "one_i"], ["end_a"]),
                  helper.make_node("Mul", ["half", "two_i"], ["end_v"])]
        else:
            n += [_const("end_a", [width // 2], np.int64), _const("end_v", [width], np.int64)]
        n += [helper.make_node("Slice", ["h", "zero", "end_a", "last"], ["a"]),
              helper.make_node("Slice", ["h", "end_a", "end_v", "last"], ["v"]),
              _const("sqrt2", math.sqrt(2)), _const("one", 1.0), _const("half_c", 0.5),
              helper.make_node("Div", ["v", "sqrt2"], ["d"]), helper.make_node("Erf", ["d"], ["e"]),
              helper.make_node("Add", ["e", "one"], ["o"])]
        if half_first:  # (v * 0.5) * (1 + erf)
            n += [helper.make_node("Mul", ["v", "half_c"], ["vh"]), helper.make_node("Mul", ["vh", "o"], ["g"])]
        else:
            n += [helper.make_node("Mul", ["v", "o"], ["m"]), helper.make_node("Mul", ["m", "half_c"], ["g"])]
    n.append(helper.make_node("Mul", ["a", "g"], ["y"]))
    g = helper.make_graph(n, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, S, C])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, S, width // 2])], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 20)], ir_version=9)


def _run(model, outputs=()):
    """The model's y, and the named intermediate values, on the CPU EP."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    m.graph.output.extend(helper.make_empty_tensor_value_info(o) for o in outputs)
    so = ort.SessionOptions()
    so.log_severity_level = 4
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    x = np.random.default_rng(1).standard_normal((1, S, C)).astype(np.float32)
    sess = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
    return dict(zip([o.name for o in sess.get_outputs()], sess.run(None, {"x": x})))


def _bias_split_gelu(x: np.ndarray, b: np.ndarray) -> np.ndarray:
    """ORT's BiasSplitGelu by its definition, in float64."""
    v = x.astype(np.float64) + b
    a, g = np.split(v, 2, axis=-1)
    return a * 0.5 * g * (1 + np.vectorize(math.erf)(g / math.sqrt(2)))


@pytest.mark.parametrize("form,half_first,bounds", [("decomposed", False, "shape"), ("decomposed", True, "shape"),
                                                    ("decomposed", False, "const"), ("onnx_gelu", False, "")])
def test_each_form_becomes_one_bias_split_gelu_that_computes_what_the_export_does(ort_library, measured,
                                                                                 runs_anywhere, form, half_first,
                                                                                 bounds):
    model = _model(form, half_first=half_first, bounds=bounds)
    want = _run(model, ["mm"])
    report = rewrite(model, ort_library)
    assert report.rewritten == {"BiasSplitGelu": 1}, report.lines()
    # the MatMul stays; the bias Add, the split (and the Shape arithmetic of its bounds) and the GELU went
    assert sorted(n.op_type for n in model.graph.node) == ["BiasSplitGelu", "MatMul"]
    node = next(n for n in model.graph.node if n.op_type == "BiasSplitGelu")
    assert node.domain == "com.microsoft" and list(node.input) == ["mm", "b"] and list(node.output) == ["y"]
    bias = numpy_helper.to_array(next(t for t in model.graph.initializer if t.name == "b"))
    np.testing.assert_allclose(_bias_split_gelu(want["mm"], bias), want["y"], rtol=1e-5, atol=1e-5)
    onnx.checker.check_model(model)


@pytest.mark.skipif(CUDA, reason="onnxruntime here has the CUDA EP, which runs BiasSplitGelu")
def test_without_a_cuda_ep_the_geglu_stays_and_the_report_says_why(ort_library, measured):
    model = _model("onnx_gelu")
    report = rewrite(model, ort_library)
    assert not report.rewritten
    assert any("runs ORT's BiasSplitGelu in fp32 (it has CUDA kernels only)" in why for why in report.left), report.left


def test_a_width_orts_kernel_does_not_serve_is_left_with_the_widths(ort_library, measured, runs_anywhere):
    report = rewrite(_model("decomposed", width=2 * 96), ort_library)
    assert not report.rewritten
    assert any("of width 2560, 5120, 10240; X is [1, 3, 192]" in why for why in report.left), report.left


def test_an_unmeasured_dtype_keeps_the_exports_nodes_and_says_so(ort_library, monkeypatch, runs_anywhere):
    measured_as(monkeypatch, "bias_split_gelu", "fp32", None)
    report = rewrite(_model("onnx_gelu"), ort_library)
    assert not report.rewritten
    said = "BiasSplitGelu was not measured against the export's onnx_gelu form in fp32"
    assert any(said in why for why in report.left), report.left


def _run_lib(model, lib):
    so = ort.SessionOptions()
    so.register_custom_ops_library(str(lib))
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    x = np.random.default_rng(2).standard_normal((1, S, C)).astype(np.float32)
    return sess.run(None, {"x": x})[0]


@pytest.mark.parametrize("form,width", [("decomposed", 2 * 96), ("onnx_gelu", D)])
def test_where_the_librarys_node_measured_faster_it_takes_the_geglu_at_any_width(ort_library, measured,
                                                                                runs_anywhere, monkeypatch, form,
                                                                                width):
    """A width ORT's kernel has no instance for, and one it has where the library's measured the larger speed-up."""
    measured_as(monkeypatch, "bias_split_gelu", "fp32", {"decomposed": 3.0, "onnx_gelu": 3.0}, "LIBRARY")
    model = _model(form, width=width)
    want = _run_lib(model, ort_library)
    report = rewrite(model, ort_library)
    assert report.rewritten == {"BiasSplitGelu": 1}, report.lines()
    node = next(n for n in model.graph.node if n.op_type == "BiasSplitGelu")
    assert node.domain == "tritonforge" and list(node.input) == ["mm", "b"] and list(node.output) == ["y"]
    np.testing.assert_allclose(_run_lib(model, ort_library), want, rtol=1e-5, atol=1e-5)


def test_where_orts_node_measured_the_larger_speedup_it_stays_orts(ort_library, measured, runs_anywhere,
                                                                  monkeypatch):
    measured_as(monkeypatch, "bias_split_gelu", "fp32", {"onnx_gelu": 1.2}, "LIBRARY")
    model = _model("onnx_gelu")
    rewrite(model, ort_library)
    assert [n.domain for n in model.graph.node if n.op_type == "BiasSplitGelu"] == ["com.microsoft"]


def test_neither_node_says_why_for_both(ort_library, measured, runs_anywhere):
    report = rewrite(_model("decomposed", width=2 * 96), ort_library)
    said = [why for why in report.left if "of width 2560, 5120, 10240" in why]
    assert len(said) == 1 and "the library's BiasSplitGelu was not measured against the export's decomposed form" \
        in said[0], report.left


def test_halves_in_the_other_order_or_a_half_read_twice_are_not_a_geglu(ort_library, measured, runs_anywhere):
    model = _model("onnx_gelu")
    split = next(n for n in model.graph.node if n.op_type == "Split")
    split.output[:] = ["v", "a"]  # gelu of the first half: not what BiasSplitGelu computes
    report = rewrite(model, ort_library)
    assert not report.rewritten and not report.left, report.lines()
    model = _model("onnx_gelu")
    model.graph.node.append(helper.make_node("Sigmoid", ["a"], ["z"]))
    model.graph.output.append(helper.make_tensor_value_info("z", TensorProto.FLOAT, [1, S, D // 2]))
    report = rewrite(model, ort_library)
    assert not report.rewritten and any("read elsewhere" in why for why in report.left), report.lines()


@pytest.mark.gpu
@pytest.mark.parametrize("form", ["decomposed", "onnx_gelu"])
def test_the_rewritten_geglu_runs_on_the_cuda_ep_as_the_export_does(ort_cuda, library, measured, form):
    """ORT's own BiasSplitGelu kernel, where the installed onnxruntime has the CUDA EP: the rewrite as written."""
    model = _model(form)
    want = _run(model)["y"]
    report = rewrite(model, library)
    assert report.rewritten == {"BiasSplitGelu": 1}, report.lines()
    so = ort_cuda.SessionOptions()
    so.log_severity_level = 3
    # fp32 MatMuls in fp32, as the CPU EP's export ran them: the CUDA EP's TF32 default alone is 1e-3 off
    sess = ort_cuda.InferenceSession(model.SerializeToString(), so,
                                     providers=[("CUDAExecutionProvider", {"use_tf32": "0"})])
    x = np.random.default_rng(1).standard_normal((1, S, C)).astype(np.float32)
    np.testing.assert_allclose(sess.run(None, {"x": x})[0], want, rtol=1e-4, atol=1e-4)


def _ort_node_model(width: int = D):
    """x (1, S, C) -> MatMul W -> ORT's own BiasSplitGelu with b, as ORT's Stable Diffusion optimizer writes it."""
    rng = np.random.default_rng(3)
    inits = [numpy_helper.from_array((rng.standard_normal((C, width)) / 3).astype(np.float32), "W"),
             numpy_helper.from_array(rng.uniform(-1, 1, width).astype(np.float32), "b")]
    nodes = [helper.make_node("MatMul", ["x", "W"], ["mm"]),
             helper.make_node("BiasSplitGelu", ["mm", "b"], ["y"], name="geglu", domain="com.microsoft")]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, S, C])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, S, width // 2])], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 20), helper.make_opsetid("com.microsoft", 1)],
                             ir_version=9)


def test_orts_own_node_becomes_the_librarys_where_that_measured_faster_and_computes_its_definition(
        ort_library, measured, monkeypatch):
    measured_as(monkeypatch, "bias_split_gelu", "fp32", {"decomposed": 3.0, "onnx_gelu": 3.0}, "LIBRARY")
    model = _ort_node_model()
    report = rewrite(model, ort_library)
    assert report.rewritten == {"BiasSplitGelu": 1}, report.lines()
    assert any("the library's measured 1.50x ORT's" in line for line in report.lines()), report.lines()
    (node,) = [n for n in model.graph.node if n.op_type == "BiasSplitGelu"]
    assert node.domain == "tritonforge" and node.name == "geglu" and list(node.input) == ["mm", "b"]
    # ORT's node has no CPU kernel; the library's runs there, and computes the op's definition
    x = np.random.default_rng(2).standard_normal((1, S, C)).astype(np.float32)
    w, b = (numpy_helper.to_array(t) for t in model.graph.initializer)
    np.testing.assert_allclose(_run_lib(model, ort_library), _bias_split_gelu(x.astype(np.float64) @ w, b),
                               rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("library", [{"onnx_gelu": 1.2}, {}])
def test_orts_own_node_stays_where_it_measured_faster_or_the_two_were_not_both_measured(ort_library, measured,
                                                                                      monkeypatch, library):
    measured_as(monkeypatch, "bias_split_gelu", "fp32", library, "LIBRARY")
    model = _ort_node_model()
    report = rewrite(model, ort_library)
    assert not report.rewritten and [n.domain for n in model.graph.node][1:] == ["com.microsoft"]
    said = "ORT's BiasSplitGelu measured faster than the library's in fp32 (0.80x" if library else \
        "the library's BiasSplitGelu and ORT's were not both measured in fp32"
    assert any(said in why for why in report.left), report.left
