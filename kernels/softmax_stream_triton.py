"""Softmax and log-softmax of a row streamed twice through one program: rows of any length.

Pass 1 streams the row in BLOCK_SIZE chunks, keeping its max and the lane sums of exp rescaled to it
(the online-softmax recurrence, one exp per element); pass 2 streams it again, newest chunk first,
and writes (kernels/_softmax_stream.py). DRAM traffic is one write and up to two reads: the first read
marks the row evict-last and the output goes out evict-first, so while the rows in flight fit in L2
the second read is served from there. A row no longer than BLOCK_SIZE is read once.

Two groups of the same kernel, ORT's five arguments and grid (batch, 1, 1):
- `<op>_stream_<dtype>`: rows longer than BLOCK_SIZE whose n_cols and strides are multiples of 16
  with 16-byte aligned pointers (16-byte vector loads): long rows where clusters are not available
  (sm_80) or not the fastest;
- `<op>_any_<dtype>`: any n_cols, strides and alignment: the correctness fallback for every shape.
"""

import triton
import triton.language as tl
from _softmax_stream import stream_stats, stream_write


@triton.jit
def softmax_online_kernel(output_ptr, input_ptr, input_row_stride, output_row_stride, n_cols,
                          BLOCK_SIZE: tl.constexpr, LOG: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    in_row = input_ptr + row * input_row_stride
    out_row = output_ptr + row * output_row_stride
    row_max, row_sum, last = stream_stats(in_row, n_cols, BLOCK_SIZE)
    stream_write(out_row, in_row, n_cols, last, row_max, row_sum, LOG, BLOCK_SIZE)


DTYPES = ("fp32", "fp16", "bf16")
OPS = {"softmax": 0, "log_softmax": 1}
STREAM = [(4096, 8), (8192, 8)]  # (BLOCK_SIZE, num_warps): 16 or 32 values per thread per chunk
ANY = [(2048, 8)]


def get_function_table():
    table = []
    for op, log in OPS.items():
        for dtype in DTYPES:
            for family, configs, hint in (("stream", STREAM, ":16"), ("any", ANY, "")):
                for block, warps in configs:
                    table.append({
                        "name": f"{op}_{family}_{dtype}_b{block}_w{warps}",
                        "group": f"{op}_{family}_{dtype}",
                        "func": softmax_online_kernel,
                        "sig": f"*{dtype}{hint},*{dtype}{hint},i32{hint},i32{hint},i32{hint}",
                        "kwargs": {"num_warps": warps, "constants": {"BLOCK_SIZE": block, "LOG": log}},
                    })
    return table


def get_launch_contracts():
    stream = {"params": ["out", "in", "in_stride", "out_stride", "n_cols"], "grid": ["batch", "1", "1"],
              "requires": ["n_cols > BLOCK_SIZE",
                           "n_cols % 16 == 0 and in_stride % 16 == 0 and out_stride % 16 == 0"],
              "doc": "one row per program, streamed twice in BLOCK_SIZE chunks; 16-byte aligned pointers "
                     "(checked at launch)"}
    any_shape = {**stream, "requires": ["n_cols >= 1"], "fallback": True,
                 "doc": "one row per program, streamed twice in BLOCK_SIZE chunks; any row, stride and alignment"}
    out = {}
    for op in OPS:
        for dtype in DTYPES:
            out[f"{op}_stream_{dtype}"] = stream
            out[f"{op}_any_{dtype}"] = any_shape
    return out
