"""Where the rewrite writes the library's RotaryEmbedding: derived from the committed measurements.

    python benchmarks/rotary_embedding_choice.py          # writes runtime/ortlib/rewrite/rotary_embedding_measured.py
    python benchmarks/rotary_embedding_choice.py --check  # exit 1 when the committed table is not what the rows give

The rows are rotary_embedding_bench.py's (benchmark `rotary_embedding`, shape `[<form> ]<model> <dims>`, metric
`us`): the export's nodes (`decomposed`) against the library's node (`tritonforge`) in onnxruntime-gpu's CUDA EP,
on one device (the newest row of each shape and provider). Per dtype and form (`decomposed`, the rotation alone,
where the label names none; `rms` and `rms_joined` with the q/k norms before it), the library's speed-up is the
geometric mean over the measured shapes of the export's time over the library's; the rewrite writes
RotaryEmbedding in that form where it is at least 1 (runtime/ortlib/rewrite/rotary_embedding.py).
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks import choice_table  # noqa: E402
from benchmarks.results import RESULTS  # noqa: E402

TABLE = ROOT / "runtime" / "ortlib" / "rewrite" / "rotary_embedding_measured.py"
DEVICE = "NVIDIA H100 80GB HBM3"  # the device its rows were measured on


NORM_FORMS = ("rms", "rms_joined")  # a label's first word; without one the form is the rotation alone


def speedups(path: Path = RESULTS, device: str = DEVICE) -> dict[str, dict[str, float]]:
    """{dtype: {form: geometric mean over shapes of the export's us / the library's us}}."""
    newest = choice_table.newest_rows(path, device, "rotary_embedding")
    ratios: dict[str, dict[str, list[float]]] = {}
    for (shape, dtype, provider), row in newest.items():
        ours = newest.get((shape, dtype, "tritonforge"))
        if provider == "decomposed" and ours is not None:
            form = shape.split()[0] if shape.split()[0] in NORM_FORMS else "decomposed"
            ratios.setdefault(dtype, {}).setdefault(form, []).append(float(row["value"]) / float(ours["value"]))
    return choice_table.geomeans(ratios)


def module_text(table: dict[str, dict[str, float]], device: str = DEVICE) -> str:
    return choice_table.form_table_text([
        '"""The library\'s RotaryEmbedding against the export\'s rotary nodes (written by '
        "benchmarks/rotary_embedding_choice.py",
        "from benchmarks/results/results.csv; do not edit): the geometric mean over the measured shapes of the "
        "export's",
        f"time over the library's, {device}, onnxruntime-gpu's CUDA EP. The rewrite writes RotaryEmbedding",
        'for a dtype whose speed-up is at least 1; a dtype with no rows keeps the export\'s nodes."""'], table, device)


def main(argv=None) -> int:
    return choice_table.run(argv, __doc__.splitlines()[0], TABLE, DEVICE, speedups, module_text, "rotary_embedding",
                            choice_table.form_summary)


if __name__ == "__main__":
    sys.exit(main())
