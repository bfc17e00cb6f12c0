"""Packaging compiled kernels as ORT consumes them: objcopy-wrapped blobs in an archive, the header,
kernels.json, one build directory written whole, multi-arch containers and the `multi/` merge, the C++
proof that ORT can load them, and the custom-op library for onnxruntime-gpu."""
