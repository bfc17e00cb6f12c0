"""Python twin of ORT's triton_kernel.cu: load the shipped archive's kernels and launch them.

Needs numpy and cuda-python only (no torch, no triton), so GPU runners can use it as is.
"""

from .archive import read_archive_symbols
from .artifacts import ArtifactError, Artifacts, load_artifacts
from .launch import PreparedLaunch, Unsupported

__all__ = ["Artifacts", "ArtifactError", "PreparedLaunch", "Unsupported", "load_artifacts",
           "read_archive_symbols"]
