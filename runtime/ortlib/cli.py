"""`tritonforge-rewrite MODEL|FOLDER [-o OUT]`: a model's GroupNorms, attention, norms and Linears put into the
library's ops (or a whole pipeline folder's, as optimum-onnx exports it), from the command line. It is the
`tritonforge_ort` wheel's console script; in a checkout, `invoke rewrite` and `python -m
tritonforge.runtime.ortlib.cli` run the same code."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .errors import TritonforgeError
from .settings import meant_for


def output_for(model: str | Path) -> Path:
    """Where the rewrite of `model` goes by default: `<name>.tf.onnx` beside it; a pipeline folder's, `<name>.tf`."""
    src = Path(model)
    if src.is_dir():
        return src.with_name(src.resolve().name + ".tf")
    return src.with_name(src.name.removesuffix(".onnx") + ".tf.onnx")


def rewrite_and_say(model: str | Path, out: str | Path | None = None, library: str | None = None,
                    any_dtype: bool = False, all_softmax: bool = False, say=print,
                    attention: str | None = None, layout: str = "nhwc", check_load: bool = True,
                    gpu: str | None = None, precision: str | None = None,
                    fp8_min_features: int | None = None, fp8_check: bool = True, measure: str = "off",
                    dims: dict | None = None, measure_budget: float = 60.0, progress=None) -> list[str]:
    """Rewrite `model` into `out`; say what was rewritten, what was left and why, and what was written.
    Returns the files written."""
    from .rewrite import rewrite_file
    from .rewrite.folder import rewrite_folder

    options = dict(library=library, use_library=not any_dtype, softmax_min_cols=0 if all_softmax else None,
                   attention=attention, layout=layout, check_load=check_load, gpu=gpu, precision=precision,
                   fp8_min_features=fp8_min_features, fp8_check=fp8_check, measure=measure, dims=dims,
                   measure_budget=measure_budget, progress=progress)
    try:
        if Path(model).is_dir():
            dst = Path(out) if out else output_for(model)
            reports = rewrite_folder(model, dst, say=say, **options)
            for name, report in reports.items():
                say(f"== {name}")
                for line in report.lines():
                    say(line)
            say(f"wrote {dst}: " + ", ".join(f"{name}/model.onnx" for name in reports) + " rewritten, every other file "
                "copied")
            say(f"run it with optimum: ORTDiffusionPipeline.from_pretrained('{dst}', "
                f"**tritonforge_ort.pipeline_sessions('{dst}'))")
            return [str(dst)]
        report = rewrite_file(model, out or output_for(model), **options)
    except TritonforgeError:
        raise
    except Exception as exc:  # anything else (a library that does not load, a full disk) is one line too
        text = " ".join(str(exc).split()) or "no message"
        raise TritonforgeError(f"{model}: the rewrite failed: {type(exc).__name__}: {text}") from None
    for line in report.lines():
        say(line)
    say(f"checked: it {report.loads}" if report.loads.startswith("loads") else f"note: {report.loads}")
    say(f"wrote {' and '.join(report.wrote)}")
    say(meant_for())
    return report.wrote


def dims_arg(text: str) -> dict[str, int]:
    """--dims' NAME=SIZE list as {name: size}; ValueError naming the part that is not one."""
    dims = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, eq, size = part.partition("=")
        if not eq or not name.strip() or not size.strip().isdigit() or int(size) < 1:
            raise ValueError(f"'{part}' is not NAME=SIZE with a size of at least 1")
        dims[name.strip()] = int(size)
    if not dims:
        raise ValueError("no NAME=SIZE given")
    return dims


