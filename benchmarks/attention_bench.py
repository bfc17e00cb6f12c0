"""Attention on the zoo's shapes: the library's op against ORT's own and torch, with the matrix-multiply peak.

    python benchmarks/attention_bench.py --library dist/full/cuda/multi/libtritonforge_ort.so [--model all]
        [--dtypes fp16] [--where REGEX]

In one process on one GPU, per attention shape (batch, heads, Sq, Skv, head dim), onnxruntime-gpu's CUDA EP
with IOBinding and ORT's CUDA graph (benchmarks/ort_own.py), graphs of K identical attentions on inputs of
their own (query, key, value as (B, S, H*d) projections):
- `decomposed`: the attention as torch.onnx writes F.scaled_dot_product_attention (Reshape, Transpose, the
  scale's square root on both sides, MatMul, Softmax, MatMul, Transpose, Reshape): what the export runs;
- `ort_mha`: ORT's `com.microsoft.MultiHeadAttention` on the same projections;
- `tritonforge`: the decomposed graph rewritten (the rewrite's matcher, the library's op on every node);
- `torch`: F.scaled_dot_product_attention on (B, H, S, d) views of the projections, CUDA-graph replay;
and the device's matrix-multiply peak in the dtype (torch, 8192^3, CUDA graph). TFLOP/s = 4 B H Sq Skv d / time.
Inputs are torch tensors on the device, bound to ORT's sessions by address (bfloat16 has no numpy type).
Before anything is timed, the library's output (one node, where it picks its kernel for the shape) is
checked against float64 on the first two heads. Rows go to benchmarks/results/results.csv (benchmark
`attention`).
"""

from __future__ import annotations

import argparse
import copy
import math
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
from tritonforge.runtime import ortlib, zoo  # noqa: E402
from tritonforge.runtime.ops.attention import attention_mismatch, attention_ref  # noqa: E402
from tritonforge.runtime.ortlib.rewrite import rewrite  # noqa: E402

from benchmarks import ort_own  # noqa: E402
from benchmarks.results import RESULTS, write_rows  # noqa: E402

L2 = 60 << 20


def decomposed_model(b, heads, sq, skv, d, dtype, nodes=1, ms_mha=False):
    """`nodes` attentions x<i>, k<i>, v<i> -> y<i>: as torch.onnx's TorchScript exporter writes SDPA (scale
    folded), or one com.microsoft.MultiHeadAttention each (`ms_mha`)."""
    from onnx import helper, numpy_helper

    t = ort_own._tensor_type(dtype)
    c = heads * d
    inits = [numpy_helper.from_array(np.array(v, np.int64), n) for n, v in
             (("q_shape", [b, sq, heads, d]), ("kv_shape", [b, skv, heads, d]), ("out_shape", [b, sq, c]))]
    inits.append(helper.make_tensor("root_scale", t, [], [math.sqrt(1 / math.sqrt(d))]))
    nodes_ = []
    for i in range(nodes):
        x, k, v, y = f"x{i}", f"k{i}", f"v{i}", f"y{i}"
        if ms_mha:
            nodes_.append(helper.make_node("MultiHeadAttention", [x, k, v], [y], domain="com.microsoft",
                                           num_heads=heads, name=f"mha{i}"))
            continue
        def n(op, ins, out, i=i, **a):
            nodes_.append(helper.make_node(op, ins, [f"{out}{i}"], name=f"{out}{i}", **a))

        n("Reshape", [x, "q_shape"], "qr")
        n("Transpose", [f"qr{i}"], "qt", perm=[0, 2, 1, 3])
        n("Reshape", [k, "kv_shape"], "kr")
        n("Transpose", [f"kr{i}"], "kt", perm=[0, 2, 3, 1])
        n("Reshape", [v, "kv_shape"], "vr")
        n("Transpose", [f"vr{i}"], "vt", perm=[0, 2, 1, 3])
        n("Mul", [f"qt{i}", "root_scale"], "qs")
        n("Mul", [f"kt{i}", "root_scale"], "ks")
        n("MatMul", [f"qs{i}", f"ks{i}"], "s")
        n("Softmax", [f"s{i}"], "p", axis=-1)
        n("MatMul", [f"p{i}", f"vt{i}"], "o")
        n("Transpose", [f"o{i}"], "ot", perm=[0, 2, 1, 3])
        nodes_.append(helper.make_node("Reshape", [f"ot{i}", "out_shape"], [y], name=f"out{i}"))
    ins = [helper.make_tensor_value_info(f"{p}{i}", t, [b, s, c]) for i in range(nodes)
           for p, s in (("x", sq), ("k", skv), ("v", skv))]
    outs = [helper.make_tensor_value_info(f"y{i}", t, [b, sq, c]) for i in range(nodes)]
    return ort_own._model(nodes_, ins, outs, inits, {"": 17, "com.microsoft": 1})


def matmul_peak_tflops(dtype: str = "fp16", n: int = 8192) -> float:
    import torch

    from benchmarks.gpu_common import torch_graph_ms

    tt = {"fp16": torch.float16, "bf16": torch.bfloat16}.get(dtype, torch.float16)
    a = torch.randn(n, n, device="cuda", dtype=tt)
    ms = torch_graph_ms(lambda x: x @ a, [torch.randn(n, n, device="cuda", dtype=tt) for _ in range(2)], 10)
    return 2 * n ** 3 / (ms * 1e-3) / 1e12


