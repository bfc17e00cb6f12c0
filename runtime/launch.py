"""A launch prepared once and fired many times: packed argument struct, pointer array, grid, block.

Packing happens in `prepare`; firing is a single driver call, which keeps Python launch overhead
to a few microseconds.
"""

from __future__ import annotations

import ctypes
import struct

from tritonforge.errors import TritonforgeError

from .packing import ArgumentRangeError, encode, fmt


class Unsupported(TritonforgeError):
    """This kernel cannot run this launch (TunableOp's "unsupported": skip the candidate)."""


class PreparedLaunch:
    def __init__(self, kernel, values: dict, grid: tuple[int, int, int], hidden_values: dict,
                 cooperative: bool = False, cluster: tuple[int, int, int] | None = None):
        info = kernel.info
        self.kernel = kernel
        self.grid = grid
        self.block_x = info.threads_per_block
        self.shared = info.shared
        # The ORT argument struct, hidden Triton parameters included.
        self.buffer = ctypes.create_string_buffer(max(info.args_size, 8))
        base = ctypes.addressof(self.buffer)
        slots = [*info.params, *info.hidden_params]
        self.pointers = (ctypes.c_void_p * len(slots))(*[base + p["offset"] for p in slots])
        self.params_addr = ctypes.addressof(self.pointers)
        self.update(values)
        for h in info.hidden_params:
            struct.pack_into("<Q", self.buffer, h["offset"], int(hidden_values.get(h["name"], 0)))
        self.fire = kernel.backend.bind_launch(kernel.function, grid, self.block_x, self.shared,
                                               self.params_addr, info.name, cooperative, cluster)

    def update(self, values: dict) -> None:
        """Change some argument values in place (e.g. new pointers) without re-preparing."""
        params = {p["name"]: p for p in self.kernel.info.params}
        for name, value in values.items():
            p = params[name]
            try:
                packed = encode(p["type"], value, name, self.kernel.info.name)
            except ArgumentRangeError as exc:  # this kernel cannot take the value: the next candidate may
                raise Unsupported(str(exc)) from None
            struct.pack_into(fmt(p["type"]), self.buffer, p["offset"], packed)

    def packed(self) -> bytes:
        """The bytes ORT would pass with CU_LAUNCH_PARAM_BUFFER_POINTER."""
        return self.buffer.raw[: self.kernel.info.args_size]

    def __call__(self, stream=None) -> None:
        """Launch on `stream` (default: the NULL stream). `fire` is the same without this frame."""
        self.fire(stream)
