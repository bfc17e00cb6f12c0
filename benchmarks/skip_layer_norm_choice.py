"""Where the rewrite writes ORT's SkipLayerNormalization: derived from the committed measurements.

    python benchmarks/skip_layer_norm_choice.py            # writes runtime/ortlib/rewrite/skip_layer_norm_measured.py
    python benchmarks/skip_layer_norm_choice.py --check    # exit 1 when the committed table is not what the rows give

The rows are linear_epilogue_bench.py's (benchmark `skip_layer_norm`, shape `<model> <rows>x<channels>`, metric
`us`): the export's MatMul, bias Add, residual Add and LayerNormalization (`export`) against the MatMul and ORT's
SkipLayerNormalization (`skip_layer_norm`) in onnxruntime-gpu's CUDA EP, on one device (the newest row of each shape
and provider). Per dtype and form, the speed-up is the geometric mean over the measured shapes of the form's time
over the fused one's; the rewrite writes the fused node where it is at least 1
(runtime/ortlib/rewrite/skip_layer_norm.py).
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks import choice_table  # noqa: E402
from benchmarks.results import RESULTS  # noqa: E402

TABLE = ROOT / "runtime" / "ortlib" / "rewrite" / "skip_layer_norm_measured.py"
DEVICE = "NVIDIA H200"
FORMS = ("export",)


def speedups(path: Path = RESULTS, device: str = DEVICE) -> dict[str, dict[str, float]]:
    """{dtype: {form: geometric mean over shapes of the form's us / the fused node's us}}."""
    return choice_table.fused_speedups(path, device, "skip_layer_norm", "skip_layer_norm", FORMS)


def module_text(table: dict[str, dict[str, float]], device: str = DEVICE) -> str:
    return choice_table.form_table_text([
        '"""ORT\'s SkipLayerNormalization against the export\'s Linear bias, residual '
        'Add and LayerNormalization (written by',
        "benchmarks/skip_layer_norm_choice.py from benchmarks/results/results.csv; do "
        "not edit): the geometric mean over",
        f"the measured shapes of the export's time over the fused node's, {device}, onnxruntime-gpu's CUDA EP. The",
        'rewrite writes SkipLayerNormalization for a dtype whose speed-up is at least 1."""'], table, device)


def main(argv=None) -> int:
    return choice_table.run(argv, __doc__.splitlines()[0], TABLE, DEVICE, speedups, module_text, "skip_layer_norm",
                            choice_table.form_summary)


if __name__ == "__main__":
    sys.exit(main())
