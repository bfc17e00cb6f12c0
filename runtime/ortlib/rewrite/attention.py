"""The forms of multi-head attention the rewrite recognises, one declared matcher each, and where each goes.

Every form ends as one MultiHeadAttention node: `tritonforge.MultiHeadAttention` (the library's flash-attention
kernels), or ORT's own `com.microsoft.MultiHeadAttention` where that measured faster for the shape's class and dtype
(choices.json's `attention` table, derived from the committed measurements by benchmarks/choices.py), as TunableOp would
let ORT's kernel win. Both take (B, S, H*d) query, key and value with num_heads, scale and unidirectional; the library's
op also takes 4-D heads, (B, H, S, d) or (B, S, H, d), and key and value with fewer heads than query (kv_num_heads).

The heads an attention reads are followed back to token-major memory where the graph has it, so the
transposes into (B, H, S, d) and back go with the attention:
- a Reshape of a (B, S, H*d) projection into heads, Transpose [0, 2, 1, 3]: the projection itself;
- a Transpose [0, 2, 1, 3] of (B, S, H, d) heads (Flux's, after RMSNorm and the rotary embedding): those;
- a Concat on the sequence axis of such heads (SD3's and Flux's joint attention over the image and text
  streams): one Concat of the streams' token-major values on their sequence axis instead; where both are a
  Linear's MatMul + bias, the library's BiasConcat of the MatMuls, adding each stream's bias as it joins them
  (ORT runs a 3-D Linear's bias as a pass of its own), where that measured faster (choices.json's `bias_concat`).
Token-major heads go in as (B, S, H*d) (a Reshape of (B, S, H, d) is a view), so either op can take them,
and the output comes out token-major for the Transpose [0, 2, 1, 3] and Reshape that read it. Heads the
graph only has as (B, H, S, d) (SD3.5's per-head RMSNorm on q and k) go in as they are, to the library's
op in its BHSD layout, as ORT's op takes no such query.

- DecomposedAttention: F.scaled_dot_product_attention as torch.onnx writes it, anchored at its Softmax:
  MatMul(Q, K^T) (each side optionally multiplied or divided by a scalar, the scores too: the scale is
  their product, folded or computed at run time from Shape(q)) -> Softmax -> MatMul with V. K^T is a
  Transpose [0, 2, 3, 1] of K's head-splitting Reshape (TorchScript), a Transpose [0, 1, 3, 2] of K's heads,
  or Reshape (B*H, S, d) -> Transpose [0, 2, 1] -> Reshape (B, H, d, S) of K's heads (dynamo, opset 18).
  A value added to the scores is a causal mask (the op's unidirectional) or an attention bias of
  (B or 1, H or 1, Sq, Skv): T5's relative position bias, which only ORT's MultiHeadAttention takes
  (its attention_bias), so such an attention goes there. A softmax taken in float between Casts (T5's
  `softmax(scores.float()).type_as(scores)`) is the op's own: it accumulates in float.
- OnnxAttention: ONNX `Attention` (opset 23 and later) on 3-D (B, S, H*d) inputs or 4-D (B, H, S, d)
  heads, key and value with as many heads as query or fewer; no mask, KV cache or softcap.
- OrtMultiHeadAttention: ORT's `com.microsoft.MultiHeadAttention` on separate 3-D query, key and value with
  no bias, mask or cache, moved to the library where the library measured faster.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from .. import DOMAIN
from . import choices
from .causal import why_not_causal
from .graph import MS, attrs, domain_of, is_op
from .loads import ort_runs
from .patterns import Left, Match, Rewriter, bias_add, bias_input, measured_form

_CHOICES = ("tritonforge", "ort")
FLOAT, FLOAT16, BFLOAT16 = 1, 10, 16  # onnx.TensorProto's element types


def _perm(node) -> list | None:
    return list(attrs(node).get("perm", [])) if is_op(node, "Transpose") else None


# ---- where an attention goes ---------------------------------------------------------------------
def shape_class(sq: int | None, skv: int | None, head_dim: int) -> str:
    """The measured table's key: cross-attention over a short text (Skv < 128 keys), or self-attention at
    the head dim's width, "self d<d>"."""
    if skv is not None and skv < 128:
        return "cross"
    return f"self d{head_dim}"


