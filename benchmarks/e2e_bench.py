"""End to end on the models users have: an export as it is against the same export rewritten into the
custom-op library's ops, in onnxruntime-gpu's CUDA EP, in one process.

    python benchmarks/e2e_bench.py --model sd15_vae_decoder --library dist/full/cuda/multi/libtritonforge_ort.so
        [--exporters torchscript,dynamo,dynamo23,ort] [--dtypes fp16,fp32,bf16] [--sides 512,768] [--dynamic]
        [--layers N[,M]] [--runs 20] [--breakdown] [--torch-compile]
    python benchmarks/e2e_bench.py --onnx my_export.onnx     # an export of your own (no torch needed)

For each model (benchmarks/e2e_models.py: SD 1.5 and SDXL VAE decoders and UNets, SD3, SD3.5, Flux and
PixArt-Sigma transformers, from their published configs, random weights), exporter (torch.onnx with
`dynamo=False` at opset 17, with `dynamo=True` at its default opset and at 23 (`dynamo23`); `ort`: ORT's
transformers optimizer on the TorchScript export) and dtype: the export is rewritten
(runtime/ortlib/rewrite), both are run on the same random inputs bound to device memory (IOBinding), the
outputs compared (max |a - b| over max |a|, against 2e-2 for fp16 and 5e-3 for fp32), then timed
interleaved, one run of each at a time, and the medians kept. `--sides` runs other image sides (a static
export for each); `--dynamic` exports once with symbolic batch, height and width (as Optimum does) and
runs that one file, rewritten once, at every side. `--settings best` times three sessions: the export under
ORT's default settings (`ort`), the export under the settings `tritonforge_ort.session` gives
(`ort_best`: NHWC, conv-bias fusion, and a CUDA graph where every shape is fixed) and the rewrite under
the same (`tritonforge`); its rows' exporter ends in `+best`. `--layout nhwc` rewrites the GroupNorms
channels-last (rows `+nhwc`; `--layout nchw,nhwc` times both against one export). `--breakdown` adds each
session's GPU time per kind of kernel (torch.profiler's CUPTI trace of the ORT runs), which says where a
speed-up stops, and names the layout conversions (cuDNN's NCHW/NHWC kernels, Transposes).
`--torch-compile` times the same module, weights and inputs under `torch.compile(mode="reduce-overhead")`
(channels-last for convolution models) in the same run, interleaved with the sessions, after its output is
checked against the export's (`torch_compile` rows; `--breakdown` gives its kernels too). `--layers` builds
fewer blocks than the config has (a transformer's `num_layers`, then Flux's `num_single_layers`), where the
export or the GPU's memory demands it; the model's name then says the depth (`flux_dev:L4of19+8of38`).
Rows go to benchmarks/results/results.csv (benchmark `e2e`); the table printed last is the summary.
"""

from __future__ import annotations

import argparse
import re
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
from tritonforge.runtime import ortlib  # noqa: E402
from tritonforge.runtime.ortlib.rewrite import rewrite_file  # noqa: E402

from benchmarks.results import write_rows  # noqa: E402

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


