"""GroupNorm vector loads: an (image, group) of NHWC activations as a list of VEC-channel vectors.

Vector v of a group is pixel v // (c_per_group / VEC); a contract that asks VEC to divide c_per_group
lets every vector load as one instruction (8 fp16 values: 16 bytes). Triton's tensors are powers of
two long, so a program holds VECTORS vectors plus a TAIL of VECTORS / 4: Stable Diffusion's groups are
5 * 2^k vectors, which then fill a program with no lane computing padding. A team member holds its own
pixels of the group the same way (`member`, `team_member`), and the team adds up its sums in its
cluster's shared memories (kernels/_cluster.py) or through a line of a workspace (kernels/_grid_sync.py).
Variance is E[x^2] - E[x]^2 in fp32, as ORT computes it.
"""

import triton
import triton.language as tl
from _cluster import cluster_sums
from _grid_sync import team_sums

# ORT's 14 GroupNorm arguments, the tensors 16-byte aligned so that a VEC-aligned vector is aligned in memory.
VECTOR_SIG = "*{t}:16,*{t}:16,*{t}:16,*{t}:16,*{t}:16,*fp32:16,*fp32:16,i32,i32,i32,fp32,i1,i1,i1"
# ORT's arguments of a launch contract, by role.
ROLES = ["in", "skip", "bias", "out", "add_out", "gamma", "beta", "hw", "c", "c_per_group", "eps", "has_skip",
         "has_bias", "broadcast_skip"]


@triton.jit
def add2(a, b, c, d):
    return a + c, b + d


@triton.jit
def vectors(input_ptr, skip_ptr, bias_ptr, add_out_ptr, gamma_ptr, beta_ptr, image, group, img_size, c_vec, cpg,
            per_pixel, has_skip, has_bias, broadcast_skip, FIRST: tl.constexpr, N: tl.constexpr, VEC: tl.constexpr):
    """Vectors FIRST .. FIRST + N of the group: x (+ skip + bias, written to add_out), gamma, beta and
    where they are. Offsets are built from multiples of VEC so the compiler can prove the alignment."""
    v = FIRST + tl.arange(0, N)
    pixel = v // per_pixel
    chans = (group * cpg + (v - pixel * per_pixel) * VEC)[:, None] + tl.arange(0, VEC)[None, :]
    mask = tl.broadcast_to((pixel < img_size)[:, None], [N, VEC])
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
    return x, gamma, beta, offs, mask


