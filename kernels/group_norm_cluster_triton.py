"""GroupNorm by a thread-block cluster per (image, group) whose members add up their sums in shared memory.

The teams of group_norm_parts_triton.py as clusters (sm_90+): each of PARTS members holds
cdiv(H*W, PARTS) pixels of the group as VEC-channel vectors, and the members swap their two sums
through their shared memories (kernels/_cluster.py: `st.async` pushes counted on an mbarrier), each
adding them up in rank order, so every member gets the same bits. A plain launch with a cluster
dimension and no workspace: the hardware schedules a cluster's programs together.

Group `GroupNormCluster_{Silu|Pass}_<dtype>`: ORT's 14 arguments, grid (n, groups, PARTS) in clusters of
(1, 1, PARTS), which the launch must carry (ORT's launcher does not); a candidate when VEC divides
c_per_group and a member's pixels fill more than half of its VECTORS + TAIL vectors; 16-byte aligned
tensors. Inline PTX: CUDA only, sm_90+.
"""

import triton
import triton.language as tl
from _cluster import cluster_start
from _group_norm_vectors import DTYPES, ROLES, TEAM_REQUIRES, VECTOR_SIG, team_member, team_table

PLATFORMS = ("cuda",)  # inline PTX
MIN_SM = 90  # thread-block clusters and distributed shared memory


@triton.jit
def group_norm_cluster_kernel(input_ptr, skip_ptr, bias_ptr, output_ptr, add_out_ptr, gamma_ptr, beta_ptr,
                              img_size, c, c_per_group, eps, has_skip, has_bias, broadcast_skip,
                              VECTORS: tl.constexpr, TAIL: tl.constexpr, VEC: tl.constexpr, PARTS: tl.constexpr,
                              ACTIVATION_SILU: tl.constexpr):
    cluster_start(PARTS)
    # No workspace: input_ptr stands in for it, unused by a cluster.
    team_member(input_ptr, skip_ptr, bias_ptr, output_ptr, add_out_ptr, gamma_ptr, beta_ptr, input_ptr, img_size, c,
                c_per_group, eps, has_skip, has_bias, broadcast_skip, VECTORS, TAIL, VEC, PARTS, ACTIVATION_SILU,
                True)


def get_function_table():
    return team_table("GroupNormCluster", group_norm_cluster_kernel, VECTOR_SIG)


def get_launch_contracts():
    contract = {
        "params": ROLES,
        "grid": ["n", "groups", "PARTS"],
        "cluster": ["1", "1", "PARTS"],
        "requires": TEAM_REQUIRES,
        "doc": "NHWC; a cluster of PARTS programs per (image, group), each holding cdiv(hw, PARTS) pixels of it as "
               "VEC-channel vectors, sums added up in shared memory; 16-byte aligned pointers",
    }
    return {f"GroupNormCluster_{act}_{dt}": contract for act in ("Silu", "Pass") for dt in DTYPES}
