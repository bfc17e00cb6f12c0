"""A launch prepared once and fired many times: packed argument struct, pointer array, grid, block.

Packing happens in `prepare`; firing is a single driver call, which keeps Python launch overhead
to a few microseconds.
"""

from __future__ import annotations

import ctypes
import struct

from .packing import encode, fmt


class Unsupported(Exception):
    """This kernel cannot run this launch (TunableOp's "unsupported": skip the candidate)."""


class PreparedLaunch:
    def __init__(self, kernel, values: dict, grid: tuple[int, int, int], hidden_values: dict):
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
        # ORT's form: {CU_LAUNCH_PARAM_BUFFER_POINTER, &args, CU_LAUNCH_PARAM_BUFFER_SIZE, &size, END}.
        self._size = ctypes.c_size_t(info.args_size)
        self.extra = (ctypes.c_void_p * 5)(1, base, 2, ctypes.addressof(self._size), 0)
        self.extra_addr = ctypes.addressof(self.extra)
        self.update(values)
        for h in info.hidden_params:
            struct.pack_into("<Q", self.buffer, h["offset"], int(hidden_values.get(h["name"], 0)))
        backend = kernel.backend
        raw = getattr(backend, "raw_launcher", None)
        self._raw = raw() if raw else None
        self._head = (int(kernel.function), grid[0], grid[1], grid[2], self.block_x, 1, 1, self.shared)
        self._fire = backend.launch
        self._args = (kernel.function, grid, self.block_x, self.shared)
        self._what = info.name

    def update(self, values: dict) -> None:
        """Change some argument values in place (e.g. new pointers) without re-preparing."""
        params = {p["name"]: p for p in self.kernel.info.params}
        for name, value in values.items():
            p = params[name]
            struct.pack_into(fmt(p["type"]), self.buffer, p["offset"], encode(p["type"], value))

    def packed(self) -> bytes:
        """The bytes ORT would pass with CU_LAUNCH_PARAM_BUFFER_POINTER."""
        return self.buffer.raw[: self.kernel.info.args_size]

    def __call__(self, stream: int = 0) -> None:
        if self._raw is not None:
            err = self._raw(*self._head, stream, self.params_addr, None)
            if err:
                raise self.kernel.backend.error(f"cuLaunchKernel({self._what})", err)
            return
        f, grid, block, shared = self._args
        self._fire(f, grid, block, shared, stream, self.params_addr, self._what)

    def launch_buffer(self, stream: int = 0) -> None:
        """The same launch with the packed struct passed as ORT passes it (CU_LAUNCH_PARAM_BUFFER_POINTER)."""
        err = self._raw(*self._head, stream, None, self.extra_addr)
        if err:
            raise self.kernel.backend.error(f"cuLaunchKernel({self._what})", err)

    def launch_via_bindings(self, stream: int = 0) -> None:
        """The same launch through cuda-python's cuLaunchKernel wrapper (slower; for comparison)."""
        f, grid, block, shared = self._args
        self._fire(f, grid, block, shared, stream, self.params_addr, self._what)
