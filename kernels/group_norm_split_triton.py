"""GroupNorm of large NHWC images, each image split across a cooperative team of programs.

One program per (image, group) gives 64 programs for a batch of two with 32 groups: too few to draw an
H100/H200's bandwidth. Here an image is cut into tiles of TILE_HW pixels x BLOCK_C channels (BLOCK_C
divides c, so no lane is wasted on padding). A program owns one channel chunk and strides over the
image's pixel tiles twice:

  pass 1  reads its tiles (+ skip + bias, writing add_out), sums x and x^2 per channel in registers,
          folds channels into groups and adds them to the image's accumulators in a workspace;
  sync    waits for the image's whole team (kernels/_grid_sync.py);
  pass 2  normalises and writes its tiles, newest first: the last is still in registers (when each
          member has a single tile, nothing is read twice), the others are read again, from L2 if it
          kept them. The `_l2` kernels add cache hints: evict-last on the input, evict-first in pass 2.

Nothing has to stay on chip between passes, so any image size runs; the grid is as many programs as
are resident. The `_one` kernels are for images whose tiles all fit at once (one tile per member).
Same semantics as kernels/group_norm_triton.py (skip full or broadcast, bias, add_out, SiLU, variance
as E[x^2] - E[x]^2 in fp32).

Group `GroupNormSplit_{Silu|Pass}_<dtype>`: ORT's arguments plus the workspace and the group count,
grid (team, cdiv(c, BLOCK_C), n), cooperative; up to 32 groups, BLOCK_C dividing c, 16-byte aligned
tensors.
"""

import triton
import triton.language as tl
from _grid_sync import arrive_and_wait, depart


@triton.jit
def _tile(image, img_size, c, tile, chans, TILE_HW: tl.constexpr):
    """Element offsets and mask of one TILE_HW x BLOCK_C tile of an image."""
    pixels = tile * TILE_HW + tl.arange(0, TILE_HW)
    mask = (pixels < img_size)[:, None] & (chans < c)[None, :]
    return (image * img_size + pixels)[:, None] * c + chans[None, :], mask


