"""GroupNorm by a cooperative team of programs per (image, group) that add up their sums in global memory.

One program per (image, group) leaves half an H100/H200's SMs idle at n = 2 with 32 groups, and its
time grows with the group. Here a team of PARTS programs holds the group, each member cdiv(H*W, PARTS)
pixels of it as VEC-channel vectors, and the team adds up its two sums through one 512-byte line of a
workspace: two tagged stores and a poll (kernels/_grid_sync.py), which is safe only while the whole
team is resident, so launches are cooperative. On sm_90+ the same teams run as thread-block clusters
(group_norm_cluster_triton.py); this family is their stand-in where clusters are not available, and is
built for CUDA up to sm_89 (MAX_SM) and for ROCm.

Group `GroupNormParts_{Silu|Pass}_<dtype>`: ORT's 14 arguments with the workspace after beta, grid
(n, groups, PARTS), cooperative; a candidate when VEC divides c_per_group, a member's pixels fill
more than half of its VECTORS + TAIL vectors, and every program of the grid is resident; 16-byte
aligned tensors.
"""

import triton
import triton.language as tl
from _group_norm_vectors import DTYPES, ROLES, TEAM_REQUIRES, team_member, team_table

MAX_SM = 89  # sm_90+ runs these teams as clusters (group_norm_cluster_triton.py)


@triton.jit
def group_norm_parts_kernel(input_ptr, skip_ptr, bias_ptr, output_ptr, add_out_ptr, gamma_ptr, beta_ptr, ws_ptr,
                            img_size, c, c_per_group, eps, has_skip, has_bias, broadcast_skip,
                            VECTORS: tl.constexpr, TAIL: tl.constexpr, VEC: tl.constexpr, PARTS: tl.constexpr,
                            ACTIVATION_SILU: tl.constexpr):
    team_member(input_ptr, skip_ptr, bias_ptr, output_ptr, add_out_ptr, gamma_ptr, beta_ptr, ws_ptr, img_size, c,
                c_per_group, eps, has_skip, has_bias, broadcast_skip, VECTORS, TAIL, VEC, PARTS, ACTIVATION_SILU,
                False)


# ORT's 14 arguments with the team workspace after beta; 16-byte aligned tensors.
SIG = "*{t}:16,*{t}:16,*{t}:16,*{t}:16,*{t}:16,*fp32:16,*fp32:16,*i32:16,i32,i32,i32,fp32,i1,i1,i1"


def get_function_table():
    return team_table("GroupNormParts", group_norm_parts_kernel, SIG)


def get_launch_contracts():
    contract = {
        "params": [*ROLES[:7], "ws", *ROLES[7:]],
        "grid": ["n", "groups", "PARTS"],
        "requires": [*TEAM_REQUIRES, "n * groups * PARTS <= resident"],
        "workspace": "512 * n * groups",
        "cooperative": True,
        "doc": "NHWC; a team of PARTS programs per (image, group), each holding cdiv(hw, PARTS) pixels of it "
               "as VEC-channel vectors, cooperative; 16-byte aligned pointers",
    }
    return {f"GroupNormParts_{act}_{dt}": contract for act in ("Silu", "Pass") for dt in DTYPES}
