"""The rewritten model as onnxruntime loads it, before it is renamed into place: a CPU session with the
library registered (parse, graph resolution with every op's type and shape inference, kernel creation), so
a model onnxruntime refuses is never written. Graph optimizations are left off: they change nothing a
load can refuse, and cost time and memory on models of gigabytes.

A model with ops the CPU EP has no kernel for (ORT's optimizer's NhwcConv, bfloat16 MatMuls) resolves and then stops
at the first such node: a load for a GPU session, said so, where that node is the export's own. A node the rewrite
wrote must run somewhere: the library's ops run on the CPU EP in every dtype, so a missing kernel of the library's
domain is a refusal; ORT's own ops the rewrite writes (com.microsoft.MultiHeadAttention, FastGelu,
SkipLayerNormalization, BiasSplitGelu; a bfloat16 Transpose) are checked one by one, on the CPU EP, or on an EP of
the installed onnxruntime whose kernels ORT_KERNELS lists. Where onnxruntime refuses the export itself, the error
says so. Without onnxruntime nothing is written unless the caller asks for an unchecked write."""

from __future__ import annotations

import functools
import re
from pathlib import Path

from .. import DOMAIN
from .files import ModelFileError
from .graph import MS

# The dtypes ORT's GPU EPs serve for the ops of its own that the rewrite writes (as onnxruntime-gpu 1.31 runs them
# on an H200; BiasSplitGelu and SkipLayerNormalization register float and float16 CUDA kernels only).
_FLOATS = {"fp32", "fp16", "bf16"}
ORT_KERNELS = {("", "Transpose"): {"CUDAExecutionProvider": _FLOATS},
               (MS, "MultiHeadAttention"): {"CUDAExecutionProvider": _FLOATS},
               (MS, "FastGelu"): {"CUDAExecutionProvider": _FLOATS},
               (MS, "BiasSplitGelu"): {"CUDAExecutionProvider": {"fp32", "fp16"}},
               (MS, "SkipLayerNormalization"): {"CUDAExecutionProvider": {"fp32", "fp16"}}}
# A one-node model of each op for the CPU EP's probe: its inputs' shapes, its attributes and its output's shape.
_PROBES = {("", "Transpose"): ({"x": [1, 2, 8]}, {"perm": [0, 2, 1]}, [1, 8, 2]),
           (MS, "MultiHeadAttention"): ({"q": [1, 2, 8], "k": [1, 2, 8], "v": [1, 2, 8]}, {"num_heads": 1}, [1, 2, 8]),
           (MS, "FastGelu"): ({"x": [1, 2, 8], "bias": [8]}, {}, [1, 2, 8]),
           (MS, "BiasSplitGelu"): ({"x": [1, 2, 2560], "bias": [2560]}, {}, [1, 2, 1280]),
           (MS, "SkipLayerNormalization"): ({"x": [1, 2, 8], "skip": [1, 2, 8], "gamma": [8], "beta": [8],
                                             "bias": [8]}, {}, [1, 2, 8])}


def check_loads(path: Path, library: Path, shown: Path, source: Path | None = None, written=(),
                required: bool = True) -> str:
    """Load `path` in onnxruntime's CPU EP with `library` registered; one line on what was checked. Raises
    ModelFileError naming `shown` and onnxruntime's message (which names the node at fault) when it refuses:
    the export itself (`source`, loaded the same way) where that is refused too. `written`: (domain, op, dtype,
    node name) of the nodes the rewrite wrote outside the library's domain, each checked to have a kernel.
    `required`: without onnxruntime, refuse (else write unchecked and say so)."""
    try:
        import onnxruntime as ort
    except ImportError:
        if required:
            raise ModelFileError(f"{shown}: not written: onnxruntime is not installed, so the rewritten model cannot "
                                 "be loaded before it is written (install onnxruntime or onnxruntime-gpu, or ask "
                                 "for an unchecked write: check_load=False, --no-load-check)") from None
        return "not loaded in onnxruntime before writing (an unchecked write, as asked)"
    for domain, op, dtype, node in written:
        _has_kernel(ort, domain, op, dtype, node, shown)
    try:
        _session(ort, path, library)
    except Exception as exc:  # onnxruntime's own classes (Fail, InvalidGraph, ...) share no public base
        said = _message(exc, path)
        gpu_only = (re.match(r"Failed to find kernel for ([\w.]+)\(\d+\) \(node:'([^']*)'", said) or
                    re.match(r"Could not find an implementation for ([\w.]+)\(\d+\) node with name '([^']*)'", said))
        if gpu_only and _domain_of_node(path, gpu_only.group(2)) != DOMAIN:
            return (f"loads in onnxruntime {ort.__version__} (the graph resolves with the library's ops; the CPU EP "
                    f"stops at {gpu_only.group(1)} node '{gpu_only.group(2)}', which only a GPU EP runs)")
        if source is not None and _refused(ort, source, library):
            raise ModelFileError(f"{shown}: not written: onnxruntime {ort.__version__} refuses the export itself, "
                                 f"before any rewrite: {_message(exc, path)}") from None
        raise ModelFileError(f"{shown}: not written: onnxruntime {ort.__version__} refuses the rewritten model: "
                             f"{said}") from None
    return f"loads in onnxruntime {ort.__version__} (CPU EP, the library's ops registered)"


