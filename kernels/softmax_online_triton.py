"""Softmax and log-softmax of rows too long for registers (beyond 16384 columns), one row per program.

Pass 1 streams the row in BLOCK_SIZE chunks, keeping its max and the lane sums of exp rescaled to
it (the online-softmax recurrence, one exp per element); pass 2 streams it again, newest chunk
first, and writes (kernels/_softmax_parts.py). DRAM traffic is one write and up to two reads: the
first read marks the row evict-last and the output goes out evict-first, so while the rows in
flight fit in L2 (a few hundred 128 KB rows on an H200) the second read is served from there and
traffic is close to the 2 * n_cols * sizeof(dtype) minimum.

Grid (batch, 1, 1) and ORT's five arguments, but candidates require n_cols > BLOCK_SIZE, so they form
their own groups: `softmax_online_<dtype>` takes any row, `softmax_online_aligned_<dtype>` wants
16-byte aligned pointers and n_cols, strides multiples of 16 (16-byte vector loads).
"""

import triton
import triton.language as tl
from _softmax_parts import stream_stats, stream_write


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
CONFIGS = [(2048, 8), (4096, 8), (4096, 16), (8192, 16)]  # (BLOCK_SIZE, num_warps)
ALIGNED = [(4096, 8), (8192, 8), (8192, 16), (16384, 16)]  # 16-32 values per thread


def get_function_table():
    table = []
    for op, log in OPS.items():
        for dtype in DTYPES:
            for aligned, configs in ((False, CONFIGS), (True, ALIGNED)):
                family = "online_aligned" if aligned else "online"
                hint = ":16" if aligned else ""
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
    contract = {"params": ["out", "in", "in_stride", "out_stride", "n_cols"], "grid": ["batch", "1", "1"],
                "requires": ["n_cols > BLOCK_SIZE"], "doc": "one row per program, streamed twice in BLOCK_SIZE chunks"}
    aligned = {**contract,
               "requires": ["n_cols > BLOCK_SIZE", "n_cols % 16 == 0 and in_stride % 16 == 0 and out_stride % 16 == 0"],
               "doc": contract["doc"] + "; 16-byte aligned pointers (checked at launch)"}
    out = {}
    for op in OPS:
        for dtype in DTYPES:
            out[f"{op}_online_{dtype}"] = contract
            out[f"{op}_online_aligned_{dtype}"] = aligned
    return out
