"""Softmax and log-softmax of several rows per program, for short and medium rows.

With one row per program a short row is too little work to hide one reduction's latency. Here a
program owns a ROWS x BLOCK_SIZE tile and reduces along axis 1, so each reduction covers ROWS rows'
bytes; ROWS = 1 is the one-row kernel with 16-byte vector loads. Traffic is the minimum,
2 * batch * n_cols * sizeof(dtype) bytes (one read, one write).

Group `<op>_rows_<dtype>`: ORT's five arguments plus the row count, grid (cdiv(batch, ROWS), 1, 1); a
candidate when n_cols <= BLOCK_SIZE and n_cols and both strides are multiples of 16 with 16-byte
aligned pointers. Log-softmax, which ORT never launches, keeps the one-row shapes.
"""

from _softmax_tile import softmax_rows_kernel

DTYPES = ("fp32", "fp16", "bf16")
OPS = {"softmax": 0, "log_softmax": 1}
# (BLOCK_SIZE, ROWS, num_warps): the tile shapes that are the fastest somewhere on the benchmark grids.
CONFIGS = [(64, 2, 1), (64, 8, 2), (128, 2, 1), (128, 8, 2), (128, 8, 4), (256, 2, 1), (256, 4, 2), (256, 4, 4),
           (256, 8, 4), (512, 4, 4), (1024, 1, 2), (1024, 1, 4), (1024, 2, 4), (2048, 1, 4), (2048, 1, 8),
           (2048, 2, 16), (4096, 1, 8), (4096, 1, 16), (4096, 2, 16), (8192, 1, 16), (16384, 1, 16)]


def get_function_table():
    table = []
    for op, log in OPS.items():
        for dtype in DTYPES:
            for block, rows, warps in CONFIGS if not log else [c for c in CONFIGS if c[1] == 1]:
                table.append({
                    "name": f"{op}_rows_{dtype}_b{block}_r{rows}_w{warps}",
                    "group": f"{op}_rows_{dtype}",
                    "func": softmax_rows_kernel,
                    "sig": f"*{dtype}:16,*{dtype}:16,i32:16,i32:16,i32:16,i32",
                    "kwargs": {"num_warps": warps, "constants": {"BLOCK_SIZE": block, "ROWS": rows, "LOG": log}},
                })
    return table


def get_launch_contracts():
    contract = {"params": ["out", "in", "in_stride", "out_stride", "n_cols", "batch"],
                "grid": ["cdiv(batch, ROWS)", "1", "1"],
                "requires": ["n_cols <= BLOCK_SIZE",
                             "n_cols % 16 == 0 and in_stride % 16 == 0 and out_stride % 16 == 0"],
                "doc": "ROWS rows per program; 16-byte aligned pointers (checked at launch)"}
    return {f"{op}_rows_{dtype}": contract for op in OPS for dtype in DTYPES}
