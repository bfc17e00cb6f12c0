"""LayerNorm with adaptive modulation (AdaLN), the diffusion transformers' block norm, in one pass.

The blocks of SD3, SD3.5, Flux and PixArt normalise each token without an affine and modulate it per
image with the conditioning's scale and shift, `y = LN(x) * (1 + scale[b]) + shift[b]`; the norm after
an attention or MLP branch reads the residual that branch joined through its gate, `x = x + gate[b] *
branch`, the branch being a Linear's output. As exported, that is ORT's LayerNorm kernel and up to five
broadcast elementwise kernels, each reading and writing the whole token tensor, and the Linear's bias a
pass of its own. Here it is one program per token: the row read once (and its branch), the sum written
(the residual the next block reads) and the normalised, modulated row written.

Groups `ada_layer_norm_<dtype>`, `ada_layer_norm_gated_<dtype>` (the gated residual first) and
`ada_layer_norm_gated_bias_<dtype>` (the branch's bias added here too, so the GEMM before it runs without
one), the gated sum clipped to [clip_lo, clip_hi] (Flux's fp16 residual stream): one row of n_cols per
program, grid (rows, 1, 1), the row held in registers, so a candidate when n_cols <= BLOCK_SIZE (the
smallest such block, or 256). Rows of an item are consecutive, `rows_per_item`
of them; scale, shift and gate hold one row of n_cols per item, bias one row for all. Maths in fp32;
offsets in 64 bits (rows * n_cols passes 2^31 on long sequences).

Kernels with V16 take rows whose n_cols is a multiple of 16 (every hidden width of these models): the signature
says so, so every row starts 16-byte aligned and each access moves whole 16-byte vectors rather than one element
at a time. The library times them beside the others on first use of a shape.
"""

import triton
import triton.language as tl

DTYPES = ("fp32", "fp16", "bf16")
FORMS = ("", "_gated", "_gated_bias")  # by GATED
# (BLOCK_SIZE, num_warps): a block per power of two of the hidden width (PixArt 1152, SD3 1536, Flux 3072)
CONFIGS = [(256, 1), (512, 2), (1024, 4), (2048, 4), (2048, 8), (4096, 8), (4096, 16), (8192, 16)]
V16_CONFIGS = [(1024, 4), (2048, 4), (2048, 8), (4096, 8), (4096, 16)]  # the widths of 640 to 4096


@triton.jit
def ada_layer_norm_kernel(out_ptr, x_ptr, scale_ptr, shift_ptr, branch_ptr, gate_ptr, sum_ptr, bias_ptr, n_cols,
                          rows_per_item, eps, clip_lo, clip_hi, BLOCK_SIZE: tl.constexpr, GATED: tl.constexpr,
                          V16: tl.constexpr):
    # V16 changes nothing here: the signature's n_cols % 16 == 0 is what lets every access be a whole vector
    # GATED: 0 the norm alone, 1 after x + gate * branch, 2 after x + gate * (branch + bias); the sum clipped to
    # [clip_lo, clip_hi] (fp16 Flux clips its residual stream to fp16's range; +-inf where a model does not)
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    at = row * n_cols + cols
    per_item = (row // rows_per_item) * n_cols + cols
    x = tl.load(x_ptr + at, mask=mask, other=0.0).to(tl.float32)
    if GATED:
        branch = tl.load(branch_ptr + at, mask=mask, other=0.0).to(tl.float32)
        if GATED == 2:
            branch += tl.load(bias_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        gate = tl.load(gate_ptr + per_item, mask=mask, other=0.0).to(tl.float32)
        x = x + gate * branch
        x = tl.where(x < clip_lo, clip_lo, tl.where(x > clip_hi, clip_hi, x))  # NaN stays NaN, as Clip's
        tl.store(sum_ptr + at, x.to(sum_ptr.dtype.element_ty), mask=mask)
    mean = tl.sum(x, axis=0) / n_cols
    centred = tl.where(mask, x - mean, 0.0)
    rstd = 1 / tl.sqrt(tl.sum(centred * centred, axis=0) / n_cols + eps)
    scale = tl.load(scale_ptr + per_item, mask=mask, other=0.0).to(tl.float32)
    shift = tl.load(shift_ptr + per_item, mask=mask, other=0.0).to(tl.float32)
    y = centred * rstd * (1 + scale) + shift
    tl.store(out_ptr + at, y.to(out_ptr.dtype.element_ty), mask=mask)


def get_function_table():
    table = []
    for gated, form in enumerate(FORMS):
        for dtype in DTYPES:
            group = f"ada_layer_norm{form}_{dtype}"
            for (block, warps), v16 in [*((c, 0) for c in CONFIGS), *((c, 1) for c in V16_CONFIGS)]:
                table.append({
                    "name": f"{group}_b{block}_w{warps}" + ("_v16" if v16 else ""),
                    "group": group,
                    "func": ada_layer_norm_kernel,
                    "sig": ",".join([f"*{dtype}:16"] * 8 + ["i32:16" if v16 else "i32", "i32", "fp32", "fp32",
                                                            "fp32"]),
                    "kwargs": {"num_warps": warps, "constants": {"BLOCK_SIZE": block, "GATED": gated, "V16": v16}},
                })
    return table


def get_launch_contracts():
    contract = {"params": ["out", "in", "mod_scale", "mod_shift", "skip", "gate", "add_out", "bias", "n_cols",
                           "rows_per_item", "eps", "clip_lo", "clip_hi"],
                "grid": ["batch", "1", "1"],
                "requires": ["n_cols <= BLOCK_SIZE", "BLOCK_SIZE <= 256 or BLOCK_SIZE < 2 * n_cols",
                             "V16 == 0 or n_cols % 16 == 0"],
                "doc": "one row per program; batch = rows, rows_per_item rows share a row of scale, shift, gate"}
    return {f"ada_layer_norm{form}_{dtype}": contract for form in FORMS for dtype in DTYPES}
