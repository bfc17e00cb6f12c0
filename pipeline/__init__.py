"""Build pipeline: kernel scripts -> Triton binaries -> objects -> ORT archive + header + kernels.json."""

from tritonforge import __version__  # noqa: F401 (the one version, in tritonforge/__init__.py)
