"""Softmax / LogSoftmax over the last axis, choosing among every kernel whose group contract it knows.

Like ORT's softmax_triton.cuh, candidates come from the dtype's groups and are filtered by the
contract's `requires` (for ORT's groups: BLOCK_SIZE >= n_cols); unlike it, any group named
`<op>[_<variant>]_<dtype>` whose contract speaks only of these roles is a candidate too, in table
order, a correctness fallback (`"fallback": true`) last. A new family needs no change here.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import candidates as contract_launch
from .. import zoo
from ..launch import PreparedLaunch
from ..memory import TYPESTR_TO_DTYPE, DeviceArray, element_size, to_storage
from ..problem import RotatingSetup
from ..reference import mismatch, quantize
from ..tune_cache import lookup
from . import Tuning

ROLES = {"out", "in", "in_stride", "out_stride", "n_cols", "batch", "ws"}
PROBLEM = {"batch", "n_cols", "in_stride", "out_stride", "resident"}
CHECK_ROWS = 32  # rows a tuning check compares with float64 (the first, the last and random ones)


class Softmax:
    def __init__(self, registry, dtype: str, log: bool = False, tune_cache: dict | None = None):
        """tune_cache: a validated cache (runtime.tune_cache.load_cache) whose choices replace the default."""
        self.registry, self.dtype, self.log, self.tune_cache = registry, dtype, log, tune_cache
        self.op = "log_softmax" if log else "softmax"
        self.groups = contract_launch.groups_of(registry, rf"{self.op}(_[A-Za-z0-9]+)*_{dtype}", ROLES, PROBLEM)
        if not self.groups:
            raise LookupError(f"no {self.op} kernels for {dtype} in {registry.artifacts.path}")

    def _env(self, batch, n_cols, in_stride, out_stride):
        return {"batch": batch, "n_cols": n_cols, "in_stride": in_stride, "out_stride": out_stride}

    def candidates(self, batch: int, n_cols: int, in_stride: int | None = None,
                   out_stride: int | None = None) -> list[tuple[str, tuple]]:
        """(kernel name, grid) of every kernel whose contract admits this problem, in table order."""
        env = self._env(batch, n_cols, in_stride or n_cols, out_stride or n_cols)
        return [c for group in self.groups for c in contract_launch.admitted(self.registry, group, env)]

    def prepare(self, out_ptr: int, in_ptr: int, batch: int, n_cols: int, in_stride: int | None = None,
                out_stride: int | None = None, kernel: str | None = None) -> PreparedLaunch:
        """A launch of `kernel` (default: the tuned choice, else the first candidate that can run these
        pointers); Unsupported if none fits."""
        in_stride, out_stride = in_stride or n_cols, out_stride or n_cols
        cands = dict(self.candidates(batch, n_cols, in_stride, out_stride))
        tuned = None
        if kernel is None and self.tune_cache is not None:
            tuned = lookup(self.tune_cache, f"{self.op}_{self.dtype}", batch, n_cols)
        env = self._env(batch, n_cols, in_stride, out_stride)
        roles = {"out": out_ptr, "in": in_ptr, **env}
        return contract_launch.prepare_choice(self.registry, cands, kernel, tuned, roles, env,
                                              f"{self.op} {self.dtype} batch={batch} n_cols={n_cols}")

    def __call__(self, out, x, kernel: str | None = None, stream: int = 0) -> None:
        """out, x: objects with __cuda_array_interface__ (rows x cols, unit inner stride)."""
        xa, oa = _cai(x, self.dtype), _cai(out, self.dtype)
        if xa["shape"] != oa["shape"]:
            raise ValueError(f"shape mismatch: input {xa['shape']}, output {oa['shape']}")
        batch, n_cols = xa["shape"]
        if batch == 0 or n_cols == 0:
            return  # nothing to normalise
        self.prepare(oa["ptr"], xa["ptr"], batch, n_cols, xa["row_stride"], oa["row_stride"], kernel)(stream)


def _cai(obj, dtype: str) -> dict:
    cai = obj.__cuda_array_interface__
    shape = tuple(cai["shape"])
    if len(shape) != 2:
        raise ValueError(f"expected a 2-D array, got shape {shape}")
    typ = TYPESTR_TO_DTYPE.get(cai["typestr"], "bf16" if cai["typestr"] in ("<u2", "<V2") else None)
    if typ != dtype:
        raise ValueError(f"array type {cai['typestr']} does not match {dtype}")
    size = element_size(dtype)
    strides = cai.get("strides") or (shape[1] * size, size)
    if strides[1] != size or strides[0] % size:
        raise ValueError(f"rows must be contiguous with an element-aligned row stride, got strides {strides}")
    return {"ptr": int(cai["data"][0]), "shape": shape, "row_stride": strides[0] // size}


def softmax_numpy(registry, x: np.ndarray, dtype: str, log: bool = False, kernel: str | None = None) -> np.ndarray:
    """Host convenience: copy in, run, copy out. bf16 values come back widened to float32."""
    x2 = np.atleast_2d(x).reshape(-1, np.shape(x)[-1]) if np.ndim(x) else np.atleast_2d(x)
    if x2.size == 0:
        return np.empty(np.shape(x), dtype=np.float32 if dtype == "bf16" else x2.dtype)
    backend = registry.backend
    src = DeviceArray.from_numpy(backend, x2, dtype)
    dst = DeviceArray(backend, src.rows, src.cols, dtype)
    try:
        Softmax(registry, dtype, log)(dst, src, kernel=kernel)
        backend.synchronize()
        return dst.to_numpy().reshape(np.shape(x))
    finally:
        src.free()
        dst.free()


# ---- the float64 reference, the tuning problem and its GPU setup ----------------------------------

def softmax_ref(x64: np.ndarray, log: bool) -> np.ndarray:
    shifted = x64 - x64.max(axis=-1, keepdims=True)
    if log:
        return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))
    e = np.exp(shifted)
    return e / e.sum(axis=-1, keepdims=True)


@dataclass(frozen=True)
class SoftmaxProblem:
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

    def setup(self, registry, timer, rng: np.random.Generator) -> SoftmaxSetup:
        return SoftmaxSetup(registry, timer, self, rng)


class SoftmaxSetup(RotatingSetup):
    def __init__(self, registry, timer, problem: SoftmaxProblem, rng: np.random.Generator):
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


def default_shapes() -> list[tuple[int, int]]:
    """(batch, n_cols) of every softmax of the model zoo (runtime/zoo.py): SD UNet and VAE attention,
    BERT and ViT attention, LLM vocabularies."""
    return zoo.softmax_problems()


TUNING = Tuning(
    family="softmax",
    keys={"softmax": {"log": False}, "log_softmax": {"log": True}},
    shape_fields=("batch", "n_cols"),
    default_shapes=default_shapes,
    problem=lambda dtype, shape, log: SoftmaxProblem("log_softmax" if log else "softmax", dtype, *shape),
    # ORT's SoftmaxTunableOp registers softmax_<dtype>; log-softmax it never launches
    ort_groups={r"softmax_(fp32|fp16|bf16|fp64)": lambda dt: [f"softmax_{dt}"]},
)