@dataclass
class Result:
    model: str  # with "@<side>" when the image side is not the model's own
    exporter: str  # with ".dynamic" for an export with dynamic axes
    dtype: str
    ms: dict = field(default_factory=dict)  # "ort" (the export as is) / "tritonforge" (rewritten) -> median ms
    rewritten: int = 0
    left: list = field(default_factory=list)
    diff: float = float("nan")
    breakdown: dict = field(default_factory=dict)  # session -> {kind: ms per run}
    layout_kernels: dict = field(default_factory=dict)  # session -> {layout-conversion kernel: ms per run}
    kernels: dict = field(default_factory=dict)  # session -> {other kind: {its costliest kernels: ms per run}}
    error: str = ""  # what stopped the measurement
    export_error: str = ""  # why onnxruntime refuses the export as it is (then checked against eager torch)
    recorded_speedup: float | None = None  # as a results file holds it: its ms are rounded, the ratio was not
    settings: dict = field(default_factory=dict)  # session -> what ortlib.session applied and dropped (--settings)
    compile_diff: float = float("nan")  # torch.compile's output against the export's (--torch-compile)
    compile_error: str = ""  # why torch.compile was not timed
    device: str = ""  # the device it ran on, as its rows name it (set once recorded)

    @property
    def speedup(self) -> float:
        if self.recorded_speedup is not None:
            return self.recorded_speedup
        return self.ms["ort"] / self.ms["tritonforge"] if "ort" in self.ms else float("nan")

    @property
    def same_settings_speedup(self) -> float | None:
        """The rewrite against the export under the same settings (--settings best), else None."""
        return self.ms["ort_best"] / self.ms["tritonforge"] if "ort_best" in self.ms and "tritonforge" in self.ms \
            else None

    @property
    def vs_compile(self) -> float | None:
        """torch.compile's time over the rewrite's (--torch-compile), else None: above 1 the rewrite is faster."""
        return self.ms["torch_compile"] / self.ms["tritonforge"] if "torch_compile" in self.ms and \
            "tritonforge" in self.ms else None

    @property
    def ok(self) -> bool:
        return not self.error and bool(self.diff <= TOL.get(self.dtype, 5e-3))


def _session(path: Path, provider: str, library: Path | None):
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.log_severity_level = 3
    if library is not None:
        ortlib.register(so, library)
    providers = ["CUDAExecutionProvider"] if provider == "cuda" else ["CPUExecutionProvider"]
    return ort.InferenceSession(str(path), so, providers=providers)


def _best_session(path: Path, provider: str, library: Path, graph: bool):
    """ortlib.session's settings (the library registered for the export too: it runs none of its ops)."""
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.log_severity_level = 3
    providers = ["CUDAExecutionProvider"] if provider == "cuda" else ["CPUExecutionProvider"]
    return ortlib.session(path, library, providers=providers, cuda_graph=graph, session_options=so)


def _fixed(sess) -> bool:
    return all(isinstance(d, int) for io in (*sess.get_inputs(), *sess.get_outputs()) for d in io.shape)


def random_inputs(sess, seed: int = 0, free: dict | None = None) -> dict:
    """Random values for every input the session takes, at its declared shape; a symbolic dim takes
    `free[axis]` (a dynamic export: batch on axis 0, the latent's height and width on 2 and 3), else 1.
    A bfloat16 input's values are float32 here (Bound binds them as bfloat16)."""
    rng = np.random.default_rng(seed)
    feeds = {}
    for i in sess.get_inputs():
        shape = [d if isinstance(d, int) else (free or {}).get(a, 1) for a, d in enumerate(i.shape)]
        dt = _NP.get(i.type)
        if dt is None:
            raise SystemExit(f"error: input '{i.name}' is {i.type}: the bench feeds float and int inputs only")
        feeds[i.name] = (rng.integers(0, 1000, shape) if np.issubdtype(dt, np.integer)
                         else rng.standard_normal(shape)).astype(dt)
    return feeds


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


class Compiled:
    """The module the export was made from under torch.compile(mode="reduce-overhead") (or eager, `compiled`
    False), on the same feeds (channels-last where it convolves): `run()` is one timed step, as Bound's."""

    def __init__(self, module, names: list, example: tuple, feeds: dict, channels_last: bool, compiled: bool = True):
        import torch

        fmt = torch.channels_last if channels_last else torch.contiguous_format
        self.module = module.to(memory_format=fmt) if channels_last else module
        self.inputs = [torch.from_numpy(feeds[n]).to(device=x.device, dtype=x.dtype) for n, x in zip(names, example)]
        self.inputs = [x.contiguous(memory_format=fmt) if channels_last and x.dim() == 4 else x for x in self.inputs]
        self.step = torch.compile(self.module, mode="reduce-overhead") if compiled else self.module
        self.last = None

    def run(self) -> float:
        import torch

        t = time.perf_counter()
        with torch.no_grad():
            self.last = self.step(*self.inputs)
        if self.last.is_cuda:
            torch.cuda.synchronize()
        return (time.perf_counter() - t) * 1e3

    def output(self) -> np.ndarray:
        return self.last.float().cpu().numpy()


