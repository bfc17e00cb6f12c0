"""The two sides of the end-to-end bench, each run by e2e_bench.py in a process of its own: onnxruntime's sessions
(`ort`) and torch.compile of the same module (`torch`). Neither side's threads, allocator or compile caches are
in the other's process, and each side's first result is timed from a fresh process, as a user meets it.

    python benchmarks/e2e_sides.py ort --rewrite M.tf.onnx [--export M.onnx] --feeds F.npz --out side.json ...
    python benchmarks/e2e_sides.py torch --model NAME --dtype fp16 --weights W.pt --feeds F.npz --out side.json ...

Both write what they measured to `--out` (JSON, replaced whole at each step, so a side stopped for taking too long
still says how far it got):
- `first_result_s`: from the process's start (`--t0`, the parent's clock when it started the process) to the first
  output in host memory: onnxruntime's session made (the library's candidates timed on first use, or taken from a
  tune file) and run once; torch imported, the weights loaded, the module compiled and run once.
- `ms` (and, on torch's side, `ms_events`): the median of `--runs` timed runs once the warm-up has reached a steady
  state (the median of the last five runs within 2% of the five before); wall clock around a synchronized run, and
  CUDA events around the same runs on torch's side. onnxruntime's sessions run interleaved, one run of each at a
  time, bound to device buffers (IOBinding).
- `resize_first_result_s`: the first run at another image side (`--resize-feeds`): a dynamic-axes model's session
  runs it as it is; torch.compile compiles again.
Outputs are checked before anything is timed: the rewrite's against the export's (or `--reference`, a file of the
expected output), torch's against `--reference`.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

STEADY_WINDOW, STEADY_TOL, STEADY_MOST, STEADY_SECONDS = 5, 0.02, 40, 45.0

# cuDNN's conversions around its NHWC convolutions and ORT's Transpose: the kernels a layout-aware graph avoids.
LAYOUT = r"[Nn]chw[Tt]o[Nn]hwc|[Nn]hwc[Tt]o[Nn]chw|[Tt]ranspose"
TOL = {"fp16": 2e-2, "fp32": 5e-3, "bf16": 5e-2}
# numpy's type of each input; bfloat16 has none: its values are drawn as float32 and bound as bfloat16 (torch)
_NP = {"tensor(float16)": np.float16, "tensor(float)": np.float32, "tensor(double)": np.float64,
       "tensor(int64)": np.int64, "tensor(int32)": np.int32, "tensor(bfloat16)": np.float32}
_BF16 = "tensor(bfloat16)"
# Kernel names -> what they do, for --breakdown (first match wins).
KINDS = (("tritonforge", r"^(group_norm|softmax|attention)\w*_kernel$"),  # the kernel scripts' jit functions
         ("group/instance norm (ORT)", r"[Gg]roup[Nn]orm|[Ii]nstance[Nn]orm|bn_fw|[Bb]atch[Nn]orm|Welford"),
         ("softmax (ORT)", r"[Ss]oftmax"),
         # ORT's fused attention and torch's SDPA: cuDNN's (sdpa_*), flash, memory-efficient
         ("attention (ORT)", r"[Ff]lash|[Ff]mha|[Mm]emory[Ee]fficient|[Aa]ttention|sdpa|[Ee]fficient_attention"),
         ("layout conversion", LAYOUT),
         ("convolution", r"conv|fprop|dgrad|implicit|winograd|nhwc|nchw"),
         ("matmul", r"gemm|Gemm|cutlass|xmma|cublas|sm\d+_"),
         ("transpose / copy", r"[Tt]ranspose|[Cc]opy|[Mm]emcpy|[Mm]emset|[Cc]ast|[Cc]oncat|[Ss]lice|[Gg]ather|[Pp]ad"),
         ("elementwise", r"[Ee]lementwise|[Bb]inary|[Uu]nary|_kernel_impl|Add|Mul|Sigmoid|Silu|[Ss]wish|Gelu"))



def _session(path: Path, provider: str, library: Path | None):
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.log_severity_level = 3
    if library is not None:
        from tritonforge.runtime import ortlib

        ortlib.register(so, library)
    providers = ["CUDAExecutionProvider"] if provider == "cuda" else ["CPUExecutionProvider"]
    return ort.InferenceSession(str(path), so, providers=providers)


def _best_session(path: Path, provider: str, library: Path, graph: bool):
    """ortlib.session's settings (the library registered for the export too: it runs none of its ops)."""
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.log_severity_level = 3
    from tritonforge.runtime import ortlib

    providers = ["CUDAExecutionProvider"] if provider == "cuda" else ["CPUExecutionProvider"]
    return ortlib.session(path, library, providers=providers, cuda_graph=graph, session_options=so)


