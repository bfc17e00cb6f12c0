"""End to end on the models users have: an export as it is against the same export rewritten into the
custom-op library's ops, in onnxruntime-gpu's CUDA EP, and against torch.compile of the same module, each side in
a process of its own.

    python benchmarks/e2e_bench.py --model sd15_vae_decoder --library dist/full/cuda/multi/libtritonforge_ort.so
        [--exporters torchscript,dynamo,dynamo23,ort] [--dtypes fp16,fp32,bf16] [--sides 512,768] [--dynamic]
        [--layers N[,M]] [--runs 20] [--breakdown] [--torch-compile [--compile-modes ...] [--compile-limit S]]
        [--first-result] [--resize SIDE]
    python benchmarks/e2e_bench.py --onnx my_export.onnx     # an export of your own (no torch needed)
    python benchmarks/e2e_bench.py --report | --headline     # the tables of the rows

For each model (benchmarks/e2e_models.py: SD 1.5 and SDXL VAE decoders and UNets, SD3, SD3.5, Flux and
PixArt-Sigma transformers, from their published configs, random weights), exporter (torch.onnx with
`dynamo=False` at opset 17, with `dynamo=True` at its default opset and at 23 (`dynamo23`); `ort`: ORT's
transformers optimizer on the TorchScript export) and dtype, this process exports and rewrites
(runtime/ortlib/rewrite), draws the inputs, saves the module's weights, and starts each side in a process of its
own (benchmarks/e2e_sides.py), one after the other, never two at once:
- onnxruntime's side: the rewrite's first result from a fresh process (the library times its candidates on first
  use), its choices written as a tune file; then the export and the rewrite bound to device memory (IOBinding),
  outputs compared (max |a - b| over max |a|, against 2e-2 for fp16 and 5e-3 for fp32), warmed up to a steady
  state and timed interleaved, one run of each at a time, medians kept. `--first-result` starts it once more with
  the tune file (the first result a shipped or earlier-made tune file gives).
- `--torch-compile`: the same module, weights (loaded from the saved file, as a user's program loads a checkpoint)
  and inputs under `torch.compile` (channels-last for convolution models, `cudnn.benchmark` on) in each of
  `--compile-modes` (default reduce-overhead and max-autotune), each with an empty compile cache: its first result
  from a fresh process, its output checked against the export's, then timed once steady (wall clock around a
  synchronized run, and CUDA events). A mode whose first result has not come in `--compile-limit` seconds is
  stopped and its row says "did not compile in N s". `--first-result` starts reduce-overhead once more on the
  cache it filled (a warm cache's first result).
- `--resize SIDE`: one more export with dynamic batch, height and width (as Optimum exports), rewritten; its first
  run at SIDE after one at the model's side, in a fresh process; and torch.compile's first run at SIDE after it is
  steady at the model's side (it compiles again; the dynamic rewrite does not).
`--sides` runs other image sides (a static export for each); `--dynamic` exports once with symbolic batch, height
and width and runs that one file, rewritten once, at every side. `--settings best` times the export and the
rewrite under the settings `tritonforge_ort.session` gives (`ort_best`: NHWC, conv-bias fusion, and a CUDA graph
where every shape is fixed); its rows' exporter ends in `+best`. `--layout nhwc` rewrites the GroupNorms
channels-last (rows `+nhwc`; `--layout nchw,nhwc` times both against one export). `--breakdown` adds each ORT
session's GPU time per kind of kernel (torch.profiler's CUPTI trace), which says where a speed-up stops, and names
the layout conversions. `--layers` builds fewer blocks than the config has (a transformer's `num_layers`, then
Flux's `num_single_layers`), where the export or the GPU's memory demands it; the model's name then says the depth
(`flux_dev:L4of19+8of38`). Rows go to benchmarks/results/results.csv (benchmark `e2e`; written, read back and tabled by
benchmarks/e2e_rows.py); the table printed last is the summary.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from benchmarks.e2e_rows import (  # noqa: E402,F401  (HEADLINE, OWN_PROCESS: the README's table and its rows)
    FP8_MIN_COSINE,
    HEADLINE,
    OWN_PROCESS,
    TORCH,
    Result,
    from_rows,
    headline,
    record,
    report_order,
    table,
)
from benchmarks.e2e_sides import (  # noqa: E402,F401  (KINDS, kernel_name: the report's names for kernels)
    KINDS,
    TOL,
    cosine,
    kernel_name,
    model_inputs,
    random_feeds,
    rel_diff,
    settings_said,
)

SIDES = ROOT / "benchmarks" / "e2e_sides.py"
MODES = tuple(TORCH)  # --compile-modes' choices
PRECISION: dict = {}  # --precision fp8's options for every rewrite of the run (rewrite_file's precision, ...)


def rewrite(path: Path, library: Path, log=print, layout: str = "nchw", choices: str = "tables") -> tuple[Path, object]:
    """`path` rewritten beside it: (the rewrite's path, its report). `choices`: "tables" (the shipped tables decide
    between the library's nodes and ORT's) or "measured" (the rewrite times them on this GPU: measure="on"); the
    report's `seconds` is how long the rewrite took."""
    from tritonforge.runtime.ortlib.rewrite import rewrite_file

    tag = _layout_tag(layout) + _choices_tag(choices) + _precision_tag()
    out = path.with_name(path.name.removesuffix(".onnx") + tag.replace("+", ".") + ".tf.onnx")
    t = time.perf_counter()
    report = rewrite_file(path, out, library, layout=layout, measure="on" if choices == "measured" else "off",
                          **PRECISION)
    report.seconds = time.perf_counter() - t
    log(f"  rewrite ({report.seconds:.1f} s): " + "; ".join(report.lines()[:3]) +
        (f"; {len(report.left)} left" if report.left else "") + (f"; timed: {report.measured}" if report.measured
                                                                  else ""))
    return out, report


