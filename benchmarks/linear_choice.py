"""Where the rewrite writes the library's Linear: derived from the committed measurements.

    python benchmarks/linear_choice.py          # writes runtime/ortlib/rewrite/linear_measured.py
    python benchmarks/linear_choice.py --check  # exit 1 when the committed table is not what the rows give

The rows are linear_bench.py's (benchmark `linear`, shape `<epilogue> <model> <M>x<K>x<N>`, metric `us`): the
export's MatMul and bias Add, or MatMul and ORT's FastGelu with the bias (`export`), against the library's Linear
(`tritonforge`) in onnxruntime-gpu's CUDA EP with ORT's graph optimizations on, on one device (the newest row of each
shape and provider). Per dtype and epilogue, the library's speed-up is the geometric mean over the measured shapes of
the export's time over the library's; the rewrite writes Linear where it is at least 1
(runtime/ortlib/rewrite/linear.py).
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks import choice_table  # noqa: E402
from benchmarks.results import RESULTS  # noqa: E402

TABLE = ROOT / "runtime" / "ortlib" / "rewrite" / "linear_measured.py"
DEVICE = "NVIDIA H100 80GB HBM3"


def speedups(path: Path = RESULTS, device: str = DEVICE) -> dict[str, dict[str, float]]:
    """{dtype: {epilogue: geometric mean over shapes of the export's us / the library's us}}."""
    return choice_table.labelled_speedups(path, device, "linear")


def module_text(table: dict[str, dict[str, float]], device: str = DEVICE) -> str:
    return choice_table.form_table_text([
        '"""The library\'s Linear against ORT running the export\'s MatMul and bias Add (and the FastGelu after them)',
        "(written by benchmarks/linear_choice.py from benchmarks/results/results.csv; do not edit): the geometric mean "
        "over",
        f"the measured shapes of the export's time over the library's, per epilogue, on the {device},",
        "onnxruntime-gpu's CUDA EP. The rewrite writes Linear for a dtype and epilogue whose speed-up is at least 1; "
        "one",
        'with no rows keeps the export\'s nodes."""'], table, device)


def main(argv=None) -> int:
    return choice_table.run(argv, __doc__.splitlines()[0], TABLE, DEVICE, speedups, module_text, "linear",
                            choice_table.form_summary)


if __name__ == "__main__":
    sys.exit(main())
