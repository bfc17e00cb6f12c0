"""The library's RotaryEmbedding against the export's rotary nodes (written by benchmarks/rotary_embedding_choice.py
from benchmarks/results/results.csv; do not edit): the geometric mean over the measured shapes of the export's
time over the library's, NVIDIA H100 80GB HBM3, onnxruntime-gpu's CUDA EP. The rewrite writes RotaryEmbedding
for a dtype whose speed-up is at least 1; a dtype with no rows keeps the export's nodes."""

DEVICE = "NVIDIA H100 80GB HBM3"
SPEEDUP = {
    "bf16": {'decomposed': 12.504, 'rms': 10.119, 'rms_joined': 10.985},
    "fp16": {'decomposed': 12.321, 'rms': 9.803, 'rms_joined': 10.667},
}