def _fixed(sess) -> bool:
    return all(isinstance(d, int) for io in (*sess.get_inputs(), *sess.get_outputs()) for d in io.shape)



def _torch_type(onnx_type: str):
    import torch

    return {"tensor(float16)": torch.float16, "tensor(float)": torch.float32, "tensor(double)": torch.float64,
            "tensor(int64)": torch.int64, "tensor(int32)": torch.int32, _BF16: torch.bfloat16}[onnx_type]


class Bound:
    """A session with its inputs and outputs bound in device memory: `run()` is one timed inference. On CUDA
    the buffers are torch tensors (bfloat16 too, which numpy has none of), bound by address; on the CPU,
    onnxruntime's own values."""

    def __init__(self, sess, feeds: dict, provider: str):
        import onnxruntime as ort

        self.sess, self.io = sess, sess.io_binding()
        self.values, self.tensors = [], []
        types = {i.name: i.type for i in sess.get_inputs()}
        if provider == "cuda":
            import torch

            for name, v in feeds.items():
                t = torch.from_numpy(v).to("cuda").to(_torch_type(types[name])).contiguous()
                self.tensors.append(t)
                self.io.bind_input(name, "cuda", 0, _onnx_elem(types[name]), list(t.shape), t.data_ptr())
            if not _fixed(sess) and any(o.type == _BF16 for o in sess.get_outputs()):
                raise SystemExit("error: a bfloat16 output of symbolic shape: the bench binds bfloat16 outputs of "
                                 "fixed shapes only")
        else:
            if _BF16 in types.values():
                raise SystemExit("error: bfloat16 inputs need the CUDA provider (torch binds them)")
            self.values = [ort.OrtValue.ortvalue_from_numpy(v, "cpu", 0) for v in feeds.values()]
            for name, v in zip(feeds, self.values):
                self.io.bind_ortvalue_input(name, v)
        for o in sess.get_outputs():
            if _fixed(sess) and provider == "cuda":  # the same output buffers every run, as a CUDA graph's replay needs
                import torch

                out = torch.empty(o.shape, dtype=_torch_type(o.type), device="cuda")
                self.tensors.append(out)
                self.io.bind_output(o.name, "cuda", 0, _onnx_elem(o.type), list(out.shape), out.data_ptr())
            elif _fixed(sess):
                out = ort.OrtValue.ortvalue_from_shape_and_type(o.shape, _NP[o.type], "cpu", 0)
                self.values.append(out)
                self.io.bind_ortvalue_output(o.name, out)
            else:
                self.io.bind_output(o.name, "cuda" if provider == "cuda" else "cpu")
        self.out = self.tensors[-1] if provider == "cuda" and _fixed(sess) else None

    def run(self) -> float:
        t = time.perf_counter()
        self.sess.run_with_iobinding(self.io)
        self.io.synchronize_outputs()
        return (time.perf_counter() - t) * 1e3

    def output(self) -> np.ndarray:
        if self.out is not None:
            return self.out.float().cpu().numpy()
        return self.io.copy_outputs_to_cpu()[0]


