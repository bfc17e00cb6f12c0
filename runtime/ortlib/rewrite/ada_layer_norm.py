"""A diffusion transformer's block norm as one node: `tritonforge.AdaLayerNorm`.

SD3, SD3.5, Flux and PixArt normalise each token without an affine and modulate it per image,
`LN(x) * (1 + scale) + shift`, and the norm after a branch reads the residual that branch joined through
its gate, `x = x + gate * branch`. Both exporters write ONNX LayerNormalization followed by a Mul and an
Add against per-item (B, 1, C) factors, the gated residual as a Mul and an Add before it. One matcher,
anchored at the LayerNormalization, takes every form seen:

- the factor as `Unsqueeze(scale) + 1`, `1 + scale` of a (B, 1, C) slice, or `Unsqueeze(scale + 1)`;
- the shift as any value of one row per item, (B, 1, C);
- LayerNormalization over the last axis with weight one and bias zero (or none);
- before it, optionally, `x_prev + gate * branch` (either order), gate one row per item: the node then
  takes x_prev, branch and gate and writes the sum as its second output under the sum's name;
- and where that branch is a Linear's `MatMul + bias`, the bias too (form `gated_bias`): the MatMul then runs
  without a bias pass of its own (ORT adds a Linear's bias in a kernel of its own before its GEMM);
- a Clip of constant bounds between that sum and the norm (fp16 Flux's `clip(-65504, 65504)` of its residual
  stream) goes into the node too (`clip_min`, `clip_max`): the same form, one pass fewer on the export's side.

A second matcher, tried after SkipLayerNormalization's (skip_layer_norm.py), takes a LayerNormalization with a
constant weight and bias and nothing of the above around it (form `affine`: the UNets' first norm of each
transformer block, `norm1`, which no residual precedes): its affine is the node's modulation for all items,
scale = weight - 1 and shift = bias, exact in the weight's own type for weights within [0.5, 2].

Where it goes is the measured choice (choices.json's `ada_layer_norm` table, derived from the committed rows by
benchmarks/choices.py): a dtype and form whose library node did not measure faster than the export's nodes keep them,
and the report says why (for `affine`, once for all of a model's norms).
"""

from __future__ import annotations

import numpy as np

from .. import DOMAIN
from .graph import attrs, is_op, other_operand
from .patterns import Left, Match, Rewriter, bias_add, measured_form


def _per_item(g, name: str, c: int, depth: int = 0) -> bool:
    """`name` holds one row of c per item, broadcast over tokens: (B, 1, c) or (1, 1, c) as inferred, or, where
    inference lost the dims, an Unsqueeze on axis 1 or a Slice on axis 1 of a few rows per item (PixArt's
    chunks of its (B, 6, C) modulation), seen through Cast and a scalar Add."""
    d = g.dims(name)
    if d is None or len(d) != 3 or d[2] not in (c, None) or d[1] not in (1, None):
        return False
    if d[1] == 1:
        return True
    node = g.producer.get(name)
    if depth > 3 or node is None:
        return False
    if node.op_type in ("Cast", "Add") and (node.op_type == "Cast" or any(
            (v := g.const(i)) is not None and v.size == 1 for i in node.input)):
        return any(_per_item(g, i, c, depth + 1) for i in node.input if g.const(i) is None)
    if node.op_type == "Unsqueeze":
        axes = attrs(node).get("axes") or (list(g.const(node.input[1]).reshape(-1)) if len(node.input) > 1 and
                                           g.const(node.input[1]) is not None else None)
        return axes is not None and [int(a) for a in axes] == [1]
    if node.op_type == "Slice" and len(node.input) > 3:
        axes, src = g.const(node.input[3]), g.dims(node.input[0])
        return axes is not None and [int(a) for a in axes.reshape(-1)] == [1] and src is not None and \
            len(src) == 3 and isinstance(src[1], int) and src[1] <= 16
    return False


