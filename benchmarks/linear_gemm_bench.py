"""Which GEMM could carry a diffusion transformer's Linear together with its epilogue, on this GPU.

A Linear as exported runs in ORT as a cuBLAS GEMM and a broadcast-bias kernel of its own, and what follows it
(GELU-tanh, the gated residual `x + gate * y`) as more kernels. Before a library op fuses them, this measures,
on the zoo's Linear shapes (SD3, Flux, PixArt, SDXL's UNet), in one process:

- `matmul`: the GEMM alone, no bias (cuBLAS through torch): the floor any fused op is held to;
- `separate`: the GEMM, then the bias and the epilogue as separate kernels (what the export runs);
- `cublaslt`: cuBLASLt with the bias (and GELU) in its epilogue, as torch's addmm runs it; the gated residual
  as one more kernel after it;
- `triton`: a Triton GEMM with the whole epilogue fused, one output tile per program (the fastest of a few tile
  configs); `triton_tma`: the same persistent (a program per SM) with x and W read through tensor descriptors
  (TMA on Hopper).

Each candidate is checked against float64 first. Rows: benchmark `linear_gemm`, shape `<epilogue> <model>
<M>x<K>x<N>`, metric `us` (CUDA-graph replay, median of 5).

    python benchmarks/linear_gemm_bench.py [--dtypes fp16,bf16] [--out results.csv]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import triton  # noqa: E402
import triton.language as tl  # noqa: E402

from benchmarks.gpu_common import torch_graph_ms  # noqa: E402
from benchmarks.results import RESULTS, write_rows  # noqa: E402

# (epilogue, model, M = tokens of the batch, K, N): the Linears of each model's transformer block
SHAPES = [
    ("bias", "sd3_medium", 8192, 1536, 1536),
    ("gelu_tanh", "sd3_medium", 8192, 1536, 6144),
    ("gated", "sd3_medium", 8192, 6144, 1536),
    ("gelu_tanh", "flux_dev", 4608, 3072, 12288),
    ("gated", "flux_dev", 4608, 12288, 3072),
    ("gelu_tanh", "pixart_sigma", 8192, 1152, 4608),
    ("bias", "sdxl_unet", 8192, 640, 640),
    ("gated", "sdxl_unet", 8192, 2560, 640),
]
EPILOGUES = {"bias": 0, "gelu_tanh": 1, "gated": 2}
# (BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages)
CONFIGS = [(128, 256, 64, 8, 3), (128, 128, 64, 8, 4), (128, 128, 64, 4, 4)]
ROWS_PER_ITEM = 4096  # tokens per image: the gate holds one row per image


@triton.jit
def _gelu_tanh(x):
    inner = 0.7978845608028654 * (x + 0.044715 * x * x * x)
    return 0.5 * x * (1 + (2 * tl.sigmoid(2 * inner) - 1))


@triton.jit
def _tile(t, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """Tile t's (row tile, column tile) in grouped order (8 row tiles per group): neighbouring tiles share W's
    columns in L2."""
    tiles_m, tiles_n = tl.cdiv(M, BLOCK_M), tl.cdiv(N, BLOCK_N)
    first_m = (t // (8 * tiles_n)) * 8
    size_m = min(tiles_m - first_m, 8)
    return first_m + (t % (8 * tiles_n)) % size_m, (t % (8 * tiles_n)) // size_m


@triton.jit
def _epilogue(acc, pid_m, pid_n, y_ptr, b_ptr, res_ptr, gate_ptr, M, N, rows_per_item, BLOCK_M: tl.constexpr,
              BLOCK_N: tl.constexpr, EPILOGUE: tl.constexpr):
    """y = acc + bias, then GELU-tanh (1) or res + gate[item] * that (2); stored in y's type."""
    rows = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)).to(tl.int64)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    acc += tl.load(b_ptr + cols, mask=cols < N, other=0.0).to(tl.float32)[None, :]
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    at = rows[:, None] * N + cols[None, :]
    if EPILOGUE == 1:
        acc = _gelu_tanh(acc)
    if EPILOGUE == 2:
        gate = tl.load(gate_ptr + (rows // rows_per_item)[:, None] * N + cols[None, :], mask=mask, other=0.0)
        acc = tl.load(res_ptr + at, mask=mask, other=0.0).to(tl.float32) + gate.to(tl.float32) * acc
    tl.store(y_ptr + at, acc.to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def linear_kernel(y_ptr, x_ptr, w_ptr, b_ptr, res_ptr, gate_ptr, M, N, K, rows_per_item,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, EPILOGUE: tl.constexpr):
    """One output tile per program, x and W read through pointers."""
    pid_m, pid_n = _tile(tl.program_id(0), M, N, BLOCK_M, BLOCK_N)
    rows = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)).to(tl.int64)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    ks = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        kk = k0 + ks
        a = tl.load(x_ptr + rows[:, None] * K + kk[None, :], mask=(rows[:, None] < M) & (kk[None, :] < K),
                    other=0.0)
        b = tl.load(w_ptr + kk[:, None] * N + cols[None, :], mask=(kk[:, None] < K) & (cols[None, :] < N),
                    other=0.0)
        acc = tl.dot(a, b, acc)
    _epilogue(acc, pid_m, pid_n, y_ptr, b_ptr, res_ptr, gate_ptr, M, N, rows_per_item, BLOCK_M, BLOCK_N, EPILOGUE)


@triton.jit
def linear_tma_kernel(y_ptr, x_ptr, w_ptr, b_ptr, res_ptr, gate_ptr, M, N, K, rows_per_item,
                      BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, EPILOGUE: tl.constexpr,
                      PROGRAMS: tl.constexpr):
    """Persistent: PROGRAMS programs (one per SM) walk the output tiles; x and W tiles come through tensor
    descriptors (TMA on Hopper), which also clip the edges."""
    x_desc = tl.make_tensor_descriptor(x_ptr, shape=[M, K], strides=[K, 1], block_shape=[BLOCK_M, BLOCK_K])
    w_desc = tl.make_tensor_descriptor(w_ptr, shape=[K, N], strides=[N, 1], block_shape=[BLOCK_K, BLOCK_N])
    tiles = tl.cdiv(M, BLOCK_M) * tl.cdiv(N, BLOCK_N)
    for t in tl.range(tl.program_id(0), tiles, PROGRAMS):
        pid_m, pid_n = _tile(t, M, N, BLOCK_M, BLOCK_N)
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for k0 in range(0, K, BLOCK_K):
            a = x_desc.load([pid_m * BLOCK_M, k0])
            b = w_desc.load([k0, pid_n * BLOCK_N])
            acc = tl.dot(a, b, acc)
        _epilogue(acc, pid_m, pid_n, y_ptr, b_ptr, res_ptr, gate_ptr, M, N, rows_per_item, BLOCK_M, BLOCK_N,
                  EPILOGUE)


def measure(epilogue: str, m: int, k: int, n: int, dtype) -> dict[str, float]:
    """{candidate: us} of one shape; a candidate whose output is off float64 is reported and not timed."""
    import torch
    import torch.nn.functional as F

    x = torch.randn(m, k, device="cuda", dtype=dtype)
    w = (torch.randn(k, n, device="cuda") / k ** 0.5).to(dtype)
    b = torch.randn(n, device="cuda", dtype=dtype)
    res = torch.randn(m, n, device="cuda", dtype=dtype)
    gate = torch.randn((m + ROWS_PER_ITEM - 1) // ROWS_PER_ITEM, n, device="cuda", dtype=dtype)
    gate_rows = gate.repeat_interleave(ROWS_PER_ITEM, 0)[:m]
    y = torch.empty(m, n, device="cuda", dtype=dtype)
    ref = x.double() @ w.double() + b.double()
    if epilogue == "gelu_tanh":
        ref = F.gelu(ref, approximate="tanh")
    if epilogue == "gated":
        ref = res.double() + gate_rows.double() * ref
    tol = 2e-2 * float(ref.abs().max()) + 1e-2

    def separate(_):
        t = x @ w + b
        t = F.gelu(t, approximate="tanh") if epilogue == "gelu_tanh" else t
        return torch.addcmul(res, gate_rows, t) if epilogue == "gated" else t

    def cublaslt(_):
        t = torch._addmm_activation(b, x, w, use_gelu=True) if epilogue == "gelu_tanh" else torch.addmm(b, x, w)
        return torch.addcmul(res, gate_rows, t) if epilogue == "gated" else t

    def fused(cfg, tma: bool):
        bm, bn, bk, warps, stages = cfg
        tiles = triton.cdiv(m, bm) * triton.cdiv(n, bn)
        programs = min(tiles, torch.cuda.get_device_properties(0).multi_processor_count)
        meta = {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "EPILOGUE": EPILOGUES[epilogue], "num_warps": warps,
                "num_stages": stages}

        def run(_):
            if tma:
                linear_tma_kernel[(programs,)](y, x, w, b, res, gate, m, n, k, ROWS_PER_ITEM, PROGRAMS=programs,
                                               **meta)
            else:
                linear_kernel[(tiles,)](y, x, w, b, res, gate, m, n, k, ROWS_PER_ITEM, **meta)
            return y
        return run

    candidates = {"separate": separate, "cublaslt": cublaslt}
    for tma in (False, True):
        candidates |= {f"triton{'_tma' if tma else ''}:" + "x".join(map(str, c)): fused(c, tma) for c in CONFIGS}
    times = {"matmul": torch_graph_ms(lambda _: x @ w, [None], 20) * 1e3}
    for name, fn in candidates.items():
        try:
            out = fn(None)
        except Exception as exc:  # a candidate this Triton or GPU cannot build is reported, the others timed
            print(f"{epilogue} {m}x{k}x{n} {name}: {type(exc).__name__}: {str(exc)[:200]}", flush=True)
            continue
        err = float((out.double() - ref).abs().max())
        if err > tol:
            print(f"{epilogue} {m}x{k}x{n} {name}: max error {err:.3g} over {tol:.3g}, not timed", flush=True)
            continue
        times[name] = torch_graph_ms(fn, [None], 20) * 1e3
    return times


def main(argv=None) -> int:
    import torch

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dtypes", default="fp16,bf16")
    p.add_argument("--out", default=str(RESULTS))
    args = p.parse_args(argv)
    device = torch.cuda.get_device_name(0)
    torch.manual_seed(0)
    # tensor descriptors made on the device need global scratch
    triton.set_allocator(lambda size, align, stream: torch.empty(size, dtype=torch.int8, device="cuda"))
    for dtype_name in args.dtypes.split(","):
        dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}[dtype_name]
        rows = []
        for epilogue, model, m, k, n in SHAPES:
            shape = f"{epilogue} {model} {m}x{k}x{n}"
            times = measure(epilogue, m, k, n, dtype)
            torch.cuda.empty_cache()
            print(f"{shape} {dtype_name}: " + " ".join(f"{c} {t:.1f}" for c, t in times.items()) +
                  f" us; matmul {2 * m * k * n / times['matmul'] / 1e6:.0f} TFLOP/s", flush=True)
            rows += [{"provider": c, "shape": shape, "dtype": dtype_name, "metric": "us", "unit": "us",
                      "value": f"{times[c]:.2f}"} for c in ("matmul", "separate", "cublaslt") if c in times]
            for provider in ("triton", "triton_tma"):  # each kernel's fastest tile config
                tiles = [(t, c) for c, t in times.items() if c.split(":")[0] == provider]
                if tiles:
                    us, name = min(tiles)
                    rows.append({"provider": provider, "shape": shape, "dtype": dtype_name, "metric": "us",
                                 "unit": "us", "value": f"{us:.2f}", "extra": name.split(":")[1]})
        write_rows("linear_gemm", device, rows, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
