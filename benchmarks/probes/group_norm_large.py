"""Where the time of GroupNorm goes at the largest UNet shapes (probe, JIT on the GPU machine).

    python3 benchmarks/probes/group_norm_large.py [--shapes 2x64x1280,2x128x320] [--dtypes fp16,fp32]
                                                  [--flat] [--l2] [--no-split]

Needs torch and triton (JIT), not the artifacts. Each line is a kernel or a pair of launches, timed
against a device-to-device copy of the same size timed the same way (CUDA-graph replay over rotating
buffers larger than L2): us and % of that copy.
  --flat      the floors: a read, a write, a read then a write (what a kernel holding x on chip does,
              less its grid barrier), a read then a read-again-and-write (any two-pass design), and a
              read of NHWC tiles;
  --l2        how much of a second read L2 saves, by size;
  (default)   the looped kernel of kernels/group_norm_split_triton.py cut after pass 1, after the
              rendezvous, and whole (--no-split skips it), checked against torch at the end."""

from __future__ import annotations

import argparse
import sys
from functools import partial
from pathlib import Path

import torch
import triton
import triton.language as tl

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "kernels"))
import group_norm_split_triton as gs  # noqa: E402
from _grid_sync import arrive_and_wait, depart  # noqa: E402

from benchmarks.gpu_common import torch_graph_ms  # noqa: E402

DT = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}


def graph_us(fn, sets, reps=40):
    """Median us per call of fn(set) cycling through sets, replayed from a CUDA graph (as the torch
    baselines of the benchmarks are timed)."""
    return 1000 * torch_graph_ms(fn, sets, reps)


@triton.jit
def read_flat(x_ptr, part_ptr, n, BLOCK: tl.constexpr, EVICT: tl.constexpr):
    """Pure read: one BLOCK of the flat tensor per program, its sum stored (keeps the load alive)."""
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0, eviction_policy=EVICT).to(tl.float32)
    tl.store(part_ptr + tl.program_id(0), tl.sum(x, 0))


@triton.jit
def write_flat(y_ptr, n, BLOCK: tl.constexpr):
    """Pure write: the floor of the output pass (a kernel holding x on chip would only write)."""
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, (offs & 1023).to(tl.float32).to(y_ptr.dtype.element_ty), mask=offs < n)


@triton.jit
def read_tile(x_ptr, part_ptr, hw, c, TP: tl.constexpr, CB: tl.constexpr, EVICT: tl.constexpr):
    """Read one TP-pixel x CB-channel NHWC tile per program (grid: pixel tiles, channel chunks, n)."""
    pix = tl.program_id(0) * TP + tl.arange(0, TP)
    ch = tl.program_id(1) * CB + tl.arange(0, CB)
    img = tl.program_id(2).to(tl.int64)
    offs = (img * hw + pix)[:, None] * c + ch[None, :]
    x = tl.load(x_ptr + offs, mask=(pix < hw)[:, None], other=0.0, eviction_policy=EVICT).to(tl.float32)
    pid = (tl.program_id(2) * tl.num_programs(1) + tl.program_id(1)) * tl.num_programs(0) + tl.program_id(0)
    tl.store(part_ptr + pid, tl.sum(tl.sum(x * x, 1), 0))


@triton.jit
def apply_flat(x_ptr, y_ptr, n, BLOCK: tl.constexpr, EVICT: tl.constexpr):
    """Pass 2 stand-in: read, scale + SiLU, write."""
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0, eviction_policy=EVICT).to(tl.float32)
    y = x * 1.5 + 0.25
    y = y * tl.sigmoid(y)
    tl.store(y_ptr + offs, y.to(y_ptr.dtype.element_ty), mask=offs < n, eviction_policy=EVICT)


