"""GroupNorm over NHWC activations (Stable Diffusion's UNet), in ONNX Runtime's convention and with
ORT's argument list: optional skip (full or broadcast over H*W), bias, add_out and SiLU.

One program normalises one (image, group) pair: pass 1 streams the group's HW x c_per_group values
accumulating sum and sum of squares in fp32 (storing input + skip + bias to add_out when there is a
skip), pass 2 streams them again and writes (x - mean) * rstd * gamma + beta, then SiLU. Minimum
traffic is one read and one write of the tensor (plus skip and add_out); the second read of a group
is usually served from L2, since a group is at most a few hundred KB.

The `_keep` kernels (KEEP_FIRST) hold their first HW_SIZE x BLOCK_SIZE tile in registers through
both passes: with HW_SIZE up to 1024 that is the whole group of a small UNet level (16x16; 32x32 at 320),
read once, with one load, one reduction and one store per program.

ORT's C++ launches every kernel of group `GroupNormTriton_{Silu|Pass}_<dtype>` with grid
(n, groups, 1) and picks a candidate when BLOCK_SIZE is the next power of two of c_per_group and
HW_SIZE divides H*W. Variance is E[x^2] - E[x]^2 in fp32, as ORT's kernel computes it.
"""

import triton
import triton.language as tl


@triton.jit
def _input(input_ptr, skip_ptr, add_out_ptr, ptrs, mask, shift, has_skip, broadcast_skip):
    """x (+ skip) + per-channel shift in fp32, zero outside the group; written to add_out with a skip."""
    a = tl.load(input_ptr + ptrs, mask=mask, other=0.0).to(tl.float32)
    if has_skip and not broadcast_skip:
        a += tl.load(skip_ptr + ptrs, mask=mask, other=0.0).to(tl.float32)
    a = tl.where(mask, a + shift[None, :], 0.0)
    if has_skip:
        tl.store(add_out_ptr + ptrs, a.to(add_out_ptr.dtype.element_ty), mask=mask)
    return a


