"""Softmax and log-softmax of short rows of any length, many rows per program.

Text-encoder attention rows (77 tokens) and ViT rows (197 patches) are neither a multiple of 16 nor
long: one row per program is too little work and the aligned kernels (softmax_rows_triton.py) do not
take them. Here the tile kernel of kernels/_softmax_tile.py runs without the multiple-of-16
specialisation, so loads are per element, with 2 to 32 rows per program on 1 to 8 warps. Traffic is
the minimum, one read and one write of the rows.

Group `<op>_short_<dtype>`: ORT's five arguments plus the row count, grid (cdiv(batch, ROWS), 1, 1); a
candidate when the row fits BLOCK_SIZE and fills more than half of it; any strides, 16-byte aligned
pointers.
"""

from _softmax_tile import softmax_rows_kernel

DTYPES = ("fp32", "fp16", "bf16")
OPS = {"softmax": 0, "log_softmax": 1}
# (BLOCK_SIZE, ROWS, num_warps)
# One-warp programs of 2-8 rows are the fastest on most 77- and 197-column rows: many small programs per SM
# keep the most loads in flight while others reduce.
CONFIGS = [(64, 16, 2), (64, 32, 4), (128, 4, 1), (128, 8, 1), (128, 8, 4), (128, 16, 2), (128, 16, 4), (128, 32, 8),
           (256, 2, 1), (256, 8, 1), (256, 4, 2), (256, 4, 4), (256, 8, 4), (256, 16, 8), (512, 4, 4), (512, 8, 8)]


def get_function_table():
    return [{"name": f"{op}_short_{dtype}_b{block}_r{rows}_w{warps}", "group": f"{op}_short_{dtype}",
             "func": softmax_rows_kernel, "sig": f"*{dtype}:16,*{dtype}:16,i32,i32,i32,i32",
             "kwargs": {"num_warps": warps, "constants": {"BLOCK_SIZE": block, "ROWS": rows, "LOG": log}}}
            for op, log in OPS.items() for dtype in DTYPES for block, rows, warps in CONFIGS]


def get_launch_contracts():
    contract = {"params": ["out", "in", "in_stride", "out_stride", "n_cols", "batch"],
                "grid": ["cdiv(batch, ROWS)", "1", "1"],
                "requires": ["n_cols <= BLOCK_SIZE", "2 * n_cols > BLOCK_SIZE"],
                "doc": "ROWS short rows of any length per program, loaded element by element"}
    return {f"{op}_short_{dtype}": contract for op in OPS for dtype in DTYPES}
