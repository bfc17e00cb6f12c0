"""Problems set up on the GPU for tuning and benchmarks: rotating slots, one prepared launch per
candidate, and a numerical check of a candidate's output against a float64 reference.

`SoftmaxSetup` and `GroupNormSetup` share `RotatingSetup`: inputs and outputs live in K slots whose
total exceeds L2 several times, and each timed launch moves its role pointers to the next slot.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .launch import Unsupported
from .memory import DTYPES, element_size, from_storage, to_storage
from .ops.group_norm import GroupNorm, signature
from .ops.softmax import Softmax
from .reference import group_norm_mismatch, group_norm_ref, mismatch, quantize, softmax_ref
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


@dataclass(frozen=True)
class GroupNormProblem:
    dtype: str
    n: int
    hw: int
    c: int
    groups: int = 32
    silu: bool = True
    eps: float = 1e-5  # not part of ORT's signature: the time does not depend on it

    @property
    def op_key(self) -> str:
        return f"group_norm_{'silu' if self.silu else 'pass'}_{self.dtype}"

    @property
    def params_signature(self) -> str:
        """ORT's GroupNormNHWCTunableParams::Signature() (no skip, no bias: what is tuned here)."""
        return signature(self.n, self.hw, self.c, self.groups, self.silu, 0, False, 0)

    @property
    def bytes_moved(self) -> int:
        """One read of x and one write of y."""
        return 2 * self.n * self.hw * self.c * element_size(self.dtype)


class RotatingSetup:
    """Slots of `tensor_bytes` for the roles in `rotating`; subclasses prepare launches and check them."""

    ort_group: str

    def __init__(self, registry, timer, tensor_bytes: int, roles: tuple[str, ...]):
        self.registry, self.timer, self.tensor_bytes = registry, timer, tensor_bytes
        backend = registry.backend
        self.slots = rotation_slots(len(roles) * tensor_bytes, backend.limits["l2_bytes"])
        self.base = {role: backend.alloc(self.slots * tensor_bytes) for role in roles}
        self._launches = {}

    def fill_slots(self, role: str, host: np.ndarray) -> None:
        backend = self.registry.backend
        backend.copy_htod(self.base[role], host.ctypes.data, self.tensor_bytes)
        for s in range(1, self.slots):
            backend.copy_dtod(self.base[role] + s * self.tensor_bytes, self.base[role], self.tensor_bytes)
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
        size = self.tensor_bytes

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


class SoftmaxSetup(RotatingSetup):
    def __init__(self, registry, timer, problem: Problem, rng: np.random.Generator):
        self.p = problem
        self.op = Softmax(registry, problem.dtype, problem.op == "log_softmax")
        self.ort_group = problem.op_key
        super().__init__(registry, timer, problem.batch * problem.n_cols * element_size(problem.dtype),
                         ("in", "out"))
        # Drawn in float32: four times faster than float64 draws, which took seconds per 2^27 elements.
        x = rng.standard_normal((problem.batch, problem.n_cols), dtype=np.float32)
        x *= np.float32(rng.uniform(0.5, 4))
        self.fill_slots("in", np.ascontiguousarray(to_storage(x, problem.dtype)))
        rows = {0, problem.batch - 1, *rng.choice(problem.batch, min(problem.batch, CHECK_ROWS), replace=False)}
        self.check_rows = np.array(sorted(rows))
        self.reference = softmax_ref(quantize(x[self.check_rows], problem.dtype), problem.op == "log_softmax")

    def candidates(self) -> list[str]:
        return [name for name, _ in self.op.candidates(self.p.batch, self.p.n_cols)]

    def _prepare(self, name: str):
        return self.op.prepare(self.base["out"], self.base["in"], self.p.batch, self.p.n_cols, kernel=name)

    def check(self, name: str) -> str | None:
        """Run `name` once on poisoned output; None if the sampled rows match float64, else why not."""
        self.registry.backend.memset(self.base["out"], 0xFF, self.tensor_bytes)
        self.launch(name)()
        self.registry.backend.synchronize()
        got = self.read_slot0("out", len(self.check_rows), self.p.n_cols, self.check_rows)
        return mismatch(got, self.reference, self.p.dtype, self.p.op == "log_softmax")


# Past this many values a GroupNorm is checked on sampled pixels (every channel of each), against
# float64 statistics of every group: a full float64 reference of a VAE decoder's 2 x 1024 x 1024 x 256
# takes minutes and tens of GB.
FULL_CHECK_VALUES = 1 << 24
SAMPLED_PIXELS = 1024