def _session(ort, path: Path, library: Path):
    so = ort.SessionOptions()
    so.log_severity_level = 4
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.register_custom_ops_library(str(library))
    return ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])


def _refused(ort, path: Path, library: Path) -> bool:
    """The model at `path` is refused before any kernel is looked for (parse, types and shapes)."""
    try:
        _session(ort, path, library)
        return False
    except Exception as exc:
        return not re.search(r"Failed to find kernel|Could not find an implementation", str(exc))


def _has_kernel(ort, domain: str, op: str, dtype: str, node: str, shown: Path) -> None:
    if not ort_runs(domain, op, dtype):
        eps = ", ".join(ort.get_available_providers())
        raise ModelFileError(f"{shown}: not written: the rewrite wrote {domain}.{op} node '{node}' in {dtype}, which "
                             f"no execution provider of onnxruntime {ort.__version__} ({eps}) runs")


@functools.cache
def ort_runs(domain: str, op: str, dtype: str) -> bool:
    """An EP of the installed onnxruntime runs ORT's `op` in `dtype`: a GPU EP it has that ORT_KERNELS lists, or
    the CPU EP (a one-node model of it loads). Without onnxruntime, what ORT_KERNELS lists."""
    try:
        import onnxruntime as ort
    except ImportError:
        return any(dtype in dtypes for dtypes in ORT_KERNELS.get((domain, op), {}).values())
    served = {ep for ep, dtypes in ORT_KERNELS.get((domain, op), {}).items() if dtype in dtypes}
    return bool(served & set(ort.get_available_providers())) or _cpu_kernel(ort, domain, op, dtype)


def _cpu_kernel(ort, domain: str, op: str, dtype: str) -> bool:
    from onnx import TensorProto, helper

    elem = {"fp32": TensorProto.FLOAT, "fp16": TensorProto.FLOAT16, "bf16": TensorProto.BFLOAT16}[dtype]
    shapes, kwargs, out = _PROBES[(domain, op)]
    x = [helper.make_tensor_value_info(n, elem, s) for n, s in shapes.items()]
    g = helper.make_graph([helper.make_node(op, list(shapes), ["y"], domain=domain, **kwargs)], "probe", x,
                          [helper.make_tensor_value_info("y", elem, out)])
    opsets = [helper.make_opsetid("", 17)] + ([helper.make_opsetid(domain, 1)] if domain else [])
    model = helper.make_model(g, opset_imports=opsets, ir_version=8)
    so = ort.SessionOptions()
    so.log_severity_level = 4
    try:
        ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
        return True
    except Exception:
        return False


def _domain_of_node(path: Path, name: str) -> str | None:
    """The domain of the node named `name` in the model at `path` (subgraphs too), None when there is none."""
    import onnx

    from .graph import every_node

    model = onnx.load(str(path), load_external_data=False)
    return next((n.domain for n in every_node(model.graph) if n.name == name), None)


def _message(exc: BaseException, path: Path) -> str:
    """onnxruntime's message on one line, without its error-code prefix and the scratch file's path."""
    text = " ".join(str(exc).split())
    text = re.sub(r"^\[ONNXRuntimeError\] : \d+ : \w+ : ", "", text)
    return re.sub(r"^Load model from \S+ failed:\s*", "", text.replace(str(path), path.name))
