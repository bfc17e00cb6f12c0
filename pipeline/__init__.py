"""Build pipeline: kernel scripts -> Triton binaries -> objects -> ORT archive + header + kernels.json."""
