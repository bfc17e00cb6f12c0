"""Softmax and log-softmax of long 16-bit rows held packed in registers: two values per 32-bit word.

A 32768-wide fp16 row in one program of 16 warps is 64 values per thread. Converted to fp32 and kept
for the output they take 117 registers, so one program fits on an SM; between loading a row and
storing it, the SM then issues no loads (softmax_rows_aligned, which keeps fp32 values, reaches ~71%
of copy bandwidth there on an H200).
Here the row stays in registers as it was loaded and each of the three passes (max, sum of exp,
output) unpacks it again. With 64 registers per thread (`maxnreg`), two programs share an SM and one
loads while the other reduces.

At these rates the SM's instruction issue is the next limit: at an H200's bandwidth, 4 bytes of
traffic per element leave ~30 instructions per element at full issue rate, and unpacking with
integer ops, Triton's exp and separate conversions took 25. So the per-element work is written as
the few PTX instructions it needs (14 per element in all): one conversion per value in (`_unpack`),
one MUFU per exp (`_exp2`, no denormal fix-up), one conversion per two values out (`_pack`). Inline
PTX makes this script CUDA only (PLATFORMS). `_unpack` is also not pure, so the compiler cannot share
one pass's fp32 values with the next and keep them alive across the reductions, which would undo the
register saving.

A 64K row is 128 values per thread at 16 warps: 128 registers, one program per SM, so loads and
reductions no longer overlap; still 81.8% of copy bandwidth at 1024 x 65536 fp16 on an H200, where
streaming the row twice (below) reaches 72.5-73% and the split-row team 70-71.5%.

Group `<op>_packed_<dtype>`: one row per program, ORT's arguments and grid (batch, 1, 1), rows up to
64K, 16-byte aligned (words load as 16-byte vectors); traffic 2 * batch * n_cols * 2 bytes. (The same
treatment of the split-row kernel, kernels/softmax_split_triton.py, gained nothing measurable at
64K-256K columns: those are bound by the team's rendezvous, not by instruction issue.)

Group `<op>_packed_online_<dtype>`: longer rows, one per program, streamed twice in chunks as
kernels/softmax_online_triton.py does, with the same per-element instructions.
"""

import triton
import triton.language as tl

PLATFORMS = ("cuda",)  # inline PTX

LOG2E = tl.constexpr(1.4426950408889634)


@triton.jit
def _unpack(packed, DT: tl.constexpr):
    """The two 16-bit values of each 32-bit word as fp32 (low half first); each call a fresh copy."""
    if DT == tl.float16:
        lo, hi = tl.inline_asm_elementwise(
            "{ .reg .b16 l, h; mov.b32 {l, h}, $2; cvt.f32.f16 $0, l; cvt.f32.f16 $1, h; }",
            "=f,=f,r", [packed], dtype=(tl.float32, tl.float32), is_pure=False, pack=1)
    else:  # bf16 is the top half of an fp32: shifting is the conversion
        lo, hi = tl.inline_asm_elementwise(
            "{ shl.b32 $0, $2, 16; and.b32 $1, $2, 0xFFFF0000; }",
            "=f,=f,r", [packed], dtype=(tl.float32, tl.float32), is_pure=False, pack=1)
    return lo, hi


@triton.jit
def _pack(lo, hi, DT: tl.constexpr):
    """Round two fp32 values to DT and pack them into one word, in one instruction."""
    if DT == tl.float16:
        word = tl.inline_asm_elementwise("cvt.rn.f16x2.f32 $0, $2, $1;", "=r,f,f", [lo, hi], dtype=tl.uint32,
                                         is_pure=True, pack=1)
    else:
        word = tl.inline_asm_elementwise("cvt.rn.bf16x2.f32 $0, $2, $1;", "=r,f,f", [lo, hi], dtype=tl.uint32,
                                         is_pure=True, pack=1)
    return word


@triton.jit
def _exp2(x):
    # One MUFU instruction; the default lowering adds a denormal fix-up (results below 2^-126 are 0 here).
    # Callers pass (x - max) * log2(e), never x * log2(e) - max * log2(e): fused into one FMA, that
    # leaves max * log2(e)'s rounding error (2^75 near 1e30) in the exponent.
    return tl.inline_asm_elementwise("ex2.approx.ftz.f32 $0, $1;", "=f,f", [x], dtype=tl.float32, is_pure=True,
                                     pack=1)


