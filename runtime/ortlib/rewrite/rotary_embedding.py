"""Rotary position embedding on interleaved pairs as one node: `tritonforge.RotaryEmbedding`.

Flux turns its queries and keys by their tokens' positions, `x * cos + rot(x) * sin` with rot taking each pair
(x[2i], x[2i+1]) to (-x[2i+1], x[2i]) (diffusers' apply_rotary_emb with the pairs unbound on the last axis; the
video DiTs write the same on whole token rows). torch.onnx writes rot(x) as:

    P = Reshape(x, (..., -1, 2))                      the pairs
    real, imag = P[..., 0], P[..., 1]                 Slice + Squeeze, Split + Squeeze, or Gather
    rot = Reshape(Concat(Unsqueeze(Neg(imag), -1), Unsqueeze(real, -1), axis=-1), x's shape)

and then `Add(Mul(x, cos), Mul(rot, sin))`, either order of either, the products in fp32 between Casts when
x is half precision. One matcher, anchored at the Neg, takes that. The node reads x (the half-precision x, and
writes the Cast back's output, where the export casts there and back) and cos and sin as float, as they
broadcast against x (the op checks the broadcast when it runs). Pairs in flat order are the same pairs
whatever shape the Reshapes give between, so only the pair axis and the shape back are checked.

Flux normalizes its queries and keys first: opset 23's RMSNormalization over head_dim (the dynamo exporter's), and
in its double blocks one per stream, joined by a Concat on the token axis before the rotation. Where x, read by
the rotation alone, is such a norm (form `rms`) or such a join of two (form `rms_joined`), the node takes them too:
X (and X_b), gamma (and gamma_b) as fp32, epsilon and the join's axis; the norm's output is then never written.

Where it goes is the measured choice (choices.json's `rotary_embedding` table, derived from the committed rows by
benchmarks/choices.py), per form: a dtype whose library node did not measure faster than the export's nodes keeps them
(a norm the node may not take stays ORT's, and the rotation alone is taken where that measured faster), and the report
says why.
"""

from __future__ import annotations

import numpy as np

from .. import DOMAIN
from .graph import FLOAT_TYPES, attrs, is_op, other_operand
from .patterns import Left, Match, Rewriter, measured_form

_FLOAT = 1  # onnx.TensorProto.FLOAT
# The widest head the norm forms' kernels take: they hold a row in one tile (kernels/rotary_embedding_triton.py's
# RMS_CONFIGS); a wider head keeps ORT's norm
NORM_MAX_D = 256


def _ints(g, node, name: str, index: int) -> list[int] | None:
    """An int list given as attribute `name` (older opsets) or as input `index`, when the model fixes it."""
    if name in attrs(node):
        return [int(v) for v in attrs(node)[name]]
    v = g.const(node.input[index]) if len(node.input) > index and node.input[index] else None
    return None if v is None else [int(a) for a in v.reshape(-1)]


def _last_axis(axes: list[int] | None, rank: int | None) -> bool:
    return axes is not None and len(axes) == 1 and (axes[0] == -1 or rank is not None and axes[0] == rank - 1)


def _half(g, value: str, rank: int | None) -> tuple[str, int, list] | None:
    """(P, k, nodes) where `value` is P[..., k] of pairs P (last axis 2): Squeeze(Slice(P, k, k+1), -1),
    Squeeze of Split(P, axis=-1)'s output k, or Gather(P, k, axis=-1)."""
    node = g.producer.get(value)
    if is_op(node, "Gather"):
        k = g.const(node.input[1])
        if k is not None and k.ndim == 0 and int(k) in (0, 1) and _last_axis([attrs(node).get("axis", 0)], rank):
            return node.input[0], int(k), [node]
        return None
    if not is_op(node, "Squeeze") or not _last_axis(_ints(g, node, "axes", 1), rank):
        return None
    cut = g.producer.get(node.input[0])
    if g.only_reader(node.input[0]) is not node:
        return None
    if is_op(cut, "Slice") and len(cut.input) >= 4:
        starts, ends, axes = (g.const(i) for i in cut.input[1:4])
        steps = g.const(cut.input[4]) if len(cut.input) > 4 and cut.input[4] else None
        if any(v is None or v.size != 1 for v in (starts, ends, axes)) or steps is not None and int(steps) != 1:
            return None
        k = int(starts.reshape(-1)[0])
        if k in (0, 1) and int(ends.reshape(-1)[0]) == k + 1 and _last_axis([int(axes.reshape(-1)[0])], rank):
            return cut.input[0], k, [cut, node]
        return None
    if is_op(cut, "Split") and len(cut.output) == 2 and _last_axis([attrs(cut).get("axis", 0)], rank):
        split = _ints(g, cut, "split", 1)
        if split in (None, [1, 1]) and g.dims(cut.input[0]) is not None and g.dims(cut.input[0])[-1] == 2:
            return cut.input[0], list(cut.output).index(node.input[0]), [cut, node]
    return None


