"""Packed 16-bit math: fp16 / bf16 rows kept two values to a 32-bit word, with the per-element work
written as the few PTX instructions it needs.

Between loading a row and storing it, a kernel that holds the row as fp32 spends registers the SM
could use for the next row's loads. Kept as loaded, two values per word, a row costs half the
registers, and each pass unpacks it again (`unpack` is not pure, so the compiler cannot keep the fp32
values alive across the reductions and undo the saving). The element work is one conversion per value
in, one MUFU per exp (`exp2`, no denormal fix-up) and one conversion per two values out (`pack`).
Inline PTX: CUDA only.
"""

import triton
import triton.language as tl

LOG2E = tl.constexpr(1.4426950408889634)


@triton.jit
def unpack(packed, DT: tl.constexpr):
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
def pack(lo, hi, DT: tl.constexpr):
    """Round two fp32 values to DT and pack them into one word, in one instruction."""
    if DT == tl.float16:
        word = tl.inline_asm_elementwise("cvt.rn.f16x2.f32 $0, $2, $1;", "=r,f,f", [lo, hi], dtype=tl.uint32,
                                         is_pure=True, pack=1)
    else:
        word = tl.inline_asm_elementwise("cvt.rn.bf16x2.f32 $0, $2, $1;", "=r,f,f", [lo, hi], dtype=tl.uint32,
                                         is_pure=True, pack=1)
    return word


@triton.jit
def exp2(x):
    # One MUFU instruction; the default lowering adds a denormal fix-up (results below 2^-126 are 0 here).
    # Callers pass (x - max) * log2(e), never x * log2(e) - max * log2(e): fused into one FMA, that
    # leaves max * log2(e)'s rounding error (2^75 near 1e30) in the exponent.
    return tl.inline_asm_elementwise("ex2.approx.ftz.f32 $0, $1;", "=f,f", [x], dtype=tl.float32, is_pure=True,
                                     pack=1)


@triton.jit
def load_words(ptr, row_stride, row, words, mask, DT: tl.constexpr, EVICT: tl.constexpr):
    """Words `words` of row `row` (strides in elements); words past the row read as two -inf, which
    drop out of the max and add exp(-inf) = 0 to the sum."""
    src = ptr.to(tl.pointer_type(tl.uint32), bitcast=True) + tl.multiple_of(row * (row_stride // 2), 8)
    if DT == tl.float16:
        packed = tl.load(src + words, mask=mask, other=0xFC00FC00, eviction_policy=EVICT)
    else:
        packed = tl.load(src + words, mask=mask, other=0xFF80FF80, eviction_policy=EVICT)
    return packed


@triton.jit
def words_max(packed, DT: tl.constexpr):
    lo, hi = unpack(packed, DT)
    return tl.max(tl.maximum(lo, hi), axis=0)


@triton.jit
def words_sum(packed, row_max, DT: tl.constexpr):
    """Sum of exp(x - row_max) over the words (0, not NaN, when row_max is -inf)."""
    lo, hi = unpack(packed, DT)
    block_sum = tl.sum(exp2((lo - row_max) * LOG2E) + exp2((hi - row_max) * LOG2E), axis=0)
    return tl.where(row_max > -float("inf"), block_sum, 0.0)


@triton.jit
def max_and_sum(packed, DT: tl.constexpr):
    """Max of the row and sum of exp(x - max) (0, not NaN, for a row that is all -inf)."""
    block_max = words_max(packed, DT)
    return block_max, words_sum(packed, block_max, DT)


@triton.jit
def normalized(packed, row_max, row_sum, LOG: tl.constexpr, DT: tl.constexpr):
    """The output words: exp(x - max) / sum, or (x - max) - log(sum) (in that order: max + log(sum)
    would round the log away when the max is near 1e30)."""
    lo, hi = unpack(packed, DT)
    if LOG:
        log_sum = tl.log(row_sum)
        y = pack((lo - row_max) - log_sum, (hi - row_max) - log_sum, DT)
    else:
        scale = 1.0 / row_sum
        y = pack(exp2((lo - row_max) * LOG2E) * scale, exp2((hi - row_max) * LOG2E) * scale, DT)
    return y
