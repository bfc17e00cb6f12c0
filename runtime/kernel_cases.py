"""One checkable problem per kernel, read from its launch contract: the smallest awkward shape the
contract admits (partial blocks, rows past the block, channels that do not fill a vector), inputs by
argument role, and the float64 answer.

Both numerics checks of a build use it, so they check the same thing: Triton's interpreter on the host
(tritonforge.pipeline.builds.numerics_check: no GPU, the kernels it can run) and the compiled kernels on a
GPU (tritonforge.runtime.verify: every kernel of a build). A case knows roles, never pointers: the
runner puts the arrays where its kernels read them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import numpy as np

from .expressions import evaluate
from .ops import ada_layer_norm as ada_op
from .ops import rotary_embedding as rotary_op
from .ops.ada_layer_norm import ada_layer_norm_mismatch, ada_layer_norm_ref
from .ops.attention import attention_mismatch, attention_ref
from .ops.bias_concat import bias_concat_mismatch, bias_concat_ref
from .ops.bias_split_gelu import bias_split_gelu_mismatch, bias_split_gelu_ref
from .ops.fp8_quant_rows import fp8_quant_rows_mismatch, fp8_quant_rows_ref
from .ops.group_norm import group_norm_mismatch, group_norm_ref
from .ops.rotary_embedding import rms_norm_ref, rotary_embedding_mismatch, rotary_embedding_ref
from .ops.softmax import softmax_ref
from .reference import mismatch, quantize

EPS = 1e-5


@dataclass(frozen=True)
class KernelSpec:
    """What a case needs of a kernel: a build's kernels.json entry or a kernel script's table entry."""
    name: str
    group: str
    constants: dict
    num_warps: int
    contract: dict
    index: int = 0  # its place in the group: varies the optional inputs a case gives

    @property
    def dtype(self) -> str:
        return self.group.rsplit("_", 1)[1]

    @property
    def family(self) -> str:
        if "softmax" in self.group:
            return "softmax"
        if self.group.startswith("attention"):
            return "attention"
        if self.group.startswith("ada_layer_norm"):
            return "ada_layer_norm"
        if self.group.startswith("rotary_embedding"):
            return "rotary_embedding"
        if self.group.startswith("bias_concat"):
            return "bias_concat"
        if self.group.startswith("bias_split_gelu"):
            return "bias_split_gelu"
        if self.group.startswith("fp8_quant_rows"):
            return "fp8_quant_rows"
        return "nchw" if self.group.startswith("GroupNormNCHW") else "nhwc"


@dataclass
class Case:
    env: dict  # the problem variables (the contract's `problem`)
    inputs: dict  # role -> (float array, storage dtype)
    outputs: dict  # role -> (shape, storage dtype), written by the kernel
    scalars: dict  # role -> int / float / bool
    check: Callable[[dict], str | None]  # outputs as floats -> None, or what is wrong
    label: dict = field(default_factory=dict)  # the shape, for reports


def contract_admits(spec: KernelSpec, env: dict) -> bool:
    """The contract's `requires` on `env`, as a host evaluates it (no `resident`: no device)."""
    scope = {**spec.constants, "num_warps": spec.num_warps, **env}
    try:
        return all(evaluate(r, scope) for r in spec.contract["requires"])
    except KeyError:  # a variable only a device knows (`resident`): not for the host
        return False


def case_for(spec: KernelSpec, admits: Callable[[dict], bool] | None = None, seed: int = 0) -> Case | None:
    """The first problem of the kernel's family that `admits` (default: the contract on the host) takes,
    with inputs; None when no shape tried is admitted."""
    admits = admits or (lambda env: contract_admits(spec, env))
    env = next((e for e in _problems(spec) if admits(e)), None)
    return None if env is None else case_with(spec, env, seed)


