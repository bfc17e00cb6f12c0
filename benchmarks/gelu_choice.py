"""Where the rewrite writes ORT's FastGelu: derived from the committed measurements.

    python benchmarks/gelu_choice.py            # writes runtime/ortlib/rewrite/gelu_measured.py
    python benchmarks/gelu_choice.py --check    # exit 1 when the committed table is not what the rows give

The rows are gelu_bench.py's (benchmark `gelu`, shape `gelu <model> <rows>x<width>`, metric `us`): each form
the exporters write (`decomposed`, `onnx_gelu`) against `fast_gelu` in onnxruntime-gpu's CUDA EP, on one device
(the newest row of each shape and provider). Per dtype and form, FastGelu's speed-up is the geometric mean over
the measured shapes of the form's time over FastGelu's; the rewrite writes FastGelu where it is at least 1
(runtime/ortlib/rewrite/gelu.py).
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks import choice_table  # noqa: E402
from benchmarks.results import RESULTS  # noqa: E402

TABLE = ROOT / "runtime" / "ortlib" / "rewrite" / "gelu_measured.py"
DEVICE = "NVIDIA H200"
FORMS = ("decomposed", "onnx_gelu")


def speedups(path: Path = RESULTS, device: str = DEVICE) -> dict[str, dict[str, float]]:
    """{dtype: {form: geometric mean over shapes of the form's us / FastGelu's us}}."""
    return choice_table.fused_speedups(path, device, "gelu", "fast_gelu", FORMS)


def module_text(table: dict[str, dict[str, float]], device: str = DEVICE) -> str:
    return choice_table.form_table_text([
        '"""ORT\'s FastGelu against the export\'s own GELU nodes per form (written by benchmarks/gelu_choice.py',
        "from benchmarks/results/results.csv; do not edit): the geometric mean over the measured MLP shapes of",
        f"the export's time over FastGelu's, {device}, onnxruntime-gpu's CUDA EP. The rewrite writes FastGelu",
        'for a form and dtype whose speed-up is at least 1."""'], table, device)


def main(argv=None) -> int:
    return choice_table.run(argv, __doc__.splitlines()[0], TABLE, DEVICE, speedups, module_text, "gelu",
                            choice_table.form_summary)


if __name__ == "__main__":
    sys.exit(main())
