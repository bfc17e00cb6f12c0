"""A Linear's GELU as one node: ORT's own fused `com.microsoft.FastGelu` with the Linear's bias folded in.

The diffusion transformers' MLPs (SD3, SD3.5, PixArt, Flux) run GELU with the tanh approximation on their
widest tensor, four times the hidden width for every image token, in every block. As torch.onnx writes it,
that is up to ten elementwise kernels over that tensor, the Linear's bias Add first (a 3-D MatMul takes no
bias), each reading and writing it whole; ORT's optimizer fuses none of the TorchScript form. FastGelu
computes `gelu_tanh(x + bias)` in one pass. Forms:

- TanhGeluDecomposed (TorchScript, opset <= 19): `0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))`,
  the factors in any order, x^3 as `x * (x * x)`, `(x * x) * x` or `Pow(x, 3)`, anchored at its Tanh;
- OnnxGelu (dynamo, opset 20+): ONNX `Gelu(approximate="tanh")` after a bias Add (without one, ORT's
  Gelu runs it in one pass already and the node stays).

The bias is folded in where x is `Add(y, b)` of a constant b with one value per last-axis element that
only the GELU reads. Where the GELU goes is the measured choice (choices.json's `gelu` table, derived from
the committed rows by benchmarks/choices.py): a dtype or form whose fused node did not measure faster
than the export's own nodes keeps them, and the report says why.
"""

from __future__ import annotations

import math

from .graph import MS, attrs, is_op, other_operand
from .linear_form import linear_takes
from .patterns import Left, Match, Rewriter, bias_add, bias_input, measured_ort_op, times_const

_SQRT_2_OVER_PI = math.sqrt(2 / math.pi)


def _cube_of(g, value: str) -> tuple[str, list] | None:
    """(x, nodes) when `value` is x^3 as x * (x * x), (x * x) * x or Pow(x, 3)."""
    node = g.producer.get(value)
    if is_op(node, "Pow") and g.scalar(node.input[1]) == 3:
        return node.input[0], [node]
    if not is_op(node, "Mul"):
        return None
    for i, j in ((0, 1), (1, 0)):
        sq = g.producer.get(node.input[j])
        if is_op(sq, "Mul") and sq.input[0] == sq.input[1] == node.input[i] and g.only_reader(sq.output[0]) is node:
            return node.input[i], [sq, node]
    return None


def choose(r: Rewriter, x: str, form: str) -> str:
    """X's dtype when FastGelu measured faster than `form` for it and the installed onnxruntime runs it; Left
    with the reason otherwise."""
    return measured_ort_op(r, x, "gelu", "FastGelu", form)


def _fast_gelu(r: Rewriter, anchor, x: str, out: str, removed: list, form: str, source: str) -> Match | None:
    from onnx import helper

    if linear_takes(r, x, "gelu_tanh"):
        return None  # the Linear before it takes the GELU into its GEMM's epilogue (linear.py, a later pass)
    dtype = choose(r, x, form)
    inputs, add = [x], []
    found = bias_add(r.graph, x, removed)
    if found:
        y, b_name, b, a = found
        inputs, add = [y, bias_input(r, b_name, b)], [a]
    name = r.node_name((anchor.name or out).rsplit("/", 1)[0] + "/FastGelu")
    node = helper.make_node("FastGelu", inputs, [out], name=name, domain=MS)
    return Match([*add, *removed], node, source, dtype=dtype)


class TanhGeluDecomposed:
    """GELU-tanh as TorchScript writes it (see the module's text), anchored at its Tanh."""

    anchors = {("", "Tanh")}
    source = "GELU-tanh decomposition"

    def match(self, r: Rewriter, tanh):
        found = self.find(r, tanh)
        return found and _fast_gelu(r, tanh, *found, "decomposed", self.source)

    def find(self, r: Rewriter, tanh) -> tuple[str, str, list] | None:
        """(x, the GELU's output, its nodes) of the GELU whose Tanh this is; None, or Left saying why not."""
        g = r.graph
        scaled = g.producer.get(tanh.input[0])
        inner = times_const(g, scaled, _SQRT_2_OVER_PI)
        add = g.producer.get(inner) if inner else None
        if not is_op(add, "Add"):
            return None
        for i, j in ((0, 1), (1, 0)):
            tail = g.producer.get(add.input[j])
            cube = times_const(g, tail, 0.044715)
            found = _cube_of(g, cube) if cube else None
            if found and found[0] == add.input[i]:
                x, cubed = found
                break
        else:
            return None
        one = g.only_reader(tanh.output[0])
        if not is_op(one, "Add") or g.scalar(other_operand(one, tanh.output[0]) or "") != 1:
            raise Left("tanh(...) is not followed by + 1 alone")
        mul = g.only_reader(one.output[0])
        other = other_operand(mul, one.output[0]) if is_op(mul, "Mul") else None
        if other is None:
            raise Left("1 + tanh(...) is not multiplied by x alone")
        half = []
        if other == x:  # 0.5 * (x * (1 + tanh)), either order
            last = g.only_reader(mul.output[0])
            if times_const(g, last, 0.5) != mul.output[0]:
                raise Left("x * (1 + tanh(...)) is not halved")
            out, tail_nodes = last.output[0], [mul, last]
        else:  # (0.5 * x) * (1 + tanh)
            h = g.producer.get(other)
            if times_const(g, h, 0.5) != x or g.only_reader(other) is not mul:
                raise Left("1 + tanh(...) is multiplied by something other than x or x / 2")
            out, tail_nodes, half = mul.output[0], [mul], [h]
        for v in (scaled.output[0], add.output[0], cubed[-1].output[0], tail.output[0], tanh.output[0]):
            if g.only_reader(v) is None:
                raise Left("a value inside the GELU is read elsewhere too")
        return x, out, [*cubed, tail, add, scaled, tanh, one, *half, *tail_nodes]


class OnnxGelu:
    """ONNX Gelu(approximate="tanh") (opset 20+) of a Linear's output and bias."""

    anchors = {("", "Gelu")}
    source = "ONNX Gelu after the bias Add"

    def match(self, r: Rewriter, node):
        if bias_add(r.graph, node.input[0], [node]) is None:
            return None  # ORT's Gelu is one pass already
        found = self.find(r, node)
        return found and _fast_gelu(r, node, *found, "onnx_gelu", self.source)

    @staticmethod
    def find(r: Rewriter, node) -> tuple[str, str, list] | None:
        """(x, the GELU's output, [node]) where `node` is the tanh form; None for the exact GELU (ORT's own Gelu and
        BiasGelu fusions serve it)."""
        if attrs(node).get("approximate", b"none") not in (b"tanh", "tanh"):
            return None
        return node.input[0], node.output[0], [node]


GELU = (TanhGeluDecomposed(), OnnxGelu())
