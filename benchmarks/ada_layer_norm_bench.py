"""A diffusion transformer's block norm on its real shapes: the export's nodes against the library's AdaLayerNorm.

    python benchmarks/ada_layer_norm_bench.py --library dist/full/cuda/multi/libtritonforge_ort.so
        [--model sd3_medium,sd35_medium,pixart_sigma,flux_dev,sd15_unet,sdxl_unet] [--dtypes fp16,bf16,fp32]
        [--results PATH]

Per token stream of each model (benchmarks/e2e_models.py's dit_streams: items, tokens, hidden width from the
diffusers config; a UNet's unet_streams, its transformer blocks' levels), in one process on one GPU,
onnxruntime-gpu's CUDA EP with IOBinding and ORT's CUDA graph (benchmarks/ort_own.py), graphs of K identical
norms on inputs of their own, per form:
- `plain`: LayerNormalization (no affine) -> Mul(1 + scale) -> Add(shift), scale and shift one row per item;
- `gated`: the residual x + gate * branch first (its sum an output too, as the next block reads it);
- `gated_bias`: the branch a Linear of its own input, MatMul + bias (c x c, the attention's output projection),
  whose bias the library's node takes (its MatMul then runs without one): the MatMul is timed on both sides;
- `affine` (the UNets' streams, the DiTs' forms above): LayerNormalization with a weight and bias of its own, one
  ORT kernel, against the library's node with weight - 1 and bias as its modulation for all items;
each as the exporters write it (`export`, ORT's own LayerNorm and elementwise kernels) and as the rewrite writes
it (`tritonforge`, one tritonforge.AdaLayerNorm node), with `torch` (F.layer_norm and the same elementwise maths,
CUDA-graph replay) and a device-to-device `copy` of x. The library's output is checked against float64 first.
Rows: benchmark `ada_layer_norm`, shape `<form> <model> <rows>x<width>`, metric `us`;
benchmarks/choices.py turns them into the rewrite's table.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
from tritonforge.runtime import ortlib  # noqa: E402
from tritonforge.runtime.ops.ada_layer_norm import ada_layer_norm_mismatch, ada_layer_norm_ref  # noqa: E402

from benchmarks import e2e_models, fused_op_bench, ort_own  # noqa: E402

EPS = 1e-6
L2 = 60 << 20
FORMS = ("plain", "gated", "gated_bias")  # a DiT's
UNET_FORMS = ("affine",)


def _linear(c: int) -> tuple[np.ndarray, np.ndarray]:
    """The gated_bias form's Linear (c x c weight, c bias), fp32: the same values in the graph and the check."""
    rng = np.random.default_rng(c)
    return (rng.standard_normal((c, c)) / c ** 0.5).astype(np.float32), rng.standard_normal(c).astype(np.float32)


def _affine(c: int, dtype: str) -> tuple[np.ndarray, np.ndarray]:
    """The affine form's weight and bias (c each) as an export in `dtype` stores them, held in fp32: the same values
    in both graphs and the check (weight - 1 is exact in the dtype, as the rewrite writes it)."""
    import ml_dtypes

    rng = np.random.default_rng(c + 1)
    kind = {"fp16": np.float16, "bf16": ml_dtypes.bfloat16, "fp32": np.float32}[dtype]
    return tuple(v.astype(kind).astype(np.float32) for v in (rng.uniform(0.5, 1.5, c), rng.uniform(-0.5, 0.5, c)))


def _affine_model(tokens_shape: list, c: int, dtype: str, nodes: int, fused: bool):
    """`nodes` norms x<i> -> y<i> of one weight and bias (initializers cast to X's type, as an fp16 export stores
    them): LayerNormalization, or the library's node with weight - 1 and the bias as its one row of modulation."""
    from onnx import helper, numpy_helper

    t = ort_own._tensor_type(dtype)
    w, b = _affine(c, dtype)
    inits = [numpy_helper.from_array(w - 1 if fused else w, "w_f"), numpy_helper.from_array(b, "b_f")]
    body = [helper.make_node("Cast", ["w_f"], ["w"], to=t), helper.make_node("Cast", ["b_f"], ["b"], to=t)]
    for i in range(nodes):
        body.append(helper.make_node("AdaLayerNorm", [f"x{i}", "w", "b"], [f"y{i}"], domain="tritonforge", epsilon=EPS)
                    if fused else helper.make_node("LayerNormalization", [f"x{i}", "w", "b"], [f"y{i}"], axis=-1,
                                                   epsilon=EPS))
    inputs = [helper.make_tensor_value_info(f"x{i}", t, tokens_shape) for i in range(nodes)]
    outputs = [helper.make_tensor_value_info(f"y{i}", t, tokens_shape) for i in range(nodes)]
    return ort_own._model(body, inputs, outputs, inits, {"": 17, "tritonforge": 1} if fused else {"": 17})


