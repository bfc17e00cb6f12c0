"""GEGLU after its Linear: the bias added, the row split in halves, the first times GELU of the second, in one pass.

The UNets' transformer blocks (SD 1.5, SDXL) open their MLP with GEGLU: one Linear to twice the inner width,
`hidden, gate = h.chunk(2, -1)`, `hidden * gelu(gate)` with the exact (erf) GELU. ORT's own fused kernel for it
(com.microsoft.BiasSplitGelu) serves three widths and no bfloat16; as exported it is a bias Add, two Slices, the
GELU's Div, Erf, Add and Muls, each a pass over the tensor. Here the MatMul's output is read once (both halves of
each row) and the result written once, at the bandwidth the copy of those bytes takes.

Groups `bias_split_gelu_<dtype>`: a (BLOCK_R, BLOCK_C) tile of the output per program, grid
(cdiv(rows, BLOCK_R), cdiv(half, BLOCK_C), 1); input rows of 2 * half, output rows of half, bias of 2 * half.
Maths in fp32; offsets in 64 bits (rows * 2 * half passes 2^31 on SDXL's larger batches).

Kernels with V16 take half widths of a multiple of 16 (every UNet's: 1280 to 5120): the signature says so, so
both halves of every row start 16-byte aligned and each access moves whole 16-byte vectors rather than one
element at a time. The library times them beside the others on first use of a shape.
"""

import triton
import triton.language as tl

DTYPES = ("fp32", "fp16", "bf16")
# (BLOCK_R, BLOCK_C, num_warps): 4K to 8K output elements a tile; the widest the UNets' half widths
CONFIGS = [(4, 1024, 4), (8, 1024, 8), (2, 2048, 4), (8, 512, 4), (32, 128, 4)]
V16_CONFIGS = [(4, 1024, 4), (8, 1024, 8), (2, 2048, 4)]


@triton.jit
def bias_split_gelu_kernel(out_ptr, x_ptr, bias_ptr, n_rows, half, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr,
                           V16: tl.constexpr):
    # V16 changes nothing here: the signature's half % 16 == 0 is what lets every access be a whole vector
    rows = tl.program_id(0).to(tl.int64) * BLOCK_R + tl.arange(0, BLOCK_R)
    cols = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)
    live = (rows < n_rows)[:, None] & (cols < half)[None, :]
    at = rows[:, None] * (2 * half) + cols[None, :]
    value = tl.load(x_ptr + at, mask=live, other=0.0).to(tl.float32)
    gate = tl.load(x_ptr + at + half, mask=live, other=0.0).to(tl.float32)
    value += tl.load(bias_ptr + cols, mask=cols < half, other=0.0).to(tl.float32)[None, :]
    gate += tl.load(bias_ptr + half + cols, mask=cols < half, other=0.0).to(tl.float32)[None, :]
    y = value * (0.5 * gate * (1 + tl.math.erf(gate * 0.7071067811865476)))
    tl.store(out_ptr + rows[:, None] * half + cols[None, :], y.to(out_ptr.dtype.element_ty), mask=live)


def get_function_table():
    table = []
    for dtype in DTYPES:
        group = f"bias_split_gelu_{dtype}"
        for (block_r, block_c, warps), v16 in [*((c, 0) for c in CONFIGS), *((c, 1) for c in V16_CONFIGS)]:
            table.append({
                "name": f"{group}_r{block_r}_c{block_c}_w{warps}" + ("_v16" if v16 else ""),
                "group": group,
                "func": bias_split_gelu_kernel,
                "sig": ",".join([f"*{dtype}:16"] * 3 + ["i64", "i32:16" if v16 else "i32"]),
                "kwargs": {"num_warps": warps, "constants": {"BLOCK_R": block_r, "BLOCK_C": block_c, "V16": v16}},
            })
    return table


def get_launch_contracts():
    contract = {"params": ["out", "in", "bias", "batch", "n_cols"],
                "grid": ["cdiv(batch, BLOCK_R)", "cdiv(n_cols, BLOCK_C)", "1"],
                "requires": ["BLOCK_C <= 128 or BLOCK_C < 2 * n_cols", "V16 == 0 or n_cols % 16 == 0"],
                "doc": "batch = rows, n_cols = the output's width (half the input's); out[r, j] = (in[r, j] + "
                       "bias[j]) * gelu(in[r, n_cols + j] + bias[n_cols + j])"}
    return {f"bias_split_gelu_{dtype}": contract for dtype in DTYPES}
