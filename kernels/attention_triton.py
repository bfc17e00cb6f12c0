"""Fused multi-head attention, forward: softmax(scale * Q K^T) V without writing the scores.

The flash-attention scheme: a program owns BLOCK_M query rows of one (batch, head) and streams the keys
and values past them BLOCK_N at a time, keeping a running row maximum and sum, so the Sq x Skv scores
never leave the chip. Traffic is one read of Q, K and V per query block and one write of O; work is
4 * B * H * Sq * Skv * d flops.

The head is split into two power-of-two parts, D1 + D2 (D2 may be 0): head dims like 80 and 160 run as
64+16 and 128+32 instead of being padded to 128 and 256, and both matrix products run as two dots. A
kernel either serves the split's width exactly (EXACT: no load or store masks a column) or masks the
columns a narrower head leaves (a 40-wide head runs as 64, faster than as 32+16). Inputs are read through
three strides each (batch, head, sequence; the last axis contiguous), so (B, S, H*d) projections, their
(B, H, S, d) transposes, (B, S, H, d) heads and packed QKV all run as they are. Grouped-query attention
reads key and value head h // kv_group for query head h. Strides are 64-bit and every offset is computed
in 64 bits, so tensors past 2**31 elements are addressed right. Maths in fp32 (exp2, the scale folded with
log2(e)); fp32 inputs multiply at full precision. A row whose keys are all masked (causal, Sq > Skv)
gives zeros.

Groups `attention_<dtype>` and `attention_causal_<dtype>` (a query attends keys at positions up to its
own, top-left aligned, as torch's and ONNX's is_causal): strides and the head offset multiples of 8
elements (16 bytes at 16 bits), and so the head dim, so tiles move as vectors. `attention_any_<dtype>` and
`attention_causal_any_<dtype>` take any strides: the correctness fallback. Grid (cdiv(sq, BLOCK_M),
batch * heads, 1); a kernel serves head dims in (D1 or D1 / 2, D1 + D2], or D1 + D2 alone if EXACT.
"""

import triton
import triton.language as tl


@triton.jit
def _tile(ptrs, rows_ok, cols_ok, MASK_ROWS: tl.constexpr, MASK_COLS: tl.constexpr):
    """A tile masked only where the caller says it may be ragged (unmasked loads pipeline best)."""
    if MASK_ROWS and MASK_COLS:
        return tl.load(ptrs, mask=rows_ok[:, None] & cols_ok[None, :], other=0.0)
    elif MASK_ROWS:
        return tl.load(ptrs, mask=rows_ok[:, None], other=0.0)
    elif MASK_COLS:
        return tl.load(ptrs, mask=cols_ok[None, :], other=0.0)
    else:
        return tl.load(ptrs)


@triton.jit
def _scores(q1, q2, k_ptrs1, k_ptrs2, offs_n, start_n, k_ss, skv, head_mask1, head_mask2,
            D2: tl.constexpr, MASK_N: tl.constexpr, MASK_D: tl.constexpr, PRECISION: tl.constexpr):
    """Q K^T for the keys [start_n, start_n + BLOCK_N), K loaded transposed (d x BLOCK_N)."""
    keys_ok = start_n + offs_n < skv
    k1 = _tile(k_ptrs1 + start_n * k_ss, head_mask1, keys_ok, MASK_D, MASK_N)
    qk = tl.dot(q1, k1, input_precision=PRECISION)
    if D2 > 0:
        k2 = _tile(k_ptrs2 + start_n * k_ss, head_mask2, keys_ok, MASK_D, MASK_N)
        qk = tl.dot(q2, k2, qk, input_precision=PRECISION)
    return qk


