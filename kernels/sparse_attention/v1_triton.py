"""Block-sparse causal attention for a prompt: ONNX Runtime's SparseAttention "v1" kernel contract.

ORT's CUDA SparseAttention op (com.microsoft, Phi-3-small's attention) runs a prompt (no past) through
this kernel: one program takes BLOCK_M query rows of one (batch, head) and visits only the key blocks the
head's layout lists for that row of blocks (CSR: `layout_rows[h, i] .. layout_rows[h, i + 1]` index
`layout_cols[h, :]`), with the causal mask inside them. Keys and values sit in ORT's KV cache (BNSH, its
rows `max_cache_sequence_length` long); grouped-query heads share a KV head (`num_heads // num_kv_heads`
query heads each); the output is BSNH. Work is 4 * D * (64 x 64 per visited block pair) flops, traffic one
read of each visited K and V block.

The launch is ORT's `sparse_attention_v1::SparseAttentionParams::LaunchKernel`: its 26 arguments in its
order (pointers 16-byte aligned, strides in elements, the last `past_seq_len`, 0 for a prompt), grid
(cdiv(sequence_length, BLOCK_M), batch * num_heads, 1), and the kernel's own warps and shared memory.
Two kernels per dtype, ORT's algorithms: EVEN (total_seq_len % BLOCK_N == 0, no load masked) and the
ragged one. Head size 128, sparse block 64, as ORT's op requires.
"""

import triton
import triton.language as tl
from _sparse_block import attend


@triton.jit
def sparse_attention_v1_kernel(
        out, q, k, v, layout_rows, layout_cols, layout_row_stride_h, layout_col_stride_h, num_layout, scale,
        stride_qb, stride_qh, stride_qm, stride_kb, stride_kh, stride_kn, stride_vb, stride_vh, stride_vn,
        stride_ob, stride_oh, stride_om, num_heads, num_kv_heads, total_seq_len, past_seq_len,
        D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, EVEN: tl.constexpr):
    start_m = tl.program_id(0)
    b = tl.program_id(1) // num_heads
    h = tl.program_id(1) % num_heads
    h_kv = h // (num_heads // num_kv_heads)
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, D)
    q_len = total_seq_len - past_seq_len
    q_ptrs = q + b.to(tl.int64) * stride_qb + h * stride_qh + offs_m[:, None] * stride_qm + offs_d[None, :]
    if EVEN:
        qt = tl.load(q_ptrs)
    else:
        qt = tl.load(q_ptrs, mask=offs_m[:, None] < q_len, other=0.0)
    k_ptrs = k + b.to(tl.int64) * stride_kb + h_kv * stride_kh + offs_n[None, :] * stride_kn + offs_d[:, None]
    v_ptrs = v + b.to(tl.int64) * stride_vb + h_kv * stride_vh + offs_n[:, None] * stride_vn + offs_d[None, :]

    lh = h % num_layout
    row = layout_rows + lh * layout_row_stride_h + (past_seq_len + start_m * BLOCK_M) // BLOCK_M
    o = attend(qt, k_ptrs, v_ptrs, stride_kn, stride_vn, row, layout_cols + lh * layout_col_stride_h,
               offs_m + past_seq_len, offs_n, total_seq_len, scale, BLOCK_M, D, BLOCK_N, not EVEN)
    o_ptrs = out + b.to(tl.int64) * stride_ob + h * stride_oh + offs_m[:, None] * stride_om + offs_d[None, :]
    tl.store(o_ptrs, o.to(out.dtype.element_ty), mask=offs_m[:, None] < q_len)


DTYPES = ("fp16", "bf16")
HEAD, BLOCK = 128, 64
WARPS = 4
# Pipeline stages per arch: what its shared memory holds (sm_75 and sm_120: about 64 and 100 KB a block).
STAGES = {75: 2, 80: 2, 90: 3, 100: 3, 120: 2}
PARAMS = ("out", "q", "k", "v", "layout_rows", "layout_cols", "layout_row_stride_h", "layout_col_stride_h",
          "num_layout", "scale", "stride_qb", "stride_qh", "stride_qm", "stride_kb", "stride_kh", "stride_kn",
          "stride_vb", "stride_vh", "stride_vn", "stride_ob", "stride_oh", "stride_om", "num_heads",
          "num_kv_heads", "total_seq_len", "past_seq_len")


def get_function_table():
    """ORT's two algorithms per dtype, in the order its get_algo_id numbers them (0: even, 1: ragged)."""
    return [{"name": f"sparse_attention_v1_{dtype}_d{HEAD}_n{BLOCK}_e{even}",
             "group": f"sparse_attention_v1_{dtype}", "func": sparse_attention_v1_kernel,
             "sig": f"*{dtype}:16,*{dtype}:16,*{dtype}:16,*{dtype}:16,*i32:16,*i32:16,i32,i32,i32,fp32,"
                    + ",".join(["i32:16"] * 12) + ",i32,i32,i32,i32",
             "kwargs": {"num_warps": WARPS, "num_stages": STAGES[90],
                        "constants": {"D": HEAD, "BLOCK_M": BLOCK, "BLOCK_N": BLOCK, "EVEN": even}}}
            for dtype in DTYPES for even in (1, 0)]