def measured_choice(dtype: str | None, sq, skv, head_dim: int) -> tuple[str, str]:
    """("tritonforge", "ort" or "decomposed", why): the fastest measured for the shape's class in its dtype's
    own rows (the nearest head dim measured where the class was not). A dtype with no rows goes to the
    library's fused op, and the reason says that nothing was measured for it."""
    measured = choices.table("attention")
    table = measured.speedup.get(dtype or "")
    device = measured.devices.get(dtype or "") or measured.device
    if not table:
        return "tritonforge", f"no {dtype or 'unknown-type'} attention was measured on {device}: the library's fused op"
    key = shape_class(sq, skv, head_dim)
    if key not in table:
        selfs = [k for k in table if k.startswith("self d")]
        if key == "cross" or not selfs:
            return "tritonforge", f"no {dtype} {key} attention was measured on {device}: the library's fused op"
        key = min(selfs, key=lambda k: abs(math.log(int(k[6:]) / head_dim)))
    rivals = table[key]  # each rival's time over the library's
    best = min(rivals, key=rivals.get)
    where = "tritonforge" if rivals[best] >= 1 else {"ort_mha": "ort", "decomposed": "decomposed"}[best]
    said = ", ".join(f"{v:.2f}x {p}" for p, v in rivals.items())
    return where, f"on {key} the library measured {said} ({dtype}, {device})"


def table_rival(dtype, sq, skv, d: int, rival: str) -> float:
    """A rival's measured time over the library's for the shape's class in the dtype's rows (1 where not
    measured)."""
    return (choices.table("attention").speedup.get(dtype or "") or {}).get(shape_class(sq, skv, d), {}).get(rival, 1.0)


def _target(r: Rewriter, dtype, sq, skv, d: int, causal: bool, keep_ok: bool, cannot: str) -> tuple[str, str]:
    """(where the attention goes, a note for the report): the rewrite's `attention` setting, else the measured
    choice; a causal one always to the library (ORT's op aligns its mask differently). `cannot`: why ORT's op
    cannot take this one ("" when it can): it goes to the library then, and the note says so. Where the form as
    it is measured fastest, Left says so (`keep_ok`: the form is the export's decomposition)."""
    r.check_served("MultiHeadAttention", dtype, ("fp16", "fp32", "bf16"))
    if r.attention == "tritonforge" or (r.attention is None and causal):
        return "tritonforge", ""
    if r.attention == "ort":
        return ("tritonforge", f"attention=ort, but ORT's MultiHeadAttention {cannot}: the library's op") if cannot \
            else ("ort", "")
    chosen = r.choice()
    if chosen is not None:  # measured on this GPU (measure.py): the export's form kept, or the faster op
        if chosen.pick == "export" and keep_ok:
            chosen.take()
        return ("ort" if chosen.pick != "library" and not cannot else "tritonforge"), ""
    where, why = measured_choice(dtype, sq, skv, d)
    if where == "decomposed":
        if keep_ok:
            raise Left(f"the decomposition as exported measured fastest: {why}")
        where = "ort" if table_rival(dtype, sq, skv, d, "ort_mha") < 1 else "tritonforge"
    if where == "ort" and cannot:
        return "tritonforge", f"ORT's MultiHeadAttention measured faster ({why}), but it {cannot}: the library's op"
    return where, why if why.startswith("no ") else ""  # an unmeasured dtype or class is said in the report


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
    if is_op(node, "Div") and one(node.input[1]):
        return node.input[0], node.input[1], True, node
    if is_op(node, "Mul"):
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


# ---- heads: where the graph has them token-major -----------------------------------------------------
@dataclass
class Heads:
    """Query, key or value as the attention reads it: `heads` heads of `dim`, over `seq` positions (None when
    symbolic); `bhsd`, the (B, H, S, d) value (None where the graph has the heads only otherwise); `tokens`, a
    token-major value holding them, (B, S, H*d) or (B, S, H, d) by `rank` (None where the graph has none);
    `made`, the new nodes that make `tokens` (a Concat of streams); `claims`, the graph's nodes whose work they do
    (the streams' bias Adds: the match claims them, so no later fusion takes them too); `note`, why the streams'
    biases stayed nodes of their own."""
    heads: int
    dim: int
    seq: object = None
    bhsd: str | None = None
    tokens: str | None = None
    rank: int = 0
    made: list = field(default_factory=list)
    claims: list = field(default_factory=list)
    note: str = ""