def rel_diff(a: np.ndarray, b: np.ndarray) -> float:
    """max |a - b| / max |a| in float64; NaN when either holds a NaN or an inf."""
    a, b = a.astype(np.float64), b.astype(np.float64)
    if not (np.isfinite(a).all() and np.isfinite(b).all()):
        return float("nan")
    return float(np.abs(a - b).max() / max(np.abs(a).max(), 1e-30))


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


def rewrite(path: Path, library: Path, log=print, layout: str = "nchw") -> tuple[Path, object]:
    """`path` rewritten beside it: (the rewrite's path, its report)."""
    out = path.with_name(path.name.removesuffix(".onnx") + _layout_tag(layout).replace("+", ".") + ".tf.onnx")
    t = time.perf_counter()
    report = rewrite_file(path, out, library, layout=layout)
    log(f"  rewrite ({time.perf_counter() - t:.1f} s): " + "; ".join(report.lines()[:3]) +
        (f"; {len(report.left)} left" if report.left else ""))
    return out, report


def measure(path: Path, dtype: str, library: Path, provider: str, runs: int, warmup: int, breakdown: bool,
            result: Result, log=print, rewritten: tuple | None = None, free: dict | None = None,
            best: bool = False, layout: str = "nchw", torch_step: tuple | None = None) -> Result:
    """Rewrite `path` (or take `rewritten`, rewrite()'s pair), check and time it against the original at the
    inputs `free` sizes (random_inputs); fills and returns `result`. `best`: the export and the rewrite under
    ortlib.session's settings too (a CUDA graph where every shape is fixed), the rewrite under them only.
    `torch_step`: (module, input names, example inputs, channels-last) the export was made from, timed under
    torch.compile on the same feeds once its output matches the export's. An export onnxruntime refuses (SD3's
    bfloat16 Einsum) is checked against that module run eagerly instead, and timed against torch.compile alone."""
    out, report = rewritten or rewrite(path, library, log, layout)
    result.rewritten = sum(report.rewritten.values())
    result.left = list(report.left)
    try:
        try:
            base = _session(path, provider, None)
        except Exception as exc:
            if torch_step is None:
                raise
            result.export_error = _first_line(str(exc))
            log(f"  the export does not load ({result.export_error}): checked against eager torch")
            base = None
        probe = base or _session(out, provider, library)
        feeds = random_inputs(probe, free=free)
        sessions = {"ort": Bound(base, feeds, provider)} if base else {}
        if best:
            graph = provider == "cuda" and _fixed(probe)
            for name, model in (("ort_best", path), ("tritonforge", out))[0 if base else 1:]:
                sess = _best_session(model, provider, library, graph)
                result.settings[name] = sess.tritonforge_settings
                sessions[name] = Bound(sess, feeds, provider)
        else:
            sessions["tritonforge"] = Bound(_session(out, provider, library), feeds, provider)
    except Exception as exc:  # e.g. ORT's contrib ops on the CPU EP: say so and go on with the next model
        result.error = str(exc).strip().splitlines()[0][:300]
        log(f"  not run: {result.error}")
        return result
    if torch_step is not None:
        sessions["torch_compile"] = Compiled(*torch_step[:3], feeds, torch_step[3])
    reference = sessions.get("ort")
    if reference is None:
        reference = Compiled(*torch_step[:3], feeds, torch_step[3], compiled=False)
        reference.run()
    for k, b in list(sessions.items()):  # warm-up: cuDNN's algorithm search, the library's first-use timing,
        t = time.perf_counter()          # torch.compile's compile and its graphs' recording
        try:
            for _ in range(max(warmup, 3) if k == "torch_compile" else warmup):
                b.run()
        except Exception as exc:
            if k != "torch_compile":
                raise
            result.compile_error = " ".join(str(exc).split())[:300]
            log(f"  torch.compile not timed: {result.compile_error}")
            del sessions[k]
        if k == "torch_compile":
            log(f"  torch.compile and warm-up {time.perf_counter() - t:.1f} s")
    result.diff = rel_diff(reference.output(), sessions["tritonforge"].output())
    if not result.ok:
        log(f"  outputs differ: {result.diff:.3g} > {TOL.get(dtype)} ({dtype}); not timed")
        return result
    if "torch_compile" in sessions:
        result.compile_diff = rel_diff(reference.output(), sessions["torch_compile"].output())
        if not result.compile_diff <= TOL.get(dtype, 5e-3):
            result.compile_error = f"its output differs from the {'export' if base else 'eager module'}'s: " \
                                   f"{result.compile_diff:.3g}"
            log(f"  torch.compile not timed: {result.compile_error}")
            del sessions["torch_compile"]
    ort = {k: b for k, b in sessions.items() if k != "torch_compile"}
    times = {k: [] for k in sessions}
    for _ in range(runs):
        for k, b in ort.items():
            times[k].append(b.run())
    if "torch_compile" in sessions:
        # on its own, once onnxruntime's pool threads have gone idle: their spinning after each run slows the
        # host side of torch's steps when the two are interleaved
        time.sleep(0.5)
        times["torch_compile"] = [sessions["torch_compile"].run() for _ in range(runs)]
    result.ms = {k: statistics.median(v) for k, v in times.items()}
    if breakdown:
        for k, b in sessions.items():
            result.breakdown[k], named = kernel_breakdown(b)
            result.layout_kernels[k] = named.pop("layout conversion", {})
            result.kernels[k] = named
    del sessions, base, reference
    return result


