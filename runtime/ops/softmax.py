"""Softmax / LogSoftmax over the last axis, choosing among every kernel whose group contract it knows.

Like ORT's softmax_triton.cuh, candidates come from the dtype's groups and are filtered by the
contract's `requires` (for ORT's groups: BLOCK_SIZE >= n_cols); unlike it, any group named
`<op>[_<variant>]_<dtype>` whose contract speaks only of these roles is a candidate too, in table
order, a correctness fallback (`"fallback": true`) last. A new family needs no change here.
"""

from __future__ import annotations

import numpy as np

from .. import candidates as contract_launch
from ..launch import PreparedLaunch
from ..memory import TYPESTR_TO_DTYPE, DeviceArray, element_size
from ..tune_cache import lookup

ROLES = {"out", "in", "in_stride", "out_stride", "n_cols", "batch", "ws"}
PROBLEM = {"batch", "n_cols", "in_stride", "out_stride", "resident"}


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
