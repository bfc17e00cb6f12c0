"""GroupNorm over NHWC activations (Stable Diffusion's UNet), in ONNX Runtime's convention and with
ORT's argument list: optional skip (full or broadcast over H*W), bias, add_out and SiLU.

One program normalises one (image, group) pair: pass 1 streams the group's HW x c_per_group values
accumulating sum and sum of squares in fp32 (storing input + skip + bias to add_out when there is a
skip), pass 2 streams them again and writes (x - mean) * rstd * gamma + beta, then SiLU. Minimum
traffic is one read and one write of the tensor (plus skip and add_out); the second read of a group
is usually served from L2, since a group is at most a few hundred KB.

The `_keep` kernels (KEEP_FIRST) hold their first HW_SIZE x BLOCK_SIZE tile in registers through
both passes: with HW_SIZE up to 1024 that is the whole group of a small UNet level (16x16; 32x32 at 320),
read once, with one load, one reduction and one store per program. Wide-tile kernels (32K values a
tile) keep more bytes in flight for large images, where ORT's grid of n * groups programs leaves most
SMs idle. Every kernel moves vectors of BLOCK_SIZE / 8 values (at most 16 bytes) when c and c_per_group
are multiples of that (tensors 16-byte aligned: ORT's are); other shapes, which UNet never has, take
single elements in 16-pixel tiles. The choice is made at run time, so any shape ORT hands a kernel
is right.

ORT's C++ launches every kernel of group `GroupNormTriton_{Silu|Pass}_{fp16|fp32}` with grid
(n, groups, 1) and picks a candidate when BLOCK_SIZE is the next power of two of c_per_group and
HW_SIZE divides H*W. Variance is E[x^2] - E[x]^2 in fp32, as ORT's kernel computes it.

Group `GroupNormAny_{Silu|Pass}_<dtype>` holds the same kernel for every shape ORT's rules leave out:
any H*W, up to 512 channels per group, any alignment. It is the runtime's correctness fallback.
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
def _tile_sums(input_ptr, skip_ptr, add_out_ptr, base, offsets, c, hw, col_mask, img_size, shift, has_skip,
               broadcast_skip, first_pixel, part, part_sq, HW_SIZE: tl.constexpr):
    """part and part_sq plus the per-channel sums and sums of squares of the tiles from first_pixel on."""
    for start in tl.range(first_pixel, img_size, HW_SIZE):
        mask = ((start + hw) < img_size)[:, None] & col_mask[None, :]
        a = _input(input_ptr, skip_ptr, add_out_ptr, base + start * c + offsets, mask, shift, has_skip,
                   broadcast_skip)
        tile_sum, tile_sq = tl.reduce((a, a * a), 0, _add2)
        part += tile_sum
        part_sq += tile_sq
    return part, part_sq


@triton.jit
def group_norm_kernel(input_ptr, skip_ptr, bias_ptr, output_ptr, add_out_ptr, gamma_ptr, beta_ptr,
                      img_size, c, c_per_group, eps, has_skip, has_bias, broadcast_skip,
                      BLOCK_SIZE: tl.constexpr, HW_SIZE: tl.constexpr, ACTIVATION_SILU: tl.constexpr,
                      KEEP_FIRST: tl.constexpr):
    # The vector this kernel's block is made for: 2, 4, 8 values for BLOCK_SIZE 16, 32, 64 (UNet's 10, 20, 40
    # channels per group), at most 16 bytes. When c and c_per_group are multiples of it, written as
    # multiples the compiler knows each pixel's channels start on that boundary (with the signature's
    # aligned pointers) and moves vectors; other shapes move single elements.
    BLOCK_VEC: tl.constexpr = BLOCK_SIZE // 8
    MOST: tl.constexpr = 128 // input_ptr.dtype.element_ty.primitive_bitwidth
    if BLOCK_VEC > MOST:
        _vector_or_elements(input_ptr, skip_ptr, bias_ptr, output_ptr, add_out_ptr, gamma_ptr, beta_ptr, img_size,
                            c, c_per_group, eps, has_skip, has_bias, broadcast_skip,
                            BLOCK_SIZE, HW_SIZE, ACTIVATION_SILU, KEEP_FIRST, MOST)
    else:
        _vector_or_elements(input_ptr, skip_ptr, bias_ptr, output_ptr, add_out_ptr, gamma_ptr, beta_ptr, img_size,
                            c, c_per_group, eps, has_skip, has_bias, broadcast_skip,
                            BLOCK_SIZE, HW_SIZE, ACTIVATION_SILU, KEEP_FIRST, BLOCK_VEC)


@triton.jit
def _vector_or_elements(input_ptr, skip_ptr, bias_ptr, output_ptr, add_out_ptr, gamma_ptr, beta_ptr, img_size,
                        c, c_per_group, eps, has_skip, has_bias, broadcast_skip, BLOCK_SIZE: tl.constexpr,
                        HW_SIZE: tl.constexpr, ACTIVATION_SILU: tl.constexpr, KEEP_FIRST: tl.constexpr,
                        VEC: tl.constexpr):
    if VEC > 1:
        if (c % VEC == 0) & (c_per_group % VEC == 0):
            _group_norm(input_ptr, skip_ptr, bias_ptr, output_ptr, add_out_ptr, gamma_ptr, beta_ptr, img_size,
                        c // VEC * VEC, c_per_group // VEC * VEC, eps, has_skip, has_bias, broadcast_skip,
                        BLOCK_SIZE, HW_SIZE, ACTIVATION_SILU, KEEP_FIRST)
        else:  # shapes UNet never has: 16-pixel tiles, which every HW_SIZE here is a multiple of
            _group_norm(input_ptr, skip_ptr, bias_ptr, output_ptr, add_out_ptr, gamma_ptr, beta_ptr, img_size,
                        c, c_per_group, eps, has_skip, has_bias, broadcast_skip,
                        BLOCK_SIZE, 16, ACTIVATION_SILU, 0)
    else:
        _group_norm(input_ptr, skip_ptr, bias_ptr, output_ptr, add_out_ptr, gamma_ptr, beta_ptr, img_size,
                    c, c_per_group, eps, has_skip, has_bias, broadcast_skip,
                    BLOCK_SIZE, HW_SIZE, ACTIVATION_SILU, KEEP_FIRST)


@triton.jit
def _group_norm(input_ptr, skip_ptr, bias_ptr, output_ptr, add_out_ptr, gamma_ptr, beta_ptr,
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
        part, part_sq = _tile_sums(input_ptr, skip_ptr, add_out_ptr, base, offsets, c, hw, col_mask, img_size,
                                   shift, has_skip, broadcast_skip, HW_SIZE, part, part_sq, HW_SIZE)
        sum_all, sq_all = tl.reduce((part, part_sq), 0, _add2)
    elif HW_SIZE * BLOCK_SIZE >= 16384:
        # Wide tiles (many bytes in flight per load): reduce each tile rather than keep tile-sized sums.
        zero = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
        part, part_sq = _tile_sums(input_ptr, skip_ptr, add_out_ptr, base, offsets, c, hw, col_mask, img_size,
                                   shift, has_skip, broadcast_skip, 0, zero, zero, HW_SIZE)
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
ORT_DTYPES = ("fp32", "fp16")  # ORT's GroupNorm ops are instantiated for float and half only
BLOCKS = (4, 8, 16, 32, 64, 128)  # c_per_group up to 128
# ORT's group, (BLOCK_SIZE, HW_SIZE, num_warps, KEEP_FIRST): for every block a looped kernel of 16-pixel
# tiles (any H*W that is a multiple of 16), and the points that are the fastest somewhere on the
# benchmark grids: 64-pixel tiles for 33 to 64 channels per group, and kernels that keep their first tile
# in registers (KEEP_FIRST: the whole group of a small UNet level).
LOOPED_64 = [(64, 64, 8), (64, 64, 16)]
KEPT = [(16, 256, 4), (16, 512, 8), (16, 1024, 16), (32, 256, 8), (32, 512, 16)]
# Wide tiles for large images, where ORT's grid leaves most SMs idle (n * groups programs): 32K values
# per tile, so each program keeps tens of KB in flight.
WIDE = [(32, 1024, 16, 0), (64, 512, 16, 0)]
# Group GroupNormAny: (BLOCK_SIZE, HW_SIZE, num_warps).
ANY = [(64, 16, 4), (512, 4, 4)]
# ORT's 14 arguments: 5 tensors of the storage type, gamma/beta in fp32, hw, c, c_per_group, eps, 3 flags.
# ORT's group takes 16-byte aligned tensors (every ORT allocation is 256-byte aligned); the fallback any.
SIG = "*{t},*{t},*{t},*{t},*{t},*fp32,*fp32,i32,i32,i32,fp32,i1,i1,i1"
ALIGNED_SIG = "*{t}:16,*{t}:16,*{t}:16,*{t}:16,*{t}:16,*fp32:16,*fp32:16,i32,i32,i32,fp32,i1,i1,i1"


def warps(block: int, hw_size: int) -> int:
    """About 256 values per warp: 1 to 16 warps."""
    return max(1, min(16, block * hw_size // 256))


def variants() -> list[tuple[int, int, int, int]]:
    """(BLOCK_SIZE, HW_SIZE, num_warps, KEEP_FIRST) of every kernel of ORT's group."""
    looped = [(b, 16, warps(b, 16), 0) for b in BLOCKS] + [(b, hw, w, 0) for b, hw, w in LOOPED_64]
    return looped + [(b, hw, w, 1) for b, hw, w in KEPT] + WIDE


