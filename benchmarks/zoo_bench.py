"""GroupNorm and softmax on the shapes real models run (runtime/zoo.py), against ORT's own kernels.

    python benchmarks/zoo_bench.py --model sd15_unet|...|all [--dist dist/full] [--dtypes fp16,fp32]
        [--ops group_norm,softmax] [--batches 1,2] [--candidates-out FILE.json]

For every shape of the model, at each batch it lists, in one run on this GPU:
- ORT's group: the best candidate of ORT's own group (`GroupNormTriton_{Silu,Pass}_<dt>`,
  `softmax_<dt>`), launched exactly as ORT launches it (its struct, grid and candidate rules): what
  ORT's TunableOp can pick; for GroupNorm also the other activation's group on the same shape (Pass
  beside SiLU and back: they differ only in the activation, so their bests should match);
- runtime best: the best candidate of every family the runtime knows (clusters, cooperative teams);
  tuned: the tuner's pick (ORT TunableOp's method), beside it;
- ORT's own: onnxruntime-gpu's CUDA kernel for the op (`com.microsoft.GroupNorm`, `Softmax`;
  benchmarks/ort_own.py), the rival TunableOp measures a candidate against;
- torch (group_norm + silu in NCHW, softmax), a device-to-device copy of the tensor's size, and for
  GroupNorm the copy on ORT's grid of n x 32 programs, tuned (benchmarks/ort_grid_copy.py): once
  (read + write) and twice (read, then read + write), what ORT's launch leaves reachable.
Every candidate is checked against float64 before it is timed. Times are GPU time per launch, by
CUDA-graph replay over rotating buffers spanning 3x the L2 (ORT: its CUDA graph over nodes on inputs
of their own). Bytes = one read and one write of the tensor. Each line gives us, % of copy, x ORT's
own and x torch; each model ends with a table and its totals over one forward pass (counts from the
zoo: one UNet step, one VAE decode, one token). Rows go to benchmarks/results/results.csv.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
from tritonforge.runtime import zoo  # noqa: E402
from tritonforge.runtime.ops.group_norm import GroupNormProblem, GroupNormSetup  # noqa: E402
from tritonforge.runtime.ops.softmax import SoftmaxProblem, SoftmaxSetup  # noqa: E402
from tritonforge.runtime.tune import tune_problem  # noqa: E402

from benchmarks import ort_own, zoo_report  # noqa: E402
from benchmarks.results import RESULTS, write_rows  # noqa: E402
from tritonforge.atomic import write_text  # noqa: E402

ROTATE_BYTES = 3 * (60 << 20)  # torch inputs to cycle: 3x an H200's L2


def torch_dtype(dtype: str):
    import torch

    return {"fp32": torch.float32, "fp16": torch.float16}[dtype]


def torch_inputs(shape, dtype, nbytes: int) -> list:
    import torch

    k = max(2, min(16, math.ceil(ROTATE_BYTES / max(2 * nbytes, 1))))
    return [torch.randn(*shape, device="cuda", dtype=torch_dtype(dtype)) for _ in range(k)]


def empty_launch_us() -> float:
    """An empty Triton kernel's launch, timed as the torch baselines are: the floor of any launch."""
    import torch
    import triton
    import triton.language as tl

    from benchmarks.gpu_common import torch_graph_ms

    @triton.jit
    def empty(x):
        tl.program_id(0)

    xs = [torch.empty(1, device="cuda")]
    return torch_graph_ms(lambda x: empty[(1,)](x), xs, 200) * 1e3