def _unsqueezed_last(g, node, rank: int | None) -> bool:
    axes = _ints(g, node, "axes", 1) if is_op(node, "Unsqueeze") else None
    return axes is not None and len(axes) == 1 and (axes[0] == -1 or rank is not None and axes[0] == rank)


def _through_cast(g, value: str, to: int | None = None) -> tuple[str, list]:
    """(v, [Cast]) where `value` is Cast(v) (to `to`, when given), else (value, [])."""
    node = g.producer.get(value)
    if is_op(node, "Cast") and (to is None or attrs(node).get("to") == to):
        return node.input[0], [node]
    return value, []


def choose(r: Rewriter, x: str, form: str = "decomposed") -> str:
    """X's dtype when the library serves it and its RotaryEmbedding measured faster than the export's nodes."""
    if r.dtype(x) is not None:
        r.check_served("RotaryEmbedding", r.dtype(x), ("fp16", "fp32", "bf16"))
    return measured_form(r, x, "rotary_embedding", "the library's RotaryEmbedding", form)


def _rms(g, value: str) -> tuple[str, np.ndarray, float, object] | None:
    """(x, gamma (d) float64, epsilon, the node) where `value` is RMSNormalization(x, gamma) over the last axis with a
    constant gamma."""
    node = g.producer.get(value)
    if not is_op(node, "RMSNormalization") or len(node.input) < 2:
        return None
    a, dims = attrs(node), g.dims(value)
    d = dims[-1] if dims else None
    if a.get("axis", -1) not in (-1, len(dims or []) - 1) or a.get("stash_type", 1) != 1 or not isinstance(d, int) \
            or d > NORM_MAX_D:
        return None
    gamma = g.const(node.input[1])
    if gamma is None or gamma.size not in (1, d) or gamma.ndim > 1 and gamma.shape[-1] != gamma.size:
        return None
    return node.input[0], np.broadcast_to(gamma.astype(np.float64).reshape(-1), (d,)), float(a.get("epsilon", 1e-5)), \
        node


def _normalized(g, x: str):
    """(form, [(x, gamma)] per stream, epsilon, the join's axis, nodes) where `x` is one RMSNormalization (`rms`) or
    the Concat of two with one epsilon on an axis before the last (`rms_joined`); None otherwise."""
    one = _rms(g, x)
    if one:
        return "rms", [one[:2]], one[2], 1, [one[3]]
    concat = g.producer.get(x)
    rank = len(g.dims(x) or []) or None
    if not is_op(concat, "Concat") or len(concat.input) != 2 or rank is None:
        return None
    axis = attrs(concat).get("axis", 0)
    axis = axis + rank if axis < 0 else axis
    a, b = (_rms(g, v) if g.only_reader(v) is concat else None for v in concat.input)
    if not a or not b or a[2] != b[2] or not 0 <= axis < rank - 1:
        return None
    return "rms_joined", [a[:2], b[:2]], a[2], axis, [a[3], b[3], concat]


