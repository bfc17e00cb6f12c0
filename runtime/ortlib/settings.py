"""The session a rewritten model is meant for: the library registered, and onnxruntime's CUDA EP set the
way these models run best, in one call.

    import tritonforge_ort
    sess = tritonforge_ort.session("unet.tf.onnx")          # an onnxruntime.InferenceSession
    sess.tritonforge_settings                               # what it was given, and what it had to drop

The CUDA EP options (`BEST`), each one kept only while onnxruntime accepts it:
- `prefer_nhwc=1`: convolutions, and the ops ORT has in NHWC, run channels-last, cuDNN's fast layout for
  fp16 tensor cores (ORT transposes at the edges of the NHWC region).
- `fuse_conv_bias=1`: cuDNN adds the convolution's bias in the convolution instead of a separate kernel.
  Only with `prefer_nhwc`: onnxruntime 1.31 fails at the first Conv without it.
- `enable_cuda_graph=1` with `cuda_graph=True`: the whole run is one graph launch. It needs every input
  dim fixed, every node on the CUDA EP, and inputs and outputs bound to the same device buffers on
  every run (IOBinding); a plain `run()` would replay the first run's addresses, so it is never on by
  default.

A session onnxruntime refuses because of an option (an older onnxruntime that does not know it, a build
without NHWC kernels, a node outside the CUDA EP under a CUDA graph), recognised by what its message says
(REFUSALS), is made again without that option: a warning is logged and `tritonforge_settings["dropped"]`
says which and why. Any other error (a missing file, an invalid model, memory) is raised as it is; the
options the caller passes are never dropped, and a caller's `prefer_nhwc="0"` turns off what needs it.
Without the CUDA EP the session runs the library's CPU ops and the options do not apply.
"""

from __future__ import annotations

import logging
import os
import re
from pathlib import Path

from .errors import TritonforgeError

BEST = {"prefer_nhwc": "1", "fuse_conv_bias": "1"}
GRAPH = {"enable_cuda_graph": "1"}
CUDA = "CUDAExecutionProvider"
CPU = "CPUExecutionProvider"
# given up in this order: the CUDA graph first (it asks the most of the model), the NHWC layout last
# (fuse_conv_bias needs it)
_DROP_ORDER = ("enable_cuda_graph", "fuse_conv_bias", "prefer_nhwc")
_NEEDS = {"fuse_conv_bias": "prefer_nhwc"}
# What onnxruntime says when it refuses each option: the option's name in an unknown-option or invalid-value
# message, or the failure it causes (a build without NHWC kernels: "This build does not support NHWC layout";
# cuDNN's frontend failing on a fused bias; graph capture refused for nodes outside the CUDA EP). Matched in the
# message with the model's path taken out: a file named "unet.nhwc.onnx" is no refusal of NHWC.
REFUSALS = {
    "enable_cuda_graph": r"\benable_cuda_graph\b|graph capture|cuda graph",
    "fuse_conv_bias": r"\bfuse_conv_bias\b|cudnn frontend|cudnn_frontend",
    "prefer_nhwc": r"\bprefer_nhwc\b|does not support nhwc|nhwc is not supported|nhwc (?:layout|kernels?) "
                   r"(?:is|are) not",
}
log = logging.getLogger("tritonforge")


class SessionError(TritonforgeError, ValueError):
    pass


def cuda_options(cuda_graph: bool = False, **overrides: str) -> dict[str, str]:
    """The CUDA EP options `session` starts from: BEST, GRAPH with `cuda_graph`, then the caller's. An option
    of BEST whose prerequisite the caller turned off goes with it; the caller asking for both is an error."""
    options = {**BEST, **(GRAPH if cuda_graph else {}), **{k: str(v) for k, v in overrides.items()}}
    for option, needed in _NEEDS.items():
        if options.get(option) == "1" and options.get(needed) != "1":
            if option in overrides:
                raise SessionError(f"{option}=1 needs {needed}=1 (onnxruntime fails at the first Conv without it)")
            options[option] = "0"
    return options