def _onnx_elem(onnx_type: str) -> int:
    from onnx import TensorProto

    return {"tensor(float16)": TensorProto.FLOAT16, "tensor(float)": TensorProto.FLOAT,
            "tensor(double)": TensorProto.DOUBLE, "tensor(int64)": TensorProto.INT64,
            "tensor(int32)": TensorProto.INT32, _BF16: TensorProto.BFLOAT16}[onnx_type]



def kernel_breakdown(bound: Bound, runs: int = 3, top: int = 4) -> tuple[dict, dict]:
    """GPU ms per run by kind of kernel (KINDS), and by name within each kind (every layout conversion, the `top`
    costliest of any other kind), from torch.profiler's CUPTI trace of `runs` inferences."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(runs):
            bound.run()
    kinds: dict[str, float] = {}
    named: dict[str, dict[str, float]] = {}
    for e in prof.events():
        if e.device_type.name != "CUDA":
            continue
        kind = next((k for k, rx in KINDS if re.search(rx, e.name)), "other")
        ms = e.time_range.elapsed_us() / 1e3 / runs
        kinds[kind] = kinds.get(kind, 0.0) + ms
        by_name = named.setdefault(kind, {})
        by_name[kernel_name(e.name)] = by_name.get(kernel_name(e.name), 0.0) + ms
    by_ms = lambda d, n=None: dict(sorted(d.items(), key=lambda kv: -kv[1])[:n])  # noqa: E731
    return by_ms(kinds), {k: by_ms(d, None if k == "layout conversion" else top) for k, d in named.items()}


def kernel_name(name: str) -> str:
    """A CUDA kernel's function name without its namespace, template and parameter lists."""
    base = re.sub(r"<.*|\(.*", "", name).strip()
    return base.rsplit("::", 1)[-1].rsplit(" ", 1)[-1] or name[:60]



def settings_said(settings: dict | None) -> str:
    """One line of what ortlib.session applied and dropped ("" for ORT's default settings)."""
    if not settings:
        return ""
    applied = ",".join(f"{k}={v}" for k, v in settings["cuda_options"].items()) or "none"
    dropped = ",".join(settings["dropped"])
    return f"settings: {applied}" + (f"; dropped: {dropped}" if dropped else "")



def _first_line(error: str, limit: int = 360) -> str:
    """An error as the report says it: its first line, cut at `limit` characters."""
    line = next(iter(error.strip().splitlines()), "")
    return line if len(line) <= limit else line[:limit - 3] + "..."


def first_output(sess, feeds: dict, provider: str) -> np.ndarray:
    """The session's first output for `feeds`, in host memory, as a user's first `run` gets it: numpy in and out
    (bfloat16, which numpy has none of, through Bound's device buffers)."""
    types = {i.name: i.type for i in sess.get_inputs()}
    if _BF16 in types.values() or any(o.type == _BF16 for o in sess.get_outputs()):
        b = Bound(sess, feeds, provider)
        b.run()
        return b.output()
    return sess.run(None, {k: v.astype(_NP[types[k]]) for k, v in feeds.items()})[0]


def model_inputs(path: Path) -> list[tuple[str, str, list]]:
    """(name, onnxruntime's type string, dims: an int or a symbol's name) of each input of an ONNX file that is
    not an initializer, read without its weights."""
    import onnx

    m = onnx.load(str(path), load_external_data=False)
    weights = {t.name for t in m.graph.initializer}
    names = {onnx.TensorProto.FLOAT16: "tensor(float16)", onnx.TensorProto.FLOAT: "tensor(float)",
             onnx.TensorProto.DOUBLE: "tensor(double)", onnx.TensorProto.INT64: "tensor(int64)",
             onnx.TensorProto.INT32: "tensor(int32)", onnx.TensorProto.BFLOAT16: _BF16}
    out = []
    for i in m.graph.input:
        if i.name in weights:
            continue
        t = i.type.tensor_type
        out.append((i.name, names.get(t.elem_type, f"tensor of ONNX type {t.elem_type}"),
                    [d.dim_value if d.HasField("dim_value") else d.dim_param for d in t.shape.dim]))
    return out