class Bench:
    def __init__(self, dist: str, candidates_out: str | None):
        from benchmarks.gpu_common import open_gpu

        self.backend, self.registry, self.timer, self.ceiling = open_gpu(dist)
        self.l2 = self.backend.limits["l2_bytes"]
        self.rng = np.random.default_rng()
        why = ort_own.unavailable()
        self.rival = None if why else ort_own.OrtRival()
        print(f"ORT's own kernels: {why or 'onnxruntime-gpu ' + self.rival.version + ' CUDA EP'}", flush=True)
        self.floor_us = empty_launch_us()
        print(f"empty kernel launch: {self.floor_us:.2f} us", flush=True)
        self.floor_row = {"provider": "empty_kernel", "shape": "1", "dtype": "", "metric": "us", "unit": "us",
                          "value": f"{self.floor_us:.3f}", "extra": "an empty Triton kernel, graph replay"}
        self.candidates_out = candidates_out
        self.candidates: dict = {}

    def pct(self, nbytes: int, us: float) -> float:
        return 100 * nbytes / (us * 1e-6) / 1e9 / self.ceiling

    def ours(self, setup, key: str) -> dict:
        found = tune_problem(setup, exhaustive=True)
        tuned = tune_problem(setup)
        if found.rejected:
            first = "; ".join(f"{k}: {v}" for k, v in list(found.rejected.items())[:2])
            print(f"  {len(found.rejected)} rejected, e.g. {first}", flush=True)
        if not found.timed:
            raise RuntimeError(f"{key}: no candidate passed the float64 check: {found.rejected}")
        self.candidates[key] = {k: round(v * 1e3, 3) for k, v in sorted(found.timed.items(), key=lambda kv: kv[1])}
        best = min(found.timed, key=found.timed.get)
        out = {"best": (found.timed[best] * 1e3, best), "tuned": (tuned.best_ms * 1e3, tuned.best)}
        if found.ort_best:
            out["ort_group"] = (found.ort_ms * 1e3, found.ort_best)
        return out

    def measured(self, setup, key: str) -> tuple[dict, int]:
        """(our kernels' results plus the same-size copy, the tensor's bytes) of a problem set up on the GPU."""
        try:
            res = self.ours(setup, key)
        finally:
            setup.free()
        nbytes = setup.p.bytes_moved // 2
        res["copy"] = (self.timer.rotating_copy_ms(nbytes) * 1e3, "device-to-device copy")
        res["_bytes"] = 2 * nbytes
        return res, nbytes

    def ort_own(self, res: dict, op: str, label: str, measure) -> None:
        """ORT's own kernel for the problem, when onnxruntime-gpu is here; a shape ORT refuses is said so."""
        if not self.rival:
            return
        try:
            us, mode, nodes = measure()
            res["ort_own"] = (us, f"{op}, {nodes} nodes, {mode}")
        except RuntimeError as exc:
            print(f"  ORT's own {op} refused {label}: {exc}", flush=True)

    def group_norm(self, model, s, batch: int, dtype: str) -> dict:
        import torch

        from benchmarks.gpu_common import torch_graph_ms
        from benchmarks.ort_grid_copy import ort_grid_copy_ms

        n, hw, c, groups, silu = s.problem(batch)
        label = f"{n}x{s.side}x{s.side}x{c} {dtype}"
        p = GroupNormProblem(dtype, n, hw, c, groups, silu, s.eps)
        res, nbytes = self.measured(GroupNormSetup(self.registry, self.timer, p, self.rng),
                                    f"group_norm {'silu' if silu else 'pass'} {label}")
        res.update(self.other_group(p))
        xs = torch_inputs((n, c, s.side, s.side), dtype, nbytes)
        weight = torch.randn(c, device="cuda", dtype=torch_dtype(dtype))
        bias = torch.randn(c, device="cuda", dtype=torch_dtype(dtype))
        norm = lambda x: torch.nn.functional.group_norm(x, groups, weight, bias, s.eps)
        fn = (lambda x: torch.nn.functional.silu(norm(x))) if silu else norm
        res["torch"] = (torch_graph_ms(fn, xs, 20) * 1e3, "group_norm" + (" + silu" if silu else "") + " NCHW")
        nhwc = [x.reshape(n, hw, c) for x in xs]  # the copy only moves bytes: any values do
        out = torch.empty_like(nhwc[0])
        for passes, key in ((1, "grid_copy"), (2, "grid_copy2")):
            ms, setting = ort_grid_copy_ms(n, hw, c, dtype, passes, nhwc, out)
            res[key] = (ms * 1e3, setting)
        del xs, nhwc, out
        torch.cuda.empty_cache()
        self.ort_own(res, "com.microsoft.GroupNorm", label, lambda: self.rival.group_norm_us(
            n, s.side, s.side, c, groups, dtype, silu, s.eps, self.l2, self.rng))
        res["_on_chip"] = hw * (c // groups) <= zoo_report.ON_CHIP_VALUES
        return res

    def other_group(self, p: GroupNormProblem) -> dict:
        """ORT's group of the other activation on the same shape (`ort_group_pass` beside a SiLU shape, and
        the reverse): the two groups differ only in the activation, so their bests should match."""
        other = GroupNormProblem(p.dtype, p.n, p.hw, p.c, p.groups, not p.silu, p.eps)
        setup = GroupNormSetup(self.registry, self.timer, other, self.rng)
        try:
            found = tune_problem(setup)
        finally:
            setup.free()
        key = f"ort_group_{'silu' if other.silu else 'pass'}"
        return {key: (found.ort_ms * 1e3, found.ort_best)} if found.ort_best else {}

    def softmax(self, model, s, batch: int, dtype: str) -> dict:
        import torch

        from benchmarks.gpu_common import torch_graph_ms
        from benchmarks.ort_grid_copy import row_copy_ms

        rows, cols = s.problem(batch)
        p = SoftmaxProblem("softmax", dtype, rows, cols)
        res, nbytes = self.measured(SoftmaxSetup(self.registry, self.timer, p, self.rng),
                                    f"softmax {dtype} {rows}x{cols}")
        xs = torch_inputs((rows, cols), dtype, nbytes)
        res["torch"] = (torch_graph_ms(lambda x: torch.softmax(x, -1), xs, 20) * 1e3, "softmax")
        out = torch.empty_like(xs[0])
        ms, setting = row_copy_ms(rows, cols, xs, out)
        res["grid_copy"] = (ms * 1e3, setting)
        del xs, out
        torch.cuda.empty_cache()
        self.ort_own(res, "Softmax", f"{rows}x{cols} {dtype}",
                     lambda: self.rival.softmax_us(rows, cols, dtype, self.l2, self.rng))
        res["_on_chip"] = True  # a row is read once
        return res

    def verdict(self, res: dict) -> str:
        """Where ORT's group stands against ORT's own kernel (the vote TunableOp holds): zoo_report's rules."""
        us = {k: v[0] for k, v in res.items() if not k.startswith("_")}
        return zoo_report.verdict(us, res["_on_chip"], self.floor_us)[0]


def line(bench: Bench, what: str, res: dict) -> str:
    own, ref = res.get("ort_own", (None,))[0], res["torch"][0]
    parts = []
    for key, tag in (("ort_group", "ORT's group"), ("ort_group_pass", "ORT's Pass group"),
                     ("ort_group_silu", "ORT's Silu group"), ("best", "runtime best"), ("tuned", "tuned"),
                     ("ort_own", "ORT's own"), ("torch", "torch"), ("copy", "copy"), ("grid_copy", "grid copy"),
                     ("grid_copy2", "grid copy x2")):
        if key not in res:
            continue
        us, name = res[key]
        ratios = ""
        if key in ("ort_group", "best", "tuned", "ort_group_pass", "ort_group_silu"):
            ratios = (f", {own / us:.2f}x own" if own else "") + f", {ref / us:.2f}x torch"
        parts.append(f"{tag} {us:.2f} us ({bench.pct(res['_bytes'], us):.1f}% copy{ratios}; {name})")
    return f"{what}: " + " | ".join(parts) + f" -> {bench.verdict(res)}"


def rows_for(res: dict, shape: str, dtype: str, model: str, count: int, bench: Bench) -> list[dict]:
    out = []
    for key, value in res.items():
        if key.startswith("_"):
            continue
        us, name = value
        extra = f"{name}; {model} x{count}"
        out += [{"provider": key, "shape": shape, "dtype": dtype, "metric": "us", "unit": "us",
                 "value": f"{us:.3f}", "extra": extra},
                {"provider": key, "shape": shape, "dtype": dtype, "metric": "pct_copy", "unit": "%",
                 "value": f"{bench.pct(res['_bytes'], us):.1f}", "extra": extra}]
    if "tuned" in res:
        out.append({"provider": "tuned", "shape": shape, "dtype": dtype, "metric": "tuned_vs_best",
                    "unit": "ratio", "value": f"{res['tuned'][0] / res['best'][0]:.4f}", "extra": model})
    return out


def add_selection(ap: argparse.ArgumentParser, where_help: str) -> None:
    """The flags that pick zoo shapes (what this bench and pin_bench.py share)."""
    ap.add_argument("--model", default="all", help=f"all, or a comma list of: {', '.join(zoo.MODELS)}")
    ap.add_argument("--where", help=where_help)
    ap.add_argument("--dtypes", default="fp16,fp32")
    ap.add_argument("--ops", default="group_norm,softmax")
    ap.add_argument("--results", default=str(RESULTS))


def selected_models(args) -> tuple[list, re.Pattern | None]:
    """(models, compiled --where) of add_selection's flags; a bad one exits with the reason."""
    try:
        return ([m for name in args.model.split(",") for m in zoo.models(name)],
                re.compile(args.where) if args.where else None)
    except KeyError as exc:
        raise SystemExit(f"error: {exc.args[0]}") from None
    except re.error as exc:
        raise SystemExit(f"error: --where {args.where!r}: {exc}") from None


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_selection(ap, "only the shapes whose label matches this regular expression (labels: '2x64x64x320', "
                      "'65536x77')")
    ap.add_argument("--dist", default=str(ROOT / "dist" / "full"))
    ap.add_argument("--batches", help="comma list (default: each model's own)")
    ap.add_argument("--candidates-out", help="also write every candidate's time per problem (JSON)")
    args = ap.parse_args(argv)
    models, where = selected_models(args)
    ops = args.ops.split(",")
    if not set(ops) <= {"group_norm", "softmax"}:
        raise SystemExit(f"error: --ops takes group_norm and softmax, not {args.ops!r}")
    dtypes = args.dtypes.split(",")
    if not set(dtypes) <= {"fp16", "fp32"}:
        raise SystemExit(f"error: --dtypes takes fp16 and fp32 (ORT's op dtypes), not {args.dtypes!r}")
    bench = Bench(args.dist, args.candidates_out)
    write_rows("zoo_floor", bench.backend.device_name, [bench.floor_row], args.results)
    t0 = time.perf_counter()
    for model in models:
        batches = [int(b) for b in args.batches.split(",")] if args.batches else model.batches
        for batch in batches:
            for dtype in dtypes:
                done = False
                for op in ops:
                    for s in (model.group_norm if op == "group_norm" else model.softmax):
                        label = (f"{batch}x{s.side}x{s.side}x{s.c}" if op == "group_norm"
                                 else "x".join(map(str, s.problem(batch))))
                        if where and not where.search(label):
                            continue
                        if op == "group_norm":
                            res = bench.group_norm(model, s, batch, dtype)
                            shape = f"{batch}x{s.side}x{s.side}x{s.c}"
                            what = f"GroupNorm{'+SiLU' if s.silu else ''} {shape}"
                            benchmark = "zoo_group_norm" if s.silu else "zoo_group_norm_pass"
                        else:
                            res = bench.softmax(model, s, batch, dtype)
                            shape = "x".join(map(str, s.problem(batch)))
                            what = f"softmax {shape}"
                            benchmark = "zoo_softmax"
                        print(f"[{time.perf_counter() - t0:6.0f} s] {model.name} {model.batch_is}s={batch} {dtype} "
                              + line(bench, what, res), flush=True)
                        write_rows(benchmark, bench.backend.device_name,
                                   rows_for(res, shape, dtype, model.name, s.count, bench), args.results)
                        done = True
                if done:  # the model's table at this batch and dtype, as the results file now holds it
                    text, _ = zoo_report.report(zoo_report.load(Path(args.results), bench.backend.device_name),
                                                [model], [dtype], bench.floor_us, [batch])
                    print("\n" + text, flush=True)
    if args.candidates_out:
        write_text(args.candidates_out, json.dumps(bench.candidates, indent=1) + "\n")
    print("wrote", args.results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
