"""Rotary position embedding on interleaved pairs in one pass: Flux's queries and keys.

Flux turns every query and key head by its token's position before attention, `y = x * cos + rot(x) * sin`,
where rot takes each pair (x[2i], x[2i+1]) to (-x[2i+1], x[2i]) and cos and sin hold one row of head_dim
per position, in fp32 (diffusers' `apply_rotary_emb`, pairs unbound on the last axis). As torch.onnx writes
it, that is a Reshape into pairs, two Slices and Squeezes, a Neg, two Unsqueezes, a Concat, a Reshape back,
casts to fp32 and back, two Muls and an Add: about ten kernels over every query and key tensor of every
block, each reading and writing it whole. Here it is one: x read once (a pair's partner comes from the
same cache lines) and y written once.

Groups `rotary_embedding_<dtype>` (x and y in dtype, cos and sin fp32): BLOCK_R rows of n_cols per program,
grid (cdiv(rows, BLOCK_R), 1, 1), a candidate when n_cols <= BLOCK_D (the smallest such block, or 64).
Row r reads row (r // rows_per_position) % positions of cos and sin: cos (1, S, 1, D) against (B, S, H, D)
heads is `positions` S and `rows_per_position` H. n_cols is even. Maths in fp32; offsets in 64 bits.

Kernels with D16 take rows whose n_cols is a multiple of 16 (head_dim 64 and 128): the signature says so, so
every row starts 16-byte aligned and loads and stores move whole vectors, and each pair is split from x in
registers rather than loaded a second time. The others take any even n_cols; the library times both on first
use of a shape.

Flux normalizes each query and key head (RMSNorm over head_dim, its own weight per stream) before it turns it,
and in its double blocks joins the text's and the image's heads on the sequence axis between the two: three
passes (ORT's norm kernel per stream, a concat, the rotation), each reading and writing every head. Groups
`rotary_embedding_rms_<dtype>` do all of it in one: a row of the output comes from stream a or b (the join, as
kernels/bias_concat_triton.py does it, rows_per_token rows per token), is scaled by rsqrt(mean(x^2) + eps) and
its stream's gamma (fp32), then turned. One stream is seq_b = 0. The whole row is one tile (n_cols <= BLOCK_D),
its pairs split in registers.
"""

import triton
import triton.language as tl

DTYPES = ("fp32", "fp16", "bf16")
# (BLOCK_D, BLOCK_R, num_warps, D16): about 4K elements a program, a block per power of two of the row (head_dim
# 64 or 128 per head; whole (B, S, H*D) rows where a model rotates those); D16 for the head widths
CONFIGS = [(64, 64, 4, 0), (128, 32, 4, 0), (128, 16, 2, 0), (256, 16, 4, 0), (512, 8, 4, 0), (1024, 4, 4, 0),
           (2048, 2, 4, 0), (4096, 1, 4, 0), (8192, 1, 8, 0), (64, 64, 4, 1), (128, 32, 4, 1), (128, 64, 8, 1)]


