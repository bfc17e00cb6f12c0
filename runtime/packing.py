"""Pack kernel arguments into the C struct ORT passes (CU_LAUNCH_PARAM_BUFFER_POINTER), from the
offsets recorded in kernels.json, hidden Triton parameters included."""

from __future__ import annotations

import struct

import numpy as np

FORMATS = {"i1": "?", "i8": "b", "u8": "B", "i16": "h", "u16": "H", "fp16": "e", "bf16": "H",
           "i32": "i", "u32": "I", "fp32": "f", "i64": "q", "u64": "Q", "fp64": "d"}


def fmt(type_: str) -> str:
    return "<Q" if type_.startswith("*") else "<" + FORMATS[type_]


def bf16_bits(x: float) -> int:
    """Round-to-nearest-even fp32 -> bf16 bit pattern."""
    u = int(np.array([x], dtype=np.float32).view(np.uint32)[0])
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) & 0xFFFF


def encode(type_: str, value) -> object:
    if type_.startswith("*"):
        return int(value)
    if type_ == "bf16":
        return bf16_bits(float(value))
    if type_ in ("fp16", "fp32", "fp64"):
        return float(value)
    if type_ == "i1":
        return bool(value)
    return int(value)


def pack_into(buf, params, values: dict) -> None:
    """Write each named parameter's value at its recorded offset."""
    for p in params:
        struct.pack_into(fmt(p["type"]), buf, p["offset"], encode(p["type"], values[p["name"]]))


def pack(args_size: int, params, values: dict, hidden_params=(), hidden_values: dict | None = None) -> bytes:
    buf = bytearray(args_size)
    pack_into(buf, params, values)
    for h in hidden_params:
        struct.pack_into("<Q", buf, h["offset"], int((hidden_values or {}).get(h["name"], 0)))
    return bytes(buf)
