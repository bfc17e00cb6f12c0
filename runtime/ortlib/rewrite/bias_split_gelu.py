"""A UNet's GEGLU as one node: ORT's own `com.microsoft.BiasSplitGelu`, the Linear's bias folded in.

The feed-forward of every transformer block of the SD 1.5 and SDXL UNets is diffusers' GEGLU:
`h, gate = Linear(x).chunk(2, -1); out = h * gelu(gate)` with the exact (erf) GELU, on the widest tensor of the
block (eight times the channels per token). As exported that is the MatMul, its bias Add (which ORT's optimizer
fuses into a Gemm that first broadcasts the bias into the output), the split into halves and four to six
elementwise kernels. BiasSplitGelu computes `(y + b)[..., :D/2] * gelu((y + b)[..., D/2:])` from the MatMul's
output y in one pass. Forms:

- ErfGegluDecomposed (TorchScript): two Slices of X on the last axis, [0, E) and [E, ...), and
  `v * 0.5 * (1 + erf(v / sqrt(2)))` of the second (the factors in either order, the division as a Mul by
  1/sqrt(2) too), anchored at its Erf;
- OnnxGeglu (dynamo): Split of X into two halves on the last axis and ONNX `Gelu` (exact) of the second.

X = `Add(y, b)` of a constant b of one value per channel, read by nothing but the split (and the Shape nodes
TorchScript computes the halves' bounds from). Two nodes compute it: ORT's, whose kernel takes rank-3 X of width
2560, 5120 or 10240, the UNets' GEGLU widths (320, 640 and 1280 channels), in float and float16, and has CUDA
kernels only (a rewrite on a machine whose onnxruntime has no CUDA EP cannot write it); and the library's
`tritonforge.BiasSplitGelu`, the same interface for any even width and every float type
(kernels/bias_split_gelu_triton.py). Where it goes is the measured choice (choices.json's `bias_split_gelu` table, from
the committed rows by benchmarks/choices.py): of the two, the one whose speed-up over the export's
form is the larger, at least 1; neither, and the GEGLU stays with the reasons for both.

OrtBiasSplitGelu takes ORT's own node where a model already has it (ORT's Stable Diffusion optimizer writes it) and
the library's measured faster than ORT's in that dtype: on every form both were measured against, the library's
speed-up over it divided by ORT's. The same inputs and output; the node then also runs on the CPU EP, which has no
kernel for ORT's.
"""

from __future__ import annotations

import math

from .. import DOMAIN
from . import choices
from .graph import MS, attrs, is_op, other_operand
from .patterns import Choice, Left, Match, Rewriter, bias_add, bias_input, measured_form, measured_ort_op, times_const

WIDTHS = (2560, 5120, 10240)  # what ORT's CUDA kernel is instantiated for
LIBRARY_TYPES = ("fp16", "fp32", "bf16")  # the library's op: every float type


def _speedup(which: str, dtype: str, form: str) -> float:
    """The table's speed-up of ORT's ("speedup") or the library's ("library") node over `form`; 0 where a measured
    verdict passed the table by (measured_form) and it has none."""
    return getattr(choices.table("bias_split_gelu"), which).get(dtype, {}).get(form, 0.0)


def _last_axis(axis, rank: int) -> bool:
    return axis is not None and int(axis) % rank == rank - 1


def _halves(g, a: str, v: str) -> tuple[str, list] | None:
    """(X, nodes) where a and v are X's first and second halves on its last axis: Split's two outputs, or two
    Slices [0, D/2) and [D/2, D or past it)."""
    sa, sv = g.producer.get(a), g.producer.get(v)
    if sa is None or sv is None:
        return None
    x = sa.input[0]
    dims = g.dims(x)
    if dims is None or not isinstance(dims[-1], int) or dims[-1] % 2:
        return None
    rank, half = len(dims), dims[-1] // 2
    if is_op(sa, "Split") and sa is sv and list(sa.output) == [a, v]:
        sizes = g.const(sa.input[1]) if len(sa.input) > 1 and sa.input[1] else None
        parts = attrs(sa).get("split") or (sizes.tolist() if sizes is not None else None)
        if _last_axis(attrs(sa).get("axis", 0), rank) and parts in (None, [half, half]):
            return x, [sa]
        return None
    if not (is_op(sa, "Slice") and is_op(sv, "Slice")) or sv.input[0] != x or len(sa.input) < 4 or len(sv.input) < 4:
        return None
    for s in (sa, sv):
        axes = g.const(s.input[3])
        steps = g.const(s.input[4]) if len(s.input) > 4 and s.input[4] else None
        if axes is None or axes.size != 1 or not _last_axis(axes.reshape(-1)[0], rank) or \
                (steps is not None and steps.reshape(-1).tolist() != [1]):
            return None
    # the bounds as the model fixes them (TorchScript computes them from Shape(X): folded where X's width is fixed)
    bounds = [[None if (c := g.const(s.input[k])) is None or c.size != 1 else int(c.reshape(-1)[0]) for k in (1, 2)]
              for s in (sa, sv)]
    if bounds[0] != [0, half] or bounds[1][0] != half or bounds[1][1] is None or bounds[1][1] < 2 * half:
        return None
    return x, [sa, sv]


