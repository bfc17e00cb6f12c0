"""Block-sparse attention's online softmax over one layout row of key blocks, shared by ORT's two
SparseAttention contracts.

Scores are scaled by scale * log2(e) so exp2 does the exponentials; the running maximum `m`, sum `l` and
accumulator stay unnormalised until the end (`finish`). A row that sees no key in a block (causal, past the
keys' end, or a padding row of the query block) contributes nothing, and a row that saw no key at all ends
as zeros instead of 0/0.
"""

import triton
import triton.language as tl


@triton.jit
def step(acc, m_i, l_i, q, k_ptrs, v_ptrs, q_pos, offs_n, start_n, kv_len, qk_scale,
         MASK_LOADS: tl.constexpr):
    """Attend the rows of `q` (positions `q_pos` in the key sequence) to keys [start_n, start_n + BLOCK_N):
    keys past `kv_len` or after a row's own position are masked. `k_ptrs` point at the block's K transposed
    (D x N), `v_ptrs` at its V (N x D). MASK_LOADS: the block may run past `kv_len` (ragged end)."""
    keys = start_n + offs_n
    if MASK_LOADS:
        k = tl.load(k_ptrs, mask=keys[None, :] < kv_len, other=0.0)
        v = tl.load(v_ptrs, mask=keys[:, None] < kv_len, other=0.0)
    else:
        k = tl.load(k_ptrs)
        v = tl.load(v_ptrs)
    qk = tl.dot(q, k) * qk_scale
    ok = (keys[None, :] <= q_pos[:, None]) & (keys[None, :] < kv_len)
    qk = tl.where(ok, qk, float("-inf"))
    m_new = tl.maximum(m_i, tl.max(qk, 1))
    m_use = tl.where(m_new == float("-inf"), 0.0, m_new)  # a row with no key yet: exp2(-inf) = 0, not NaN
    p = tl.math.exp2(qk - m_use[:, None])
    alpha = tl.math.exp2(m_i - m_use)
    l_i = l_i * alpha + tl.sum(p, 1)
    acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
    return acc, m_new, l_i


@triton.jit
def attend(qt, k_ptrs, v_ptrs, stride_kn, stride_vn, layout_row, cols, q_pos, offs_n, kv_len, scale,
           ROWS: tl.constexpr, D: tl.constexpr, BLOCK_N: tl.constexpr, MASK_LAST: tl.constexpr):
    """The normalised output of `qt`'s ROWS rows over the key blocks that CSR row `layout_row` lists
    (`cols` its column indices), `k_ptrs`/`v_ptrs` at key 0. MASK_LAST: the last block may run past `kv_len`."""
    lo = tl.load(layout_row)
    hi = tl.load(layout_row + 1)
    qk_scale = scale * 1.4426950408889634
    m_i = tl.full([ROWS], float("-inf"), tl.float32)
    l_i = tl.zeros([ROWS], tl.float32)
    acc = tl.zeros([ROWS, D], tl.float32)
    # A causal layout lists its blocks in order: only the last can reach the keys' ragged end.
    for i in range(lo, hi - 1):
        start_n = tl.load(cols + i) * BLOCK_N
        acc, m_i, l_i = step(acc, m_i, l_i, qt, k_ptrs + start_n * stride_kn, v_ptrs + start_n * stride_vn,
                             q_pos, offs_n, start_n, kv_len, qk_scale, False)
    if hi > lo:
        start_n = tl.load(cols + hi - 1) * BLOCK_N
        acc, m_i, l_i = step(acc, m_i, l_i, qt, k_ptrs + start_n * stride_kn, v_ptrs + start_n * stride_vn,
                             q_pos, offs_n, start_n, kv_len, qk_scale, MASK_LAST)
    return finish(acc, l_i)


@triton.jit
def finish(acc, l_i):
    """The normalised output rows (zeros where a row saw no key)."""
    return acc / tl.where(l_i == 0.0, 1.0, l_i)[:, None]
