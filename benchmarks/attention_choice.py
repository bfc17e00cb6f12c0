"""Where the rewrite sends an attention: derived from the committed measurements.

    python benchmarks/attention_choice.py            # writes runtime/ortlib/rewrite/attention_measured.py
    python benchmarks/attention_choice.py --check    # exit 1 when the committed table is not what the rows give

The rows are `attention_bench.py`'s (benchmark `attention`, metric `us`): the library's MultiHeadAttention,
ORT's com.microsoft.MultiHeadAttention (`ort_mha`) and the export's decomposition (`decomposed`) in
onnxruntime-gpu's CUDA EP, per zoo shape, on one device (the newest row of each shape and provider). Per dtype
and class of shape (runtime/ortlib/rewrite/attention.py's shape_class: cross-attention over a short text,
or self-attention per head dim), each rival's time over the library's, the geometric mean over the shapes of
the class; the rewrite writes the fastest of the three.
"""

from __future__ import annotations

import csv
import math
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tritonforge.runtime.ortlib.rewrite.attention import shape_class  # noqa: E402

from benchmarks import choice_table  # noqa: E402
from benchmarks.results import RESULTS  # noqa: E402

TABLE = ROOT / "runtime" / "ortlib" / "rewrite" / "attention_measured.py"
DEVICE = "NVIDIA H200"
SHAPE = re.compile(r"attention b(\d+) h(\d+) sq(\d+) skv(\d+) d(\d+)")
RIVALS = ("ort_mha", "decomposed")


def speedups(path: Path = RESULTS, device: str = DEVICE) -> dict[str, dict[str, dict[str, float]]]:
    """{dtype: {class: {rival: geometric mean of the rival's us / the library's us}}}."""
    newest: dict[tuple, dict] = {}
    with path.open(newline="") as f:
        for row in csv.DictReader(f):
            if row["benchmark"] != "attention" or row["device"] != device or row["metric"] != "us":
                continue
            key = (row["shape"], row["dtype"], row["provider"])
            if SHAPE.fullmatch(row["shape"]) and (key not in newest or row["timestamp"] >= newest[key]["timestamp"]):
                newest[key] = row
    logs: dict[str, dict[str, dict[str, list[float]]]] = {}
    for (shape, dtype, provider), row in newest.items():
        ours = newest.get((shape, dtype, "tritonforge"))
        if provider not in RIVALS or ours is None:
            continue
        _, _, sq, skv, d = (int(v) for v in SHAPE.fullmatch(shape).groups())
        cls = shape_class(sq, skv, d)
        logs.setdefault(dtype, {}).setdefault(cls, {}).setdefault(provider, []).append(
            math.log(float(row["value"]) / float(ours["value"])))
    return {dt: {c: {p: round(math.exp(sum(v) / len(v)), 3) for p, v in sorted(rivals.items())}
                 for c, rivals in sorted(by.items())} for dt, by in sorted(logs.items())}


def module_text(table, device: str = DEVICE) -> str:
    lines = ['"""The library\'s MultiHeadAttention against ORT\'s MultiHeadAttention (ort_mha) and the export\'s',
             'decomposition (decomposed), per class of shape (written by benchmarks/attention_choice.py from',
             'benchmarks/results/results.csv; do not edit): the geometric mean of each rival\'s time over the',
             f"library's, {device}, onnxruntime-gpu's CUDA EP. The rewrite writes the fastest of the three.\"\"\"", "",
             f'DEVICE = "{device}"', "SPEEDUP = {"]
    for dtype, by in table.items():
        lines.append(f'    "{dtype}": {{')
        lines += [f'        "{c}": {rivals!r},' for c, rivals in by.items()]
        lines.append("    },")
    lines.append("}")
    return "\n".join(lines) + "\n"


def summary(table) -> list[str]:
    return [f"{dtype}: " + "; ".join(f"{c}: " + ", ".join(f"{p} {v}x" for p, v in r.items())
                                     for c, r in by.items()) for dtype, by in table.items()]


def main(argv=None) -> int:
    return choice_table.run(argv, __doc__.splitlines()[0], TABLE, DEVICE, speedups, module_text, "attention", summary)

if __name__ == "__main__":
    sys.exit(main())