def _result(model: str, exporter: str, dtype: str, report) -> Result:
    """A row's Result for a rewrite: how long it took, and how many choices its timing (if any) changed."""
    return Result(model, exporter, dtype, rewrite_s=report.seconds, changed=report.measured_changed)


@dataclass
class TorchSpec:
    """How a torch side builds the module the export was made from: e2e_sides.py's torch arguments (a model of
    e2e_models.py, or --torch-module's function) and the weights file this process saved (None: the function makes
    them itself)."""
    argv: list
    weights: Path | None
    modes: tuple = MODES
    limit: float = 600.0
    resize_feeds: Path | None = None

    @property
    def weights_argv(self) -> list:
        return ["--weights", self.weights] if self.weights else []


def side(argv: list, out: Path, log=print, timeout: float = 3600.0, env: dict | None = None,
         first_within: float | None = None) -> tuple[dict, bool]:
    """Start e2e_sides.py with `argv` in a process of its own (its own session, so that a stop ends its compile
    workers too), wait for it and return (what it wrote to `out`, whether it was stopped). It is stopped after
    `timeout` s, or after `first_within` s if it has not written its first result by then."""
    out.unlink(missing_ok=True)
    said = out.with_suffix(".log")
    cmd = [sys.executable, str(SIDES), *[str(a) for a in argv], "--out", str(out), "--t0", repr(time.time())]
    start = time.perf_counter()
    with open(said, "w") as sink:
        proc = subprocess.Popen(cmd, cwd=ROOT, env={**os.environ, **(env or {})}, stdout=sink,
                                stderr=subprocess.STDOUT, start_new_session=True)
        stopped = False
        while proc.poll() is None:
            waited = time.perf_counter() - start
            late = first_within is not None and waited > first_within and "first_result_s" not in _read(out)
            if late or waited > timeout:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                stopped = True
                break
            time.sleep(0.2)
    got = _read(out)
    if proc.returncode and not stopped:
        tail = [ln for ln in said.read_text(errors="replace").splitlines() if ln.strip()]
        got.setdefault("error", (tail[-1] if tail else f"exit {proc.returncode}")[:300])
        log("  " + "\n  ".join(tail[-6:]))
    return got, stopped


def _read(out: Path) -> dict:
    try:
        return json.loads(out.read_text())
    except (OSError, ValueError):  # not written yet (a side replaces it whole, never half)
        return {}


