"""The forms of multi-head attention the rewrite recognises, one declared matcher each, and where each goes.

Every form ends as one node on the (B, S, H*d) projections, query, key and value, that the exporters
reshape into heads: `tritonforge.MultiHeadAttention` (the library's flash-attention kernels), or ORT's own
`com.microsoft.MultiHeadAttention` where that measured faster for the shape's class (attention_measured.py,
derived from the committed measurements by benchmarks/attention_choice.py), as TunableOp would let ORT's
kernel win. Both take the same inputs and attributes (num_heads, scale, unidirectional).

- DecomposedAttention: F.scaled_dot_product_attention as torch.onnx writes it, anchored at its Softmax.
  Q: Reshape (B, S, H, d) -> Transpose [0, 2, 1, 3]; K^T: Reshape -> Transpose [0, 2, 3, 1] (TorchScript), or
  Reshape -> Transpose [0, 2, 1, 3] -> Reshape (B*H, S, d) -> Transpose [0, 2, 1] -> Reshape (dynamo, opset
  18), or a Transpose [0, 1, 3, 2] of K's heads; each side optionally multiplied (or divided) by a scalar,
  the scores too: the scale is their product, folded or computed at run time from Shape(q) (Slice, Cast,
  Sqrt, Div); MatMul -> Softmax -> MatMul with V's heads -> Transpose [0, 2, 1, 3] -> Reshape (B, S, H*d).
- OnnxAttention: ONNX `Attention` (opset 23/24) on 3-D inputs, no mask, no KV cache, no softcap.
- OrtMultiHeadAttention: ORT's `com.microsoft.MultiHeadAttention` on separate 3-D query, key and value with
  no bias, mask or cache, moved to the library where the library measured faster.
"""

from __future__ import annotations

import math

import numpy as np

from .. import DOMAIN
from .attention_measured import DEVICE, SPEEDUP
from .graph import MS, attrs, domain_of
from .patterns import Left, Match, Rewriter

_CHOICES = ("tritonforge", "ort")


def _is(node, op: str, domain: str = "") -> bool:
    return node is not None and node.op_type == op and domain_of(node) == domain


def _perm(node) -> list | None:
    return list(attrs(node).get("perm", [])) if _is(node, "Transpose") else None


# ---- where an attention goes ---------------------------------------------------------------------
def shape_class(sq: int | None, skv: int | None, head_dim: int) -> str:
    """The measured table's key: cross-attention over a short text (Skv < 128 keys), or self-attention at
    the head dim's width, "self d<d>"."""
    if skv is not None and skv < 128:
        return "cross"
    return f"self d{head_dim}"


def measured_choice(dtype: str | None, sq, skv, head_dim: int) -> tuple[str, str]:
    """("tritonforge", "ort" or "decomposed", why): the fastest measured for the shape's class (the nearest head
    dim measured where the class was not; the library where nothing was); bf16 and unknown types follow fp16."""
    table = SPEEDUP.get(dtype or "fp16") or SPEEDUP.get("fp16") or {}
    key = shape_class(sq, skv, head_dim)
    if key not in table:
        selfs = [k for k in table if k.startswith("self d")]
        if key == "cross" or not selfs:
            return "tritonforge", "no measurement for its class"
        key = min(selfs, key=lambda k: abs(math.log(int(k[6:]) / head_dim)))
    rivals = table[key]  # each rival's time over the library's
    best = min(rivals, key=rivals.get)
    where = "tritonforge" if rivals[best] >= 1 else {"ort_mha": "ort", "decomposed": "decomposed"}[best]
    said = ", ".join(f"{v:.2f}x {p}" for p, v in rivals.items())
    return where, f"on {key} the library measured {said} ({dtype or 'fp16'}, {DEVICE})"


def _node(r: Rewriter, where: str, name: str, q: str, k: str, v: str, out: str, heads: int, scale: float,
          causal: bool):
    from onnx import helper

    domain = DOMAIN if where == "tritonforge" else MS
    return helper.make_node("MultiHeadAttention", [q, k, v], [out], name=r.node_name(name), domain=domain,
                            num_heads=heads, scale=float(scale), **({"unidirectional": 1} if causal else {}))


def _target(r: Rewriter, dtype, sq, skv, d: int, causal: bool, keep_ok: bool = False) -> str:
    """Where the attention goes: the rewrite's `attention` setting, else the measured choice (a causal one
    always to the library: ORT's op aligns its mask differently; bf16 too). Where the form as it is measured fastest,
    Left says so (`keep_ok`: the form is the export's decomposition), else the fastest op is written."""
    r.check_served("MultiHeadAttention", dtype, ("fp16", "fp32", "bf16"))
    if r.attention in _CHOICES:
        return r.attention
    if causal:
        return "tritonforge"
    where, why = measured_choice(dtype, sq, skv, d)
    if where == "decomposed":
        if keep_ok:
            raise Left(f"the decomposition as exported measured fastest: {why}")
        where = "ort" if table_rival(dtype, sq, skv, d, "ort_mha") < 1 else "tritonforge"
    # ORT's MultiHeadAttention has float and float16 kernels only: bf16 stays with the library
    return "tritonforge" if where == "ort" and dtype == "bf16" else where


