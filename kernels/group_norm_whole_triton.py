"""GroupNorm of small NHWC images: one program holds a whole (image, group) in registers, read as vectors.

At the small UNet levels (8x8, 16x16; 32x32 up to 640 channels) a group is 1K to 20K values. ORT's kernel
(group_norm_triton.py) reads it one element at a time: nothing tells the compiler that c_per_group (10,
20, 40 in Stable Diffusion) is a multiple of anything. Here a group is a list of VEC-channel vectors
(vector v is pixel v // (c_per_group / VEC)); the contract asks VEC to divide c_per_group, so each
vector loads as one instruction (8 fp16 values: 16 bytes). Triton's tensors are powers of two long, so
a program holds VECTORS vectors plus a TAIL of VECTORS / 4: Stable Diffusion's groups are 5 * 2^k
vectors (H*W pixels of 5 vectors), which then fill a program with no lane computing padding.

A program reads its group once (+ skip + bias, writing add_out), reduces sum and sum of squares in
fp32, and writes (x - mean) * rstd * gamma + beta, then SiLU: traffic is the minimum, one read and one
write. gamma, beta and the bias are read per vector too: a few hundred bytes that stay in L1. gamma and
beta are loaded with x, not after the reduction where they were two more dependent round trips (3-10%
on the H200).
Same semantics as ORT's kernel (variance E[x^2] - E[x]^2 in fp32, skip full or broadcast over H*W),
its 14 arguments and grid (n, groups, 1), but its own group `GroupNormWhole_{Silu|Pass}_<dtype>`:
ORT's C++ would launch these with its rules, which do not know VEC.

Group `GroupNormParts_{Silu|Pass}_<dtype>` holds a group on a team of PARTS programs (grid (n, groups,
PARTS), cooperative, a workspace line per team) for groups whose single program would be too long a
chain: 16x16 and 32x32 in Stable Diffusion. Group `GroupNormSpread_{Silu|Pass}_<dtype>` splits the
writes the same way with no exchange: each member reads the whole group for the statistics (plain
launch, no workspace), for groups small enough that reading one PARTS times from L2 is cheaper.
"""

import triton
import triton.language as tl
from _grid_sync import team_sums


@triton.jit
def _add2(a, b, c, d):
    return a + c, b + d