def record(results: list[Result], device: str, path) -> None:
    rows = []
    for r in results:
        r.device = device
        shape = f"{r.model}/{r.exporter}"
        common = {"shape": shape, "dtype": r.dtype}
        left = "; ".join(r.left)
        rows.append({**common, "provider": "rewrite", "metric": "max_rel_diff", "unit": "", "value": f"{r.diff:.3g}",
                     "extra": f"{r.rewritten} nodes rewritten, {len(r.left)} left" + (f": {left}" if left else "")
                     + (f" | export refused: {r.export_error}" if r.export_error else "")
                     + (f" | not run: {r.error}" if r.error else "")})
        for k, ms in r.ms.items():
            rows.append({**common, "provider": k, "metric": "ms", "unit": "ms", "value": f"{ms:.3f}",
                         "extra": settings_said(r.settings.get(k))})
        if "ort" in r.ms and "tritonforge" in r.ms:
            rows.append({**common, "provider": "tritonforge", "metric": "speedup", "unit": "x",
                         "value": f"{r.speedup:.3f}"})
        if r.same_settings_speedup is not None:
            rows.append({**common, "provider": "tritonforge", "metric": "speedup_same_settings", "unit": "x",
                         "value": f"{r.same_settings_speedup:.3f}"})
        if r.compile_error or r.compile_diff == r.compile_diff:
            rows.append({**common, "provider": "torch_compile", "metric": "max_rel_diff", "unit": "",
                         "value": f"{r.compile_diff:.3g}", "extra": r.compile_error})
        if r.vs_compile is not None:
            rows.append({**common, "provider": "tritonforge", "metric": "speedup_vs_torch_compile", "unit": "x",
                         "value": f"{r.vs_compile:.3f}"})
        for k, kinds in r.breakdown.items():
            named = {**r.kernels.get(k, {}), "layout conversion": r.layout_kernels.get(k, {})}
            rows += [{**common, "provider": k, "metric": f"gpu_ms:{kind}", "unit": "ms", "value": f"{ms:.3f}",
                      "extra": "; ".join(f"{n} {t:.3f}" for n, t in named.get(kind, {}).items())}
                     for kind, ms in kinds.items()]
    if rows:
        write_rows("e2e", device, rows, path)