def _split(g, reshape, what: str) -> tuple[str, int, int]:
    """(the (B, S, H*d) projection, H, d) of a Reshape that splits its last axis into heads."""
    if not is_op(reshape, "Reshape"):
        raise Left(f"{what} does not come from a Reshape of a (batch, sequence, heads * head_dim) projection")
    x = reshape.input[0]
    src, out = g.dims(x), g.dims(reshape.output[0])
    if src is None or out is None or len(src) != 3 or len(out) != 4 or not (
            isinstance(out[2], int) and (out[3] is not None or src[2] is not None) or
            isinstance(out[3], int) and isinstance(src[2], int)):  # H from H*d and d: a -1 in the target's heads
        raise Left(f"the Reshape '{reshape.name}' of {what} is not (B, S, H*d) -> (B, S, H, d) with H and d known")
    heads = out[2] if isinstance(out[2], int) else src[2] // out[3]
    d = out[3] if out[3] is not None else src[2] // heads
    if src[2] is not None and src[2] != heads * d:
        raise Left(f"the Reshape '{reshape.name}' of {what} does not split {src[2]} channels into {heads} x {d}")
    for i in (0, 1):
        if src[i] is not None and out[i] is not None and src[i] != out[i]:
            raise Left(f"the Reshape '{reshape.name}' of {what} does not keep batch and sequence")
    return x, heads, d


def _from_tokens(r: Rewriter, x: str, what: str) -> Heads | None:
    """The heads of (B, S, H, d) value `x`: a head-splitting Reshape's projection, streams' projections that a
    Concat on the sequence axis joins (Flux's joint attention's value), or `x` itself."""
    g = r.graph
    node = g.producer.get(x)
    try:
        proj, heads, d = _split(g, node, what)
        return Heads(heads, d, (g.dims(proj) or [None] * 3)[1], tokens=proj, rank=3)
    except Left:
        pass
    if is_op(node, "Concat") and attrs(node).get("axis") in (1, -3) and len(node.input) > 1 and \
            len(g.consumers.get(x, [])) == 1:
        parts = [_from_tokens(r, i, what) for i in node.input]
        if all(p is not None and p.rank == 3 for p in parts) and len({(p.heads, p.dim) for p in parts}) == 1:
            return _join(r, x, node, parts)
    dims = g.dims(x)
    if dims is None or len(dims) != 4 or not isinstance(dims[2], int) or not isinstance(dims[3], int):
        return None
    return Heads(dims[2], dims[3], dims[1], tokens=x, rank=4)


def _token_major(r: Rewriter, value: str, what: str) -> Heads | None:
    """The (B, H, S, d) heads `value` as token-major memory the graph has (module docstring), or None."""
    node = r.graph.producer.get(value)
    if _perm(node) == [0, 2, 1, 3]:
        return _from_tokens(r, node.input[0], what)
    if is_op(node, "Concat") and attrs(node).get("axis") in (2, -2) and len(node.input) > 1:
        parts = [_token_major(r, i, what) for i in node.input]
        if any(p is None for p in parts) or len({(p.rank, p.heads, p.dim) for p in parts}) != 1:
            return None
        return _join(r, value, node, parts)
    return None


def _join(r: Rewriter, value: str, node, parts: list) -> Heads:
    """The streams' heads `parts` joined on their sequence axis while token-major: the same copy the export's
    Concat `node` (of `value`) made, with the streams' Linear biases added on the way where that measured faster."""
    from onnx import helper

    out, name = r.graph.unique(f"{value}_tokens"), r.node_name(f"{node.name or value}_tokens")
    concat, note, claims = _bias_concat(r, parts, out, name)
    if concat is None:
        concat = helper.make_node("Concat", [p.tokens for p in parts], [out], axis=1, name=name)
    seqs = [p.seq for p in parts]
    return Heads(parts[0].heads, parts[0].dim, None if None in seqs else sum(seqs), tokens=out,
                 rank=parts[0].rank, made=[n for p in parts for n in p.made] + [concat],
                 claims=[n for p in parts for n in p.claims] + claims, note=note)


