"""Softmax and log-softmax of several rows per program, for short and medium rows.

With one row per program, a 2048-wide fp16 row is 4 KB: too little work to hide one reduction's
latency, so short rows run far below memory bandwidth. Here a program owns a ROWS x BLOCK_SIZE tile
and reduces along axis 1, so each program moves ROWS times more bytes per reduction. Traffic is still
the minimum: 2 * batch * n_cols * sizeof(dtype) bytes (one read, one write).

Two families, both launched with grid (cdiv(batch, ROWS), 1, 1) and the row count as an extra
argument, so they are outside ORT's softmax contract and live in their own groups:
- `softmax_rows_<dtype>`: any strides and row length;
- `softmax_rows_aligned_<dtype>`: pointers 16-byte aligned and n_cols, strides multiples of 16, which
  lets Triton issue 16-byte vector loads; ROWS = 1 here is the vectorised one-row kernel, up to
  65536 columns held in registers (128 fp32 values per thread at 16 warps).
"""

import triton
import triton.language as tl


@triton.jit
def softmax_rows_kernel(output_ptr, input_ptr, input_row_stride, output_row_stride, n_cols, n_rows,
                        BLOCK_SIZE: tl.constexpr, ROWS: tl.constexpr, LOG: tl.constexpr):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = (rows < n_rows)[:, None] & (cols < n_cols)[None, :]
    rows64 = rows.to(tl.int64)[:, None]
    x = tl.load(input_ptr + rows64 * input_row_stride + cols[None, :], mask=mask, other=-float("inf"))
    x = x.to(tl.float32)
    shifted = x - tl.max(x, axis=1)[:, None]
    numerator = tl.exp(shifted)
    denominator = tl.sum(numerator, axis=1)[:, None]
    if LOG:
        y = shifted - tl.log(denominator)
    else:
        y = numerator / denominator
    tl.store(output_ptr + rows64 * output_row_stride + cols[None, :], y.to(output_ptr.dtype.element_ty), mask=mask)


DTYPES = ("fp32", "fp16", "bf16")
OPS = {"softmax": 0, "log_softmax": 1}
MAX_TILE = 16384  # elements per program held in registers (fp32 maths)


def num_warps(tile: int) -> int:
    """About 512 elements per warp (16 per thread), between 1 and 16 warps."""
    return max(1, min(16, tile // 512))


def configs(aligned: bool):
    """(BLOCK_SIZE, ROWS, num_warps) of one family: each tile gets its natural warp count and twice it."""
    blocks = [64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536] if aligned else \
             [32, 64, 128, 256, 512, 1024, 2048]
    rows = (1, 2, 4, 8) if aligned else (2, 4, 8)
    out = []
    for block in blocks:
        for r in rows:
            tile = block * r
            if tile > MAX_TILE and not (aligned and r == 1):
                continue
            base = num_warps(tile)
            for w in sorted({base, min(16, base * 2)}):
                out.append((block, r, w))
    return out


def get_function_table():
    table = []
    for op, log in OPS.items():
        for dtype in DTYPES:
            for aligned in (False, True):
                family = "rows_aligned" if aligned else "rows"
                hint = ":16" if aligned else ""
                sig = f"*{dtype}{hint},*{dtype}{hint},i32{hint},i32{hint},i32{hint},i32"
                for block, rows, warps in configs(aligned):
                    table.append({
                        "name": f"{op}_{family}_{dtype}_b{block}_r{rows}_w{warps}",
                        "group": f"{op}_{family}_{dtype}",
                        "func": softmax_rows_kernel,
                        "sig": sig,
                        "kwargs": {"num_warps": warps,
                                   "constants": {"BLOCK_SIZE": block, "ROWS": rows, "LOG": log}},
                    })
    return table


def get_launch_contracts():
    out = {}
    for op in OPS:
        for dtype in DTYPES:
            base = {"params": ["out", "in", "in_stride", "out_stride", "n_cols", "batch"],
                    "grid": ["cdiv(batch, ROWS)", "1", "1"]}
            out[f"{op}_rows_{dtype}"] = {**base, "requires": ["n_cols <= BLOCK_SIZE"],
                                         "doc": "ROWS rows per program; strides in elements"}
            out[f"{op}_rows_aligned_{dtype}"] = {
                **base,
                "requires": ["n_cols <= BLOCK_SIZE",
                             "n_cols % 16 == 0 and in_stride % 16 == 0 and out_stride % 16 == 0"],
                "doc": "as rows, plus 16-byte aligned pointers (checked at launch)"}
    return out
