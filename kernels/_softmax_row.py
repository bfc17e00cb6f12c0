"""One row of softmax or log-softmax held in registers, on any row (masked lanes load -inf and drop out
of max and sum; a row of -inf gives NaN, as torch does), for the scripts that add kernels to ORT's
`softmax_<dtype>` groups: their plain path for rows the packed or streamed path cannot take, and the
test for rows that move as 16-byte vectors. (softmax_triton.py keeps its own copy of the row: ORT
compiles that script alone.) Maths in fp32, fp64 for fp64 rows.
"""

import triton
import triton.language as tl


@triton.jit
def normalize_row(output_ptr, input_ptr, input_row_stride, output_row_stride, n_cols, row,
                  BLOCK_SIZE: tl.constexpr, LOG: tl.constexpr):
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    x = tl.load(input_ptr + row * input_row_stride + cols, mask=mask, other=-float("inf"))
    if x.dtype != tl.float64:
        x = x.to(tl.float32)
    shifted = x - tl.max(x, axis=0)
    numerator = tl.exp(shifted)
    denominator = tl.sum(numerator, axis=0)
    if LOG:
        y = shifted - tl.log(denominator)
    else:
        y = numerator / denominator
    tl.store(output_ptr + row * output_row_stride + cols, y.to(output_ptr.dtype.element_ty), mask=mask)


@triton.jit
def is_aligned(input_row_stride, output_row_stride, n_cols, VEC: tl.constexpr):
    """Whether the row may move as 16-byte vectors of VEC elements (pointers: the signature's promise)."""
    return (n_cols % VEC == 0) & (input_row_stride % VEC == 0) & (output_row_stride % VEC == 0)

