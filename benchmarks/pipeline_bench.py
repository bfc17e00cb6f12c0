"""The whole pipeline, as users run it: seconds per image and seconds from a fresh process to the first image, for an
optimum-onnx export run by optimum's ORTDiffusionPipeline as exported and rewritten (tritonforge-rewrite DIR), and for
diffusers' own pipeline with torch.compile on its denoiser; each side in a process of its own.

    python benchmarks/pipeline_bench.py --model sd15|sdxl|sd3|flux [--steps N] [--side PX] [--layers N] [--compile MODE]
    python benchmarks/pipeline_bench.py --model sd15 --tiny --provider cpu --steps 2 --compile none   # a smoke run
    python benchmarks/pipeline_bench.py --headline      # the README's table of the rows

This process builds the pipeline from its published configs with random weights (pipeline_models.py), saves it,
exports it with `optimum-cli export onnx --task text-to-image` (fp16 on the GPU, fp32 on the CPU) and rewrites the
folder. Each side then starts fresh (`--side-of`), makes its pipeline (optimum's with its own sessions; optimum's with
tritonforge_ort.pipeline_sessions; diffusers' with `torch.compile(denoiser, mode=...)` on its UNet or transformer,
`cudnn.benchmark` on), draws the same prompt, seed, steps, guidance and resolution (by default the model's: SD 1.5
512² and 30 steps, SDXL 1024² and 30, SD3 1024² and 28, Flux 1024² and 28; `--layers` cuts SD3's or Flux's depth,
named in the row), and records the time to its first image (the process's start to the image in host memory: imports,
sessions or compile, and one whole generation) and the median seconds per image of `--runs` more. The rewritten
pipeline's image is checked against the export's first (max |a - b| of pixels in [0, 1]), and diffusers' beside them;
the folder's rewrite is timed once, before any side (a step done once per export, as the export itself; not in the
first image). The first image is timed once more from what the first process left, as a user's second start finds
it: the rewritten side with the library's choices saved as its tune file (`ortlib.save_choices`; provider
`tritonforge+tuned`), diffusers' with torch.compile's cache warm (`torch_compile+warm`; the first torch side starts
from an empty cache in --work). Rows: benchmark `pipeline`, shape `<model>@<side> <steps> steps`.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks import pipeline_models  # noqa: E402

PROMPT = "a photograph of an astronaut riding a horse"
SIDES = {"export": "optimum (the export)", "tritonforge": "optimum (rewritten)", "torch": "diffusers",
         "tritonforge+tuned": "optimum (rewritten), the first process's choices as its tune file",
         "torch+warm": "diffusers, torch.compile's cache as the first process left it"}
# side in pixels, steps, guidance: each model's own (Flux's guidance is the distilled embedding, one pass a step)
DEFAULTS = {"sd15": (512, 30, 7.5), "sdxl": (1024, 30, 7.5), "sd3": (1024, 28, 7.0), "flux": (1024, 28, 3.5)}
TOL = {"fp16": 2e-2, "fp32": 1e-3}  # pixels in [0, 1] after the whole denoising loop


def _generate(pipe, args, torch):
    out = pipe(PROMPT, num_inference_steps=args.steps, height=args.side, width=args.side, guidance_scale=args.guidance,
               output_type="np", generator=torch.Generator().manual_seed(0))
    return out.images[0]


def side_main(args) -> int:
    """One side in this fresh process (--side-of): its pipeline made, the first image timed from the process's
    start (--t0), then --runs more; JSON and the first image into --out."""
    import numpy as np
    import torch

    cuda = args.provider == "cuda"
    if args.side_of == "torch":
        from diffusers import DiffusionPipeline

        imported = time.time()
        torch.backends.cudnn.benchmark = True
        pipe = DiffusionPipeline.from_pretrained(args.folder, torch_dtype=torch.float16 if cuda else None)
        pipe = pipe.to("cuda" if cuda else "cpu")
        pipe.set_progress_bar_config(disable=True)
        if args.compile != "none":
            denoiser = "transformer" if getattr(pipe, "transformer", None) is not None else "unet"
            setattr(pipe, denoiser, torch.compile(getattr(pipe, denoiser), mode=args.compile))
    else:
        from optimum.onnxruntime import ORTDiffusionPipeline

        imported = time.time()
        provider = "CUDAExecutionProvider" if cuda else "CPUExecutionProvider"
        sessions = {}
        if args.side_of == "tritonforge":
            from tritonforge.runtime import ortlib

            sessions = ortlib.pipeline_sessions(args.folder, args.library, providers=[provider])
        pipe = ORTDiffusionPipeline.from_pretrained(args.folder, provider=provider, **sessions)
        pipe.set_progress_bar_config(disable=True)
    made = time.time()
    image = _generate(pipe, args, torch)
    first = time.time() - args.t0
    if args.tune_out:  # what this process chose, for the next one to take instead of timing
        from tritonforge.runtime import ortlib

        ortlib.save_choices(args.tune_out, args.library)
    # where the first image's time went: imports, the pipeline made (sessions; the compile is lazy), one generation
    phases = {"imports": imported - args.t0, "pipeline made": made - imported,
              "first generation": first - (made - args.t0)}
    np.save(args.out.with_suffix(".npy"), image)
    times = []
    for _ in range(args.runs):
        t = time.perf_counter()
        _generate(pipe, args, torch)
        times.append(time.perf_counter() - t)
    median = statistics.median(times) if times else None
    args.out.write_text(json.dumps({"first_image_s": first, "s_per_image": median, "phases": phases}))
    return 0


def _run_side(name: str, folder: Path, args, work: Path, label: str = "", env: dict | None = None,
              first_only: bool = False, tune_out: Path | None = None) -> dict:
    """One side in a fresh process; `label` names its files (default: the side), `env` adds to its environment,
    `first_only` times its first image alone."""
    out = work / f"{label or name}.json"
    argv = [sys.executable, __file__, "--side-of", name, "--folder", str(folder), "--out", str(out), "--t0",
            repr(time.time()), "--provider", args.provider, "--steps", str(args.steps), "--side-px", str(args.side),
            "--runs", "0" if first_only else str(args.runs), "--compile", args.compile, "--guidance",
            str(args.guidance), *(["--library", str(args.library)] if args.library else []),
            *(["--tune-out", str(tune_out)] if tune_out else [])]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=args.limit, env={**os.environ, **(env or {})})
    if done.returncode != 0 or not out.is_file():
        return {"error": (done.stderr.strip().splitlines() or ["no output"])[-1][:300]}
    return json.loads(out.read_text())


def prepare(args, work: Path) -> tuple[Path, Path, Path]:
    """(the diffusers folder, the optimum export, its rewrite) made in `work`; each folder is written beside its name
    and renamed when whole, so a run cut short leaves nothing a later run would take for finished."""
    from tritonforge.runtime.ortlib.rewrite.folder import rewrite_folder

    dtype = "fp16" if args.provider == "cuda" else "fp32"
    torch_dir, export = work / "torch", work / "onnx"
    if not (torch_dir / "model_index.json").is_file():
        partial = work / "torch.partial"
        shutil.rmtree(partial, ignore_errors=True)
        pipeline_models.save(args.model, partial, args.tiny, dtype, args.layers)
        partial.rename(torch_dir)
    if not (export / "model_index.json").is_file():
        partial = work / "onnx.partial"
        shutil.rmtree(partial, ignore_errors=True)
        done = pipeline_models.export(torch_dir, partial, fp16_on_cuda=args.provider == "cuda")
        saved = "the model was saved nonetheless" in done.stderr  # optimum's own check of its export against torch
        if done.returncode != 0 and not saved:
            raise SystemExit(f"error: optimum-cli export onnx failed: {done.stderr.strip()[-1500:]}")
        if saved:
            print("optimum's validation of its export failed (" + done.stderr.strip().splitlines()[-1][:200] +
                  "); the images are compared here")
        partial.rename(export)
    rewritten = work / "onnx.tf"
    if not (rewritten / "model_index.json").is_file():
        t = time.perf_counter()
        rewrite_folder(export, rewritten, library=args.library)
        (work / "rewrite_s.txt").write_text(f"{time.perf_counter() - t:.1f}")  # once per folder, before any side
    return torch_dir, export, rewritten


def headline(rows: list[dict]) -> list[str]:
    """The README's table: per pipeline and GPU (the rows of tiny or CPU runs left out), seconds per image on each
    side, the ratio to diffusers + torch.compile, and the first image from a fresh process."""
    got: dict[tuple, dict] = {}
    for r in rows:
        if r["benchmark"] == "pipeline" and "_tiny" not in r["shape"] and r["dtype"] != "fp32":
            got.setdefault((r["shape"], r["device"]), {})[(r["provider"], r["metric"])] = float(r["value"])
    order = {m: i for i, m in enumerate(pipeline_models.PIPELINES)}
    lines = ["| pipeline | GPU | s/image: rewritten | diffusers + torch.compile | vs torch.compile | optimum export "
             "| first image s: rewritten (tune file) / torch.compile (warm cache) | image max diff |",
             "| --- " * 8 + "|"]
    for (shape, device), m in sorted(got.items(), key=lambda kv: (order.get(kv[0][0].split("(")[0].split("@")[0], 99),
                                                                   kv[0])):
        ours, torch_s, export = (m.get((side, "s_per_image")) for side in ("tritonforge", "torch_compile", "export"))
        if ours is None or torch_s is None:
            continue
        firsts = [(m.get((side, "first_image_s")), m.get((side + again, "first_image_s")))
                  for side, again in (("tritonforge", "+tuned"), ("torch_compile", "+warm"))]
        first = " / ".join("-" if f is None else f"{f:.1f}" + ("" if a is None else f" ({a:.1f})") for f, a in firsts)
        diff = m.get(("tritonforge", "max_abs_diff"))
        lines.append(f"| {shape} | {device.removeprefix('NVIDIA ')} | {ours:.3f} | {torch_s:.3f} | "
                     f"{torch_s / ours:.2f}x | {'-' if export is None else f'{export:.3f}'} | {first} | "
                     f"{'-' if diff is None else f'{diff:.3g}'} |")
    return lines


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", choices=pipeline_models.PIPELINES, default="sd15")
    ap.add_argument("--tiny", action="store_true", help="the same classes, tiny (a smoke run)")
    ap.add_argument("--provider", choices=("cuda", "cpu"), default="cuda")
    ap.add_argument("--steps", type=int, default=0,
                    help="denoising steps (default: the model's: sd15 and sdxl 30, sd3 and flux 28)")
    ap.add_argument("--side", type=int, default=0, help="image side in pixels (default: the model's; --tiny: 32)")
    ap.add_argument("--layers", type=lambda v: tuple(int(n) for n in v.split(",")), default=(),
                    help="sd3: N blocks; flux: D,S double- and single-stream blocks (default: the model's depth)")
    ap.add_argument("--runs", type=int, default=3, help="images timed after the first")
    ap.add_argument("--compile", default="reduce-overhead", help="torch.compile's mode for the denoiser, or none")
    ap.add_argument("--library", type=Path, default=None)
    ap.add_argument("--limit", type=float, default=1800.0, help="seconds a side may take")
    ap.add_argument("--work", type=Path, default=None,
                    help="where the pipeline, its export and its rewrite go (kept; a later run with the same --work "
                         "reuses them)")
    ap.add_argument("--prepare", action="store_true",
                    help="make the pipeline, its export and its rewrite in --work, and time nothing")
    ap.add_argument("--results", type=Path, default=None, help="default: benchmarks/results/results.csv")
    ap.add_argument("--headline", action="store_true", help="print the README's table of the pipeline rows")
    # one side, in a process of its own (what this script starts)
    ap.add_argument("--side-of", choices=("export", "tritonforge", "torch"), help=argparse.SUPPRESS)
    ap.add_argument("--folder", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--t0", type=float, help=argparse.SUPPRESS)
    ap.add_argument("--side-px", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--guidance", type=float, help=argparse.SUPPRESS)
    ap.add_argument("--tune-out", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.headline:
        from benchmarks.results import RESULTS, read_rows

        print("\n".join(headline(read_rows(args.results or RESULTS))))
        return 0
    if args.side_of:
        args.side = args.side_px
        return side_main(args)
    import numpy as np
    from tritonforge.runtime import ortlib

    from benchmarks.e2e_bench import _device
    from benchmarks.results import write_rows

    if args.prepare and not args.work:
        ap.error("--prepare keeps what it makes in --work DIR; name one")
    if args.layers and args.model not in pipeline_models.DEPTH_CUT:
        ap.error(f"--layers cuts the transformer of sd3 or flux, not {args.model}'s")
    args.side = args.side or (32 if args.tiny else DEFAULTS[args.model][0])
    args.steps = args.steps or DEFAULTS[args.model][1]
    args.guidance = DEFAULTS[args.model][2]
    args.library = ortlib.library_path(args.library)
    work = args.work or Path(tempfile.mkdtemp(prefix="tritonforge-pipeline-"))
    work.mkdir(parents=True, exist_ok=True)
    made = {"model": args.model, "tiny": args.tiny, "layers": list(args.layers), "provider": args.provider}
    stamp = work / "made.json"
    if stamp.is_file() and json.loads(stamp.read_text()) != made:
        raise SystemExit(f"error: {work} holds another pipeline ({stamp.read_text().strip()}); name another --work")
    if stamp.is_file():
        print(f"reusing what an earlier run made in {work}")
    stamp.write_text(json.dumps(made))
    torch_dir, export, rewritten = prepare(args, work)
    if args.prepare:
        print(f"made {torch_dir}, {export} and {rewritten}")
        return 0
    tune = work / "tritonforge.tune"
    tune.unlink(missing_ok=True)
    cache = work / "inductor"  # a cold compile cache for the torch side, then the same cache warm
    shutil.rmtree(cache, ignore_errors=True)
    caches = {"TORCHINDUCTOR_CACHE_DIR": str(cache), "TRITON_CACHE_DIR": str(cache / "triton")}
    got = {"export": _run_side("export", export, args, work),
           "tritonforge": _run_side("tritonforge", rewritten, args, work, tune_out=tune),
           "torch": _run_side("torch", torch_dir, args, work, env=caches)}
    # the first image again, from what the first process left: the library's choices as its tune file, and
    # torch.compile's cache warm
    if tune.is_file():
        got["tritonforge+tuned"] = _run_side("tritonforge", rewritten, args, work, "tritonforge+tuned",
                                             {"TRITONFORGE_ORT_TUNE_FILE": str(tune)}, first_only=True)
    if args.compile != "none" and "error" not in got["torch"]:
        got["torch+warm"] = _run_side("torch", torch_dir, args, work, "torch+warm", caches, first_only=True)
    images = {k: np.load(work / f"{k}.npy") for k in got if (work / f"{k}.npy").is_file()}
    diff = {k: float(np.abs(images[k] - images["export"]).max()) for k in images if "export" in images}
    dtype = "fp16" if args.provider == "cuda" else "fp32"
    depth = f"({'+'.join(map(str, args.layers))} blocks)" if args.layers else ""
    label = f"{args.model}{'_tiny' if args.tiny else ''}{depth}@{args.side} {args.steps} steps"
    device = _device(args.provider)
    rows = []
    for k, g in got.items():
        compiled = f"; torch.compile(mode={args.compile!r}), own process" if args.compile != "none" else "; eager"
        name = k.replace("torch", "torch_compile" if args.compile != "none" else "torch_eager") \
            if k.startswith("torch") else k
        extra = SIDES[k] + (compiled if k.startswith("torch") else "") + \
            (f"; not run: {g['error']}" if "error" in g else "")
        for metric, unit in (("s_per_image", "s"), ("first_image_s", "s")):
            if g.get(metric) is not None:
                said = extra + ("; " + ", ".join(f"{p} {s:.1f} s" for p, s in g["phases"].items())
                                if metric == "first_image_s" and g.get("phases") else "")
                rows.append({"provider": name, "shape": label, "dtype": dtype, "metric": metric, "unit": unit,
                             "value": f"{g[metric]:.3f}", "extra": said})
        if k == "tritonforge" and (work / "rewrite_s.txt").is_file():
            rows.append({"provider": name, "shape": label, "dtype": dtype, "metric": "rewrite_s", "unit": "s",
                         "value": (work / "rewrite_s.txt").read_text(), "extra": "tritonforge-rewrite DIR, once"})
        if k in diff:
            rows.append({"provider": name, "shape": label, "dtype": dtype, "metric": "max_abs_diff", "unit": "",
                         "value": f"{diff[k]:.3g}", "extra": "pixels in [0, 1], against the export's image"})
    write_rows("pipeline", device, rows, args.results or ROOT / "benchmarks" / "results" / "results.csv")
    print(f"{label} on {device}: seconds per image / first image")
    for k, g in got.items():
        said = g.get("error") or (f"{g['s_per_image']:.3f} s / " if g.get("s_per_image") else "first image ") + \
            f"{g['first_image_s']:.1f} s"
        print(f"  {SIDES[k]}: {said}" + (f" (image max diff {diff[k]:.3g})" if k in diff and k != "export" else ""))
    ok = "error" not in got["tritonforge"] and diff.get("tritonforge", 1.0) <= TOL[dtype]
    if not args.work:
        shutil.rmtree(work, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    sys.exit(main())
