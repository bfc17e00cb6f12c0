"""Softmax and log-softmax of long rows (16K to 1M columns), each row split across SPLIT programs.

A row longer than one SM's registers cannot stay on chip in one program, and streaming it twice
(the online kernel) reads it from DRAM twice once a few hundred such rows are in flight. Here SPLIT
programs (a team) each load one BLOCK_SIZE piece of the row into registers, publish the piece's
max and sum of exp to a workspace, wait for the rest of the team (kernels/_grid_sync.py), combine
the SPLIT partials and write their piece: DRAM traffic is the minimum, one read and one write,
2 * batch * n_cols * sizeof(dtype) bytes.

The grid is persistent: as many teams as fit on the device at once (`resident` programs, from the
occupancy of this kernel), each looping over rows, and the launch is cooperative so every member of
a team is guaranteed to run at the same time. Pointers, n_cols and strides must be multiples of 16
elements so loads are 16-byte vectors; other long rows go to the online kernel.
"""

import triton
import triton.language as tl
from _grid_sync import arrive_and_wait, depart


@triton.jit
def softmax_split_kernel(output_ptr, input_ptr, ws_ptr, input_row_stride, output_row_stride, n_cols, n_rows,
                         BLOCK_SIZE: tl.constexpr, SPLIT: tl.constexpr, LOG: tl.constexpr):
    part = tl.program_id(0) % SPLIT
    team = tl.program_id(0) // SPLIT
    teams = tl.num_programs(0) // SPLIT
    cols = part * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    members = tl.arange(0, SPLIT)
    # Workspace: per row an int32 counter alone on a 128-byte line (teams on neighbouring rows would
    # otherwise spin and count on one line, which L2 serialises), then per row SPLIT maxima and SPLIT
    # sums (fp32).
    partials = ws_ptr.to(tl.pointer_type(tl.float32), bitcast=True) + n_rows * 32
    for row in range(team, n_rows, teams):
        row64 = row.to(tl.int64)
        x = tl.load(input_ptr + row64 * input_row_stride + cols, mask=mask, other=-float("inf")).to(tl.float32)
        m = tl.max(x, axis=0)
        e = tl.exp(x - m)  # kept: the output is e rescaled, one exp per element in all
        # A piece past the row's end (or all -inf) contributes nothing, not exp(-inf - -inf) = NaN.
        s = tl.where(m > -float("inf"), tl.sum(e, axis=0), 0.0)
        mine = partials + row64 * (2 * SPLIT)
        tl.store(mine + part, m)
        tl.store(mine + SPLIT + part, s)
        arrive_and_wait(ws_ptr + row64 * 32, SPLIT)
        ms = tl.load(mine + members, volatile=True)
        ss = tl.load(mine + SPLIT + members, volatile=True)
        if depart(ws_ptr + row64 * 32, SPLIT):  # everyone has read the partials: leave the slot zeroed
            tl.store(mine + members, tl.zeros([SPLIT], tl.float32))
            tl.store(mine + SPLIT + members, tl.zeros([SPLIT], tl.float32))
            tl.atomic_xchg(ws_ptr + row64 * 32, 0)
        row_max = tl.max(ms, axis=0)
        row_sum = tl.sum(tl.where(ms > -float("inf"), ss * tl.exp(ms - row_max), 0.0), axis=0)
        if LOG:
            y = (x - row_max) - tl.log(row_sum)  # row_max + log(sum) would round away log(sum) at 1e30
        else:
            # An all -inf piece has e = NaN (-inf - -inf) and its outputs are 0.
            y = tl.where(m > -float("inf"), e * (tl.exp(m - row_max) / row_sum), 0.0)
        tl.store(output_ptr + row64 * output_row_stride + cols, y.to(output_ptr.dtype.element_ty), mask=mask)


DTYPES = ("fp32", "fp16", "bf16")
OPS = {"softmax": 0, "log_softmax": 1}
PIECES = [(2048, 4), (4096, 8), (8192, 8), (16384, 16)]  # (BLOCK_SIZE, num_warps): 16-32 values per thread
SPLITS = (2, 4, 8, 16, 32, 64)


def get_function_table():
    table = []
    for op, log in OPS.items():
        for dtype in DTYPES:
            sig = f"*{dtype}:16,*{dtype}:16,*i32:16,i32:16,i32:16,i32:16,i32"
            for block, warps in PIECES:
                for split in SPLITS:
                    table.append({
                        "name": f"{op}_split_{dtype}_b{block}_s{split}_w{warps}",
                        "group": f"{op}_split_{dtype}",
                        "func": softmax_split_kernel,
                        "sig": sig,
                        "kwargs": {"num_warps": warps,
                                   "constants": {"BLOCK_SIZE": block, "SPLIT": split, "LOG": log}},
                    })
    return table


def get_launch_contracts():
    contract = {
        "params": ["out", "in", "ws", "in_stride", "out_stride", "n_cols", "batch"],
        "grid": ["min(batch, resident // SPLIT) * SPLIT", "1", "1"],
        "requires": ["n_cols <= SPLIT * BLOCK_SIZE and 4 * n_cols > SPLIT * BLOCK_SIZE", "resident >= SPLIT",
                     "n_cols % 16 == 0 and in_stride % 16 == 0 and out_stride % 16 == 0"],
        "workspace": "4 * batch * (32 + 2 * SPLIT)",
        "cooperative": True,
        "doc": "SPLIT programs per row, persistent teams, cooperative launch; 16-byte aligned pointers",
    }
    return {f"{op}_split_{dtype}": contract for op in OPS for dtype in DTYPES}