def _bias_concat(r: Rewriter, parts: list, out: str, name: str):
    """(the library's BiasConcat of two streams' projections, a note saying so, the bias Adds it takes) where each
    is a Linear's MatMul + bias that only its head split reads and that op measured faster than the export's bias
    Adds and Concat; else (None, why the biases stay, "" where there are none to take; [])."""
    from onnx import helper

    g = r.graph
    if len(parts) != 2 or any(p.rank != 3 or p.made for p in parts):
        return None, "", []
    found = []
    for p in parts:
        reader = g.only_reader(p.tokens)
        biased = bias_add(g, p.tokens, [reader]) if is_op(reader, "Reshape") else None
        if biased is None or g.elem(biased[1]) != g.elem(p.tokens):
            return None, "", []
        found.append(biased)
    try:
        dtype = r.dtype(parts[0].tokens)
        if dtype is not None:
            r.check_served("BiasConcat", dtype, ("fp16", "fp32", "bf16"))
        measured_form(r, parts[0].tokens, "bias_concat", "the library's BiasConcat", "joined")
    except Left as why:
        return None, f"the streams' Linear biases stay nodes of their own: {why}", []
    ins = [found[0][0], found[1][0], *(bias_input(r, b_name, b) for _, b_name, b, _ in found)]
    return (helper.make_node("BiasConcat", ins, [out], name=name, domain=DOMAIN),
            "the streams' Linear biases added as they are joined (tritonforge.BiasConcat)", [f[3] for f in found])


def _heads(r: Rewriter, value: str, what: str) -> Heads:
    """Heads read as the (B, H, S, d) value `value`, with the token-major memory behind them if any."""
    dims = r.graph.dims(value)
    tokens = _token_major(r, value, what)
    if tokens is not None:
        tokens.bhsd = value
        return tokens
    if dims is None or len(dims) != 4 or not isinstance(dims[1], int) or not isinstance(dims[3], int):
        raise Left(f"{what} is not (batch, heads, sequence, head_dim) with heads and head_dim known")
    return Heads(dims[1], dims[3], dims[2], bhsd=value)


def _key_t(r: Rewriter, value: str) -> Heads:
    """K's heads from K^T (B, H, d, S) in the forms the exporters write."""
    g = r.graph
    t = g.producer.get(value)
    if _perm(t) == [0, 2, 3, 1]:  # TorchScript: K's (B, S, H, d) transposed once
        k = _from_tokens(r, t.input[0], "K")
        if k is None:
            raise Left("K^T is a Transpose [0, 2, 3, 1] of a value whose heads and head dim are not known")
        return k
    if _perm(t) == [0, 1, 3, 2]:  # K's heads transposed
        return _heads(r, t.input[0], "K")
    if is_op(t, "Reshape"):  # dynamo: (B*H, S, d) transposed [0, 2, 1] and reshaped back to (B, H, d, S)
        mid = g.producer.get(t.input[0])
        flat = g.producer.get(mid.input[0]) if _perm(mid) == [0, 2, 1] else None
        dims = g.dims(t.output[0])
        if is_op(flat, "Reshape") and dims is not None and len(dims) == 4:
            return _heads(r, flat.input[0], "K")
    raise Left("K^T is not a form the exporters write (Transpose [0, 2, 3, 1] of K's Reshape, Transpose [0, 1, 3, 2] "
               "of K's heads, or dynamo's Reshape -> Transpose -> Reshape)")


def _tail(g, value: str, q: Heads) -> tuple[list, str | None, int]:
    """What turns the (B, H, S, d) output `value` token-major after the attention: (the nodes, Transpose
    [0, 2, 1, 3] and the Reshape to (B, S, H*d) and a Cast to its own type where they follow, the token-major
    value they leave, its rank); ([], None, 0) when the output is not read so."""
    t = g.only_reader(value)
    if _perm(t) != [0, 2, 1, 3]:
        return [], None, 0
    back = g.only_reader(t.output[0])
    out = g.dims(back.output[0]) if is_op(back, "Reshape") else None
    if out is None or len(out) != 3 or (out[2] is not None and out[2] != q.heads * q.dim):
        return [t], t.output[0], 4
    done = [t, back]
    # a Cast of the output to the type it has (the exporter's `.to(query.dtype)`) goes too: left after an op
    # onnxruntime's CPU EP runs in float, versions before 1.31 mistype it and refuse the model
    cast = g.only_reader(back.output[0])
    if is_op(cast, "Cast") and attrs(cast).get("to") == g.elem(back.output[0]) != 0:
        done.append(cast)
    return done, done[-1].output[0], 3


