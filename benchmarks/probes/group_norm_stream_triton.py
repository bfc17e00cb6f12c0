"""PROBE, NOT SHIPPED: GroupNorm of large NHWC images in one plain launch, tiles handed out by ticket.

Measured on the H200 (benchmarks/results/group_norm_probes_h200.log, run 4): 40-46 us at 2 x 64x64 x 1280
fp16, where the shipped cooperative GroupNormSplit takes 24.5 us. Each program here does one tile and
pays two or three dependent L2 round trips (its ticket, its counters) for 8 KB of data, at 75-128
registers (4-5 programs per SM): too few bytes in flight. To rebuild it, copy this file beside
kernels/group_norm_split_triton.py and kernels/_grid_sync.py and compile that directory
(INVOKE_TRITONFORGE_KERNELS_DIR=<dir> invoke compile ...), with "Stream" added to FAMILIES in
runtime/ops/group_norm.py. The design, as it was written:


At the largest UNet levels (2 x 64x64 x 1280, 2 x 128x128 x 320: 21 MB in fp16) no kernel can hold an
image on chip, so x is read twice: once for the statistics, once to normalise it. The cooperative
kernels of group_norm_split_triton.py do both passes in every program with a rendezvous between:
the whole GPU reads, waits for the slowest program (about 4 us at 21 MB on an H200), then reads
again and writes, and by then the first read has left L2.

Here the work is a stream of tiles (TILE_HW pixels x BLOCK_C channels), each done by one short
program. A program takes a ticket from a counter when it starts, and the ticket says what it does:

  statistics tile  reads its tile (+ skip + bias, writing add_out), adds its channels' sums and sums
                   of squares to the image's group accumulators, and counts itself done in its
                   unit (the image's BLOCK_C-channel chunk, all pixels);
  output tile      waits until every unit its groups touch is counted done, reads the tile again
                   (from L2: its unit was read a few units ago) and writes it normalised.

Tickets interleave the two: unit u's statistics tiles, then the output tiles of unit u - LAG, so
reads of new units overlap writes of old ones, as in a copy, and the second read of a unit comes
soon after the first. An output tile waits only on tiles with earlier tickets, which never wait:
any grid runs to the end however few programs fit at once (the order of tickets, not of launch, is
what counts), so the launch is plain and the grid is the whole stream, 2 * n * chunks * tiles.

The last program out (a done counter) zeroes the workspace for the next launch. Same semantics as
kernels/group_norm_split_triton.py (whose tile helpers it uses): skip full or broadcast, bias,
add_out, SiLU, variance E[x^2] - E[x]^2 in fp32, the output pass reading add_out when there is a skip.
"""

import triton
import triton.language as tl
from group_norm_split_triton import _add2, _input_tile, _normalize, _tile


