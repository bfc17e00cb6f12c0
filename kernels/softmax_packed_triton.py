"""Softmax and log-softmax of long 16-bit rows held packed in registers, one row per program.

A row of up to 64K fp16 / bf16 columns stays in registers as it was loaded, two values per 32-bit
word (kernels/_packed16.py), and each of the three passes (max, sum of exp, output) unpacks it again.
Half the registers of an fp32 copy: rows up to 32K fit in 64 registers per thread (`maxnreg`), so two
programs share an SM and one loads while the other reduces. Triton 3.9's code for these rows needs
more registers than that budget (it spills there), so the 16K and 32K pieces also come with a larger
one (`_r96`: one program per SM at 32K) and the tuner takes whichever is faster. Traffic is the
minimum, one read and one write: 2 * batch * n_cols * 2 bytes.

The packed path runs when n_cols and both strides are multiples of 16 (16-byte words and vectors);
any other row takes the plain path of kernels/_softmax_row.py, so the softmax kernels keep ORT's
contract whole and sit in ORT's own groups `softmax_<dtype>` (and `log_softmax_<dtype>`, the
runtime's): ORT's five arguments, grid (batch, 1, 1), a candidate when n_cols <= BLOCK_SIZE, pointers
16-byte aligned (every ORT allocation is). Inline PTX: CUDA only, so the ROCm build of those groups
has the portable kernels of softmax_triton.py alone.
"""

import triton
import triton.language as tl
from _packed16 import load_words, max_and_sum, normalized
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
    else:
        normalize_row(output_ptr, input_ptr, input_row_stride, output_row_stride, n_cols, row, BLOCK_SIZE, LOG)


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

