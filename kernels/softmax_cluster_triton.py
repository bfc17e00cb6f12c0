"""Softmax and log-softmax of long rows (16K to 512K columns) held in the registers of a thread-block
cluster: one row per cluster of SPLIT programs (sm_90+), each holding one BLOCK_SIZE piece of it.

A row of 64K-256K columns is more than one SM's registers can hold well. Streamed twice from one
program (softmax_packed_online) or split across a cooperative team that meets in global memory
(softmax_split), it reached 60-73% of an H200's copy bandwidth: the second pass reads DRAM again once
a few hundred rows are in flight, and the team's meeting through L2 costs microseconds per row during
which the team's SMs load nothing. Here the SPLIT pieces of a row load at once, each member reduces
its piece to (max, sum of exp(x - max)), and the members swap those pairs through their shared memories
(kernels/_cluster.py: st.async into each member's mailbox, well under a microsecond). Each member then
combines the SPLIT pairs in rank order, so all of them scale by the same bits, and writes its piece.
DRAM traffic is the minimum: 2 * batch * n_cols * sizeof(dtype) bytes, and no workspace. Launches are
plain (not cooperative): the hardware schedules each cluster's programs together, and a cluster that
finishes makes room for the next row.

16-bit rows stay packed two to a 32-bit word, with the per-element PTX of kernels/softmax_packed_triton.py:
a 16K-column piece is 64 values per thread of 8 warps in 80 registers, so three members share an SM and
some load while others reduce or wait for their cluster (a 32K piece: 128 values in 128 registers, two
per SM). fp32 rows of 256K columns are fastest in clusters of 16 programs, a size the H100 and H200
launch but that is not portable (the runtime asks for it).

Group `<op>_cluster_<dtype>`: grid (batch * SPLIT, 1, 1) launched in clusters of (SPLIT, 1, 1), which
the launch must carry (runtime/cuda.py); rows whose n_cols and strides are multiples of 16 elements
(16-byte vectors). Inline PTX: CUDA only, sm_90+.
"""

import triton
import triton.language as tl
from _cluster import _cluster_max_sum, _cluster_start
from softmax_packed_triton import LOG2E, _exp2, _load_words, _max_and_sum, _normalized

PLATFORMS = ("cuda",)  # inline PTX
MIN_SM = 90  # thread-block clusters and distributed shared memory


@triton.jit
def softmax_cluster_kernel(output_ptr, input_ptr, input_row_stride, output_row_stride, n_cols,
                           BLOCK_SIZE: tl.constexpr, SPLIT: tl.constexpr, LOG: tl.constexpr):
    _cluster_start(SPLIT)
    DT: tl.constexpr = input_ptr.dtype.element_ty
    row = (tl.program_id(0) // SPLIT).to(tl.int64)
    part = tl.program_id(0) % SPLIT  # the rank in the cluster: clusters run along x
    if DT == tl.float32:
        cols = part * BLOCK_SIZE + tl.max_contiguous(tl.multiple_of(tl.arange(0, BLOCK_SIZE), 16), 16)
        mask = cols < n_cols
        x = tl.load(input_ptr + row * input_row_stride + cols, mask=mask, other=-float("inf"))
        m = tl.max(x, axis=0)
        s = tl.where(m > -float("inf"), tl.sum(_exp2((x - m) * LOG2E), axis=0), 0.0)
        row_max, row_sum = _cluster_max_sum(m, s, SPLIT)
        if LOG:
            y = (x - row_max) - tl.log(row_sum)  # row_max + log(sum) would round the log away at 1e30
        else:
            y = _exp2((x - row_max) * LOG2E) * (1.0 / row_sum)
        tl.store(output_ptr + row * output_row_stride + cols, y, mask=mask)
    else:
        half: tl.constexpr = BLOCK_SIZE // 2
        words = part * half + tl.max_contiguous(tl.multiple_of(tl.arange(0, half), 8), 8)  # columns 2i, 2i+1
        mask = words < n_cols // 2
        packed = _load_words(input_ptr, input_row_stride, row, words, mask, DT, "")
        m, s = _max_and_sum(packed, DT)
        row_max, row_sum = _cluster_max_sum(m, s, SPLIT)
        dst = output_ptr.to(tl.pointer_type(tl.uint32), bitcast=True) + tl.multiple_of(row * (output_row_stride // 2),
                                                                                      8)
        tl.store(dst + words, _normalized(packed, row_max, row_sum, LOG, DT), mask=mask)


OPS = {"softmax": 0, "log_softmax": 1}
# A member's piece: (BLOCK_SIZE, num_warps, maxnreg), chosen on an H200 (softmax_bench --candidates,
# benchmarks/results/softmax_long_rows_h200.log). 16-bit pieces spill at 64 registers: 64 values per
# thread in 80 registers (three members per SM) or 128 in 128 (two per SM) win; at 64 registers they
# take 3-14% longer, and at one member per SM 43-62% longer.
MEMBERS = {
    "fp16": [(8192, 4, 80), (16384, 8, 80), (32768, 8, 128)],
    "bf16": [(8192, 4, 80), (16384, 8, 80), (32768, 8, 128)],
    "fp32": [(8192, 8, 64), (16384, 16, 64), (16384, 8, 128), (32768, 16, 128)],
}
SPLITS = (2, 4, 8, 16)  # 16: a non-portable cluster size, which the H100 and H200 launch


def get_function_table():
    table = []
    for op, log in OPS.items():
        for dtype, members in MEMBERS.items():
            for block, warps, maxnreg in members:
                for split in SPLITS:
                    table.append({
                        "name": f"{op}_cluster_{dtype}_b{block}_s{split}_w{warps}",
                        "group": f"{op}_cluster_{dtype}",
                        "func": softmax_cluster_kernel,
                        "sig": f"*{dtype}:16,*{dtype}:16,i32:16,i32:16,i32:16",
                        "kwargs": {"num_warps": warps, "maxnreg": maxnreg,
                                   "constants": {"BLOCK_SIZE": block, "SPLIT": split, "LOG": log}},
                    })
    return table


def get_launch_contracts():
    contract = {
        "params": ["out", "in", "in_stride", "out_stride", "n_cols"],
        "grid": ["batch * SPLIT", "1", "1"],
        "cluster": ["SPLIT", "1", "1"],
        "requires": ["n_cols <= SPLIT * BLOCK_SIZE and 2 * n_cols > SPLIT * BLOCK_SIZE",
                     "n_cols % 16 == 0 and in_stride % 16 == 0 and out_stride % 16 == 0"],
        "doc": "one row per cluster of SPLIT programs, each holding BLOCK_SIZE columns, (max, sum) pairs swapped "
               "in shared memory; 16-byte aligned pointers",
    }
    return {f"{op}_cluster_{dtype}": contract for op in OPS for dtype in MEMBERS}
