"""Pack kernel arguments into the C struct ORT passes (CU_LAUNCH_PARAM_BUFFER_POINTER), from the
offsets recorded in kernels.json, hidden Triton parameters included."""

from __future__ import annotations

import struct

import numpy as np

from tritonforge.errors import TritonforgeError

FORMATS = {"i1": "?", "i8": "b", "u8": "B", "i16": "h", "u16": "H", "fp16": "e", "bf16": "H",
           "i32": "i", "u32": "I", "fp32": "f", "i64": "q", "u64": "Q", "fp64": "d"}


def fmt(type_: str) -> str:
    return "<Q" if type_.startswith("*") else "<" + FORMATS[type_]


def bf16_bits(x: float) -> int:
    """Round-to-nearest-even fp32 -> bf16 bit pattern."""
    u = int(np.array([x], dtype=np.float32).view(np.uint32)[0])
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) & 0xFFFF


# The integer types' ranges: a value past one is refused, never stored cut to the parameter's width.
RANGES = {"i8": (-2**7, 2**7 - 1), "u8": (0, 2**8 - 1), "i16": (-2**15, 2**15 - 1), "u16": (0, 2**16 - 1),
          "i32": (-2**31, 2**31 - 1), "u32": (0, 2**32 - 1), "i64": (-2**63, 2**63 - 1), "u64": (0, 2**64 - 1)}


class ArgumentRangeError(TritonforgeError, ValueError):
    """A value past the range of the kernel argument it is packed into."""


def encode(type_: str, value, name: str = "", kernel: str = "") -> object:
    """`value` as struct.pack stores a parameter of `type_`; a value past an integer type's range is an
    ArgumentRangeError naming the kernel and the parameter."""
    if type_.startswith("*"):
        return int(value)
    if type_ == "bf16":
        return bf16_bits(float(value))
    if type_ in ("fp16", "fp32", "fp64"):
        return float(value)
    if type_ == "i1":
        return bool(value)
    lo, hi = RANGES[type_]
    if not lo <= int(value) <= hi:
        raise ArgumentRangeError(f"{kernel or 'a kernel'}: argument '{name}' = {int(value)} is past its {type_} "
                                 f"({lo} to {hi})")
    return int(value)


def pack_into(buf, params, values: dict, kernel: str = "") -> None:
    """Write each named parameter's value at its recorded offset."""
    for p in params:
        struct.pack_into(fmt(p["type"]), buf, p["offset"], encode(p["type"], values[p["name"]], p["name"], kernel))


def pack(args_size: int, params, values: dict, hidden_params=(), hidden_values: dict | None = None,
         kernel: str = "") -> bytes:
    buf = bytearray(args_size)
    pack_into(buf, params, values, kernel)
    for h in hidden_params:
        struct.pack_into("<Q", buf, h["offset"], int((hidden_values or {}).get(h["name"], 0)))
    return bytes(buf)
