"""What every op's tuning problem shares once on the GPU (each op module's setup builds on it): inputs
and outputs in K rotating slots whose total exceeds L2 several times, each timed launch moving its
role pointers to the next slot, one prepared launch per candidate, and the bandwidth of a time.
"""

from __future__ import annotations

import math

import numpy as np

from .memory import DTYPES, element_size, from_storage
from .timing import rotation_slots


class RotatingSetup:
    """Slots of `tensor_bytes` for the roles in `rotating`; subclasses prepare launches and check them."""

    ort_group: str

    def __init__(self, registry, timer, tensor_bytes: int, roles: tuple[str, ...]):
        self.registry, self.timer, self.tensor_bytes = registry, timer, tensor_bytes
        # Each slot starts 256-byte aligned, as ORT's allocator places tensors: the kernels' signatures
        # promise 16-byte-aligned pointers, and a tensor of an odd size (1 x 50257 fp16) must not break it.
        self.slot_bytes = -(-tensor_bytes // 256) * 256
        backend = registry.backend
        self.slots = rotation_slots(len(roles) * self.slot_bytes, backend.limits["l2_bytes"])
        self.base = {role: backend.alloc(self.slots * self.slot_bytes) for role in roles}
        self._launches = {}

    def fill_slots(self, role: str, host: np.ndarray) -> None:
        backend = self.registry.backend
        backend.copy_htod(self.base[role], host.ctypes.data, self.tensor_bytes)
        for s in range(1, self.slots):
            backend.copy_dtod(self.base[role] + s * self.slot_bytes, self.base[role], self.tensor_bytes)
        backend.synchronize()

    def _prepare(self, name: str):
        raise NotImplementedError

    def launch(self, name: str):
        """A prepared launch of `name` on slot 0 (raises Unsupported)."""
        if name not in self._launches:
            self._launches[name] = self._prepare(name)
        return self._launches[name]

    def is_ort(self, name: str) -> bool:
        """In ORT's own group: what an unmodified ORT build can register and launch for this op."""
        return self.registry.by_name[name].group == self.ort_group

    def time_ms(self, name: str, reps: int) -> float:
        """GPU time per launch, rotating over the slots (L2 does not keep the input between launches)."""
        launch = self.launch(name)
        info = launch.kernel.info
        by_role = dict(zip(self.registry.artifacts.contract(info.group)["params"], (p["name"] for p in info.params)))
        params = {by_role[role]: base for role, base in self.base.items()}
        size = self.slot_bytes

        def body(stream, i):
            offset = (i % self.slots) * size
            launch.update({param: base + offset for param, base in params.items()})
            launch.fire(stream)

        try:
            return self.timer.per_launch_ms(body, max(reps, 1))
        finally:
            launch.update(params)

    def read_slot0(self, role: str, rows: int, cols: int, row_indices=None) -> np.ndarray:
        """Rows of slot 0 of `role` back on the host, widened from the storage type."""
        backend = self.registry.backend
        np_type = DTYPES[self.p.dtype][0]
        indices = range(rows) if row_indices is None else row_indices
        got = np.empty((len(indices), cols), dtype=np_type)
        row_bytes = cols * element_size(self.p.dtype)
        if row_indices is None:
            backend.copy_dtoh(got.ctypes.data, self.base[role], rows * row_bytes)
        else:
            for i, r in enumerate(indices):
                backend.copy_dtoh(got[i].ctypes.data, self.base[role] + int(r) * row_bytes, row_bytes)
        return from_storage(got, self.p.dtype)

    def free(self) -> None:
        for ptr in self.base.values():
            self.registry.backend.free(ptr)


def gbps(problem, ms: float) -> float:
    return problem.bytes_moved / (ms * 1e-3) / 1e9 if ms and not math.isinf(ms) else 0.0


__all__ = ["RotatingSetup", "gbps"]
