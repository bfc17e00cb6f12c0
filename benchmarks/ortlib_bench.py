"""ONNX Runtime with tritonforge's custom-op library against ORT's own kernels, on the zoo's shapes.

    python benchmarks/ortlib_bench.py --library dist/full/cuda/multi/libtritonforge_ort.so --model all
        [--ops nhwc,nchw,softmax,e2e,host] [--dtypes fp16,fp32] [--where REGEX]

In one process on one GPU, onnxruntime-gpu's CUDA EP, graphs of K identical nodes each on an input of
its own, IOBinding on device tensors, ORT's CUDA graph where it captures (benchmarks/ort_own.py), per node:
- nhwc: `com.microsoft.GroupNorm` (ORT's own, what its SD optimizer writes) against the same graph
  rewritten to `tritonforge.GroupNorm` (runtime/ortlib/rewrite.py);
- nchw: ONNX `GroupNormalization` (opset 21, followed by SiLU as Sigmoid and Mul where the model has it:
  what PyTorch's exporter writes; ORT runs it as an expanded function) against the rewrite
  (`tritonforge.GroupNormalization`, SiLU fused), and torch (group_norm + silu, CUDA-graph replay);
- softmax: `Softmax` over the last axis against `tritonforge.Softmax`;
- e2e: a synthetic SD 1.5 VAE decoder and UNet up block (the real layer shapes: ResNet blocks of
  GroupNorm, SiLU, 3x3 convolution, skip concatenations; random fp16 weights; attention left out), whole
  session time before and after the rewrite, and GroupNorm+SiLU's share of it (against the same graph
  with those nodes made Identity);
- host: a one-node session's `run_with_iobinding` (plain, no graph), ours against ORT's own op.
Before anything is timed, the library's output for the shape (one node, which is also where it picks
its kernel for the shape) is checked against float64 on the first four groups of image 0 (GroupNorm) or
the first 256 rows (softmax). Rows go to benchmarks/results/results.csv (benchmark `ortlib`).
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
from tritonforge.runtime.ortlib.rewrite import rewrite  # noqa: E402

from benchmarks import ort_own  # noqa: E402
from benchmarks.results import write_rows  # noqa: E402

L2 = 60 << 20
TOL = {"fp16": 2e-2, "fp32": 2e-4}


def _silu(y):
    return y / (1 + np.exp(-y))


def check_nhwc(x, y, gamma, beta, groups, silu) -> float:
    """Max error of y against float64 on image 0's first four groups (x, y NHWC)."""
    c = x.shape[-1]
    cpg = c // groups
    k = min(4, groups) * cpg
    v = x[0, ..., :k].astype(np.float64).reshape(-1, k // cpg, cpg)
    ref = (v - v.mean((0, 2), keepdims=True)) / np.sqrt(v.var((0, 2), keepdims=True) + 1e-5)
    ref = ref.reshape(x.shape[1:-1] + (k,)) * gamma[:k] + beta[:k]
    ref = _silu(ref) if silu else ref
    return float(np.abs(y[0, ..., :k].astype(np.float64) - ref).max())


def check_nchw(x, y, scale, bias, groups, silu) -> float:
    c = x.shape[1]
    cpg = c // groups
    k = min(4, groups) * cpg
    v = x[0, :k].astype(np.float64).reshape(k // cpg, -1)
    ref = ((v - v.mean(1, keepdims=True)) / np.sqrt(v.var(1, keepdims=True) + 1e-5)).reshape(x[0, :k].shape)
    ref = ref * scale[:k].astype(np.float64)[:, None, None] + bias[:k].astype(np.float64)[:, None, None]
    ref = _silu(ref) if silu else ref
    return float(np.abs(y[0, :k].astype(np.float64) - ref).max())


def check_softmax(x, y) -> float:
    v = x[:256].astype(np.float64)
    v = np.exp(v - v.max(-1, keepdims=True))
    return float(np.abs(y[:256].astype(np.float64) - v / v.sum(-1, keepdims=True)).max())


class Bench:
    def __init__(self, library: Path):
        self.library = library
        self.own = ort_own.OrtRival()
        self.ours = ort_own.OrtRival(custom_ops=str(library))
        import onnxruntime

        self.version = onnxruntime.__version__
        self.rows: list[dict] = []
        self.rng = np.random.default_rng(0)

    def ours_model(self, model):
        m = copy.deepcopy(model)
        report = rewrite(m, self.library, softmax_min_cols=0, layout="nchw")  # ours on every row, to compare
        if not report.rewritten:
            raise RuntimeError("; ".join(report.left) or "nothing rewritten")
        return m

    def timed(self, rival, model, x, nodes):
        ms, _, mode = rival.run(model, {f"x{i}": x for i in range(nodes)}, fetch=False)
        return ms * 1e3 / nodes, mode

    def checked(self, model1, x, check) -> float:
        """Run the rewritten one-node model (the library picks its kernel here) and return its error."""
        _, out, _ = self.ours.run(model1, {"x0": x}, runs=1, graph=False)
        return check(out["y0"])

    def record(self, op, shape, dtype, results: dict, err: float, extra: str = ""):
        for provider, (us, mode) in results.items():
            self.rows.append({"provider": provider, "shape": f"{op} {shape}", "dtype": dtype, "metric": "us",
                              "unit": "us", "value": f"{us:.3f}", "extra": f"{mode}; max err {err:.2g}{extra}"})

    def flush(self, device: str):
        if self.rows:
            write_rows("ortlib", device, self.rows)

    def nhwc(self, n, hw, c, groups, silu, dtype):
        side = math.isqrt(hw)
        x = (self.rng.standard_normal((n, side, side, c), dtype=np.float32) * 2 + 0.5).astype(ort_own.NP_TYPES[dtype])
        nodes = ort_own.node_count(x.nbytes, L2)
        one = ort_own.group_norm_model(n, side, side, c, groups, dtype, silu, nodes=1)
        gamma = np.frombuffer(one.graph.initializer[0].raw_data, np.float32)
        beta = np.frombuffer(one.graph.initializer[1].raw_data, np.float32)
        err = self.checked(self.ours_model(one), x, lambda y: check_nhwc(x, y, gamma, beta, groups, silu))
        if not err <= TOL[dtype] * 4:
            raise AssertionError(f"max error {err:.3g} against float64")
        model = ort_own.group_norm_model(n, side, side, c, groups, dtype, silu, nodes=nodes)
        return {"ort": self.timed(self.own, model, x, nodes),
                "tritonforge": self.timed(self.ours, self.ours_model(model), x, nodes)}, err

    def nchw(self, n, hw, c, groups, silu, dtype):
        side = math.isqrt(hw)
        x = (self.rng.standard_normal((n, c, side, side), dtype=np.float32) * 2 + 0.5).astype(ort_own.NP_TYPES[dtype])
        nodes = ort_own.node_count(x.nbytes, L2)
        one = ort_own.group_normalization_model(n, c, side, side, groups, dtype, silu, nodes=1)
        from onnx import numpy_helper

        scale, bias = (numpy_helper.to_array(t) for t in one.graph.initializer)
        err = self.checked(self.ours_model(one), x, lambda y: check_nchw(x, y, scale, bias, groups, silu))
        if not err <= TOL[dtype] * 4:
            raise AssertionError(f"max error {err:.3g} against float64")
        model = ort_own.group_normalization_model(n, c, side, side, groups, dtype, silu, nodes=nodes)
        out = {"ort": self.timed(self.own, model, x, nodes),
               "tritonforge": self.timed(self.ours, self.ours_model(model), x, nodes)}
        out["torch"] = (self.torch_nchw(x, scale, bias, groups, silu), "cuda graph")
        return out, err

    def torch_nchw(self, x, scale, bias, groups, silu):
        import torch

        from benchmarks.gpu_common import torch_graph_ms

        xs = [torch.from_numpy(x).cuda() for _ in range(max(2, min(16, math.ceil(3 * L2 / (2 * x.nbytes)))))]
        w, b = torch.from_numpy(scale).cuda(), torch.from_numpy(bias).cuda()

        def fn(t):
            y = torch.nn.functional.group_norm(t, groups, w, b, 1e-5)
            return torch.nn.functional.silu(y) if silu else y

        us = torch_graph_ms(fn, xs, 20) * 1e3
        del xs
        return us

    def softmax(self, rows, cols, dtype):
        x = (self.rng.standard_normal((rows, cols), dtype=np.float32) * 3).astype(ort_own.NP_TYPES[dtype])
        nodes = ort_own.node_count(x.nbytes, L2)
        err = self.checked(self.ours_model(ort_own.softmax_model(rows, cols, dtype, 1)), x,
                           lambda y: check_softmax(x, y))
        if not err <= TOL[dtype]:
            raise AssertionError(f"max error {err:.3g} against float64")
        model = ort_own.softmax_model(rows, cols, dtype, nodes)
        return {"ort": self.timed(self.own, model, x, nodes),
                "tritonforge": self.timed(self.ours, self.ours_model(model), x, nodes)}, err


def one_node_host_us(rival, model, x, runs=300) -> float:
    """Median wall us of a one-node session's run_with_iobinding, plain (ORT's host path and ours)."""
    session = rival._session(model, graph=False)
    b = session.io_binding()
    ort = rival.ort
    xv = ort.OrtValue.ortvalue_from_numpy(x, "cuda", 0)
    yv = ort.OrtValue.ortvalue_from_shape_and_type(list(x.shape), x.dtype, "cuda", 0)
    b.bind_ortvalue_input("x0", xv)
    b.bind_ortvalue_output("y0", yv)
    return ort_own.median_run_s(session, b, runs, warmup=20) * 1e6


# ---- synthetic end-to-end graphs ------------------------------------------------------------------
class _Builder:
    def __init__(self, dtype, rng):
        from onnx import TensorProto

        self.nodes, self.inits, self.k, self.dtype, self.rng = [], [], 0, dtype, rng
        self.np = ort_own.NP_TYPES[dtype]
        self.t = {"fp16": TensorProto.FLOAT16, "fp32": TensorProto.FLOAT}[dtype]

    def name(self, p):
        self.k += 1
        return f"{p}{self.k}"

    def const(self, a):
        from onnx import numpy_helper

        n = self.name("w")
        self.inits.append(numpy_helper.from_array(a, n))
        return n

    def node(self, op, inputs, **attrs):
        from onnx import helper

        out = self.name(op.lower())
        self.nodes.append(helper.make_node(op, inputs, [out], name=out, **attrs))
        return out

    def gn_silu(self, x, c):
        s = self.const(self.rng.uniform(0.5, 1.5, c).astype(self.np))
        b = self.const(self.rng.uniform(-0.5, 0.5, c).astype(self.np))
        g = self.node("GroupNormalization", [x, s, b], num_groups=32, epsilon=1e-5)
        return self.node("Mul", [g, self.node("Sigmoid", [g])])

    def conv(self, x, cin, cout, k=3):
        w = self.const((self.rng.standard_normal((cout, cin, k, k)) / math.sqrt(cin * k * k)).astype(self.np))
        return self.node("Conv", [x, w], pads=[k // 2] * 4)

    def resnet(self, x, cin, cout):
        h = self.conv(self.gn_silu(x, cin), cin, cout)
        h = self.conv(self.gn_silu(h, cout), cout, cout)
        skip = x if cin == cout else self.conv(x, cin, cout, 1)
        return self.node("Add", [skip, h])

    def model(self, x_shape, out, out_shape):
        from onnx import helper

        g = helper.make_graph(self.nodes, "synthetic", [helper.make_tensor_value_info("x0", self.t, x_shape)],
                              [helper.make_tensor_value_info(out, self.t, out_shape)], self.inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])
        m.ir_version = 10  # what onnxruntime 1.20+ reads
        return m


def vae_decoder(dtype, rng, latent=64):
    """SD 1.5's VAE decoder after conv_in (block_out_channels 128, 256, 512, 512; layers_per_block 2, so 3
    ResNets per up block; 32 groups): mid ResNets at 512 x latent^2, up blocks to 8 x latent, conv_out."""
    b = _Builder(dtype, rng)
    x, c = "x0", 512
    for _ in range(2):
        x = b.resnet(x, c, c)
    for i, cout in enumerate((512, 512, 256, 128)):
        for _ in range(3):
            x = b.resnet(x, c, cout)
            c = cout
        if i < 3:
            scales = b.const(np.array([1, 1, 2, 2], np.float32))
            x = b.conv(b.node("Resize", [x, "", scales], mode="nearest"), c, c)
    x = b.conv(b.gn_silu(x, c), c, 3)
    return b.model([1, 512, latent, latent], x, [1, 3, 8 * latent, 8 * latent]), [1, 512, latent, latent]


def unet_up_block(dtype, rng, side=32, width=1280):
    """SD 1.5 UNet up_blocks.1's ResNets at 512x512 (32x32, 1280 out): inputs 1280 + skip 1280, 1280 + 1280,
    1280 + 640 channels (the concatenations of every up block), attention left out. `width` scales the
    channels (tests build a small one)."""
    b = _Builder(dtype, rng)
    x = "x0"
    skips = (width, width, width // 2)
    for cs in skips:
        s = b.const(rng.standard_normal((1, cs, side, side)).astype(b.np))
        x = b.resnet(b.node("Concat", [x, s], axis=1), width + cs, width)
    return b.model([1, width, side, side], x, [1, width, side, side]), [1, width, side, side]


def without_group_norm(model):
    """The same graph with every GroupNormalization + SiLU an Identity (what is left when they cost nothing)."""
    from onnx import helper

    m = copy.deepcopy(model)
    by_input = {}
    for n in m.graph.node:
        for i in n.input:
            by_input.setdefault(i, []).append(n)
    drop, new = set(), []
    for n in m.graph.node:
        if n.op_type == "GroupNormalization":
            mul = next(u for u in by_input[n.output[0]] if u.op_type == "Mul")
            sig = next(u for u in by_input[n.output[0]] if u.op_type == "Sigmoid")
            drop.update((id(mul), id(sig)))
            new.append((n, helper.make_node("Identity", [n.input[0]], [mul.output[0]], name=n.name)))
    repl = {id(a): b for a, b in new}
    nodes = [repl.get(id(n), n) for n in m.graph.node if id(n) not in drop]
    del m.graph.node[:]
    m.graph.node.extend(nodes)
    return m


def session_ms(rival, model, x_shape, dtype, runs=10):
    ort = rival.ort
    so = ort.SessionOptions()
    so.log_severity_level = 3
    if rival.custom_ops:
        so.register_custom_ops_library(rival.custom_ops)
    s = ort.InferenceSession(model.SerializeToString(), so, providers=["CUDAExecutionProvider"])
    x = np.random.default_rng(1).standard_normal(x_shape).astype(ort_own.NP_TYPES[dtype])
    b = s.io_binding()
    b.bind_ortvalue_input("x0", ort.OrtValue.ortvalue_from_numpy(x, "cuda", 0))
    b.bind_output(s.get_outputs()[0].name, "cuda")
    return ort_own.median_run_s(s, b, runs, warmup=3) * 1e3


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--library", default=None, help="libtritonforge_ort.so (default: as ortlib.register finds it)")
    ap.add_argument("--model", default="all", help=f"all, or a comma list of: {', '.join(zoo.MODELS)}")
    ap.add_argument("--ops", default="nhwc,nchw,softmax,e2e,host")
    ap.add_argument("--dtypes", default="fp16,fp32")
    ap.add_argument("--where", default=None, help="only shapes whose label matches this regular expression")
    args = ap.parse_args(argv)
    why = ort_own.unavailable()
    if why:
        print(f"ortlib_bench: {why}")
        return 1
    bench = Bench(ortlib.library_path(args.library))
    import onnxruntime

    onnxruntime.set_default_logger_severity(3)

    device = "gpu"
    try:
        import torch

        device = torch.cuda.get_device_name(0)
    except Exception:
        pass
    print(f"{device}, onnxruntime {onnxruntime.__version__}, library {bench.library}", flush=True)
    ops, dtypes = args.ops.split(","), args.dtypes.split(",")
    models = [m for name in args.model.split(",") for m in zoo.models(name)]
    pick = (lambda label: re.search(args.where, label)) if args.where else (lambda label: True)
    failures = 0

    def line(label, dtype, fn, *a):
        nonlocal failures
        before = {(r["op"], r["signature"]) for r in ortlib.choices(bench.library)}
        try:
            res, err = fn(*a, dtype)
        except Exception as exc:
            failures += 1
            print(f"{label:44s} {dtype}  FAILED: {str(exc).splitlines()[0][:300]}", flush=True)
            return
        ours, own = res["tritonforge"][0], res["ort"][0]
        extra = f"  torch {res['torch'][0]:8.2f}  x torch {res['torch'][0] / ours:5.2f}" if "torch" in res else ""
        # what the library chose for this shape (timed on first use, or its tune file's pick)
        kernels = ",".join(r["kernel"] for r in ortlib.choices(bench.library)
                           if (r["op"], r["signature"]) not in before) or "chosen earlier"
        print(f"{label:44s} {dtype}  ours {ours:8.2f} us  ORT {own:8.2f} us  x ORT {own / ours:5.2f}{extra}  "
              f"({res['tritonforge'][1]} / {res['ort'][1]}, err {err:.2g}; {kernels})", flush=True)
        bench.record(label.split()[0], " ".join(label.split()[1:]), dtype, res, err, f"; {kernels}")
        bench.flush(device)

    for dtype in dtypes:
        for kind in ("nhwc", "nchw"):
            if kind not in ops:
                continue
            for n, hw, c, groups, silu in zoo.group_norm_problems(models):
                side = math.isqrt(hw)
                shape = f"{n}x{side}x{side}x{c}" if kind == "nhwc" else f"{n}x{c}x{side}x{side}"
                label = f"{kind} {shape}{' silu' if silu else ''}"
                if pick(label):
                    line(label, dtype, getattr(bench, kind), n, hw, c, groups, silu)
        if "softmax" in ops:
            for rows, cols in zoo.softmax_problems(models):
                label = f"softmax {rows}x{cols}"
                if pick(label):
                    line(label, dtype, bench.softmax, rows, cols)
    if "host" in ops:
        for dtype in dtypes:
            for what, model in (("group_norm 1x8x8x1280", ort_own.group_norm_model(1, 8, 8, 1280, 32, dtype, True)),
                                ("softmax 512x77", ort_own.softmax_model(512, 77, dtype))):
                shape = [1, 8, 8, 1280] if what.startswith("group") else [512, 77]
                x = np.random.default_rng(0).standard_normal(shape).astype(ort_own.NP_TYPES[dtype])
                own = one_node_host_us(bench.own, model, x)
                ours = one_node_host_us(bench.ours, bench.ours_model(model), x)
                print(f"host: one-node session run, {what} {dtype}: ours {ours:.1f} us, ORT's own {own:.1f} us",
                      flush=True)
                bench.rows += [{"provider": p, "shape": f"host {what}", "dtype": dtype, "metric": "run_us",
                                "unit": "us", "value": f"{v:.2f}", "extra": "one-node session, plain"}
                               for p, v in (("tritonforge", ours), ("ort", own))]
        bench.flush(device)
    if "e2e" in ops:
        rng = np.random.default_rng(0)
        for name, build in (("sd15 vae decoder 512x512", vae_decoder), ("sd15 unet up_blocks.1 resnets",
                                                                          unet_up_block)):
            for dtype in dtypes:
                model, shape = build(dtype, rng)
                ours_model = bench.ours_model(model)
                t_orig = session_ms(bench.own, model, shape, dtype)
                t_ours = session_ms(bench.ours, ours_model, shape, dtype)
                t_none = session_ms(bench.own, without_group_norm(model), shape, dtype)
                before, after = (t_orig - t_none) / t_orig, (t_ours - t_none) / t_ours
                print(f"e2e {name} {dtype}: ORT {t_orig:.2f} ms (GroupNorm+SiLU {before:.0%}), rewritten "
                      f"{t_ours:.2f} ms ({after:.0%}), without GroupNorm {t_none:.2f} ms: x{t_orig / t_ours:.2f}",
                      flush=True)
                bench.rows += [{"provider": p, "shape": f"e2e {name}", "dtype": dtype, "metric": "session_ms",
                                "unit": "ms", "value": f"{v:.3f}", "extra": extra}
                               for p, v, extra in (("ort", t_orig, f"GroupNorm+SiLU share {before:.1%}"),
                                                   ("tritonforge", t_ours, f"GroupNorm+SiLU share {after:.1%}"),
                                                   ("none", t_none, "GroupNorm+SiLU as Identity"))]
                bench.flush(device)
    print(f"{failures} shape(s) failed" if failures else "every shape checked against float64 and timed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
