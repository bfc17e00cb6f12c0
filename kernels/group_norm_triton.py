"""GroupNorm over NHWC activations (Stable Diffusion's UNet), in ONNX Runtime's convention and with
ORT's argument list: optional skip (full or broadcast over H*W), bias, add_out and SiLU.

One program normalises one (image, group) pair, ORT's grid (n, groups, 1): at UNet's largest levels that
is 32 or 64 programs for 132 SMs, so each program has to move bytes as fast as one SM can: the bytes it
keeps in flight and the SM's instruction issue, not DRAM, are the limits. A program walks its group in
steps of TILES x HW_SIZE pixels. Pass 1 sums x and x^2 in fp32, the next step's load in flight while one
is summed; the step's tiles fold into one HW_SIZE x BLOCK_SIZE accumulator inside each thread, and bias
/ broadcast skip enter the sums per channel at the end. With a skip, pass 1 also writes x + skip + bias
to add_out. The last step stays in registers; pass 2 writes it, then walks back over the other steps
(the most recently read first, the likeliest still in L2), writing (x - mean) * rstd * gamma + beta,
then SiLU. A group of one step is read once. Variance is E[x^2] - E[x]^2 in fp32, as ORT's kernel
computes it.

A FLAT kernel (16-bit only) runs pass 1 differently when the group is x alone (no skip, no bias) and
more than one step: over the group's 16-byte vectors, every lane loading bytes, where the [pixels,
BLOCK_SIZE] tile leaves BLOCK_SIZE - c_per_group lanes empty (24 of 64 at 40 channels per group). More
bytes in flight per register; pass 2 then reads every step again. Its loads ask L1 to keep x for pass 2,
which reads it for the last time (evict_first) and streams its stores past the caches (.cs).

On CUDA the compile target decides two more things (`triton.language.target_info`, which the build
points at the target being compiled): on Hopper each program asks the copy engine to bring the steps
two ahead into L2 (its share of those pixels' rows, all groups splitting them evenly), and with 16-bit
outputs SiLU is h + h * tanh(h), h = y / 2, one special-function op per value (tanh.approx, within the
fp16 tolerance, not fp32's). Elsewhere SiLU is y / (1 + e^-y) with the fast exp and division.

Every kernel moves vectors of BLOCK_SIZE / 8 values (the whole block below 16; a VEC constant names
another; at most 16 bytes) when c and c_per_group are multiples of that (tensors 16-byte aligned: ORT's
are); other shapes take single elements in 16-pixel steps. The choice is made at run time, so any
shape ORT hands a kernel is right, and every c_per_group from 1 to 128 has a kernel (BLOCK_SIZE 1 to
128).

ORT's C++ launches every kernel of group `GroupNormTriton_{Silu|Pass}_{fp16|fp32}` with grid
(n, groups, 1) and picks a candidate when BLOCK_SIZE is the next power of two of c_per_group and
HW_SIZE divides H*W (a kernel is right for any H*W; the one-pixel-tile kernels admit every H*W).

Group `GroupNormAny_{Silu|Pass}_<dtype>` holds the same kernel for every shape ORT's rules leave out:
any H*W, up to 512 channels per group, any alignment. It is the runtime's correctness fallback, so its
pass 1 sums with Kahan compensation (KAHAN = 1): with few pixel rows a lane of a 1024 x 1024 image sums
a quarter of a million values, past what plain fp32 sums hold to fp32's tolerance.
"""

import triton
import triton.language as tl
from triton.language.extra import libdevice
from triton.language.extra.cuda import num_warps
from triton.language.target_info import cuda_capability_geq, is_hip


@triton.jit
def _pixels(start, pix, img_size, c, cols, col_mask):
    """Offsets (from the group's first value) and mask of pixels start + pix ([STEP, 1])."""
    p = start + pix
    return p * c + cols[None, :], (p >= 0) & (p < img_size) & col_mask[None, :]