def _scale_of(g, factor: str, c: int) -> tuple[str, list] | None:
    """(scale, nodes) where `factor` is 1 + scale per item: Add(scale, 1) of a (B, 1, c) value, or
    Unsqueeze(Add(scale, 1), [1]) of a (B, c) one."""
    node = g.producer.get(factor)
    if is_op(node, "Add") and _per_item(g, factor, c):
        for i, j in ((0, 1), (1, 0)):
            if g.scalar(node.input[j]) == 1:
                return node.input[i], [node]
    if is_op(node, "Unsqueeze") and _per_item(g, factor, c):
        add = g.producer.get(node.input[0])
        d = g.dims(node.input[0])
        if is_op(add, "Add") and d is not None and len(d) == 2 and g.only_reader(add.output[0]) is node:
            for i, j in ((0, 1), (1, 0)):
                if g.scalar(add.input[j]) == 1:
                    return add.input[i], [add, node]
    return None


def _clip_of(g, node) -> tuple[float, float] | None:
    """(min, max) where `node` is a Clip of constant bounds (either may be absent: -inf, inf) of an Add only it
    reads: fp16 Flux's `residual.clip(-65504, 65504)` after the gated residual."""
    src = g.producer.get(node.input[0]) if is_op(node, "Clip") else None
    if not is_op(src, "Add") or g.only_reader(node.input[0]) is not node:
        return None
    a = attrs(node)
    if "min" in a or "max" in a:  # opset < 11
        return float(a.get("min", -np.inf)), float(a.get("max", np.inf))
    bounds = []
    for i, default in ((1, -np.inf), (2, np.inf)):
        name = node.input[i] if len(node.input) > i else ""
        v = g.scalar(name) if name else default
        if v is None:
            return None
        bounds.append(float(v))
    return bounds[0], bounds[1]


def choose(r: Rewriter, x: str, form: str) -> str:
    """X's dtype when the library serves it and its AdaLayerNorm measured faster than the export's `form`."""
    if r.dtype(x) is not None:
        r.check_served("AdaLayerNorm", r.dtype(x), ("fp16", "fp32", "bf16"))
    return measured_form(r, x, "ada_layer_norm", "the library's AdaLayerNorm", form)


class ModulatedLayerNorm:
    """LayerNormalization -> Mul(1 + scale) -> Add(shift), optionally after x_prev + gate * branch."""

    anchors = {("", "LayerNormalization")}
    target = "AdaLayerNorm"
    source = "LayerNormalization with its modulation"

    def match(self, r: Rewriter, ln):
        from onnx import helper

        g = r.graph
        x = ln.input[0]
        dims = g.dims(x)
        mul = g.only_reader(ln.output[0])
        if not is_op(mul, "Mul") or len(ln.output) > 1 and any(ln.output[1:]):
            return None
        if dims is None or len(dims) != 3 or not isinstance(dims[2], int):
            raise Left("X is not (batch, tokens, channels) with the channels fixed")
        c = dims[2]
        a = attrs(ln)
        if a.get("axis", -1) not in (-1, 2):
            raise Left(f"axis {a.get('axis')} is not the last")
        weight = g.const(ln.input[1])
        bias = g.const(ln.input[2]) if len(ln.input) > 2 and ln.input[2] else np.zeros(1)
        if weight is None or bias is None or not np.all(weight == 1) or not np.all(bias == 0):
            raise Left("the norm has an affine (weight not one or bias not zero): not a modulated norm")
        factor = other_operand(mul, ln.output[0])
        found = _scale_of(g, factor, c) if factor else None
        if found is None:
            raise Left("the norm is not multiplied by 1 + scale per item")
        scale, _ = found
        add = g.only_reader(mul.output[0])
        shift = other_operand(add, mul.output[0]) if is_op(add, "Add") else None
        if shift is None or not _per_item(g, shift, c):
            raise Left("(1 + scale) * norm is not followed by + shift per item")
        inputs, outputs, removed, form = [x, scale, shift], [add.output[0]], [ln, mul, add], "plain"
        residual = g.producer.get(x)
        clip = _clip_of(g, residual)
        gated = self._gated(g, g.producer.get(residual.input[0]) if clip else residual, c, x)
        note, bounds = "", {}
        if gated:
            prev, branch, gate, gate_mul = gated
            inputs = [prev, scale, shift, branch, gate]
            # the sum keeps its name where anything else reads it (the next block's residual)
            if [n for n in g.consumers.get(x, []) if n is not ln] or x in g.outputs:
                outputs.append(x)
            if clip:  # the clipped sum is what the norm and the next block read: the node clips it
                bounds = {"clip_min": clip[0], "clip_max": clip[1]}
                removed.append(residual)
                residual = g.producer.get(residual.input[0])
            removed += [residual, gate_mul]
            form = "gated"
            biased = bias_add(g, branch, [gate_mul])
            if biased and g.same_shape(biased[0], x) and g.elem(biased[1]) == g.elem(x):
                try:
                    dtype = choose(r, x, "gated_bias")
                    inputs[3:] = [biased[0], gate, biased[1]]
                    removed.append(biased[3])
                    form = "gated_bias"
                except Left as why:  # the gated form without the bias may still have measured faster
                    note = f"the branch's bias stays a node of its own: {why}"
        dtype = choose(r, x, form)
        for name in inputs[1:]:
            if g.elem(name) != g.elem(x):
                raise Left(f"'{name}' is not of X's element type")
        node = helper.make_node("AdaLayerNorm", inputs, outputs, name=r.node_name(ln.name or add.output[0]),
                                domain=DOMAIN, epsilon=float(a.get("epsilon", 1e-5)), **bounds)
        what = {"plain": "", "gated": " and its gated residual", "gated_bias": " and its gated residual with the "
                "branch's bias"}[form]
        return Match(removed, node, f"{self.source}{what}", dtype=dtype, note=note)

    @staticmethod
    def _gated(g, residual, c: int, x: str):
        """(x_prev, branch, gate, the gate's Mul) where `residual` is x_prev + gate * branch, else None."""
        if not is_op(residual, "Add"):
            return None
        for i, j in ((0, 1), (1, 0)):
            mul = g.producer.get(residual.input[j])
            if not is_op(mul, "Mul") or g.only_reader(mul.output[0]) is not residual:
                continue
            for k, m in ((0, 1), (1, 0)):
                gate, branch = mul.input[k], mul.input[m]
                if _per_item(g, gate, c) and g.same_shape(branch, x) and g.same_shape(residual.input[i], x):
                    return residual.input[i], branch, gate, mul
        return None