@triton.jit
def _blocks(acc1, acc2, m_i, l_i, q1, q2, k_ptrs1, k_ptrs2, v_ptrs1, v_ptrs2, offs_m, offs_n, lo, hi,
            k_ss, v_ss, skv, qk_scale, head_mask1, head_mask2,
            D2: tl.constexpr, BLOCK_N: tl.constexpr, MASK_N: tl.constexpr, CAUSAL_MASK: tl.constexpr,
            MASK_D: tl.constexpr, PRECISION: tl.constexpr):
    """The online softmax over key blocks [lo, hi): masks only where the caller says a block needs them."""
    for start_n in range(lo, hi, BLOCK_N):
        start_n = tl.multiple_of(start_n, BLOCK_N)
        qk = _scores(q1, q2, k_ptrs1, k_ptrs2, offs_n, start_n, k_ss, skv, head_mask1, head_mask2,
                     D2, MASK_N, MASK_D, PRECISION) * qk_scale
        cols = start_n + offs_n
        if MASK_N:
            qk = tl.where((cols < skv)[None, :], qk, -float("inf"))
        if CAUSAL_MASK:
            qk = tl.where(offs_m[:, None] >= cols[None, :], qk, -float("inf"))
        m_new = tl.maximum(m_i, tl.max(qk, 1))
        m_safe = m_new
        if MASK_N or CAUSAL_MASK:
            m_safe = tl.where(m_new == -float("inf"), 0.0, m_new)  # a row with nothing unmasked yet
        p = tl.math.exp2(qk - m_safe[:, None])
        alpha = tl.math.exp2(m_i - m_safe)
        l_i = l_i * alpha + tl.sum(p, 1)
        p = p.to(v_ptrs1.dtype.element_ty)
        v1 = _tile(v_ptrs1 + start_n * v_ss, cols < skv, head_mask1, MASK_N, MASK_D)
        acc1 = tl.dot(p, v1, acc1 * alpha[:, None], input_precision=PRECISION)
        if D2 > 0:
            v2 = _tile(v_ptrs2 + start_n * v_ss, cols < skv, head_mask2, MASK_N, MASK_D)
            acc2 = tl.dot(p, v2, acc2 * alpha[:, None], input_precision=PRECISION)
        m_i = m_new
    return acc1, acc2, m_i, l_i


