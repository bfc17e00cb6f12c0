"""Softmax and log-softmax of long 16-bit rows held packed in registers, one row per program.

A row of up to 64K fp16 / bf16 columns stays in registers as it was loaded, two values per 32-bit
word (kernels/_packed16.py), and each of the three passes (max, sum of exp, output) unpacks it again.
Half the registers of an fp32 copy: rows up to 32K fit in 64 registers per thread (`maxnreg`), so two
programs share an SM and one loads while the other reduces. Triton 3.9's code for these rows needs
more registers than that budget (it spills there), so the 16K and 32K pieces also come with a larger
one (`_r96`: one program per SM at 32K) and the tuner takes whichever is faster. Traffic is the
minimum, one read and one write: 2 * batch * n_cols * 2 bytes.

The packed path runs when n_cols and both strides are multiples of 16 (16-byte words and vectors). A
row of any other length whose input and output lie equally far from a 16-byte boundary (equal strides:
a contiguous tensor, GPT-2's 50257 or XLM-R's 250002 columns) keeps its 16-byte-aligned body packed and
takes the few columns before and after it (under 8 each) as elements. Any other row takes the plain path
of kernels/_softmax_row.py, so the softmax kernels keep ORT's
contract whole and sit in ORT's own groups `softmax_<dtype>` (and `log_softmax_<dtype>`, the
runtime's): ORT's five arguments, grid (batch, 1, 1), a candidate when n_cols <= BLOCK_SIZE, pointers
16-byte aligned (every ORT allocation is). Inline PTX: CUDA only, so the ROCm build of those groups
has the portable kernels of softmax_triton.py alone.
"""

import triton
import triton.language as tl
from _packed16 import LOG2E, exp2, load_words, max_and_sum, normalized, words_max, words_sum
from _softmax_row import is_aligned, normalize_row

PLATFORMS = ("cuda",)  # inline PTX
MIN_SM = 80  # cvt.rn.f16x2.f32 / cvt.rn.bf16x2.f32, the packing of two values a word, start at sm_80


@triton.jit
def softmax_packed_kernel(output_ptr, input_ptr, input_row_stride, output_row_stride, n_cols,
                          BLOCK_SIZE: tl.constexpr, LOG: tl.constexpr):
    DT: tl.constexpr = input_ptr.dtype.element_ty
    row = tl.program_id(0).to(tl.int64)
    if is_aligned(input_row_stride, output_row_stride, n_cols, 16):
        words = tl.max_contiguous(tl.multiple_of(tl.arange(0, BLOCK_SIZE // 2), 8), 8)  # word i: columns 2i, 2i+1
        mask = words < n_cols // 16 * 8
        packed = load_words(input_ptr, input_row_stride // 16 * 16, row, words, mask, DT, "")
        row_max, row_sum = max_and_sum(packed, DT)
        out_words = tl.multiple_of(row * (output_row_stride // 16 * 8), 8)
        dst = output_ptr.to(tl.pointer_type(tl.uint32), bitcast=True) + out_words
        tl.store(dst + words, normalized(packed, row_max, row_sum, LOG, DT), mask=mask)
    elif (input_row_stride - output_row_stride) % 8 == 0:
        _ragged_row(output_ptr, input_ptr, input_row_stride, output_row_stride, n_cols, row, BLOCK_SIZE, LOG, DT)
    else:
        normalize_row(output_ptr, input_ptr, input_row_stride, output_row_stride, n_cols, row, BLOCK_SIZE, LOG)


@triton.jit
def _ragged_row(output_ptr, input_ptr, input_row_stride, output_row_stride, n_cols, row,
                BLOCK_SIZE: tl.constexpr, LOG: tl.constexpr, DT: tl.constexpr):
    """A row of any length whose input and output start equally far from a 16-byte boundary (equal
    strides: every row of a contiguous tensor): the 16-byte-aligned body held packed as words, the
    head before it and the tail after it (under 8 columns each) as elements."""
    start = row * input_row_stride
    head = (8 - start % 8) % 8  # columns up to the first 16-byte boundary
    head = tl.minimum(head, n_cols)
    body = (n_cols - head) // 8 * 8
    words = tl.max_contiguous(tl.multiple_of(tl.arange(0, BLOCK_SIZE // 2), 4), 4)
    mask = words < body // 2
    src_words = tl.multiple_of((start + head) // 2, 4)
    src = input_ptr.to(tl.pointer_type(tl.uint32), bitcast=True) + src_words
    if DT == tl.float16:  # words past the body read as two -inf
        packed = tl.load(src + words, mask=mask, other=0xFC00FC00)
    else:
        packed = tl.load(src + words, mask=mask, other=0xFF80FF80)
    # the head's and the tail's columns, 8 lanes each: lane j < 8 is column j, lane 8 + j column head + body + j
    lanes = tl.arange(0, 16)
    cols = tl.where(lanes < 8, lanes, head + body + lanes - 8)
    ends = tl.where(lanes < 8, lanes < head, cols < n_cols)
    x = tl.load(input_ptr + start + cols, mask=ends, other=-float("inf")).to(tl.float32)
    row_max = tl.maximum(words_max(packed, DT), tl.max(x, axis=0))
    ends_sum = tl.sum(tl.where(ends, exp2((x - row_max) * LOG2E), 0.0), axis=0)
    row_sum = words_sum(packed, row_max, DT) + ends_sum
    out_start = row * output_row_stride
    dst = output_ptr.to(tl.pointer_type(tl.uint32), bitcast=True) + tl.multiple_of((out_start + head) // 2, 4)
    tl.store(dst + words, normalized(packed, row_max, row_sum, LOG, DT), mask=mask)
    if LOG:
        y = (x - row_max) - tl.log(row_sum)
    else:
        y = exp2((x - row_max) * LOG2E) / row_sum
    tl.store(output_ptr + out_start + cols, y.to(DT), mask=ends)


DTYPES = ("fp16", "bf16")
OPS = {"softmax": 0, "log_softmax": 1}
# (BLOCK_SIZE, num_warps, maxnreg): 64 values per thread in 64 registers up to 32K columns (two programs
# per SM); a 64K row takes an SM's registers alone.
CONFIGS = [(16384, 8, 64), (32768, 16, 64), (65536, 16, 128), (16384, 8, 96), (32768, 16, 96)]
PLAIN = {(b, w): r for b, w, r in reversed(CONFIGS)}  # a larger budget than the first adds _r<maxnreg>


def get_function_table():
    table = []
    for op, log in OPS.items():
        for dtype in DTYPES:
            for block, warps, maxnreg in CONFIGS:
                table.append({
                    "name": f"{op}_packed_{dtype}_b{block}_w{warps}"
                            + ("" if PLAIN[block, warps] == maxnreg else f"_r{maxnreg}"),
                    "group": f"{op}_{dtype}",  # ORT's groups: the contract is softmax_triton.py's
                    "func": softmax_packed_kernel,
                    "sig": f"*{dtype}:16,*{dtype}:16,i32,i32,i32",
                    "kwargs": {"num_warps": warps, "maxnreg": maxnreg,
                               "constants": {"BLOCK_SIZE": block, "LOG": log}},
                })
    return table