def random_feeds(path: Path, seed: int = 0, free: dict | None = None, shapes: dict | None = None) -> dict:
    """Random values for every input of the ONNX file at its declared shape, or `shapes[name]`; a symbolic dim
    takes `free[axis]` (a dynamic export: batch on axis 0, the latent's height and width on 2 and 3), else 1. A
    bfloat16 input's values are float32 here (bound as bfloat16). The same inputs whatever process draws them."""
    rng = np.random.default_rng(seed)
    feeds = {}
    for name, kind, dims in model_inputs(path):
        shape = list((shapes or {}).get(name) or
                     [d if isinstance(d, int) else (free or {}).get(a, 1) for a, d in enumerate(dims)])
        dt = _NP.get(kind)
        if dt is None:
            raise SystemExit(f"error: input '{name}' is {kind}: the bench feeds float and int inputs only")
        feeds[name] = (rng.integers(0, 1000, shape) if np.issubdtype(dt, np.integer)
                       else rng.standard_normal(shape)).astype(dt)
    return feeds



def rel_diff(a: np.ndarray, b: np.ndarray) -> float:
    """max |a - b| / max |a| in float64; NaN when either holds a NaN or an inf, or the shapes differ."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    if a.shape != b.shape or not (np.isfinite(a).all() and np.isfinite(b).all()):
        return float("nan")
    return float(np.abs(a - b).max() / max(np.abs(a).max(), 1e-30)) if a.size else 0.0


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    """The cosine of the two outputs as vectors, in float64 (NaN where either is not finite or all zero)."""
    a, b = np.asarray(a, np.float64).ravel(), np.asarray(b, np.float64).ravel()
    norm = np.linalg.norm(a) * np.linalg.norm(b)
    return float(a @ b / norm) if a.shape == b.shape and np.isfinite(norm) and norm > 0 else float("nan")


def until_steady(runs: dict, warmup: int) -> int:
    """Run each of `runs` ({side: fn returning ms}) in turn at least `warmup` times, then until every side's median of
    its last STEADY_WINDOW runs is within STEADY_TOL of the median of the window before (STEADY_MOST rounds or
    STEADY_SECONDS at most); returns the rounds run."""
    seen = {k: [] for k in runs}
    start, rounds = time.perf_counter(), 0
    while True:
        for k, run in runs.items():
            seen[k].append(run())
        rounds += 1
        if rounds >= max(warmup, 2 * STEADY_WINDOW) and all(_steady(v) for v in seen.values()):
            return rounds
        if rounds >= STEADY_MOST or time.perf_counter() - start > STEADY_SECONDS:
            return rounds


def _steady(ms: list) -> bool:
    last, before = ms[-STEADY_WINDOW:], ms[-2 * STEADY_WINDOW:-STEADY_WINDOW]
    return abs(statistics.median(last) / statistics.median(before) - 1) <= STEADY_TOL


class Report:
    """The side's JSON, written whole (temp file, then rename) at each step."""

    def __init__(self, path: Path, t0: float):
        self.path, self.t0, self.data = Path(path), t0, {"pid": os.getpid()}

    def put(self, **items) -> None:
        self.data.update(items)
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_text(json.dumps(self.data, indent=1, sort_keys=True))
        tmp.replace(self.path)

    def since_start(self) -> float:
        return time.time() - self.t0


def load_feeds(path: Path) -> dict:
    with np.load(path) as f:
        return {k: f[k] for k in f.files}


# ---- onnxruntime's side ----------------------------------------------------------------------------------------