@triton.jit
def attention_kernel(Q, K, V, Out, scale, q_sb, q_sh, q_ss, k_sb, k_sh, k_ss, v_sb, v_sh, v_ss, o_sb, o_sh, o_ss,
                     heads, kv_group, sq, skv, head_dim,
                     D1: tl.constexpr, D2: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                     CAUSAL: tl.constexpr, ALIGNED: tl.constexpr, EXACT: tl.constexpr):
    if ALIGNED:
        # Written as multiples of 8 (the contract's promise), the compiler knows every row starts on 16 bytes.
        q_sb, q_sh, q_ss = q_sb // 8 * 8, q_sh // 8 * 8, q_ss // 8 * 8
        k_sb, k_sh, k_ss = k_sb // 8 * 8, k_sh // 8 * 8, k_ss // 8 * 8
        v_sb, v_sh, v_ss = v_sb // 8 * 8, v_sh // 8 * 8, v_ss // 8 * 8
        o_sb, o_sh, o_ss = o_sb // 8 * 8, o_sh // 8 * 8, o_ss // 8 * 8
        # and the head mask is constant over runs of 8 columns: masked loads stay 16-byte vectors
        head_dim = head_dim // 8 * 8
    PRECISION: tl.constexpr = "ieee" if Q.dtype.element_ty == tl.float32 else None  # 16-bit: the default
    start_m = tl.program_id(0)
    bh = tl.program_id(1)
    b = (bh // heads).to(tl.int64)
    h = (bh % heads).to(tl.int64)
    hk = h // kv_group  # the key and value head this query head reads (grouped-query attention)
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rows = offs_m.to(tl.int64)  # row offsets in 64 bits: sq * seq stride may pass 2**31
    offs_n = tl.arange(0, BLOCK_N)
    offs_d1 = tl.arange(0, D1)
    offs_d2 = D1 + tl.arange(0, D2 if D2 > 0 else 16)
    head_mask1 = offs_d1 < head_dim
    head_mask2 = offs_d2 < head_dim
    row_mask = offs_m < sq

    q_base = Q + b * q_sb + h * q_sh + rows[:, None] * q_ss
    q1 = tl.load(q_base + offs_d1[None, :], mask=row_mask[:, None] & head_mask1[None, :], other=0.0)
    q2 = q1
    if D2 > 0:
        q2 = tl.load(q_base + offs_d2[None, :], mask=row_mask[:, None] & head_mask2[None, :], other=0.0)
    k_base = K + b * k_sb + hk * k_sh
    k_ptrs1 = k_base + offs_n[None, :] * k_ss + offs_d1[:, None]
    k_ptrs2 = k_base + offs_n[None, :] * k_ss + offs_d2[:, None]
    v_base = V + b * v_sb + hk * v_sh
    v_ptrs1 = v_base + offs_n[:, None] * v_ss + offs_d1[None, :]
    v_ptrs2 = v_base + offs_n[:, None] * v_ss + offs_d2[None, :]

    qk_scale = scale * 1.4426950408889634  # exp(x) = exp2(x * log2(e))
    m_i = tl.full([BLOCK_M], -float("inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc1 = tl.zeros([BLOCK_M, D1], dtype=tl.float32)
    acc2 = tl.zeros([BLOCK_M, D2 if D2 > 0 else 16], dtype=tl.float32)

    if CAUSAL:
        # key blocks wholly at or below every row's diagonal run unmasked; those across it are masked
        full = tl.minimum(start_m * BLOCK_M, skv) // BLOCK_N * BLOCK_N
        end = tl.minimum((start_m + 1) * BLOCK_M, skv)
    else:
        full = skv // BLOCK_N * BLOCK_N
        end = skv
    # EXACT: the head fills the split, so no load or store needs a column mask (one copy of the loop, too:
    # every copy holds its own pipeline buffers in shared memory)
    acc1, acc2, m_i, l_i = _blocks(acc1, acc2, m_i, l_i, q1, q2, k_ptrs1, k_ptrs2, v_ptrs1, v_ptrs2, offs_m,
                                   offs_n, 0, full, k_ss, v_ss, skv, qk_scale, head_mask1, head_mask2,
                                   D2, BLOCK_N, False, False, not EXACT, PRECISION)
    acc1, acc2, m_i, l_i = _blocks(acc1, acc2, m_i, l_i, q1, q2, k_ptrs1, k_ptrs2, v_ptrs1, v_ptrs2, offs_m,
                                   offs_n, full, end, k_ss, v_ss, skv, qk_scale, head_mask1, head_mask2,
                                   D2, BLOCK_N, True, CAUSAL, not EXACT, PRECISION)

    inv = tl.where(l_i > 0, 1.0 / l_i, 0.0)
    o_base = Out + b * o_sb + h * o_sh + rows[:, None] * o_ss
    tl.store(o_base + offs_d1[None, :], (acc1 * inv[:, None]).to(Out.dtype.element_ty),
             mask=row_mask[:, None] & head_mask1[None, :])
    if D2 > 0:
        tl.store(o_base + offs_d2[None, :], (acc2 * inv[:, None]).to(Out.dtype.element_ty),
                 mask=row_mask[:, None] & head_mask2[None, :])


DTYPES = ("fp16", "bf16", "fp32")
# (D1, D2): the head split; a kernel serves head dims in (low(D1, D2), D1 + D2]. No 32+16: a 40-wide head
# runs faster as 64 with masked columns than as two dots.
SPLITS = ((32, 0), (64, 0), (64, 16), (64, 32), (128, 0), (128, 32), (128, 64), (256, 0), (512, 0))
# (BLOCK_M, BLOCK_N, num_warps, num_stages) per head width, from a sweep on the zoo's attention shapes: the
# first for long self-attention, the last for 77-key cross-attention and short runs of queries.
CONFIGS = {
    64: [(128, 64, 8, 3), (128, 64, 4, 3), (64, 64, 4, 3), (64, 64, 4, 2), (128, 32, 8, 3)],
    128: [(128, 64, 8, 3), (64, 64, 4, 3), (64, 32, 4, 3)],
    192: [(64, 64, 4, 3), (64, 64, 4, 2), (64, 32, 4, 3)],
    256: [(64, 32, 4, 3), (64, 64, 8, 2)],
    512: [(32, 64, 4, 2), (64, 32, 8, 1)],
}
CAUSAL_CONFIGS = [(64, 64, 4, 3), (128, 64, 8, 3)]
FALLBACK = {64: (64, 32, 4, 1), 128: (64, 32, 4, 1), 192: (32, 32, 4, 1), 256: (32, 32, 4, 1), 512: (16, 32, 4, 1)}
CAUSAL_SPLITS = ((64, 0), (128, 0))  # the head dims of the decoder LLMs that attend causally


def low(d1: int, d2: int) -> int:
    """Head dims above this go to a wider split; with D2, narrower ones to D1 alone."""
    return d1 if d2 else d1 // 2


def _width(d1: int, d2: int) -> int:
    return next(w for w in sorted(CONFIGS) if d1 + d2 <= w)


def _entry(dtype, causal, aligned, exact, d1, d2, cfg):
    bm, bn, warps, stages = cfg
    kind = ("causal_" if causal else "") + ("" if aligned else "any_")
    return {"name": f"attention_{kind}{dtype}_d{d1}_{d2}{'' if exact else '_le'}_m{bm}_n{bn}_w{warps}_s{stages}",
            "group": f"attention_{kind}{dtype}", "func": attention_kernel,
            "sig": f"*{dtype}:16,*{dtype}:16,*{dtype}:16,*{dtype}:16,fp32," + ",".join(["i64"] * 12 + ["i32"] * 5),
            "kwargs": {"num_warps": warps, "num_stages": stages,
                       "constants": {"D1": d1, "D2": d2, "BLOCK_M": bm, "BLOCK_N": bn, "CAUSAL": int(causal),
                                     "ALIGNED": int(aligned), "EXACT": int(exact)}}}


def get_function_table():
    table = []
    for dtype in DTYPES:
        for causal in (False, True):
            splits = CAUSAL_SPLITS if causal else SPLITS
            if dtype != "fp32":  # fp32 is served for correctness: the fallback alone
                for d1, d2 in splits:
                    configs = CAUSAL_CONFIGS if causal else CONFIGS[_width(d1, d2)]
                    # heads narrower than the split mask their columns: every config where such heads are
                    # common (40 wide, SD 1.5), the long and the short one elsewhere
                    masked = configs if d1 + d2 <= 64 else [configs[0], configs[-1]]
                    table += [_entry(dtype, causal, True, True, d1, d2, cfg) for cfg in configs]
                    table += [_entry(dtype, causal, True, False, d1, d2, cfg) for cfg in masked]
            table += [_entry(dtype, causal, False, False, d1, d2, FALLBACK[_width(d1, d2)]) for d1, d2 in SPLITS]
    return table


PARAMS = ["q", "k", "v", "out", "scale", "q_batch_stride", "q_head_stride", "q_seq_stride", "k_batch_stride",
          "k_head_stride", "k_seq_stride", "v_batch_stride", "v_head_stride", "v_seq_stride", "out_batch_stride",
          "out_head_stride", "out_seq_stride", "heads", "kv_group", "sq", "skv", "head_dim"]


def get_launch_contracts():
    serves = ["head_dim <= D1 + D2", "head_dim > (D2 > 0) * D1 + (D2 == 0) * (D1 > 32) * (D1 // 2)",
              "EXACT == 0 or head_dim == D1 + D2"]
    # the grid's second axis holds batch * heads programs: CUDA's limit there
    serves = serves + ["batch * heads <= 65535"]
    aligned = ["strides8 == 1"]
    grid = ["cdiv(sq, BLOCK_M)", "batch * heads", "1"]
    out = {}
    for dtype in DTYPES:
        for causal in ("", "causal_"):
            if dtype != "fp32":
                out[f"attention_{causal}{dtype}"] = {
                    "params": PARAMS, "grid": grid, "requires": serves + aligned,
                    "doc": "strides in elements (64-bit); kv_group: query heads per key/value head; strides8: every "
                       "stride a multiple of 8"}
            out[f"attention_{causal}any_{dtype}"] = {
                "params": PARAMS, "grid": grid, "requires": serves, "fallback": True,
                "doc": "any strides: the correctness fallback"}
    return out
