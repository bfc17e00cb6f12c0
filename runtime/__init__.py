"""What runs the shipped kernels, in two parts.

- This package's own modules: the Python twin of ORT's triton_kernel.cu, which loads a shipped archive's kernels
  and launches them (artifacts.py, launch.py), the tuner and the ops' references (ops/); numpy and cuda-python
  only (no torch, no triton), so GPU runners use it as is.
- `ortlib/`: the source of the `tritonforge_ort` wheel users install: the custom-op library for onnxruntime-gpu
  (src/), the rewrite of ONNX exports into its ops (rewrite/) and `tritonforge-rewrite` (cli.py).
"""

from .archive import read_archive_symbols
from .artifacts import ArtifactError, Artifacts, load_artifacts
from .launch import PreparedLaunch, Unsupported

__all__ = ["Artifacts", "ArtifactError", "PreparedLaunch", "Unsupported", "load_artifacts",
           "read_archive_symbols"]