def ort_side(args) -> int:
    """The rewrite's first result from this fresh process, then (unless --first-only) the export and the rewrite
    under the same settings, checked and timed interleaved."""
    report = Report(args.out, args.t0)
    import onnxruntime as ort  # noqa: F401  (imported first, as a user's program does)
    from tritonforge.runtime import ortlib

    provider = args.provider
    providers = ["CUDAExecutionProvider"] if provider == "cuda" else ["CPUExecutionProvider"]
    feeds = load_feeds(args.feeds)
    sess = ortlib.session(args.rewrite, args.library, providers=providers)
    first_output(sess, feeds, provider)
    report.put(first_result_s=report.since_start(), settings={"tritonforge": settings_said(
        sess.tritonforge_settings)})
    if args.tune_out:  # what this process chose, for the next one to take instead of timing
        report.put(tuned_choices=ortlib.save_choices(args.tune_out, args.library))
    if args.resize_feeds:
        bigger = load_feeds(args.resize_feeds)
        t = time.perf_counter()
        first_output(sess, bigger, provider)
        report.put(resize_first_result_s=time.perf_counter() - t)
    del sess
    if args.first_only:
        return 0
    sessions, said = {}, {}
    graph = provider == "cuda" and args.graph
    for name, path in (("ort_best" if args.best else "ort", args.export), ("tritonforge", args.rewrite)):
        if path is None:
            continue
        try:  # the export under ORT's defaults runs without the library; under the best settings, with it
            s = _best_session(path, provider, args.library, graph) if args.best else \
                _session(path, provider, args.library if name == "tritonforge" else None)
        except Exception as exc:
            if name == "tritonforge":
                raise
            report.put(export_error=_first_line(str(exc)))  # onnxruntime refuses the export as it is
            continue
        said[name] = settings_said(getattr(s, "tritonforge_settings", None))
        sessions[name] = Bound(s, feeds, provider)
    for b in sessions.values():
        b.run()
    reference = sessions["ort_best" if args.best else "ort"].output() if len(sessions) > 1 else \
        np.load(args.reference) if args.reference else None
    got = sessions["tritonforge"].output()
    if args.save_outputs:
        Path(args.save_outputs).mkdir(parents=True, exist_ok=True)
        np.save(Path(args.save_outputs) / "rewrite.npy", got.astype(np.float32))
        if len(sessions) > 1:
            np.save(Path(args.save_outputs) / "export.npy", reference.astype(np.float32))
    diff = rel_diff(reference, got) if reference is not None else float("nan")
    report.put(max_rel_diff=diff, settings={**report.data["settings"], **said})
    if reference is not None and args.min_cosine is not None:  # fp8: held to the cosine, not the dtype's tolerance
        cos = cosine(reference, got)
        report.put(cosine=cos)
        if not cos >= args.min_cosine:
            report.put(error=f"outputs differ: cosine {cos:.5f} < {args.min_cosine}; not timed")
            return 0
    # no reference (onnxruntime refuses the export): the caller checks rewrite.npy against the module in torch
    elif reference is not None and not diff <= TOL.get(args.dtype, 5e-3):
        report.put(error=f"outputs differ: {diff:.3g} > {TOL.get(args.dtype)} ({args.dtype}); not timed")
        return 0
    until_steady({k: b.run for k, b in sessions.items()}, args.warmup)
    times = {k: [] for k in sessions}
    for _ in range(args.runs):
        for k, b in sessions.items():
            times[k].append(b.run())
    report.put(ms={k: statistics.median(v) for k, v in times.items()})
    if args.breakdown:
        breakdown = {}
        for k, b in sessions.items():
            kinds, named = kernel_breakdown(b)
            breakdown[k] = {"kinds": kinds, "named": named}
        report.put(breakdown=breakdown)
    return 0


# ---- torch.compile's side --------------------------------------------------------------------------------------