def measure(path: Path | None, dtype: str, library: Path, provider: str, runs: int, warmup: int, breakdown: bool,
            result: Result, log=print, rewritten: tuple | None = None, free: dict | None = None, best: bool = False,
            layout: str = "nchw", torch: TorchSpec | None = None, first_result: bool = False,
            resize: tuple | None = None, save=lambda: None) -> Result:
    """Rewrite `path` (or take `rewritten`, rewrite()'s pair), then run the sides (module docstring) on the inputs
    `free` sizes; fills and returns `result`. `best`: the export and the rewrite under ortlib.session's settings (a
    CUDA graph where every shape is fixed). `resize`: (the dynamic export's rewrite, its feeds at the model's side,
    its feeds at the other side, "512->768") for the first run after a change of resolution. An export onnxruntime
    refuses (SD3's bfloat16 Einsum) is checked against the module run eagerly instead, and timed against
    torch.compile alone. `save()` runs after each side, so a run stopped part way keeps what it measured."""
    out, report = rewritten or rewrite(path, library, log, layout)
    result.rewritten = sum(report.rewritten.values())
    result.left = list(report.left)
    work = Path(tempfile.mkdtemp(prefix="sides-", dir=out.parent))
    try:
        feeds = work / "feeds.npz"
        np.savez(feeds, **random_feeds(out, free=free))
        common = ["--feeds", feeds, "--dtype", dtype, "--runs", runs, "--warmup", warmup]
        ort_args = ["ort", *common, "--rewrite", out, "--library", library, "--provider", provider,
                    "--tune-out", work / "tuned.tune", "--save-outputs", work,
                    *(["--export", path] if path else []), *(["--best"] if best else []),
                    *(["--graph"] if best and _fixed_shapes(out) else []), *(["--breakdown"] if breakdown else []),
                    *(["--min-cosine", FP8_MIN_COSINE] if PRECISION else [])]
        got, _ = side(ort_args, work / "ort.json", log)
        _take_ort(result, got, "tritonforge")
        if result.error:
            log(f"  not run: {result.error}")
            return result
        save()
        if first_result and "tuned_choices" in got:
            tuned, _ = side(["ort", *common, "--rewrite", out, "--library", library, "--provider", provider,
                             "--first-only"], work / "tuned.json", log,
                            env={"TRITONFORGE_ORT_TUNE_FILE": str(work / "tuned.tune")})
            if "first_result_s" in tuned:
                result.first_s["tritonforge+tuned"] = tuned["first_result_s"]
                save()
        if resize:
            dyn, at_side, at_other, result.resize = resize
            np.savez(work / "resize_from.npz", **at_side)
            np.savez(work / "resize_to.npz", **at_other)
            if torch is not None:
                torch.resize_feeds = work / "resize_to.npz"  # torch.compile's first run at the other side too
            moved, _ = side(["ort", "--feeds", work / "resize_from.npz", "--resize-feeds", work / "resize_to.npz",
                             "--dtype", dtype, "--rewrite", dyn, "--library", library, "--provider", provider,
                             "--first-only"], work / "resize.json", log)
            if "resize_first_result_s" in moved:
                result.resize_s["tritonforge"] = moved["resize_first_result_s"]
                save()
        if torch is not None:
            _torch_sides(result, torch, work, common, provider, log, first_result, save)
        if not result.ok and "+fp8" in result.exporter:
            log(f"  outputs differ: cosine {result.cosine} < {FP8_MIN_COSINE} (fp8); not timed")
        elif not result.ok:
            log(f"  outputs differ: {result.diff:.3g} > {TOL.get(dtype)} ({dtype}); not timed")
        return result
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _fixed_shapes(path: Path) -> bool:
    return all(isinstance(d, int) for _, _, dims in model_inputs(path) for d in dims)


