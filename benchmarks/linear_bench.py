"""A diffusion model's Linears on their real shapes: the export's MatMul and bias Add (and the FastGelu the rewrite
writes for an MLP's GELU-tanh otherwise) as ORT runs them, against the library's Linear.

    python benchmarks/linear_bench.py --library dist/full/cuda/multi/libtritonforge_ort.so
        [--model sd3_medium,flux_dev,pixart_sigma,sdxl_unet] [--dtypes fp16,bf16,fp32] [--results PATH]

Per model (benchmarks/e2e_models.py's token streams and widths from the diffusers config), in one process on one
GPU, onnxruntime-gpu's CUDA EP with IOBinding, ORT's CUDA graph and its graph optimizations on, as a user's session
has them (benchmarks/ort_own.py), graphs of K identical Linears on inputs of their own, the weight and bias
initializers: `export` is `MatMul` + `Add` (bias epilogue) or `MatMul` + ORT's `FastGelu` with the bias (GELU-tanh
epilogue), `tritonforge` is one tritonforge.Linear (cuBLASLt, the epilogue fused). With `torch` (F.linear, and
F.gelu(approximate="tanh") after it: torch's own cuBLASLt epilogue for the bias; CUDA-graph replay) and `matmul`
(the GEMM alone, no bias: the floor). Both graphs' outputs are checked against float64 first. Rows: benchmark
`linear`, shape `<epilogue> <model> <M>x<K>x<N>`, metric `us`; benchmarks/choices.py turns them into the
rewrite's table.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
from tritonforge.runtime.reference import mismatch  # noqa: E402

from benchmarks import e2e_models, fused_op_bench, ort_own  # noqa: E402

L2 = 60 << 20
EPILOGUES = ("none", "gelu_tanh")


def linear_shapes(name: str) -> list[tuple[str, int, int, int]]:
    """(epilogue, M, K, N) of the Linears a model's blocks run that no other fusion of the rewrite takes: a DiT's
    projections (width to width) and MLP (to 4x the width with GELU-tanh, and back), Flux's single blocks' output
    projection (5x the width back); a UNet's proj_in and proj_out (SDXL's are Linears)."""
    m = e2e_models.MODELS[name]
    if m.kind in ("sd3", "flux", "pixart"):
        out = []
        for items, tokens, c in e2e_models.dit_streams(name):
            rows = items * tokens
            out += [("none", rows, c, c), ("gelu_tanh", rows, c, 4 * c), ("none", rows, 4 * c, c)]
            if m.kind == "flux" and tokens == e2e_models.dit_streams(name)[-1][1]:
                out.append(("none", rows, 5 * c, c))
        return list(dict.fromkeys(out))
    if m.config.get("use_linear_projection"):
        return [("none", items * tokens, c, c) for items, tokens, c in e2e_models.unet_streams(name)]
    return []


def weights(k: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    """The Linear's (K, N) weight, scaled so outputs are O(1), and its bias, fp32: the same in the graphs and the
    check."""
    rng = np.random.default_rng(k * 7 + n)
    return (rng.standard_normal((k, n)) / k ** 0.5).astype(np.float32), rng.standard_normal(n).astype(np.float32)


def model(epilogue: str, m: int, k: int, n: int, dtype: str, nodes: int, fused: bool):
    """`nodes` independent Linears x<i> (M, K) -> y<i> (M, N) sharing one weight. `fused`: tritonforge.Linear."""
    from onnx import helper, numpy_helper

    t = ort_own._tensor_type(dtype)
    w, bias = weights(k, n)
    inits = [numpy_helper.from_array(w, "w_f"), numpy_helper.from_array(bias, "b_f")]
    body = [helper.make_node("Cast", ["w_f"], ["w"], to=t), helper.make_node("Cast", ["b_f"], ["b"], to=t)]
    for i in range(nodes):
        if fused:
            body.append(helper.make_node("Linear", [f"x{i}", "w", "b"], [f"y{i}"], domain="tritonforge",
                                         activation=epilogue))
            continue
        body.append(helper.make_node("MatMul", [f"x{i}", "w"], [f"mm{i}"]))
        if epilogue == "gelu_tanh":
            body.append(helper.make_node("FastGelu", [f"mm{i}", "b"], [f"y{i}"], domain="com.microsoft"))
        else:
            body.append(helper.make_node("Add", [f"mm{i}", "b"], [f"y{i}"]))
    inputs = [helper.make_tensor_value_info(f"x{i}", t, [m, k]) for i in range(nodes)]
    outputs = [helper.make_tensor_value_info(f"y{i}", t, [m, n]) for i in range(nodes)]
    domains = {"": 17, "tritonforge": 1} if fused else {"": 17, "com.microsoft": 1}
    return ort_own._model(body, inputs, outputs, inits, domains)


def linear_ref(x64, w64, b64, epilogue: str):
    """act(x W + b) in the arrays' own float64: numpy's, or torch's on the GPU (the big shapes' reference in
    seconds rather than minutes)."""
    y = x64 @ w64 + b64
    if epilogue == "gelu_tanh":
        inner = np.sqrt(2 / np.pi) * (y + 0.044715 * y ** 3)
        y = 0.5 * y * (1 + (np.tanh(inner) if isinstance(inner, np.ndarray) else inner.tanh()))
    return y


def measure(own, ours, epilogue: str, m: int, k: int, n: int, dtype: str) -> dict[str, tuple[float, str]]:
    """{provider: (us per Linear, timing mode)} of one shape, both graphs' outputs checked first."""
    import torch

    from benchmarks.gpu_common import torch_graph_ms

    tt = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}[dtype]
    gen = torch.Generator(device="cuda").manual_seed(m + k + n)
    x = torch.randn((m, k), generator=gen, device="cuda").to(tt)
    w, b = (torch.from_numpy(v).to("cuda", tt) for v in weights(k, n))
    nodes = max(2, min(40, ort_own.node_count((m * k + m * n) * x.element_size(), L2)))
    xs = [x] + [x.clone() for _ in range(nodes - 1)]
    ref = linear_ref(*(v.double() for v in (x, w, b)), epilogue).cpu().numpy()
    results = fused_op_bench.check_then_time(
        own, ours, lambda count, fused: model(epilogue, m, k, n, dtype, count, fused),
        lambda count: {f"x{i}": xs[i] for i in range(count)}, nodes, "export",
        lambda y: mismatch(y, ref, dtype, log=True), f"Linear {epilogue} {dtype} {m}x{k}x{n}")
    lin, gelu = torch.nn.functional.linear, torch.nn.functional.gelu
    wt = w.t().contiguous()  # F.linear's (N, K) weight
    if epilogue == "gelu_tanh":
        results["torch"] = (torch_graph_ms(lambda v: gelu(lin(v, wt, b), approximate="tanh"), xs, 20) * 1e3,
                            "cuda graph")
    else:
        results["torch"] = (torch_graph_ms(lambda v: lin(v, wt, b), xs, 20) * 1e3, "cuda graph")
    results["matmul"] = (torch_graph_ms(lambda v: v @ w, xs, 20) * 1e3, "cuda graph")
    return results


def main(argv=None) -> int:
    return fused_op_bench.main(argv, __doc__, "linear", "sd3_medium,flux_dev,pixart_sigma,sdxl_unet", linear_shapes,
                               "no Linear the rewrite writes (the DiTs and SDXL's UNet have them)", measure,
                               lambda name, s: f"{s[0]} {name} {s[1]}x{s[2]}x{s[3]}", optimize=True)


if __name__ == "__main__":
    sys.exit(main())