@triton.jit
def member(input_ptr, skip_ptr, add_out_ptr, output_ptr, image, part, img_size, c_vec, broadcast_skip,
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
def sums(x):
    part, part_sq = tl.reduce((x, x * x), 1, add2)
    return tl.reduce((part, part_sq), 0, add2)


@triton.jit
def mean_rstd(total, total_sq, count, eps):
    mean = total / count
    return mean, 1.0 / tl.sqrt(tl.maximum(total_sq / count - mean * mean, 0.0) + eps)


@triton.jit
def write(x, gamma, beta, offs, mask, mean, rstd, output_ptr, ACTIVATION_SILU: tl.constexpr):
    scale = gamma * rstd
    y = x * scale + (beta - mean * scale)
    if ACTIVATION_SILU:
        y = y * tl.sigmoid(y)
    tl.store(output_ptr + offs, y.to(output_ptr.dtype.element_ty), mask=mask)


@triton.jit
def team_member(input_ptr, skip_ptr, bias_ptr, output_ptr, add_out_ptr, gamma_ptr, beta_ptr, ws_ptr, img_size, c,
                c_per_group, eps, has_skip, has_bias, broadcast_skip, VECTORS: tl.constexpr, TAIL: tl.constexpr,
                VEC: tl.constexpr, PARTS: tl.constexpr, ACTIVATION_SILU: tl.constexpr, CLUSTER: tl.constexpr):
    """One member of a team of PARTS programs on grid (n, groups, PARTS): it holds and writes its own
    pixels, and the team adds up its sums in its cluster's shared memories (CLUSTER, sm_90+) or through
    its 512-byte line of the workspace `ws_ptr` (the team resident at once: a cooperative launch)."""
    image = tl.program_id(0).to(tl.int64)
    group = tl.program_id(1)
    part = tl.program_id(2)
    per_pixel = c_per_group // VEC
    cpg = per_pixel * VEC
    c_vec = (c // VEC) * VEC
    mine, in_ptr, sk_ptr, add_ptr, out_ptr = member(input_ptr, skip_ptr, add_out_ptr, output_ptr, image, part,
                                                    img_size, c_vec, broadcast_skip, PARTS)
    x, gamma, beta, offs, mask = vectors(in_ptr, sk_ptr, bias_ptr, add_ptr, gamma_ptr, beta_ptr, 0, group, mine,
                                         c_vec, cpg, per_pixel, has_skip, has_bias, broadcast_skip, 0, VECTORS, VEC)
    if TAIL > 0:
        x2, gamma2, beta2, offs2, mask2 = vectors(in_ptr, sk_ptr, bias_ptr, add_ptr, gamma_ptr, beta_ptr, 0, group,
                                                  mine, c_vec, cpg, per_pixel, has_skip, has_bias, broadcast_skip,
                                                  VECTORS, TAIL, VEC)
    total, total_sq = sums(x)
    if TAIL > 0:
        total, total_sq = add2(total, total_sq, *sums(x2))
    if CLUSTER:
        total, total_sq = cluster_sums(total, total_sq, PARTS)
    else:
        line = ws_ptr + (image * tl.num_programs(1) + group) * 128  # int32 words: 512 bytes per team
        total, total_sq = team_sums(line, part, total, total_sq, PARTS)
    mean, rstd = mean_rstd(total, total_sq, img_size * c_per_group, eps)
    write(x, gamma, beta, offs, mask, mean, rstd, out_ptr, ACTIVATION_SILU)
    if TAIL > 0:
        write(x2, gamma2, beta2, offs2, mask2, mean, rstd, out_ptr, ACTIVATION_SILU)


# A team's shapes (PARTS, VEC, elements without the tail, TAIL as a fraction 1/TAILS or 0, num_warps): the
# ones that are the fastest somewhere on the benchmark grids, for both the cluster and the cooperative teams.
TEAMS = [(2, 4, 2048, 0, 4), (4, 2, 1024, 0, 4), (4, 4, 1024, 0, 4), (4, 4, 2048, 0, 4), (8, 2, 1024, 0, 4),
         (8, 4, 1024, 0, 4), (8, 4, 2048, 0, 4), (8, 4, 2048, 4, 4), (8, 4, 4096, 4, 4), (8, 2, 4096, 4, 8)]


DTYPES = ("fp32", "fp16", "bf16")
# A member holds cdiv(hw, PARTS) pixels; they fit its vectors and fill more than half of them.
TEAM_REQUIRES = ["c_per_group % VEC == 0", "cdiv(hw, PARTS) * (c_per_group // VEC) <= VECTORS + TAIL",
                 "2 * cdiv(hw, PARTS) * (c_per_group // VEC) > VECTORS + TAIL", "ACTIVATION_SILU == silu"]


def team_table(family: str, func, sig: str) -> list[dict]:
    """The function table of a team family `<family>_{Silu|Pass}_<dtype>`: every shape of TEAMS."""
    table = []
    for silu in (True, False):
        act = "Silu" if silu else "Pass"
        for dtype in DTYPES:
            for parts, vec, e, t, warps in TEAMS:
                vectors = e // vec
                tail = vectors // t if t else 0
                table.append({
                    "name": f"{family}_{act}_{dtype}_p{parts}_v{vec}_e{(vectors + tail) * vec}_w{warps}",
                    "group": f"{family}_{act}_{dtype}",
                    "func": func,
                    "sig": sig.format(t=dtype),
                    "kwargs": {"num_warps": warps, "constants": {"VECTORS": vectors, "TAIL": tail, "VEC": vec,
                                                                 "PARTS": parts, "ACTIVATION_SILU": int(silu)}},
                })
    return table
