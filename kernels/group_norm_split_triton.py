"""GroupNorm over NHWC activations with each image split into tiles across programs (cooperative).

ORT's kernel gives one program to each (image, group): 64 programs for a batch of two with 32 groups,
too few to draw the H200's bandwidth on a 5 MB activation. Here a program owns a tile of TILE_HW
pixels x all channels (a contiguous stretch of memory), keeps it in registers, reduces it per
channel and then per group, adds its partial sums into the image's accumulators in a workspace,
waits for the image's other tiles (kernels/_grid_sync.py), then normalises its tile and writes it:
one read of x (+ skip) and one write of y (+ add_out), the minimum.

Same semantics as kernels/group_norm_triton.py (skip full or broadcast, bias, add_out, SiLU,
variance as E[x^2] - E[x]^2 in fp32), different launch: grid (tiles, n, 1), cooperative, and only
while every tile of the batch fits on the device at once; otherwise ORT's kernel runs.
"""

import triton
import triton.language as tl
from _grid_sync import arrive_and_wait, depart


@triton.jit
def group_norm_split_kernel(input_ptr, skip_ptr, bias_ptr, output_ptr, add_out_ptr, gamma_ptr, beta_ptr, ws_ptr,
                            img_size, c, c_per_group, groups, eps, has_skip, has_bias, broadcast_skip,
                            BLOCK_C: tl.constexpr, TILE_HW: tl.constexpr, GROUPS_P: tl.constexpr,
                            ACTIVATION_SILU: tl.constexpr):
    image = tl.program_id(1).to(tl.int64)
    pixels = tl.program_id(0) * TILE_HW + tl.arange(0, TILE_HW)
    chans = tl.arange(0, BLOCK_C)
    c_mask = chans < c
    mask = (pixels < img_size)[:, None] & c_mask[None, :]
    offs = (image * img_size + pixels)[:, None] * c + chans[None, :]

    x = tl.load(input_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    if has_skip:
        if broadcast_skip:
            x += tl.load(skip_ptr + image * c + chans, mask=c_mask, other=0.0).to(tl.float32)[None, :]
        else:
            x += tl.load(skip_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    if has_bias:
        x += tl.load(bias_ptr + chans, mask=c_mask, other=0.0).to(tl.float32)[None, :]
    x = tl.where(mask, x, 0.0)
    if has_skip:
        tl.store(add_out_ptr + offs, x.to(add_out_ptr.dtype.element_ty), mask=mask)

    # Per channel, then per group: groups are runs of c_per_group channels, so a group's sum is a
    # difference of two prefix sums, picked with gathers.
    gids = tl.arange(0, GROUPS_P)
    g_mask = gids < groups
    # Indices clamped into the channels (groups past `groups` are masked out below, but a gather must
    # stay inside its source).
    last = tl.minimum((gids + 1) * c_per_group, c) - 1
    before = tl.minimum(tl.maximum(gids * c_per_group - 1, 0), c - 1)
    has_before = gids > 0
    prefix = tl.cumsum(tl.sum(x, axis=0), axis=0)
    g_sum = tl.gather(prefix, last, 0) - tl.where(has_before, tl.gather(prefix, before, 0), 0.0)
    prefix = tl.cumsum(tl.sum(x * x, axis=0), axis=0)
    g_sq = tl.gather(prefix, last, 0) - tl.where(has_before, tl.gather(prefix, before, 0), 0.0)

    # Workspace: one int32 counter per image, then per image GROUPS_P sums and GROUPS_P sums of squares.
    sums = ws_ptr.to(tl.pointer_type(tl.float32), bitcast=True) + tl.num_programs(1) + image * (2 * GROUPS_P)
    tl.atomic_add(sums + gids, g_sum, mask=g_mask, sem="relaxed", scope="gpu")
    tl.atomic_add(sums + GROUPS_P + gids, g_sq, mask=g_mask, sem="relaxed", scope="gpu")
    arrive_and_wait(ws_ptr + image, tl.num_programs(0))
    total = tl.load(sums + gids, mask=g_mask, other=0.0, volatile=True)
    total_sq = tl.load(sums + GROUPS_P + gids, mask=g_mask, other=0.0, volatile=True)
    if depart(ws_ptr + image, tl.num_programs(0)):
        tl.store(sums + gids, tl.zeros([GROUPS_P], tl.float32))
        tl.store(sums + GROUPS_P + gids, tl.zeros([GROUPS_P], tl.float32))
        tl.atomic_xchg(ws_ptr + image, 0)

    count = img_size * c_per_group
    mean = total / count
    rstd = 1.0 / tl.sqrt(tl.maximum(total_sq / count - mean * mean, 0.0) + eps)
    group_of = tl.minimum(chans // c_per_group, GROUPS_P - 1)
    mean_c = tl.gather(mean, group_of, 0)
    rstd_c = tl.gather(rstd, group_of, 0)
    gamma = tl.load(gamma_ptr + chans, mask=c_mask, other=0.0)
    beta = tl.load(beta_ptr + chans, mask=c_mask, other=0.0)
    scale = gamma * rstd_c
    shift = beta - mean_c * scale
    y = x * scale[None, :] + shift[None, :]
    if ACTIVATION_SILU:
        y = y * tl.sigmoid(y)
    tl.store(output_ptr + offs, y.to(output_ptr.dtype.element_ty), mask=mask)


DTYPES = ("fp32", "fp16", "bf16")
BLOCKS = (64, 128, 256, 512, 1024, 2048)  # channels, padded to a power of two
TILES = [(4096, 4), (8192, 4), (8192, 8), (16384, 8), (16384, 16), (32768, 16)]  # (elements, num_warps)
GROUPS_P = 32  # up to 32 groups (Stable Diffusion uses 32)
# ORT's arguments plus the workspace and the group count; c a multiple of 16 for 16-byte vectors.
SIG = "*{t}:16,*{t}:16,*{t}:16,*{t}:16,*{t}:16,*fp32:16,*fp32:16,*i32:16,i32,i32:16,i32,i32,fp32,i1,i1,i1"


def get_function_table():
    table = []
    for silu in (True, False):
        act = "Silu" if silu else "Pass"
        for dtype in DTYPES:
            for block in BLOCKS:
                for elems, warps in TILES:
                    tile_hw = elems // block
                    table.append({
                        "name": f"GroupNormSplit_{act}_{dtype}_c{block}_t{tile_hw}_w{warps}",
                        "group": f"GroupNormSplit_{act}_{dtype}",
                        "func": group_norm_split_kernel,
                        "sig": SIG.format(t=dtype),
                        "kwargs": {"num_warps": warps, "constants": {
                            "BLOCK_C": block, "TILE_HW": tile_hw, "GROUPS_P": GROUPS_P,
                            "ACTIVATION_SILU": int(silu)}},
                    })
    return table


def get_launch_contracts():
    contract = {
        "params": ["in", "skip", "bias", "out", "add_out", "gamma", "beta", "ws", "hw", "c", "c_per_group", "groups",
                   "eps", "has_skip", "has_bias", "broadcast_skip"],
        "grid": ["cdiv(hw, TILE_HW)", "n", "1"],
        "requires": ["c <= BLOCK_C and 2 * c > BLOCK_C", "c % 16 == 0", "groups <= GROUPS_P",
                     "n * cdiv(hw, TILE_HW) <= resident", "ACTIVATION_SILU == silu"],
        "workspace": "4 * n * (1 + 2 * GROUPS_P)",
        "cooperative": True,
        "doc": "NHWC; TILE_HW pixels x all channels per program, cooperative; 16-byte aligned pointers",
    }
    return {f"GroupNormSplit_{act}_{dt}": contract for act in ("Silu", "Pass") for dt in DTYPES}