def _feeds_only(g, value: str, targets: list, depth: int = 0) -> bool:
    """Every reader of `value` is one of `targets`, or a shape computation (Shape, Gather, arithmetic) whose
    values reach nothing but them."""
    ids = {id(t) for t in targets}
    for n in g.consumers.get(value, []):
        if id(n) in ids:
            continue
        if depth > 8 or n.op_type not in ("Shape", "Gather", "Add", "Sub", "Div", "Mul", "Cast", "Unsqueeze",
                                          "Concat", "Slice", "Squeeze") or n.op_type == "Slice" and depth == 0:
            return False
        if any(o in g.outputs or not _feeds_only(g, o, targets, depth + 1) for o in n.output):
            return False
    return value not in g.outputs


class _Geglu:
    anchors: set
    source: str
    form: str

    def _write(self, r: Rewriter, anchor, v: str, gelu_out: str, gelu_nodes: list) -> Match:
        from onnx import helper

        g = r.graph
        mul = g.only_reader(gelu_out)
        a = other_operand(mul, gelu_out) if is_op(mul, "Mul") else None
        found = _halves(g, a, v) if a else None
        if found is None:
            return None
        x, split = found
        inside = {id(n) for n in gelu_nodes}
        if g.only_reader(a) is not mul or v in g.outputs or any(id(n) not in inside for n in g.consumers.get(v, [])):
            raise Left("a half of the GEGLU is read elsewhere too")
        bias = bias_add(g, x, g.consumers.get(x, [])) if _feeds_only(g, x, split) else None
        if bias is None:
            raise Left("X is not a Linear's output plus a bias of one value per channel read by the split alone")
        y, b_name, b, add = bias
        dtype, domain = self._fastest(r, x)
        name = r.node_name((anchor.name or mul.output[0]).rsplit("/", 1)[0] + "/BiasSplitGelu")
        node = helper.make_node("BiasSplitGelu", [y, bias_input(r, b_name, b)], [mul.output[0]], name=name,
                                domain=domain)
        return Match([add, *split, *gelu_nodes, mul], node, self.source, dtype=dtype)

    def _fastest(self, r: Rewriter, x: str) -> tuple[str, str]:
        """(X's dtype, the domain of the node that measured the larger speed-up over this form, at least 1): ORT's or
        the library's; Left naming why each was passed over when neither."""
        found, why = [], []
        dims = r.graph.dims(x)
        try:
            if len(dims) != 3 or dims[-1] not in WIDTHS:
                raise Left(f"ORT's BiasSplitGelu takes (batch, tokens, width) of width "
                           f"{', '.join(map(str, WIDTHS))}; X is {dims}")
            dtype = measured_ort_op(r, x, "bias_split_gelu", "BiasSplitGelu", self.form, " (it has CUDA kernels only)")
            found.append((_speedup("speedup", dtype, self.form), MS, dtype))
        except Left as left:
            why.append(str(left))
        try:
            r.check_served("BiasSplitGelu", r.dtype(x), LIBRARY_TYPES)
            dtype = measured_form(r, x, "bias_split_gelu", "the library's BiasSplitGelu", self.form, "LIBRARY")
            found.append((_speedup("library", dtype, self.form), DOMAIN, dtype))
        except Left as left:
            why.append(str(left))
        if not found:
            raise Left("; ".join(why))
        chosen = r.choice()
        if chosen is not None:  # measured on this GPU (measure.py): its pick where both can be written
            want = MS if chosen.pick == "ort" else DOMAIN
            _, domain, dtype = next((f for f in found if f[1] == want), found[0])
            return dtype, domain
        _, domain, dtype = max(found)
        return dtype, domain