def _take_ort(result: Result, got: dict, first: str) -> None:
    """What onnxruntime's side wrote, into `result`."""
    if "first_result_s" in got:
        result.first_s[first] = got["first_result_s"]
    result.ms.update(got.get("ms", {}))
    result.settings.update(got.get("settings", {}))
    result.diff = got.get("max_rel_diff", float("nan"))
    result.cosine = got.get("cosine", result.cosine)
    result.export_error = got.get("export_error", result.export_error)
    result.error = got.get("error", "") if "ms" not in got else ""
    if "resize_first_result_s" in got:
        result.resize_s["tritonforge"] = got["resize_first_result_s"]
    for k, b in got.get("breakdown", {}).items():
        result.breakdown[k] = b["kinds"]
        named = dict(b["named"])
        result.layout_kernels[k] = named.pop("layout conversion", {})
        result.kernels[k] = named


def _torch_sides(result: Result, spec: TorchSpec, work: Path, common: list, provider: str, log, first_result,
                 save) -> None:
    """Each torch.compile mode in a process of its own, from an empty compile cache (module docstring); `save()`
    after each."""
    reference = work / "export.npy"
    if not reference.is_file():  # onnxruntime refused the export: the module run eagerly is the reference
        side(["torch", *common, *spec.argv, *spec.weights_argv, "--device", provider,
              "--eager-out", work / "eager.npy"], work / "eager.json", log)
        reference = work / "eager.npy"
        if not reference.is_file():
            result.error = "the eager module's output was not made"
            return
        expected, got = np.load(reference), np.load(work / "rewrite.npy")
        result.diff, result.cosine = rel_diff(expected, got), cosine(expected, got)
        if not result.ok:
            result.ms.pop("tritonforge", None)
            return
    for mode in spec.modes:
        name, cache = TORCH[mode], work / f"compile-cache-{mode}"
        env = {"TORCHINDUCTOR_CACHE_DIR": str(cache), "TRITON_CACHE_DIR": str(cache / "triton")}
        argv = ["torch", *common, *spec.argv, *spec.weights_argv, "--device", provider, *_mode_argv(mode),
                "--reference", reference, *(["--resize-feeds", spec.resize_feeds] if spec.resize_feeds and
                                            mode == "reduce-overhead" else [])]
        t = time.perf_counter()
        got, stopped = side(argv, work / f"{name}.json", log, env=env, first_within=spec.limit)
        if "first_result_s" not in got:
            result.compile_error[name] = f"did not compile in {spec.limit:.0f} s" if stopped else \
                got.get("error", "no first result")
            log(f"  {name}: {result.compile_error[name]}")
            save()
            continue
        result.first_s[name] = got["first_result_s"]
        if got.get("max_rel_diff") is not None:
            result.compile_diff[name] = got["max_rel_diff"]
        if got.get("cosine") is not None:
            result.compile_cosine[name] = got["cosine"]
        if "ms" in got:
            result.ms[name] = got["ms"]
            if got.get("ms_events") is not None:
                result.ms_events[name] = got["ms_events"]
        else:
            result.compile_error[name] = got.get("error") or ("stopped while timed" if stopped else "not timed")
        if "resize_first_result_s" in got:
            result.resize_s[name] = got["resize_first_result_s"]
        log(f"  {name}: first result {got['first_result_s']:.1f} s, {got.get('ms', float('nan')):.2f} ms "
            f"({time.perf_counter() - t:.0f} s)")
        if first_result and mode == "reduce-overhead":
            warm, _ = side(["torch", *common, *spec.argv, *spec.weights_argv, "--device", provider, "--mode", mode,
                            "--first-only"], work / "warm.json", log, env=env, first_within=spec.limit)
            if "first_result_s" in warm:
                result.first_s[f"{name}+warm"] = warm["first_result_s"]
        save()


def _mode_argv(mode: str) -> list:
    """e2e_sides.py's arguments for one of MODES: torchao's fp8 is quantized, then compiled as the default column is,
    and held to the fp8 rewrite's cosine bound instead of the dtype's tolerance."""
    if mode == "torchao-fp8":
        return ["--mode", "reduce-overhead", "--quantize", "torchao-fp8-row", "--min-cosine", FP8_MIN_COSINE]
    return ["--mode", mode]


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