def torch_side(args) -> int:
    """The module built and its weights loaded as a user's program does, compiled, run once (the first result),
    checked against --reference, then timed once steady, and (--resize-feeds) run at another side."""
    report = Report(args.out, args.t0)
    import torch

    torch.backends.cudnn.benchmark = True  # as ORT searches its convolution algorithms exhaustively
    device = args.device
    if args.factory:
        import importlib

        where, _, fn = args.factory.partition(":")
        module, names = getattr(importlib.import_module(where), fn)(args.dtype, device, args.weights)
        channels_last = False
    else:
        from benchmarks import e2e_models

        m = e2e_models.MODELS[args.model]
        layers = tuple(int(v) for v in args.layers.split(",") if v) or None
        module, _, names = e2e_models.build(m, args.dtype, device, args.tiny, args.side, layers, weights=args.weights)
        channels_last = not m.transformer
    fmt = torch.channels_last if channels_last else torch.contiguous_format
    module = module.to(memory_format=fmt) if channels_last else module
    run_dtype = args.dtype
    if args.quantize:
        if args.dtype == "fp16":  # torchao's row-wise fp8 takes bfloat16 weights: bf16 around its fp8 GEMMs
            module, run_dtype = module.to(torch.bfloat16), "bf16"
        quantize(module, args.quantize)

    def inputs(path):
        feeds = load_feeds(path)
        out = []
        for n in names:
            dt = _torch_dtype(run_dtype) if np.issubdtype(feeds[n].dtype, np.floating) else torch.int64
            x = torch.from_numpy(feeds[n]).to(device=device, dtype=dt)
            out.append(x.contiguous(memory_format=fmt) if channels_last and x.dim() == 4 else x)
        return out

    xs = inputs(args.feeds)
    report.put(ready_s=report.since_start())
    if args.eager_out:  # the module as it is: the reference where onnxruntime refuses the export
        with torch.no_grad():
            np.save(args.eager_out, module(*xs).float().cpu().numpy())
        return 0
    step = torch.compile(module, mode=args.mode)
    t_ready = time.perf_counter()
    with torch.no_grad():
        first = step(*xs).float().cpu().numpy()
    report.put(first_result_s=report.since_start(), compile_s=time.perf_counter() - t_ready)
    if args.reference:
        expected = np.load(args.reference)
        diff, cos = rel_diff(expected, first), cosine(expected, first)
        report.put(max_rel_diff=diff, cosine=cos)
        if not (cos >= args.min_cosine if args.min_cosine is not None else diff <= TOL.get(args.dtype, 5e-3)):
            report.put(error=f"its output differs from the reference: max rel diff {diff:.3g}, cosine {cos:.6f}")
            return 0
    if args.first_only:
        return 0
    cuda = device == "cuda"
    events = (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) if cuda else None
    got: dict[str, list] = {"wall": [], "events": []}

    def run() -> float:
        t = time.perf_counter()
        if cuda:
            events[0].record()
        with torch.no_grad():
            step(*xs)
        if cuda:
            events[1].record()
            torch.cuda.synchronize()
            got["events"].append(events[0].elapsed_time(events[1]))
        wall = (time.perf_counter() - t) * 1e3
        got["wall"].append(wall)
        return wall

    until_steady({"torch": run}, args.warmup)
    got = {"wall": [], "events": []}
    for _ in range(args.runs):
        run()
    report.put(ms=statistics.median(got["wall"]), ms_events=statistics.median(got["events"]) if cuda else None)
    if args.resize_feeds:
        bigger = inputs(args.resize_feeds)
        t = time.perf_counter()
        with torch.no_grad():
            step(*bigger).float().cpu()
        report.put(resize_first_result_s=time.perf_counter() - t)
    return 0


QUANTIZE = ("torchao-fp8-row",)