@triton.jit
def _output(x, output_ptr, ptrs, mask, scale, offset, ACTIVATION_SILU: tl.constexpr):
    y = x * scale[None, :] + offset[None, :]
    if ACTIVATION_SILU:
        y = y * tl.sigmoid(y)
    tl.store(output_ptr + ptrs, y.to(output_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _add2(a, b, c, d):
    return a + c, b + d


@triton.jit
def group_norm_kernel(input_ptr, skip_ptr, bias_ptr, output_ptr, add_out_ptr, gamma_ptr, beta_ptr,
                      img_size, c, c_per_group, eps, has_skip, has_bias, broadcast_skip,
                      BLOCK_SIZE: tl.constexpr, HW_SIZE: tl.constexpr, ACTIVATION_SILU: tl.constexpr,
                      KEEP_FIRST: tl.constexpr):
    image = tl.program_id(0).to(tl.int64)
    group = tl.program_id(1)
    base = image * img_size * c + group * c_per_group
    cols = tl.arange(0, BLOCK_SIZE)
    hw = tl.arange(0, HW_SIZE)
    col_mask = cols < c_per_group
    offsets = hw[:, None] * c + cols[None, :]

    # Per-channel terms added to every pixel: the bias and a skip broadcast over H*W.
    shift = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    if has_bias:
        shift += tl.load(bias_ptr + group * c_per_group + cols, mask=col_mask, other=0.0).to(tl.float32)
    if has_skip and broadcast_skip:
        shift += tl.load(skip_ptr + image * c + group * c_per_group + cols, mask=col_mask,
                         other=0.0).to(tl.float32)

    if KEEP_FIRST:
        # The first tile stays in registers for pass 2: when HW_SIZE covers the image (small UNet
        # levels), the group is read once and each program is one load, one reduction and one store.
        first_mask = (hw < img_size)[:, None] & col_mask[None, :]
        first = _input(input_ptr, skip_ptr, add_out_ptr, base + offsets, first_mask, shift, has_skip,
                       broadcast_skip)
        part, part_sq = tl.reduce((first, first * first), 0, _add2)
        for start in tl.range(HW_SIZE, img_size, HW_SIZE):
            mask = ((start + hw) < img_size)[:, None] & col_mask[None, :]
            a = _input(input_ptr, skip_ptr, add_out_ptr, base + start * c + offsets, mask, shift, has_skip,
                       broadcast_skip)
            tile_sum, tile_sq = tl.reduce((a, a * a), 0, _add2)
            part += tile_sum
            part_sq += tile_sq
        sum_all, sq_all = tl.reduce((part, part_sq), 0, _add2)
    else:
        total = tl.zeros([HW_SIZE, BLOCK_SIZE], dtype=tl.float32)
        total_sq = tl.zeros([HW_SIZE, BLOCK_SIZE], dtype=tl.float32)
        for start in tl.range(0, img_size, HW_SIZE):
            mask = ((start + hw) < img_size)[:, None] & col_mask[None, :]
            a = _input(input_ptr, skip_ptr, add_out_ptr, base + start * c + offsets, mask, shift, has_skip,
                       broadcast_skip)
            total += a
            total_sq += a * a
        sum_all = tl.sum(total, axis=None)
        sq_all = tl.sum(total_sq, axis=None)

    count = img_size * c_per_group
    mean = sum_all / count
    var = tl.maximum(sq_all / count - mean * mean, 0.0)
    rstd = 1.0 / tl.sqrt(var + eps)
    gamma = tl.load(gamma_ptr + group * c_per_group + cols, mask=col_mask, other=0.0).to(tl.float32)
    beta = tl.load(beta_ptr + group * c_per_group + cols, mask=col_mask, other=0.0).to(tl.float32)
    scale = gamma * rstd
    offset = beta - mean * scale
    reread_from = 0
    if KEEP_FIRST:
        _output(first, output_ptr, base + offsets, first_mask, scale, offset, ACTIVATION_SILU)
        reread_from = HW_SIZE
    for start in tl.range(reread_from, img_size, HW_SIZE):
        mask = ((start + hw) < img_size)[:, None] & col_mask[None, :]
        ptrs = base + start * c + offsets
        if has_skip:
            x = tl.load(add_out_ptr + ptrs, mask=mask, other=0.0).to(tl.float32)
        else:
            x = tl.load(input_ptr + ptrs, mask=mask, other=0.0).to(tl.float32) + shift[None, :]
        _output(x, output_ptr, ptrs, mask, scale, offset, ACTIVATION_SILU)


DTYPES = ("fp32", "fp16", "bf16")
BLOCKS = (4, 8, 16, 32, 64, 128)  # c_per_group up to 128
HW_SIZES = (16, 32, 64)  # looped, per-element accumulators
# First tile kept in registers (KEEP_FIRST): the whole group when HW_SIZE is H*W; 2K to 16K values
# (32K-value tiles spill 2-8 KB per thread at 16 warps, and were never the fastest on the H200).
KEEP_HW_SIZES = (128, 256, 512, 1024)
KEEP_ELEMENTS = (2048, 16384)
# ORT's 14 arguments: 5 tensors of the storage type, gamma/beta in fp32, hw, c, c_per_group, eps, 3 flags.
SIG = "*{t},*{t},*{t},*{t},*{t},*fp32,*fp32,i32,i32,i32,fp32,i1,i1,i1"


def warp_choices(block: int, hw_size: int) -> list[int]:
    """About 256 values per warp, and half of that: 1 to 16 warps."""
    base = max(1, min(16, block * hw_size // 256))
    return sorted({base, max(1, base // 2)})


def keep_warps(block: int, hw_size: int) -> int:
    """Whole-tile programs: about 32 values per thread (4 to 16 warps)."""
    return max(4, min(16, block * hw_size // 1024))


def variants() -> list[tuple[int, int, int, int]]:
    """(BLOCK_SIZE, HW_SIZE, num_warps, KEEP_FIRST) of every kernel of a group."""
    looped = [(b, hw, w, 0) for b in BLOCKS for hw in HW_SIZES for w in warp_choices(b, hw)]
    low, high = KEEP_ELEMENTS
    kept = [(b, hw, keep_warps(b, hw), 1) for b in BLOCKS for hw in KEEP_HW_SIZES if low <= b * hw <= high]
    return looped + kept


def get_function_table():
    table = []
    for silu in (True, False):
        act = "Silu" if silu else "Pass"
        for dtype in DTYPES:
            for block, hw_size, warps, keep in variants():
                table.append({
                    "name": f"GroupNormTriton_{act}_{dtype}_b{block}_hw{hw_size}_w{warps}{'_keep' if keep else ''}",
                    "group": f"GroupNormTriton_{act}_{dtype}",
                    "func": group_norm_kernel,
                    "sig": SIG.format(t=dtype),
                    "kwargs": {"num_warps": warps, "constants": {
                        "BLOCK_SIZE": block, "HW_SIZE": hw_size, "ACTIVATION_SILU": int(silu),
                        "KEEP_FIRST": keep}},
                })
    return table


def get_launch_contracts():
    contract = {
        "params": ["in", "skip", "bias", "out", "add_out", "gamma", "beta", "hw", "c", "c_per_group", "eps",
                   "has_skip", "has_bias", "broadcast_skip"],
        "grid": ["n", "groups", "1"],
        "requires": ["c_per_group <= BLOCK_SIZE and BLOCK_SIZE < 2 * c_per_group", "hw % HW_SIZE == 0",
                     "ACTIVATION_SILU == silu"],
        "doc": "NHWC; one program per (image, group); skip is [n, hw, c] or, broadcast, [n, c]",
    }
    return {f"GroupNormTriton_{act}_{dt}": contract for act in ("Silu", "Pass") for dt in DTYPES}