def torch_sdpa_us(q, k, v, heads) -> float:
    """F.scaled_dot_product_attention on (B, H, S, d) views of the (B, S, H*d) projections, graph replay."""
    import torch

    from benchmarks.gpu_common import torch_graph_ms

    b, sq, c = q.shape
    d = c // heads
    kt, vt = (a.view(b, -1, heads, d).transpose(1, 2) for a in (k, v))
    qs = [q.view(b, sq, heads, d).transpose(1, 2), q.clone().view(b, sq, heads, d).transpose(1, 2)]
    f = torch.nn.functional.scaled_dot_product_attention
    return torch_graph_ms(lambda x: f(x, kt, vt), qs, 20) * 1e3


class Bench:
    def __init__(self, library: Path):
        self.library = library
        self.own = ort_own.OrtRival()
        self.ours = ort_own.OrtRival(custom_ops=str(library))
        self.rows: list[dict] = []
        self.rng = np.random.default_rng(0)

    def ours_model(self, model):
        m = copy.deepcopy(model)
        report = rewrite(m, self.library, attention="tritonforge")
        if report.rewritten.get("MultiHeadAttention", 0) != sum(n.op_type == "Softmax" for n in model.graph.node):
            raise RuntimeError("the rewrite left attention: " + "; ".join(report.left))
        return m

    def shape(self, b, heads, sq, skv, d, dtype, peak):
        import torch

        c = heads * d
        tt = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}[dtype]
        gen = torch.Generator(device="cuda").manual_seed(int(self.rng.integers(1 << 31)))
        q, k, v = (torch.randn((b, s, c), generator=gen, device="cuda").to(tt) for s in (sq, skv, skv))
        per = (q.nelement() * 2 + k.nelement() * 2) * q.element_size()
        nodes = max(2, min(40, ort_own.node_count(per, L2)))
        feeds = lambda n: {f"{p}{i}": a for i in range(n) for p, a in (("x", q), ("k", k), ("v", v))}
        _, out, _ = self.ours.run(self.ours_model(decomposed_model(b, heads, sq, skv, d, dtype)), feeds(1), runs=1,
                                  graph=False)
        split = lambda a: np.asarray(a[:1], np.float64).reshape(1, -1, heads, d).transpose(0, 2, 1, 3)[:, :2]
        host = lambda t: t.float().cpu().numpy()
        why = attention_mismatch(split(out["y0"]), attention_ref(split(host(q)), split(host(k)), split(host(v))),
                                 dtype)
        if why:
            raise AssertionError(f"the library's attention against float64: {why}")
        flops = 4 * b * heads * sq * skv * d
        results = {}
        model = decomposed_model(b, heads, sq, skv, d, dtype, nodes)
        for name, rival, m in (("decomposed", self.own, model), ("tritonforge", self.ours, self.ours_model(model)),
                               ("ort_mha", self.own, decomposed_model(b, heads, sq, skv, d, dtype, nodes, True))):
            try:
                ms, _, mode = rival.run(m, feeds(nodes), fetch=False)
                results[name] = (ms * 1e3 / nodes, mode)
            except RuntimeError as exc:
                print(f"  {name}: {exc}", flush=True)
        results["torch"] = (torch_sdpa_us(q, k, v, heads), "cuda graph")
        label = f"attention b{b} h{heads} sq{sq} skv{skv} d{d}"
        for provider, (us, mode) in results.items():
            tflops = flops / (us * 1e-6) / 1e12
            self.rows.append({"provider": provider, "shape": label, "dtype": dtype, "metric": "us", "unit": "us",
                              "value": f"{us:.3f}", "extra": f"{mode}; {tflops:.0f} TFLOP/s; peak {peak:.0f}"})
        line = "  ".join(f"{p} {us:8.1f} us ({flops / (us * 1e-6) / 1e12:4.0f})" for p, (us, _) in results.items())
        ours = results["tritonforge"][0]
        best = min((us for p, (us, _) in results.items() if p in ("decomposed", "ort_mha")), default=float("nan"))
        print(f"{label:42s} {dtype}  {line}  ours/best-ORT {best / ours:.2f}x", flush=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--library", default=None, help="libtritonforge_ort.so (default: as ortlib.register finds it)")
    ap.add_argument("--model", default="all", help=f"all, or a comma list of: {', '.join(zoo.MODELS)}")
    ap.add_argument("--dtypes", default="fp16")
    ap.add_argument("--where", default=None, help="only shapes whose label matches this regular expression")
    ap.add_argument("--results", type=Path, default=None, help="default: benchmarks/results/results.csv")
    args = ap.parse_args(argv)
    why = ort_own.unavailable()
    if why:
        print(f"attention_bench: {why}", file=sys.stderr)
        return 2
    library = ortlib.library_path(args.library)
    selected = [m for name in args.model.split(",") for m in zoo.models(name.strip())]
    bench = Bench(library)
    import onnxruntime
    import torch

    device = torch.cuda.get_device_name(0)
    try:
        for dtype in args.dtypes.split(","):
            peak = matmul_peak_tflops(dtype)
            print(f"{device}: onnxruntime {onnxruntime.__version__}, {dtype} matmul peak {peak:.0f} TFLOP/s",
                  flush=True)
            for shape in zoo.attention_problems(selected):
                b, heads, sq, skv, d, causal = shape
                label = f"b{b} h{heads} sq{sq} skv{skv} d{d}"
                if causal or (args.where and not re.search(args.where, label)):
                    continue  # ORT's MultiHeadAttention and the decomposition here are non-causal
                bench.shape(b, heads, sq, skv, d, dtype, peak)
                write_rows("attention", device, bench.rows, args.results or RESULTS)  # a run cut short keeps its rows
                bench.rows = []
    finally:
        if bench.rows:
            write_rows("attention", device, bench.rows, args.results or RESULTS)
    return 0


if __name__ == "__main__":
    sys.exit(main())