class InterleavedRotary:
    """`x * cos + rot(x) * sin` with rot on interleaved pairs (see the module's text), anchored at its Neg."""

    anchors = {("", "Neg")}
    target = "RotaryEmbedding"
    source = "rotary embedding on interleaved pairs"

    def match(self, r: Rewriter, neg):
        from onnx import helper

        g = r.graph
        # the first hops by any reader: a value of the rotation read elsewhere too is said below, not passed over
        unsq_neg = next((n for n in g.consumers.get(neg.output[0], []) if is_op(n, "Unsqueeze")), None)
        concat = next((n for n in g.consumers.get(unsq_neg.output[0], []) if is_op(n, "Concat")), None) \
            if unsq_neg else None
        if not is_op(concat, "Concat") or len(concat.input) != 2 or concat.input[0] != unsq_neg.output[0]:
            return None
        half_rank = len(g.dims(neg.output[0]) or []) or None
        imag = _half(g, neg.input[0], half_rank and half_rank + 1)
        real_unsq = g.producer.get(concat.input[1])
        if imag is None or imag[1] != 1 or not is_op(real_unsq, "Unsqueeze"):
            return None
        pairs_value, _, imag_nodes = imag
        real = _half(g, real_unsq.input[0], half_rank and half_rank + 1)
        if real is None or real[:2] != (pairs_value, 0):
            return None
        rank = half_rank
        if not (_unsqueezed_last(g, unsq_neg, rank) and _unsqueezed_last(g, real_unsq, rank)) or \
                attrs(concat).get("axis") not in (-1, rank):
            raise Left("the halves are not stacked on a new last axis")
        pairs = g.producer.get(pairs_value)
        if not is_op(pairs, "Reshape") or (g.dims(pairs_value) or [None])[-1] != 2:
            raise Left("the pairs are not a Reshape of x with a last axis of 2")
        x = pairs.input[0]
        back = g.only_reader(concat.output[0])
        if not is_op(back, "Reshape") or not g.same_shape(back.output[0], x):
            raise Left("the stacked pairs are not reshaped back to x's shape")
        d = (g.dims(x) or [None])[-1]
        if isinstance(d, int) and d % 2:
            raise Left(f"x's last axis ({d}) is odd")
        rot, rot_cast = back.output[0], []
        if is_op(g.only_reader(rot), "Cast"):
            rot_cast = [g.only_reader(rot)]
            rot = rot_cast[0].output[0]
        mul_rot = g.only_reader(rot)
        sin = other_operand(mul_rot, rot) if is_op(mul_rot, "Mul") else None
        add = g.only_reader(mul_rot.output[0]) if sin else None
        other = other_operand(add, mul_rot.output[0]) if is_op(add, "Add") else None
        mul_x = g.producer.get(other) if other else None
        if not is_op(mul_x, "Mul") or g.only_reader(other) is not add:
            raise Left("rot(x) * sin is not added to x * cos")
        x_cast = []
        for i, j in ((0, 1), (1, 0)):
            seen, cast = _through_cast(g, mul_x.input[i])
            if seen == x:
                x_f, cos, x_cast = mul_x.input[i], mul_x.input[j], cast
                break
        else:
            raise Left("the rotation is added to a product that is not x * cos")
        if g.elem(x_f) != g.elem(rot) or x_cast and g.only_reader(x_f) is not mul_x:
            raise Left("x and rot(x) are multiplied in different types, or x's cast is read elsewhere")
        for name, what in ((cos, "cos"), (sin, "sin")):
            dims = g.dims(name)
            if dims is not None and (len(dims) > len(g.dims(x) or dims) or dims and dims[-1] not in (d, None)):
                raise Left(f"{what} does not broadcast against x along its last axis")
        out, removed = add.output[0], [pairs, *imag_nodes, *real[2], neg, unsq_neg, real_unsq, concat, back,
                                      *rot_cast, mul_rot, mul_x, add]
        inside = {id(n) for n in removed}
        for n in removed:
            for v in n.output:
                if v != out and (v in g.outputs or any(id(c) not in inside for c in g.consumers.get(v, []))):
                    raise Left(f"'{v}', inside the rotation, is read elsewhere too")
        back_cast = g.only_reader(out)
        # x cast up and the sum cast back: the node reads x and writes x's type, in one pass
        if x_cast and is_op(back_cast, "Cast") and attrs(back_cast).get("to") == g.elem(x):
            inputs, out = [x], back_cast.output[0]
            removed += [*x_cast, back_cast]
        else:
            inputs = [x_f]
        norm, note, form, extra = _normalized(g, inputs[0]), "", "decomposed", {}
        inside = {id(n) for n in removed}
        if norm and (inputs[0] in g.outputs or any(id(c) not in inside for c in g.consumers.get(inputs[0], []))):
            norm, note = None, f"the q/k norm stays ORT's: its output '{inputs[0]}' is read elsewhere too"
        if norm and len(norm[1]) > 1 and g.elem(norm[1][0][0]) != g.elem(norm[1][1][0]):
            norm, note = None, "the q/k norm stays ORT's: its two streams' element types differ"
        if norm:
            try:
                choose(r, inputs[0], norm[0])
                form, streams, eps, axis, norm_nodes = norm
                removed += norm_nodes
                inputs = [streams[0][0]]
                extra = {"epsilon": eps, **({"axis": axis} if len(streams) > 1 else {})}
            except Left as why:  # the rotation alone may still have measured faster than the export's
                note = f"the q/k RMSNormalization stays ORT's: {why}"
        dtype = choose(r, inputs[0], form)
        before = []
        for name in (cos, sin):
            if g.elem(name) == _FLOAT:
                inputs.append(name)
                continue
            if g.elem(name) not in FLOAT_TYPES:
                raise Left(f"'{name}' is not float, float16 or bfloat16")
            cast = g.unique(f"{name}_tf_fp32")
            before.append(helper.make_node("Cast", [name], [cast], name=r.node_name(f"{name}/CastFp32"), to=_FLOAT))
            inputs.append(cast)
        if form != "decomposed":
            for i, (x_i, gamma) in enumerate(streams):
                inputs += [x_i] if i else []
                inputs.append(r.fp32(gamma, f"{x_i}_tf_gamma"))
        node = helper.make_node("RotaryEmbedding", inputs, [out], name=r.node_name(
            (neg.name or out).rsplit("/", 1)[0] + "/RotaryEmbedding"), domain=DOMAIN, **extra)
        source = {"decomposed": self.source, "rms": f"{self.source} with its RMSNormalization",
                  "rms_joined": f"{self.source} with two streams' RMSNormalizations and their Concat"}[form]
        return Match(removed, node, source, before=before, dtype=dtype, note=note)


ROTARY_EMBEDDING = (InterleavedRotary(),)
