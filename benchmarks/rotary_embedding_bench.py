"""Flux's rotary embedding on its real shapes: the export's nodes against the library's RotaryEmbedding.

    python benchmarks/rotary_embedding_bench.py --library dist/full/cuda/multi/libtritonforge_ort.so
        [--model flux_dev] [--dtypes fp16,bf16,fp32] [--forms decomposed,rms,rms_joined] [--results PATH]

Per query or key tensor each model turns (benchmarks/e2e_models.py's rotary_streams: items, tokens, heads and
head_dim from the diffusers config; Flux's image and text tokens together), in one process on one GPU,
onnxruntime-gpu's CUDA EP with IOBinding and ORT's CUDA graph (benchmarks/ort_own.py), graphs of K identical
rotations on inputs of their own, cos and sin (1, tokens, 1, head_dim) fp32 shared: as the dynamo exporter writes
diffusers' apply_rotary_emb (`decomposed`: a Reshape into pairs, Slice and Squeeze of each half, Neg, Unsqueezes,
Concat, a Reshape back, the products in fp32 between Casts, ORT's own kernels) and as the rewrite writes it
(`tritonforge`, one tritonforge.RotaryEmbedding node), with `torch` (the same maths, CUDA-graph replay) and a
device-to-device `copy` of x. Both ONNX graphs' outputs are checked against float64 first.

Forms: `decomposed` the rotation alone; `rms` with the q/k RMSNorm before it (opset 23's RMSNormalization, as
Flux's single blocks export); `rms_joined` with the text's and the image's heads each normalized, then joined on
the token axis (Flux's double blocks: two RMSNormalizations and a Concat before the rotation).
Rows: benchmark `rotary_embedding`, shape `[<form> ]<model> <items>x<tokens>x<heads>x<head_dim>` (`rms_joined`:
tokens as `<text>+<image>`), metric `us`; benchmarks/choices.py turns them into the rewrite's table.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
from tritonforge.runtime.ops.rotary_embedding import rms_norm_ref, rotary_embedding_mismatch, rotary_embedding_ref  # noqa: E402

from benchmarks import e2e_models, fused_op_bench, ort_own  # noqa: E402

FORMS = ("decomposed", "rms", "rms_joined")
EPS = 1e-6  # Flux's q/k RMSNorm
L2 = 60 << 20


def model(items: int, tokens: int, heads: int, d: int, dtype: str, nodes: int, fused: bool, form: str = "decomposed",
          text: int = 0):
    """`nodes` independent rotations x<i> (items, tokens, heads, d) -> y<i>, cos and sin (1, tokens, 1, d) fp32.
    `fused`: one tritonforge.RotaryEmbedding each. `form` rms: x<i> RMS-normalized first (weight `gamma`);
    rms_joined: x<i> (text tokens) and xb<i> (the rest) each normalized, joined on the token axis."""
    from onnx import TensorProto, helper, numpy_helper

    t = ort_own._tensor_type(dtype)
    shape, half, norm = [items, tokens, heads, d], dtype != "fp32", form != "decomposed"
    in_shapes = {"x": [items, text, heads, d], "xb": [items, tokens - text, heads, d]} if text else {"x": shape}
    inits, body = [], []
    if norm:  # the export's weight in x's type, the library's in fp32 (the rewrite casts it)
        for name, seed in (("gamma", 1), ("gamma_b", 2))[:2 if text else 1]:
            v = gamma(d, seed)
            inits.append(numpy_helper.from_array(v if fused else v.astype(_numpy_type(dtype)), name))
    if not fused:
        for name, v in (("pair_shape", [items, tokens, heads, -1, 2]), ("x_shape", shape), ("k0", [0]), ("k1", [1]),
                        ("k2", [2]), ("last", [-1])):
            inits.append(numpy_helper.from_array(np.array(v, np.int64), name))
    for i in range(nodes):
        x, y = f"x{i}", f"y{i}"
        v = lambda name, i=i: f"{name}{i}"  # noqa: E731
        if fused:
            extra = ["gamma", v("xb"), "gamma_b"] if text else ["gamma"] if norm else []
            body.append(helper.make_node("RotaryEmbedding", [x, "cos", "sin", *extra], [y], domain="tritonforge",
                                         **({"epsilon": EPS} if norm else {}), **({"axis": 1} if text else {})))
            continue
        if norm:
            body.append(helper.make_node("RMSNormalization", [x, "gamma"], [v("n")], axis=-1, epsilon=EPS))
            x = v("n")
        if text:
            body += [helper.make_node("RMSNormalization", [v("xb"), "gamma_b"], [v("nb")], axis=-1, epsilon=EPS),
                     helper.make_node("Concat", [x, v("nb")], [v("joined")], axis=1)]
            x = v("joined")
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
    inputs = [helper.make_tensor_value_info(f"{n}{i}", t, dims) for i in range(nodes) for n, dims in in_shapes.items()]
    inputs += [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, tokens, 1, d]) for n in ("cos", "sin")]
    outputs = [helper.make_tensor_value_info(f"y{i}", t, shape) for i in range(nodes)]
    # opset 23: the ONNX RMSNormalization the dynamo exporter writes
    domains = {"": 23 if norm else 18, **({"tritonforge": 1} if fused else {})}
    return ort_own._model(body, inputs, outputs, inits, domains)


def gamma(d: int, seed: int) -> np.ndarray:
    """A norm's weight (d) fp32, around 1 as trained ones are, in 64ths: the same in every dtype."""
    return np.round(np.random.default_rng(seed).uniform(0.5, 1.5, d) * 64).astype(np.float32) / 64


