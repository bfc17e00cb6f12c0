"""Build pipeline: kernel scripts -> Triton binaries -> objects -> ORT archive + header + kernels.json."""

__version__ = "0.1.0"
