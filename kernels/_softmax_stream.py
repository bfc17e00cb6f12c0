"""The two passes of a softmax row streamed through one program instead of held in its registers.

Pass 1 (`stream_stats`) reads the row in CHUNK-column pieces, each seen as CHUNK / VEC vectors of VEC
columns (one 16-byte load when the row is aligned), and keeps, per vector slot, the max so far and the
sum of exp rescaled to it: the online-softmax recurrence with no reduction across threads inside the
loop, so no barrier holds a warp's next loads back behind the slowest warp's. The slots combine once,
at the end. The pieces are marked evict-last, so L2 keeps them for pass 2 (`stream_write`), which reads
the row again newest piece first (what L2 still holds is read before it goes) and writes the output
marked evict-first, so it does not push the input out.

Maths in fp32; masked lanes read -inf and add nothing. The running max starts at the lowest finite
float, not -inf, so a slot that has seen only -inf rescales by exp(0) instead of exp(-inf - -inf) = NaN;
a row of -inf still gives NaN (its sum is 0), as torch does.
"""

import triton
import triton.language as tl

LOG2E = tl.constexpr(1.4426950408889634)
LOWEST = tl.constexpr(-3.4028234663852886e38)  # float32's lowest finite value


@triton.jit
def stream_stats(row_ptr, n_cols, CHUNK: tl.constexpr, VEC: tl.constexpr):
    """Max of the row's first n_cols columns and the sum of exp(x - max), in fp32."""
    SLOTS: tl.constexpr = CHUNK // VEC
    offs = tl.arange(0, SLOTS)[:, None] * VEC + tl.arange(0, VEC)[None, :]
    slot_max = tl.full([SLOTS], LOWEST, tl.float32)
    slot_sum = tl.zeros([SLOTS], tl.float32)
    for chunk in range(0, n_cols, CHUNK):
        x = tl.load(row_ptr + chunk + offs, mask=chunk + offs < n_cols, other=-float("inf"),
                    eviction_policy="evict_last").to(tl.float32)
        new_max = tl.maximum(slot_max, tl.max(x, axis=1))  # a VEC-vector's max: inside one thread
        slot_sum = (slot_sum * tl.exp2((slot_max - new_max) * LOG2E)
                    + tl.sum(tl.exp2((x - new_max[:, None]) * LOG2E), axis=1))
        slot_max = new_max
    row_max = tl.max(slot_max, axis=0)
    return row_max, tl.sum(slot_sum * tl.exp2((slot_max - row_max) * LOG2E), axis=0)


@triton.jit
def fold(row_max, row_sum, x):
    """(max, sum) of the row with the lanes of x added (-inf lanes add nothing)."""
    new_max = tl.maximum(row_max, tl.max(x, axis=0))
    return new_max, row_sum * tl.exp2((row_max - new_max) * LOG2E) + tl.sum(tl.exp2((x - new_max) * LOG2E), axis=0)


@triton.jit
def normalized(x, row_max, row_sum, LOG: tl.constexpr):
    if LOG:
        y = (x - row_max) - tl.log(row_sum)  # row_max + log(sum) would round the log away at 1e30
    else:
        y = tl.exp2((x - row_max) * LOG2E) * (1.0 / row_sum)
    return y


@triton.jit
def stream_write(out_ptr, row_ptr, n_cols, row_max, row_sum, LOG: tl.constexpr, CHUNK: tl.constexpr):
    """Pass 2: the row's first n_cols columns normalized, newest chunk first."""
    cols = tl.arange(0, CHUNK)
    n_chunks = tl.cdiv(n_cols, CHUNK)
    for i in range(0, n_chunks):
        chunk = (n_chunks - 1 - i) * CHUNK
        mask = chunk + cols < n_cols
        x = tl.load(row_ptr + chunk + cols, mask=mask, other=-float("inf"), eviction_policy="evict_first")
        y = normalized(x.to(tl.float32), row_max, row_sum, LOG)
        tl.store(out_ptr + chunk + cols, y.to(out_ptr.dtype.element_ty), mask=mask, eviction_policy="evict_first")
