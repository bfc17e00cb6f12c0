"""Row softmax and log-softmax, in ONNX Runtime's function-table convention.

One program normalises one row, so every kernel here keeps ORT's softmax launch contract: the C++ op
packs `{out, in, in_stride, out_stride, n_cols}` and launches grid `(batch, 1, 1)`, and a kernel may
run when its BLOCK_SIZE covers the row (`n_cols <= BLOCK_SIZE`). The whole row is held in registers,
read once and written once: 2 * batch * n_cols * sizeof(dtype) bytes of traffic, the minimum.

Maths in fp32 whatever the storage type; masked lanes load -inf so they vanish from max and sum.
Rows of -inf give NaN, as torch.softmax does.

Groups `softmax_<dtype>` (ORT's) and `log_softmax_<dtype>`: ORT's five arguments, grid (batch, 1, 1),
a candidate when n_cols <= BLOCK_SIZE; any strides and alignment. BLOCK_SIZE runs from 32 to 16384.
The entry named `softmax_<dtype>_<block>` carries ORT's own num_warps choice (4, 8 from 2048, 16 from
4096) so ORT-parity names exist; softmax's `_w<N>` entries are the alternatives TunableOp chooses
among. ORT never launches log-softmax, so its group holds ORT's choice alone: the one-program-per-row
fallback of the runtime's log-softmax.
"""

import triton
import triton.language as tl

# ORT compiles its scripts one by one (compile_triton.py --script_files): this one imports nothing but
# triton, so it stays a drop-in for ORT's own softmax_triton.py. (kernels/_softmax_row.py holds the same
# row for the scripts that add kernels to ORT's groups.)


@triton.jit
def _row(output_ptr, input_ptr, input_row_stride, output_row_stride, n_cols, row,
         BLOCK_SIZE: tl.constexpr, LOG: tl.constexpr):
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    x = tl.load(input_ptr + row * input_row_stride + cols, mask=mask, other=-float("inf"))
    if x.dtype != tl.float64:
        x = x.to(tl.float32)
    shifted = x - tl.max(x, axis=0)
    numerator = tl.exp(shifted)
    denominator = tl.sum(numerator, axis=0)
    if LOG:
        y = shifted - tl.log(denominator)
    else:
        y = numerator / denominator
    tl.store(output_ptr + row * output_row_stride + cols, y.to(output_ptr.dtype.element_ty), mask=mask)


@triton.jit
def softmax_kernel(output_ptr, input_ptr, input_row_stride, output_row_stride, n_cols,
                   BLOCK_SIZE: tl.constexpr, LOG: tl.constexpr):
    VEC: tl.constexpr = 128 // input_ptr.dtype.element_ty.primitive_bitwidth  # elements in 16 bytes
    row = tl.program_id(0).to(tl.int64)  # 64-bit row offsets: batch * stride may pass 2**31
    if (n_cols % VEC == 0) & (input_row_stride % VEC == 0) & (output_row_stride % VEC == 0):
        # Written as multiples, the compiler knows rows start on 16 bytes (with the signature's aligned
        # pointers) and moves 16-byte vectors instead of single elements.
        _row(output_ptr, input_ptr, input_row_stride // VEC * VEC, output_row_stride // VEC * VEC,
             n_cols // VEC * VEC, row, BLOCK_SIZE, LOG)
    else:
        _row(output_ptr, input_ptr, input_row_stride, output_row_stride, n_cols, row, BLOCK_SIZE, LOG)


DTYPES = ("fp32", "fp16", "bf16", "fp64")
BLOCKS = (32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)
OPS = {"softmax": 0, "log_softmax": 1}


def ort_num_warps(block: int) -> int:
    """ORT's softmax_triton.py choice, kept for the parity-named kernel of each block."""
    return 16 if block >= 4096 else 8 if block >= 2048 else 4


def warp_choices(block: int) -> list[int]:
    """Candidates for tuning: ORT's choice and the neighbours that win somewhere (at most 16 warps:
    16 x 64 = 1024 threads, the most a wave64 GPU can launch). Short rows also get one-warp programs."""
    if block <= 128:
        return [1, 4]
    base = ort_num_warps(block)
    return sorted({base, max(2, base // 2), *([min(16, base * 2)] if block in (1024, 2048) else [])})


def get_function_table():
    table = []
    for op, log in OPS.items():
        for dtype in DTYPES:
            for block in BLOCKS:
                base = ort_num_warps(block)
                for warps in warp_choices(block) if not log else [base]:
                    suffix = "" if warps == base else f"_w{warps}"
                    table.append({
                        "name": f"{op}_{dtype}_{block}{suffix}",
                        "group": f"{op}_{dtype}",
                        "func": softmax_kernel,
                        "sig": f"*{dtype}:16,*{dtype}:16,i32,i32,i32",
                        "kwargs": {"num_warps": warps, "constants": {"BLOCK_SIZE": block, "LOG": log}},
                    })
    return table


def get_launch_contracts():
    contract = {
        "params": ["out", "in", "in_stride", "out_stride", "n_cols"],
        "grid": ["batch", "1", "1"],
        "requires": ["n_cols <= BLOCK_SIZE"],
        "doc": "one program per row; strides in elements",
    }
    return {f"{op}_{dtype}": contract for op in OPS for dtype in DTYPES}
