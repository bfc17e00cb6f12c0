"""The library's Softmax against ORT's own per row length (written by benchmarks/softmax_choice.py
from benchmarks/results/results.csv; do not edit): the geometric mean over the measured row counts of
ORT's time over the library's, NVIDIA H200, onnxruntime-gpu's CUDA EP. The rewrite hands a softmax to the
library where the nearest measured row length has a speed-up of at least 1."""

DEVICE = "NVIDIA H200"
SPEEDUP = {
    "fp16": {64: 1.169, 77: 0.951, 128: 1.337, 197: 0.957, 256: 1.257, 512: 1.435, 1024: 1.542,
             4096: 1.968, 16384: 1.769, 32000: 3.183, 50257: 1.098, 128256: 6.046, 151936: 4.811},
    "fp32": {64: 1.103, 77: 0.926, 128: 1.103, 197: 0.92, 256: 1.049, 512: 1.025, 1024: 1.058,
             4096: 1.4, 16384: 1.577, 32000: 2.889, 50257: 0.969, 128256: 6.813, 151936: 6.228},
}