def case_with(spec: KernelSpec, env: dict, seed: int = 0) -> Case:
    """The case of a given problem (its variables as the contract names them)."""
    rng = np.random.default_rng([seed, spec.index])
    return {"softmax": _softmax, "nhwc": _group_norm, "nchw": _nchw, "attention": _attention,
            "ada_layer_norm": _ada_layer_norm, "rotary_embedding": _rotary_embedding,
            "bias_concat": _bias_concat, "bias_split_gelu": _bias_split_gelu,
            "fp8_quant_rows": _fp8_quant_rows}[spec.family](spec, env, rng)


def grid(spec: KernelSpec, env: dict, extra: dict | None = None) -> tuple[int, ...]:
    scope = {**spec.constants, "num_warps": spec.num_warps, **env, **(extra or {})}
    return tuple(evaluate(g, scope) for g in spec.contract["grid"])


def _problems(spec: KernelSpec) -> Iterator[dict]:
    return {"softmax": _softmax_problems, "nhwc": _group_norm_problems, "nchw": _nchw_problems,
            "attention": _attention_problems, "ada_layer_norm": _ada_layer_norm_problems,
            "rotary_embedding": _rotary_embedding_problems, "bias_concat": _bias_concat_problems,
            "bias_split_gelu": _bias_split_gelu_problems, "fp8_quant_rows": _fp8_quant_rows_problems}[spec.family](spec)


# ---- softmax: rows past the block, a partial vector, several pieces of a streamed row ----------------
def _softmax_problems(spec: KernelSpec) -> Iterator[dict]:
    c = spec.constants
    block, chunk, split = c.get("BLOCK_SIZE", 1024), c.get("CHUNK", 0), c.get("SPLIT", 1)
    piece = chunk or block
    cols = {block - 3, block, block // 2 + 16, 77, 1000, 4096 + 16, max(16, piece - 16), 2 * piece + 5,
            split * piece - 48, 2 * split * piece + 48}
    if chunk:
        cols |= {2 * chunk + 16, 3 * chunk - 5}
    rows = c.get("ROWS", 1)
    for n_cols in sorted(n for n in cols if 1 <= n <= 1 << 20):
        for batch in (3, 2 * rows + 1):
            yield {"batch": batch, "n_cols": n_cols, "in_stride": n_cols, "out_stride": n_cols}


def _softmax(spec: KernelSpec, env: dict, rng) -> Case:
    log, dtype = spec.group.startswith("log_softmax"), spec.dtype
    shape = (env["batch"], env["n_cols"])
    x = (rng.standard_normal(shape) * 3).astype(np.float64 if dtype == "fp64" else np.float32)
    ref = softmax_ref(quantize(x, dtype), log)
    return Case(env, {"in": (x, dtype)}, {"out": (shape, dtype)}, dict(env),
                lambda got: mismatch(got["out"], ref, dtype, log), {"batch": shape[0], "n_cols": shape[1]})


