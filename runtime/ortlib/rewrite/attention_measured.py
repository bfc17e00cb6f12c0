"""The library's MultiHeadAttention against ORT's MultiHeadAttention (ort_mha) and the export's
decomposition (decomposed), per class of shape (written by benchmarks/attention_choice.py from
benchmarks/results/results.csv; do not edit): the geometric mean of each rival's time over the
library's, NVIDIA H200, onnxruntime-gpu's CUDA EP. The rewrite writes the fastest of the three."""

DEVICE = "NVIDIA H200"
SPEEDUP = {
    "bf16": {
        "self d128": {'decomposed': 3.131, 'ort_mha': 0.625},
        "self d64": {'decomposed': 11.619, 'ort_mha': 0.905},
        "self d72": {'decomposed': 3.113, 'ort_mha': 0.708},
    },
    "fp16": {
        "cross": {'decomposed': 4.182, 'ort_mha': 1.111},
        "self d128": {'decomposed': 2.904, 'ort_mha': 0.627},
        "self d160": {'decomposed': 2.964, 'ort_mha': 1.233},
        "self d40": {'decomposed': 4.496, 'ort_mha': 0.824},
        "self d512": {'decomposed': 0.328, 'ort_mha': 1.052},
        "self d64": {'decomposed': 5.925, 'ort_mha': 0.865},
        "self d72": {'decomposed': 2.979, 'ort_mha': 0.705},
        "self d80": {'decomposed': 3.215, 'ort_mha': 0.838},
    },
}
