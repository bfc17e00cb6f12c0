"""Flux's rotary embedding on its real shapes: the export's nodes against the library's RotaryEmbedding.

    python benchmarks/rotary_embedding_bench.py --library dist/full/cuda/multi/libtritonforge_ort.so
        [--model flux_dev] [--dtypes fp16,bf16,fp32] [--results PATH]

Per query or key tensor each model turns (benchmarks/e2e_models.py's rotary_streams: items, tokens, heads and
head_dim from the diffusers config; Flux's image and text tokens together), in one process on one GPU,
onnxruntime-gpu's CUDA EP with IOBinding and ORT's CUDA graph (benchmarks/ort_own.py), graphs of K identical
rotations on inputs of their own, cos and sin (1, tokens, 1, head_dim) fp32 shared: as the dynamo exporter writes
diffusers' apply_rotary_emb (`decomposed`: a Reshape into pairs, Slice and Squeeze of each half, Neg, Unsqueezes,
Concat, a Reshape back, the products in fp32 between Casts, ORT's own kernels) and as the rewrite writes it
(`tritonforge`, one tritonforge.RotaryEmbedding node), with `torch` (the same maths, CUDA-graph replay) and a
device-to-device `copy` of x. Both ONNX graphs' outputs are checked against float64 first.
Rows: benchmark `rotary_embedding`, shape `<model> <items>x<tokens>x<heads>x<head_dim>`, metric `us`;
benchmarks/rotary_embedding_choice.py turns them into the rewrite's table.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
from tritonforge.runtime.ops.rotary_embedding import rotary_embedding_mismatch, rotary_embedding_ref  # noqa: E402

from benchmarks import e2e_models, fused_op_bench, ort_own  # noqa: E402

L2 = 60 << 20


def model(items: int, tokens: int, heads: int, d: int, dtype: str, nodes: int, fused: bool):
    """`nodes` independent rotations x<i> (items, tokens, heads, d) -> y<i>, cos and sin (1, tokens, 1, d) fp32.
    `fused`: one tritonforge.RotaryEmbedding each."""
    from onnx import TensorProto, helper, numpy_helper

    t = ort_own._tensor_type(dtype)
    shape, half = [items, tokens, heads, d], dtype != "fp32"
    inits, body = [], []
    if not fused:
        for name, v in (("pair_shape", [items, tokens, heads, -1, 2]), ("x_shape", shape), ("k0", [0]), ("k1", [1]),
                        ("k2", [2]), ("last", [-1])):
            inits.append(numpy_helper.from_array(np.array(v, np.int64), name))
    for i in range(nodes):
        x, y = f"x{i}", f"y{i}"
        if fused:
            body.append(helper.make_node("RotaryEmbedding", [x, "cos", "sin"], [y], domain="tritonforge"))
            continue
        v = lambda name, i=i: f"{name}{i}"  # noqa: E731
        body += [helper.make_node("Reshape", [x, "pair_shape"], [v("pairs")], allowzero=1),
                 helper.make_node("Slice", [v("pairs"), "k0", "k1", "last"], [v("re5_")]),
                 helper.make_node("Squeeze", [v("re5_"), "last"], [v("real")]),
                 helper.make_node("Slice", [v("pairs"), "k1", "k2", "last"], [v("im5_")]),
                 helper.make_node("Squeeze", [v("im5_"), "last"], [v("imag")]),
                 helper.make_node("Neg", [v("imag")], [v("neg")]),
                 helper.make_node("Unsqueeze", [v("neg"), "last"], [v("neg5_")]),
                 helper.make_node("Unsqueeze", [v("real"), "last"], [v("real5_")]),
                 helper.make_node("Concat", [v("neg5_"), v("real5_")], [v("stack")], axis=-1),
                 helper.make_node("Reshape", [v("stack"), "x_shape"], [v("rot")], allowzero=1)]
        xf, rot = x, v("rot")
        if half:
            body += [helper.make_node("Cast", [x], [v("x32_")], to=TensorProto.FLOAT),
                     helper.make_node("Cast", [rot], [v("rot32_")], to=TensorProto.FLOAT)]
            xf, rot = v("x32_"), v("rot32_")
        body += [helper.make_node("Mul", [xf, "cos"], [v("xc")]), helper.make_node("Mul", [rot, "sin"], [v("rs")]),
                 helper.make_node("Add", [v("xc"), v("rs")], [v("sum") if half else y])]
        if half:
            body.append(helper.make_node("Cast", [v("sum")], [y], to=t))
    inputs = [helper.make_tensor_value_info(f"x{i}", t, shape) for i in range(nodes)]
    inputs += [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, tokens, 1, d]) for n in ("cos", "sin")]
    outputs = [helper.make_tensor_value_info(f"y{i}", t, shape) for i in range(nodes)]
    domains = {"": 18, "tritonforge": 1} if fused else {"": 18}
    return ort_own._model(body, inputs, outputs, inits, domains)


def angles(tokens: int, d: int, rng) -> tuple[np.ndarray, np.ndarray]:
    """cos and sin (1, tokens, 1, d) fp32 as Flux makes them: one angle per pair, repeated for its two elements."""
    angle = rng.uniform(-np.pi, np.pi, (tokens, d // 2)).repeat(2, axis=1)
    return (np.cos(angle)[None, :, None, :].astype(np.float32), np.sin(angle)[None, :, None, :].astype(np.float32))


def measure(own, ours, items: int, tokens: int, heads: int, d: int, dtype: str) -> dict[str, tuple[float, str]]:
    """{provider: (us per rotation, timing mode)} of one shape, both graphs' outputs checked first."""
    import torch

    from benchmarks.gpu_common import torch_graph_ms

    tt = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}[dtype]
    gen = torch.Generator(device="cuda").manual_seed(items * tokens + d)
    x = torch.randn((items, tokens, heads, d), generator=gen, device="cuda").to(tt)
    cos, sin = (torch.from_numpy(a).cuda() for a in angles(tokens, d, np.random.default_rng(tokens)))
    nodes = max(2, min(40, ort_own.node_count(x.nelement() * x.element_size(), L2)))
    xs = [x] + [x.clone() for _ in range(nodes - 1)]

    def feeds(n):
        return {**{f"x{i}": xs[i] for i in range(n)}, "cos": cos, "sin": sin}

    ref = rotary_embedding_ref(x.double().cpu().numpy(), cos.double().cpu().numpy(), sin.double().cpu().numpy())
    results = fused_op_bench.check_then_time(
        own, ours, lambda k, fused: model(items, tokens, heads, d, dtype, k, fused), feeds, nodes, "decomposed",
        lambda y: rotary_embedding_mismatch(y, ref, dtype), f"RotaryEmbedding {dtype} {items}x{tokens}x{heads}x{d}")

    def rope_torch(a):
        real, imag = a.unflatten(-1, (-1, 2)).unbind(-1)
        rot = torch.stack([-imag, real], dim=-1).flatten(3)
        return (a.float() * cos + rot.float() * sin).to(a.dtype)

    results["torch"] = (torch_graph_ms(rope_torch, xs, 20) * 1e3, "cuda graph")
    results["copy"] = (torch_graph_ms(lambda a: a.clone(), xs, 20) * 1e3, "cuda graph")
    return results


def main(argv=None) -> int:
    return fused_op_bench.main(argv, __doc__, "rotary_embedding", "flux_dev", e2e_models.rotary_streams,
                               "no rotary embedding (of the zoo's models, flux_dev has one)", measure,
                               lambda name, s: f"{name} {'x'.join(map(str, s))}")

if __name__ == "__main__":
    sys.exit(main())