# ---- GroupNorm, NHWC: partial steps over H*W, odd channels per group, the families' own fill ---------
def _group_norm_problems(spec: KernelSpec) -> Iterator[dict]:
    c = spec.constants
    silu = int("_Silu_" in spec.group)
    vec = max(1, c.get("VEC", 1))
    block = c.get("BLOCK_SIZE", c.get("VEC", 8) * 4)
    hw_size = c.get("HW_SIZE", 1)
    step = c.get("TILES", 1) * c.get("HW_SIZE", 16)
    cpgs = sorted({p for p in (block, max(1, block * 3 // 4), block - vec, 3 * vec, 5 * vec, 8, 16, 40)
                   if 1 <= p <= 512})
    shapes = [(hw, cpg, 2) for hw in [3 * step + hw_size, *sorted({step, 49, 64, 100, 256, 1024})] for cpg in cpgs]
    held = c.get("VECTORS", 0) + c.get("TAIL", 0)
    if held:  # whole groups held in registers, by one program or a team of PARTS: half full and full
        parts = c.get("PARTS", 1)
        team = parts > 1 or "PARTS" in c
        shapes += [(parts * (held // 3 - 1) - (1 if team else 0), 3 * vec, 2), (parts * (held // 5), 5 * vec, 2)]
    if "BLOCK_C" in c:  # channel chunks with groups that straddle them, a partial last tile
        shapes.append((2 * c["TILE_HW"] + 3, 3 * c["BLOCK_C"] // 16, 16))
    for hw, cpg, groups in shapes:
        if hw >= 1:
            yield {"n": 2, "hw": hw, "c": groups * cpg, "groups": groups, "c_per_group": cpg, "silu": silu}


def _group_norm(spec: KernelSpec, env: dict, rng) -> Case:
    dtype, n, hw, c, groups = spec.dtype, env["n"], env["hw"], env["c"], env["groups"]
    skip_mode = ("none", "full", "broadcast")[spec.index % 3]
    has_bias = spec.index % 2 == 1
    x = (rng.standard_normal((n * hw, c)) * 2 + 0.5).astype(np.float32)
    gamma = rng.uniform(0.5, 1.5, c).astype(np.float32)
    beta = rng.uniform(-0.5, 0.5, c).astype(np.float32)
    unused = (np.zeros((1, 1), np.float32), dtype)
    skip = {"full": (n * hw, c), "broadcast": (n, c)}.get(skip_mode)
    inputs = {"in": (x, dtype), "gamma": (gamma.reshape(1, c), "fp32"), "beta": (beta.reshape(1, c), "fp32"),
              "skip": (rng.standard_normal(skip).astype(np.float32), dtype) if skip else unused,
              "bias": (rng.standard_normal((1, c)).astype(np.float32), dtype) if has_bias else unused}
    outputs = {"out": ((n * hw, c), dtype), "add_out": ((n * hw, c), dtype) if skip else ((1, 1), dtype)}
    scalars = {"hw": hw, "c": c, "c_per_group": c // groups, "groups": groups, "eps": EPS, "has_skip": bool(skip),
               "has_bias": has_bias, "broadcast_skip": skip_mode == "broadcast"}
    q = lambda role: quantize(inputs[role][0], dtype)
    ref, ref_add = group_norm_ref(q("in").reshape(n, hw, 1, c), gamma, beta, groups, EPS, bool(env["silu"]),
                                  q("skip").reshape(n, -1, 1, c) if skip else None,
                                  q("bias") if has_bias else None)

    def expect(got):
        bad = group_norm_mismatch(got["out"], ref.reshape(n * hw, c), dtype)
        if bad is None and skip:
            bad = group_norm_mismatch(got["add_out"], ref_add.reshape(n * hw, c), dtype)
            return bad and f"add_out: {bad}"
        return bad

    return Case(env, inputs, outputs, scalars, expect,
                {"n": n, "hw": hw, "c": c, "groups": groups, "skip": skip_mode, "bias": has_bias})


# ---- GroupNorm, NCHW: spans of several blocks with a partial last one; a team's shares -------------
def _nchw_problems(spec: KernelSpec) -> Iterator[dict]:
    c = spec.constants
    block, silu = c["BLOCK"], int("_Silu_" in spec.group)
    hws = [block // 2 + 16, 3 * block // 4 + 3, 48, 5]
    for cpg in (3, 5):
        sizes = list(hws)
        if "PARTS" in c:  # a member's share within its block, and past it (walked twice)
            span = c["PARTS"] * block / cpg
            sizes += [max(16, int(span * f) // 16 * 16) for f in (0.5, 0.75, 1.5, 3)]
        for hw in sizes:
            yield {"n": 2, "hw": hw, "c": 2 * cpg, "groups": 2, "c_per_group": cpg, "silu": silu}


def _nchw(spec: KernelSpec, env: dict, rng) -> Case:
    dtype, n, hw, c, groups = spec.dtype, env["n"], env["hw"], env["c"], env["groups"]
    x = (rng.standard_normal((n * c, hw)) * 2 + 40.0).astype(np.float32)  # a mean far from zero
    scale = rng.uniform(0.5, 1.5, c).astype(np.float32)
    bias = rng.uniform(-0.5, 0.5, c).astype(np.float32)
    nhwc = quantize(x, dtype).reshape(n, c, hw).transpose(0, 2, 1).reshape(n, hw, 1, c)
    ref, _ = group_norm_ref(nhwc, scale, bias, groups, EPS, bool(env["silu"]))
    ref = ref.reshape(n, hw, c).transpose(0, 2, 1).reshape(n * c, hw)
    return Case(env, {"in": (x, dtype), "nchw_scale": (scale.reshape(1, c), "fp32"),
                      "nchw_bias": (bias.reshape(1, c), "fp32")},
                {"out": ((n * c, hw), dtype)}, {"hw": hw, "c_per_group": c // groups, "eps": EPS},
                lambda got: group_norm_mismatch(got["out"], ref, dtype), {"n": n, "c": c, "hw": hw, "groups": groups})


# ---- attention: a head the split masks, partial last key and query blocks ---------------------------
def _attention_problems(spec: KernelSpec) -> Iterator[dict]:
    c = spec.constants
    for d in (c["D1"] + c["D2"] - 8, c["D1"] + c["D2"]):
        for skv in (c["BLOCK_N"] + 5, 77):
            yield {"batch": 1, "heads": 2, "sq": c["BLOCK_M"] + 3, "skv": skv, "head_dim": d, "strides8": 1}


def _attention(spec: KernelSpec, env: dict, rng) -> Case:
    """(B, S, H*d) query and (B, S, Hkv*d) key and value, as the library's op passes them; key and value
    with half the query's heads when the query has an even number (grouped-query attention)."""
    dtype = spec.dtype
    b, h, sq, skv, d = env["batch"], env["heads"], env["sq"], env["skv"], env["head_dim"]
    hk = h // 2 if h % 2 == 0 else h
    q = rng.standard_normal((b * sq, h * d)).astype(np.float32)
    k, v = (rng.standard_normal((b * skv, hk * d)).astype(np.float32) for _ in range(2))
    strides = lambda s, n: {"batch_stride": s * n * d, "head_stride": d, "seq_stride": n * d}
    scalars = {"scale": 1 / np.sqrt(d), "heads": h, "kv_group": h // hk, "sq": sq, "skv": skv, "head_dim": d,
               **{f"{t}_{r}": x for t, s, n in (("q", sq, h), ("k", skv, hk), ("v", skv, hk), ("out", sq, h))
                  for r, x in strides(s, n).items()}}
    heads = lambda x, n: quantize(x, dtype).reshape(b, -1, n, d).transpose(0, 2, 1, 3)
    ref = attention_ref(heads(q, h), heads(k, hk), heads(v, hk), causal=bool(spec.constants.get("CAUSAL", 0)))

    def expect(got):
        return attention_mismatch(got["out"].reshape(b, sq, h, d).transpose(0, 2, 1, 3), ref, dtype)

    return Case(env, {"q": (q, dtype), "k": (k, dtype), "v": (v, dtype)}, {"out": ((b * sq, h * d), dtype)},
                scalars, expect, {"batch": b, "heads": h, "sq": sq, "skv": skv, "head_dim": d})


# ---- AdaLN: a row the block covers with lanes to spare, two items of three rows -----------------------
def _ada_layer_norm_problems(spec: KernelSpec) -> Iterator[dict]:
    block = spec.constants["BLOCK_SIZE"]
    # a partial block first: for whole-vector (V16) kernels one of whole vectors
    for n_cols in (block // 2 + (16 if spec.constants.get("V16") else 24), block - 5, block, 77, 1152, 1536, 3072):
        yield {"batch": 6, "n_cols": n_cols}


def _ada_layer_norm(spec: KernelSpec, env: dict, rng) -> Case:
    """Two items of batch / 2 rows; the gated groups add gate * branch (and the branch's bias) first and write
    the sum."""
    form = ada_op.form_of(ada_op.GROUP.fullmatch(spec.group))
    dtype, gated, biased = spec.dtype, form != ada_op.PLAIN, form == ada_op.GATED_BIAS
    rows, c = env["batch"], env["n_cols"]
    items, per = 2, env["batch"] // 2
    x = (rng.standard_normal((rows, c)) * 2 + 0.5).astype(np.float32)
    scale, shift, gate = (rng.standard_normal((items, c)).astype(np.float32) * 0.5 for _ in range(3))
    branch = rng.standard_normal((rows, c)).astype(np.float32)
    bias = rng.standard_normal(c).astype(np.float32)
    q = lambda a: quantize(a, dtype)  # noqa: E731
    clip = (-2.5, 3.0)  # the gated sums clipped where some of them pass it: the clamp is checked
    ref, total = ada_layer_norm_ref(q(x).reshape(items, per, c), q(scale), q(shift), EPS,
                                    q(branch).reshape(items, per, c) if gated else None, q(gate) if gated else None,
                                    q(bias) if biased else None, clip)
    inputs = {"in": (x, dtype), "mod_scale": (scale, dtype), "mod_shift": (shift, dtype)}
    outputs = {"out": ((rows, c), dtype)}
    unread = (np.zeros(1, np.float32), dtype)  # a role the kernel does not read: any buffer stands in
    if gated:
        inputs.update(skip=(branch, dtype), gate=(gate, dtype), bias=(bias, dtype) if biased else unread)
        outputs["add_out"] = ((rows, c), dtype)
    else:
        inputs.update(skip=unread, gate=unread, add_out=unread, bias=unread)

    def expect(got):
        why = ada_layer_norm_mismatch(got["out"].reshape(items, per, c), ref, dtype)
        if why or not gated:
            return why
        return ada_layer_norm_mismatch(got["add_out"].reshape(items, per, c), total, dtype)

    return Case(env, inputs, outputs, {"n_cols": c, "rows_per_item": per, "eps": EPS, "clip_lo": clip[0],
                                       "clip_hi": clip[1]}, expect,
                {"rows": rows, "n_cols": c})


# ---- rotary embedding: rows past the block, a partial row, heads sharing a position ------------------
def _rotary_embedding_problems(spec: KernelSpec) -> Iterator[dict]:
    block, rows = spec.constants["BLOCK_D"], spec.constants["BLOCK_R"]
    if _rotary_rms(spec):  # whole rows in a tile: the row a block's or under, items of SEQ_A + SEQ_B tokens of 3 heads
        for n_cols in (block // 2 + 16 if spec.constants.get("D16") else block - 6, block, block // 2 + 10, 24, 128):
            yield {"batch": 3 * (SEQ_A + SEQ_B) * (rows // (SEQ_A + SEQ_B) + 1), "n_cols": n_cols}
        return
    # a partial row first: for D16 kernels one of whole 16-element pieces
    for n_cols in (block // 2 + 16 if spec.constants.get("D16") else block - 6, block, block // 2 + 10, 24, 88, 128,
                   3072):
        yield {"batch": 2 * 3 * (rows + 1), "n_cols": n_cols}


def _rotary_rms(spec: KernelSpec) -> bool:
    return rotary_op.form_of(rotary_op.GROUP.fullmatch(spec.group)) == rotary_op.RMS


def _rotary_embedding(spec: KernelSpec, env: dict, rng) -> Case:
    """(2, S, 3, D) heads of batch rows, S positions of cos and sin shared by each position's 3 heads."""
    if _rotary_rms(spec):
        return _rotary_embedding_rms(spec, env, rng)
    dtype, rows, d = spec.dtype, env["batch"], env["n_cols"]
    heads, s = 3, env["batch"] // 6
    x = rng.standard_normal((rows, d)).astype(np.float32)
    cos, sin = _angles(rng, s, d)
    ref = rotary_embedding_ref(quantize(x, dtype).reshape(2, s, heads, d), cos[None, :, None, :].astype(np.float64),
                               sin[None, :, None, :].astype(np.float64))
    return Case(env, {"in": (x, dtype), "cos": (cos, "fp32"), "sin": (sin, "fp32")}, {"out": ((rows, d), dtype)},
                {"batch": rows, "n_cols": d, "positions": s, "rows_per_position": heads},
                lambda got: rotary_embedding_mismatch(got["out"].reshape(2, s, heads, d), ref, dtype),
                {"rows": rows, "n_cols": d})


def _angles(rng, s: int, d: int) -> tuple[np.ndarray, np.ndarray]:
    """cos and sin (s, d) of one angle per pair, fp32."""
    angle = rng.uniform(-np.pi, np.pi, (s, d // 2)).repeat(2, axis=1)
    return np.cos(angle).astype(np.float32), np.sin(angle).astype(np.float32)


def _rotary_embedding_rms(spec: KernelSpec, env: dict, rng) -> Case:
    """Items of 3 heads a token: SEQ_A tokens of stream a joined to SEQ_B of stream b (even kernels of the group),
    or all from a; each row RMS-normalized with its stream's gamma, then turned by its token's cos and sin."""
    dtype, rows, d, heads, eps = spec.dtype, env["batch"], env["n_cols"], 3, 1e-6
    seq_a, seq_b = (SEQ_A, SEQ_B) if spec.index % 2 == 0 else (SEQ_A + SEQ_B, 0)
    items, seq = rows // (heads * (seq_a + seq_b)), seq_a + seq_b
    a, b = (rng.standard_normal((items, n, heads, d)).astype(np.float32) * 3 for n in (seq_a, max(seq_b, 1)))
    gamma_a, gamma_b = (rng.uniform(0.5, 1.5, d).astype(np.float32) for _ in range(2))
    cos, sin = _angles(rng, seq, d)
    q = lambda v: quantize(v, dtype)  # noqa: E731
    x = np.concatenate([rms_norm_ref(q(a), gamma_a.astype(np.float64), eps),
                        rms_norm_ref(q(b), gamma_b.astype(np.float64), eps)[:, :seq_b]], axis=1)
    ref = rotary_embedding_ref(x, cos[None, :, None, :].astype(np.float64), sin[None, :, None, :].astype(np.float64))
    return Case(env, {"in": (a.reshape(-1, d), dtype), "in_b": (b.reshape(-1, d), dtype), "gamma": (gamma_a, "fp32"),
                      "gamma_b": (gamma_b, "fp32"), "cos": (cos, "fp32"), "sin": (sin, "fp32")},
                {"out": ((rows, d), dtype)},
                {"batch": rows, "n_cols": d, "seq_a": seq_a, "seq_b": seq_b, "rows_per_token": heads,
                 "positions": seq, "rows_per_position": heads, "eps": eps},
                lambda got: rotary_embedding_mismatch(got["out"].reshape(items, seq, heads, d), ref, dtype),
                {"rows": rows, "n_cols": d, "streams": 2 if seq_b else 1})


# ---- bias concat: a stream boundary inside a tile, partial column blocks -----------------------------
SEQ_A, SEQ_B = 7, 4  # rows of the two streams per item: the boundary falls inside tiles of any height


def _bias_concat_problems(spec: KernelSpec) -> Iterator[dict]:
    block = spec.constants["BLOCK_C"]
    # past a block first: for whole-vector (V16) kernels by whole vectors
    for n_cols in (block + (16 if spec.constants.get("V16") else 24), block - 8, block // 2 + 8, 77, 1536):
        yield {"batch": 3 * (SEQ_A + SEQ_B), "n_cols": n_cols}


def _bias_concat(spec: KernelSpec, env: dict, rng) -> Case:
    """Three items of SEQ_A rows of stream a and SEQ_B of stream b."""
    dtype, c = spec.dtype, env["n_cols"]
    a, b = (rng.standard_normal((3, s, c)).astype(np.float32) for s in (SEQ_A, SEQ_B))
    bias_a, bias_b = (rng.standard_normal(c).astype(np.float32) for _ in range(2))
    q = lambda v: quantize(v, dtype)  # noqa: E731
    ref = bias_concat_ref(q(a), q(b), q(bias_a), q(bias_b))
    rows = env["batch"]
    return Case(env, {"in": (a, dtype), "in_b": (b, dtype), "bias": (bias_a, dtype), "bias_b": (bias_b, dtype)},
                {"out": ((rows, c), dtype)}, {"batch": rows, "n_cols": c, "seq_a": SEQ_A, "seq_b": SEQ_B},
                lambda got: bias_concat_mismatch(got["out"].reshape(3, SEQ_A + SEQ_B, c), ref, dtype),
                {"rows": rows, "n_cols": c})


# ---- fp8 rows: partial row and column blocks, a row past several slices, an all-zero row -------------------------
def _fp8_quant_rows_problems(spec: KernelSpec) -> Iterator[dict]:
    block, rows = spec.constants["BLOCK_C"], spec.constants["BLOCK_R"]
    for n_cols in (2 * block + 24, block - 8, block // 2 + 8, 77, 1536):
        yield {"batch": 2 * rows + 1, "n_cols": n_cols}


def _fp8_quant_rows(spec: KernelSpec, env: dict, rng) -> Case:
    """Rows of magnitudes from 2^-12 to 2^6 (subnormal e4m3 values after scaling), the last row all zero."""
    dtype, rows, c = spec.dtype, env["batch"], env["n_cols"]
    x = (rng.standard_normal((rows, c)) * np.exp2(rng.uniform(-12, 6, (rows, 1)))).astype(np.float32)
    x[-1] = 0
    ref_q, ref_scale = fp8_quant_rows_ref(quantize(x, dtype))
    return Case(env, {"in": (x, dtype)}, {"out": ((rows, c), "fp8e4nv"), "row_scale": ((rows,), "fp32")},
                {"batch": rows, "n_cols": c},
                lambda got: fp8_quant_rows_mismatch(got["out"], got["row_scale"], ref_q, ref_scale),
                {"rows": rows, "n_cols": c})


# ---- bias split GELU: partial row and column blocks, the halves' boundary inside a block's reach ----------------
def _bias_split_gelu_problems(spec: KernelSpec) -> Iterator[dict]:
    block, rows = spec.constants["BLOCK_C"], spec.constants["BLOCK_R"]
    for half in (block + 16, block - 16, block // 2 + 8, 40, 1280):
        yield {"batch": 2 * rows + 3, "n_cols": half}


def _bias_split_gelu(spec: KernelSpec, env: dict, rng) -> Case:
    """Rows of 2 * half values (a Linear's output, gate half past the value half) and their bias."""
    dtype, rows, half = spec.dtype, env["batch"], env["n_cols"]
    x = rng.standard_normal((rows, 2 * half)).astype(np.float32)
    bias = rng.standard_normal(2 * half).astype(np.float32)
    ref = bias_split_gelu_ref(quantize(x, dtype), quantize(bias, dtype))
    return Case(env, {"in": (x, dtype), "bias": (bias, dtype)}, {"out": ((rows, half), dtype)},
                {"batch": rows, "n_cols": half}, lambda got: bias_split_gelu_mismatch(got["out"], ref, dtype),
                {"rows": rows, "n_cols": half})