class GroupNormSetup(RotatingSetup):
    """GroupNorm without skip or bias (ORT's common case), gamma/beta random, every output checked (on
    large tensors, sampled pixels: the first and last of each image and random ones between)."""

    def __init__(self, registry, timer, problem: GroupNormProblem, rng: np.random.Generator):
        self.p = problem
        self.op = GroupNorm(registry, problem.dtype, problem.silu)
        self.ort_group = self.op.group
        super().__init__(registry, timer, problem.n * problem.hw * problem.c * element_size(problem.dtype),
                         ("in", "out"))
        backend = registry.backend
        n, hw, c = problem.n, problem.hw, problem.c
        x = rng.standard_normal((n * hw, c), dtype=np.float32)
        x *= np.float32(rng.uniform(0.5, 4))
        x += np.float32(rng.uniform(-2, 2))
        self.fill_slots("in", np.ascontiguousarray(to_storage(x, problem.dtype)))
        gamma = rng.uniform(0.5, 1.5, c).astype(np.float32)
        beta = rng.uniform(-0.5, 0.5, c).astype(np.float32)
        self.gamma, self.beta = backend.alloc(4 * c), backend.alloc(4 * c)
        backend.copy_htod(self.gamma, gamma.ctypes.data, 4 * c)
        backend.copy_htod(self.beta, beta.ctypes.data, 4 * c)
        if n * hw * c <= FULL_CHECK_VALUES:
            self.check_rows = None
            x4 = quantize(x, problem.dtype).reshape(n, hw, 1, c)
            self.reference, _ = group_norm_ref(x4, gamma, beta, problem.groups, problem.eps, problem.silu)
        else:
            self.check_rows, self.reference = _sampled_reference(x, gamma, beta, problem, rng)

    def candidates(self) -> list[str]:
        p = self.p
        return [name for name, _ in self.op.candidates(p.n, p.hw, p.c, p.groups)]

    def _prepare(self, name: str):
        p = self.p
        return self.op.prepare(out=self.base["out"], inp=self.base["in"], gamma=self.gamma, beta=self.beta, n=p.n,
                               hw=p.hw, c=p.c, groups=p.groups, eps=p.eps, kernel=name)

    def check(self, name: str) -> str | None:
        self.registry.backend.memset(self.base["out"], 0xFF, self.tensor_bytes)
        self.launch(name)()
        self.registry.backend.synchronize()
        got = self.read_slot0("out", self.p.n * self.p.hw, self.p.c, self.check_rows)
        return group_norm_mismatch(got, self.reference.reshape(got.shape), self.p.dtype)

    def free(self) -> None:
        super().free()
        self.registry.backend.free(self.gamma)
        self.registry.backend.free(self.beta)


def _sampled_reference(x: np.ndarray, gamma, beta, p: GroupNormProblem, rng, chunk: int = 1 << 16):
    """(rows, float64 reference at those rows) of x (n * hw, c): every group's mean and variance in
    float64 over all of its values (chunk by chunk), the output at sampled pixels of every image."""
    cpg = p.c // p.groups
    total = np.zeros((p.n, p.groups))
    total_sq = np.zeros((p.n, p.groups))
    for image in range(p.n):
        for start in range(0, p.hw, chunk):
            rows = slice(image * p.hw + start, image * p.hw + min(start + chunk, p.hw))
            q = quantize(x[rows], p.dtype).reshape(-1, p.groups, cpg)
            total[image] += q.sum(axis=(0, 2))
            total_sq[image] += (q * q).sum(axis=(0, 2))
    count = p.hw * cpg
    mean = total / count
    rstd = 1.0 / np.sqrt(np.maximum(total_sq / count - mean * mean, 0.0) + p.eps)
    edge = min(64, p.hw)
    rows = []
    for image in range(p.n):
        picked = {*range(edge), *range(p.hw - edge, p.hw), *rng.choice(p.hw, min(p.hw, SAMPLED_PIXELS), False)}
        rows += [image * p.hw + r for r in sorted(picked)]
    rows = np.array(rows)
    q = quantize(x[rows], p.dtype).reshape(len(rows), p.groups, cpg)
    image = rows // p.hw
    y = ((q - mean[image][:, :, None]) * rstd[image][:, :, None]).reshape(len(rows), p.c) * gamma + beta
    if p.silu:
        y = y / (1 + np.exp(-y))
    return rows, y


def gbps(problem, ms: float) -> float:
    return problem.bytes_moved / (ms * 1e-3) / 1e9 if ms and not math.isinf(ms) else 0.0


__all__ = ["Problem", "GroupNormProblem", "SoftmaxSetup", "GroupNormSetup", "Unsupported", "gbps"]