def _node(r: Rewriter, where: str, name: str, ins: list, out: str, q: Heads, k: Heads, scale: float, causal: bool,
          layout: str | None = None, removed: list = ()):
    """The MultiHeadAttention node; named `name`, or `name_<k>` unless a node it replaces had that name."""
    from onnx import helper

    extra = {"kv_num_heads": k.heads} if k.heads != q.heads else {}
    if layout:
        extra["layout"] = layout
    if causal:
        extra["unidirectional"] = 1
    return helper.make_node("MultiHeadAttention", ins, [out],
                            name=name if name in {n.name for n in removed} else r.node_name(name),
                            domain=DOMAIN if where == "tritonforge" else MS, num_heads=q.heads, scale=float(scale),
                            **extra)


def _reshape(r: Rewriter, x: str, shape: list, out: str):
    from onnx import helper

    return helper.make_node("Reshape", [x, r.int64(shape, "tritonforge_shape")], [out],
                            name=r.node_name(f"{out}_reshape"))


def attention_match(r: Rewriter, source: str, removed: list, q: Heads, k: Heads, v: Heads, out: str, heads_out: bool,
                    name: str, scale: float, causal: bool, keep_ok: bool = False, bias: str | None = None) -> Match:
    """The Match of one attention: `removed` (the anchor's nodes), its query, key and value, its output `out`
    ((B, H, S, d) when `heads_out`, else already (B, S, H*d)). Token-major where the graph allows (module
    docstring), to the library's or ORT's op; else on (B, H, S, d) heads, to the library's. With `bias` (an
    attention bias added to the scores), to ORT's op, the only one that takes it."""
    g = r.graph
    if (k.dim, v.dim, v.heads) != (q.dim, q.dim, k.heads) or q.heads % k.heads:
        raise Left(f"Q has {q.heads} heads of {q.dim}, K {k.heads} of {k.dim}, V {v.heads} of {v.dim}: the op takes "
                   "one head dim, and key and value heads that query heads share evenly")
    dtype = r.dtype(q.bhsd or q.tokens)  # a value of the graph's (a token-major one may be new)
    tail, tokens_out, out_rank = _tail(g, out, q) if heads_out else ([], out, 3)
    token_major = tokens_out is not None and all(h.tokens for h in (q, k, v))
    cannot = ("takes no (B, H, S, d) heads" if not token_major else
              "has no grouped key/value heads" if k.heads != q.heads else
              "would take an element type the model does not state" if dtype is None else
              f"has no {dtype} kernel in the installed onnxruntime" if not ort_runs(MS, "MultiHeadAttention", dtype)
              else "")
    if bias is not None:
        if cannot:
            raise Left(f"an attention bias is added to its scores, which only ORT's MultiHeadAttention takes, and it "
                       f"{cannot}")
        r.check_served("MultiHeadAttention", dtype, ("fp16", "fp32", "bf16"))
        where, note = "ort", ("an attention bias (T5's relative positions): ORT's MultiHeadAttention, the only op that "
                              "takes one")
    else:
        where, note = _target(r, dtype, q.seq, k.seq, q.dim, causal, keep_ok, cannot)
    if not token_major:
        if not all(h.bhsd for h in (q, k, v)):
            raise Left("its heads are neither all token-major nor all (batch, heads, sequence, head_dim) values")
        new = _node(r, "tritonforge", name, [q.bhsd, k.bhsd, v.bhsd], out, q, k, scale, causal, "BHSD", removed)
        return Match(removed, new, source, note=note, dtype=dtype)
    before, ins = [], []
    for h in (q, k, v):
        before += h.made
        if h.rank == 3:
            ins.append(h.tokens)
        else:  # (B, S, H, d) as (B, S, H*d): a view
            ins.append(g.unique(f"{h.tokens}_3d"))
            before.append(_reshape(r, h.tokens, [0, 0, -1], ins[-1]))
    after = []
    if out_rank == 4:  # (B, S, H*d) back to the (B, S, H, d) the graph reads
        written = g.unique(f"{tokens_out}_3d")
        after.append(_reshape(r, written, [0, 0, q.heads, q.dim], tokens_out))
    if bias is not None:  # attention_bias: after bias and key_padding_mask, which it has none of
        ins += ["", "", bias]
    new = _node(r, where, name, ins, written if after else tokens_out, q, k, scale, causal, removed=removed)
    note = "; ".join(dict.fromkeys(n for n in (note, q.note, k.note, v.note) if n))  # the joins' too
    return Match([*removed, *tail], new, source, note=note, before=before, after=after, dtype=dtype,
                 claims=[n for h in (q, k, v) for n in h.claims])


