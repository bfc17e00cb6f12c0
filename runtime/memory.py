"""Device buffers with `__cuda_array_interface__`, and numpy <-> device copies (bf16 as uint16 bits, fp8 e4m3 as
its bytes)."""

from __future__ import annotations

import numpy as np

from .ortlib.fp8 import from_e4m3_bytes, to_e4m3_bytes

DTYPES = {"fp32": (np.float32, "<f4"), "fp16": (np.float16, "<f2"), "bf16": (np.uint16, "<u2"),
          "fp64": (np.float64, "<f8"), "fp8e4nv": (np.uint8, "|u1")}
TYPESTR_TO_DTYPE = {"<f4": "fp32", "<f2": "fp16"}


def element_size(dtype: str) -> int:
    return np.dtype(DTYPES[dtype][0]).itemsize


def f32_to_bf16_bits(x: np.ndarray) -> np.ndarray:
    """Round-to-nearest-even fp32 -> bf16 bit patterns (NaN stays NaN)."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    nan = np.isnan(np.asarray(x, dtype=np.float32))
    return np.where(nan, np.uint16(0x7FC0), rounded).reshape(np.shape(x))


def bf16_bits_to_f32(bits: np.ndarray) -> np.ndarray:
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def to_storage(x: np.ndarray, dtype: str) -> np.ndarray:
    """Host array in the kernel's storage type."""
    if dtype == "bf16":
        return f32_to_bf16_bits(x) if x.dtype != np.uint16 else x
    if dtype == "fp8e4nv":
        return to_e4m3_bytes(x) if x.dtype != np.uint8 else x
    return np.ascontiguousarray(x, dtype=DTYPES[dtype][0])


def from_storage(x: np.ndarray, dtype: str) -> np.ndarray:
    if dtype == "fp8e4nv":
        return from_e4m3_bytes(x)
    return bf16_bits_to_f32(x) if dtype == "bf16" else x


class DeviceArray:
    """A 2-D (rows x cols, row stride in elements) device buffer owned by this object."""

    def __init__(self, backend, rows: int, cols: int, dtype: str, row_stride: int | None = None):
        self.backend, self.dtype = backend, dtype
        self.rows, self.cols = rows, cols
        self.row_stride = cols if row_stride is None else row_stride
        if self.row_stride < cols:
            raise ValueError(f"row stride {self.row_stride} < {cols} columns")
        self.itemsize = element_size(dtype)
        self.nbytes = max(rows * self.row_stride, 1) * self.itemsize
        self.ptr = backend.alloc(self.nbytes)

    @classmethod
    def from_numpy(cls, backend, x: np.ndarray, dtype: str, row_stride: int | None = None) -> DeviceArray:
        x = np.atleast_2d(x)
        a = cls(backend, x.shape[0], x.shape[1], dtype, row_stride)
        host = np.zeros((a.rows, a.row_stride), dtype=DTYPES[dtype][0])
        host[:, : a.cols] = to_storage(x, dtype)
        backend.copy_htod(a.ptr, host.ctypes.data, host.nbytes)
        return a

    def fill_bytes(self, byte: int) -> None:
        self.backend.memset(self.ptr, byte, self.nbytes)

    def storage(self) -> np.ndarray:
        """The whole buffer, padding included, in storage type."""
        host = np.empty((self.rows, self.row_stride), dtype=DTYPES[self.dtype][0])
        self.backend.copy_dtoh(host.ctypes.data, self.ptr, host.nbytes)
        return host

    def to_numpy(self) -> np.ndarray:
        """The logical rows x cols values (bf16 widened to fp32)."""
        return from_storage(self.storage()[:, : self.cols].copy(), self.dtype)

    @property
    def __cuda_array_interface__(self) -> dict:
        return {"shape": (self.rows, self.cols), "typestr": DTYPES[self.dtype][1],
                "data": (self.ptr, False), "version": 3,
                "strides": (self.row_stride * self.itemsize, self.itemsize)}

    def free(self) -> None:
        if self.ptr:
            self.backend.free(self.ptr)
            self.ptr = 0

    def __del__(self):
        try:
            self.free()
        except Exception:
            pass
