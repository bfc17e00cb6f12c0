"""One softmax problem on the GPU, set up for timing: rotating slots, one prepared launch per
candidate, and a numerical check of a candidate's output against a float64 reference."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .launch import Unsupported
from .memory import DTYPES, element_size, from_storage, to_storage
from .ops.softmax import Softmax
from .reference import mismatch, quantize, softmax_ref
from .timing import rotation_slots

CHECK_ROWS = 32


@dataclass(frozen=True)
class Problem:
    op: str  # "softmax" or "log_softmax"
    dtype: str
    batch: int
    n_cols: int

    @property
    def op_key(self) -> str:
        return f"{self.op}_{self.dtype}"

    @property
    def params_signature(self) -> str:
        """ORT's SoftmaxParams::Signature(): "{batch_count}_{softmax_elements}"."""
        return f"{self.batch}_{self.n_cols}"

    @property
    def bytes_moved(self) -> int:
        """One read and one write of the tensor: the least any softmax can move."""
        return 2 * self.batch * self.n_cols * element_size(self.dtype)


class SoftmaxSetup:
    def __init__(self, registry, timer, problem: Problem, rng: np.random.Generator):
        self.registry, self.timer, self.p = registry, timer, problem
        self.op = Softmax(registry, problem.dtype, problem.op == "log_softmax")
        backend = registry.backend
        elem = element_size(problem.dtype)
        self.tensor_bytes = problem.batch * problem.n_cols * elem
        self.slots = rotation_slots(2 * self.tensor_bytes, backend.limits["l2_bytes"])
        self.inp = backend.alloc(self.slots * self.tensor_bytes)
        self.out = backend.alloc(self.slots * self.tensor_bytes)
        x = (rng.standard_normal((problem.batch, problem.n_cols)) * rng.uniform(0.5, 4)).astype(np.float32)
        host = np.ascontiguousarray(to_storage(x, problem.dtype))
        backend.copy_htod(self.inp, host.ctypes.data, self.tensor_bytes)
        for s in range(1, self.slots):
            backend.copy_dtod(self.inp + s * self.tensor_bytes, self.inp, self.tensor_bytes)
        backend.synchronize()
        rows = {0, problem.batch - 1, *rng.choice(problem.batch, min(problem.batch, CHECK_ROWS), replace=False)}
        self.check_rows = np.array(sorted(rows))
        self.reference = softmax_ref(quantize(x[self.check_rows], problem.dtype), problem.op == "log_softmax")
        self._launches = {}

    def candidates(self) -> list[str]:
        return [name for name, _ in self.op.candidates(self.p.batch, self.p.n_cols)]

    def launch(self, name: str):
        """A prepared launch of `name` on slot 0 (raises Unsupported)."""
        if name not in self._launches:
            self._launches[name] = self.op.prepare(self.out, self.inp, self.p.batch, self.p.n_cols, kernel=name)
        return self._launches[name]

    def check(self, name: str) -> str | None:
        """Run `name` once on poisoned output; None if the sampled rows match float64, else why not."""
        backend = self.registry.backend
        backend.memset(self.out, 0xFF, self.tensor_bytes)
        self.launch(name)()
        backend.synchronize()
        np_type = DTYPES[self.p.dtype][0]
        got = np.empty((len(self.check_rows), self.p.n_cols), dtype=np_type)
        row_bytes = self.p.n_cols * element_size(self.p.dtype)
        for i, r in enumerate(self.check_rows):
            backend.copy_dtoh(got[i].ctypes.data, self.out + int(r) * row_bytes, row_bytes)
        return mismatch(from_storage(got, self.p.dtype), self.reference, self.p.dtype, self.p.op == "log_softmax")

    def time_ms(self, name: str, reps: int) -> float:
        """GPU time per launch, rotating over the slots (L2 does not keep the input between launches)."""
        launch = self.launch(name)
        info = launch.kernel.info
        roles = dict(zip(self.registry.artifacts.contract(info.group)["params"], (p["name"] for p in info.params)))
        out_name, in_name = roles["out"], roles["in"]
        size = self.tensor_bytes

        def body(stream, i):
            s = i % self.slots
            launch.update({out_name: self.out + s * size, in_name: self.inp + s * size})
            launch.fire(stream)

        try:
            return self.timer.per_launch_ms(body, max(reps, 1))
        finally:
            launch.update({out_name: self.out, in_name: self.inp})

    def free(self) -> None:
        self.registry.backend.free(self.inp)
        self.registry.backend.free(self.out)


def is_ort_group(group: str, problem: Problem) -> bool:
    """ORT's own group: what an unmodified ORT build can register and launch for this op."""
    return group == problem.op_key


def gbps(problem: Problem, ms: float) -> float:
    return problem.bytes_moved / (ms * 1e-3) / 1e9 if ms and not math.isinf(ms) else 0.0


__all__ = ["Problem", "SoftmaxSetup", "Unsupported", "is_ort_group", "gbps"]
