"""Two token streams joined on their sequence axis, each with its Linear's bias added, in one pass.

SD3's and Flux's joint attention runs over the image's and the text's tokens together: each block projects
both streams to queries, keys and values (a Linear each, with a bias) and joins them on the sequence axis.
ORT adds a 3-D Linear's bias in a kernel of its own (writing the bias broadcast, which the GEMM then reads
back), and the join is a copy of both: three passes over each projection where one would do. Here the
MatMuls run without their biases and this kernel makes the joined tensor: each row read once from its
stream, its stream's bias added, written once.

Groups `bias_concat_<dtype>`: a (BLOCK_R, BLOCK_C) tile per program, grid (cdiv(rows, BLOCK_R),
cdiv(n_cols, BLOCK_C), 1), rows = items * (seq_a + seq_b) of the output; row s of an item comes from stream a
when s < seq_a, else from stream b. Maths in fp32; offsets in 64 bits.

Kernels with V16 take widths of a multiple of 16 (every hidden width of these models): the signature says so, so
every row starts 16-byte aligned and each access moves whole 16-byte vectors rather than one element at a time.
The library times them beside the others on first use of a shape.
"""

import triton
import triton.language as tl

DTYPES = ("fp32", "fp16", "bf16")
# (BLOCK_R, BLOCK_C, num_warps): 4K to 8K elements a tile; the width a block of the hidden width (SD3 1536,
# Flux 3072), narrower blocks for the narrow
CONFIGS = [(4, 1024, 4), (8, 1024, 8), (8, 512, 4), (16, 256, 4), (32, 128, 4), (2, 2048, 4)]
V16_CONFIGS = [(4, 1024, 4), (8, 1024, 8), (8, 512, 4), (2, 2048, 4)]  # the wide ones


@triton.jit
def bias_concat_kernel(out_ptr, a_ptr, b_ptr, bias_a_ptr, bias_b_ptr, n_rows, n_cols, seq_a, seq_b,
                       BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr, V16: tl.constexpr):
    # V16 changes nothing here: the signature's n_cols % 16 == 0 is what lets every access be a whole vector
    rows = tl.program_id(0).to(tl.int64) * BLOCK_R + tl.arange(0, BLOCK_R)
    cols = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)
    seq = seq_a + seq_b
    item, s = rows // seq, rows % seq
    first = s < seq_a
    live = rows < n_rows
    in_cols = (cols < n_cols)[None, :]
    a = tl.load(a_ptr + (item * seq_a + s)[:, None] * n_cols + cols[None, :], mask=(live & first)[:, None] & in_cols,
                other=0.0).to(tl.float32)
    b = tl.load(b_ptr + (item * seq_b + s - seq_a)[:, None] * n_cols + cols[None, :],
                mask=(live & ~first)[:, None] & in_cols, other=0.0).to(tl.float32)
    bias_a = tl.load(bias_a_ptr + cols, mask=cols < n_cols, other=0.0).to(tl.float32)
    bias_b = tl.load(bias_b_ptr + cols, mask=cols < n_cols, other=0.0).to(tl.float32)
    y = tl.where(first[:, None], a + bias_a[None, :], b + bias_b[None, :])
    tl.store(out_ptr + rows[:, None] * n_cols + cols[None, :], y.to(out_ptr.dtype.element_ty),
             mask=live[:, None] & in_cols)


def get_function_table():
    table = []
    for dtype in DTYPES:
        group = f"bias_concat_{dtype}"
        for (block_r, block_c, warps), v16 in [*((c, 0) for c in CONFIGS), *((c, 1) for c in V16_CONFIGS)]:
            table.append({
                "name": f"{group}_r{block_r}_c{block_c}_w{warps}" + ("_v16" if v16 else ""),
                "group": group,
                "func": bias_concat_kernel,
                "sig": ",".join([f"*{dtype}:16"] * 5 + ["i64", "i32:16" if v16 else "i32", "i64", "i64"]),
                "kwargs": {"num_warps": warps, "constants": {"BLOCK_R": block_r, "BLOCK_C": block_c, "V16": v16}},
            })
    return table


def get_launch_contracts():
    contract = {"params": ["out", "in", "in_b", "bias", "bias_b", "batch", "n_cols", "seq_a", "seq_b"],
                "grid": ["cdiv(batch, BLOCK_R)", "cdiv(n_cols, BLOCK_C)", "1"],
                "requires": ["BLOCK_C <= 128 or BLOCK_C < 2 * n_cols", "V16 == 0 or n_cols % 16 == 0"],
                "doc": "batch = the output's rows, items * (seq_a + seq_b); an item's first seq_a rows from in, the "
                       "rest from in_b, each with its bias"}
    return {f"bias_concat_{dtype}": contract for dtype in DTYPES}
