"""GroupNorm of small NHWC images: one program holds a whole (image, group) in registers, read as vectors.

ORT's kernel (group_norm_triton.py) pads each pixel's channels to BLOCK_SIZE lanes and walks the group
in steps. Here a group is a list of VEC-channel vectors
(kernels/_group_norm_vectors.py), each loaded as one instruction. A program reads its group once
(+ skip + bias, writing add_out), reduces sum and sum of squares in fp32, and writes
(x - mean) * rstd * gamma + beta, then SiLU: traffic is the minimum, one read and one write. gamma and
beta are loaded with x, not after the reduction, where they would be two more dependent round trips.

Group `GroupNormWhole_{Silu|Pass}_<dtype>`: ORT's 14 arguments and grid (n, groups, 1), same semantics
as ORT's kernel (skip full or broadcast over H*W, bias, add_out, SiLU); a candidate when VEC divides
c_per_group and the group fills more than half of the program's VECTORS + TAIL vectors, with 16-byte
aligned tensors.
"""

import triton
import triton.language as tl
from _group_norm_vectors import ROLES, VECTOR_SIG, add2, mean_rstd, sums, vectors, write


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
    x, gamma, beta, offs, mask = vectors(input_ptr, skip_ptr, bias_ptr, add_out_ptr, gamma_ptr, beta_ptr, image,
                                         group, img_size, c_vec, cpg, per_pixel, has_skip, has_bias, broadcast_skip,
                                         0, VECTORS, VEC)
    if TAIL > 0:
        x2, gamma2, beta2, offs2, mask2 = vectors(input_ptr, skip_ptr, bias_ptr, add_out_ptr, gamma_ptr, beta_ptr,
                                                  image, group, img_size, c_vec, cpg, per_pixel, has_skip, has_bias,
                                                  broadcast_skip, VECTORS, TAIL, VEC)
    total, total_sq = sums(x)
    if TAIL > 0:
        total, total_sq = add2(total, total_sq, *sums(x2))
    mean, rstd = mean_rstd(total, total_sq, img_size * c_per_group, eps)
    write(x, gamma, beta, offs, mask, mean, rstd, output_ptr, ACTIVATION_SILU)
    if TAIL > 0:
        write(x2, gamma2, beta2, offs2, mask2, mean, rstd, output_ptr, ACTIVATION_SILU)


DTYPES = ("fp32", "fp16", "bf16")
ELEMENTS = 4096  # VECTORS * VEC: values per program (no tail)
WARPS = (4, 8)


def vec_of(dtype: str) -> int:
    """The widest vector: one 16-byte load."""
    return 4 if dtype == "fp32" else 8


def get_function_table():
    table = []
    for silu in (True, False):
        act = "Silu" if silu else "Pass"
        for dtype in DTYPES:
            vec = vec_of(dtype)
            for warps in WARPS:
                table.append({
                    "name": f"GroupNormWhole_{act}_{dtype}_v{vec}_e{ELEMENTS}_w{warps}",
                    "group": f"GroupNormWhole_{act}_{dtype}",
                    "func": group_norm_whole_kernel,
                    "sig": VECTOR_SIG.format(t=dtype),
                    "kwargs": {"num_warps": warps, "constants": {
                        "VECTORS": ELEMENTS // vec, "TAIL": 0, "VEC": vec, "ACTIVATION_SILU": int(silu)}},
                })
    return table


def get_launch_contracts():
    contract = {
        "params": ROLES,
        "grid": ["n", "groups", "1"],
        # The group fits, and fills more than half the program (a smaller kernel does it otherwise).
        "requires": ["c_per_group % VEC == 0", "hw * (c_per_group // VEC) <= VECTORS + TAIL",
                     "2 * hw * (c_per_group // VEC) > VECTORS + TAIL", "ACTIVATION_SILU == silu"],
        "doc": "NHWC; one program per (image, group) holding it whole as VEC-channel vectors; "
               "16-byte aligned pointers",
    }
    return {f"GroupNormWhole_{act}_{dt}": contract for act in ("Silu", "Pass") for dt in DTYPES}
