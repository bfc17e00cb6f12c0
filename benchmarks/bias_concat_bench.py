"""A joint attention's projections on their real shapes: two Linears and a Concat as exported, against the two
MatMuls and the library's BiasConcat.

    python benchmarks/bias_concat_bench.py --library dist/full/cuda/multi/libtritonforge_ort.so
        [--model sd3_medium,flux_dev] [--dtypes fp16,bf16,fp32] [--results PATH]

Per model with a joint attention (benchmarks/e2e_models.py's dit_streams: the image's and the text's tokens and
the hidden width from the diffusers config), in one process on one GPU, onnxruntime-gpu's CUDA EP with IOBinding
and ORT's CUDA graph (benchmarks/ort_own.py), graphs of K identical joins on inputs of their own: each stream a
Linear (c x c weight and bias, initializers, as exported) and the two joined on the sequence axis, as the
rewrite's attention reads a query, key or value (`joined`: MatMul + bias Add each, then Concat, ORT's own
kernels), and as the rewrite writes it where measured faster (`tritonforge`: the two MatMuls, then one
tritonforge.BiasConcat); the MatMuls are timed on both sides. With `torch` (F.linear of each and torch.cat,
CUDA-graph replay) and a device-to-device `copy` of the joined tensor. Both graphs' outputs are checked against
float64 first. Rows: benchmark `bias_concat`, shape `<model> <items>x<image>+<text>x<width>`, metric `us`;
benchmarks/choices.py turns them into the rewrite's table.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
from tritonforge.runtime.ops.bias_concat import bias_concat_mismatch, bias_concat_ref  # noqa: E402

from benchmarks import e2e_models, fused_op_bench, ort_own  # noqa: E402

L2 = 60 << 20


def linears(c: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """The two streams' Linears (c x c weight, c bias), fp32: the same values in the graphs and the check."""
    rng = np.random.default_rng(c)
    return [((rng.standard_normal((c, c)) / c ** 0.5).astype(np.float32), rng.standard_normal(c).astype(np.float32))
            for _ in range(2)]


def joint_streams(name: str) -> list[tuple[int, int, int, int]]:
    """(items, image tokens, text tokens, width) of a model whose attention joins its image and text streams (SD3's
    and Flux's); none for the others."""
    streams = e2e_models.dit_streams(name)
    if e2e_models.MODELS[name].kind not in ("sd3", "flux"):
        return []
    (items, image, c), (_, text, _) = streams[:2]
    return [(items, image, text, c)]


def model(items: int, image: int, text: int, c: int, dtype: str, nodes: int, fused: bool):
    """`nodes` independent joins: x<i> (items, image, c) and t<i> (items, text, c) -> y<i> (items, image + text, c),
    each stream through its Linear (weights shared by the joins). `fused`: MatMuls and one tritonforge.BiasConcat.
    The image stream is x<i>: benchmarks/ort_own.py gives y<i> x<i>'s type."""
    from onnx import helper, numpy_helper

    t = ort_own._tensor_type(dtype)
    inits, body = [], []
    for s, (w, bias) in zip("xt", linears(c)):  # fp32 initializers cast to X's type, as ORT folds an export's
        inits += [numpy_helper.from_array(w, f"w{s}_f"), numpy_helper.from_array(bias, f"bias{s}_f")]
        body += [helper.make_node("Cast", [f"w{s}_f"], [f"w{s}"], to=t),
                 helper.make_node("Cast", [f"bias{s}_f"], [f"bias{s}"], to=t)]
    for i in range(nodes):
        for s in "xt":
            body.append(helper.make_node("MatMul", [f"{s}{i}", f"w{s}"], [f"mm{s}{i}"]))
            if not fused:
                body.append(helper.make_node("Add", [f"mm{s}{i}", f"bias{s}"], [f"lin{s}{i}"]))
        if fused:
            body.append(helper.make_node("BiasConcat", [f"mmx{i}", f"mmt{i}", "biasx", "biast"], [f"y{i}"],
                                         domain="tritonforge"))
        else:
            body.append(helper.make_node("Concat", [f"linx{i}", f"lint{i}"], [f"y{i}"], axis=1))
    inputs = [helper.make_tensor_value_info(f"{s}{i}", t, [items, seq, c]) for i in range(nodes)
              for s, seq in (("x", image), ("t", text))]
    outputs = [helper.make_tensor_value_info(f"y{i}", t, [items, image + text, c]) for i in range(nodes)]
    domains = {"": 17, "tritonforge": 1} if fused else {"": 17}
    return ort_own._model(body, inputs, outputs, inits, domains)


def measure(own, ours, items: int, image: int, text: int, c: int, dtype: str) -> dict[str, tuple[float, str]]:
    """{provider: (us per join, timing mode)} of one shape, both graphs' outputs checked first."""
    import torch

    from benchmarks.gpu_common import torch_graph_ms

    tt = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}[dtype]
    gen = torch.Generator(device="cuda").manual_seed(items * image + c)
    a = torch.randn((items, image, c), generator=gen, device="cuda").to(tt)
    b = torch.randn((items, text, c), generator=gen, device="cuda").to(tt)
    (wa, ba), (wb, bb) = ((torch.from_numpy(w).to("cuda", tt), torch.from_numpy(v).to("cuda", tt))
                          for w, v in linears(c))
    nodes = max(2, min(40, ort_own.node_count((a.nelement() + b.nelement()) * a.element_size() * 2, L2)))
    pairs = [(a, b)] + [(a.clone(), b.clone()) for _ in range(nodes - 1)]

    def feeds(n):
        return {k: v for i in range(n) for k, v in ((f"x{i}", pairs[i][0]), (f"t{i}", pairs[i][1]))}

    def host(v):
        return v.double().cpu().numpy()

    # the MatMuls' outputs as stored in X's type: what both graphs add the biases to
    mma, mmb = ((x.double() @ w.double()).to(tt) for x, w in ((a, wa), (b, wb)))
    ref = bias_concat_ref(host(mma), host(mmb), host(ba), host(bb))
    results = fused_op_bench.check_then_time(
        own, ours, lambda k, fused: model(items, image, text, c, dtype, k, fused), feeds, nodes, "joined",
        lambda y: bias_concat_mismatch(y, ref, dtype), f"BiasConcat {dtype} {items}x{image}+{text}x{c}")
    lin = torch.nn.functional.linear
    joined = [torch.cat([x, y], dim=1) for x, y in pairs]
    results["torch"] = (torch_graph_ms(lambda p: torch.cat([lin(p[0], wa.t(), ba), lin(p[1], wb.t(), bb)], dim=1),
                                       pairs, 20) * 1e3, "cuda graph")
    results["copy"] = (torch_graph_ms(lambda v: v.clone(), joined, 20) * 1e3, "cuda graph")
    return results


def main(argv=None) -> int:
    return fused_op_bench.main(argv, __doc__, "bias_concat", "sd3_medium,flux_dev", joint_streams,
                               "no joint attention (of the zoo's models, sd3_medium and flux_dev have one)", measure,
                               lambda name, s: f"{name} {s[0]}x{s[1]}+{s[2]}x{s[3]}")

if __name__ == "__main__":
    sys.exit(main())
