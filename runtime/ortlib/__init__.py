"""The custom-op library in an ONNX Runtime session: find it, register it, ask it what it holds.

    import onnxruntime as ort
    from tritonforge.runtime import ortlib
    so = ort.SessionOptions()
    ortlib.register(so)                      # or ortlib.register(so, "path/to/libtritonforge_ort.so")
    sess = ort.InferenceSession("model.tf.onnx", so, providers=["CUDAExecutionProvider"])

or, with the CUDA EP options the rewritten models run best with (settings.py):

    sess = ortlib.session("model.tf.onnx")

The library (built by `invoke build` into `dist/cuda/multi/`, `dist/full/cuda/multi/` for every group,
or fetched) serves the domain `tritonforge` (rewrite.py puts a model's nodes there). Without a path,
`TRITONFORGE_ORT_LIBRARY` names it, else the full build's and then the ort build's `multi` library under
`./dist` is taken. Only the standard library is imported here: onnxruntime is the caller's.
"""

from __future__ import annotations

import ctypes
import json
import os
from pathlib import Path

from .errors import TritonforgeError

DOMAIN = "tritonforge"
LIBRARY_NAME = "libtritonforge_ort.so"  # tritonforge.artifact_format's name for it (a test keeps them equal)
DEFAULT_PLACES = (Path("dist") / "full" / "cuda" / "multi", Path("dist") / "cuda" / "multi")


class LibraryNotFound(TritonforgeError, FileNotFoundError):
    pass


class LibraryError(TritonforgeError, OSError):
    """The library is there but does not load (a C library older than it needs, a damaged file)."""


def library_path(path: str | os.PathLike | None = None) -> Path:
    """The library to load: `path`, else $TRITONFORGE_ORT_LIBRARY, else the one beside this package (the
    tritonforge_ort wheel's), else the first under ./dist."""
    places = (Path(__file__).resolve().parent, *DEFAULT_PLACES)
    if path is None:
        path = os.environ.get("TRITONFORGE_ORT_LIBRARY") or next(
            (str(d / LIBRARY_NAME) for d in places if (d / LIBRARY_NAME).is_file()), None)
    if path is None:
        raise LibraryNotFound(f"no {LIBRARY_NAME} under {' or '.join(str(d) for d in DEFAULT_PLACES)}: build it "
                              "(invoke build --platform cuda) or name it (TRITONFORGE_ORT_LIBRARY)")
    p = Path(path)
    if not p.is_file():
        raise LibraryNotFound(f"{p}: no such library")
    return p.resolve()


def get_library_path() -> str:
    """The library's path as onnxruntime-extensions names it: for `SessionOptions.register_custom_ops_library`."""
    return str(library_path())


def register(session_options, path: str | os.PathLike | None = None) -> Path:
    """Register the library's ops on an onnxruntime.SessionOptions; returns the library's path."""
    lib = library_path(path)
    session_options.register_custom_ops_library(str(lib))
    return lib


def _call(path, name: str) -> str:
    found = library_path(path)
    try:
        lib = ctypes.CDLL(str(found))  # the same handle ORT's dlopen got, so the same state
    except OSError as exc:
        raise LibraryError(f"{found}: the library does not load here: {exc}") from None
    fn = getattr(lib, name)
    fn.restype = ctypes.c_char_p
    return fn().decode()


def info(path: str | os.PathLike | None = None) -> dict:
    """{target, archive_sha256, kernels, groups, cuda, tune_file, tune_choices}: what the library was built
    from; `cuda` maps each op (GroupNorm, SkipGroupNorm, GroupNormalization, Softmax, LogSoftmax) to the
    dtypes its CUDA kernels serve (the CPU ops serve fp16, fp32 and bf16); the tune file it starts from
    (libtritonforge_ort.tune beside it, or $TRITONFORGE_ORT_TUNE_FILE; "" for none) and its choices."""
    return json.loads(_call(path, "TritonforgeInfo"))


def choices(path: str | os.PathLike | None = None) -> list[dict]:
    """The kernel the library chose per shape in this process so far (CUDA sessions), as
    [{device, op, signature, kernel}]. Lines like these, tab-separated, in the library's tune file
    (`invoke ortlib --tune`, or the file TRITONFORGE_ORT_TUNE_FILE names) are taken instead of timing."""
    rows = []
    for line in _call(path, "TritonforgeChoices").splitlines():
        if line and not line.startswith("#"):
            device, op, signature, kernel = line.split("\t")
            rows.append({"device": device, "op": op, "signature": signature, "kernel": kernel})
    return rows


def save_choices(path: str | os.PathLike, library: str | os.PathLike | None = None) -> int:
    """Write what this process chose so far (choices()) as a tune file at `path`, whole or not at all; returns the
    number of choices. A later process that names it in TRITONFORGE_ORT_TUNE_FILE (or finds it beside the library
    as libtritonforge_ort.tune) takes them instead of timing those shapes again, on the same GPU model."""
    rows = choices(library)
    target = Path(path)
    text = "# device\top\tsignature\tkernel: what a process chose, for the next to take instead of timing\n" + \
        "".join(f"{r['device']}\t{r['op']}\t{r['signature']}\t{r['kernel']}\n" for r in rows)
    partial = target.with_name(target.name + ".partial")
    partial.write_text(text)
    os.replace(partial, target)
    return len(rows)


def session(model, library: str | os.PathLike | None = None, **settings):
    """An onnxruntime.InferenceSession of `model` with the library registered and the CUDA EP settings the
    rewritten models are meant for (settings.py: `providers`, `cuda_graph`, `session_options`, and CUDA EP
    options as keywords); its `tritonforge_settings` says what applied and what onnxruntime refused."""
    from .settings import make_session

    return make_session(model, library_path(library), **settings)


# the component folders whose sessions optimum's ORTDiffusionPipeline.from_pretrained takes as `<name>_session`
PIPELINE_MODELS = ("unet", "transformer", "vae_encoder", "vae_decoder", "text_encoder", "text_encoder_2",
                   "text_encoder_3")


def pipeline_sessions(folder, library: str | os.PathLike | None = None, **settings) -> dict:
    """A session (session(), the same `settings`) for each model of a pipeline folder (an optimum-onnx export,
    rewritten or not), keyed as optimum takes them:

        from optimum.onnxruntime import ORTDiffusionPipeline
        pipe = ORTDiffusionPipeline.from_pretrained(folder, **tritonforge_ort.pipeline_sessions(folder))

    optimum makes its own sessions without the library otherwise, which cannot load a rewritten model."""
    lib = library_path(library)
    found = {name: Path(folder) / name / "model.onnx" for name in PIPELINE_MODELS}
    found = {name: path for name, path in found.items() if path.is_file()}
    if not found:
        raise TritonforgeError(f"{folder}: no {', '.join(PIPELINE_MODELS)} folder with a model.onnx")
    return {f"{name}_session": session(path, lib, **settings) for name, path in found.items()}

