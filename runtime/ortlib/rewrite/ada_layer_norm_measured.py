"""The library's AdaLayerNorm against the export's LayerNormalization and modulation nodes per form (written by
benchmarks/ada_layer_norm_choice.py from benchmarks/results/results.csv; do not edit): the geometric mean over the
measured shapes of the export's time over the library's, per dtype on the first of NVIDIA H100 80GB HBM3, else NVIDIA
H200 with rows of it, onnxruntime-gpu's CUDA EP. The rewrite writes AdaLayerNorm for a form and dtype whose speed-up is
at least 1."""

DEVICE = "NVIDIA H100 80GB HBM3, else NVIDIA H200"
SPEEDUP = {
    "bf16": {'affine': 2.002, 'gated': 3.406, 'gated_bias': 2.016, 'plain': 3.652},
    "fp16": {'affine': 2.069, 'gated': 3.06, 'gated_bias': 1.826, 'plain': 3.303},
    "fp32": {'affine': 1.621, 'gated': 3.249, 'gated_bias': 1.699, 'plain': 3.385},
}
