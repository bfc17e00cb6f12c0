"""Softmax and log-softmax of a row streamed twice through one program: rows of any length.

Pass 1 streams the row in CHUNK-column pieces, keeping its max and the lane sums of exp rescaled to
it (the online-softmax recurrence, one exp per element); pass 2 streams it again, newest piece first,
and writes (kernels/_softmax_stream.py). DRAM traffic is one write and up to two reads: the first read
marks the row evict-last and the output goes out evict-first, so while the rows in flight fit in L2
the second read is served from there. A row no longer than CHUNK is read once.

Two uses of the same passes, ORT's five arguments and grid (batch, 1, 1):
- in ORT's groups `softmax_<dtype>` (and the runtime's `log_softmax_<dtype>`): rows longer than any
  register-held kernel takes. ORT compares BLOCK_SIZE with n_cols and nothing else, so BLOCK_SIZE is
  the longest row these kernels take (MAX_ROW); CHUNK is the piece. Rows whose n_cols and strides are
  multiples of 16 bytes move as 16-byte vectors (pointers 16-byte aligned: ORT's allocations are),
  the others as elements;
- `<op>_any_<dtype>`: any n_cols, strides and alignment: the runtime's correctness fallback for every
  shape.
"""

import triton
import triton.language as tl
from _softmax_row import is_aligned
from _softmax_stream import stream_stats, stream_write


@triton.jit
def _stream_row(output_ptr, input_ptr, input_row_stride, output_row_stride, n_cols, row,
                CHUNK: tl.constexpr, LOG: tl.constexpr):
    in_row = input_ptr + row * input_row_stride
    out_row = output_ptr + row * output_row_stride
    row_max, row_sum, last = stream_stats(in_row, n_cols, CHUNK)
    stream_write(out_row, in_row, n_cols, last, row_max, row_sum, LOG, CHUNK)


@triton.jit
def softmax_online_kernel(output_ptr, input_ptr, input_row_stride, output_row_stride, n_cols,
                          BLOCK_SIZE: tl.constexpr, LOG: tl.constexpr):
    """Any row, stride and alignment, in BLOCK_SIZE pieces."""
    row = tl.program_id(0).to(tl.int64)
    _stream_row(output_ptr, input_ptr, input_row_stride, output_row_stride, n_cols, row, BLOCK_SIZE, LOG)


@triton.jit
def softmax_stream_kernel(output_ptr, input_ptr, input_row_stride, output_row_stride, n_cols,
                          BLOCK_SIZE: tl.constexpr, CHUNK: tl.constexpr, LOG: tl.constexpr):
    """ORT's groups: rows up to BLOCK_SIZE (MAX_ROW) columns in CHUNK pieces, vectors when aligned."""
    VEC: tl.constexpr = 128 // input_ptr.dtype.element_ty.primitive_bitwidth  # elements in 16 bytes
    row = tl.program_id(0).to(tl.int64)
    if is_aligned(input_row_stride, output_row_stride, n_cols, VEC):
        _stream_row(output_ptr, input_ptr, input_row_stride // VEC * VEC, output_row_stride // VEC * VEC,
                    n_cols // VEC * VEC, row, CHUNK, LOG)
    else:
        _stream_row(output_ptr, input_ptr, input_row_stride, output_row_stride, n_cols, row, CHUNK, LOG)


DTYPES = ("fp32", "fp16", "bf16")  # the passes keep fp32 sums: fp64 rows stay with softmax_triton.py
OPS = {"softmax": 0, "log_softmax": 1}
MAX_ROW = 1 << 30  # the longest row a streamed kernel takes: ORT's BLOCK_SIZE test admits every row below
STREAM = [(4096, 8), (8192, 8)]  # (CHUNK, num_warps): 16 or 32 values per thread per piece
ANY = [(2048, 8)]  # (BLOCK_SIZE, num_warps)


def get_function_table():
    table = []
    for op, log in OPS.items():
        for dtype in DTYPES:
            for chunk, warps in STREAM:
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
