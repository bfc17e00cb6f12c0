"""Softmax and log-softmax of long rows (16K to 256K columns) held in the registers of a thread-block
cluster: one row per cluster of SPLIT programs (sm_90+), each holding one BLOCK_SIZE piece of it.

The SPLIT pieces of a row load at once; each member reduces its piece to (max, sum of exp(x - max)),
the members swap those pairs through their shared memories (kernels/_cluster.py), and each combines
the SPLIT pairs in rank order, so all of them scale by the same bits, then writes its piece. Traffic
is the minimum, 2 * batch * n_cols * sizeof(dtype) bytes, with no workspace; launches are plain (not
cooperative): the hardware schedules a cluster's programs together. 16-bit pieces stay packed two to
a word (kernels/_packed16.py). Clusters of 16 are not portable: the runtime allows them on the function.

Group `<op>_cluster_<dtype>`: ORT's five arguments, grid (batch * SPLIT, 1, 1) launched in clusters of
(SPLIT, 1, 1), which the launch must carry (ORT's launcher does not); a candidate when
SPLIT * BLOCK_SIZE / 2 < n_cols <= SPLIT * BLOCK_SIZE, and n_cols and the strides are multiples of 16
elements with 16-byte aligned pointers. Inline PTX: CUDA only, sm_90+.
"""

import triton
import triton.language as tl
from _cluster import cluster_max_sum, cluster_start
from _packed16 import LOG2E, exp2, load_words, max_and_sum, normalized

PLATFORMS = ("cuda",)  # inline PTX
MIN_SM = 90  # thread-block clusters and distributed shared memory


@triton.jit
def softmax_cluster_kernel(output_ptr, input_ptr, input_row_stride, output_row_stride, n_cols,
                           BLOCK_SIZE: tl.constexpr, SPLIT: tl.constexpr, LOG: tl.constexpr):
    cluster_start(SPLIT)
    DT: tl.constexpr = input_ptr.dtype.element_ty
    row = (tl.program_id(0) // SPLIT).to(tl.int64)
    part = tl.program_id(0) % SPLIT  # the rank in the cluster: clusters run along x
    if DT == tl.float32:
        cols = part * BLOCK_SIZE + tl.max_contiguous(tl.multiple_of(tl.arange(0, BLOCK_SIZE), 16), 16)
        mask = cols < n_cols
        x = tl.load(input_ptr + row * input_row_stride + cols, mask=mask, other=-float("inf"))
        m = tl.max(x, axis=0)
        s = tl.where(m > -float("inf"), tl.sum(exp2((x - m) * LOG2E), axis=0), 0.0)
        row_max, row_sum = cluster_max_sum(m, s, SPLIT)
        if LOG:
            y = (x - row_max) - tl.log(row_sum)  # row_max + log(sum) would round the log away at 1e30
        else:
            y = exp2((x - row_max) * LOG2E) * (1.0 / row_sum)
        tl.store(output_ptr + row * output_row_stride + cols, y, mask=mask)
    else:
        half: tl.constexpr = BLOCK_SIZE // 2
        words = part * half + tl.max_contiguous(tl.multiple_of(tl.arange(0, half), 8), 8)  # columns 2i, 2i+1
        mask = words < n_cols // 2
        packed = load_words(input_ptr, input_row_stride, row, words, mask, DT, "")
        m, s = max_and_sum(packed, DT)
        row_max, row_sum = cluster_max_sum(m, s, SPLIT)
        dst = output_ptr.to(tl.pointer_type(tl.uint32), bitcast=True) + tl.multiple_of(row * (output_row_stride // 2),
                                                                                      8)
        tl.store(dst + words, normalized(packed, row_max, row_sum, LOG, DT), mask=mask)


OPS = {"softmax": 0, "log_softmax": 1}
# A member's piece and the cluster: (BLOCK_SIZE, num_warps, maxnreg, SPLIT), each member holding 64 or 128
# values per thread (16-bit: packed words). Each dtype's shapes cover 16K to 256K columns; the larger
# clusters of smaller pieces are the fastest for a few long rows (more SMs per row).
WIDE = [(8192, 4, 80, 2), (8192, 4, 80, 4), (8192, 4, 80, 8), (8192, 4, 80, 16), (16384, 8, 80, 8),
        (16384, 8, 80, 16), (32768, 8, 128, 4), (32768, 8, 128, 8),
        (8192, 4, 112, 2), (8192, 4, 112, 4), (8192, 4, 112, 8), (8192, 4, 112, 16), (16384, 8, 112, 8),
        (16384, 8, 112, 16), (32768, 8, 192, 4), (32768, 8, 192, 8)]
# The first register budget of each piece, the one it was sized for, names it plainly; a larger one
# (what Triton 3.9's code for the packed 16-bit pieces needs not to spill) adds _r<maxnreg>.
PLAIN = {(b, w): r for b, w, r, _ in reversed(WIDE)}
MEMBERS = {
    "fp16": WIDE,
    "bf16": WIDE,
    "fp32": [(8192, 8, 64, 4), (8192, 8, 64, 8), (16384, 16, 64, 8), (16384, 8, 128, 16)],
}


def get_function_table():
    table = []
    for op, log in OPS.items():
        for dtype, members in MEMBERS.items():
            for block, warps, maxnreg, split in members:
                table.append({
                    "name": f"{op}_cluster_{dtype}_b{block}_s{split}_w{warps}"
                            + ("" if dtype == "fp32" or PLAIN[block, warps] == maxnreg else f"_r{maxnreg}"),
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