def table_rival(dtype, sq, skv, d: int, rival: str) -> float:
    """A rival's measured time over the library's for the shape's class (1 where not measured)."""
    table = SPEEDUP.get(dtype or "fp16") or SPEEDUP.get("fp16") or {}
    return table.get(shape_class(sq, skv, d), {}).get(rival, 1.0)


# ---- the scale: a scalar the model fixes or computes from a shape ----------------------------------
def small_value(g, name: str, known: dict | None = None, depth: int = 0) -> np.ndarray | None:
    """A small value the graph fixes, as float64 (nan for a dim the model leaves symbolic): constants, and
    Shape -> Slice / Gather -> Cast -> Sqrt -> Div chains such as torch.onnx's run-time 1/sqrt(d). `known`:
    dims of values the matcher has worked out (a head dim the model leaves symbolic), by value name."""
    c = g.const(name)
    if c is not None:
        return np.asarray(c, np.float64) if c.size <= 64 else None
    node = g.producer.get(name)
    if node is None or depth > 24 or domain_of(node) != "":
        return None
    op, a = node.op_type, attrs(node)
    if op == "Shape":
        dims = (known or {}).get(node.input[0]) or g.dims(node.input[0])
        if dims is None:
            return None
        return np.array([np.nan if v is None else v for v in dims], np.float64)[a.get("start", 0):a.get("end")]
    ins = [small_value(g, i, known, depth + 1) if i else None for i in node.input]
    if not ins or ins[0] is None:
        return None
    x = ins[0]
    if op in ("Cast", "CastLike", "Identity", "Squeeze", "Unsqueeze", "Reshape", "Expand"):
        return x.reshape(-1) if x.size == 1 or op != "Reshape" else x
    if op in ("Sqrt", "Reciprocal", "Neg"):
        return {"Sqrt": np.sqrt, "Reciprocal": np.reciprocal, "Neg": np.negative}[op](x)
    if op in ("Div", "Mul", "Add", "Sub", "Pow") and len(ins) == 2 and ins[1] is not None:
        return {"Div": np.divide, "Mul": np.multiply, "Add": np.add, "Sub": np.subtract, "Pow": np.power}[op](x, ins[1])
    if op == "Slice" and x.ndim == 1 and all(v is not None for v in ins[1:3]):
        steps = ins[4] if len(ins) > 4 and ins[4] is not None else [1]
        return x[int(ins[1][0]):int(ins[2][0]) if ins[2][0] < 2 ** 62 else None:int(steps[0])]
    if op == "Gather" and x.ndim == 1 and len(ins) > 1 and ins[1] is not None:
        return x[ins[1].astype(np.int64)]
    return None


def _scaled(g, value: str) -> tuple[str, str | None, bool, object]:
    """(what a Mul / Div by one value scales, the scale's value name or None, whether it divides, the node)."""
    node = g.producer.get(value)
    one = lambda v: (lambda d: d is not None and all(x == 1 for x in d))(g.dims(v))
    if _is(node, "Div") and one(node.input[1]):
        return node.input[0], node.input[1], True, node
    if _is(node, "Mul"):
        for x, by in ((0, 1), (1, 0)):
            if one(node.input[by]) and not one(node.input[x]):
                return node.input[x], node.input[by], False, node
    return value, None, False, None


def _factor(g, scaled: tuple, known: dict) -> float:
    _, by, divides, node = scaled
    if by is None:
        return 1.0
    v = small_value(g, by, known)
    if v is None or v.size != 1 or not np.isfinite(v).all() or float(v.reshape(-1)[0]) == 0:
        raise Left(f"{node.op_type} '{node.name}' scales by a value that is not a scalar the model fixes or "
                   "computes from a shape")
    f = float(v.reshape(-1)[0])
    return 1 / f if divides else f


