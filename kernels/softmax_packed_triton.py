"""Softmax and log-softmax of one long 16-bit row per program, the row held packed in registers.

A 32768-wide fp16 row in one program of 16 warps is 64 values per thread. Converted to fp32 and kept
for the output they take 117 registers, so one program fits on an SM; between loading a row and
storing it, the SM then issues no loads, and the kernel reaches ~71% of copy bandwidth on an H200.
Here the row stays in registers as it was loaded, two 16-bit values per 32-bit register, and each of
the three passes (max, sum of exp, output) unpacks it again. With 64 registers per thread
(`maxnreg`), two programs share an SM and one loads while the other reduces.

The unpacking must not be shared between passes: the compiler would keep the fp32 copy alive across
the reductions and the register saving would be gone. `_fresh` hands each pass a copy of the packed
row through a one-instruction inline-PTX move that the compiler cannot merge, so this script is CUDA only
(PLATFORMS). Traffic is the minimum, 2 * batch * n_cols * 2 bytes, with one program per row on grid
(batch, 1, 1); rows must be 16-byte aligned (pairs load as 16-byte vectors).
"""

import triton
import triton.language as tl

PLATFORMS = ("cuda",)  # inline PTX


@triton.jit
def _fresh(packed):
    # An opaque copy (asm with side effects is never merged or hoisted): see the module docstring.
    return tl.inline_asm_elementwise("mov.b32 $0, $1;", "=r,r", [packed], dtype=tl.uint32, is_pure=False, pack=1)


@triton.jit
def _unpack(packed, DT: tl.constexpr):
    """fp32 values of the low and high 16-bit halves of each 32-bit word."""
    lo = (packed & 0xFFFF).to(tl.uint16).to(DT, bitcast=True).to(tl.float32)
    hi = (packed >> 16).to(tl.uint16).to(DT, bitcast=True).to(tl.float32)
    return lo, hi


@triton.jit
def _pack(lo, hi, DT: tl.constexpr):
    lo16 = lo.to(DT).to(tl.uint16, bitcast=True).to(tl.uint32)
    hi16 = hi.to(DT).to(tl.uint16, bitcast=True).to(tl.uint32)
    return lo16 | (hi16 << 16)


@triton.jit
def softmax_packed_kernel(output_ptr, input_ptr, input_row_stride, output_row_stride, n_cols,
                          BLOCK_SIZE: tl.constexpr, LOG: tl.constexpr):
    DT: tl.constexpr = input_ptr.dtype.element_ty
    row = tl.program_id(0).to(tl.int64)
    # Word i holds columns 2i and 2i+1; strides and n_cols are even (multiples of 16 by contract).
    words = tl.max_contiguous(tl.multiple_of(tl.arange(0, BLOCK_SIZE // 2), 8), 8)
    mask = words < n_cols // 2
    src = input_ptr.to(tl.pointer_type(tl.uint32), bitcast=True) + tl.multiple_of(row * (input_row_stride // 2), 8)
    packed = tl.load(src + words, mask=mask, other=0)

    lo, hi = _unpack(packed, DT)
    row_max = tl.max(tl.where(mask, tl.maximum(lo, hi), -float("inf")), axis=0)
    lo, hi = _unpack(_fresh(packed), DT)
    row_sum = tl.sum(tl.where(mask, tl.exp(lo - row_max) + tl.exp(hi - row_max), 0.0), axis=0)
    lo, hi = _unpack(_fresh(packed), DT)
    if LOG:
        log_sum = tl.log(row_sum)  # subtracted after the max: row_max + log_sum rounds log_sum away at 1e30
        y = _pack((lo - row_max) - log_sum, (hi - row_max) - log_sum, DT)
    else:
        scale = 1.0 / row_sum
        y = _pack(tl.exp(lo - row_max) * scale, tl.exp(hi - row_max) * scale, DT)
    dst = output_ptr.to(tl.pointer_type(tl.uint32), bitcast=True) + tl.multiple_of(row * (output_row_stride // 2), 8)
    tl.store(dst + words, y, mask=mask)


DTYPES = ("fp16", "bf16")
OPS = {"softmax": 0, "log_softmax": 1}
# (BLOCK_SIZE, num_warps): 32 or 64 values per thread, at most 64 registers so two programs fit an SM.
CONFIGS = [(16384, 8), (32768, 16)]
MAXNREG = 64


def get_function_table():
    table = []
    for op, log in OPS.items():
        for dtype in DTYPES:
            for block, warps in CONFIGS:
                table.append({
                    "name": f"{op}_packed_{dtype}_b{block}_w{warps}",
                    "group": f"{op}_packed_{dtype}",
                    "func": softmax_packed_kernel,
                    "sig": f"*{dtype}:16,*{dtype}:16,i32:16,i32:16,i32:16",
                    "kwargs": {"num_warps": warps, "maxnreg": MAXNREG,
                               "constants": {"BLOCK_SIZE": block, "LOG": log}},
                })
    return table


def get_launch_contracts():
    contract = {
        "params": ["out", "in", "in_stride", "out_stride", "n_cols"],
        "grid": ["batch", "1", "1"],
        "requires": ["n_cols <= BLOCK_SIZE", "n_cols % 16 == 0 and in_stride % 16 == 0 and out_stride % 16 == 0"],
        "doc": "one row per program, held packed; 16-byte aligned pointers (checked at launch)",
    }
    return {f"{op}_packed_{dtype}": contract for op in OPS for dtype in DTYPES}