@triton.jit
def _input(raw, skip_ptr, add_out_ptr, ptrs, mask, shift, has_skip, broadcast_skip):
    """x (+ skip) in fp32 from x as loaded (zero outside the group). With a skip, x + skip + shift goes to
    add_out. The shift (bias, broadcast skip) is left out: pass 1 adds it to the sums, pass 2 to the offset."""
    a = raw.to(tl.float32)
    if has_skip:
        if not broadcast_skip:
            a += tl.load(skip_ptr + ptrs, mask=mask, other=0.0).to(tl.float32)
        tl.store(add_out_ptr + ptrs, (a + shift[None, :]).to(add_out_ptr.dtype.element_ty), mask=mask)
    return a


@triton.jit
def _output(x, output_ptr, ptrs, mask, scale, offset, ACTIVATION_SILU: tl.constexpr, TANH: tl.constexpr,
            STORE: tl.constexpr):
    """x * scale + offset, then SiLU, stored. One program per group makes the SM's issue rate a limit, the
    special-function unit's (a quarter of the rate) most of all: TANH (16-bit outputs on CUDA) takes
    y * sigmoid(y) = h + h * tanh(h), h = y / 2 (scale and offset come halved), one tanh.approx a value
    (tanh.approx.f16x2 is two on Hopper); otherwise y / (1 + e^-y) with the approximate exp and division,
    two a value. STORE is the store's cache modifier."""
    y = x * scale[None, :] + offset[None, :]
    if ACTIVATION_SILU:
        if TANH:
            t = tl.inline_asm_elementwise("tanh.approx.f16x2 $0, $1;", "=r,r", [y.to(tl.float16)],
                                          dtype=tl.float16, is_pure=True, pack=2)
            y = y + y * t.to(tl.float32)
        else:
            y = libdevice.fast_dividef(y, 1.0 + libdevice.fast_expf(-y))
    tl.store(output_ptr + ptrs, y.to(output_ptr.dtype.element_ty), mask=mask, cache_modifier=STORE)


@triton.jit
def _add2(a, b, c, d):
    return a + c, b + d


@triton.jit
def _l2_prefetch(input_ptr, image, group, start, pixels, img_size, c, c_per_group):
    """One thread asks the copy engine to bring this program's share of pixels start .. start + pixels (all
    groups' channels: a contiguous range, which the programs of the image split evenly) into L2, so
    that each program's own loads of that step find it there. Hopper PTX: CUDA sm_90+ builds only;
    skipped unless the range is 16-byte aligned, as the instruction needs."""
    rows = tl.minimum(img_size - start, pixels)
    esize: tl.constexpr = input_ptr.dtype.element_ty.primitive_bitwidth // 8
    nbytes = rows * c_per_group * esize
    at = (input_ptr + (image * img_size + start) * c + group * rows * c_per_group).to(tl.int64)
    nbytes = tl.where((rows > 0) & (nbytes % 16 == 0) & (at % 16 == 0), nbytes, 0)
    tl.inline_asm_elementwise(
        "{ .reg .pred p; .reg .b32 t; mov.u32 t, %tid.x; setp.eq.u32 p, t, 0; "
        "setp.ne.and.s32 p, $2, 0, p; @p cp.async.bulk.prefetch.L2.global [$1], $2; mov.u32 $0, 0; }",
        "=r,l,r", [at, nbytes], dtype=tl.int32, is_pure=False, pack=1)


@triton.jit
def _fold(a, total, total_sq, TILES: tl.constexpr, HW_SIZE: tl.constexpr, BLOCK_SIZE: tl.constexpr):
    """total (total_sq) plus the step's TILES tiles (squared): pixel p of the step lands in row p % HW_SIZE,
    which the thread holding pixel p also holds (HW_SIZE rows span the program's threads)."""
    a = tl.reshape(a, [TILES, HW_SIZE, BLOCK_SIZE])
    return total + tl.sum(a, axis=0), total_sq + tl.sum(a * a, axis=0)