def settings_said(settings: dict | None) -> str:
    """One line of what ortlib.session applied and dropped ("" for ORT's default settings)."""
    if not settings:
        return ""
    applied = ",".join(f"{k}={v}" for k, v in settings["cuda_options"].items()) or "none"
    dropped = ",".join(settings["dropped"])
    return f"settings: {applied}" + (f"; dropped: {dropped}" if dropped else "")


def table(results: list[Result]) -> list[str]:
    lines = ["| model | device | exporter | dtype | as exported ms | rewritten ms | speed-up | "
             "as exported, same settings ms | speed-up, same settings | torch.compile ms | vs torch.compile | "
             "nodes rewritten | left | max rel diff |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in results:
        ms = r.ms or {}
        same, vs = r.same_settings_speedup, r.vs_compile
        best = f"{ms['ort_best']:.2f}" if "ort_best" in ms else "-"
        compiled = f"{ms['torch_compile']:.2f}" if "torch_compile" in ms else "not timed" if r.compile_error else "-"
        exported = f"{ms['ort']:.2f}" if "ort" in ms else "refused" if r.export_error else "nan"
        speedup = f"{r.speedup:.2f}x" if "ort" in ms else "-" if r.export_error else \
            "not run" if r.error else "not timed"
        lines.append(f"| {r.model} | {_device_cell(r)} | {r.exporter} | {r.dtype} | {exported} | "
                     f"{ms.get('tritonforge', float('nan')):.2f} | {speedup} | "
                     f"{best} | {f'{same:.2f}x' if same is not None else '-'} | {compiled} | "
                     f"{f'{vs:.2f}x' if vs is not None else '-'} | {r.rewritten} | {len(r.left)} | {r.diff:.2g} |")
    for r in results:
        if r.export_error:
            lines.append(f"- {r.model}/{r.exporter} {r.dtype} on {_device_cell(r)}: onnxruntime refuses the export "
                         f"({_first_line(r.export_error)}); the rewrite is checked against the module in eager torch")
        if r.error and not r.ms:
            lines.append(f"- {r.model}/{r.exporter} {r.dtype} on {_device_cell(r)}: not run: {_first_line(r.error)}")
    for r in results:
        for k, kinds in r.breakdown.items():
            top = ", ".join(f"{kind} {ms:.2f}" for kind, ms in list(kinds.items())[:6])
            lines.append(f"- {r.model}/{r.exporter} {r.dtype} {k} on {_device_cell(r)}: {top} (GPU ms per run)")
            named = ", ".join(f"{n} {ms:.2f}" for n, ms in r.layout_kernels.get(k, {}).items())
            if named:
                lines.append(f"  - layout conversions: {named}")
            for kind, by_name in r.kernels.get(k, {}).items():
                if kind in ("elementwise", "transpose / copy", "other") and by_name:
                    lines.append(f"  - {kind}: " + ", ".join(f"{n} {ms:.2f}" for n, ms in by_name.items()))
    return lines


def _device_cell(r: Result) -> str:
    return r.device.removeprefix("NVIDIA ") or "-"


def _first_line(error: str, limit: int = 360) -> str:
    """An error as the report says it: its first line, cut at `limit` characters."""
    line = next(iter(error.strip().splitlines()), "")
    return line if len(line) <= limit else line[:limit - 3] + "..."


def report_order(r: Result) -> tuple:
    """Model, then image side, dtype, exporter (as exported before ORT's optimizer, static before dynamic,
    ORT's default settings before the best), then device."""
    model, _, side = r.model.partition("@")
    name, _, best = r.exporter.partition("+")
    exporter, _, dynamic = name.partition(".")
    known = ("torchscript", "dynamo", "dynamo23", "ort", "file")
    return (model, int(side or 0), r.dtype, known.index(exporter) if exporter in known else len(known), dynamic,
            best, r.device)


def from_rows(path: Path, device: str | None = None) -> list[Result]:
    """The Results that `record` wrote into a results file (for --report), in the order they were written."""
    import csv

    out: dict[tuple, Result] = {}
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            if row["benchmark"] != "e2e" or (device and row["device"] != device):
                continue
            model, _, exporter = row["shape"].partition("/")
            r = out.setdefault((row["device"], row["shape"], row["dtype"]),
                               Result(model, exporter, row["dtype"], device=row["device"]))
            if row["metric"] == "ms":
                r.ms[row["provider"]] = float(row["value"])
            elif row["metric"] == "speedup":
                r.recorded_speedup = float(row["value"])
            elif row["metric"] in ("speedup_same_settings", "speedup_vs_torch_compile"):
                continue  # derived again from the ms rows
            elif row["metric"] == "max_rel_diff" and row["provider"] == "torch_compile":
                r.compile_diff, r.compile_error = float(row["value"]), row["extra"]
            elif row["metric"] == "max_rel_diff":
                r.diff = float(row["value"])
                counts = re.match(r"(\d+) nodes rewritten, (\d+) left", row["extra"])
                r.rewritten, r.left = int(counts.group(1)), [""] * int(counts.group(2))
                r.error = row["extra"].partition(" | not run: ")[2]
                r.export_error = row["extra"].partition(" | export refused: ")[2].partition(" | not run: ")[0]
            elif row["metric"].startswith("gpu_ms:"):
                r.breakdown.setdefault(row["provider"], {})[row["metric"][7:]] = float(row["value"])
                # "<kernel> <ms>; ..." (older rows of other kinds may hold a note instead: not kernels)
                named = {m.group(1): float(m.group(2)) for m in (re.fullmatch(r"(.+) (\d+\.\d+)", part)
                                                                 for part in (row.get("extra") or "").split("; ")) if m}
                if named:
                    if row["metric"] == "gpu_ms:layout conversion":
                        r.layout_kernels[row["provider"]] = named
                    else:
                        r.kernels.setdefault(row["provider"], {})[row["metric"][7:]] = named
    return list(out.values())


def _last_words(exc: BaseException) -> str:
    """An exception's message in one line: its last line that says something (torch.onnx's messages start with
    the whole graph and end with notes in parentheses)."""
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip() and not ln.startswith((" ", "("))]
    return (lines[-1] if lines else type(exc).__name__)[:300]