def model(form: str, items: int, tokens: int, c: int, dtype: str, nodes: int, fused: bool):
    """`nodes` independent norms: x<i> [, branch b<i>] (items, tokens, c) -> y<i> [, y<i>s the sum]; the per-item
    s (scale), t (shift) [, g (gate)] (items, 1, c) shared; `gated_bias`: the branch is b<i> @ W + bias, W and
    bias initializers; `affine`: one weight and bias for all. `fused`: one tritonforge.AdaLayerNorm each."""
    from onnx import helper, numpy_helper

    if form == "affine":
        return _affine_model([items, tokens, c], c, dtype, nodes, fused)
    t = ort_own._tensor_type(dtype)
    gated, linear = form.startswith("gated"), form == "gated_bias"
    shape, row = [items, tokens, c], [items, 1, c]
    one = numpy_helper.from_array(np.ones(c, np.float32), "ln_one")
    zero = numpy_helper.from_array(np.zeros(c, np.float32), "ln_zero")
    inits = []
    body = []
    if not fused:
        inits = [one, zero]
        if dtype != "fp32":  # LayerNormalization's scale and bias share X's type
            one_f = numpy_helper.from_array(np.array(1, np.float32))
            body += [helper.make_node("Cast", ["ln_one"], ["w"], to=t),
                     helper.make_node("Cast", ["ln_zero"], ["z"], to=t),
                     helper.make_node("Constant", [], ["one_f"], value=one_f),
                     helper.make_node("Cast", ["one_f"], ["one"], to=t)]
        else:
            body += [helper.make_node("Identity", ["ln_one"], ["w"]), helper.make_node("Identity", ["ln_zero"], ["z"]),
                     helper.make_node("Constant", [], ["one"], value=numpy_helper.from_array(np.array(1, np.float32)))]
        body.append(helper.make_node("Add", ["s", "one"], ["factor"]))
    if linear:  # fp32 initializers cast to X's type: ORT folds the casts at load, as it does an export's weights
        w, bias = _linear(c)
        inits += [numpy_helper.from_array(w, "w_f"), numpy_helper.from_array(bias, "bias_f")]
        body += [helper.make_node("Cast", ["w_f"], ["w_lin"], to=t),
                 helper.make_node("Cast", ["bias_f"], ["bias"], to=t)]
    outputs = []
    for i in range(nodes):
        x, y = f"x{i}", f"y{i}"
        branch = f"b{i}"
        if linear:
            body.append(helper.make_node("MatMul", [branch, "w_lin"], [f"mm{i}"]))
            branch = f"mm{i}"
            if not fused:
                body.append(helper.make_node("Add", [branch, "bias"], [f"lin{i}"]))
                branch = f"lin{i}"
        if fused:
            ins = ([x, "s", "t", branch, "g"] + (["bias"] if linear else [])) if gated else [x, "s", "t"]
            outs = [y, f"y{i}s"] if gated else [y]
            body.append(helper.make_node("AdaLayerNorm", ins, outs, domain="tritonforge", epsilon=EPS))
        else:
            h = x
            if gated:
                body += [helper.make_node("Mul", ["g", branch], [f"gb{i}"]),
                         helper.make_node("Add", [x, f"gb{i}"], [f"y{i}s"])]
                h = f"y{i}s"
            body += [helper.make_node("LayerNormalization", [h, "w", "z"], [f"n{i}"], axis=-1, epsilon=EPS),
                     helper.make_node("Mul", [f"n{i}", "factor"], [f"m{i}"]),
                     helper.make_node("Add", [f"m{i}", "t"], [y])]
        outputs.append(helper.make_tensor_value_info(y, t, shape))
        if gated:
            outputs.append(helper.make_tensor_value_info(f"y{i}s", t, shape))
    inputs = [helper.make_tensor_value_info(f"x{i}", t, shape) for i in range(nodes)]
    if gated:
        inputs += [helper.make_tensor_value_info(f"b{i}", t, shape) for i in range(nodes)]
    inputs += [helper.make_tensor_value_info(n, t, row) for n in (("s", "t", "g") if gated else ("s", "t"))]
    domains = {"": 17, "tritonforge": 1} if fused else {"": 17}
    return ort_own._model(body, inputs, outputs, inits, domains)