def quantize(module, how: str) -> None:
    """torchao's fp8 recipe for inference on Hopper, as its diffusers examples apply it: every Linear's weight in e4m3
    with one scale per output row, activations quantized per row at run time (`torch._scaled_mm`, cuBLASLt's fp8).
    It takes bfloat16 weights only, so an fp16 module runs in bfloat16 around its fp8 GEMMs (as diffusers runs it).
    torchao's default also turns on Inductor's coordinate-descent tuning over all directions (a max-autotune-class
    search that tunes every kernel serially on its first call); it is left off so that this side compiles under the
    same Inductor settings as the reduce-overhead column it is compared with."""
    from torchao.quantization import Float8DynamicActivationFloat8WeightConfig, PerRow, quantize_

    assert how == "torchao-fp8-row", how
    quantize_(module, Float8DynamicActivationFloat8WeightConfig(granularity=PerRow(), set_inductor_config=False))


def _torch_dtype(dtype: str):
    import torch

    return {"fp16": torch.float16, "fp32": torch.float32, "bf16": torch.bfloat16}[dtype]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="side", required=True)
    for name in ("ort", "torch"):
        p = sub.add_parser(name)
        p.add_argument("--feeds", type=Path, required=True, help="the inputs, an .npz of named arrays")
        p.add_argument("--out", type=Path, required=True, help="where the side writes what it measured (JSON)")
        p.add_argument("--t0", type=float, default=None, help="the parent's time.time() when it started this")
        p.add_argument("--dtype", default="fp16")
        p.add_argument("--runs", type=int, default=20)
        p.add_argument("--warmup", type=int, default=3)
        p.add_argument("--first-only", action="store_true", help="stop after the first result")
        p.add_argument("--reference", type=Path, default=None, help="the expected output (.npy)")
        p.add_argument("--resize-feeds", type=Path, default=None, help="inputs at another image side, run once")
    o = sub.choices["ort"]
    o.add_argument("--rewrite", type=Path, required=True)
    o.add_argument("--export", type=Path, default=None, help="the export as it is, timed against the rewrite")
    o.add_argument("--library", type=Path, default=None)
    o.add_argument("--provider", choices=("cuda", "cpu"), default="cuda")
    o.add_argument("--best", action="store_true", help="tritonforge_ort.session's settings for both sessions")
    o.add_argument("--graph", action="store_true", help="with --best: a CUDA graph (every shape fixed)")
    o.add_argument("--tune-out", type=Path, default=None, help="write the library's choices here (a tune file)")
    o.add_argument("--save-outputs", type=Path, default=None, help="a directory for export.npy and rewrite.npy")
    o.add_argument("--breakdown", action="store_true")
    o.add_argument("--min-cosine", type=float, default=None,
                   help="hold the rewrite to this cosine against the export instead of the dtype's tolerance (fp8)")
    t = sub.choices["torch"]
    t.add_argument("--model", default=None, help="a model of benchmarks/e2e_models.py")
    t.add_argument("--factory", default=None, help="MODULE:FN returning (module, input names) for (dtype, device, "
                                                   "weights) instead of --model")
    t.add_argument("--tiny", action="store_true")
    t.add_argument("--side", type=int, default=None)
    t.add_argument("--layers", default="")
    t.add_argument("--weights", type=Path, default=None, help="e2e_models.save_weights' file (--model needs it)")
    t.add_argument("--mode", default="reduce-overhead", help="torch.compile's mode")
    t.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    t.add_argument("--eager-out", type=Path, default=None, help="save the eager module's output there and stop")
    t.add_argument("--quantize", choices=QUANTIZE, default=None, help="quantize the module before compiling it")
    t.add_argument("--min-cosine", type=float, default=None,
                   help="hold the output to this cosine against --reference instead of the dtype's tolerance")
    args = ap.parse_args(argv)
    args.t0 = args.t0 or time.time()
    if args.side == "torch" and not (args.factory or (args.model and args.weights)):
        ap.error("torch: --model with --weights, or --factory")
    return ort_side(args) if args.side == "ort" else torch_side(args)


if __name__ == "__main__":
    sys.exit(main())