@triton.jit
def split_phases(input_ptr, output_ptr, gamma_ptr, beta_ptr, ws_ptr, img_size, c, c_per_group, eps,
                 BLOCK_C: tl.constexpr, TILE_HW: tl.constexpr, GROUPS_P: tl.constexpr, LANES: tl.constexpr,
                 FOLD: tl.constexpr, KEEP_IN_L2: tl.constexpr, PHASES: tl.constexpr,
                 KEEP_LAST: tl.constexpr = 1):
    """kernels/group_norm_split_triton.py's looped kernel (no skip/bias, SiLU) cut after PHASES:
    1 = pass 1 and the atomics, 2 = + rendezvous, 3 = whole. KEEP_LAST=0: pass 2 reads the last tile again
    too (nothing tile-sized lives across the rendezvous: fewer registers, more programs resident)."""
    member = tl.program_id(0)
    team = tl.num_programs(0)
    image = tl.program_id(2).to(tl.int64)
    chans = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)
    n_tiles = tl.cdiv(img_size, TILE_HW)
    mine = tl.cdiv(n_tiles - member, team)
    shift = tl.zeros([BLOCK_C], tl.float32)
    gamma = tl.load(gamma_ptr + chans)
    beta = tl.load(beta_ptr + chans)
    acc = tl.zeros([TILE_HW // FOLD, BLOCK_C], tl.float32)
    acc_sq = tl.zeros([TILE_HW // FOLD, BLOCK_C], tl.float32)
    x = tl.zeros([TILE_HW, BLOCK_C], tl.float32)
    for i in range(mine):
        offs, mask = gs._tile(image, img_size, c, member + i * team, chans, TILE_HW)
        x = gs._input_tile(input_ptr, input_ptr, input_ptr, offs, mask, shift, False, False,
                           "evict_last" if KEEP_IN_L2 else "")
        x3 = tl.reshape(x, [FOLD, TILE_HW // FOLD, BLOCK_C])
        part, part_sq = tl.reduce((x3, x3 * x3), 0, gs._add2)
        acc += part
        acc_sq += part_sq
    ch_sum, ch_sq = tl.reduce((acc, acc_sq), 0, gs._add2)
    gids = tl.arange(0, GROUPS_P)
    in_group = (chans // c_per_group)[:, None] == gids[None, :]
    g_sum, g_sq = tl.reduce((tl.where(in_group, ch_sum[:, None], 0.0), tl.where(in_group, ch_sq[:, None], 0.0)),
                            0, gs._add2)
    touched = tl.max(in_group.to(tl.int32), axis=0) > 0
    members = team * tl.num_programs(1)
    counter = ws_ptr + image * (32 + LANES * 2 * GROUPS_P)
    lane = (member * tl.num_programs(1) + tl.program_id(1)) % LANES
    sums = counter.to(tl.pointer_type(tl.float32), bitcast=True) + 32
    mine_ptr = sums + lane * (2 * GROUPS_P) + gids
    tl.atomic_add(mine_ptr, g_sum, mask=touched, sem="relaxed", scope="gpu")
    tl.atomic_add(mine_ptr + GROUPS_P, g_sq, mask=touched, sem="relaxed", scope="gpu")
    if PHASES >= 2:
        arrive_and_wait(counter, members)
        lanes = sums + tl.arange(0, LANES)[:, None] * (2 * GROUPS_P) + gids[None, :]
        total, total_sq = tl.reduce((tl.load(lanes, volatile=True), tl.load(lanes + GROUPS_P, volatile=True)), 0,
                                    gs._add2)
        if depart(counter, members):
            tl.store(lanes, tl.zeros([LANES, GROUPS_P], tl.float32))
            tl.store(lanes + GROUPS_P, tl.zeros([LANES, GROUPS_P], tl.float32))
            tl.atomic_xchg(counter, 0)
        count = img_size * c_per_group
        mean = total / count
        rstd = 1.0 / tl.sqrt(tl.maximum(total_sq / count - mean * mean, 0.0) + eps)
        mean_c, rstd_c = tl.reduce((tl.where(in_group, mean[None, :], 0.0), tl.where(in_group, rstd[None, :], 0.0)),
                                   1, gs._add2)
        scale = gamma * rstd_c
        offset = beta - mean_c * scale
        ev: tl.constexpr = "evict_first" if KEEP_IN_L2 else ""
        offs, mask = gs._tile(image, img_size, c, member + (mine - 1) * team, chans, TILE_HW)
        if PHASES >= 3:
            if KEEP_LAST:
                gs._normalize(x, offs, mask, scale, offset, output_ptr, True, ev)
            for i in range(KEEP_LAST, mine):
                offs, mask = gs._tile(image, img_size, c, member + (mine - 1 - i) * team, chans, TILE_HW)
                x = tl.load(input_ptr + offs, mask=mask, other=0.0, eviction_policy=ev).to(tl.float32)
                gs._normalize(x, offs, mask, scale, offset, output_ptr, True, ev)
        elif KEEP_LAST:
            tl.store(output_ptr + offs, tl.sum(x, 0).to(output_ptr.dtype.element_ty)[None, :], mask=mask)


def resident(compiled, warps):
    from cuda.bindings import driver

    compiled._init_handles()
    err, per_sm = driver.cuOccupancyMaxActiveBlocksPerMultiprocessor(compiled.function, 32 * warps,
                                                                     compiled.metadata.shared)
    assert int(err) == 0, err
    return per_sm * torch.cuda.get_device_properties(0).multi_processor_count


def flat_launches(part, numel, block, warps):
    """The flat probes of one block size: {label: fn(set)}."""
    grid = (triton.cdiv(numel, block),)

    def read(s, ev):
        read_flat[grid](s[0], part, numel, BLOCK=block, EVICT=ev, num_warps=warps)

    def apply(s, ev):
        apply_flat[grid](s[0], s[1], numel, BLOCK=block, EVICT=ev, num_warps=warps)

    return {
        f"read_flat b{block} w{warps} plain": partial(read, ev=""),
        f"read_flat b{block} w{warps} evict_last": partial(read, ev="evict_last"),
        f"read_flat x2 b{block} (evict_last then again)": lambda s: (read(s, "evict_last"), read(s, "evict_first")),
        f"read_flat(evict_last) + apply_flat(evict_first) b{block}":
            lambda s: (read(s, "evict_last"), apply(s, "evict_first")),
        f"apply_flat alone b{block}": partial(apply, ev=""),
        f"write_flat alone b{block}": lambda s: write_flat[grid](s[1], numel, BLOCK=block, num_warps=warps),
        # What a kernel holding x on chip would do, less its grid barrier: read everything, then write.
        f"read_flat + write_flat b{block}":
            lambda s: (read(s, ""), write_flat[grid](s[1], numel, BLOCK=block, num_warps=warps)),
    }


def l2_retention():
    """A read of N MiB marked evict-last, then the same bytes again: what the second read costs."""
    part = torch.empty(1 << 20, device="cuda", dtype=torch.float32)
    for mb in (5, 10, 15, 20, 25, 30, 40):
        numel = mb * (1 << 20) // 2
        xs = [(torch.randn(numel, device="cuda", dtype=torch.float16), None) for _ in range(max(3, 200 // mb))]
        probes = flat_launches(part, numel, 4096, 4)
        one = graph_us(probes["read_flat b4096 w4 evict_last"], xs)
        two = graph_us(probes["read_flat x2 b4096 (evict_last then again)"], xs)
        print(f"  L2 {mb:3d} MiB: read {one:6.2f} us, again {two - one:6.2f} us ({100 * (two - one) / one:.0f}%)",
              flush=True)
        del xs


def split_cuts(sets, n, hw, c, dtype, rec):
    """kernels/group_norm_split_triton.py's looped kernel cut after each pass, then checked whole."""
    gamma = torch.randn(c, device="cuda")
    beta = torch.randn(c, device="cuda")
    ws = torch.zeros(n * (32 + 16 * 64) + 64, device="cuda", dtype=torch.int32)
    x0, y0 = sets[0]
    for cb, tp, warps, keep in ((32, 128, 4, 1), (32, 128, 4, 0), (64, 64, 4, 0), (32, 64, 4, 0), (64, 128, 8, 0)):
        if c % cb:
            continue
        kw = dict(BLOCK_C=cb, TILE_HW=tp, GROUPS_P=32, LANES=16, FOLD=gs.fold_rows(dtype, cb * tp, warps),
                  KEEP_IN_L2=1, KEEP_LAST=keep, num_warps=warps)
        comps = [split_phases.warmup(x0, y0, gamma, beta, ws, hw, c, c // 32, 1e-5, PHASES=ph, grid=(1,), **kw)
                 for ph in (1, 2, 3)]
        fits = min(resident(comp, warps) for comp in comps)  # one grid for all three cuts
        team = min(triton.cdiv(hw, tp), fits // (n * (c // cb)))
        grid = (team, c // cb, n)
        for ph in (1, 2, 3):
            def launch(s, ph=ph, grid=grid, kw=kw):
                split_phases[grid](s[0], s[1], gamma, beta, ws, hw, c, c // 32, 1e-5, PHASES=ph,
                                   launch_cooperative_grid=True, **kw)

            label = f"split c{cb} t{tp} w{warps} keep={keep} l2=1 phases={ph} team={team} regs={comps[2].n_regs}"
            rec(label, graph_us(launch, sets))
            if ph == 1:
                ws.zero_()  # no rendezvous: nobody reset the sums
        x4 = x0.view(n, hw, c).float()
        ref = torch.nn.functional.group_norm(x4.permute(0, 2, 1), 32, gamma, beta, 1e-5).permute(0, 2, 1)
        ref = torch.nn.functional.silu(ref)
        err = ((y0.view(n, hw, c).float() - ref).norm() / ref.norm()).item()
        assert err < 1e-2, f"split c{cb} t{tp}: relative error {err}"
        assert int(ws.abs().sum()) == 0, "workspace not left zero"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", default="2x64x1280,2x128x320")
    ap.add_argument("--dtypes", default="fp16,fp32")
    ap.add_argument("--flat", action="store_true", help="also time the flat and tiled reads")
    ap.add_argument("--l2", action="store_true", help="L2 retention: a read, then the same bytes again, by size")
    ap.add_argument("--no-split", dest="split", action="store_false", help="skip the tiled kernel's cuts")
    args = ap.parse_args()
    print(torch.cuda.get_device_name(0), flush=True)
    if args.l2:
        l2_retention()
    for dtype in args.dtypes.split(","):
        for spec in args.shapes.split(","):
            probe_shape(dtype, *(int(v) for v in spec.split("x")), args.flat, args.split)


def probe_shape(dtype, n, h, c, flat, split):
    hw = h * h
    numel = n * hw * c
    nbytes = numel * DT[dtype].itemsize
    k = max(3, (200 << 20) // nbytes)  # rotating sets past L2
    sets = [(x, torch.empty_like(x)) for x in (torch.randn(numel, device="cuda", dtype=DT[dtype]) for _ in range(k))]
    part = torch.empty(1 << 20, device="cuda", dtype=torch.float32)
    copy = graph_us(lambda s: s[1].copy_(s[0]), sets)
    print(f"== {dtype} {n}x{h}x{h}x{c}: {nbytes / 1e6:.1f} MB, same-size copy {copy:.2f} us", flush=True)
    res = []

    def rec(label, us):
        res.append((us, label))
        print(f"  {us:8.2f} us  {100 * copy / us:5.1f}% copy  {label}", flush=True)

    if flat:
        for label, fn in flat_launches(part, numel, 4096, 4).items():
            rec(label, graph_us(fn, sets))
        if c % 64 == 0:
            grid = (triton.cdiv(hw, 64), c // 64, n)
            rec("read_tile c64 t64 w4",
                graph_us(lambda s: read_tile[grid](s[0], part, hw, c, TP=64, CB=64, EVICT="", num_warps=4), sets))
    if split:
        split_cuts(sets, n, hw, c, dtype, rec)
    print("  best:", min(res)[1], flush=True)
    del sets
    torch.cuda.empty_cache()

if __name__ == "__main__":
    main()
