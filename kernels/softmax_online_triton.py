"""Softmax and log-softmax of rows too long for registers (beyond 16384 columns), one row per program.

Pass 1 streams the row in BLOCK_SIZE chunks keeping a running max and a running sum rescaled to it
(the online-softmax recurrence); pass 2 streams it again and writes. DRAM traffic is one write and
up to two reads; while a few hundred rows are in flight the second read is served from L2, so
rows up to a few hundred KB cost close to the 2 * n_cols * sizeof(dtype) minimum.

Grid (batch, 1, 1) and ORT's five arguments, but candidates require n_cols > BLOCK_SIZE, so they form
their own groups `softmax_online_<dtype>` rather than joining ORT's.
"""

import triton
import triton.language as tl


@triton.jit
def softmax_online_kernel(output_ptr, input_ptr, input_row_stride, output_row_stride, n_cols,
                          BLOCK_SIZE: tl.constexpr, LOG: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    in_row = input_ptr + row * input_row_stride
    out_row = output_ptr + row * output_row_stride
    cols = tl.arange(0, BLOCK_SIZE)
    m = tl.full([BLOCK_SIZE], -float("inf"), tl.float32)
    s = tl.zeros([BLOCK_SIZE], tl.float32)
    for start in range(0, n_cols, BLOCK_SIZE):
        x = tl.load(in_row + start + cols, mask=start + cols < n_cols, other=-float("inf")).to(tl.float32)
        m_new = tl.maximum(m, x)
        # A lane that has seen only -inf keeps s = 0 (avoid -inf - -inf = NaN).
        seen = m_new > -float("inf")
        s = tl.where(seen, s * tl.exp(m - m_new) + tl.exp(x - m_new), 0.0)
        m = m_new
    row_max = tl.max(m, axis=0)
    row_sum = tl.sum(tl.where(m > -float("inf"), s * tl.exp(m - row_max), 0.0), axis=0)
    log_sum = tl.log(row_sum)
    for start in range(0, n_cols, BLOCK_SIZE):
        mask = start + cols < n_cols
        x = tl.load(in_row + start + cols, mask=mask, other=-float("inf")).to(tl.float32)
        if LOG:
            y = x - row_max - log_sum
        else:
            y = tl.exp(x - row_max) / row_sum
        tl.store(out_row + start + cols, y.to(output_ptr.dtype.element_ty), mask=mask)


DTYPES = ("fp32", "fp16", "bf16")
OPS = {"softmax": 0, "log_softmax": 1}
CONFIGS = [(2048, 8), (4096, 8), (4096, 16), (8192, 16)]  # (BLOCK_SIZE, num_warps)


def get_function_table():
    table = []
    for op, log in OPS.items():
        for dtype in DTYPES:
            for block, warps in CONFIGS:
                table.append({
                    "name": f"{op}_online_{dtype}_b{block}_w{warps}",
                    "group": f"{op}_online_{dtype}",
                    "func": softmax_online_kernel,
                    "sig": f"*{dtype},*{dtype},i32,i32,i32",
                    "kwargs": {"num_warps": warps, "constants": {"BLOCK_SIZE": block, "LOG": log}},
                })
    return table


def get_launch_contracts():
    contract = {"params": ["out", "in", "in_stride", "out_stride", "n_cols"], "grid": ["batch", "1", "1"],
                "requires": ["n_cols > BLOCK_SIZE"], "doc": "one row per program, looped over BLOCK_SIZE chunks"}
    return {f"{op}_online_{dtype}": contract for op in OPS for dtype in DTYPES}
