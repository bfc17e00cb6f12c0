"""The library's BiasConcat against the export's bias Adds and Concat of two streams' Linears (written by
benchmarks/bias_concat_choice.py from benchmarks/results/results.csv; do not edit): the geometric mean over the
measured shapes of the export's time over the library's, NVIDIA H100 80GB HBM3, onnxruntime-gpu's CUDA EP. The rewrite
writes BiasConcat for a dtype whose speed-up is at least 1; a dtype with no rows keeps the export's nodes."""

DEVICE = "NVIDIA H100 80GB HBM3"
SPEEDUP = {
    "bf16": {'joined': 1.301},
    "fp16": {'joined': 1.237},
}
