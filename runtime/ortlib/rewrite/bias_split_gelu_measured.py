"""ORT's BiasSplitGelu (SPEEDUP) and the library's (LIBRARY) against the export's GEGLU nodes per form (written by
benchmarks/bias_split_gelu_choice.py from benchmarks/results/results.csv; do not edit): the geometric mean over the
measured shapes of the export's time over the fused node's, NVIDIA H100 80GB HBM3, onnxruntime-gpu's CUDA EP. The
rewrite writes the faster of the two for a form and dtype whose speed-up is at least 1."""

DEVICE = "NVIDIA H100 80GB HBM3"
SPEEDUP = {
    "fp16": {'decomposed': 2.396, 'onnx_gelu': 2.397},
}
LIBRARY = {
    "bf16": {'decomposed': 3.707, 'onnx_gelu': 2.784},
    "fp16": {'decomposed': 2.779, 'onnx_gelu': 2.779},
}