def _dims(text: str) -> dict[str, int]:
    try:
        return dims_arg(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="tritonforge-rewrite", description=__doc__.split("\n\n")[0])
    ap.add_argument("model", help="the ONNX model to read (external data beside it is read where it lies), or a "
                                   "pipeline folder as optimum-cli export onnx writes it")
    ap.add_argument("-o", "--out", help="where the rewrite goes (default: <model>.tf.onnx beside it; for a folder, "
                                        "<folder>.tf, which must not exist)")
    ap.add_argument("--library", help="the library whose CUDA kernels decide what is rewritten (default: the "
                                      "one register() finds)")
    ap.add_argument("--any-dtype", action="store_true", help="rewrite whatever the library's CUDA kernels serve")
    ap.add_argument("--all-softmax", action="store_true",
                    help="also softmax rows of lengths where ORT's own kernel measured faster than the library's")
    ap.add_argument("--attention", choices=("measured", "tritonforge", "ort"), default="measured",
                    help="where attention goes: the fastest measured per class of shape (default), the library's "
                         "op, or ORT's com.microsoft.MultiHeadAttention")
    ap.add_argument("--layout", choices=("nchw", "nhwc"), default="nhwc",
                    help="nhwc (default): GroupNorms channels-last between Transposes, which tritonforge_ort.session's "
                         "prefer_nhwc cancels against ORT's own around its NHWC convolutions; nchw: the export's "
                         "layout, for sessions without prefer_nhwc")
    ap.add_argument("--gpu", default=None,
                    help="the GPU the model will run on, when it is not this machine's (e.g. 'NVIDIA L4'): its "
                         "measurements, or the nearest GPU's, decide between the library's nodes and ORT's "
                         "(default: the GPU nvidia-smi shows here, else the shipped tables' first)")
    ap.add_argument("--precision", choices=("fp8",), default=None,
                    help="fp8: the float16 / bfloat16 model's large Linears as fp8 e4m3 GEMMs (weights quantized per "
                         "output channel now, activations per token as they run; GPUs with fp8 tensor cores, sm_89+)")
    ap.add_argument("--fp8-min-features", type=int, default=None, metavar="N",
                    help="with --precision fp8: Linears with fewer than N input or output features stay in their "
                         "type (default: the break-even measured per shape, rewrite/fp8.py; 0 takes every one)")
    ap.add_argument("--no-fp8-check", action="store_true",
                    help="with --precision fp8: skip trying each Linear on the model's own activations (one run on "
                         "random inputs) before it goes to fp8")
    ap.add_argument("--measure", choices=("auto", "on", "off"), default="auto",
                    help="time the choices between the library's nodes, ORT's and the export's on this machine's GPU "
                         "(with --precision fp8, each Linear in fp8 and as it is too), for this model's own shapes, "
                         "and keep the fastest (default auto: where a CUDA GPU and "
                         "onnxruntime-gpu are here and no --gpu is named; off: the shipped tables decide). What was "
                         "timed is kept beside the output (<out>.measured.json) and read again by the next rewrite")
    ap.add_argument("--measure-budget", type=float, default=60.0, metavar="SECONDS",
                    help="how long the rewrite may take with its timing: no shape starts timing once it has run "
                         "this long, less the time writing the model takes; the shapes not timed by then are left "
                         "to the tables, and the next rewrite times them (default 60)")
    ap.add_argument("--dims", type=_dims, default=None, metavar="NAME=SIZE[,NAME=SIZE...]",
                    help="sizes for the dims the model leaves symbolic (e.g. batch=2,height=128,width=128), so the "
                         "choices at those shapes can be timed")
    ap.add_argument("--no-load-check", action="store_true",
                    help="write even where onnxruntime is not installed to load the rewrite first (unchecked)")
    args = ap.parse_args(argv)
    try:
        rewrite_and_say(args.model, args.out, args.library, args.any_dtype, args.all_softmax,
                        attention=None if args.attention == "measured" else args.attention, layout=args.layout,
                        check_load=not args.no_load_check, gpu=args.gpu, precision=args.precision,
                        fp8_min_features=args.fp8_min_features, fp8_check=not args.no_fp8_check,
                        measure=args.measure, dims=args.dims, measure_budget=args.measure_budget,
                        progress=lambda line: print(line, file=sys.stderr, flush=True))
    except TritonforgeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
