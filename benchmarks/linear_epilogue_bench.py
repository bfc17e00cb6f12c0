"""A UNet transformer block's Linears with what follows them: the export's nodes against ORT's own fused ops.

    python benchmarks/linear_epilogue_bench.py [--op skip_layer_norm,bias_split_gelu] [--model sd15_unet,sdxl_unet]
        [--dtypes fp16,fp32] [--library PATH] [--results PATH]

Per resolution a model's transformer blocks run at (benchmarks/e2e_models.py's unet_streams: items, tokens and
channels C from the diffusers config, the model's side), in one process on one GPU, onnxruntime-gpu's CUDA EP
with ORT's graph optimizations on (as a user's session has them: ORT fuses the export's MatMul and bias Add into a
Gemm), IOBinding and ORT's CUDA graph (benchmarks/ort_own.py), graphs of K identical blocks on inputs of their
own, one weight shared by them:
- `skip_layer_norm`: the attention's output projection (C x C), its bias and the residual, then LayerNorm with
  its affine; the sum an output too, as the next residual reads it. `export`: MatMul, bias Add, residual Add,
  LayerNormalization; `skip_layer_norm`: MatMul and com.microsoft.SkipLayerNormalization (what the rewrite
  writes, rewrite/skip_layer_norm.py);
- `bias_split_gelu`: GEGLU's projection (C x 8C) and `h * gelu(gate)` of its halves. `decomposed`: MatMul, bias
  Add, two Slices and the erf GELU as TorchScript writes them; `onnx_gelu`: MatMul, bias Add, Split and ONNX
  Gelu as the dynamo exporter does; `bias_split_gelu`: MatMul and com.microsoft.BiasSplitGelu; `tritonforge`:
  MatMul and the library's tritonforge.BiasSplitGelu (the two the rewrite chooses between, rewrite/bias_split_gelu.py;
  `--library`, default as ortlib.register finds it);
with `torch` (F.linear and the same maths, CUDA-graph replay) and `matmul`, the MatMul alone in ORT: the floor
any epilogue sits on. Every ORT form's output is checked against float64 first. Rows: benchmark = the op,
shape `<model> <rows>x<C>`, metric `us`; benchmarks/choices.py turns
them into the rewrite's tables.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from benchmarks import e2e_models, ort_own  # noqa: E402
from benchmarks.results import RESULTS, write_rows  # noqa: E402

FORMS = {"skip_layer_norm": ("export", "skip_layer_norm", "matmul"),
         "bias_split_gelu": ("decomposed", "onnx_gelu", "bias_split_gelu", "tritonforge", "matmul")}
LIBRARY_FORMS = {"tritonforge"}  # run in the session with the library registered
TOL = {"fp16": 2e-2, "bf16": 6e-2, "fp32": 1e-2}  # fp32 GEMMs run in TF32 on the CUDA EP by default
EPS = 1e-5
L2 = 60 << 20


def _init(name: str, a: np.ndarray, dtype: str):
    from onnx import TensorProto, helper, numpy_helper

    if dtype == "bf16":
        return helper.make_tensor(name, TensorProto.BFLOAT16, a.shape, a.astype(np.float32).reshape(-1).tolist())
    return numpy_helper.from_array(a.astype(ort_own.NP_TYPES[dtype]), name)


def _const(name: str, value: float, dtype: str):
    from onnx import helper

    return helper.make_node("Constant", [], [name], value=_init(name, np.array(value, np.float32), dtype))


def model(op: str, form: str, items: int, tokens: int, c: int, dtype: str, nodes: int, weights: dict):
    """`nodes` blocks of `op` in `form` on inputs x<i> (items, tokens, c) [and the residual x<i>r] -> y<i> [and
    the sum y<i>s]; `weights`: W, b [, gamma, beta] shared by them."""
    from onnx import helper

    t = ort_own._tensor_type(dtype)
    width = weights["W"].shape[1]
    out_width = width // 2 if op == "bias_split_gelu" and form != "matmul" else width
    inits = [_init(k, v, dtype) for k, v in weights.items()]
    body, ins, outs = [], [], []
    if form == "decomposed":
        body += [_const("c_sqrt2", math.sqrt(2), dtype), _const("c_one", 1.0, dtype), _const("c_half", 0.5, dtype),
                 helper.make_node("Constant", [], ["i_0"], value_ints=[0]),
                 helper.make_node("Constant", [], ["i_h"], value_ints=[width // 2]),
                 helper.make_node("Constant", [], ["i_w"], value_ints=[width]),
                 helper.make_node("Constant", [], ["i_last"], value_ints=[-1])]
    for i in range(nodes):
        x, y, mm, h = f"x{i}", f"y{i}", f"mm{i}", f"h{i}"
        n = lambda o, i_, out, i=i, **kw: helper.make_node(o, i_, [f"{out}{i}"], **kw)  # noqa: E731
        ins.append(helper.make_tensor_value_info(x, t, [items, tokens, c]))
        outs.append(helper.make_tensor_value_info(y, t, [items, tokens, out_width]))
        body.append(helper.make_node("MatMul", [x, "W"], [y if form == "matmul" else mm]))
        if form == "matmul":
            continue
        if op == "skip_layer_norm":
            ins.append(helper.make_tensor_value_info(f"{x}r", t, [items, tokens, c]))
            outs.append(helper.make_tensor_value_info(f"{y}s", t, [items, tokens, c]))
            if form == "skip_layer_norm":
                body.append(helper.make_node("SkipLayerNormalization", [mm, f"{x}r", "gamma", "beta", "b"],
                                             [y, "", "", f"{y}s"], domain="com.microsoft", epsilon=EPS))
            else:
                body += [helper.make_node("Add", [mm, "b"], [h]), helper.make_node("Add", [h, f"{x}r"], [f"{y}s"]),
                         helper.make_node("LayerNormalization", [f"{y}s", "gamma", "beta"], [y], axis=-1,
                                          epsilon=EPS)]
        elif form in ("bias_split_gelu", "tritonforge"):
            domain = "tritonforge" if form == "tritonforge" else "com.microsoft"
            body.append(helper.make_node("BiasSplitGelu", [mm, "b"], [y], domain=domain))
        else:
            body.append(helper.make_node("Add", ["b", mm], [h]))
            if form == "onnx_gelu":
                body += [helper.make_node("Split", [h], [f"a{i}", f"v{i}"], axis=-1, num_outputs=2),
                         n("Gelu", [f"v{i}"], "g")]
            else:
                body += [n("Slice", [h, "i_0", "i_h", "i_last"], "a"), n("Slice", [h, "i_h", "i_w", "i_last"], "v"),
                         n("Div", [f"v{i}", "c_sqrt2"], "d"), n("Erf", [f"d{i}"], "e"),
                         n("Add", [f"e{i}", "c_one"], "o"), n("Mul", [f"v{i}", f"o{i}"], "m"),
                         n("Mul", [f"m{i}", "c_half"], "g")]
            body.append(helper.make_node("Mul", [f"a{i}", f"g{i}"], [y]))
    return ort_own._model(body, ins, outs, inits, {"": 20, "com.microsoft": 1, "tritonforge": 1})


def reference(op: str, x, r, w: dict):
    """The block in float64 (torch tensors of it, on the device) from the inputs as the device holds them."""
    import torch

    v = x @ w["W"] + w["b"]
    if op == "bias_split_gelu":
        a, g = v.chunk(2, -1)
        return a * (0.5 * g * (1 + torch.erf(g / math.sqrt(2))))
    return torch.nn.functional.layer_norm(v + r, (v.shape[-1],), w["gamma"], w["beta"], EPS)


def measure(own, ours, op: str, items: int, tokens: int, c: int, dtype: str) -> dict[str, tuple[float, str]]:
    """{provider: (us per block, timing mode)} of one shape, every ORT form checked against float64 first."""
    import torch

    from benchmarks.gpu_common import torch_graph_ms

    tt = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}[dtype]
    rng = np.random.default_rng(items * tokens + c)
    width = 8 * c if op == "bias_split_gelu" else c
    host = lambda a: torch.tensor(a).to(tt).double().numpy()  # noqa: E731 (as the device rounds them)
    w = {"W": host(rng.standard_normal((c, width)) / math.sqrt(c)), "b": host(rng.uniform(-0.5, 0.5, width))}
    if op == "skip_layer_norm":
        w.update(gamma=host(rng.uniform(0.5, 1.5, c)), beta=host(rng.uniform(-0.5, 0.5, c)))
    gen = torch.Generator(device="cuda").manual_seed(c)
    x = torch.randn((items, tokens, c), generator=gen, device="cuda").to(tt)
    r = torch.randn((items, tokens, c), generator=gen, device="cuda").to(tt) if op == "skip_layer_norm" else None
    per = x.nelement() * x.element_size() * (2 + width // c)
    nodes = max(2, min(40, ort_own.node_count(per, L2)))
    xs = [x] + [x.clone() for _ in range(nodes - 1)]

    def feeds(k, form):
        skip = r is not None and form != "matmul"
        return {**{f"x{i}": xs[i] for i in range(k)}, **({f"x{i}r": r for i in range(k)} if skip else {})}

    ref = reference(op, x.double(), None if r is None else r.double(),
                    {k: torch.tensor(v, device="cuda") for k, v in w.items()}).cpu().numpy()
    results = {}
    for form in FORMS[op]:
        rival = ours if form in LIBRARY_FORMS else own
        try:
            if form != "matmul":
                _, out, _ = rival.run(model(op, form, items, tokens, c, dtype, 1, w), feeds(1, form), runs=1,
                                      graph=False)
                got = np.asarray(out["y0"], np.float64)
                err = float(np.max(np.abs(got - ref) / (1 + np.abs(ref))))
                if not err <= TOL[dtype]:
                    raise AssertionError(f"{op} {form} {dtype} {items}x{tokens}x{c}: off float64 by {err:.3g}")
            ms, _, mode = rival.run(model(op, form, items, tokens, c, dtype, nodes, w), feeds(nodes, form),
                                    fetch=False)
            results[form] = (ms * 1e3 / nodes, mode)
        except RuntimeError as exc:  # ORT has no kernel of the form for the dtype: said, and no row
            print(f"  {op} {form} {dtype} {items}x{tokens}x{c}: {exc}", flush=True)
    tw = {k: torch.tensor(v).to(tt).cuda() for k, v in w.items()}
    lin = torch.nn.functional.linear
    if op == "skip_layer_norm":
        fn = lambda a: torch.nn.functional.layer_norm(lin(a, tw["W"].T, tw["b"]) + r, (c,), tw["gamma"],  # noqa
                                                      tw["beta"], EPS)
    else:
        def fn(a):
            h, g = lin(a, tw["W"].T, tw["b"]).chunk(2, -1)
            return h * torch.nn.functional.gelu(g)
    results["torch"] = (torch_graph_ms(fn, xs, 10) * 1e3, "cuda graph")
    return results


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--op", default="skip_layer_norm,bias_split_gelu")
    ap.add_argument("--model", default="sd15_unet,sdxl_unet")
    ap.add_argument("--dtypes", default="fp16,fp32")
    ap.add_argument("--library", default=None, help="libtritonforge_ort.so (default: as ortlib.register finds it)")
    ap.add_argument("--results", type=Path, default=None, help="default: benchmarks/results/results.csv")
    args = ap.parse_args(argv)
    ops = [o.strip() for o in args.op.split(",")]
    unknown = [o for o in ops if o not in FORMS]
    if unknown:
        ap.error(f"unknown --op {', '.join(unknown)}; known: {', '.join(FORMS)}")
    why = ort_own.unavailable()
    if why:
        print(f"linear_epilogue_bench: {why}", file=sys.stderr)
        return 2
    import torch
    from tritonforge.runtime import ortlib

    own = ort_own.OrtRival(optimize=True)
    ours = ort_own.OrtRival(optimize=True, custom_ops=str(ortlib.library_path(args.library)))
    device = torch.cuda.get_device_name(0)
    for op in ops:
        seen = set()
        for dtype in args.dtypes.split(","):
            for name in args.model.split(","):
                for items, tokens, c in e2e_models.unet_streams(name.strip()):
                    if (items, tokens, c, dtype) in seen:
                        continue
                    seen.add((items, tokens, c, dtype))
                    rows = measure(own, ours, op, items, tokens, c, dtype)
                    label = f"{name} {items * tokens}x{c}"
                    write_rows(op, device, [{"provider": p, "shape": label, "dtype": dtype, "metric": "us",
                                             "unit": "us", "value": f"{us:.3f}", "extra": mode}
                                            for p, (us, mode) in rows.items()], args.results or RESULTS)
                    print(f"{op} {label:24s} {dtype}  " + "  ".join(f"{p} {us:8.1f} us" for p, (us, _) in rows.items()),
                          flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