@triton.jit
def rotary_embedding_kernel(out_ptr, x_ptr, cos_ptr, sin_ptr, n_rows, n_cols, positions, rows_per_position,
                            BLOCK_R: tl.constexpr, BLOCK_D: tl.constexpr, D16: tl.constexpr):
    rows = tl.program_id(0).to(tl.int64) * BLOCK_R + tl.arange(0, BLOCK_R)
    cols = tl.arange(0, BLOCK_D)
    mask = (rows < n_rows)[:, None] & (cols < n_cols)[None, :]
    at = rows[:, None] * n_cols + cols[None, :]
    at_pos = ((rows // rows_per_position) % positions)[:, None] * n_cols + cols[None, :]
    x = tl.load(x_ptr + at, mask=mask, other=0.0).to(tl.float32)
    if D16:
        # (x[2i], x[2i+1]) -> (-x[2i+1], x[2i]) in registers: x's tile as pairs, split and joined swapped
        even, odd = tl.split(tl.reshape(x, (BLOCK_R, BLOCK_D // 2, 2)))
        rot = tl.reshape(tl.join(-odd, even), (BLOCK_R, BLOCK_D))
    else:
        # the pair's partner: n_cols is even, so flipping the offset's low bit stays in the row
        partner = tl.load(x_ptr + (at ^ 1), mask=mask, other=0.0).to(tl.float32)
        rot = tl.where((cols % 2 == 0)[None, :], -partner, partner)
    cos = tl.load(cos_ptr + at_pos, mask=mask, other=0.0)
    sin = tl.load(sin_ptr + at_pos, mask=mask, other=0.0)
    tl.store(out_ptr + at, (x * cos + rot * sin).to(out_ptr.dtype.element_ty), mask=mask)


# (BLOCK_D, BLOCK_R, num_warps, D16): head widths only (the norm holds a row in one tile)
RMS_CONFIGS = [(64, 64, 4, 0), (128, 32, 4, 0), (256, 16, 4, 0), (64, 64, 4, 1), (128, 32, 4, 1), (128, 16, 2, 1),
               (256, 16, 4, 1)]


@triton.jit
def rotary_embedding_rms_kernel(out_ptr, a_ptr, b_ptr, gamma_a_ptr, gamma_b_ptr, cos_ptr, sin_ptr, n_rows, n_cols,
                                seq_a, seq_b, rows_per_token, positions, rows_per_position, eps,
                                BLOCK_R: tl.constexpr, BLOCK_D: tl.constexpr, D16: tl.constexpr):
    # D16 changes nothing here: the signature's n_cols % 16 == 0 is what lets every access be a whole vector
    rows = tl.program_id(0).to(tl.int64) * BLOCK_R + tl.arange(0, BLOCK_R)
    cols = tl.arange(0, BLOCK_D)
    live = rows < n_rows
    in_cols = (cols < n_cols)[None, :]
    token, lane = rows // rows_per_token, rows % rows_per_token
    item, s = token // (seq_a + seq_b), token % (seq_a + seq_b)
    first = s < seq_a
    row_a = (item * seq_a + s) * rows_per_token + lane
    row_b = (item * seq_b + s - seq_a) * rows_per_token + lane
    a = tl.load(a_ptr + row_a[:, None] * n_cols + cols[None, :], mask=(live & first)[:, None] & in_cols, other=0.0)
    b = tl.load(b_ptr + row_b[:, None] * n_cols + cols[None, :], mask=(live & ~first)[:, None] & in_cols, other=0.0)
    x = tl.where(first[:, None], a.to(tl.float32), b.to(tl.float32))
    inv = 1.0 / tl.sqrt(tl.sum(x * x, axis=1) / n_cols + eps)
    gamma_a = tl.load(gamma_a_ptr + cols, mask=cols < n_cols, other=0.0)
    gamma_b = tl.load(gamma_b_ptr + cols, mask=cols < n_cols, other=0.0)
    x = x * inv[:, None] * tl.where(first[:, None], gamma_a[None, :], gamma_b[None, :])
    even, odd = tl.split(tl.reshape(x, (BLOCK_R, BLOCK_D // 2, 2)))
    rot = tl.reshape(tl.join(-odd, even), (BLOCK_R, BLOCK_D))
    mask = live[:, None] & in_cols
    at_pos = ((rows // rows_per_position) % positions)[:, None] * n_cols + cols[None, :]
    cos = tl.load(cos_ptr + at_pos, mask=mask, other=0.0)
    sin = tl.load(sin_ptr + at_pos, mask=mask, other=0.0)
    tl.store(out_ptr + rows[:, None] * n_cols + cols[None, :], (x * cos + rot * sin).to(out_ptr.dtype.element_ty),
             mask=mask)


# each kernel's signature: x's type `dt`, and `d16` ":16" where n_cols is a multiple of 16
SIGS = {rotary_embedding_kernel: "*{dt}:16,*{dt}:16,*fp32:16,*fp32:16,i64,i32{d16},i64,i64",
        rotary_embedding_rms_kernel: "*{dt}:16,*{dt}:16,*{dt}:16,*fp32:16,*fp32:16,*fp32:16,*fp32:16,i64,i32{d16},i64,"
                                     "i64,i64,i64,i64,fp32"}


def get_function_table():
    table = []
    for dtype in DTYPES:
        for group, func, configs in ((f"rotary_embedding_{dtype}", rotary_embedding_kernel, CONFIGS),
                                     (f"rotary_embedding_rms_{dtype}", rotary_embedding_rms_kernel, RMS_CONFIGS)):
            for block_d, block_r, warps, d16 in configs:
                table.append({
                    "name": f"{group}_d{block_d}_r{block_r}_w{warps}" + ("_d16" if d16 else ""),
                    "group": group,
                    "func": func,
                    "sig": SIGS[func].format(dt=dtype, d16=":16" if d16 else ""),
                    "kwargs": {"num_warps": warps, "constants": {"BLOCK_R": block_r, "BLOCK_D": block_d, "D16": d16}},
                })
    return table


def get_launch_contracts():
    contract = {"params": ["out", "in", "cos", "sin", "batch", "n_cols", "positions", "rows_per_position"],
                "grid": ["cdiv(batch, BLOCK_R)", "1", "1"],
                "requires": ["n_cols <= BLOCK_D", "BLOCK_D <= 64 or BLOCK_D < 2 * n_cols",
                             "D16 == 0 or n_cols % 16 == 0"],
                "doc": "BLOCK_R rows per program; batch = rows of n_cols (even), row r takes cos and sin row "
                       "(r // rows_per_position) % positions"}
    rms = {"params": ["out", "in", "in_b", "gamma", "gamma_b", "cos", "sin", "batch", "n_cols", "seq_a", "seq_b",
                      "rows_per_token", "positions", "rows_per_position", "eps"],
           "grid": ["cdiv(batch, BLOCK_R)", "1", "1"],
           "requires": ["n_cols <= BLOCK_D", "BLOCK_D <= 64 or BLOCK_D < 2 * n_cols", "D16 == 0 or n_cols % 16 == 0"],
           "doc": "batch = the output's rows; token t = r // rows_per_token of item t // (seq_a + seq_b) comes from in "
                  "(its first seq_a tokens) or in_b, RMS-normalized with that stream's gamma, then turned by cos and "
                  "sin row (r // rows_per_position) % positions"}
    return {**{f"rotary_embedding_{dtype}": contract for dtype in DTYPES},
            **{f"rotary_embedding_rms_{dtype}": rms for dtype in DTYPES}}