def get_function_table():
    table = []
    for silu in (True, False):
        act = "Silu" if silu else "Pass"
        for dtype in DTYPES:
            groups = ((f"GroupNormTriton_{act}_{dtype}", variants() if dtype in ORT_DTYPES else []),
                      (f"GroupNormAny_{act}_{dtype}", [(b, hw, w, 0) for b, hw, w in ANY]))
            for group, configs in groups:
                for block, hw_size, warps, keep in configs:
                    table.append({
                        "name": f"{group}_b{block}_hw{hw_size}_w{warps}{'_keep' if keep else ''}",
                        "group": group,
                        "func": group_norm_kernel,
                        "sig": (SIG if group.startswith("GroupNormAny") else ALIGNED_SIG).format(t=dtype),
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
    any_shape = {**contract, "requires": ["c_per_group <= BLOCK_SIZE", "ACTIVATION_SILU == silu"], "fallback": True,
                 "doc": "NHWC; one program per (image, group), any H*W and alignment; skip is [n, hw, c] or, "
                        "broadcast, [n, c]"}
    return {**{f"GroupNormTriton_{act}_{dt}": contract for act in ("Silu", "Pass") for dt in ORT_DTYPES},
            **{f"GroupNormAny_{act}_{dt}": any_shape for act in ("Silu", "Pass") for dt in DTYPES}}