# ---- heads: (B, S, H*d) -> Reshape (B, S, H, d) -> Transpose ----------------------------------------
def _split(g, reshape, what: str) -> tuple[str, int, int]:
    """(the (B, S, H*d) projection, H, d) of a Reshape that splits its last axis into heads."""
    if not _is(reshape, "Reshape"):
        raise Left(f"{what} does not come from a Reshape of a (batch, sequence, heads * head_dim) projection")
    x = reshape.input[0]
    src, out = g.dims(x), g.dims(reshape.output[0])
    if src is None or out is None or len(src) != 3 or len(out) != 4 or not isinstance(out[2], int) or (
            out[3] is None and src[2] is None):
        raise Left(f"the Reshape '{reshape.name}' of {what} is not (B, S, H*d) -> (B, S, H, d) with H and d known")
    heads = out[2]
    d = out[3] if out[3] is not None else src[2] // heads
    if src[2] is not None and src[2] != heads * d:
        raise Left(f"the Reshape '{reshape.name}' of {what} does not split {src[2]} channels into {heads} x {d}")
    for i in (0, 1):
        if src[i] is not None and out[i] is not None and src[i] != out[i]:
            raise Left(f"the Reshape '{reshape.name}' of {what} does not keep batch and sequence")
    return x, heads, d


def _heads(g, value: str, what: str) -> tuple[str, int, int]:
    """(projection, H, d) of a (B, H, S, d) value: Transpose [0, 2, 1, 3] of a head-splitting Reshape."""
    t = g.producer.get(value)
    if _perm(t) != [0, 2, 1, 3]:
        raise Left(f"{what} is not a Transpose [0, 2, 1, 3] of heads")
    return _split(g, g.producer.get(t.input[0]), what)


def _key_heads_t(g, value: str) -> tuple[str, int, int]:
    """(projection, H, d) of K^T (B, H, d, S) in the forms the exporters write."""
    t = g.producer.get(value)
    if _perm(t) == [0, 2, 3, 1]:  # TorchScript: K's Reshape transposed once
        return _split(g, g.producer.get(t.input[0]), "K")
    if _perm(t) == [0, 1, 3, 2]:  # K's heads transposed
        return _heads(g, t.input[0], "K")
    if _is(t, "Reshape"):  # dynamo: (B*H, S, d) transposed [0, 2, 1] and reshaped back to (B, H, d, S)
        mid = g.producer.get(t.input[0])
        flat = g.producer.get(mid.input[0]) if _perm(mid) == [0, 2, 1] else None
        dims = g.dims(t.output[0])
        if _is(flat, "Reshape") and dims is not None and len(dims) == 4:
            return _heads(g, flat.input[0], "K")
    raise Left("K^T is not a form the exporters write (Transpose [0, 2, 3, 1] of K's Reshape, or dynamo's "
               "Reshape -> Transpose -> Reshape)")


class DecomposedAttention:
    """F.scaled_dot_product_attention as torch.onnx writes it (module docstring)."""

    anchors = {("", "Softmax")}
    source = "torch.onnx decomposition"

    def match(self, r: Rewriter, sm):
        g = r.graph
        on_scores = _scaled(g, sm.input[0])
        mm1 = g.producer.get(on_scores[0])
        chain = [on_scores[3]] if on_scores[3] is not None else []
        mm2 = g.only_reader(sm.output[0])
        if not _is(mm2, "MatMul") or mm2.input[0] != sm.output[0]:
            return None  # not attention: a softmax of its own
        if not _is(mm1, "MatMul"):
            made = f"{mm1.op_type} '{mm1.name}'" if mm1 is not None else "a graph input"
            raise Left(f"its scores come from {made}, not a MatMul of Q and K^T (a mask or bias added?): the "
                       "library's op takes none")
        dims = g.dims(sm.input[0])
        if dims is None or len(dims) != 4:
            return None
        axis = attrs(sm).get("axis", -1 if g.opset >= 13 else 1)
        if axis not in (-1, 3):
            raise Left("not attention: its Softmax is not over the keys (the last axis)")
        if g.only_reader(mm1.output[0]) is not (chain[0] if chain else sm) or (
                chain and g.only_reader(sm.input[0]) is not sm):
            raise Left("the scores are read by other nodes too")
        # Q's and K's heads and scales are not removed here: the rewrite drops what only the attention read
        on_q, on_k = _scaled(g, mm1.input[0]), _scaled(g, mm1.input[1])
        q, heads, d = _heads(g, on_q[0], "Q")
        k, kh, kd = _key_heads_t(g, on_k[0])
        v, vh, vd = _heads(g, mm2.input[1], "V")
        if (kh, kd) != (heads, d) or (vh, vd) != (heads, d):
            raise Left(f"Q has {heads} heads of {d}, K {kh} of {kd}, V {vh} of {vd}: the op takes one head shape")
        t = g.only_reader(mm2.output[0])
        back = g.only_reader(t.output[0]) if _perm(t) == [0, 2, 1, 3] else None
        out = g.dims(back.output[0]) if _is(back, "Reshape") else None
        if out is None or len(out) != 3 or (out[2] is not None and out[2] != heads * d):
            raise Left("its output is not transposed [0, 2, 1, 3] and reshaped to (B, S, H*d) (or is read by "
                       "other nodes too)")
        dtype = r.dtype(q)
        qd, kd_ = g.dims(q), g.dims(k)
        where = _target(r, dtype, qd[1], kd_[1], d, False, keep_ok=True)
        name = (sm.name.replace("Softmax", "MultiHeadAttention") if "Softmax" in sm.name
                else f"{sm.name or back.output[0]}_attention")
        # a scale computed from the heads' shape sees the head dim the matcher worked out
        known = {on_q[0]: [None, heads, None, d], on_k[0]: [None, heads, d, None]}
        scale = _factor(g, on_scores, known) * _factor(g, on_q, known) * _factor(g, on_k, known)
        # a Cast of the output to the type it has (the exporter's `.to(query.dtype)`) goes too: left after an op
        # onnxruntime's CPU EP runs in float, versions before 1.31 mistype it and refuse the model
        done = [back]
        cast = g.only_reader(back.output[0])
        if _is(cast, "Cast") and attrs(cast).get("to") == g.elem(back.output[0]) != 0:
            done.append(cast)
        new = _node(r, where, name, q, k, v, done[-1].output[0], heads, scale, False)
        return Match([*chain, mm1, sm, mm2, t, *done], new, self.source)


