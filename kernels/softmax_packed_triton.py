"""Softmax and log-softmax of long 16-bit rows held packed in registers, one row per program.

A row of up to 64K fp16 / bf16 columns stays in registers as it was loaded, two values per 32-bit
word (kernels/_packed16.py), and each of the three passes (max, sum of exp, output) unpacks it again.
Half the registers of an fp32 copy: rows up to 32K fit in 64 registers per thread (`maxnreg`), so two
programs share an SM and one loads while the other reduces. Traffic is the minimum, one read and one
write: 2 * batch * n_cols * 2 bytes.

Group `<op>_packed_<dtype>`: ORT's five arguments and grid (batch, 1, 1); a candidate when
n_cols <= BLOCK_SIZE and n_cols and both strides are multiples of 16 with 16-byte aligned pointers
(words load as 16-byte vectors). Inline PTX: CUDA only.
"""

import triton
import triton.language as tl
from _packed16 import load_words, max_and_sum, normalized

PLATFORMS = ("cuda",)  # inline PTX


@triton.jit
def softmax_packed_kernel(output_ptr, input_ptr, input_row_stride, output_row_stride, n_cols,
                          BLOCK_SIZE: tl.constexpr, LOG: tl.constexpr):
    DT: tl.constexpr = input_ptr.dtype.element_ty
    row = tl.program_id(0).to(tl.int64)
    words = tl.max_contiguous(tl.multiple_of(tl.arange(0, BLOCK_SIZE // 2), 8), 8)  # word i: columns 2i, 2i+1
    mask = words < n_cols // 2
    packed = load_words(input_ptr, input_row_stride, row, words, mask, DT, "")
    row_max, row_sum = max_and_sum(packed, DT)
    dst = output_ptr.to(tl.pointer_type(tl.uint32), bitcast=True) + tl.multiple_of(row * (output_row_stride // 2), 8)
    tl.store(dst + words, normalized(packed, row_max, row_sum, LOG, DT), mask=mask)


DTYPES = ("fp16", "bf16")
OPS = {"softmax": 0, "log_softmax": 1}
# (BLOCK_SIZE, num_warps, maxnreg): 64 values per thread in 64 registers up to 32K columns (two programs
# per SM); a 64K row takes an SM's registers alone.
CONFIGS = [(16384, 8, 64), (32768, 16, 64), (65536, 16, 128)]


def get_function_table():
    table = []
    for op, log in OPS.items():
        for dtype in DTYPES:
            for block, warps, maxnreg in CONFIGS:
                table.append({
                    "name": f"{op}_packed_{dtype}_b{block}_w{warps}",
                    "group": f"{op}_packed_{dtype}",
                    "func": softmax_packed_kernel,
                    "sig": f"*{dtype}:16,*{dtype}:16,i32:16,i32:16,i32:16",
                    "kwargs": {"num_warps": warps, "maxnreg": maxnreg,
                               "constants": {"BLOCK_SIZE": block, "LOG": log}},
                })
    return table


def get_launch_contracts():
    contract = {
        "params": ["out", "in", "in_stride", "out_stride", "n_cols"],
        "grid": ["batch", "1", "1"],
        "requires": ["n_cols <= BLOCK_SIZE", "n_cols % 16 == 0 and in_stride % 16 == 0 and out_stride % 16 == 0"],
        "doc": "one row per program, held packed; 16-byte aligned pointers (checked at launch)",
    }
    return {f"{op}_packed_{dtype}": contract for op in OPS for dtype in DTYPES}
