"""Rows of activations quantized to fp8 e4m3, one scale a row: what an fp8 GEMM's B operand needs.

An fp8 Linear (runtime/ortlib/src/fp8_linear.cc) multiplies e4m3 weights, quantized per output channel when the
model was rewritten, by e4m3 activations quantized per token as they arrive: each row's scale is its largest
magnitude over 448 (e4m3's largest finite value), so the row's extreme lands on the format's end and nothing
saturates. cuBLASLt applies both scale vectors in its epilogue (its outer-vector scale mode).

Groups `fp8_quant_rows_<dtype>` (the activations' dtype, fp16 or bf16): BLOCK_R rows a program, grid
(cdiv(batch, BLOCK_R), 1, 1). Each program reads its rows twice in BLOCK_C-wide slices: once for the largest
magnitude, once to scale, round to nearest (e4m3's own conversion, satfinite) and store; the second read comes
from L2 (a row is a few KB). An all-zero row gets scale 1 (its values stay 0). Offsets in 64 bits; outputs are
(batch, n_cols) e4m3 bytes and (batch) fp32 scales. e4m3 conversions exist from sm_89: MIN_SM.
"""

import triton
import triton.language as tl

MIN_SM = 89  # cvt.rn.satfinite.e4m3x2.f32 starts at sm_89 (Ada, Hopper, Blackwell)
DTYPES = ("fp16", "bf16")
E4M3_MAX = tl.constexpr(448.0)  # e4m3fn's largest finite value
# (BLOCK_R, BLOCK_C, num_warps): one row a program across the widths the DiTs' Linears take (1152 to 12288), more
# rows a program where a row is short
CONFIGS = [(1, 1024, 4), (1, 2048, 8), (2, 512, 4), (4, 256, 4)]


@triton.jit
def fp8_quant_rows_kernel(out_ptr, scale_ptr, in_ptr, n_rows, n_cols,
                          BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    rows = tl.program_id(0).to(tl.int64) * BLOCK_R + tl.arange(0, BLOCK_R)
    live = rows < n_rows
    amax = tl.zeros((BLOCK_R,), dtype=tl.float32)
    for start in range(0, n_cols, BLOCK_C):
        cols = start + tl.arange(0, BLOCK_C)
        mask = live[:, None] & (cols < n_cols)[None, :]
        x = tl.load(in_ptr + rows[:, None] * n_cols + cols[None, :], mask=mask, other=0.0).to(tl.float32)
        amax = tl.maximum(amax, tl.max(tl.abs(x), axis=1))
    scale = tl.where(amax > 0, amax / E4M3_MAX, 1.0)
    inv = 1.0 / scale
    for start in range(0, n_cols, BLOCK_C):
        cols = start + tl.arange(0, BLOCK_C)
        mask = live[:, None] & (cols < n_cols)[None, :]
        x = tl.load(in_ptr + rows[:, None] * n_cols + cols[None, :], mask=mask, other=0.0).to(tl.float32)
        q = tl.clamp(x * inv[:, None], -E4M3_MAX, E4M3_MAX)
        tl.store(out_ptr + rows[:, None] * n_cols + cols[None, :], q.to(tl.float8e4nv), mask=mask)
    tl.store(scale_ptr + rows, scale, mask=live)


def get_function_table():
    table = []
    for dtype in DTYPES:
        group = f"fp8_quant_rows_{dtype}"
        for block_r, block_c, warps in CONFIGS:
            table.append({
                "name": f"{group}_r{block_r}_c{block_c}_w{warps}",
                "group": group,
                "func": fp8_quant_rows_kernel,
                "sig": f"*fp8e4nv:16,*fp32:16,*{dtype}:16,i64,i32",
                "kwargs": {"num_warps": warps, "constants": {"BLOCK_R": block_r, "BLOCK_C": block_c}},
            })
    return table


def get_launch_contracts():
    contract = {"params": ["out", "row_scale", "in", "batch", "n_cols"],
                "grid": ["cdiv(batch, BLOCK_R)", "1", "1"],
                "requires": ["BLOCK_C <= 256 or BLOCK_C < 4 * n_cols"],
                "doc": "in (batch, n_cols) -> out (batch, n_cols) e4m3 and row_scale (batch) fp32, "
                       "in ~= out * row_scale"}
    return {f"fp8_quant_rows_{dtype}": contract for dtype in DTYPES}