class OnnxAttention:
    """ONNX Attention (opset 23 and later) on (B, S, H*d) query, key and value: no mask, cache or softcap."""

    anchors = {("", "Attention")}
    source = "ONNX Attention"

    def match(self, r: Rewriter, node):
        g = r.graph
        ins = list(node.input) + [""] * (6 - len(node.input))
        outs = [o for o in node.output[1:] if o]
        if ins[3]:
            raise Left("it has an attention mask, which the library's op does not take")
        if ins[4] or ins[5] or outs:
            raise Left("it reads or writes a KV cache (or the scores), which the library's op does not")
        a = attrs(node)
        if a.get("softcap", 0.0):
            raise Left("it caps the scores (softcap)")
        q, k, v = ins[:3]
        qd, kd, vd = g.dims(q), g.dims(k), g.dims(v)
        if qd is None or kd is None or vd is None or len(qd) != 3 or len(kd) != 3 or len(vd) != 3:
            raise Left("its inputs are not all 3-D (B, S, H*d) (4-D (B, H, S, d) inputs are left)")
        heads, kv_heads = a.get("q_num_heads"), a.get("kv_num_heads")
        if not heads or heads != kv_heads:
            raise Left(f"q_num_heads {heads} and kv_num_heads {kv_heads}: grouped heads are left")
        if qd[2] is None or qd[2] % heads or kd[2] != qd[2] or vd[2] != qd[2]:
            raise Left(f"query, key and value widths {qd[2]}, {kd[2]}, {vd[2]} are not one H*d")
        d = qd[2] // heads
        causal = bool(a.get("is_causal", 0))
        scale = a.get("scale", 1 / math.sqrt(d))
        where = _target(r, r.dtype(q), qd[1], kd[1], d, causal)
        new = _node(r, where, node.name or f"{node.output[0]}_attention", q, k, v, node.output[0], heads, scale,
                    causal)
        return Match([node], new, self.source)


class OrtMultiHeadAttention:
    """ORT's com.microsoft.MultiHeadAttention on separate 3-D query, key and value, to the library where the
    library measured faster for its class."""

    anchors = {(MS, "MultiHeadAttention")}
    source = "com.microsoft fused op"

    def match(self, r: Rewriter, node):
        g = r.graph
        ins = list(node.input)
        if len(ins) < 3 or not ins[1] or not ins[2] or any(ins[3:]) or any(node.output[1:]):
            raise Left("packed QKV, a bias, mask or KV cache: the library's op takes plain query, key and value")
        qd, kd, vd = (g.dims(i) for i in ins[:3])
        if qd is None or kd is None or len(qd) != 3 or len(kd) != 3 or vd != kd or qd[2] is None:
            raise Left("query, key and value are not 3-D (B, S, H*d) of one width")
        a = attrs(node)
        heads = int(a.get("num_heads", 0))
        if not heads or qd[2] % heads or kd[2] != qd[2]:
            raise Left("its width does not split into num_heads heads")
        d = qd[2] // heads
        causal = bool(a.get("unidirectional", 0))
        if causal:
            raise Left("unidirectional: ORT's causal alignment is kept")
        where = _target(r, r.dtype(ins[0]), qd[1], kd[1], d, causal)
        if where == "ort":
            raise Left("ORT's own kernel measured faster: " + measured_choice(r.dtype(ins[0]), qd[1], kd[1], d)[1])
        new = _node(r, where, node.name, *ins[:3], node.output[0], heads, a.get("scale", 1 / math.sqrt(d)), False)
        return Match([node], new, self.source)


ATTENTION = (DecomposedAttention(), OnnxAttention(), OrtMultiHeadAttention())
