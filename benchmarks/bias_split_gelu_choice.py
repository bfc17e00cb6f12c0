"""Where the rewrite writes ORT's BiasSplitGelu or the library's: derived from the committed measurements.

    python benchmarks/bias_split_gelu_choice.py            # writes runtime/ortlib/rewrite/bias_split_gelu_measured.py
    python benchmarks/bias_split_gelu_choice.py --check    # exit 1 when the committed table is not what the rows give

The rows are linear_epilogue_bench.py's (benchmark `bias_split_gelu`, shape `<model> <rows>x<channels>`, metric
`us`): each GEGLU form the exporters write (`decomposed`, `onnx_gelu`) against the MatMul and ORT's BiasSplitGelu
(`bias_split_gelu`), and the MatMul and the library's (`tritonforge`), in onnxruntime-gpu's CUDA EP, on one device
(the newest row of each shape and provider). Per fused node, dtype and form, the speed-up is the geometric mean
over the measured shapes of the form's time over the fused one's; the rewrite writes the faster fused node where
its speed-up is at least 1 (runtime/ortlib/rewrite/bias_split_gelu.py).
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks import choice_table  # noqa: E402
from benchmarks.results import RESULTS  # noqa: E402

TABLE = ROOT / "runtime" / "ortlib" / "rewrite" / "bias_split_gelu_measured.py"
DEVICE = "NVIDIA H100 80GB HBM3"
FORMS = ("decomposed", "onnx_gelu")


def speedups(path: Path = RESULTS, device: str = DEVICE) -> dict[str, dict[str, dict[str, float]]]:
    """{"SPEEDUP": ORT's node's, "LIBRARY": the library's}, each {dtype: {form: geometric mean over shapes of the
    form's us / the fused node's us}}; {} without rows."""
    tables = {name: choice_table.fused_speedups(path, device, "bias_split_gelu", provider, FORMS)
              for name, provider in (("SPEEDUP", "bias_split_gelu"), ("LIBRARY", "tritonforge"))}
    return tables if any(tables.values()) else {}


def module_text(tables: dict[str, dict[str, dict[str, float]]], device: str = DEVICE) -> str:
    text = choice_table.form_table_text(choice_table.docstring(
        "ORT's BiasSplitGelu (SPEEDUP) and the library's (LIBRARY) against the export's GEGLU nodes per form (written "
        "by benchmarks/bias_split_gelu_choice.py from benchmarks/results/results.csv; do not edit): the geometric "
        f"mean over the measured shapes of the export's time over the fused node's, {device}, onnxruntime-gpu's CUDA "
        "EP. The rewrite writes the faster of the two for a form and dtype whose speed-up is at least 1."),
        tables["SPEEDUP"], device)
    rows = "".join(f'    "{dtype}": {by!r},\n' for dtype, by in tables["LIBRARY"].items())
    return text + "LIBRARY = {\n" + rows + "}\n"


def summary(tables: dict[str, dict[str, dict[str, float]]]) -> list[str]:
    return [f"{who}: {line}" for name, who in (("SPEEDUP", "ORT's"), ("LIBRARY", "the library's"))
            for line in choice_table.form_summary(tables[name])]


def main(argv=None) -> int:
    return choice_table.run(argv, __doc__.splitlines()[0], TABLE, DEVICE, speedups, module_text, "bias_split_gelu",
                            summary)


if __name__ == "__main__":
    sys.exit(main())