def _choices_tag(choices: str, run: list | tuple = ()) -> str:
    """The rows' tag for what decided the rewrite's choices: "+measured"; "+tables" where the run times measured
    choices too (the pair is one run's, and never replaces the rows the tables wrote in another run); else none."""
    if choices == "tables":
        return "+tables" if "measured" in run else ""
    return f"+{choices}"


def _precision_tag() -> str:
    return f"+{PRECISION['precision']}" if PRECISION else ""


# ---- models -----------------------------------------------------------------------------------------------------

def input_shapes(m, dtype: str, tiny: bool, side: int, layers: tuple | None) -> dict[str, tuple]:
    """{input name: shape} of the model's step at image side `side` (built on the meta device: no weights)."""
    from benchmarks import e2e_models

    _, inputs, names = e2e_models.build(m, dtype, "meta", tiny, side, layers)
    return {n: tuple(x.shape) for n, x in zip(names, inputs)}


def resized(m, exporter: str, dtype: str, args, library: Path, work: Path, built, layout: str) -> tuple:
    """--resize's part of measure(): the dynamic-axes export rewritten, and its feeds at the model's side and at
    args.resize, drawn as random_feeds draws them."""
    from benchmarks import e2e_models

    dyn = e2e_models.export(m, exporter, dtype, work, args.provider, args.tiny, dynamic=True, layers=args.layers,
                            built=built)
    out, _ = rewrite(dyn, library, layout=layout)
    feeds = []
    for at in (m.side, args.resize):
        shapes = input_shapes(m, dtype, args.tiny, at, args.layers)
        feeds.append(random_feeds(out, seed=1, shapes=shapes))
    return out, feeds[0], feeds[1], f"{m.side}->{args.resize}"


def run_model(m, exporter: str, dtype: str, sides: list[int], args, library: Path, work: Path, device: str,
              results_path: Path) -> list[Result]:
    """One model, exporter and dtype at every side: a static export each, or one dynamic export rewritten once.
    With --torch-compile, the module each export is made from is saved for the torch sides."""
    from benchmarks import e2e_models

    out, rewritten = [], {}
    depth = m.depth(args.layers).replace("/", "of")
    for side_px in sides:
        label = (m.name + ("_tiny" if args.tiny else "") + (f"@{side_px}" if side_px != m.side and not args.tiny
                                                              else "") + (f":L{depth}" if depth else ""))
        print(f"{label} {exporter}{' (dynamic axes)' if args.dynamic else ''} {dtype}", flush=True)
        t = time.perf_counter()
        best = args.settings == "best"
        variants = [(layout, choices) for layout in args.layouts for choices in args.choices]
        names = [exporter + (".dynamic" if args.dynamic else "") + ("+best" if best else "") + _layout_tag(layout)
                 + _choices_tag(choices, args.choices) + _precision_tag() for layout, choices in variants]
        compiled = args.torch_compile and not args.dynamic
        spec = None
        try:
            built = (e2e_models.build(m, dtype, args.provider, args.tiny, side_px, args.layers)
                     if compiled or exporter in ("torchscript", "dynamo", "dynamo23") else None)
            path = e2e_models.export(m, exporter, dtype, work, args.provider, args.tiny, dynamic=args.dynamic,
                                     side=None if args.dynamic else side_px, layers=args.layers,
                                     built=built if exporter != "ort" else None)
            if compiled:
                weights = e2e_models.save_weights(built[0], path.with_name(path.stem + ".weights.pt"))
                spec = TorchSpec(["--model", m.name, *(["--tiny"] if args.tiny else []), "--side", side_px,
                                  *(["--layers", ",".join(map(str, args.layers))] if args.layers else [])], weights,
                                 tuple(args.compile_modes), args.compile_limit)
        except Exception as exc:  # an export the exporter cannot make: said in a row, and on to the next
            why = _last_words(exc)
            print(f"  not exported: {why}", flush=True)
            failed = [Result(label, n, dtype, error=f"export: {why}") for n in names]
            record(failed, device, results_path)
            out += failed
            continue
        print(f"  export {time.perf_counter() - t:.1f} s", flush=True)
        lat = (32 if args.tiny else side_px) // 8
        free = {0: m.batch, 2: lat, 3: lat}
        for (layout, choices), name in zip(variants, names):  # one export, each rewrite timed against it
            try:
                if (layout, choices) not in rewritten or not args.dynamic:
                    rewritten[layout, choices] = rewrite(path, library, layout=layout, choices=choices)
                resize = resized(m, exporter, dtype, args, library, work, built, layout) if args.resize else None
            except Exception as exc:  # a rewrite refused (onnxruntime refuses the export, say): a row, and on
                why = _last_words(exc)
                print(f"  not rewritten: {why}", flush=True)
                out.append(Result(label, name, dtype, error=f"rewrite: {why}"))
                record(out[-1:], device, results_path)
                continue
            first = (layout, choices) == variants[0]
            if first:
                built = _free(built, args.provider)  # the sides need the GPU's memory
            r = _result(label, name, dtype, rewritten[layout, choices][1])
            measure(path, dtype, library, args.provider, args.runs, args.warmup, args.breakdown, r,
                    rewritten=rewritten[layout, choices], free=free, best=best, layout=layout,
                    torch=spec if first else None, first_result=args.first_result, resize=resize,
                    save=lambda r=r: record([r], device, results_path))
            out.append(r)
            record([r], device, results_path)
            print("  " + table([r])[2], flush=True)
        built = _free(built, args.provider)
        if not args.dynamic and not args.keep and not (exporter == "torchscript" and dtype == "fp32"
                                                       and "ort" in args.exporters):
            shutil.rmtree(path.parent)  # disks are finite: an SDXL UNet is 10 GB in fp32
    return out


