"""ORT's FastGelu against the export's own GELU nodes per form (written by benchmarks/gelu_choice.py
from benchmarks/results/results.csv; do not edit): the geometric mean over the measured MLP shapes of
the export's time over FastGelu's, NVIDIA H200, onnxruntime-gpu's CUDA EP. The rewrite writes FastGelu
for a form and dtype whose speed-up is at least 1."""

DEVICE = "NVIDIA H200"
SPEEDUP = {
    "bf16": {'decomposed': 4.676, 'onnx_gelu': 1.47},
    "fp16": {'decomposed': 7.817, 'onnx_gelu': 1.777},
    "fp32": {'decomposed': 6.882, 'onnx_gelu': 1.527},
}
