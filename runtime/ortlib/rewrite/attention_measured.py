"""The library's MultiHeadAttention against ORT's MultiHeadAttention (ort_mha) and the export's
decomposition (decomposed), per class of shape (written by benchmarks/attention_choice.py from
benchmarks/results/results.csv; do not edit): the geometric mean of each rival's time over the
library's, NVIDIA H200, onnxruntime-gpu's CUDA EP. The rewrite writes the fastest of the three."""

DEVICE = "NVIDIA H200"
SPEEDUP = {
    "fp16": {
        "cross": {'decomposed': 2.476, 'ort_mha': 0.548},
        "self d512": {'decomposed': 0.215, 'ort_mha': 0.621},
        "self d64": {'decomposed': 1.728, 'ort_mha': 0.346},
    },
}