@triton.jit
def _work(ticket, units, tiles, lag):
    """(output pass?, unit, tile) of a ticket: step s hands out unit s's statistics tiles, then the
    output tiles of unit s - lag (steps 0 .. lag - 1 have no output tiles, the last lag no statistics)."""
    head = lag * tiles  # tickets of the first lag steps
    t = ticket - head
    r = t % (2 * tiles)
    late = t - (units - lag) * 2 * tiles  # >= 0: the last lag steps
    in_head = ticket < head
    in_late = late >= 0
    second = r >= tiles  # the step's output half
    out = (not in_head) and (in_late or second)
    unit = tl.where(in_head, ticket // tiles,
                    tl.where(in_late, units - lag + late // tiles, lag + t // (2 * tiles) - second.to(tl.int32) * lag))
    tile = tl.where(in_head, ticket % tiles, tl.where(in_late, late % tiles, r % tiles))
    return out, unit, tile


@triton.jit
def _nap(x):
    """x, after a short sleep: spinning programs leave L2 to the ones doing work."""
    return tl.inline_asm_elementwise("nanosleep.u32 64; mov.b32 $0, $1;", "=r,r", [x], dtype=tl.int32,
                                     is_pure=False, pack=1)


@triton.jit
def group_norm_stream_kernel(input_ptr, skip_ptr, bias_ptr, output_ptr, add_out_ptr, gamma_ptr, beta_ptr, ws_ptr,
                             img_size, c, c_per_group, groups, eps, has_skip, has_bias, broadcast_skip,
                             BLOCK_C: tl.constexpr, TILE_HW: tl.constexpr, GROUPS_P: tl.constexpr,
                             LANES: tl.constexpr, LAG: tl.constexpr, ACTIVATION_SILU: tl.constexpr):
    # Each image is its own stream (grid (2 * chunks * tiles, n, 1)): its output tiles wait only on its
    # own statistics, and its tickets come from its own counter.
    image64 = tl.program_id(1).to(tl.int64)
    chunks = tl.cdiv(c, BLOCK_C)
    tiles = tl.cdiv(img_size, TILE_HW)
    # Workspace per image (int32 words): a line holding the ticket and done counters, a done count
    # per unit (channel chunk), then LANES rows of GROUPS_P sums and GROUPS_P sums of squares (fp32).
    # Atomics on one word serialise in L2, so tiles spread their sums over LANES rows.
    ticket_ptr = ws_ptr + image64 * (32 + chunks + LANES * 2 * GROUPS_P)
    done_ptr = ticket_ptr + 1
    unit_ptr = ticket_ptr + 32
    sums = (unit_ptr + chunks).to(tl.pointer_type(tl.float32), bitcast=True)
    ticket = tl.atomic_add(ticket_ptr, 1, sem="relaxed", scope="gpu")
    # Output tiles of unit u wait for the units its groups reach, u + 1 + c_per_group // BLOCK_C at most,
    # so the lag covers that (every awaited tile then has an earlier ticket), plus LAG units to tune.
    lag = tl.minimum(1 + c_per_group // BLOCK_C + LAG, chunks)
    out, chunk, tile = _work(ticket, chunks, tiles, lag)
    chans = chunk * BLOCK_C + tl.arange(0, BLOCK_C)
    c_mask = chans < c
    shift = tl.zeros([BLOCK_C], tl.float32)
    if has_bias:
        shift += tl.load(bias_ptr + chans, mask=c_mask, other=0.0).to(tl.float32)
    if has_skip and broadcast_skip:
        shift += tl.load(skip_ptr + image64 * c + chans, mask=c_mask, other=0.0).to(tl.float32)
    gids = tl.arange(0, GROUPS_P)
    in_group = (chans // c_per_group)[:, None] == gids[None, :]
    offs, mask = _tile(image64, img_size, c, tile, chans, TILE_HW)
    if out:
        # The units holding this chunk's groups: first channel of the first group to last of the last.
        first = (chunk * BLOCK_C) // c_per_group * c_per_group // BLOCK_C
        last = (tl.minimum(((chunk + 1) * BLOCK_C - 1) // c_per_group * c_per_group + c_per_group, c) - 1) // BLOCK_C
        for w in range(first, last + 1):
            seen = tl.atomic_add(unit_ptr + w, 0, sem="acquire", scope="gpu")
            while seen < tiles:
                seen = tl.atomic_add(unit_ptr + _nap(w), 0, sem="acquire", scope="gpu")
        tl.debug_barrier()
        lanes = sums + tl.arange(0, LANES)[:, None] * (2 * GROUPS_P) + gids[None, :]
        total, total_sq = tl.reduce((tl.load(lanes, volatile=True), tl.load(lanes + GROUPS_P, volatile=True)), 0,
                                    _add2)
        # Counted out once the sums are read, before its own loads and stores, which the release would
        # wait for: the image's last output tile out leaves its workspace zeroed (every statistics tile
        # finished before any output tile could read).
        tl.debug_barrier()
        if tl.atomic_add(done_ptr, 1, sem="acq_rel", scope="gpu") == chunks * tiles - 1:
            rows = tl.arange(0, LANES * 2 * GROUPS_P)
            tl.store(sums + rows, tl.zeros([LANES * 2 * GROUPS_P], tl.float32))
            for u in range(0, chunks, 128):
                tl.store(unit_ptr + u + tl.arange(0, 128), tl.zeros([128], tl.int32),
                         mask=u + tl.arange(0, 128) < chunks)
            tl.store(ticket_ptr, 0)
            tl.atomic_xchg(done_ptr, 0, sem="release", scope="gpu")
        count = img_size * c_per_group
        mean = total / count
        rstd = 1.0 / tl.sqrt(tl.maximum(total_sq / count - mean * mean, 0.0) + eps)
        mean_c, rstd_c = tl.reduce((tl.where(in_group, mean[None, :], 0.0), tl.where(in_group, rstd[None, :], 0.0)),
                                   1, _add2)
        gamma = tl.load(gamma_ptr + chans, mask=c_mask, other=0.0)
        beta = tl.load(beta_ptr + chans, mask=c_mask, other=0.0)
        scale = gamma * rstd_c
        offset = beta - mean_c * scale
        if has_skip:
            x = tl.load(add_out_ptr + offs, mask=mask, other=0.0, eviction_policy="evict_first").to(tl.float32)
        else:
            x = tl.load(input_ptr + offs, mask=mask, other=0.0,
                        eviction_policy="evict_first").to(tl.float32) + shift[None, :]
        _normalize(x, offs, mask, scale, offset, output_ptr, ACTIVATION_SILU, "evict_first")
    else:
        x = _input_tile(input_ptr, skip_ptr, add_out_ptr, offs, mask, shift, has_skip, broadcast_skip, "evict_last")
        ch_sum, ch_sq = tl.reduce((x, x * x), 0, _add2)
        g_sum, g_sq = tl.reduce((tl.where(in_group, ch_sum[:, None], 0.0),
                                 tl.where(in_group, ch_sq[:, None], 0.0)), 0, _add2)
        touched = tl.max(in_group.to(tl.int32), axis=0) > 0
        lane_ptr = sums + (tile % LANES) * (2 * GROUPS_P) + gids
        tl.atomic_add(lane_ptr, g_sum, mask=touched, sem="relaxed", scope="gpu")
        tl.atomic_add(lane_ptr + GROUPS_P, g_sq, mask=touched, sem="relaxed", scope="gpu")
        tl.debug_barrier()  # every thread's sums before the release that counts the tile done
        tl.atomic_add(unit_ptr + chunk, 1, sem="release", scope="gpu")


DTYPES = ("fp32", "fp16", "bf16")
TILES = [(32, 128, 4), (64, 64, 4), (64, 128, 8), (128, 64, 8)]  # (BLOCK_C, TILE_HW, num_warps)
LAGS = (1, 4, 16)  # units between a unit's statistics and its output, past the groups' own span
GROUPS_P = 32
LANES = 8
# ORT's arguments plus the workspace and the group count; c a multiple of BLOCK_C, 16-byte vectors.
SIG = "*{t}:16,*{t}:16,*{t}:16,*{t}:16,*{t}:16,*fp32:16,*fp32:16,*i32:16,i32,i32:16,i32,i32,fp32,i1,i1,i1"


def get_function_table():
    table = []
    for silu in (True, False):
        act = "Silu" if silu else "Pass"
        for dtype in DTYPES:
            for block, tile_hw, warps in TILES:
                for lag in LAGS:
                    table.append({
                        "name": f"GroupNormStream_{act}_{dtype}_c{block}_t{tile_hw}_w{warps}_l{lag}",
                        "group": f"GroupNormStream_{act}_{dtype}",
                        "func": group_norm_stream_kernel,
                        "sig": SIG.format(t=dtype),
                        "kwargs": {"num_warps": warps, "constants": {
                            "BLOCK_C": block, "TILE_HW": tile_hw, "GROUPS_P": GROUPS_P, "LANES": LANES, "LAG": lag,
                            "ACTIVATION_SILU": int(silu)}},
                    })
    return table


def get_launch_contracts():
    contract = {
        "params": ["in", "skip", "bias", "out", "add_out", "gamma", "beta", "ws", "hw", "c", "c_per_group", "groups",
                   "eps", "has_skip", "has_bias", "broadcast_skip"],
        "grid": ["2 * cdiv(c, BLOCK_C) * cdiv(hw, TILE_HW)", "n", "1"],
        "requires": ["groups <= GROUPS_P", "c % BLOCK_C == 0", "ACTIVATION_SILU == silu"],
        "workspace": "4 * n * (32 + cdiv(c, BLOCK_C) + LANES * 2 * GROUPS_P)",
        "doc": "NHWC; TILE_HW x BLOCK_C tiles handed out by ticket, statistics tiles then output tiles, plain "
               "launch; BLOCK_C divides c, 16-byte aligned pointers",
    }
    return {f"GroupNormStream_{act}_{dt}": contract for act in ("Silu", "Pass") for dt in DTYPES}