def _numpy_type(dtype: str):
    import ml_dtypes

    return {"fp16": np.float16, "bf16": ml_dtypes.bfloat16, "fp32": np.float32}[dtype]


def angles(tokens: int, d: int, rng) -> tuple[np.ndarray, np.ndarray]:
    """cos and sin (1, tokens, 1, d) fp32 as Flux makes them: one angle per pair, repeated for its two elements."""
    angle = rng.uniform(-np.pi, np.pi, (tokens, d // 2)).repeat(2, axis=1)
    return (np.cos(angle)[None, :, None, :].astype(np.float32), np.sin(angle)[None, :, None, :].astype(np.float32))


def measure(own, ours, form: str, items: int, text: int, tokens: int, heads: int, d: int,
            dtype: str) -> dict[str, tuple[float, str]]:
    """{provider: (us per rotation, timing mode)} of one shape, both graphs' outputs checked first."""
    import torch

    from benchmarks.gpu_common import torch_graph_ms

    tt = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}[dtype]
    gen = torch.Generator(device="cuda").manual_seed(items * tokens + d)
    x = torch.randn((items, tokens, heads, d), generator=gen, device="cuda").to(tt)
    cos, sin = (torch.from_numpy(a).cuda() for a in angles(tokens, d, np.random.default_rng(tokens)))
    nodes = max(2, min(40, ort_own.node_count(x.nelement() * x.element_size(), L2)))
    xs = [x] + [x.clone() for _ in range(nodes - 1)]
    parts = [(a[:, :text], a[:, text:]) for a in xs] if text else [(a, None) for a in xs]
    norm = form != "decomposed"
    weights = [torch.from_numpy(gamma(d, seed)).cuda().to(tt) for seed in (1, 2)]

    def feeds(n):
        return {**{f"x{i}": parts[i][0].contiguous() for i in range(n)}, "cos": cos, "sin": sin,
                **({f"xb{i}": parts[i][1].contiguous() for i in range(n)} if text else {})}

    x64 = x.double().cpu().numpy()
    if norm:  # the weights as the export holds them (x's type)
        g64 = [w.double().cpu().numpy() for w in weights]
        x64 = np.concatenate([rms_norm_ref(x64[:, :text], g64[0], EPS), rms_norm_ref(x64[:, text:], g64[1], EPS)],
                             axis=1) if text else rms_norm_ref(x64, g64[0], EPS)
    ref = rotary_embedding_ref(x64, cos.double().cpu().numpy(), sin.double().cpu().numpy())
    results = fused_op_bench.check_then_time(
        own, ours, lambda k, fused: model(items, tokens, heads, d, dtype, k, fused, form, text), feeds, nodes,
        "decomposed", lambda y: rotary_embedding_mismatch(y, ref, dtype),
        f"RotaryEmbedding {form} {dtype} {items}x{tokens}x{heads}x{d}")

    def rope_torch(pair):
        a, b = pair
        if norm:
            a = torch.nn.functional.rms_norm(a, (d,), weights[0], EPS)
        if b is not None:
            a = torch.cat([a, torch.nn.functional.rms_norm(b, (d,), weights[1], EPS)], dim=1)
        real, imag = a.unflatten(-1, (-1, 2)).unbind(-1)
        rot = torch.stack([-imag, real], dim=-1).flatten(3)
        return (a.float() * cos + rot.float() * sin).to(a.dtype)

    results["torch"] = (torch_graph_ms(rope_torch, parts, 20) * 1e3, "cuda graph")
    results["copy"] = (torch_graph_ms(lambda a: a.clone(), xs, 20) * 1e3, "cuda graph")
    return results


def shapes(forms: tuple[str, ...]):
    """`fused_op_bench`'s shapes_of: (form, items, text tokens (rms_joined) or 0, tokens, heads, head_dim)."""
    def of(name: str) -> list[tuple]:
        text = e2e_models.DIT_TEXT.get(e2e_models.MODELS[name].kind, 0)
        return [(form, items, text if form == "rms_joined" else 0, tokens, heads, d)
                for items, tokens, heads, d in e2e_models.rotary_streams(name) for form in forms]
    return of


def label(name: str, shape: tuple) -> str:
    form, items, text, tokens, heads, d = shape
    dims = f"{items}x{f'{text}+{tokens - text}' if text else tokens}x{heads}x{d}"
    return f"{name} {dims}" if form == "decomposed" else f"{form} {name} {dims}"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(add_help=False)
    ap.add_argument("--forms", default=",".join(FORMS))
    args, rest = ap.parse_known_args(argv)
    forms = tuple(f.strip() for f in args.forms.split(","))
    unknown = [f for f in forms if f not in FORMS]
    if unknown:
        print(f"rotary_embedding_bench: unknown form {', '.join(unknown)}: choose from {', '.join(FORMS)}",
              file=sys.stderr)
        return 2
    return fused_op_bench.main(rest, __doc__, "rotary_embedding", "flux_dev", shapes(forms),
                               "no rotary embedding (of the zoo's models, flux_dev has one)", measure, label)


if __name__ == "__main__":
    sys.exit(main())
