"""Softmax and log-softmax of a row streamed twice through one program: rows of any length.

Pass 1 streams the row in CHUNK-column pieces for its max and sum of exp, keeping them per 16-byte
vector slot so no barrier sits inside the loop; pass 2 streams it again, newest piece first, and writes
(kernels/_softmax_stream.py). DRAM traffic is one write and up to two reads: the first read marks the
row evict-last and the output goes out evict-first, so while the rows in flight fit in L2 the second
read is served from there. A program keeps CHUNK columns in flight: one program per row must fill an
SM's memory pipeline alone when there are fewer rows than SMs (a decoding step's vocabulary row).

A row whose input and output lie equally far from a 16-byte boundary (equal strides: every row of a
contiguous tensor, whatever its length: GPT-2's 50257 columns, XLM-R's 250002) streams its aligned body
as 16-byte vectors and takes the columns before and after it (under 16 bytes each) as elements; any
other row streams as elements.

Two uses of the same passes, ORT's five arguments and grid (batch, 1, 1):
- in ORT's groups `softmax_<dtype>` (and the runtime's `log_softmax_<dtype>`): rows longer than any
  register-held kernel takes. ORT compares BLOCK_SIZE with n_cols and nothing else, so BLOCK_SIZE is
  the longest row these kernels take (MAX_ROW); CHUNK is the piece. Pointers 16-byte aligned (ORT's
  allocations are);
- `<op>_any_<dtype>`: any n_cols, strides and alignment: the runtime's correctness fallback for every
  shape.
"""

import triton
import triton.language as tl
from _softmax_stream import fold, normalized, stream_stats, stream_write


@triton.jit
def _stream_row(output_ptr, input_ptr, n_cols, CHUNK: tl.constexpr, VEC: tl.constexpr, LOG: tl.constexpr):
    row_max, row_sum = stream_stats(input_ptr, n_cols, CHUNK, VEC)
    stream_write(output_ptr, input_ptr, n_cols, row_max, row_sum, LOG, CHUNK)


@triton.jit
def _split_row(output_ptr, input_ptr, input_row_stride, output_row_stride, n_cols, row,
               CHUNK: tl.constexpr, VEC: tl.constexpr, LOG: tl.constexpr):
    """A row whose input and output start equally far from a 16-byte boundary: the aligned body in
    16-byte vectors, the head before it and the tail after it (under VEC columns each) as elements."""
    start = row * input_row_stride
    out_start = row * output_row_stride
    head = tl.minimum((VEC - start % VEC) % VEC, n_cols)
    body = (n_cols - head) // VEC * VEC
    src = input_ptr + tl.multiple_of(start + head, VEC)
    dst = output_ptr + tl.multiple_of(out_start + head, VEC)  # equal offsets: aligned too
    row_max, row_sum = stream_stats(src, body, CHUNK, VEC)
    # the ends, VEC lanes each: lane j < VEC is column j, lane VEC + j column head + body + j
    lanes = tl.arange(0, 2 * VEC)
    cols = tl.where(lanes < VEC, lanes, head + body + lanes - VEC)
    ends = tl.where(lanes < VEC, lanes < head, cols < n_cols)
    x = tl.load(input_ptr + start + cols, mask=ends, other=-float("inf")).to(tl.float32)
    row_max, row_sum = fold(row_max, row_sum, x)
    stream_write(dst, src, body, row_max, row_sum, LOG, CHUNK)
    tl.store(output_ptr + out_start + cols, normalized(x, row_max, row_sum, LOG).to(output_ptr.dtype.element_ty),
             mask=ends)


@triton.jit
def softmax_online_kernel(output_ptr, input_ptr, input_row_stride, output_row_stride, n_cols,
                          BLOCK_SIZE: tl.constexpr, LOG: tl.constexpr):
    """Any row, stride and alignment, in BLOCK_SIZE pieces."""
    VEC: tl.constexpr = 128 // input_ptr.dtype.element_ty.primitive_bitwidth
    row = tl.program_id(0).to(tl.int64)
    _stream_row(output_ptr + row * output_row_stride, input_ptr + row * input_row_stride, n_cols,
                BLOCK_SIZE, VEC, LOG)


@triton.jit
def softmax_stream_kernel(output_ptr, input_ptr, input_row_stride, output_row_stride, n_cols,
                          BLOCK_SIZE: tl.constexpr, CHUNK: tl.constexpr, LOG: tl.constexpr):
    """ORT's groups: rows up to BLOCK_SIZE (MAX_ROW) columns in CHUNK pieces, vectors when aligned."""
    VEC: tl.constexpr = 128 // input_ptr.dtype.element_ty.primitive_bitwidth  # elements in 16 bytes
    row = tl.program_id(0).to(tl.int64)
    if (input_row_stride - output_row_stride) % VEC == 0:
        _split_row(output_ptr, input_ptr, input_row_stride, output_row_stride, n_cols, row, CHUNK, VEC, LOG)
    else:
        _stream_row(output_ptr + row * output_row_stride, input_ptr + row * input_row_stride, n_cols,
                    CHUNK, VEC, LOG)


DTYPES = ("fp32", "fp16", "bf16")  # the passes keep fp32 sums: fp64 rows stay with softmax_triton.py
OPS = {"softmax": 0, "log_softmax": 1}
MAX_ROW = 1 << 30  # the longest row a streamed kernel takes: ORT's BLOCK_SIZE test admits every row below
# (piece in bytes, num_warps): 32 to 128 bytes per thread in flight; the largest pieces feed one SM alone
# (a few long rows), the smallest leave room for two programs per SM (many rows). 16 warps: wave64's most.
STREAM = [(16384, 8), (32768, 16), (65536, 16)]
BYTES = {"fp32": 4, "fp16": 2, "bf16": 2}
ANY = [(2048, 8)]  # (BLOCK_SIZE, num_warps)


def get_function_table():
    table = []
    for op, log in OPS.items():
        for dtype in DTYPES:
            for piece, warps in STREAM:
                chunk = piece // BYTES[dtype]
                table.append({
                    "name": f"{op}_stream_{dtype}_c{chunk}_w{warps}",
                    "group": f"{op}_{dtype}",  # ORT's: the contract is softmax_triton.py's
                    "func": softmax_stream_kernel,
                    "sig": f"*{dtype}:16,*{dtype}:16,i32,i32,i32",
                    "kwargs": {"num_warps": warps,
                               "constants": {"BLOCK_SIZE": MAX_ROW, "CHUNK": chunk, "LOG": log}},
                })
            for block, warps in ANY:
                table.append({
                    "name": f"{op}_any_{dtype}_b{block}_w{warps}",
                    "group": f"{op}_any_{dtype}",
                    "func": softmax_online_kernel,
                    "sig": f"*{dtype},*{dtype},i32,i32,i32",
                    "kwargs": {"num_warps": warps, "constants": {"BLOCK_SIZE": block, "LOG": log}},
                })
    return table


def get_launch_contracts():
    any_shape = {"params": ["out", "in", "in_stride", "out_stride", "n_cols"], "grid": ["batch", "1", "1"],
                 "requires": ["n_cols >= 1"], "fallback": True,
                 "doc": "one row per program, streamed twice in BLOCK_SIZE chunks; any row, stride and alignment"}
    return {f"{op}_any_{dtype}": any_shape for op in OPS for dtype in DTYPES}