class DecomposedAttention:
    """F.scaled_dot_product_attention as torch.onnx writes it (module docstring)."""

    anchors = {("", "Softmax")}
    source = "torch.onnx decomposition"

    def match(self, r: Rewriter, sm):
        g = r.graph
        cast_in, cast_out = _float_cast(g, g.producer.get(sm.input[0])), None
        mm2 = g.only_reader(sm.output[0])
        if cast_in is not None and is_op(mm2, "Cast") and attrs(mm2).get("to") == g.elem(cast_in.input[0]):
            cast_out, mm2 = mm2, g.only_reader(mm2.output[0])
        widened = cast_in is not None and g.elem(cast_in.input[0]) != FLOAT
        if not is_op(mm2, "MatMul") or mm2.input[0] != (cast_out or sm).output[0] or (widened and not cast_out):
            return None  # not attention: a softmax of its own (or one whose float result goes on in float)
        pre = cast_in.input[0] if cast_in else sm.input[0]
        masked, biased, scores, not_causal = None, None, pre, ""
        added = g.producer.get(pre)
        if is_op(added, "Add"):  # a causal mask added to the scores (CLIP's text encoder): the op's unidirectional
            for x, m in ((0, 1), (1, 0)):
                why = why_not_causal(g, added.input[m])
                if why is None:
                    masked, scores = added, added.input[x]
                    break
                not_causal = not_causal or f" (the value added is not a causal mask: {why})"
            which = _bias(g, added) if masked is None else None  # else an attention bias (T5's positions)?
            if which is not None:
                masked, scores, biased = added, added.input[1 - which], added.input[which]
        on_scores = _scaled(g, scores)
        mm1 = g.producer.get(on_scores[0])
        chain = [n for n in (on_scores[3], masked, cast_in) if n is not None]
        if not is_op(mm1, "MatMul"):
            made = f"{mm1.op_type} '{mm1.name}'" if mm1 is not None else "a graph input"
            raise Left(f"its scores come from {made}, not a MatMul of Q and K^T (a mask or bias added?): the "
                       f"library's op takes none{not_causal}")
        if any(g.only_reader(a.output[0]) is not b for a, b in zip(chain, [*chain[1:], sm])):
            raise Left("the scaled scores are read by other nodes too")
        dims = g.dims(sm.input[0])
        if dims is None or len(dims) != 4:
            return None
        axis = attrs(sm).get("axis", -1 if g.opset >= 13 else 1)
        if axis not in (-1, 3):
            raise Left("not attention: its Softmax is not over the keys (the last axis)")
        if g.only_reader(mm1.output[0]) is not (chain[0] if chain else sm):
            raise Left("the scores are read by other nodes too")
        # Q's and K's heads and scales are not removed here: the rewrite drops what only the attention read
        on_q, on_k = _scaled(g, mm1.input[0]), _scaled(g, mm1.input[1])
        q, k, v = _heads(r, on_q[0], "Q"), _key_t(r, on_k[0]), _heads(r, mm2.input[1], "V")
        if (k.heads, k.dim) != (q.heads, q.dim):
            raise Left(f"Q has {q.heads} heads of {q.dim}, K {k.heads} of {k.dim}: the decomposition's heads differ")
        # a scale computed from the heads' shape sees the head dim the matcher worked out
        known = {on_q[0]: [None, q.heads, None, q.dim], on_k[0]: [None, q.heads, q.dim, None]}
        scale = _factor(g, on_scores, known) * _factor(g, on_q, known) * _factor(g, on_k, known)
        name = (sm.name.replace("Softmax", "MultiHeadAttention") if "Softmax" in sm.name
                else f"{sm.name or mm2.output[0]}_attention")
        return attention_match(r, self.source, [*chain, mm1, sm, *([cast_out] if cast_out else []), mm2], q, k, v,
                               mm2.output[0], True, name, scale, masked is not None and biased is None, keep_ok=True,
                               bias=biased)


