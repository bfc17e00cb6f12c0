"""GroupNorm of small NHWC images by a team of programs that add up their sums in shared memory.

`GroupNormParts` (group_norm_whole_triton.py) splits an (image, group) over a team of PARTS programs,
each holding cdiv(H*W, PARTS) pixels, and the team adds up its two sums through a line in global
memory: a store and a poll through L2, about 1 us on an H200, plus a cooperative launch. Here the team
is a thread-block cluster (sm_90+) and the members swap their two sums through their shared memories
(kernels/_cluster.py: `st.async` pushes counted on an mbarrier, 0.3 us at 2 x 16x16 x 640 fp16 where the
global line costs 1.3 us), each adding them up in rank order, so every member gets the same bits. A
plain launch with a cluster dimension, no workspace: the hardware schedules a cluster's programs
together.

Group `GroupNormCluster_{Silu|Pass}_<dtype>`: ORT's 14 arguments, grid (n, groups, PARTS) in
clusters of (1, 1, PARTS); the launch must carry the cluster dimension (runtime/cuda.py), which ORT's
launcher does not do, so ORT's own groups never list these kernels. Inline PTX: CUDA only, sm_90+.
"""

import triton
import triton.language as tl
from _cluster import _cluster_start, _cluster_sums
from group_norm_whole_triton import SIG, _add2, _mean_rstd, _member, _sums, _vectors, _write, part_variants

PLATFORMS = ("cuda",)  # inline PTX
MIN_SM = 90  # thread-block clusters and distributed shared memory


@triton.jit
def group_norm_cluster_kernel(input_ptr, skip_ptr, bias_ptr, output_ptr, add_out_ptr, gamma_ptr, beta_ptr,
                              img_size, c, c_per_group, eps, has_skip, has_bias, broadcast_skip,
                              VECTORS: tl.constexpr, TAIL: tl.constexpr, VEC: tl.constexpr, PARTS: tl.constexpr,
                              ACTIVATION_SILU: tl.constexpr):
    _cluster_start(PARTS)
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
    total, total_sq = _sums(x)
    if TAIL > 0:
        total, total_sq = _add2(total, total_sq, *_sums(x2))
    total, total_sq = _cluster_sums(total, total_sq, PARTS)
    mean, rstd = _mean_rstd(total, total_sq, img_size * c_per_group, eps)
    _write(x, gamma, beta, offs, mask, mean, rstd, out_ptr, ACTIVATION_SILU)
    if TAIL > 0:
        _write(x2, gamma2, beta2, offs2, mask2, mean, rstd, out_ptr, ACTIVATION_SILU)


DTYPES = ("fp32", "fp16", "bf16")
MAX_PARTS = 8  # the largest portable cluster (and the slots _cluster_sums adds up)


def cluster_variants(dtype: str) -> list[tuple[int, int, int, int, int]]:
    """(PARTS, VEC, VECTORS, TAIL, num_warps): the cooperative teams' shapes, up to 8 members."""
    return [v for v in part_variants(dtype) if v[0] <= MAX_PARTS]


def get_function_table():
    table = []
    for silu in (True, False):
        act = "Silu" if silu else "Pass"
        for dtype in DTYPES:
            for parts, vec, vectors, tail, warps in cluster_variants(dtype):
                table.append({
                    "name": f"GroupNormCluster_{act}_{dtype}_p{parts}_v{vec}_e{(vectors + tail) * vec}_w{warps}",
                    "group": f"GroupNormCluster_{act}_{dtype}",
                    "func": group_norm_cluster_kernel,
                    "sig": SIG.format(t=dtype),
                    "kwargs": {"num_warps": warps, "constants": {"VECTORS": vectors, "TAIL": tail, "VEC": vec,
                                                                 "PARTS": parts, "ACTIVATION_SILU": int(silu)}},
                })
    return table


def get_launch_contracts():
    member = "cdiv(hw, PARTS) * (c_per_group // VEC)"
    contract = {
        "params": ["in", "skip", "bias", "out", "add_out", "gamma", "beta", "hw", "c", "c_per_group", "eps",
                   "has_skip", "has_bias", "broadcast_skip"],
        "grid": ["n", "groups", "PARTS"],
        "cluster": ["1", "1", "PARTS"],
        "requires": ["c_per_group % VEC == 0", f"{member} <= VECTORS + TAIL", f"2 * {member} > VECTORS + TAIL",
                     "ACTIVATION_SILU == silu"],
        "doc": "NHWC; a cluster of PARTS programs per (image, group), each holding cdiv(hw, PARTS) pixels of it as "
               "VEC-channel vectors, sums added up in shared memory; 16-byte aligned pointers",
    }
    return {f"GroupNormCluster_{act}_{dt}": contract for act in ("Silu", "Pass") for dt in DTYPES}
