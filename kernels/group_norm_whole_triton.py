"""GroupNorm of small NHWC images: one program holds a whole (image, group) in registers, read as vectors.

At the small UNet levels (8x8, 16x16; 32x32 at 320 channels) a group is 1K to 16K values. ORT's kernel
(group_norm_triton.py) reads it one element at a time: nothing tells the compiler that c_per_group (10,
20, 40 in Stable Diffusion) is a multiple of anything. Here a group is a list of VEC-channel vectors,
VECTORS of them per program (vector v is pixel v // (c_per_group / VEC)); the contract asks VEC to
divide c_per_group, so each vector loads as one instruction (8 fp16 values: 16 bytes).

A program reads its group once (+ skip + bias, writing add_out), reduces sum and sum of squares in
fp32, and writes (x - mean) * rstd * gamma + beta, then SiLU: traffic is the minimum, one read and one
write. gamma, beta and the bias are read per vector too: a few hundred bytes that stay in L1. gamma and
beta are loaded with x, not after the reduction where they were two more dependent round trips (3-10%
on the H200).
Same semantics as ORT's kernel (variance E[x^2] - E[x]^2 in fp32, skip full or broadcast over H*W),
its 14 arguments and grid (n, groups, 1), but its own group `GroupNormWhole_{Silu|Pass}_<dtype>`:
ORT's C++ would launch these with its rules, which do not know VEC.
"""

import triton
import triton.language as tl


@triton.jit
def _add2(a, b, c, d):
    return a + c, b + d


@triton.jit
def group_norm_whole_kernel(input_ptr, skip_ptr, bias_ptr, output_ptr, add_out_ptr, gamma_ptr, beta_ptr,
                            img_size, c, c_per_group, eps, has_skip, has_bias, broadcast_skip,
                            VECTORS: tl.constexpr, VEC: tl.constexpr, ACTIVATION_SILU: tl.constexpr):
    image = tl.program_id(0).to(tl.int64)
    group = tl.program_id(1)
    per_pixel = c_per_group // VEC
    # Written as multiples of VEC (equal to c_per_group and c under the contract), so that the
    # compiler can prove each vector's alignment.
    cpg = per_pixel * VEC
    c_vec = (c // VEC) * VEC
    v = tl.arange(0, VECTORS)
    pixel = v // per_pixel
    first = group * cpg + (v - pixel * per_pixel) * VEC  # first channel of each vector
    chans = first[:, None] + tl.arange(0, VEC)[None, :]
    mask = tl.broadcast_to((pixel < img_size)[:, None], [VECTORS, VEC])
    offs = (image * img_size + pixel)[:, None] * c_vec + chans

    x = tl.load(input_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    gamma = tl.load(gamma_ptr + chans, mask=mask, other=0.0)
    beta = tl.load(beta_ptr + chans, mask=mask, other=0.0)
    if has_skip:
        if broadcast_skip:
            x += tl.load(skip_ptr + image * c_vec + chans, mask=mask, other=0.0).to(tl.float32)
        else:
            x += tl.load(skip_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    if has_bias:
        x += tl.load(bias_ptr + chans, mask=mask, other=0.0).to(tl.float32)
    x = tl.where(mask, x, 0.0)
    if has_skip:
        tl.store(add_out_ptr + offs, x.to(add_out_ptr.dtype.element_ty), mask=mask)

    part, part_sq = tl.reduce((x, x * x), 1, _add2)
    total, total_sq = tl.reduce((part, part_sq), 0, _add2)
    count = img_size * c_per_group
    mean = total / count
    rstd = 1.0 / tl.sqrt(tl.maximum(total_sq / count - mean * mean, 0.0) + eps)
    scale = gamma * rstd
    y = x * scale + (beta - mean * scale)
    if ACTIVATION_SILU:
        y = y * tl.sigmoid(y)
    tl.store(output_ptr + offs, y.to(output_ptr.dtype.element_ty), mask=mask)


DTYPES = ("fp32", "fp16", "bf16")
ELEMENTS = (1024, 2048, 4096, 8192, 16384)  # VECTORS * VEC: values per program


def vectors_of(dtype: str) -> tuple[int, ...]:
    """VEC choices: channel runs up to one 16-byte load."""
    return (1, 2, 4) if dtype == "fp32" else (1, 2, 4, 8)


def warp_choices(elems: int) -> list[int]:
    """16 or 32 values per thread, 4 to 16 warps (1024 threads with AMD's 64-wide wavefronts; at 32
    warps on CUDA, 64 registers per thread cannot hold gamma and beta beside x, and they spill)."""
    return sorted({max(4, min(16, elems // (32 * per_thread))) for per_thread in (16, 32)})


def variants(dtype: str) -> list[tuple[int, int, int]]:
    """(VEC, values per program, num_warps) of every kernel of a group."""
    return [(vec, e, w) for vec in vectors_of(dtype) for e in ELEMENTS for w in warp_choices(e)]


# ORT's 14 arguments; 16-byte aligned tensors, so a VEC-aligned vector is VEC-aligned in memory.
SIG = "*{t}:16,*{t}:16,*{t}:16,*{t}:16,*{t}:16,*fp32:16,*fp32:16,i32,i32,i32,fp32,i1,i1,i1"


def get_function_table():
    table = []
    for silu in (True, False):
        act = "Silu" if silu else "Pass"
        for dtype in DTYPES:
            for vec, elems, warps in variants(dtype):
                table.append({
                    "name": f"GroupNormWhole_{act}_{dtype}_v{vec}_e{elems}_w{warps}",
                    "group": f"GroupNormWhole_{act}_{dtype}",
                    "func": group_norm_whole_kernel,
                    "sig": SIG.format(t=dtype),
                    "kwargs": {"num_warps": warps, "constants": {
                        "VECTORS": elems // vec, "VEC": vec, "ACTIVATION_SILU": int(silu)}},
                })
    return table


def get_launch_contracts():
    contract = {
        "params": ["in", "skip", "bias", "out", "add_out", "gamma", "beta", "hw", "c", "c_per_group", "eps",
                   "has_skip", "has_bias", "broadcast_skip"],
        "grid": ["n", "groups", "1"],
        # The group fits, and fills more than half the program (a smaller kernel does it otherwise).
        "requires": ["c_per_group % VEC == 0", "hw * (c_per_group // VEC) <= VECTORS",
                     "2 * hw * (c_per_group // VEC) > VECTORS", "ACTIVATION_SILU == silu"],
        "doc": "NHWC; one program per (image, group) holding it whole as VEC-channel vectors; "
               "16-byte aligned pointers",
    }
    return {f"GroupNormWhole_{act}_{dt}": contract for act in ("Silu", "Pass") for dt in DTYPES}
