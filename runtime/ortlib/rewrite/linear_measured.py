"""The library's Linear against ORT running the export's MatMul and bias Add (and the FastGelu after them)
(written by benchmarks/linear_choice.py from benchmarks/results/results.csv; do not edit): the geometric mean over
the measured shapes of the export's time over the library's, per epilogue, on the NVIDIA H100 80GB HBM3,
onnxruntime-gpu's CUDA EP. The rewrite writes Linear for a dtype and epilogue whose speed-up is at least 1; one
with no rows keeps the export's nodes."""

DEVICE = "NVIDIA H100 80GB HBM3"
SPEEDUP = {
    "bf16": {'gelu_tanh': 1.522, 'none': 1.444},
    "fp16": {'gelu_tanh': 1.263, 'none': 1.457},
}