def _float_cast(g, node):
    """A Cast of the scores to float (a softmax taken in float; of float scores too, as torch.onnx keeps it), else
    None."""
    ok = is_op(node, "Cast") and attrs(node).get("to") == FLOAT
    return node if ok and g.elem(node.input[0]) in (FLOAT, FLOAT16, BFLOAT16) else None


def _bias(g, add) -> int | None:
    """Which input of the scores' Add is an attention bias, (B or 1, H or 1, Sq, Skv) against the other's (B, H,
    Sq, Skv) scores (a MatMul's, scaled or not), in their type; None where neither is."""
    for b in (1, 0):
        bias, scores = g.dims(add.input[b]), g.dims(add.input[1 - b])
        if bias is None or scores is None or len(bias) != 4 or len(scores) != 4:
            continue
        if g.elem(add.input[b]) != g.elem(add.input[1 - b]) or not is_op(
                g.producer.get(_scaled(g, add.input[1 - b])[0]), "MatMul"):
            continue
        if all(x == y or (i < 2 and x == 1) for i, (x, y) in enumerate(zip(bias, scores))):
            return b
    return None


class OnnxAttention:
    """ONNX Attention (opset 23 and later) on 3-D (B, S, H*d) or 4-D (B, H, S, d) query, key and value, key and
    value with as many heads as query or fewer: no mask, cache or softcap."""

    anchors = {("", "Attention")}
    source = "ONNX Attention"

    def match(self, r: Rewriter, node):
        g = r.graph
        ins = list(node.input) + [""] * (7 - len(node.input))
        if ins[3]:
            raise Left("it has an attention mask, which the library's op does not take")
        if ins[4] or ins[5] or any(node.output[1:]):
            raise Left("it reads or writes a KV cache (or the scores), which the library's op does not")
        if ins[6]:
            raise Left("it takes the keys' unpadded lengths (nonpad_kv_seqlen), which the library's op does not")
        a = attrs(node)
        if a.get("softcap", 0.0):
            raise Left("it caps the scores (softcap)")
        qd, kd, vd = (g.dims(i) for i in ins[:3])
        ranks = {len(x) if x is not None else 0 for x in (qd, kd, vd)}
        if ranks == {4}:
            q, k, v = _heads(r, ins[0], "Q"), _heads(r, ins[1], "K"), _heads(r, ins[2], "V")
        elif ranks == {3}:
            heads, kv_heads = a.get("q_num_heads"), a.get("kv_num_heads")
            if not heads or not kv_heads:
                raise Left("3-D inputs without q_num_heads and kv_num_heads")
            if qd[2] is None or qd[2] % heads or kd[2] is None or kd[2] % kv_heads or vd[2] is None:
                raise Left(f"query and key widths {qd[2]}, {kd[2]} do not split into {heads} and {kv_heads} heads")
            d = qd[2] // heads
            q = Heads(heads, d, qd[1], tokens=ins[0], rank=3)
            k = Heads(kv_heads, kd[2] // kv_heads, kd[1], tokens=ins[1], rank=3)
            v = Heads(kv_heads, vd[2] // kv_heads, vd[1], tokens=ins[2], rank=3)
        else:
            raise Left("its query, key and value are not all 3-D (B, S, H*d) or all 4-D (B, H, S, d) of known ranks")
        causal = bool(a.get("is_causal", 0))
        scale = a.get("scale", 1 / math.sqrt(q.dim))
        return attention_match(r, self.source, [node], q, k, v, node.output[0], ranks == {4},
                               node.name or f"{node.output[0]}_attention", scale, causal)


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
        if a.get("unidirectional", 0):
            raise Left("unidirectional: ORT's causal alignment is kept")
        where, _ = _target(r, r.dtype(ins[0]), qd[1], kd[1], d, False, False, "")
        if where == "ort":
            raise Left("ORT's own kernel measured faster: " + measured_choice(r.dtype(ins[0]), qd[1], kd[1], d)[1])
        q = Heads(heads, d, qd[1], tokens=ins[0], rank=3)
        new = _node(r, where, node.name, ins[:3], node.output[0], q, q, a.get("scale", 1 / math.sqrt(d)), False,
                    removed=[node])
        return Match([node], new, self.source, dtype=r.dtype(ins[0]))


ATTENTION = (DecomposedAttention(), OnnxAttention(), OrtMultiHeadAttention())
