"""The rewritten model as onnxruntime loads it, before it is renamed into place: a CPU session with the
library registered (parse, graph resolution with every op's type and shape inference, kernel creation), so
a model onnxruntime refuses is never written. Graph optimizations are left off: they change nothing a
load can refuse, and cost time and memory on models of gigabytes. A model with ops only the GPU runs
(ORT's optimizer writes NhwcConv, which has no CPU kernel) resolves and then stops at that node's kernel:
that is a load for a CUDA session, and said so; a missing kernel of the library's own domain is not."""

from __future__ import annotations

import re
from pathlib import Path

from .. import DOMAIN
from .files import ModelFileError


def check_loads(path: Path, library: Path, shown: Path) -> str:
    """Load `path` in onnxruntime's CPU EP with `library` registered; one line on what was checked. Raises
    ModelFileError naming `shown` and onnxruntime's message (which names the node at fault) when it refuses."""
    try:
        import onnxruntime as ort
    except ImportError:
        return "not loaded in onnxruntime before writing: onnxruntime is not installed"
    so = ort.SessionOptions()
    so.log_severity_level = 4
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.register_custom_ops_library(str(library))
    try:
        ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
    except Exception as exc:  # onnxruntime's own classes (Fail, InvalidGraph, ...) share no public base
        said = _message(exc, path)
        gpu_only = (re.match(r"Failed to find kernel for ([\w.]+)\(\d+\) \(node:'([^']*)'", said) or
                    re.match(r"Could not find an implementation for ([\w.]+)\(\d+\) node with name '([^']*)'", said))
        if gpu_only and _domain_of_node(path, gpu_only.group(2)) != DOMAIN:
            return (f"loads in onnxruntime {ort.__version__} (the graph resolves with the library's ops; the CPU EP "
                    f"stops at {gpu_only.group(1)} node '{gpu_only.group(2)}', which only a GPU EP runs)")
        raise ModelFileError(f"{shown}: not written: onnxruntime {ort.__version__} refuses the rewritten model: "
                             f"{said}") from None
    return f"loads in onnxruntime {ort.__version__} (CPU EP, the library's ops registered)"


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