class AffineLayerNorm:
    """LayerNormalization(x, weight, bias) of constants over the last axis, alone: AdaLayerNorm(x, weight - 1, bias)."""

    anchors = {("", "LayerNormalization")}
    target = "AdaLayerNorm"
    source = "LayerNormalization with its affine"

    def match(self, r: Rewriter, ln):
        from onnx import helper

        g = r.graph
        x = ln.input[0]
        dims = g.dims(x)
        if len(ln.output) > 1 and any(ln.output[1:]) or dims is None or len(dims) < 2:
            return None
        c = dims[-1]
        if not isinstance(c, int) or attrs(ln).get("axis", -1) not in (-1, len(dims) - 1):
            return None
        weight = g.const(ln.input[1])
        bias = g.const(ln.input[2]) if len(ln.input) > 2 and ln.input[2] else np.zeros(1)
        if weight is None or bias is None or weight.size not in (1, c) or bias.size not in (1, c):
            return None
        try:
            dtype = choose(r, x, "affine")
        except Left as why:  # one line for all a model's norms, not one per node
            r.notes[str(why)] += 1
            return None
        kind = _numpy_type(dtype)
        values = [np.broadcast_to(v.astype(np.float64).reshape(-1), (c,)) for v in (weight, bias)]
        scale, shift = (r.typed((v - d).astype(kind), f"{ln.name or x}_{what}")
                        for v, d, what in zip(values, (1, 0), ("scale", "shift")))
        node = helper.make_node("AdaLayerNorm", [x, scale, shift], [ln.output[0]],
                                name=ln.name or r.node_name(ln.output[0]), domain=DOMAIN,  # in its place
                                epsilon=float(attrs(ln).get("epsilon", 1e-5)))
        return Match([ln], node, self.source, dtype=dtype)


def _numpy_type(dtype: str):
    """numpy's type of `dtype` (bfloat16: ml_dtypes', what onnx's bfloat16 tensors are; onnx brings it)."""
    if dtype == "bf16":
        import ml_dtypes

        return ml_dtypes.bfloat16
    return {"fp32": np.float32, "fp16": np.float16}[dtype]

ADA_LAYER_NORM = (ModulatedLayerNorm(),)
AFFINE_LAYER_NORM = (AffineLayerNorm(),)  # tried after SkipLayerNormalization's: a norm it takes stays its