@triton.jit
def _vectors(input_ptr, skip_ptr, bias_ptr, add_out_ptr, gamma_ptr, beta_ptr, image, group, img_size, c_vec, cpg,
             per_pixel, has_skip, has_bias, broadcast_skip, FIRST: tl.constexpr, N: tl.constexpr, VEC: tl.constexpr,
             NORMALISED: tl.constexpr = True):
    """Vectors FIRST .. FIRST + N of the group: x (+ skip + bias, written to add_out), gamma, beta and
    where they are. Offsets are built from multiples of VEC so the compiler can prove the alignment.
    Vectors that are only summed (not NORMALISED) skip gamma, beta (x stands in) and add_out."""
    v = FIRST + tl.arange(0, N)
    pixel = v // per_pixel
    chans = (group * cpg + (v - pixel * per_pixel) * VEC)[:, None] + tl.arange(0, VEC)[None, :]
    mask = tl.broadcast_to((pixel < img_size)[:, None], [N, VEC])
    offs = (image * img_size + pixel)[:, None] * c_vec + chans
    x = tl.load(input_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    if NORMALISED:
        gamma = tl.load(gamma_ptr + chans, mask=mask, other=0.0)
        beta = tl.load(beta_ptr + chans, mask=mask, other=0.0)
    else:
        gamma = x
        beta = x
    if has_skip:
        if broadcast_skip:
            x += tl.load(skip_ptr + image * c_vec + chans, mask=mask, other=0.0).to(tl.float32)
        else:
            x += tl.load(skip_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    if has_bias:
        x += tl.load(bias_ptr + chans, mask=mask, other=0.0).to(tl.float32)
    x = tl.where(mask, x, 0.0)
    if has_skip and NORMALISED:
        tl.store(add_out_ptr + offs, x.to(add_out_ptr.dtype.element_ty), mask=mask)
    return x, gamma, beta, offs, mask


@triton.jit
def _member(input_ptr, skip_ptr, add_out_ptr, output_ptr, image, part, img_size, c_vec, broadcast_skip,
            PARTS: tl.constexpr):
    """A team member's pixels [part * P, part * P + P), P = cdiv(H*W, PARTS), as an image of their own:
    how many it holds, and the tensors' pointers moved to its first pixel."""
    pixels = tl.cdiv(img_size, PARTS)
    first = image * img_size + part * pixels
    mine = tl.minimum(pixels, img_size - part * pixels)
    in_ptr = input_ptr + first * c_vec
    add_ptr = add_out_ptr + first * c_vec
    out_ptr = output_ptr + first * c_vec
    if broadcast_skip:
        sk_ptr = skip_ptr + image * c_vec
    else:
        sk_ptr = skip_ptr + first * c_vec
    return mine, in_ptr, sk_ptr, add_ptr, out_ptr


@triton.jit
def _sums(x):
    part, part_sq = tl.reduce((x, x * x), 1, _add2)
    return tl.reduce((part, part_sq), 0, _add2)


@triton.jit
def _mean_rstd(total, total_sq, count, eps):
    mean = total / count
    return mean, 1.0 / tl.sqrt(tl.maximum(total_sq / count - mean * mean, 0.0) + eps)


@triton.jit
def _write(x, gamma, beta, offs, mask, mean, rstd, output_ptr, ACTIVATION_SILU: tl.constexpr):
    scale = gamma * rstd
    y = x * scale + (beta - mean * scale)
    if ACTIVATION_SILU:
        y = y * tl.sigmoid(y)
    tl.store(output_ptr + offs, y.to(output_ptr.dtype.element_ty), mask=mask)


@triton.jit
def group_norm_whole_kernel(input_ptr, skip_ptr, bias_ptr, output_ptr, add_out_ptr, gamma_ptr, beta_ptr,
                            img_size, c, c_per_group, eps, has_skip, has_bias, broadcast_skip,
                            VECTORS: tl.constexpr, TAIL: tl.constexpr, VEC: tl.constexpr,
                            ACTIVATION_SILU: tl.constexpr):
    image = tl.program_id(0).to(tl.int64)
    group = tl.program_id(1)
    per_pixel = c_per_group // VEC
    cpg = per_pixel * VEC  # c_per_group and c under the contract, written as multiples of VEC
    c_vec = (c // VEC) * VEC
    # Every load is issued before the first reduction waits on any.
    x, gamma, beta, offs, mask = _vectors(input_ptr, skip_ptr, bias_ptr, add_out_ptr, gamma_ptr, beta_ptr, image,
                                          group, img_size, c_vec, cpg, per_pixel, has_skip, has_bias,
                                          broadcast_skip, 0, VECTORS, VEC)
    if TAIL > 0:
        x2, gamma2, beta2, offs2, mask2 = _vectors(input_ptr, skip_ptr, bias_ptr, add_out_ptr, gamma_ptr, beta_ptr,
                                                   image, group, img_size, c_vec, cpg, per_pixel, has_skip,
                                                   has_bias, broadcast_skip, VECTORS, TAIL, VEC)
    total, total_sq = _sums(x)
    if TAIL > 0:
        total, total_sq = _add2(total, total_sq, *_sums(x2))
    mean, rstd = _mean_rstd(total, total_sq, img_size * c_per_group, eps)
    _write(x, gamma, beta, offs, mask, mean, rstd, output_ptr, ACTIVATION_SILU)
    if TAIL > 0:
        _write(x2, gamma2, beta2, offs2, mask2, mean, rstd, output_ptr, ACTIVATION_SILU)


@triton.jit
def _team_member(input_ptr, skip_ptr, bias_ptr, output_ptr, add_out_ptr, gamma_ptr, beta_ptr, ws_ptr, img_size, c,
                 c_per_group, eps, has_skip, has_bias, broadcast_skip, VECTORS: tl.constexpr, TAIL: tl.constexpr,
                 VEC: tl.constexpr, PARTS: tl.constexpr, ACTIVATION_SILU: tl.constexpr, EXCHANGE: tl.constexpr):
    """One member of a team of PARTS programs on grid (n, groups, PARTS): it holds and writes its own
    pixels and gets the group's sums either from the team (EXCHANGE) or by reading the whole group."""
    image = tl.program_id(0).to(tl.int64)
    group = tl.program_id(1)
    part = tl.program_id(2)
    per_pixel = c_per_group // VEC
    cpg = per_pixel * VEC
    c_vec = (c // VEC) * VEC
    mine, in_ptr, sk_ptr, add_ptr, out_ptr = _member(input_ptr, skip_ptr, add_out_ptr, output_ptr, image, part,
                                                     img_size, c_vec, broadcast_skip, PARTS)
    x, gamma, beta, offs, mask = _vectors(in_ptr, sk_ptr, bias_ptr, add_ptr, gamma_ptr, beta_ptr, 0, group, mine,
                                          c_vec, cpg, per_pixel, has_skip, has_bias, broadcast_skip, 0, VECTORS,
                                          VEC)
    if TAIL > 0:
        x2, gamma2, beta2, offs2, mask2 = _vectors(in_ptr, sk_ptr, bias_ptr, add_ptr, gamma_ptr, beta_ptr, 0, group,
                                                   mine, c_vec, cpg, per_pixel, has_skip, has_bias, broadcast_skip,
                                                   VECTORS, TAIL, VEC)
    if EXCHANGE:
        total, total_sq = _sums(x)
        if TAIL > 0:
            total, total_sq = _add2(total, total_sq, *_sums(x2))
        # The team's 512-byte workspace line (kernels/_grid_sync.py; 64 + 16 * PARTS bytes are used).
        line = ws_ptr + (image * tl.num_programs(1) + group) * 128
        total, total_sq = team_sums(line, part, total, total_sq, PARTS)
    else:
        # The whole group (PARTS members' worth of vectors), for the sums only.
        xs, _, _, _, _ = _vectors(input_ptr, skip_ptr, bias_ptr, add_out_ptr, gamma_ptr, beta_ptr, image, group,
                                  img_size, c_vec, cpg, per_pixel, has_skip, has_bias, broadcast_skip, 0,
                                  PARTS * VECTORS, VEC, False)
        total, total_sq = _sums(xs)
        if TAIL > 0:
            xs2, _, _, _, _ = _vectors(input_ptr, skip_ptr, bias_ptr, add_out_ptr, gamma_ptr, beta_ptr, image, group,
                                       img_size, c_vec, cpg, per_pixel, has_skip, has_bias, broadcast_skip,
                                       PARTS * VECTORS, PARTS * TAIL, VEC, False)
            total, total_sq = _add2(total, total_sq, *_sums(xs2))
    mean, rstd = _mean_rstd(total, total_sq, img_size * c_per_group, eps)
    _write(x, gamma, beta, offs, mask, mean, rstd, out_ptr, ACTIVATION_SILU)
    if TAIL > 0:
        _write(x2, gamma2, beta2, offs2, mask2, mean, rstd, out_ptr, ACTIVATION_SILU)


# A team of PARTS programs per (image, group). One program per group leaves half the H200's SMs idle
# at n=2 with 32 groups, and its time grows with the group (a longer load, reduce, write chain per
# SM). Here each member holds the group's pixels [part * P, part * P + P), P = cdiv(H*W, PARTS), as
# above, and the team adds up its sums through one workspace line (_grid_sync.team_sums: two stores and a
# poll, about 1 us on the H200; a counter with fences, as in GroupNormSplit, cost about 2 us).
@triton.jit
def group_norm_parts_kernel(input_ptr, skip_ptr, bias_ptr, output_ptr, add_out_ptr, gamma_ptr, beta_ptr, ws_ptr,
                            img_size, c, c_per_group, eps, has_skip, has_bias, broadcast_skip,
                            VECTORS: tl.constexpr, TAIL: tl.constexpr, VEC: tl.constexpr, PARTS: tl.constexpr,
                            ACTIVATION_SILU: tl.constexpr):
    _team_member(input_ptr, skip_ptr, bias_ptr, output_ptr, add_out_ptr, gamma_ptr, beta_ptr, ws_ptr, img_size, c,
                 c_per_group, eps, has_skip, has_bias, broadcast_skip, VECTORS, TAIL, VEC, PARTS, ACTIVATION_SILU, True)


# The same team with no exchange at all: every member reads the whole group for its sums (the same
# values in the same order, so all members agree to the bit) and normalises and writes only its own
# pixels. Siblings read the same lines at once, so DRAM traffic should stay one read and one write;
# what grows is L2-to-SM traffic, PARTS times the group, which is cheap while groups are small (a
# 5K-value group at 16x16x640 is 10 KB in fp16) and costs less than the 1 us exchange. A plain launch,
# no workspace.
@triton.jit
def group_norm_spread_kernel(input_ptr, skip_ptr, bias_ptr, output_ptr, add_out_ptr, gamma_ptr, beta_ptr,
                             img_size, c, c_per_group, eps, has_skip, has_bias, broadcast_skip,
                             VECTORS: tl.constexpr, TAIL: tl.constexpr, VEC: tl.constexpr, PARTS: tl.constexpr,
                             ACTIVATION_SILU: tl.constexpr):
    # No workspace: input_ptr stands in for it, unused without EXCHANGE.
    _team_member(input_ptr, skip_ptr, bias_ptr, output_ptr, add_out_ptr, gamma_ptr, beta_ptr, input_ptr, img_size,
                 c, c_per_group, eps, has_skip, has_bias, broadcast_skip, VECTORS, TAIL, VEC, PARTS, ACTIVATION_SILU,
                 False)


DTYPES = ("fp32", "fp16", "bf16")
ELEMENTS = (1024, 2048, 4096, 8192, 16384)  # VECTORS * VEC: values per program, without the tail
TAILS = (0, 4)  # TAIL = VECTORS / 4: 1.25 x a power of two (Stable Diffusion's groups are 5 * 2^k vectors)


def vectors_of(dtype: str) -> tuple[int, ...]:
    """VEC choices: channel runs up to one 16-byte load."""
    return (1, 2, 4) if dtype == "fp32" else (1, 2, 4, 8)


def warp_choices(elems: int) -> list[int]:
    """16 or 32 values per thread, 4 to 16 warps (1024 threads with AMD's 64-wide wavefronts; at 32
    warps on CUDA, 64 registers per thread cannot hold gamma and beta beside x, and they spill)."""
    return sorted({max(4, min(16, elems // (32 * per_thread))) for per_thread in (16, 32)})


def variants(dtype: str) -> list[tuple[int, int, int, int]]:
    """(VEC, VECTORS, TAIL, num_warps) of every kernel of a group."""
    return [(vec, e // vec, e // vec // t if t else 0, w) for vec in vectors_of(dtype) for e in ELEMENTS
            for t in TAILS for w in warp_choices(e)]


PARTS = (2, 4, 8, 16)  # members of a team
PART_ELEMENTS = (1024, 2048, 4096)  # values per member, without the tail


def part_variants(dtype: str) -> list[tuple[int, int, int, int, int]]:
    """(PARTS, VEC, VECTORS, TAIL, num_warps) of every kernel of a team group. VEC 2 and 4 only:
    VEC 8 timed the same as 4 (fp16, H200), and a group whose channels allow no vector is left to
    the single-program kernels."""
    return [(p, vec, e // vec, e // vec // t if t else 0, w) for p in PARTS for vec in (2, 4)
            for e in PART_ELEMENTS for t in TAILS for w in warp_choices(e)]


SPREAD_PARTS = (2, 4, 8)
SPREAD_ELEMENTS = (512, 1024, 2048, 4096)  # values per member, without the tail
SPREAD_GROUP = 16384  # at most PARTS * SPREAD_ELEMENTS values read for the sums (+ the tail): 20K-value groups


def spread_variants(dtype: str) -> list[tuple[int, int, int, int, int]]:
    """(PARTS, VEC, VECTORS, TAIL, num_warps) of every kernel of a spread group: warps for the whole
    group's tile, 8 or 16 values per thread (4 to 16 warps; more threads won at 16x16 on the H200)."""
    return [(p, vec, e // vec, e // vec // t if t else 0, w)
            for p in SPREAD_PARTS for vec in (2, 4) for e in SPREAD_ELEMENTS if p * e <= SPREAD_GROUP
            for t in TAILS for w in sorted({max(4, min(16, p * e // per)) for per in (256, 512)})]


# ORT's 14 arguments; 16-byte aligned tensors, so a VEC-aligned vector is VEC-aligned in memory.
SIG = "*{t}:16,*{t}:16,*{t}:16,*{t}:16,*{t}:16,*fp32:16,*fp32:16,i32,i32,i32,fp32,i1,i1,i1"
# The same with the team workspace after beta.
SIG_PARTS = "*{t}:16,*{t}:16,*{t}:16,*{t}:16,*{t}:16,*fp32:16,*fp32:16,*i32:16,i32,i32,i32,fp32,i1,i1,i1"


def get_function_table():
    table = []
    for silu in (True, False):
        act = "Silu" if silu else "Pass"
        for dtype in DTYPES:
            for vec, vectors, tail, warps in variants(dtype):
                table.append({
                    "name": f"GroupNormWhole_{act}_{dtype}_v{vec}_e{(vectors + tail) * vec}_w{warps}",
                    "group": f"GroupNormWhole_{act}_{dtype}",
                    "func": group_norm_whole_kernel,
                    "sig": SIG.format(t=dtype),
                    "kwargs": {"num_warps": warps, "constants": {
                        "VECTORS": vectors, "TAIL": tail, "VEC": vec, "ACTIVATION_SILU": int(silu)}},
                })
            teams = (("GroupNormParts", group_norm_parts_kernel, SIG_PARTS, part_variants),
                     ("GroupNormSpread", group_norm_spread_kernel, SIG, spread_variants))
            for family, func, sig, team_variants in teams:
                for parts, vec, vectors, tail, warps in team_variants(dtype):
                    table.append({
                        "name": f"{family}_{act}_{dtype}_p{parts}_v{vec}_e{(vectors + tail) * vec}_w{warps}",
                        "group": f"{family}_{act}_{dtype}",
                        "func": func,
                        "sig": sig.format(t=dtype),
                        "kwargs": {"num_warps": warps, "constants": {"VECTORS": vectors, "TAIL": tail, "VEC": vec,
                                                                     "PARTS": parts,
                                                                     "ACTIVATION_SILU": int(silu)}},
                    })
    return table


def get_launch_contracts():
    contract = {
        "params": ["in", "skip", "bias", "out", "add_out", "gamma", "beta", "hw", "c", "c_per_group", "eps",
                   "has_skip", "has_bias", "broadcast_skip"],
        "grid": ["n", "groups", "1"],
        # The group fits, and fills more than half the program (a smaller kernel does it otherwise).
        "requires": ["c_per_group % VEC == 0", "hw * (c_per_group // VEC) <= VECTORS + TAIL",
                     "2 * hw * (c_per_group // VEC) > VECTORS + TAIL", "ACTIVATION_SILU == silu"],
        "doc": "NHWC; one program per (image, group) holding it whole as VEC-channel vectors; "
               "16-byte aligned pointers",
    }
    # A member holds cdiv(hw, PARTS) pixels; the team's members must all be resident (they wait for
    # each other), and each team owns a 512-byte workspace line.
    member = "cdiv(hw, PARTS) * (c_per_group // VEC)"
    parts = {
        "params": [*contract["params"][:7], "ws", *contract["params"][7:]],
        "grid": ["n", "groups", "PARTS"],
        "requires": ["c_per_group % VEC == 0", f"{member} <= VECTORS + TAIL", f"2 * {member} > VECTORS + TAIL",
                     "ACTIVATION_SILU == silu", "n * groups * PARTS <= resident"],
        "workspace": "512 * n * groups",
        "cooperative": True,
        "doc": "NHWC; a team of PARTS programs per (image, group), each holding cdiv(hw, PARTS) pixels of it "
               "as VEC-channel vectors, cooperative; 16-byte aligned pointers",
    }
    # The same members with no exchange: any number of them may run at once.
    spread = {
        **contract,
        "grid": parts["grid"],
        "requires": parts["requires"][:4],
        "doc": "NHWC; PARTS programs per (image, group), each reading the whole group for its statistics and "
               "writing cdiv(hw, PARTS) pixels of it as VEC-channel vectors; 16-byte aligned pointers",
    }
    families = (("GroupNormWhole", contract), ("GroupNormParts", parts), ("GroupNormSpread", spread))
    return {f"{family}_{act}_{dt}": spec for family, spec in families for act in ("Silu", "Pass") for dt in DTYPES}
