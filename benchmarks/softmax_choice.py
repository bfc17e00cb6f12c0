"""Where the rewrite hands a softmax to the library: derived from the committed measurements.

    python benchmarks/softmax_choice.py            # writes runtime/ortlib/rewrite/softmax_measured.py
    python benchmarks/softmax_choice.py --check    # exit 1 when the committed table is not what the rows give

The rows are `ortlib_bench.py --ops softmax`'s (benchmark `ortlib`, shape `softmax RxC`, metric `us`): the
library's Softmax against ORT's own in onnxruntime-gpu's CUDA EP, per shape of the zoo, on one device (the
newest row of each shape and provider). Per dtype and row length, the library's speed-up is the geometric
mean over the measured row counts of ORT's time over the library's; the rewrite takes a softmax whose row
length's nearest measured length (on a log scale) has a speed-up of at least 1 (runtime/ortlib/rewrite).
"""

from __future__ import annotations

import csv
import math
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks import choice_table  # noqa: E402
from benchmarks.results import RESULTS  # noqa: E402

TABLE = ROOT / "runtime" / "ortlib" / "rewrite" / "softmax_measured.py"
DEVICE = "NVIDIA H200"
SHAPE = re.compile(r"softmax (\d+)x(\d+)")


def speedups(path: Path = RESULTS, device: str = DEVICE) -> dict[str, dict[int, float]]:
    """{dtype: {row length: geometric mean over row counts of ORT's us / the library's us}}."""
    newest: dict[tuple, dict] = {}
    with path.open(newline="") as f:
        for row in csv.DictReader(f):
            if row["benchmark"] != "ortlib" or row["device"] != device or row["metric"] != "us":
                continue
            if row["provider"] not in ("ort", "tritonforge") or not SHAPE.fullmatch(row["shape"]):
                continue
            key = (row["shape"], row["dtype"], row["provider"])
            if key not in newest or row["timestamp"] >= newest[key]["timestamp"]:
                newest[key] = row
    logs: dict[str, dict[int, list[float]]] = {}
    for (shape, dtype, provider), row in newest.items():
        other = newest.get((shape, dtype, "tritonforge"))
        if provider != "ort" or other is None:
            continue
        cols = int(SHAPE.fullmatch(shape).group(2))
        logs.setdefault(dtype, {}).setdefault(cols, []).append(math.log(float(row["value"]) / float(other["value"])))
    return {dt: {c: round(math.exp(sum(v) / len(v)), 3) for c, v in sorted(by.items())}
            for dt, by in sorted(logs.items())}


def module_text(table: dict[str, dict[int, float]], device: str = DEVICE) -> str:
    lines = ['"""The library\'s Softmax against ORT\'s own per row length (written by benchmarks/softmax_choice.py',
             'from benchmarks/results/results.csv; do not edit): the geometric mean over the measured row counts of',
             f"ORT's time over the library's, {device}, onnxruntime-gpu's CUDA EP. The rewrite hands a softmax to the",
             'library where the nearest measured row length has a speed-up of at least 1."""', "",
             f'DEVICE = "{device}"', "SPEEDUP = {"]
    for dtype, by in table.items():
        items = [f"{c}: {v}" for c, v in by.items()]
        rows = [", ".join(items[i:i + 7]) for i in range(0, len(items), 7)]
        lines.append(f'    "{dtype}": {{' + (",\n" + " " * 13).join(rows) + "},")
    lines.append("}")
    return "\n".join(lines) + "\n"


def summary(table) -> list[str]:
    return [f"{dtype}: library from " + ", ".join(f"{c} ({v}x)" for c, v in by.items() if v >= 1)
            for dtype, by in table.items()]


def main(argv=None) -> int:
    return choice_table.run(argv, __doc__.splitlines()[0], TABLE, DEVICE, speedups, module_text, "ortlib softmax",
                            summary)


if __name__ == "__main__":
    sys.exit(main())
