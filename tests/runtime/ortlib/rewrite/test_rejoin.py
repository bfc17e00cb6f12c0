"""rewrite/rejoin.py: a Concat of Slices that give back one tensor is read as that tensor; any other stays."""

from __future__ import annotations

import numpy as np
import pytest

ort = pytest.importorskip("onnxruntime")
onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from tritonforge.runtime.ortlib.rewrite import rewrite  # noqa: E402
from tritonforge.runtime.ortlib.rewrite.graph import Graph  # noqa: E402
from tritonforge.runtime.ortlib.rewrite.rejoin import rejoin  # noqa: E402

END = np.iinfo(np.int64).max  # torch.onnx's [a:]


def _i(name, *v):
    return numpy_helper.from_array(np.array(v, np.int64), name)


def _model(spans=((0, 5), (5, END)), axis=1, concat_axis=1, step=None, order=None, extra_reader=False,
           dynamic_cut=False):
    """t = x + 1 (2, 9, 4); Slices of t along `axis` (start, end) per span, concatenated in `order` on
    `concat_axis`, then * 2 (the next block). `dynamic_cut`: the cut between the two spans is a value computed from
    x's shape, as one export writes a text length. `extra_reader`: the first Slice is also an output."""
    inits = [_i("one_", 1), _i("axis_", axis), *(_i(f"s{k}", s) for k, (s, _) in enumerate(spans)),
             *(_i(f"e{k}", e) for k, (_, e) in enumerate(spans))]
    n = [helper.make_node("Cast", ["one_"], ["one"], to=TensorProto.FLOAT),
         helper.make_node("Add", ["x", "one"], ["t"])]
    starts, ends = [f"s{k}" for k in range(len(spans))], [f"e{k}" for k in range(len(spans))]
    if dynamic_cut:  # cut = shape(x)[1] - 4
        inits += [_i("four", 4), _i("ax1", 1)]
        n += [helper.make_node("Shape", ["x"], ["sh"]), helper.make_node("Gather", ["sh", "ax1"], ["d1"]),
              helper.make_node("Sub", ["d1", "four"], ["cut"])]
        ends[0], starts[1] = "cut", "cut"
    extra = [_i("step", step)] if step else []
    inits += extra
    for k in range(len(spans)):
        n.append(helper.make_node("Slice", ["t", starts[k], ends[k], "axis_", *(["step"] if step else [])],
                                  [f"part{k}"]))
    order = range(len(spans)) if order is None else order
    n += [helper.make_node("Concat", [f"part{k}" for k in order], ["joined"], axis=concat_axis),
          helper.make_node("Mul", ["joined", "one"], ["y_"]), helper.make_node("Add", ["y_", "joined"], ["y"])]
    outs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 9, 4])]
    if extra_reader:
        outs.append(helper.make_tensor_value_info("part0", TensorProto.FLOAT, [2, None, 4]))
    g = helper.make_graph(n, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 9, 4])], outs, inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)], ir_version=9)


def _run(model):
    x = np.random.default_rng(0).standard_normal((2, 9, 4)).astype(np.float32)
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"]).run(None, {"x": x})


def _ops(model):
    return [n.op_type for n in model.graph.node]


@pytest.mark.parametrize("case", [
    {},  # Flux's: [:5] and [5:] on the token axis
    {"spans": ((0, 3), (3, 7), (7, END))},  # three parts
    {"spans": ((0, 5), (5, 9))},  # to the end given as the dim
    {"axis": -2, "concat_axis": 1},  # axes given negative
    {"dynamic_cut": True},  # the cut a value, the same one for both
])
def test_slices_that_give_back_the_tensor_are_the_tensor(case):
    model = _model(**case)
    want = _run(model)
    assert rejoin(Graph(model)) == 1
    assert "Concat" not in _ops(model) and "Slice" not in _ops(model)
    onnx.checker.check_model(model)
    assert [n.input[0] for n in model.graph.node if n.op_type == "Mul"] == ["t"]
    np.testing.assert_array_equal(_run(model)[0], want[0])


@pytest.mark.parametrize("case", [
    {"order": (1, 0)},  # the parts swapped: a rotation, not the tensor
    {"spans": ((0, 5), (6, END))},  # a gap
    {"spans": ((1, 5), (5, END))},  # not from the start
    {"spans": ((0, 5), (5, 8))},  # not to the end
    {"concat_axis": 2, "spans": ((0, 9), (0, 9))},  # joined on another axis
    {"step": 2, "spans": ((0, 5), (5, END))},  # every other one
])
def test_any_other_concat_of_slices_stays(case):
    model = _model(**case)
    before = _ops(model)
    assert rejoin(Graph(model)) == 0 and _ops(model) == before


def test_a_slice_read_elsewhere_stays_for_that_reader():
    model = _model(extra_reader=True)
    want = _run(model)
    assert rejoin(Graph(model)) == 1
    assert _ops(model).count("Slice") == 1 and "Concat" not in _ops(model)
    for got, exp in zip(_run(model), want):
        np.testing.assert_array_equal(got, exp)


def test_the_rewrite_says_so(ort_library):
    report = rewrite(_model(), ort_library)
    assert report.rejoined == 1 and not report.rewritten
    assert report.lines() == ["1 Concat(s) of Slices that cover one tensor read as that tensor (rewrite/rejoin.py)"]