@triton.jit
def _fold_compensated(a, total, comp, total_sq, comp_sq, TILES: tl.constexpr, HW_SIZE: tl.constexpr,
                      BLOCK_SIZE: tl.constexpr):
    """_fold with Kahan compensation (comp, comp_sq carry what each addition lost): a lane that sums
    hundreds of thousands of values (a large image in few pixel rows) keeps fp32's precision."""
    a = tl.reshape(a, [TILES, HW_SIZE, BLOCK_SIZE])
    part = tl.sum(a, axis=0) - comp
    new_total = total + part
    comp = (new_total - total) - part
    part_sq = tl.sum(a * a, axis=0) - comp_sq
    new_sq = total_sq + part_sq
    comp_sq = (new_sq - total_sq) - part_sq
    return new_total, comp, new_sq, comp_sq


@triton.jit
def _flat_sums(input_ptr, base, image, group, img_size, c, c_per_group, VEC: tl.constexpr, L2_AHEAD: tl.constexpr):
    """Sum and sum of squares of a group's x, every lane loading bytes: the padded [pixels, BLOCK_SIZE]
    tile leaves BLOCK_SIZE - c_per_group lanes empty (24 of 64 at UNet's 40 channels), registers that
    bring nothing in. Here the group is rows of VEC values, c_per_group / VEC rows a pixel; a step is
    the whole pixels that fit in ROWS rows, 64 bytes a thread, the next step's load in flight while one
    is summed. Needs c and c_per_group multiples of VEC; x alone (no skip, no bias)."""
    FOLD: tl.constexpr = 64 // (VEC * input_ptr.dtype.element_ty.primitive_bitwidth // 8)
    THREADS: tl.constexpr = num_warps() * (64 if is_hip() else 32)
    ROWS: tl.constexpr = FOLD * THREADS
    per_pixel = c_per_group // VEC
    r = tl.arange(0, ROWS)
    pixel = r // per_pixel
    offsets = base + pixel[:, None] * c + ((r - pixel * per_pixel) * VEC)[:, None] + tl.arange(0, VEC)[None, :]
    per_step = ROWS // per_pixel
    live = pixel < per_step  # the rows past the last whole pixel
    steps = tl.cdiv(img_size, per_step)
    if L2_AHEAD > 0:
        for ahead in tl.static_range(1, L2_AHEAD + 1):
            _l2_prefetch(input_ptr, image, group, ahead * per_step, per_step, img_size, c, c_per_group)
    total = tl.zeros([THREADS, VEC], dtype=tl.float32)
    total_sq = tl.zeros([THREADS, VEC], dtype=tl.float32)
    raw = tl.load(input_ptr + offsets, mask=(live & (pixel < img_size))[:, None], other=0.0,
                  eviction_policy="evict_last")
    for step in tl.range(1, steps):
        if L2_AHEAD > 0:
            _l2_prefetch(input_ptr, image, group, (step + L2_AHEAD) * per_step, per_step, img_size, c, c_per_group)
        current = raw
        start = step * per_step
        raw = tl.load(input_ptr + offsets + start.to(tl.int64) * c, mask=(live & (start + pixel < img_size))[:, None],
                      other=0.0, eviction_policy="evict_last")
        total, total_sq = _fold(current.to(tl.float32), total, total_sq, FOLD, THREADS, VEC)
    total, total_sq = _fold(raw.to(tl.float32), total, total_sq, FOLD, THREADS, VEC)
    return tl.reduce((total, total_sq), None, _add2)