def _free(built, provider: str):
    """Drop this process's module and give its GPU memory back."""
    if built is not None and provider == "cuda":
        import torch

        del built
        torch.cuda.empty_cache()
    return None


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    what = ap.add_mutually_exclusive_group(required=True)
    what.add_argument("--model", help="comma list of benchmarks/e2e_models.py models, or all")
    what.add_argument("--onnx", type=Path, help="an ONNX model of your own to time as is and rewritten")
    what.add_argument("--report", action="store_true", help="print the table of the e2e rows of --results")
    what.add_argument("--headline", action="store_true", help="print the README's table of the e2e rows")
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
                    help="best: the export and the rewrite under tritonforge_ort.session's settings")
    ap.add_argument("--layout", default="nchw",
                    help="comma list of the rewrite's layouts, nchw and nhwc (GroupNorms channels-last, for "
                         "--settings best); each is timed against the same export")
    ap.add_argument("--choices", default="tables",
                    help="comma list: tables (the shipped tables decide between the library's nodes and ORT's), "
                         "measured (the rewrite times them on this GPU, tritonforge-rewrite --measure on; rows end in "
                         "+measured, and the tables' in +tables when both run); each is timed against the same export, "
                         "torch.compile once")
    ap.add_argument("--precision", choices=("fp8",), default=None,
                    help="rewrite with tritonforge-rewrite --precision fp8 (its rows' exporter ends in +fp8; the "
                         f"rewrite is held to cosine >= {FP8_MIN_COSINE} against the export before it is timed)")
    ap.add_argument("--fp8-min-features", type=int, default=None, help="with --precision fp8: the rewrite's option")
    ap.add_argument("--breakdown", action="store_true", help="GPU time per kind of kernel (needs torch)")
    ap.add_argument("--torch-compile", action="store_true",
                    help="also the same module under torch.compile, same weights and inputs, in a process of its own")
    ap.add_argument("--torch-module", default=None,
                    help="with --onnx: MODULE:FUNCTION returning (torch module, input names) for (dtype, device, "
                         "None), the module the file was exported from, for --torch-compile")
    ap.add_argument("--compile-modes", default="reduce-overhead,max-autotune",
                    help=f"the torch sides of --torch-compile, a comma list of {', '.join(MODES)} (torchao-fp8: "
                         "torchao's fp8 row-wise recipe, then torch.compile; needs torchao)")
    ap.add_argument("--compile-limit", type=float, default=600.0,
                    help="seconds a torch.compile mode may take to its first result before it is stopped")
    ap.add_argument("--first-result", action="store_true",
                    help="also the first result with the tune file the first run wrote, and torch.compile's from "
                         "the cache its first run filled")
    ap.add_argument("--resize", type=int, default=0,
                    help="an image side to change to: the dynamic-axes rewrite's and torch.compile's first run there")
    ap.add_argument("--layers", default="",
                    help="build N blocks instead of the config's (Flux: N,M double and single blocks), where the "
                         "export or the GPU's memory demands it")
    ap.add_argument("--results", type=Path, default=None, help="default: benchmarks/results/results.csv")
    args = ap.parse_args(argv)
    args.layouts = [v.strip() for v in args.layout.split(",") if v.strip()]
    args.choices = [v.strip() for v in args.choices.split(",") if v.strip()]
    if not args.choices or set(args.choices) - {"tables", "measured"}:
        raise SystemExit(f"error: --choices: '{','.join(args.choices)}' is not a comma list of tables and measured")
    if "measured" in args.choices and args.provider != "cuda":
        raise SystemExit("error: --choices measured times the rewrite's choices on the GPU the sides run on: it needs "
                         "--provider cuda")
    if args.fp8_min_features is not None and not args.precision:
        ap.error("--fp8-min-features goes with --precision fp8")
    if args.precision:
        PRECISION.update(precision=args.precision, fp8_min_features=args.fp8_min_features)
    args.compile_modes = [v.strip() for v in args.compile_modes.split(",") if v.strip()]
    try:
        args.layers = tuple(int(v) for v in args.layers.split(",") if v.strip()) or None
    except ValueError:
        raise SystemExit(f"error: --layers: '{args.layers}' is not a comma list of block counts") from None
    bad = [v for v in args.layouts if v not in ("nchw", "nhwc")]
    if bad or not args.layouts:
        raise SystemExit(f"error: --layout: '{args.layout}' is not a comma list of nchw, nhwc")
    bad = [v for v in args.compile_modes if v not in MODES]
    if bad or not args.compile_modes:
        raise SystemExit(f"error: --compile-modes: '{','.join(args.compile_modes)}' is not a comma list of "
                         f"{', '.join(MODES)}")
    if args.resize and (args.dynamic or args.tiny or args.onnx):
        raise SystemExit("error: --resize times a dynamic export of a --model beside its static one, at the model's "
                         "own side (not with --dynamic, --tiny or --onnx)")
    if args.onnx and args.torch_compile and not args.torch_module:
        raise SystemExit("error: --onnx with --torch-compile needs --torch-module (the module the file came from)")
    if args.list_models:
        from benchmarks import e2e_models

        print("\n".join(e2e_models.MODELS))
        return 0
    results_path = args.results or ROOT / "benchmarks" / "results" / "results.csv"
    if args.report or args.headline:
        rows = from_rows(results_path)
        print("\n".join(table(sorted(rows, key=report_order)) if args.report else headline(rows)))
        return 0
    from tritonforge.runtime import ortlib

    library = ortlib.library_path(args.library)
    results: list[Result] = []
    device = _device(args.provider)
    if args.onnx:
        try:
            dtype = "fp16" if any(k == "tensor(float16)" for _, k, _ in model_inputs(args.onnx)) else "fp32"
        except Exception as exc:  # onnx's own errors share no base class
            raise SystemExit(f"error: --onnx {args.onnx}: {exc}") from None
        best = args.settings == "best"
        spec = TorchSpec(["--factory", args.torch_module], None, tuple(args.compile_modes), args.compile_limit) \
            if args.torch_compile else None
        for layout in args.layouts:
            for choices in args.choices:
                name = "file" + ("+best" if best else "") + _layout_tag(layout) + \
                    _choices_tag(choices, args.choices) + _precision_tag()
                made = rewrite(args.onnx, library, layout=layout, choices=choices)
                r = _result(args.onnx.stem, name, dtype, made[1])
                measure(args.onnx, dtype, library, args.provider, args.runs, args.warmup, args.breakdown, r,
                        rewritten=made, best=best, layout=layout, torch=spec, first_result=args.first_result,
                        save=lambda r=r: record([r], device, results_path))
                results.append(r)
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
