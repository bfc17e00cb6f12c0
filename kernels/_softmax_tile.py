"""A ROWS x BLOCK_SIZE tile of rows, each reduced along axis 1: softmax (LOG = 0) or log-softmax (LOG = 1).

Shared by softmax_rows_triton.py (aligned rows, 16-byte vectors) and softmax_short_triton.py (short rows
of any length). Masked lanes read -inf, so they add nothing to a row's max or sum.
"""

import triton
import triton.language as tl


@triton.jit
def softmax_rows_kernel(output_ptr, input_ptr, input_row_stride, output_row_stride, n_cols, n_rows,
                        BLOCK_SIZE: tl.constexpr, ROWS: tl.constexpr, LOG: tl.constexpr):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = (rows < n_rows)[:, None] & (cols < n_cols)[None, :]
    rows64 = rows.to(tl.int64)[:, None]
    x = tl.load(input_ptr + rows64 * input_row_stride + cols[None, :], mask=mask, other=-float("inf"))
    x = x.to(tl.float32)
    shifted = x - tl.max(x, axis=1)[:, None]
    numerator = tl.exp(shifted)
    denominator = tl.sum(numerator, axis=1)[:, None]
    if LOG:
        y = shifted - tl.log(denominator)
    else:
        y = numerator / denominator
    tl.store(output_ptr + rows64 * output_row_stride + cols[None, :], y.to(output_ptr.dtype.element_ty), mask=mask)
