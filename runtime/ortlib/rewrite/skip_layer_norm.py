"""A Linear's bias, the residual add after it and the LayerNorm after that as one node: ORT's own
`com.microsoft.SkipLayerNormalization`.

In the UNets' transformer blocks (SD 1.5, SDXL) every norm but the first reads `x + Linear(h)`: the attention's
output projection, or the MLP's last Linear where another block follows. As exported that is a MatMul, its bias
Add (which ORT's optimizer fuses into a Gemm that first broadcasts the bias into the output: a pass over the
tensor of its own), the residual Add and the LayerNormalization, each reading and writing the tensor whole.
SkipLayerNormalization takes the MatMul's output, the residual and the bias and writes the norm and, where the
next residual reads it, the sum (its output 3). The form, anchored at the LayerNormalization:

- LayerNormalization over the last axis of a (batch, tokens, channels) X, with its weight (and bias) constant;
- X = `branch + residual` (either order), both of X's shape, branch = `Add(y, b)` of a constant b of one value
  per channel that only this sum reads, seen through a Div or Mul by exactly 1 (TorchScript writes the
  attention's `rescale_output_factor` so).

LayerNorms without an affine that a modulation follows are the AdaLayerNorm matcher's (ada_layer_norm.py),
tried first. Where it goes is the measured choice (choices.json's `skip_layer_norm` table, derived from the
committed rows by benchmarks/choices.py): a dtype without rows, or whose fused node did not measure faster than
the export's nodes, keeps them, and the report says why.
"""

from __future__ import annotations

from .graph import MS, attrs, is_op
from .patterns import Left, Match, Rewriter, bias_add, bias_input, measured_ort_op


def _by_one(g, value: str):
    """The Div or Mul by exactly 1 that makes `value`, or None."""
    node = g.producer.get(value)
    return node if (is_op(node, "Div") or is_op(node, "Mul")) and g.scalar(node.input[1]) == 1 else None


def _through_one(g, value: str) -> tuple[str, list]:
    """(v, nodes) where `value` is v / 1 or v * 1 (the nodes, read only along the chain), else (value, [])."""
    node = _by_one(g, value)
    if node is not None and g.only_reader(node.input[0]) is node:
        return node.input[0], [node]
    return value, []


def linear_bias(g, value: str, reader) -> tuple | None:
    """(y, b's name, b, nodes) where `value` is Add(y, b) of a constant b of one value per channel (through a Div
    or Mul by 1), read by `reader` alone; else None."""
    inner, scaled = _through_one(g, value)
    found = bias_add(g, inner, scaled or [reader])
    if found is None or g.const(found[0]) is not None or g.only_reader(value) is not reader:
        return None
    y, name, b, add = found
    return y, name, b, [add, *scaled]


def _of_shape(g, value: str, dims: list) -> bool:
    """`value` has X's dims: as inferred, or its last dim with the leading ones proven (the MatMul after a GEGLU,
    whose Slices leave inference without dims: SDXL's blocks after the first)."""
    d = g.dims(value)
    return d == dims or (d is not None and len(d) == len(dims) and d[-1] == dims[-1]
                         and g.leading_dims(value) == tuple(dims[:-1]))


def _bias_like(g, value: str) -> bool:
    """`value` is an Add of a constant vector (through a Div or Mul by 1), whoever else reads it."""
    one = _by_one(g, value)
    node = g.producer.get(one.input[0] if one is not None else value)
    return is_op(node, "Add") and any((b := g.const(i)) is not None and b.size > 1 for i in node.input)


class ResidualLayerNorm:
    """Add(Linear's bias) [-> Div 1] -> Add(residual) -> LayerNormalization (affine) as SkipLayerNormalization."""

    anchors = {("", "LayerNormalization")}
    source = "Linear bias, residual Add and LayerNormalization"

    def match(self, r: Rewriter, ln):
        from onnx import helper

        g = r.graph
        x = ln.input[0]
        total = g.producer.get(x)
        if not is_op(total, "Add") or any(g.const(i) is not None for i in total.input):
            return None  # no residual before it (a bias Add is no residual): ORT's LayerNormalization is one pass
        dims = g.dims(x)
        if dims is None or len(dims) != 3 or not isinstance(dims[2], int):
            raise Left("X is not (batch, tokens, channels) with the channels fixed")
        c = dims[2]
        if attrs(ln).get("axis", -1) not in (-1, 2) or attrs(ln).get("stash_type", 1) != 1:
            raise Left("not over the last axis in float32")
        if len(ln.output) > 1 and any(ln.output[1:]):
            raise Left("its mean or inverse deviation is read")
        gamma = g.const(ln.input[1])
        beta = g.const(ln.input[2]) if len(ln.input) > 2 and ln.input[2] else None
        if gamma is None or gamma.size != c or (len(ln.input) > 2 and ln.input[2] and beta is None):
            raise Left("its weight or bias is not a constant of one value per channel")
        for i, j in ((0, 1), (1, 0)):
            found = linear_bias(g, total.input[i], total)
            if found and _of_shape(g, total.input[j], dims) and _of_shape(g, found[0], dims):
                y, b_name, b, nodes = found
                skip = total.input[j]
                break
        else:
            if any(_bias_like(g, v) for v in total.input):
                raise Left("the Linear's bias Add before the residual is read elsewhere too, or the residual or the "
                           f"Linear's output is not of X's shape {dims}")
            return None  # an Add of two values, no Linear's bias: not this form (SD3.5's embedding, say)
        dtype = measured_ort_op(r, x, "skip_layer_norm", "SkipLayerNormalization", "export")
        for name in (skip, ln.input[1], b_name, *([ln.input[2]] if beta is not None else [])):
            if g.elem(name) != g.elem(x):
                raise Left(f"'{name}' is not of X's element type")
        ins = [y, skip, ln.input[1], ln.input[2] if beta is not None else "", bias_input(r, b_name, b)]
        # the sum keeps its name where the next residual (or anything else) reads it: output 3
        keep_sum = x in g.outputs or any(n is not ln for n in g.consumers.get(x, []))
        outs = [ln.output[0], *(["", "", x] if keep_sum else [])]
        node = helper.make_node("SkipLayerNormalization", ins, outs, name=r.node_name(ln.name or ln.output[0]),
                                domain=MS, epsilon=float(attrs(ln).get("epsilon", 1e-5)))
        return Match([*nodes, total, ln], node, self.source, dtype=dtype)


SKIP_LAYER_NORM = (ResidualLayerNorm(),)
