"""Where the rewrite writes the library's BiasConcat: derived from the committed measurements.

    python benchmarks/bias_concat_choice.py          # writes runtime/ortlib/rewrite/bias_concat_measured.py
    python benchmarks/bias_concat_choice.py --check  # exit 1 when the committed table is not what the rows give

The rows are bias_concat_bench.py's (benchmark `bias_concat`, shape `<model> <items>x<seq_a>+<seq_b>x<width>`,
metric `us`): the export's two Linears with their bias Adds and the Concat (`joined`) against the two MatMuls and
the library's node (`tritonforge`) in onnxruntime-gpu's CUDA EP, on one device (the newest row of each shape and
provider). Per dtype, the library's speed-up is the geometric mean over the measured shapes of the export's time
over the library's; the rewrite writes BiasConcat where it is at least 1 (runtime/ortlib/rewrite/attention.py).
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks import choice_table  # noqa: E402
from benchmarks.results import RESULTS  # noqa: E402

TABLE = ROOT / "runtime" / "ortlib" / "rewrite" / "bias_concat_measured.py"
DEVICE = "NVIDIA H100 80GB HBM3"


def speedups(path: Path = RESULTS, device: str = DEVICE) -> dict[str, dict[str, float]]:
    """{dtype: {"joined": geometric mean over shapes of the export's us / the library's us}}."""
    return choice_table.fused_speedups(path, device, "bias_concat", "tritonforge", ("joined",))


def module_text(table: dict[str, dict[str, float]], device: str = DEVICE) -> str:
    return choice_table.form_table_text([
        '"""The library\'s BiasConcat against the export\'s bias Adds and Concat of two streams\' Linears (written by',
        "benchmarks/bias_concat_choice.py from benchmarks/results/results.csv; do not edit): the geometric mean over "
        "the",
        f"measured shapes of the export's time over the library's, {device}, onnxruntime-gpu's CUDA EP. The rewrite",
        "writes BiasConcat for a dtype whose speed-up is at least 1; a dtype with no rows keeps the export's "
        'nodes."""'], table, device)


def main(argv=None) -> int:
    return choice_table.run(argv, __doc__.splitlines()[0], TABLE, DEVICE, speedups, module_text, "bias_concat",
                            choice_table.form_summary)


if __name__ == "__main__":
    sys.exit(main())
