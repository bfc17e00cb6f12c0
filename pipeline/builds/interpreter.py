"""Triton's interpreter (TRITON_INTERPRET=1) on numpy arrays, for kernel numerics without a GPU.

The interpreter runs a kernel's programs one at a time on the host; it expects torch tensors, which this project
does not depend on. `HostTensor` is the part of a tensor it touches, over a numpy array (the memory is already the
host's). Three fixes to Triton's interpreter are applied on import (with TRITON_INTERPRET=1 only): a scalar read as
`int(array of one value)`, which NumPy 2 refuses, `tl.reduce(tuple, None, ...)`, which flattened only the first
tensor of the tuple, and `tl.dot` of bfloat16 operands, which multiplied their bits. libdevice's fast exp and
division, which the interpreter has no host version of, run as tl.exp and `/` (exact: still within every tolerance),
and `triton.language.extra.cuda.num_warps()`, rebound in each loaded script (`rebind`), answers `NUM_WARPS`, which
the caller sets to the launch's. Import this module before any kernel script.
"""

from __future__ import annotations

import os

import numpy as np

NUM_WARPS = 4  # what num_warps() answers inside a kernel: set it to the launch's before each launch
_NAMES = {np.float16: "float16", np.float32: "float32", np.float64: "float64", np.int32: "int32",
          np.int64: "int64", np.uint8: "uint8"}


class _DType:
    def __init__(self, name: str):
        self.name = name

    def __str__(self):
        return self.name

    def __hash__(self):
        return hash(self.name)

    def __eq__(self, other):
        return str(other) == self.name


class _Storage:
    def __init__(self, array: np.ndarray):
        self.array = array

    def data_ptr(self) -> int:
        return self.array.ctypes.data

    def cpu(self):
        return self

    def copy_(self, other):
        return self


class HostTensor:
    """A contiguous numpy array as the interpreter sees a tensor (`bfloat16=True`: uint16 bits of bf16; `fp8=True`:
    uint8 bytes of e4m3)."""

    def __init__(self, array: np.ndarray, bfloat16: bool = False, fp8: bool = False):
        self.array = np.ascontiguousarray(array)
        self.dtype = (_DType("bfloat16") if bfloat16 else _DType("float8_e4m3fn") if fp8
                      else _DType(_NAMES[self.array.dtype.type]))

    def data_ptr(self) -> int:
        return self.array.ctypes.data

    def untyped_storage(self) -> _Storage:
        return _Storage(self.array)

    def storage_offset(self) -> int:
        return 0

    def size(self):
        return self.array.shape

    def stride(self):
        return tuple(s // self.array.itemsize for s in self.array.strides)

    def new_empty(self, *args, **kwargs):
        view = HostTensor.__new__(HostTensor)
        view.array, view.dtype = self.array, self.dtype
        return view

    def set_(self, storage, offset, size, stride):
        self.array = storage.array
        return self


def _patch() -> None:
    import triton.runtime.interpreter as interp

    original = interp._patch_lang_tensor

    def patch_lang_tensor(tensor, *scope):  # Triton 3.9 passes a patch scope too
        original(tensor, *scope)
        tensor.__index__ = lambda self: int(self.handle.data.reshape(-1)[0])

    def unravel(self, input, axis):
        if axis is not None:
            return tuple(input), axis
        return tuple(self.to_tensor(d.handle.data.flatten(), d.dtype) for d in input), 0

    import triton.language as tl

    interp._patch_lang_tensor = patch_lang_tensor
    interp.ReduceOps.unravel = unravel

    dot = interp.InterpreterBuilder.create_dot

    def create_dot(self, a, b, d, *args):  # bf16 operands are uint16 bits to numpy: widen them first
        widen = lambda x: interp.TensorHandle(
            interp._convert_float(x.data, x.dtype.scalar, tl.float32, None).view(np.float32), tl.float32)
        if a.dtype.scalar == tl.bfloat16:
            a, b = widen(a), widen(b)
        return dot(self, a, b, d, *args)

    interp.InterpreterBuilder.create_dot = create_dot

    convert = interp._convert_float

    def convert_float(input, input_dtype, output_dtype, rounding_mode):
        # The interpreter's own narrowing to fp8 drops the carry of a rounding into the exponent (127.9 becomes 64)
        # and does not saturate: e4m3 as the GPU's cvt.rn.satfinite rounds it, from the project's numpy codec
        if output_dtype == tl.float8e4nv and input_dtype == tl.float32:
            from tritonforge.runtime.ortlib.fp8 import to_e4m3_bytes

            return to_e4m3_bytes(np.asarray(input, dtype=np.float32).astype(np.float64))
        return convert(input, input_dtype, output_dtype, rounding_mode)

    interp._convert_float = convert_float

    from triton.language.extra import libdevice

    libdevice.fast_expf = lambda x: tl.exp(x)
    libdevice.fast_dividef = lambda a, b: a / b


def num_warps():
    """Stands in for triton.language.extra.cuda.num_warps() (a builtin the interpreter does not patch)."""
    import triton.language as tl

    return tl.constexpr(NUM_WARPS)


def rebind(module) -> None:
    """Point a loaded kernel script's (or helper's) `num_warps` at the stand-in."""
    if getattr(module, "num_warps", None) is not None and getattr(module.num_warps, "__module__", "").startswith(
            "triton.language.extra"):
        module.num_warps = num_warps


# Only under the interpreter: imported elsewhere (a walk over every module), the host versions of libdevice would
# stand in for the real ones in every kernel this process compiles after.
if os.environ.get("TRITON_INTERPRET") == "1":
    _patch()
