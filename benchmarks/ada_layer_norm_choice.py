"""Where the rewrite writes the library's AdaLayerNorm: derived from the committed measurements.

    python benchmarks/ada_layer_norm_choice.py          # writes runtime/ortlib/rewrite/ada_layer_norm_measured.py
    python benchmarks/ada_layer_norm_choice.py --check  # exit 1 when the committed table is not what the rows give

The rows are ada_layer_norm_bench.py's (benchmark `ada_layer_norm`, shape `<form> <model> <rows>x<width>`,
metric `us`): the export's nodes (`export`) against the library's node (`tritonforge`) in onnxruntime-gpu's CUDA
EP (the newest row of each shape and provider), each dtype from the first of DEVICE's devices with rows of it: a
dtype one GPU has no rows of keeps another's rather than losing the node. Per dtype and form (`plain`, `gated`,
`gated_bias`, `affine`), the library's speed-up is the geometric mean over the measured shapes of the export's time
over the library's; the rewrite writes AdaLayerNorm where it is at least 1 (runtime/ortlib/rewrite/ada_layer_norm.py).
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks import choice_table  # noqa: E402
from benchmarks.results import RESULTS  # noqa: E402

TABLE = ROOT / "runtime" / "ortlib" / "rewrite" / "ada_layer_norm_measured.py"
# the H100 measured every form in fp16 and bf16; only the H200 measured fp32
DEVICE = "NVIDIA H100 80GB HBM3,NVIDIA H200"


def speedups(path: Path = RESULTS, device: str = DEVICE) -> dict[str, dict[str, float]]:
    """{dtype: {form: geometric mean over shapes of the export's us / the library's us}}, each dtype from the first
    of `device`'s comma-separated devices with rows of it."""
    return choice_table.per_dtype(device, lambda one: choice_table.labelled_speedups(path, one, "ada_layer_norm"))


def module_text(table: dict[str, dict[str, float]], device: str = DEVICE) -> str:
    return choice_table.form_table_text(choice_table.docstring(
        "The library's AdaLayerNorm against the export's LayerNormalization and modulation nodes per form (written by "
        "benchmarks/ada_layer_norm_choice.py from benchmarks/results/results.csv; do not edit): the geometric mean "
        f"over the measured shapes of the export's time over the library's, per dtype on the first of "
        f"{choice_table.device_said(device)} with rows of it, onnxruntime-gpu's CUDA EP. The rewrite writes "
        "AdaLayerNorm for a form and dtype whose speed-up is at least 1."), table, choice_table.device_said(device))


def main(argv=None) -> int:
    return choice_table.run(argv, __doc__.splitlines()[0], TABLE, DEVICE, speedups, module_text, "ada_layer_norm",
                            choice_table.form_summary)


if __name__ == "__main__":
    sys.exit(main())
