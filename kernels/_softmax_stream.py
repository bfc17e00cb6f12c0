"""The two passes of a softmax row streamed through one program instead of held in its registers.

`stream_stats` and `stream_write` are the two passes over a row that is streamed, not held: pass 1
reads it in BLOCK_SIZE chunks (marked evict-last, so L2 keeps them) for the max and the sum of exp;
pass 2 reads it again newest chunk first, so what L2 still holds is read before it goes, and writes
the output marked evict-first, so it does not push the input out. The last chunk never leaves
registers.
"""

import triton
import triton.language as tl


@triton.jit
def stream_stats(row_ptr, n_cols, BLOCK_SIZE: tl.constexpr):
    """Max of a row, the sum of exp(x - max) (0 if all are -inf) and the last chunk read, in fp32
    (-inf past the row's end)."""
    cols = tl.arange(0, BLOCK_SIZE)
    row_max = tl.max(tl.full([BLOCK_SIZE], -float("inf"), tl.float32), axis=0)
    sums = tl.zeros([BLOCK_SIZE], tl.float32)
    x = tl.full([BLOCK_SIZE], -float("inf"), tl.float32)
    for chunk in range(0, n_cols, BLOCK_SIZE):
        x = tl.load(row_ptr + chunk + cols, mask=chunk + cols < n_cols, other=-float("inf"),
                    eviction_policy="evict_last").to(tl.float32)
        new_max = tl.maximum(row_max, tl.max(x, axis=0))
        # One scalar exp per chunk rescales the lane sums; shifting by 0 while everything seen is -inf
        # keeps them 0 instead of exp(-inf - -inf) = NaN.
        shift = tl.where(new_max > -float("inf"), new_max, 0.0)
        sums = sums * tl.exp(row_max - shift) + tl.exp(x - shift)
        row_max = new_max
    return row_max, tl.sum(sums, axis=0), x


@triton.jit
def _write_chunk(out_ptr, x, chunk, n_cols, row_max, row_sum, LOG: tl.constexpr, BLOCK_SIZE: tl.constexpr):
    cols = chunk + tl.arange(0, BLOCK_SIZE)
    if LOG:
        y = (x - row_max) - tl.log(row_sum)  # row_max + log(sum) would round the log away at 1e30
    else:
        y = tl.exp(x - row_max) * (1.0 / row_sum)
    tl.store(out_ptr + cols, y.to(out_ptr.dtype.element_ty), mask=cols < n_cols, eviction_policy="evict_first")


@triton.jit
def stream_write(out_ptr, row_ptr, n_cols, last, row_max, row_sum, LOG: tl.constexpr, BLOCK_SIZE: tl.constexpr):
    """Pass 2: `last` is the chunk stream_stats left in registers; the chunks before it are whole."""
    n_chunks = tl.cdiv(n_cols, BLOCK_SIZE)
    newest = (n_chunks - 1) * BLOCK_SIZE
    if n_chunks > 0:
        _write_chunk(out_ptr, last, newest, n_cols, row_max, row_sum, LOG, BLOCK_SIZE)
    for i in range(1, n_chunks):
        chunk = newest - i * BLOCK_SIZE
        x = tl.load(row_ptr + chunk + tl.arange(0, BLOCK_SIZE), eviction_policy="evict_first").to(tl.float32)
        _write_chunk(out_ptr, x, chunk, n_cols, row_max, row_sum, LOG, BLOCK_SIZE)

