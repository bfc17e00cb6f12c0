"""The library's AdaLayerNorm against the export's LayerNormalization and modulation nodes per form (written by
benchmarks/ada_layer_norm_choice.py from benchmarks/results/results.csv; do not edit): the geometric mean over the
measured shapes of the export's time over the library's, NVIDIA H200, onnxruntime-gpu's CUDA EP. The rewrite writes
AdaLayerNorm for a form and dtype whose speed-up is at least 1."""

DEVICE = "NVIDIA H200"
SPEEDUP = {
    "bf16": {'gated': 3.833, 'plain': 3.764},
    "fp16": {'gated': 3.439, 'plain': 3.322},
    "fp32": {'gated': 3.276, 'plain': 3.036},
}