def measure(own, ours, exact, form: str, items: int, tokens: int, c: int, dtype: str) -> dict[str, tuple[float, str]]:
    """{provider: (us per norm, timing mode)} of one shape and form, the library's output checked first (in
    `exact`, the library's session with float MatMuls off TF32)."""
    import torch

    from benchmarks.gpu_common import torch_graph_ms

    tt = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}[dtype]
    gen = torch.Generator(device="cuda").manual_seed(items * tokens + c)
    x = (2 * torch.randn((items, tokens, c), generator=gen, device="cuda") + 0.5).to(tt)
    branch = torch.randn((items, tokens, c), generator=gen, device="cuda").to(tt)
    s, t, g = ((0.5 * torch.randn((items, 1, c), generator=gen, device="cuda")).to(tt) for _ in range(3))
    gated, linear, affine = form.startswith("gated"), form == "gated_bias", form == "affine"
    if affine:  # the weight and bias as the graph stores them, in X's type: the modulation for all items
        wa, ba = (torch.from_numpy(a).to("cuda", tt) for a in _affine(c, dtype))
        s, t = (v.reshape(1, 1, c).expand(items, 1, c) for v in (wa - 1, ba))
    per = x.nelement() * x.element_size() * (2 if gated else 1)
    nodes = max(2, min(40, ort_own.node_count(per, L2)))
    xs = [x] + [x.clone() for _ in range(nodes - 1)]

    def feeds(n):
        return {**{f"x{i}": xs[i] for i in range(n)}, **({f"b{i}": branch for i in range(n)} if gated else {}),
                **({} if affine else {"s": s, "t": t}), **({"g": g} if gated else {})}

    def host(a):
        return a.double().cpu().numpy()

    w = bias = None
    if linear:  # the graph's own weights, in X's type as the model casts them
        w, bias = (torch.from_numpy(a).to("cuda", tt) for a in _linear(c))
    lin = (branch.double() @ w.double()).to(tt) if linear else branch  # the MatMul's output, rounded as stored
    ref, _ = ada_layer_norm_ref(host(x), host(s)[:, 0], host(t)[:, 0], EPS, host(lin) if gated else None,
                                host(g)[:, 0] if gated else None, host(bias) if linear else None)
    # the branch's float MatMul exact for the check (the CUDA EP runs it on TF32 by default, for both sides)
    _, out, _ = exact.run(model(form, items, tokens, c, dtype, 1, True), feeds(1), runs=1, graph=False)
    why = ada_layer_norm_mismatch(np.asarray(out["y0"]), ref, dtype)
    if why:
        raise AssertionError(f"AdaLayerNorm {form} {dtype} {items}x{tokens}x{c} against float64: {why}")
    results = {}
    for provider, rival, fused in (("export", own, False), ("tritonforge", ours, True)):
        ms, _, mode = rival.run(model(form, items, tokens, c, dtype, nodes, fused), feeds(nodes), fetch=False)
        results[provider] = (ms * 1e3 / nodes, mode)
    ln = torch.nn.functional.layer_norm

    def reference_torch(a):
        if affine:
            return ln(a, (c,), wa, ba, eps=EPS)
        b = torch.nn.functional.linear(branch, w.t(), bias) if linear else branch
        return ln(a + g * b if gated else a, (c,), eps=EPS) * (1 + s) + t

    results["torch"] = (torch_graph_ms(reference_torch, xs, 20) * 1e3, "cuda graph")
    results["copy"] = (torch_graph_ms(lambda a: a.clone(), xs, 20) * 1e3, "cuda graph")
    return results


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--library", default=None, help="libtritonforge_ort.so (default: as ortlib.register finds it)")
    ap.add_argument("--model", default="sd3_medium,sd35_medium,pixart_sigma,flux_dev,sd15_unet,sdxl_unet")
    ap.add_argument("--dtypes", default="fp16,bf16,fp32")
    ap.add_argument("--results", type=Path, default=None, help="default: benchmarks/results/results.csv")
    args = ap.parse_args(argv)
    why = ort_own.unavailable()
    if why:
        print(f"ada_layer_norm_bench: {why}", file=sys.stderr)
        return 2
    import torch

    library = ortlib.library_path(args.library)
    own, ours = ort_own.OrtRival(), ort_own.OrtRival(custom_ops=str(library))
    exact = ort_own.OrtRival(custom_ops=str(library), tf32=False)
    device = torch.cuda.get_device_name(0)
    seen = set()
    for dtype in args.dtypes.split(","):
        for name in args.model.split(","):
            unet = e2e_models.MODELS[name.strip()].kind == "unet"
            streams = (e2e_models.unet_streams if unet else e2e_models.dit_streams)(name.strip())
            for items, tokens, c in streams:
                for form in UNET_FORMS if unet else FORMS:
                    if (items, tokens, c, dtype, form) not in seen:
                        seen.add((items, tokens, c, dtype, form))
                        times = measure(own, ours, exact, form, items, tokens, c, dtype)
                        fused_op_bench.record("ada_layer_norm", device, f"{form} {name} {items * tokens}x{c}", dtype,
                                              times, args.results, 36)
    return 0


if __name__ == "__main__":
    sys.exit(main())
