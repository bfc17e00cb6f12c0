"""The diffusion transformers' Linears in fp8 against the same Linears in fp16: the library's Fp8Linear (the
activations' per-token quantization and cuBLASLt's fp8 GEMM with both scales and the epilogue) against its fp16
Linear, and against torch's fp8 GEMM.

    python benchmarks/fp8_linear_bench.py --library dist/full/cuda/multi/libtritonforge_ort.so
        [--model sd3_medium,flux_dev,pixart_sigma,sd15_unet] [--dtypes fp16,bf16] [--results PATH]

Per shape (a transformer's projections and MLPs as linear_bench.py lists them; a UNet's transformer blocks'
projections (C to C), GEGLU input (C to 8C) and MLP output (4C to C) at each level's width, the narrow Linears the
rewrite's `--fp8-min-features` break-even is measured on), in one process on one GPU, onnxruntime-gpu's CUDA
EP with IOBinding and ORT's CUDA graph: graphs of K identical nodes on inputs of their own, `linear_fp16` the
library's Linear in the model's dtype and `tritonforge` its Fp8Linear on the same weight quantized per output
channel (rewrite/fp8.py's quantization). torch (CUDA-graph replay): `torch_scaled_mm` is `torch._scaled_mm` with
row-wise scales on activations quantized beforehand (the GEMM alone: the bar the node's GEMM plus its quantization
is held to) and `torch_quant_scaled_mm` the same with the activations' quantization in eager torch in front (what a
torch user without a fused producer runs). Both ORT sides are checked against float64 first (the fp8 side against
float64 of its quantized operands). Rows: benchmark `fp8_linear`, shape `<epilogue> <model> <M>x<K>x<N>`, metric
`us`, plus `tflops` of each side.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
from tritonforge.runtime.reference import mismatch  # noqa: E402

from benchmarks import fused_op_bench, linear_bench, ort_own  # noqa: E402

L2 = 60 << 20


def model(epilogue: str, m: int, k: int, n: int, dtype: str, nodes: int, fp8: bool):
    """`nodes` independent Linears x<i> (M, K) -> y<i> (M, N) sharing one weight: the library's Linear, or (`fp8`)
    its Fp8Linear on the weight in e4m3 with its per-channel scales."""
    from onnx import TensorProto, helper, numpy_helper
    from tritonforge.runtime.ortlib.fp8 import quantize_rows

    t = ort_own._tensor_type(dtype)
    w, bias = linear_bench.weights(k, n)
    body = [helper.make_node("Cast", ["b_f"], ["b"], to=t)]
    inits = [numpy_helper.from_array(bias, "b_f")]
    if fp8:
        q, scale = quantize_rows(w.T.astype(np.float64))
        inits += [helper.make_tensor("wq", TensorProto.FLOAT8E4M3FN, q.shape, q.tobytes(), raw=True),
                  numpy_helper.from_array(scale, "ws")]
        ins, op = ["wq", "ws", "b"], "Fp8Linear"
    else:
        inits.append(numpy_helper.from_array(w, "w_f"))
        body.append(helper.make_node("Cast", ["w_f"], ["w"], to=t))
        ins, op = ["w", "b"], "Linear"
    body += [helper.make_node(op, [f"x{i}", *ins], [f"y{i}"], domain="tritonforge", activation=epilogue)
             for i in range(nodes)]
    inputs = [helper.make_tensor_value_info(f"x{i}", t, [m, k]) for i in range(nodes)]
    outputs = [helper.make_tensor_value_info(f"y{i}", t, [m, n]) for i in range(nodes)]
    out = ort_own._model(body, inputs, outputs, inits, {"": 21, "tritonforge": 1})
    out.ir_version = 10  # FLOAT8E4M3FN initializers
    return out


FP8_TOL = {"fp16": 1e-2, "bf16": 4e-2}  # the GPU test's bound: Hopper's fp8 MMA accumulates in fewer than 32 bits


def fp8_mismatch(y: np.ndarray, ref: np.ndarray, dtype: str) -> str | None:
    """None when the fp8 Linear's rows are within FP8_TOL of float64 of their quantized operands (relative to each
    value and to the largest), else the worst element."""
    tol = FP8_TOL[dtype]
    err = np.abs(y - ref)
    bad = err > tol * np.abs(ref).max() + tol * np.abs(ref)
    if not bad.any():
        return None
    i = np.unravel_index(np.argmax(err), err.shape)
    return f"{np.count_nonzero(bad)} elements off, worst at {i}: got {y[i]!r}, want {ref[i]!r} (tol {tol})"


def measure(ours, epilogue: str, m: int, k: int, n: int, dtype: str) -> dict[str, tuple[float, str]]:
    """{provider: (us per Linear, timing mode)} of one shape, both ORT graphs' outputs checked first."""
    import torch
    from tritonforge.runtime.ortlib.fp8 import from_e4m3_bytes, quantize_rows

    from benchmarks.gpu_common import torch_graph_ms

    tt = {"fp16": torch.float16, "bf16": torch.bfloat16}[dtype]
    gen = torch.Generator(device="cuda").manual_seed(m + k + n)
    x = torch.randn((m, k), generator=gen, device="cuda").to(tt)
    w_np, b_np = linear_bench.weights(k, n)
    w, b = (torch.from_numpy(v).to("cuda", tt) for v in (w_np, b_np))
    nodes = max(2, min(40, ort_own.node_count((m * k + m * n) * x.element_size(), L2)))
    xs = [x] + [x.clone() for _ in range(nodes - 1)]
    x64, b64 = x.double(), b.double()
    rows = torch.arange(0, m, max(1, m // 64), device="cuda")  # the fp8 reference on sampled rows: numpy's codec
    xq, xscale = quantize_rows(x64[rows].cpu().numpy())
    wq, wscale = quantize_rows(w_np.T.astype(np.float64))
    refs = {False: linear_bench.linear_ref(x64, w.double(), b64, epilogue).cpu().numpy(),
            True: linear_bench.linear_ref((from_e4m3_bytes(xq) * xscale[:, None]),
                                          (from_e4m3_bytes(wq) * wscale[:, None]).T, b64.cpu().numpy(), epilogue)}
    results = {}
    for provider, fp8 in (("linear_fp16", False), ("tritonforge", True)):
        _, out, _ = ours.run(model(epilogue, m, k, n, dtype, 1, fp8), {"x0": x}, runs=1, graph=False)
        y = np.asarray(out["y0"], dtype=np.float64)
        why = fp8_mismatch(y[rows.cpu().numpy()], refs[fp8], dtype) if fp8 else mismatch(y, refs[fp8], dtype, log=True)
        if why:
            raise AssertionError(f"Linear {epilogue} {dtype} {m}x{k}x{n} {provider} against float64: {why}")
        ms, _, mode = ours.run(model(epilogue, m, k, n, dtype, nodes, fp8), {f"x{i}": xs[i] for i in range(nodes)},
                               fetch=False)
        results[provider] = (ms * 1e3 / nodes, mode)
    if epilogue == "none":  # torch's fp8 GEMM takes a bias; its GELU would be one more kernel: not its shape
        e4m3 = torch.float8_e4m3fn
        w8 = (w.float() / (ws := w.float().abs().amax(0, keepdim=True) / 448)).to(e4m3).t().contiguous().t()

        def quant(v):
            s = v.float().abs().amax(1, keepdim=True).clamp(min=1e-12) / 448
            return (v.float() / s).to(e4m3), s

        def gemm(q, s):
            return torch._scaled_mm(q, w8, scale_a=s, scale_b=ws, bias=b, out_dtype=tt)

        pre = [quant(v) for v in xs]
        results["torch_scaled_mm"] = (torch_graph_ms(lambda p: gemm(*p), pre, 20) * 1e3, "cuda graph")
        results["torch_quant_scaled_mm"] = (torch_graph_ms(lambda v: gemm(*quant(v)), xs, 20) * 1e3, "cuda graph")
    return results


def shapes_of(name: str) -> list[tuple[str, int, int, int]]:
    """(epilogue, M, K, N) of the Linears of `name` the fp8 rewrite may take."""
    from benchmarks import e2e_models

    if e2e_models.MODELS[name].kind == "unet":
        return [s for items, tokens, c in e2e_models.unet_streams(name)
                for s in (("none", items * tokens, c, c), ("none", items * tokens, c, 8 * c),
                          ("none", items * tokens, 4 * c, c))]
    return linear_bench.linear_shapes(name)


def tflops(rows: dict, m: int, k: int, n: int) -> dict:
    return {p: 2 * m * k * n / (us * 1e-6) / 1e12 for p, (us, _) in rows.items()}


def main(argv=None) -> int:
    import torch
    from tritonforge.runtime import ortlib

    from benchmarks.results import RESULTS, write_rows

    _, args, names = fused_op_bench.command_line(argv, __doc__, "sd3_medium,flux_dev,pixart_sigma", "fp16,bf16")
    why = ort_own.unavailable()
    if why:
        print(f"fp8_linear_bench: {why}", file=sys.stderr)
        return 2
    major, minor = torch.cuda.get_device_capability(0)
    if (major, minor) < (8, 9):
        print(f"fp8_linear_bench: {torch.cuda.get_device_name(0)} (sm_{major}{minor}) has no fp8 tensor cores",
              file=sys.stderr)
        return 2
    ours = ort_own.OrtRival(custom_ops=str(ortlib.library_path(args.library)), optimize=True)
    device = torch.cuda.get_device_name(0)
    shapes = sorted({(s, shape) for s in names for shape in shapes_of(s)})
    for dtype in args.dtypes.split(","):
        for name, (epilogue, m, k, n) in shapes:
            label = f"{epilogue} {name} {m}x{k}x{n}"
            rows = measure(ours, epilogue, m, k, n, dtype)
            rates = tflops(rows, m, k, n)
            write_rows("fp8_linear", device, [
                *({"provider": p, "shape": label, "dtype": dtype, "metric": "us", "unit": "us", "value": f"{us:.3f}",
                   "extra": mode} for p, (us, mode) in rows.items()),
                *({"provider": p, "shape": label, "dtype": dtype, "metric": "tflops", "unit": "TFLOP/s",
                   "value": f"{t:.1f}"} for p, t in rates.items())], args.results or RESULTS)
            print(f"{label:40s} {dtype}  " + "  ".join(f"{p} {us:8.1f} us ({rates[p]:.0f} TF/s)"
                                                       for p, (us, _) in rows.items()), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