class ErfGegluDecomposed(_Geglu):
    """GEGLU with the erf GELU as TorchScript writes it (see the module's text), anchored at its Erf."""

    anchors = {("", "Erf")}
    source = "GEGLU: Slices and the erf GELU"
    form = "decomposed"

    def match(self, r: Rewriter, erf):
        g = r.graph
        pre = g.producer.get(erf.input[0])
        if is_op(pre, "Div") and g.scalar(pre.input[1]) is not None and \
                math.isclose(g.scalar(pre.input[1]), math.sqrt(2), rel_tol=2e-3):
            v = pre.input[0]
        else:
            v = times_const(g, pre, 1 / math.sqrt(2))
        one = g.only_reader(erf.output[0])
        if v is None or not is_op(one, "Add") or g.scalar(other_operand(one, erf.output[0]) or "") != 1:
            return None
        m1 = g.only_reader(one.output[0])
        if not is_op(m1, "Mul"):
            return None
        other = other_operand(m1, one.output[0])
        if other == v:  # (v * (1 + erf)) * 0.5
            m2 = g.only_reader(m1.output[0])
            if times_const(g, m2, 0.5) != m1.output[0]:
                return None
            nodes, out = [pre, erf, one, m1, m2], m2.output[0]
        else:  # (v * 0.5) * (1 + erf)
            h = g.producer.get(other)
            if times_const(g, h, 0.5) != v or g.only_reader(other) is not m1:
                return None
            nodes, out = [h, pre, erf, one, m1], m1.output[0]
        if any(g.only_reader(n.output[0]) is None for n in nodes if n.output[0] != out):
            raise Left("a value inside the GELU is read elsewhere too")
        return self._write(r, erf, v, out, nodes)


class OnnxGeglu(_Geglu):
    """GEGLU as the dynamo exporter writes it: Split into halves, ONNX Gelu (exact) of the second, Mul."""

    anchors = {("", "Gelu")}
    source = "GEGLU: Split and ONNX Gelu"
    form = "onnx_gelu"

    def match(self, r: Rewriter, node):
        if attrs(node).get("approximate", b"none") not in (b"none", "none"):
            return None
        return self._write(r, node, node.input[0], node.output[0], [node])


class OrtBiasSplitGelu:
    """ORT's com.microsoft.BiasSplitGelu as the library's, where that measured faster (see the module's text)."""

    anchors = {(MS, "BiasSplitGelu")}
    source = "ORT's BiasSplitGelu"

    def match(self, r: Rewriter, node):
        from onnx import helper

        dtype = r.dtype(node.input[0])
        if dtype is None:
            raise Left("X's element type is not known")
        r.check_served("BiasSplitGelu", dtype, LIBRARY_TYPES)
        chosen = r.choice()
        if chosen is not None:  # measured on this GPU (measure.py): ORT's node is the export's here
            Choice("export" if chosen.pick != "library" else "library", chosen.why).take()
            new = helper.make_node("BiasSplitGelu", list(node.input), list(node.output), name=node.name, domain=DOMAIN)
            return Match([node], new, self.source, dtype=dtype)
        measured = choices.table("bias_split_gelu")
        ours, orts, device = measured.library.get(dtype, {}), measured.speedup.get(dtype, {}), measured.device
        ratios = [ours[f] / orts[f] for f in ours if f in orts]
        if not ratios:
            raise Left(f"the library's BiasSplitGelu and ORT's were not both measured in {dtype} on {device}: ORT's "
                       "node kept")
        if min(ratios) < 1:
            raise Left(f"ORT's BiasSplitGelu measured faster than the library's in {dtype} ({min(ratios):.2f}x, "
                       f"{device})")
        new = helper.make_node("BiasSplitGelu", list(node.input), list(node.output), name=node.name, domain=DOMAIN)
        return Match([node], new, self.source, note=f"the library's measured {min(ratios):.2f}x ORT's", dtype=dtype)


BIAS_SPLIT_GELU = (ErfGegluDecomposed(), OnnxGeglu(), OrtBiasSplitGelu())