def _device(provider: str) -> str:
    if provider != "cuda":
        import platform

        return f"CPU {platform.machine()}"
    from tritonforge.runtime.cuda import CudaBackend

    return CudaBackend(0).device_name


def _layout_tag(layout: str) -> str:
    return "" if layout == "nchw" else f"+{layout}"


def run_model(m, exporter: str, dtype: str, sides: list[int], args, library: Path, work: Path, device: str,
              results_path: Path) -> list[Result]:
    """One model, exporter and dtype at every side: a static export each, or one dynamic export rewritten once.
    With --torch-compile, the module each export is made from is kept for torch.compile's column."""
    from benchmarks import e2e_models

    out, rewritten = [], {}
    depth = m.depth(args.layers).replace("/", "of")
    for side in sides:
        label = (m.name + ("_tiny" if args.tiny else "") + (f"@{side}" if side != m.side and not args.tiny else "")
                 + (f":L{depth}" if depth else ""))
        print(f"{label} {exporter}{' (dynamic axes)' if args.dynamic else ''} {dtype}", flush=True)
        t = time.perf_counter()
        best = args.settings == "best"
        names = [exporter + (".dynamic" if args.dynamic else "") + ("+best" if best else "") + _layout_tag(layout)
                 for layout in args.layouts]
        compiled = args.torch_compile and not args.dynamic
        try:
            built = (e2e_models.build(m, dtype, args.provider, args.tiny, side, args.layers)
                     if compiled or exporter in ("torchscript", "dynamo", "dynamo23") else None)
            path = e2e_models.export(m, exporter, dtype, work, args.provider, args.tiny, dynamic=args.dynamic,
                                     side=None if args.dynamic else side, layers=args.layers,
                                     built=built if exporter != "ort" else None)
        except Exception as exc:  # an export the exporter cannot make: said in a row, and on to the next
            why = _last_words(exc)
            print(f"  not exported: {why}", flush=True)
            failed = [Result(label, n, dtype, error=f"export: {why}") for n in names]
            record(failed, device, results_path)
            out += failed
            continue
        print(f"  export {time.perf_counter() - t:.1f} s", flush=True)
        free = {0: m.batch, 2: (32 if args.tiny else side) // 8, 3: (32 if args.tiny else side) // 8}
        step = (built[0], built[2], built[1], not m.transformer) if compiled and built else None
        for layout, name in zip(args.layouts, names):  # one export, each layout's rewrite timed against it
            try:
                if layout not in rewritten or not args.dynamic:
                    rewritten[layout] = rewrite(path, library, layout=layout)
            except Exception as exc:  # a rewrite refused (onnxruntime refuses the export, say): a row, and on
                why = _last_words(exc)
                print(f"  not rewritten: {why}", flush=True)
                out.append(Result(label, name, dtype, error=f"rewrite: {why}"))
                record(out[-1:], device, results_path)
                continue
            r = measure(path, dtype, library, args.provider, args.runs, args.warmup, args.breakdown,
                        Result(label, name, dtype), rewritten=rewritten[layout], free=free, best=best,
                        torch_step=step)
            out.append(r)
            record([r], device, results_path)
            print("  " + table([r])[2], flush=True)
        del built, step
        if args.provider == "cuda" and compiled:
            import torch

            torch.cuda.empty_cache()
        if not args.dynamic and not args.keep and not (exporter == "torchscript" and dtype == "fp32"
                                                       and "ort" in args.exporters):
            shutil.rmtree(path.parent)  # disks are finite: an SDXL UNet is 10 GB in fp32
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    what = ap.add_mutually_exclusive_group(required=True)
    what.add_argument("--model", help="comma list of benchmarks/e2e_models.py models, or all")
    what.add_argument("--onnx", type=Path, help="an ONNX model of your own to time as is and rewritten")
    what.add_argument("--report", action="store_true", help="print the table of the e2e rows of --results")
    what.add_argument("--list-models", action="store_true", help="print the models --model knows, one per line")
    ap.add_argument("--exporters", default="torchscript,dynamo,ort", help="comma list of torchscript, dynamo, ort")
    ap.add_argument("--dtypes", default="fp16,fp32")
    ap.add_argument("--library", type=Path, default=None, help="default: what ortlib.register finds")
    ap.add_argument("--work", type=Path, default=None, help="where exports go (default: a temporary directory)")
    ap.add_argument("--keep", action="store_true", help="keep the exports and their rewrites in --work")
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--provider", choices=("cuda", "cpu"), default="cuda",
                    help="cpu: a smoke run on the library's CPU ops (times mean nothing there)")
    ap.add_argument("--tiny", action="store_true", help="tiny configs of the same classes (a smoke run)")
    ap.add_argument("--sides", default="", help="comma list of image sides in pixels (default: each model's own)")
    ap.add_argument("--dynamic", action="store_true",
                    help="export with dynamic batch, height and width, once, and run it at every side")
    ap.add_argument("--settings", choices=("default", "best"), default="default",
                    help="best: also the export under tritonforge_ort.session's settings, and the rewrite under them")
    ap.add_argument("--layout", default="nchw",
                    help="comma list of the rewrite's layouts, nchw and nhwc (GroupNorms channels-last, for "
                         "--settings best); each is timed against the same export")
    ap.add_argument("--breakdown", action="store_true", help="GPU time per kind of kernel (needs torch)")
    ap.add_argument("--torch-compile", action="store_true",
                    help="also the same module under torch.compile(mode='reduce-overhead'), same weights and inputs")
    ap.add_argument("--layers", default="",
                    help="build N blocks instead of the config's (Flux: N,M double and single blocks), where the "
                         "export or the GPU's memory demands it")
    ap.add_argument("--results", type=Path, default=None, help="default: benchmarks/results/results.csv")
    args = ap.parse_args(argv)
    args.layouts = [v.strip() for v in args.layout.split(",") if v.strip()]
    try:
        args.layers = tuple(int(v) for v in args.layers.split(",") if v.strip()) or None
    except ValueError:
        raise SystemExit(f"error: --layers: '{args.layers}' is not a comma list of block counts") from None
    bad = [v for v in args.layouts if v not in ("nchw", "nhwc")]
    if bad or not args.layouts:
        raise SystemExit(f"error: --layout: '{args.layout}' is not a comma list of nchw, nhwc")
    if args.list_models:
        from benchmarks import e2e_models

        print("\n".join(e2e_models.MODELS))
        return 0
    if args.report:
        rows = from_rows(args.results or ROOT / "benchmarks" / "results" / "results.csv")
        print("\n".join(table(sorted(rows, key=report_order))))
        return 0
    library = ortlib.library_path(args.library)
    results: list[Result] = []
    device = _device(args.provider)
    results_path = args.results or ROOT / "benchmarks" / "results" / "results.csv"
    if args.onnx:
        dtype = "fp16" if "float16" in _session(args.onnx, "cpu", None).get_inputs()[0].type else "fp32"
        best = args.settings == "best"
        for layout in args.layouts:
            name = "file" + ("+best" if best else "") + _layout_tag(layout)
            results.append(measure(args.onnx, dtype, library, args.provider, args.runs, args.warmup,
                                   args.breakdown, Result(args.onnx.stem, name, dtype), best=best, layout=layout))
    else:
        from benchmarks import e2e_models

        try:
            chosen = e2e_models.models(args.model)
        except KeyError as exc:
            raise SystemExit(f"error: --model: {exc.args[0]}") from None
        exporters = [e.strip() for e in args.exporters.split(",") if e.strip()]
        bad = [e for e in exporters if e not in e2e_models.EXPORTERS]
        if bad:
            raise SystemExit(f"error: --exporters: unknown {', '.join(bad)} (one of {', '.join(e2e_models.EXPORTERS)})")
        work = args.work or Path(tempfile.mkdtemp(prefix="tritonforge-e2e-"))
        work.mkdir(parents=True, exist_ok=True)
        try:
            sides = [int(v) for v in args.sides.split(",") if v.strip()]
        except ValueError:
            raise SystemExit(f"error: --sides: '{args.sides}' is not a comma list of pixel counts") from None
        try:
            for m in chosen:
                for dtype in [d.strip() for d in args.dtypes.split(",")]:
                    for exporter in exporters:
                        results += run_model(m, exporter, dtype, sides or [m.side], args, library, work, device,
                                             results_path)
                if not args.keep:
                    for d in work.glob(f"{m.name}*"):
                        shutil.rmtree(d)
        finally:
            if not args.keep and args.work is None:
                shutil.rmtree(work, ignore_errors=True)
    if args.onnx:
        record(results, device, results_path)
    print("\n".join(table(results)))
    return 0 if all(r.ok for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
