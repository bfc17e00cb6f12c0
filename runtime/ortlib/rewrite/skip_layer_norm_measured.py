"""ORT's SkipLayerNormalization against the export's Linear bias, residual Add and LayerNormalization (written by
benchmarks/skip_layer_norm_choice.py from benchmarks/results/results.csv; do not edit): the geometric mean over
the measured shapes of the export's time over the fused node's, NVIDIA H200, onnxruntime-gpu's CUDA EP. The
rewrite writes SkipLayerNormalization for a dtype whose speed-up is at least 1."""

DEVICE = "NVIDIA H200"
SPEEDUP = {
    "fp16": {'export': 2.303},
}