def refused_option(message: str, options: dict, kept: set, model: str = "") -> str | None:
    """The option of `options` (not in `kept`) that onnxruntime's `message` refuses, in the order they are given
    up, or None: the error is not about an option. `model`: the path the session was made from, which the
    message may quote and which says nothing of an option."""
    for said in filter(None, (model, os.path.basename(model))):
        message = message.replace(said, "")
    text = message.lower()
    for option in _DROP_ORDER:
        if option in options and option not in kept and options[option] != "0" and re.search(REFUSALS[option], text):
            return option
    return None


def _fixed_inputs(model) -> None:
    """A CUDA graph replays one shape: every graph input's dims fixed, else the input is named."""
    import onnx

    m = onnx.load_model_from_string(model) if isinstance(model, bytes) else onnx.load(model, load_external_data=False)
    weights = {t.name for t in m.graph.initializer}
    for i in m.graph.input:
        if i.name in weights:
            continue
        dims = i.type.tensor_type.shape.dim
        loose = [a for a, d in enumerate(dims) if not d.HasField("dim_value")]
        if loose:
            shape = [d.dim_value if d.HasField("dim_value") else (d.dim_param or "?") for d in dims]
            raise SessionError(f"input '{i.name}' has dims that are not fixed (axes {loose}, shape {shape}): "
                               "a CUDA graph replays one shape; export with static axes, or leave cuda_graph off")


def make_session(model: str | os.PathLike | bytes, lib: Path, *, providers: list[str] | None = None,
                 cuda_graph: bool = False, session_options=None, **provider_options: str):
    """ortlib.session's work, the library's path found: an onnxruntime.InferenceSession of `model` (a path or
    the serialized bytes) with `lib` registered and the CUDA EP options above (`provider_options` override or
    add to them). `providers`: default the CUDA EP where onnxruntime has it, then the CPU EP. The session's
    `tritonforge_settings` holds {"providers", "cuda_options" (as applied), "dropped" ({option: onnxruntime's
    reason}), "library"}."""
    import onnxruntime as ort

    so = session_options or ort.SessionOptions()
    so.register_custom_ops_library(str(lib))
    if providers is None:
        providers = [CUDA, CPU] if CUDA in ort.get_available_providers() else [CPU]
    source = model if isinstance(model, bytes) else str(model)
    if cuda_graph:
        _fixed_inputs(source)
        if CUDA not in providers:
            raise SessionError(f"cuda_graph=True is a CUDA EP setting; providers are {providers}")
    if CUDA not in providers:
        sess = ort.InferenceSession(source, so, providers=providers)
        sess.tritonforge_settings = {"providers": providers, "cuda_options": {}, "dropped": {}, "library": str(lib)}
        return sess
    if CUDA not in ort.get_available_providers():
        raise SessionError(f"onnxruntime {ort.__version__} has no CUDA EP here (install onnxruntime-gpu, or pass "
                           f"providers={[CPU]!r})")
    options = cuda_options(cuda_graph, **provider_options)
    dropped: dict[str, str] = {}
    kept = set(provider_options) | {_NEEDS[o] for o in provider_options if o in _NEEDS}  # the caller's
    while True:
        try:
            sess = ort.InferenceSession(
                source, so, providers=[(p, options) if p == CUDA else p for p in providers])
        except Exception as exc:  # onnxruntime's own classes (Fail, InvalidArgument, ...) share no public base
            said = " ".join(str(exc).split())
            give_up = refused_option(said, options, kept, "" if isinstance(model, bytes) else str(model))
            if give_up is None:
                raise
            dropped[give_up] = said[:300]
            log.warning("tritonforge_ort.session: onnxruntime %s refused %s=%s; dropped: %s", ort.__version__, give_up,
                        options[give_up], said[:300])
            options = {k: v for k, v in options.items() if k != give_up and _NEEDS.get(k) != give_up}
            continue
        sess.tritonforge_settings = {"providers": providers, "cuda_options": options, "dropped": dropped,
                                     "library": str(lib)}
        return sess


def meant_for() -> str:
    """One line for the rewrite's output: the session the written model is meant for."""
    best = ", ".join(f"{k}={v}" for k, v in BEST.items())
    return (f"run it with tritonforge_ort.session(path): the library registered, CUDA EP {best} "
            "(cuda_graph=True adds enable_cuda_graph for fixed shapes run with IOBinding)")
