"""What ORT's launches leave reachable: a copy of the tensor on ORT's grid, tuned like a kernel.

ORT launches its GroupNorm candidates on (n, groups, 1): one program per (image, group), each owning
c_per_group channels of every pixel, strided by c. Whatever a GroupNorm does, it must at least move
its group's bytes with that many programs. This copy does only that, with what the GroupNorm kernels
tune: the group walked as rows of VEC channels (the widest vector, at most 16 bytes, that divides
c_per_group and c: no empty lanes), a step of STEP_BYTES in flight, 8 or 16 warps; the best of every
setting is the ceiling. PASSES = 1 reads and writes once (a group that stays on chip), PASSES = 2 reads
the group, then reads it again and writes it (a two-pass GroupNorm of a group that does not).

ORT's softmax launches (batch, 1, 1): one program per row. `row_copy_ms` copies each row with one
program, in chunks of 512 to 8192 values on 1 to 16 warps, the best setting the ceiling: many short rows
are bound by how fast programs start and finish, a few long rows by one program's bytes in flight.

Needs torch and triton (GPU runners); timed as every torch baseline, by CUDA-graph replay.
"""

from __future__ import annotations

SETTINGS = [(step, warps) for step in (32 << 10, 64 << 10) for warps in (8, 16)]
GROUPS = 32


def vector(cpg: int, c: int, esize: int) -> int:
    """The widest vector (values) of at most 16 bytes that divides c_per_group and c."""
    vec = 16 // esize
    while vec > 1 and (cpg % vec or c % vec):
        vec //= 2
    return vec


def _kernel():
    import triton
    import triton.language as tl

    @triton.jit
    def rows_at(base, start, r, per_pixel, c, VEC: tl.constexpr):
        """Offsets of rows start + r of the group (VEC channels each, per_pixel a pixel), and their mask."""
        row = start + r
        pixel = row // per_pixel
        at = base + pixel.to(tl.int64)[:, None] * c + ((row - pixel * per_pixel) * VEC)[:, None]
        return at + tl.arange(0, VEC)[None, :], row

    @triton.jit
    def group_copy(src, dst, hw, c, cpg, VEC: tl.constexpr, ROWS: tl.constexpr, PASSES: tl.constexpr):
        image = tl.program_id(0).to(tl.int64)
        per_pixel = cpg // VEC
        c = c // VEC * VEC  # multiples of VEC the compiler can see: vector loads
        base = image * hw * c + tl.program_id(1) * (per_pixel * VEC)
        r = tl.arange(0, ROWS)
        total_rows = hw * per_pixel
        if PASSES == 2:  # read the group once (summed, so the loads stay), as a GroupNorm's pass 1
            acc = tl.zeros([ROWS, VEC], dtype=tl.float32)
            for start in range(0, total_rows, ROWS):
                at, row = rows_at(base, start, r, per_pixel, c, VEC)
                acc += tl.load(src + at, mask=(row < total_rows)[:, None], other=0.0).to(tl.float32)
            bias = tl.sum(tl.sum(acc, axis=1), axis=0) * 0.0
        for start in range(0, total_rows, ROWS):
            at, row = rows_at(base, start, r, per_pixel, c, VEC)
            mask = (row < total_rows)[:, None]
            v = tl.load(src + at, mask=mask)
            if PASSES == 2:
                v = (v.to(tl.float32) + bias).to(v.dtype)
            tl.store(dst + at, v, mask=mask)

    return group_copy


def _row_kernel():
    import triton
    import triton.language as tl

    @triton.jit
    def row_copy(src, dst, n_cols, CHUNK: tl.constexpr):
        row = tl.program_id(0).to(tl.int64) * n_cols
        cols = tl.arange(0, CHUNK)
        for start in range(0, n_cols, CHUNK):
            mask = start + cols < n_cols
            tl.store(dst + row + start + cols, tl.load(src + row + start + cols, mask=mask), mask=mask)

    return row_copy


_COPY = None
_ROW_COPY = None


def row_copy_ms(rows: int, cols: int, inputs: list, out, reps: int = 20):
    """(best ms, setting) of a copy by ORT's softmax grid: one program per row, cycling `inputs`."""
    import torch
    import triton

    from benchmarks.gpu_common import torch_graph_ms

    global _ROW_COPY
    if _ROW_COPY is None:
        _ROW_COPY = _row_kernel()
    whole = triton.next_power_of_2(cols)
    best = None
    for chunk, warps in sorted({(min(whole, c), min(w, max(1, min(whole, c) // 32)))
                                for c, w in ((512, 1), (1024, 2), (2048, 4), (4096, 8), (8192, 16))}):

        def launch(x, chunk=chunk, warps=warps):
            _ROW_COPY[(rows,)](x, out, cols, CHUNK=chunk, num_warps=warps)

        ms = torch_graph_ms(launch, inputs, reps)
        if best is None or ms < best[0]:
            best = (ms, f"chunk={chunk} warps={warps}")
    launch(inputs[0])
    torch.cuda.synchronize()
    assert torch.equal(out, inputs[0]), f"row copy of {rows}x{cols} lost bytes"
    return best


def ort_grid_copy_ms(n: int, hw: int, c: int, dtype: str, passes: int, inputs: list, out, reps: int = 20):
    """(best ms, setting) over SETTINGS of the copy by ORT's grid of n x 32 programs, cycling `inputs`."""
    import torch

    from benchmarks.gpu_common import torch_graph_ms

    global _COPY
    if _COPY is None:
        _COPY = _kernel()
    esize = torch.finfo(out.dtype).bits // 8
    cpg = c // GROUPS
    vec = vector(cpg, c, esize)
    best = None
    for step_bytes, warps in SETTINGS:
        rows = max(1, step_bytes // (vec * esize))

        def launch(x, rows=rows, warps=warps):
            _COPY[(n, GROUPS)](x, out, hw, c, cpg, VEC=vec, ROWS=rows, PASSES=passes, num_warps=warps)

        ms = torch_graph_ms(launch, inputs, reps)
        if best is None or ms < best[0]:
            best = (ms, f"VEC={vec} step={step_bytes >> 10}KB warps={warps}")
    if passes == 1:  # every byte copied: checked once, on the last setting
        launch(inputs[0])
        torch.cuda.synchronize()
        assert torch.equal(out, inputs[0]), f"ORT-grid copy of {n}x{hw}x{c} {dtype} lost bytes"
    return best


__all__ = ["ort_grid_copy_ms", "row_copy_ms", "vector", "SETTINGS"]
