"""Block-sparse causal attention for prompts and decoding with padding: ORT's SparseAttention "v2" contract.

ORT's CUDA SparseAttention op runs every step with a past (decoding), and prompts when v1 is disabled,
through this kernel. ORT computes on the host one entry per block of BLOCK_M query rows of each batch
(`q_batch_ids`, `q_start_sids`: grid x) and per batch the query and key spans (`q_batch_starts/ends`,
`k_batch_starts/ends`), so each batch has its own lengths and the past of a batch is its key length less
its query length. One program takes up to BLOCK_M_LOADING query rows of one query block and head, and
visits the key blocks the head's layout lists for the layout row of its first query (CSR, as v1), with
the causal mask on positions; a grouped-query head reads KV head `h // q_k_ratio`. Q is BNSH, the KV cache
BNSH with `max_cache_sequence_length` rows, the output BSNH: all through ORT's strides.

The launch is ORT's `sparse_attention_v2::SparseAttentionParams::LaunchKernel`: its 29 arguments in its
order, grid (active_q_blocks, num_heads, 1), the kernel's warps and shared memory. Two kernels per dtype,
ORT's algorithms: 0 decodes (a past, at most 16 new tokens: 16 query rows, one warp), 1 is the prompt
(64 rows, four warps). Head size 128, sparse block 64.
"""

import triton
import triton.language as tl
from _sparse_block import attend


@triton.jit
def sparse_attention_v2_kernel(
        out, q, k, v, q_batch_starts, q_batch_ends, k_batch_starts, k_batch_ends, q_batch_ids, q_start_sids,
        layout_rows, layout_cols, layout_row_stride_h, layout_col_stride_h,
        stride_qb, stride_qt, stride_qh, stride_kb, stride_kt, stride_kh, stride_vb, stride_vt, stride_vh,
        stride_ob, stride_ot, stride_oh, q_k_ratio, num_layout, scale,
        D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_M_LOADING: tl.constexpr):
    g = tl.program_id(0)
    h = tl.program_id(1)
    b = tl.load(q_batch_ids + g).to(tl.int64)
    q_sid = tl.load(q_start_sids + g)
    q_start = tl.load(q_batch_starts + b)
    q_len = tl.load(q_batch_ends + b) - q_start
    k_start = tl.load(k_batch_starts + b)
    kv_len = tl.load(k_batch_ends + b) - k_start
    past = kv_len - q_len

    offs_m = q_sid + tl.arange(0, BLOCK_M_LOADING)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, D)
    q_ptrs = q + b * stride_qb + h * stride_qh + (q_start + offs_m[:, None]) * stride_qt + offs_d[None, :]
    qt = tl.load(q_ptrs, mask=offs_m[:, None] < q_len, other=0.0)
    h_kv = h // q_k_ratio
    k_ptrs = k + b * stride_kb + h_kv * stride_kh + (k_start + offs_n[None, :]) * stride_kt + offs_d[:, None]
    v_ptrs = v + b * stride_vb + h_kv * stride_vh + (k_start + offs_n[:, None]) * stride_vt + offs_d[None, :]

    lh = h % num_layout
    row = layout_rows + lh * layout_row_stride_h + (past + q_sid) // BLOCK_M
    o = attend(qt, k_ptrs, v_ptrs, stride_kt, stride_vt, row, layout_cols + lh * layout_col_stride_h,
               offs_m + past, offs_n, kv_len, scale, BLOCK_M_LOADING, D, BLOCK_N, True)
    o_ptrs = out + b * stride_ob + h * stride_oh + (q_start + offs_m[:, None]) * stride_ot + offs_d[None, :]
    tl.store(o_ptrs, o.to(out.dtype.element_ty), mask=offs_m[:, None] < q_len)


DTYPES = ("fp16", "bf16")
HEAD, BLOCK = 128, 64
# (rows a program loads, warps) for ORT's algorithm 0 (decoding) and 1 (prompt). Decoding takes four warps, not
# ORT's one: a step is a chain of dependent block loads, and more warps keep more of them in flight.
ALGOS = ((16, 4), (64, 4))
STAGES = {75: 2, 80: 3, 90: 3, 100: 3, 120: 2}
PARAMS = ("out", "q", "k", "v", "q_batch_starts", "q_batch_ends", "k_batch_starts", "k_batch_ends", "q_batch_ids",
          "q_start_sids", "layout_rows", "layout_cols", "layout_row_stride_h", "layout_col_stride_h",
          "stride_qb", "stride_qt", "stride_qh", "stride_kb", "stride_kt", "stride_kh", "stride_vb", "stride_vt",
          "stride_vh", "stride_ob", "stride_ot", "stride_oh", "q_k_ratio", "num_layout", "scale")


def get_function_table():
    """ORT's two algorithms per dtype, in the order its get_algo_id numbers them."""
    return [{"name": f"sparse_attention_v2_{dtype}_d{HEAD}_m{BLOCK}_{rows}_n{BLOCK}_b1",
             "group": f"sparse_attention_v2_{dtype}", "func": sparse_attention_v2_kernel,
             "sig": f"*{dtype}:16,*{dtype}:16,*{dtype}:16,*{dtype}:16," + ",".join(["*i32:16"] * 8) + ",i32,i32,"
                    + ",".join(["i32:16"] * 12) + ",i32,i32,fp32",
             "kwargs": {"num_warps": warps, "num_stages": STAGES[90],
                        "constants": {"D": HEAD, "BLOCK_M": BLOCK, "BLOCK_N": BLOCK, "BLOCK_M_LOADING": rows}}}
            for dtype in DTYPES for rows, warps in ALGOS]