@triton.jit
def _load_words(ptr, row_stride, row, words, mask, DT: tl.constexpr, EVICT: tl.constexpr):
    """Words `words` of row `row` (strides in elements); words past the row read as two -inf, which
    drop out of the max and add exp(-inf) = 0 to the sum."""
    src = ptr.to(tl.pointer_type(tl.uint32), bitcast=True) + tl.multiple_of(row * (row_stride // 2), 8)
    if DT == tl.float16:
        packed = tl.load(src + words, mask=mask, other=0xFC00FC00, eviction_policy=EVICT)
    else:
        packed = tl.load(src + words, mask=mask, other=0xFF80FF80, eviction_policy=EVICT)
    return packed


@triton.jit
def _max_and_sum(packed, DT: tl.constexpr):
    """Max of the row and sum of exp(x - max) (0, not NaN, for a row that is all -inf)."""
    lo, hi = _unpack(packed, DT)
    block_max = tl.max(tl.maximum(lo, hi), axis=0)
    lo, hi = _unpack(packed, DT)
    block_sum = tl.sum(_exp2((lo - block_max) * LOG2E) + _exp2((hi - block_max) * LOG2E), axis=0)
    return block_max, tl.where(block_max > -float("inf"), block_sum, 0.0)


@triton.jit
def _normalized(packed, row_max, row_sum, LOG: tl.constexpr, DT: tl.constexpr):
    """The output words: exp(x - max) / sum, or (x - max) - log(sum) (in that order: max + log(sum)
    would round the log away when the max is near 1e30)."""
    lo, hi = _unpack(packed, DT)
    if LOG:
        log_sum = tl.log(row_sum)
        y = _pack((lo - row_max) - log_sum, (hi - row_max) - log_sum, DT)
    else:
        scale = 1.0 / row_sum
        y = _pack(_exp2((lo - row_max) * LOG2E) * scale, _exp2((hi - row_max) * LOG2E) * scale, DT)
    return y


@triton.jit
def softmax_packed_kernel(output_ptr, input_ptr, input_row_stride, output_row_stride, n_cols,
                          BLOCK_SIZE: tl.constexpr, LOG: tl.constexpr):
    DT: tl.constexpr = input_ptr.dtype.element_ty
    row = tl.program_id(0).to(tl.int64)
    words = tl.max_contiguous(tl.multiple_of(tl.arange(0, BLOCK_SIZE // 2), 8), 8)  # word i: columns 2i, 2i+1
    mask = words < n_cols // 2
    packed = _load_words(input_ptr, input_row_stride, row, words, mask, DT, "")
    row_max, row_sum = _max_and_sum(packed, DT)
    dst = output_ptr.to(tl.pointer_type(tl.uint32), bitcast=True) + tl.multiple_of(row * (output_row_stride // 2), 8)
    tl.store(dst + words, _normalized(packed, row_max, row_sum, LOG, DT), mask=mask)


@triton.jit
def softmax_packed_online_kernel(output_ptr, input_ptr, input_row_stride, output_row_stride, n_cols,
                                 BLOCK_SIZE: tl.constexpr, LOG: tl.constexpr):
    """Rows longer than registers, streamed twice as kernels/softmax_online_triton.py does (evict-last
    on the way in, newest chunk first on the way out), with the per-element work of the packed rows."""
    DT: tl.constexpr = input_ptr.dtype.element_ty
    row = tl.program_id(0).to(tl.int64)
    words = tl.max_contiguous(tl.multiple_of(tl.arange(0, BLOCK_SIZE // 2), 8), 8)
    n_words = n_cols // 2
    row_max = tl.max(tl.full([BLOCK_SIZE // 2], -float("inf"), tl.float32), axis=0)
    sums = tl.zeros([BLOCK_SIZE // 2], tl.float32)
    packed = _load_words(input_ptr, input_row_stride, row, words, words < 0, DT, "")  # all -inf
    for start in range(0, n_words, BLOCK_SIZE // 2):
        packed = _load_words(input_ptr, input_row_stride, row, start + words, start + words < n_words, DT,
                             "evict_last")
        lo, hi = _unpack(packed, DT)
        new_max = tl.maximum(row_max, tl.max(tl.maximum(lo, hi), axis=0))
        shift = tl.where(new_max > -float("inf"), new_max, 0.0)  # 0 while all seen is -inf: sums stay 0
        sums = (sums * _exp2((row_max - shift) * LOG2E) + _exp2((lo - shift) * LOG2E)
                + _exp2((hi - shift) * LOG2E))
        row_max = new_max
    row_sum = tl.sum(sums, axis=0)
    dst = output_ptr.to(tl.pointer_type(tl.uint32), bitcast=True) + tl.multiple_of(row * (output_row_stride // 2), 8)
    n_chunks = tl.cdiv(n_words, BLOCK_SIZE // 2)
    newest = (n_chunks - 1) * (BLOCK_SIZE // 2)
    tl.store(dst + newest + words, _normalized(packed, row_max, row_sum, LOG, DT), mask=newest + words < n_words,
             eviction_policy="evict_first")
    for i in range(1, n_chunks):  # whole chunks, newest first
        start = newest - i * (BLOCK_SIZE // 2)
        packed = _load_words(input_ptr, input_row_stride, row, start + words, start + words < n_words, DT,
                             "evict_first")
        tl.store(dst + start + words, _normalized(packed, row_max, row_sum, LOG, DT), eviction_policy="evict_first")


DTYPES = ("fp16", "bf16")
OPS = {"softmax": 0, "log_softmax": 1}
# One row per program, (BLOCK_SIZE, num_warps, maxnreg): up to 32K columns 64 values per thread in at
# most 64 registers, so two programs fit an SM; a 64K row takes the SM's registers alone (at 32 warps
# and 64 registers it spills and is slower).
CONFIGS = [(16384, 8, 64), (32768, 16, 64), (65536, 16, 128)]
STREAMED = [(8192, 4), (8192, 8), (16384, 16)]  # (BLOCK_SIZE, num_warps) of a chunk


def get_function_table():
    table = []
    for op, log in OPS.items():
        for dtype in DTYPES:
            for block, warps, maxnreg in CONFIGS:
                table.append({
                    "name": f"{op}_packed_{dtype}_b{block}_w{warps}",
                    "group": f"{op}_packed_{dtype}",
                    "func": softmax_packed_kernel,
                    "sig": f"*{dtype}:16,*{dtype}:16,i32:16,i32:16,i32:16",
                    "kwargs": {"num_warps": warps, "maxnreg": maxnreg,
                               "constants": {"BLOCK_SIZE": block, "LOG": log}},
                })
            for block, warps in STREAMED:
                table.append({
                    "name": f"{op}_packed_online_{dtype}_b{block}_w{warps}",
                    "group": f"{op}_packed_online_{dtype}",
                    "func": softmax_packed_online_kernel,
                    "sig": f"*{dtype}:16,*{dtype}:16,i32:16,i32:16,i32:16",
                    "kwargs": {"num_warps": warps, "constants": {"BLOCK_SIZE": block, "LOG": log}},
                })
    return table


def get_launch_contracts():
    contract = {
        "params": ["out", "in", "in_stride", "out_stride", "n_cols"],
        "grid": ["batch", "1", "1"],
        "requires": ["n_cols <= BLOCK_SIZE", "n_cols % 16 == 0 and in_stride % 16 == 0 and out_stride % 16 == 0"],
        "doc": "one row per program, held packed; 16-byte aligned pointers (checked at launch)",
    }
    streamed = {**contract, "requires": ["n_cols > BLOCK_SIZE", contract["requires"][1]],
                "doc": "one row per program, streamed twice in BLOCK_SIZE chunks; 16-byte aligned pointers (checked "
                       "at launch)"}
    out = {}
    for op in OPS:
        for dtype in DTYPES:
            out[f"{op}_packed_{dtype}"] = contract
            out[f"{op}_packed_online_{dtype}"] = streamed
    return out
