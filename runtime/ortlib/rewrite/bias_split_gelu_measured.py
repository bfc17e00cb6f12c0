"""ORT's BiasSplitGelu (SPEEDUP) and the library's (LIBRARY) against the export's GEGLU nodes per form (written by
benchmarks/bias_split_gelu_choice.py from benchmarks/results/results.csv; do not edit): the geometric mean over the
measured shapes of the export's time over the fused node's, NVIDIA H200, onnxruntime-gpu's CUDA EP. The rewrite
writes the faster of the two for a form and dtype whose speed-up is at least 1."""

DEVICE = "NVIDIA H200"
SPEEDUP = {
    "fp16": {'decomposed': 2.302, 'onnx_gelu': 2.303},
}
LIBRARY = {
}