@triton.jit
def _input_tile(input_ptr, skip_ptr, add_out_ptr, offs, mask, shift, has_skip, broadcast_skip,
                EVICT: tl.constexpr):
    """x (+ skip) + per-channel shift in fp32, zero outside the image; written to add_out with a skip."""
    x = tl.load(input_ptr + offs, mask=mask, other=0.0, eviction_policy=EVICT).to(tl.float32)
    if has_skip and not broadcast_skip:
        x += tl.load(skip_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    x = tl.where(mask, x + shift[None, :], 0.0)
    if has_skip:
        tl.store(add_out_ptr + offs, x.to(add_out_ptr.dtype.element_ty), mask=mask)
    return x


@triton.jit
def _add2(a, b, c, d):
    return a + c, b + d


@triton.jit
def _normalize(x, offs, mask, scale, offset, output_ptr, ACTIVATION_SILU: tl.constexpr, EVICT: tl.constexpr):
    y = x * scale[None, :] + offset[None, :]
    if ACTIVATION_SILU:
        y = y * tl.sigmoid(y)
    tl.store(output_ptr + offs, y.to(output_ptr.dtype.element_ty), mask=mask, eviction_policy=EVICT)


@triton.jit
def group_norm_split_kernel(input_ptr, skip_ptr, bias_ptr, output_ptr, add_out_ptr, gamma_ptr, beta_ptr, ws_ptr,
                            img_size, c, c_per_group, groups, eps, has_skip, has_bias, broadcast_skip,
                            BLOCK_C: tl.constexpr, TILE_HW: tl.constexpr, GROUPS_P: tl.constexpr,
                            LANES: tl.constexpr, ONE_TILE: tl.constexpr, FOLD: tl.constexpr,
                            KEEP_IN_L2: tl.constexpr, ACTIVATION_SILU: tl.constexpr):
    member = tl.program_id(0)
    team = tl.num_programs(0)
    image = tl.program_id(2).to(tl.int64)
    chans = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)
    n_tiles = tl.cdiv(img_size, TILE_HW)
    mine = tl.cdiv(n_tiles - member, team)  # tiles member, member + team, ...
    c_mask = chans < c  # all true where BLOCK_C divides c

    # Per-channel terms added to every pixel: the bias and a skip broadcast over H*W.
    shift = tl.zeros([BLOCK_C], tl.float32)
    if has_bias:
        shift += tl.load(bias_ptr + chans, mask=c_mask, other=0.0).to(tl.float32)
    if has_skip and broadcast_skip:
        shift += tl.load(skip_ptr + image * c + chans, mask=c_mask, other=0.0).to(tl.float32)
    gamma = tl.load(gamma_ptr + chans, mask=c_mask, other=0.0)
    beta = tl.load(beta_ptr + chans, mask=c_mask, other=0.0)

    # Sums and sums of squares travel together through each reduction (one shared-memory round).
    if ONE_TILE:
        # The contract gives every member exactly one tile: no accumulators, fewer registers, so
        # more programs fit and the whole image is read in one round.
        offs, mask = _tile(image, img_size, c, member, chans, TILE_HW)
        x = _input_tile(input_ptr, skip_ptr, add_out_ptr, offs, mask, shift, has_skip, broadcast_skip, "")
        ch_sum, ch_sq = tl.reduce((x, x * x), 0, _add2)
    else:
        # Accumulators of TILE_HW / FOLD pixel rows: each thread holds FOLD pixels per channel (FOLD =
        # its 16-byte vectors), so folding them first is a sum in registers, with no data movement, and
        # the accumulators take FOLD times fewer registers (more programs resident, more bytes in flight).
        acc = tl.zeros([TILE_HW // FOLD, BLOCK_C], tl.float32)
        acc_sq = tl.zeros([TILE_HW // FOLD, BLOCK_C], tl.float32)
        x = tl.zeros([TILE_HW, BLOCK_C], tl.float32)  # after the loop: the last tile, kept for pass 2
        for i in range(mine):
            offs, mask = _tile(image, img_size, c, member + i * team, chans, TILE_HW)
            x = _input_tile(input_ptr, skip_ptr, add_out_ptr, offs, mask, shift, has_skip, broadcast_skip,
                            "evict_last" if KEEP_IN_L2 else "")
            x3 = tl.reshape(x, [FOLD, TILE_HW // FOLD, BLOCK_C])
            part, part_sq = tl.reduce((x3, x3 * x3), 0, _add2)
            acc += part
            acc_sq += part_sq
        ch_sum, ch_sq = tl.reduce((acc, acc_sq), 0, _add2)

    # Channels to groups: this chunk touches the groups of its channels (a group may span chunks;
    # channels past c fall in no real group and add zeros).
    gids = tl.arange(0, GROUPS_P)
    in_group = (chans // c_per_group)[:, None] == gids[None, :]
    g_sum, g_sq = tl.reduce((tl.where(in_group, ch_sum[:, None], 0.0), tl.where(in_group, ch_sq[:, None], 0.0)),
                            0, _add2)
    touched = tl.max(in_group.to(tl.int32), axis=0) > 0

    # Workspace, per image: a counter alone on a 128-byte line, then LANES rows of GROUPS_P sums and
    # GROUPS_P sums of squares. Atomics on one line serialise in L2, so programs spread theirs over
    # LANES lines and every program adds the lanes up after the rendezvous.
    members = team * tl.num_programs(1)
    counter = ws_ptr + image * (32 + LANES * 2 * GROUPS_P)
    lane = (member * tl.num_programs(1) + tl.program_id(1)) % LANES
    sums = counter.to(tl.pointer_type(tl.float32), bitcast=True) + 32
    mine_ptr = sums + lane * (2 * GROUPS_P) + gids
    tl.atomic_add(mine_ptr, g_sum, mask=touched, sem="relaxed", scope="gpu")
    tl.atomic_add(mine_ptr + GROUPS_P, g_sq, mask=touched, sem="relaxed", scope="gpu")
    arrive_and_wait(counter, members)
    lanes = sums + tl.arange(0, LANES)[:, None] * (2 * GROUPS_P) + gids[None, :]
    total, total_sq = tl.reduce((tl.load(lanes, volatile=True), tl.load(lanes + GROUPS_P, volatile=True)), 0, _add2)
    if depart(counter, members):
        tl.store(lanes, tl.zeros([LANES, GROUPS_P], tl.float32))
        tl.store(lanes + GROUPS_P, tl.zeros([LANES, GROUPS_P], tl.float32))
        tl.atomic_xchg(counter, 0)

    count = img_size * c_per_group
    mean = total / count
    rstd = 1.0 / tl.sqrt(tl.maximum(total_sq / count - mean * mean, 0.0) + eps)
    mean_c, rstd_c = tl.reduce((tl.where(in_group, mean[None, :], 0.0), tl.where(in_group, rstd[None, :], 0.0)),
                               1, _add2)
    scale = gamma * rstd_c
    offset = beta - mean_c * scale
    # Newest tiles first: the last one is still in registers, the others likely still in L2. With
    # KEEP_IN_L2, pass 1 marks its lines evict-last and pass 2 its reads and writes evict-first, so the
    # output streaming out does not push the input out of L2 before it is read again.
    offs, mask = _tile(image, img_size, c, member + (mine - 1) * team, chans, TILE_HW)
    _normalize(x, offs, mask, scale, offset, output_ptr, ACTIVATION_SILU, "evict_first" if KEEP_IN_L2 else "")
    if not ONE_TILE:
        for i in range(1, mine):
            offs, mask = _tile(image, img_size, c, member + (mine - 1 - i) * team, chans, TILE_HW)
            if has_skip:
                x = tl.load(add_out_ptr + offs, mask=mask, other=0.0).to(tl.float32)
            else:
                x = tl.load(input_ptr + offs, mask=mask, other=0.0,
                            eviction_policy="evict_first" if KEEP_IN_L2 else "").to(tl.float32) + shift[None, :]
            _normalize(x, offs, mask, scale, offset, output_ptr, ACTIVATION_SILU,
                       "evict_first" if KEEP_IN_L2 else "")


DTYPES = ("fp32", "fp16", "bf16")
# (BLOCK_C, elements per tile, num_warps, ONE_TILE, KEEP_IN_L2): the points that are the fastest
# somewhere on the benchmark grids.
VARIANTS = [(32, 4096, 4, 0, 0), (32, 4096, 4, 0, 1), (32, 4096, 4, 1, 0), (64, 4096, 4, 0, 1)]
GROUPS_P = 32  # up to 32 groups (Stable Diffusion uses 32)
LANES = 16  # accumulator lines per image (see the kernel)
# ORT's arguments plus the workspace and the group count; c a multiple of 16 for 16-byte vectors.
SIG = "*{t}:16,*{t}:16,*{t}:16,*{t}:16,*{t}:16,*fp32:16,*fp32:16,*i32:16,i32,i32:16,i32,i32,fp32,i1,i1,i1"


def fold_rows(dtype: str, elems: int, warps: int) -> int:
    """Pixels per thread and channel in a tile: its elements per thread over one 16-byte vector."""
    vector = 4 if dtype == "fp32" else 8
    return max(1, elems // (32 * warps * vector))


def get_function_table():
    table = []
    for silu in (True, False):
        act = "Silu" if silu else "Pass"
        for dtype in DTYPES:
            for block, elems, warps, one, l2 in VARIANTS:
                tile_hw = elems // block
                suffix = "_one" if one else "_l2" if l2 else ""
                table.append({
                    "name": f"GroupNormSplit_{act}_{dtype}_c{block}_t{tile_hw}_w{warps}{suffix}",
                    "group": f"GroupNormSplit_{act}_{dtype}",
                    "func": group_norm_split_kernel,
                    "sig": SIG.format(t=dtype),
                    "kwargs": {"num_warps": warps, "constants": {
                        "BLOCK_C": block, "TILE_HW": tile_hw, "GROUPS_P": GROUPS_P, "LANES": LANES,
                        "ONE_TILE": one, "FOLD": 1 if one else fold_rows(dtype, elems, warps), "KEEP_IN_L2": l2,
                        "ACTIVATION_SILU": int(silu)}},
                })
    return table


def get_launch_contracts():
    contract = {
        "params": ["in", "skip", "bias", "out", "add_out", "gamma", "beta", "ws", "hw", "c", "c_per_group", "groups",
                   "eps", "has_skip", "has_bias", "broadcast_skip"],
        "grid": ["min(cdiv(hw, TILE_HW), resident // (n * cdiv(c, BLOCK_C)))", "cdiv(c, BLOCK_C)", "n"],
        "requires": ["c % BLOCK_C == 0", "groups <= GROUPS_P", "n * cdiv(c, BLOCK_C) <= resident",
                     "ACTIVATION_SILU == silu",
                     "ONE_TILE == 0 or n * cdiv(c, BLOCK_C) * cdiv(hw, TILE_HW) <= resident"],
        "workspace": "4 * n * (32 + LANES * 2 * GROUPS_P)",
        "cooperative": True,
        "doc": "NHWC; a team of programs per image strides over TILE_HW x BLOCK_C tiles twice, cooperative; "
               "BLOCK_C divides c, 16-byte aligned pointers",
    }
    return {f"GroupNormSplit_{act}_{dt}": contract for act in ("Silu", "Pass") for dt in DTYPES}
