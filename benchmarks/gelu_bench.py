"""A diffusion transformer MLP's GELU-tanh on real shapes: the export's nodes against ORT's FastGelu, torch, a copy.

    python benchmarks/gelu_bench.py [--model sd3_medium,sd35_medium,pixart_sigma,flux_dev] [--dtypes fp16,bf16,fp32]
        [--results PATH]

Per model (its diffusers config in benchmarks/e2e_models.py: hidden width = heads x head dim, the MLP four
times that; image tokens (side / 8 / patch)^2 at the model's side, text tokens where its MLPs see them), in one
process on one GPU, onnxruntime-gpu's CUDA EP with IOBinding and ORT's CUDA graph (benchmarks/ort_own.py),
graphs of K identical GELUs on inputs of their own, each `gelu_tanh(x + bias)` of the first Linear's output:
- `decomposed`: the bias Add and the tanh decomposition as torch.onnx's TorchScript exporter writes them;
- `onnx_gelu`: the bias Add and ONNX Gelu(approximate="tanh") (opset 20), as the dynamo exporter writes it;
- `fast_gelu`: ORT's com.microsoft.FastGelu(x, bias): what the rewrite writes (rewrite/gelu.py);
- `torch`: F.gelu(x + bias, approximate="tanh"), CUDA-graph replay;
- `copy`: a device-to-device copy of x, the memory floor of any one-pass version.
Each ORT form's output is checked against float64 before it is timed. Rows: benchmark `gelu`, shape
`gelu <model> <rows>x<width>`, metric `us`; benchmarks/choices.py turns them into the rewrite's table.
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

FORMS = ("decomposed", "onnx_gelu", "fast_gelu")
TOL = {"fp16": 1e-2, "bf16": 4e-2, "fp32": 1e-4}
L2 = 60 << 20


def mlp_shapes(name: str) -> list[tuple[int, int]]:
    """(rows, width) of the GELU in the model's MLPs: each token stream's rows, four times its hidden width."""
    return [(items * tokens, 4 * hidden) for items, tokens, hidden in e2e_models.dit_streams(name)]


def _scalar(name: str, value: float, dtype: str):
    from onnx import helper, numpy_helper

    return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(
        np.array(value, dtype=np.float32 if dtype == "bf16" else ort_own.NP_TYPES[dtype])))


def model(form: str, rows: int, width: int, dtype: str, nodes: int, bias: np.ndarray):
    """`nodes` independent GELUs of `form` on inputs x<i> (rows, width) -> y<i>, one bias initializer."""
    from onnx import TensorProto, helper, numpy_helper

    t = ort_own._tensor_type(dtype)
    b = numpy_helper.from_array(bias.astype(np.float32), "bias")
    if dtype == "bf16":
        b = helper.make_tensor("bias", TensorProto.BFLOAT16, bias.shape, bias.astype(np.float32).tolist())
    elif dtype == "fp16":
        b = numpy_helper.from_array(bias.astype(np.float16), "bias")
    body = []
    values = {"c_half": 0.5, "c_one": 1.0, "c_k": math.sqrt(2 / math.pi), "c_cube": 0.044715}
    consts = [_scalar(k, v, dtype) for k, v in values.items()] if form == "decomposed" else []
    if dtype == "bf16":
        consts = [helper.make_node("Cast", [c.output[0] + "_f"], [c.output[0]], to=TensorProto.BFLOAT16)
                  for c in consts] + [_rename(c) for c in consts]
    for i in range(nodes):
        x, y, h = f"x{i}", f"y{i}", f"h{i}"
        if form == "fast_gelu":
            body.append(helper.make_node("FastGelu", [x, "bias"], [y], domain="com.microsoft"))
            continue
        body.append(helper.make_node("Add", ["bias", x], [h]))
        if form == "onnx_gelu":
            body.append(helper.make_node("Gelu", [h], [y], approximate="tanh"))
            continue
        n = lambda op, ins, out, i=i: helper.make_node(op, ins, [f"{out}{i}"])  # noqa: E731
        body += [n("Mul", [h, h], "sq"), n("Mul", [h, f"sq{i}"], "cu"), n("Mul", ["c_cube", f"cu{i}"], "a"),
                 n("Add", [h, f"a{i}"], "s"), n("Mul", ["c_k", f"s{i}"], "k"), n("Tanh", [f"k{i}"], "t"),
                 n("Add", ["c_one", f"t{i}"], "o"), n("Mul", [h, f"o{i}"], "m")]
        body.append(helper.make_node("Mul", ["c_half", f"m{i}"], [y]))
    io = lambda p: [helper.make_tensor_value_info(f"{p}{i}", t, [rows, width]) for i in range(nodes)]  # noqa: E731
    domains = {"": 20, "com.microsoft": 1} if form != "decomposed" else {"": 17}
    return ort_own._model([*consts, *body], io("x"), io("y"), [b], domains)


def _rename(const):
    from onnx import helper

    return helper.make_node("Constant", [], [const.output[0] + "_f"], value=const.attribute[0].t)


def reference(x: np.ndarray, bias: np.ndarray) -> np.ndarray:
    v = x.astype(np.float64) + bias.astype(np.float64)
    return 0.5 * v * (1 + np.tanh(math.sqrt(2 / math.pi) * (v + 0.044715 * v ** 3)))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="sd3_medium,sd35_medium,pixart_sigma,flux_dev")
    ap.add_argument("--dtypes", default="fp16,bf16,fp32")
    ap.add_argument("--results", type=Path, default=None, help="default: benchmarks/results/results.csv")
    args = ap.parse_args(argv)
    why = ort_own.unavailable()
    if why:
        print(f"gelu_bench: {why}", file=sys.stderr)
        return 2
    import torch

    from benchmarks.gpu_common import torch_graph_ms

    own = ort_own.OrtRival()
    device = torch.cuda.get_device_name(0)
    seen = set()
    for dtype in args.dtypes.split(","):
        tt = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}[dtype]
        for name in args.model.split(","):
            for rows, width in mlp_shapes(name.strip()):
                if (rows, width, dtype) in seen:
                    continue
                seen.add((rows, width, dtype))
                gen = torch.Generator(device="cuda").manual_seed(rows * 7 + width)
                x = (2 * torch.randn((rows, width), generator=gen, device="cuda")).to(tt)
                bias = np.random.default_rng(width).uniform(-0.5, 0.5, width).astype(np.float32)
                nodes = max(2, min(40, ort_own.node_count(x.nelement() * x.element_size(), L2)))
                xs = [x] + [x.clone() for _ in range(nodes - 1)]
                results = {}
                host_b = torch.tensor(bias).to(tt).float().numpy()
                ref = reference(x.float().cpu().numpy(), host_b)
                for form in FORMS:
                    try:
                        _, out, _ = own.run(model(form, rows, width, dtype, 1, bias), {"x0": x}, runs=1, graph=False)
                        got = np.asarray(out["y0"], np.float64)
                        err = float(np.max(np.abs(got - ref) / (1 + np.abs(ref))))
                        if not err <= TOL[dtype]:
                            raise AssertionError(f"{form} {dtype} {rows}x{width}: off float64 by {err:.3g}")
                        ms, _, mode = own.run(model(form, rows, width, dtype, nodes, bias),
                                              {f"x{i}": a for i, a in enumerate(xs)}, fetch=False)
                        results[form] = (ms * 1e3 / nodes, mode)
                    except RuntimeError as exc:
                        print(f"  {form} {dtype} {rows}x{width}: {exc}", flush=True)
                tb = torch.tensor(bias, device="cuda").to(tt)
                ref_fn = lambda a, tb=tb: torch.nn.functional.gelu(a + tb, approximate="tanh")  # noqa: E731
                results["torch"] = (torch_graph_ms(ref_fn, xs, 20) * 1e3, "cuda graph")
                results["copy"] = (torch_graph_ms(lambda a: a.clone(), xs, 20) * 1e3, "cuda graph")
                label = f"gelu {name} {rows}x{width}"
                rows_out = [{"provider": p, "shape": label, "dtype": dtype, "metric": "us", "unit": "us",
                             "value": f"{us:.3f}", "extra": mode} for p, (us, mode) in results.items()]
                write_rows("gelu", device, rows_out, args.results or RESULTS)
                print(f"{label:36s} {dtype}  " + "  ".join(f"{p} {us:8.1f} us" for p, (us, _) in results.items()),
                      flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