@triton.jit
def group_norm_kernel(input_ptr, skip_ptr, bias_ptr, output_ptr, add_out_ptr, gamma_ptr, beta_ptr,
                      img_size, c, c_per_group, eps, has_skip, has_bias, broadcast_skip,
                      BLOCK_SIZE: tl.constexpr, HW_SIZE: tl.constexpr, ACTIVATION_SILU: tl.constexpr,
                      TILES: tl.constexpr, FLAT: tl.constexpr, VEC: tl.constexpr, KAHAN: tl.constexpr):
    # The vector this kernel's block is made for: 2, 4, 8 values for BLOCK_SIZE 16, 32, 64 (UNet's 10, 20, 40
    # channels per group), the whole block below 16 (the VAE's 4 and 8), at most 16 bytes; VEC > 0 names
    # another (2 for 30 channels per group, 4 for 60: UNet's concatenated 960 and 1920). When c and
    # c_per_group are multiples of it, written as multiples the compiler knows each pixel's channels start
    # on that boundary (with the signature's aligned pointers) and moves vectors; other shapes move
    # single elements.
    BLOCK_VEC: tl.constexpr = VEC if VEC > 0 else (BLOCK_SIZE // 8 if BLOCK_SIZE >= 16 else BLOCK_SIZE)
    MOST: tl.constexpr = 128 // input_ptr.dtype.element_ty.primitive_bitwidth
    if BLOCK_VEC > MOST:
        _vector_or_elements(input_ptr, skip_ptr, bias_ptr, output_ptr, add_out_ptr, gamma_ptr, beta_ptr, img_size,
                            c, c_per_group, eps, has_skip, has_bias, broadcast_skip,
                            BLOCK_SIZE, HW_SIZE, ACTIVATION_SILU, TILES, FLAT, MOST, KAHAN)
    else:
        _vector_or_elements(input_ptr, skip_ptr, bias_ptr, output_ptr, add_out_ptr, gamma_ptr, beta_ptr, img_size,
                            c, c_per_group, eps, has_skip, has_bias, broadcast_skip,
                            BLOCK_SIZE, HW_SIZE, ACTIVATION_SILU, TILES, FLAT, BLOCK_VEC, KAHAN)


@triton.jit
def _vector_or_elements(input_ptr, skip_ptr, bias_ptr, output_ptr, add_out_ptr, gamma_ptr, beta_ptr, img_size,
                        c, c_per_group, eps, has_skip, has_bias, broadcast_skip, BLOCK_SIZE: tl.constexpr,
                        HW_SIZE: tl.constexpr, ACTIVATION_SILU: tl.constexpr, TILES: tl.constexpr,
                        FLAT: tl.constexpr, VEC: tl.constexpr, KAHAN: tl.constexpr):
    if VEC > 1:
        if (c % VEC == 0) & (c_per_group % VEC == 0):
            _group_norm(input_ptr, skip_ptr, bias_ptr, output_ptr, add_out_ptr, gamma_ptr, beta_ptr, img_size,
                        c // VEC * VEC, c_per_group // VEC * VEC, eps, has_skip, has_bias, broadcast_skip,
                        BLOCK_SIZE, HW_SIZE, ACTIVATION_SILU, TILES, VEC if FLAT else 0, KAHAN)
        else:  # channels per group that the vector does not divide: single elements, 16 pixels at a time
            _group_norm(input_ptr, skip_ptr, bias_ptr, output_ptr, add_out_ptr, gamma_ptr, beta_ptr, img_size,
                        c, c_per_group, eps, has_skip, has_bias, broadcast_skip,
                        BLOCK_SIZE, 16, ACTIVATION_SILU, 1, 0, KAHAN)
    else:
        _group_norm(input_ptr, skip_ptr, bias_ptr, output_ptr, add_out_ptr, gamma_ptr, beta_ptr, img_size,
                    c, c_per_group, eps, has_skip, has_bias, broadcast_skip,
                    BLOCK_SIZE, HW_SIZE, ACTIVATION_SILU, TILES, 0, KAHAN)


@triton.jit
def _group_norm(input_ptr, skip_ptr, bias_ptr, output_ptr, add_out_ptr, gamma_ptr, beta_ptr,
                img_size, c, c_per_group, eps, has_skip, has_bias, broadcast_skip,
                BLOCK_SIZE: tl.constexpr, HW_SIZE: tl.constexpr, ACTIVATION_SILU: tl.constexpr,
                TILES: tl.constexpr, FLAT_VEC: tl.constexpr, KAHAN: tl.constexpr):
    image = tl.program_id(0).to(tl.int64)
    group = tl.program_id(1)
    base = image * img_size * c + group * c_per_group
    cols = tl.arange(0, BLOCK_SIZE)
    col_mask = cols < c_per_group
    # A step is TILES tiles of HW_SIZE pixels, loaded together; the tiles are summed into one
    # [HW_SIZE, BLOCK_SIZE] accumulator inside each thread.
    STEP: tl.constexpr = TILES * HW_SIZE
    pix = tl.arange(0, STEP)[:, None]
    steps = tl.cdiv(img_size, STEP)

    # Per-channel terms added to every pixel: the bias and a skip broadcast over H*W.
    shift = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    if has_bias:
        shift += tl.load(bias_ptr + group * c_per_group + cols, mask=col_mask, other=0.0).to(tl.float32)
    if has_skip and broadcast_skip:
        shift += tl.load(skip_ptr + image * c + group * c_per_group + cols, mask=col_mask,
                         other=0.0).to(tl.float32)

    # Pass 1: sum and sum of squares, the next step's load in flight while a step is summed. On Hopper
    # the copy engine also brings the steps L2_AHEAD ahead into L2: one program per group has to keep
    # many bytes moving, ORT's grid leaving most SMs idle on big images.
    L2_AHEAD: tl.constexpr = 2 if cuda_capability_geq(9, 0) else 0
    if FLAT_VEC > 0 and steps > 1 and not has_skip and not has_bias:
        # x alone, over more than one step: pass 1 without empty lanes; pass 2 reads every step again
        sum_all, sq_all = _flat_sums(input_ptr, base, image, group, img_size, c, c_per_group, FLAT_VEC, L2_AHEAD)
        ptrs, mask = _pixels((steps - 1) * STEP, pix, img_size, c, cols, col_mask)
        raw = tl.load(input_ptr + base + ptrs, mask=mask, other=0.0)
    else:
        if L2_AHEAD > 0 and steps > 1:
            for ahead in tl.static_range(1, L2_AHEAD + 1):
                _l2_prefetch(input_ptr, image, group, ahead * STEP, STEP, img_size, c, c_per_group)
        total = tl.zeros([HW_SIZE, BLOCK_SIZE], dtype=tl.float32)
        total_sq = tl.zeros([HW_SIZE, BLOCK_SIZE], dtype=tl.float32)
        comp = tl.zeros([HW_SIZE, BLOCK_SIZE], dtype=tl.float32)
        comp_sq = tl.zeros([HW_SIZE, BLOCK_SIZE], dtype=tl.float32)
        ptrs, mask = _pixels(0, pix, img_size, c, cols, col_mask)
        raw = tl.load(input_ptr + base + ptrs, mask=mask, other=0.0)
        for step in tl.range(1, steps):
            if L2_AHEAD > 0:
                _l2_prefetch(input_ptr, image, group, (step + L2_AHEAD) * STEP, STEP, img_size, c, c_per_group)
            current = raw
            ptrs, mask = _pixels(step * STEP, pix, img_size, c, cols, col_mask)
            raw = tl.load(input_ptr + base + ptrs, mask=mask, other=0.0)
            ptrs, mask = _pixels((step - 1) * STEP, pix, img_size, c, cols, col_mask)
            a = _input(current, skip_ptr + base, add_out_ptr + base, ptrs, mask, shift, has_skip, broadcast_skip)
            if KAHAN:
                total, comp, total_sq, comp_sq = _fold_compensated(a, total, comp, total_sq, comp_sq, TILES, HW_SIZE,
                                                                   BLOCK_SIZE)
            else:
                total, total_sq = _fold(a, total, total_sq, TILES, HW_SIZE, BLOCK_SIZE)
        # The last step stays in registers for pass 2, as loaded (16-bit values take half the registers): a
        # group of one step (8x8 and 16x16 images, 32x32 at 320 channels) is read once.
        ptrs, mask = _pixels((steps - 1) * STEP, pix, img_size, c, cols, col_mask)
        a = _input(raw, skip_ptr + base, add_out_ptr + base, ptrs, mask, shift, has_skip, broadcast_skip)
        if KAHAN:
            total, comp, total_sq, comp_sq = _fold_compensated(a, total, comp, total_sq, comp_sq, TILES, HW_SIZE,
                                                               BLOCK_SIZE)
        else:
            total, total_sq = _fold(a, total, total_sq, TILES, HW_SIZE, BLOCK_SIZE)

        # The sums of x + shift from the sums of x: sum(x) + hw * shift and
        # sum(x^2) + 2 * shift * sum(x) + hw * shift^2, in one reduction.
        sum_all, sq_all = tl.reduce((total, total_sq + (2.0 * shift)[None, :] * total), None, _add2)
    count = img_size * c_per_group
    mean = (sum_all + img_size * tl.sum(shift, axis=0)) / count
    mean_sq = (sq_all + img_size * tl.sum(shift * shift, axis=0)) / count
    rstd = 1.0 / tl.sqrt(tl.maximum(mean_sq - mean * mean, 0.0) + eps)
    gamma = tl.load(gamma_ptr + group * c_per_group + cols, mask=col_mask, other=0.0).to(tl.float32)
    beta = tl.load(beta_ptr + group * c_per_group + cols, mask=col_mask, other=0.0).to(tl.float32)
    TANH: tl.constexpr = ACTIVATION_SILU and output_ptr.dtype.element_ty.primitive_bitwidth == 16 and \
        cuda_capability_geq(7, 5)
    scale = gamma * rstd * (0.5 if TANH else 1.0)
    offset = beta * (0.5 if TANH else 1.0) - mean * scale  # for x + shift
    shifted = offset + shift * scale  # for x, shift not added
    # The flat kernels' pass 1 asks L1 to keep x (evict_last); pass 2 reads it for the last time and
    # streams the output past the caches.
    LAST_USE: tl.constexpr = "evict_first" if FLAT_VEC > 0 else ""
    STORE: tl.constexpr = ".cs" if FLAT_VEC > 0 else ""
    # Pass 2, the kept step first, then backwards: the most recently read steps are the likeliest in L2.
    # With a skip it reads add_out (x + skip + shift, which this thread has just written for the kept
    # step), without one x, shift going into the offset.
    if has_skip:
        source_ptr = add_out_ptr + base
        raw = tl.load(source_ptr + ptrs, mask=mask, other=0.0, eviction_policy=LAST_USE)
    else:
        source_ptr = input_ptr + base
        offset = shifted
    _output(raw.to(tl.float32), output_ptr + base, ptrs, mask, scale, offset, ACTIVATION_SILU, TANH, STORE)
    ptrs, mask = _pixels((steps - 2) * STEP, pix, img_size, c, cols, col_mask)
    x = tl.load(source_ptr + ptrs, mask=mask, other=0.0, eviction_policy=LAST_USE)
    for back in tl.range(3, steps + 2):
        current = x
        ptrs, mask = _pixels((steps - back) * STEP, pix, img_size, c, cols, col_mask)
        x = tl.load(source_ptr + ptrs, mask=mask, other=0.0, eviction_policy=LAST_USE)
        ptrs, mask = _pixels((steps - back + 1) * STEP, pix, img_size, c, cols, col_mask)
        _output(current.to(tl.float32), output_ptr + base, ptrs, mask, scale, offset, ACTIVATION_SILU, TANH,
                STORE)


DTYPES = ("fp32", "fp16", "bf16")
ORT_DTYPES = ("fp32", "fp16")  # ORT's GroupNorm ops are instantiated for float and half only
BLOCKS = (1, 2, 4, 8, 16, 32, 64, 128)  # c_per_group 1 to 128
# ORT's group, (BLOCK_SIZE, HW_SIZE, TILES, num_warps, VEC). For every block a kernel of one-pixel tiles,
# 64 to a step: HW_SIZE 1 divides every H*W, so ORT's rules find a kernel for every image size and
# channels per group; then, for UNet's 10, 20 and 40 channels per group,
# the points that are the fastest somewhere on the benchmark grid (8x8 to 128x128 images), each tile's
# HW_SIZE rows spanning the program's threads; UNet's concatenations (30, 60 and 80 channels per group:
# 960, 1920, 2560 channels) with the vector that divides them; the VAE decoder's 4, 8 and 16 channels
# per group on 64x64 to 1024x1024 images, 8K to 16K values a step on 16 warps (a program per SM has to
# keep many bytes in flight).
UNET = [(16, 64, 8, 16, 0), (16, 64, 16, 16, 0), (16, 32, 16, 8, 0), (32, 64, 4, 16, 0), (32, 64, 8, 16, 0),
        (64, 32, 8, 8, 0), (64, 32, 2, 8, 0)]
UNET_FP32 = [(64, 64, 4, 16, 0), (64, 64, 2, 16, 0)]  # in 16-bit the _flat kernels at these points win
CONCAT = [(32, 64, 8, 16, 2), (64, 64, 4, 16, 4), (128, 32, 4, 16, 0)]
VAE = [(4, 512, 8, 16, 0), (8, 256, 8, 16, 0), (8, 512, 8, 16, 0), (16, 128, 4, 16, 0)]
# The Pass groups hold every point the Silu groups hold (the kernels differ only in the activation): ORT
# launches Pass for a GroupNorm or SkipGroupNorm without SiLU on any of these shapes, and with one
# candidate there it was 4-5x slower than Silu's best (1x256x256x128 fp16: 589 against 149 us).
# 16-bit only: points whose pass 1 runs over the group's vectors with no empty lanes (FLAT), the fastest
# at 32x32 and 64x64 with 1280 channels, and the concatenations' (30 and 60 channels in 32 / 64 lanes).
UNET_FLAT = [(64, 64, 4, 16, 0), (64, 64, 2, 16, 0), (32, 64, 8, 16, 2), (64, 64, 4, 16, 4)]
# Group GroupNormAny: (BLOCK_SIZE, HW_SIZE, TILES, num_warps, VEC).
ANY = [(64, 16, 1, 4, 0), (512, 4, 1, 4, 0)]
# ORT's 14 arguments: 5 tensors of the storage type, gamma/beta in fp32, hw, c, c_per_group, eps, 3 flags.
# ORT's group takes 16-byte aligned tensors (every ORT allocation is 256-byte aligned); the fallback any.
SIG = "*{t},*{t},*{t},*{t},*{t},*fp32,*fp32,i32,i32,i32,fp32,i1,i1,i1"
ALIGNED_SIG = "*{t}:16,*{t}:16,*{t}:16,*{t}:16,*{t}:16,*fp32:16,*fp32:16,i32,i32,i32,fp32,i1,i1,i1"


def variants(dtype: str) -> list[tuple[int, int, int, int, int, int]]:
    """(BLOCK_SIZE, HW_SIZE, TILES, num_warps, VEC, FLAT) of every kernel of ORT's group for dtype: a step
    of 64 one-pixel tiles with 8 to 16 values a thread for every block (any H*W), then UNet's and the
    VAE's."""
    looped = [(b, 1, 64, max(1, min(16, b * 64 // 256)), 0, 0) for b in BLOCKS]
    points = UNET + (UNET_FP32 if dtype == "fp32" else []) + CONCAT + VAE
    flat = [(*p, 1) for p in UNET_FLAT] if dtype == "fp16" else []
    return looped + [(*point, 0) for point in points] + flat


def kernel_name(group: str, block: int, hw_size: int, tiles: int, warps: int, vec: int, flat: int) -> str:
    return (f"{group}_b{block}_hw{hw_size}_t{tiles}_w{warps}" + (f"_v{vec}" if vec else "")
            + ("_flat" if flat else ""))


def get_function_table():
    table = []
    for silu in (True, False):
        act = "Silu" if silu else "Pass"
        for dtype in DTYPES:
            groups = ((f"GroupNormTriton_{act}_{dtype}", variants(dtype) if dtype in ORT_DTYPES else []),
                      (f"GroupNormAny_{act}_{dtype}", [(*point, 0) for point in ANY]))
            for group, configs in groups:
                for block, hw_size, tiles, warps, vec, flat in configs:
                    table.append({
                        "name": kernel_name(group, block, hw_size, tiles, warps, vec, flat),
                        "group": group,
                        "func": group_norm_kernel,
                        "sig": (SIG if group.startswith("GroupNormAny") else ALIGNED_SIG).format(t=dtype),
                        "kwargs": {"num_warps": warps, "constants": {
                            "BLOCK_SIZE": block, "HW_SIZE": hw_size, "ACTIVATION_SILU": int(silu),
                            "TILES": tiles, "FLAT": flat, "VEC": vec,
                            "KAHAN": int(group.startswith("GroupNormAny"))}},
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
