"""The rewrite's shipped choice tables, derived from the committed measurements: one data file for every pattern and
every GPU that measured it.

    python benchmarks/choices.py            # writes runtime/ortlib/rewrite/choices.json
    python benchmarks/choices.py --check    # exit 1 when the committed file is not what the rows give

Each table is declared once in TABLES: the benchmark whose rows measure it (metric `us`, the newest row of each
shape, dtype and provider on each device) and how a speed-up is read from them. A speed-up is a geometric mean over
the measured shapes of the rival's time over the node the rewrite writes; the rewrite writes that node where it is
at least 1 (runtime/ortlib/rewrite/choices.py picks which GPU's rows decide). Kinds of derivation:
- `labelled`: shapes `<form> <model> <dims>`, the export (`export`) against the library (`tritonforge`), per form
  (ada_layer_norm, linear: the epilogue);
- `fused`: one provider per form of the export's nodes against one fused provider (gelu: ORT's FastGelu;
  skip_layer_norm; bias_concat; bias_split_gelu: ORT's node as SPEEDUP and the library's as LIBRARY);
- `softmax`: ortlib_bench's `softmax RxC` rows, ORT's own against the library per row length;
- `attention`: ORT's MultiHeadAttention and the export's decomposition against the library per class of shape
  (runtime/ortlib/rewrite/attention.py's shape_class);
- `rotary_embedding`: the decomposition against the library, per form (the label's first word when it names an
  RMSNorm form).
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import re
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.results import RESULTS  # noqa: E402

DATA = ROOT / "runtime" / "ortlib" / "rewrite" / "choices.json"
SOFTMAX_SHAPE = re.compile(r"softmax (\d+)x(\d+)")
ATTENTION_SHAPE = re.compile(r"attention b(\d+) h(\d+) sq(\d+) skv(\d+) d(\d+)")


@dataclass(frozen=True)
class Spec:
    benchmark: str
    kind: str  # labelled, fused, softmax, attention, rotary_embedding
    fused: tuple = ()  # fused: (table key, the fused provider) pairs
    forms: tuple = ()  # fused: the export's providers; rotary_embedding: the label words that name a form


TABLES = {
    "ada_layer_norm": Spec("ada_layer_norm", "labelled"),
    "attention": Spec("attention", "attention", forms=("ort_mha", "decomposed")),
    "bias_concat": Spec("bias_concat", "fused", (("SPEEDUP", "tritonforge"),), ("joined",)),
    "bias_split_gelu": Spec("bias_split_gelu", "fused", (("SPEEDUP", "bias_split_gelu"), ("LIBRARY", "tritonforge")),
                            ("decomposed", "onnx_gelu")),
    "gelu": Spec("gelu", "fused", (("SPEEDUP", "fast_gelu"),), ("decomposed", "onnx_gelu")),
    "linear": Spec("linear", "labelled"),
    "rotary_embedding": Spec("rotary_embedding", "rotary_embedding", forms=("rms", "rms_joined")),
    "skip_layer_norm": Spec("skip_layer_norm", "fused", (("SPEEDUP", "skip_layer_norm"),), ("export",)),
    "softmax": Spec("ortlib", "softmax"),
}


def newest_rows(rows: list[dict], device: str, benchmark: str) -> dict[tuple, dict]:
    """{(shape, dtype, provider): the newest `us` row} of one benchmark on `device`."""
    newest: dict[tuple, dict] = {}
    for row in rows:
        if row["benchmark"] != benchmark or row["device"] != device or row["metric"] != "us":
            continue
        key = (row["shape"], row["dtype"], row["provider"])
        if key not in newest or row["timestamp"] >= newest[key]["timestamp"]:
            newest[key] = row
    return newest


def geomeans(ratios: dict) -> dict:
    """{dtype: {key: [ratio, ...]}} -> {dtype: {key: geometric mean, 3 decimals}}, sorted; nested deeper alike."""
    def mean(v):
        if isinstance(v, dict):
            return {k: mean(x) for k, x in sorted(v.items())}
        return round(math.exp(sum(map(math.log, v)) / len(v)), 3)

    return {dt: mean(by) for dt, by in sorted(ratios.items())}


def derive(spec: Spec, newest: dict[tuple, dict]) -> dict[str, dict]:
    """{"SPEEDUP": {dtype: ...}, ["LIBRARY": ...]} of one device's newest rows; {} where they measure nothing."""
    def us(shape, dtype, provider):
        row = newest.get((shape, dtype, provider))
        return float(row["value"]) if row else None

    tables: dict[str, dict] = {}
    for (shape, dtype, provider), row in newest.items():
        value = float(row["value"])
        if spec.kind == "labelled" and provider == "export" and us(shape, dtype, "tritonforge"):
            tables.setdefault("SPEEDUP", {}).setdefault(dtype, {}).setdefault(shape.split()[0], []).append(
                value / us(shape, dtype, "tritonforge"))
        elif spec.kind == "fused" and provider in spec.forms:
            for key, fused in spec.fused:
                if us(shape, dtype, fused):
                    tables.setdefault(key, {}).setdefault(dtype, {}).setdefault(provider, []).append(
                        value / us(shape, dtype, fused))
        elif spec.kind == "softmax" and provider == "ort" and SOFTMAX_SHAPE.fullmatch(shape) \
                and us(shape, dtype, "tritonforge"):
            cols = int(SOFTMAX_SHAPE.fullmatch(shape).group(2))
            tables.setdefault("SPEEDUP", {}).setdefault(dtype, {}).setdefault(cols, []).append(
                value / us(shape, dtype, "tritonforge"))
        elif spec.kind == "attention" and provider in spec.forms and ATTENTION_SHAPE.fullmatch(shape) \
                and us(shape, dtype, "tritonforge"):
            from tritonforge.runtime.ortlib.rewrite.attention import shape_class

            _, _, sq, skv, d = (int(v) for v in ATTENTION_SHAPE.fullmatch(shape).groups())
            tables.setdefault("SPEEDUP", {}).setdefault(dtype, {}).setdefault(shape_class(sq, skv, d), {}) \
                .setdefault(provider, []).append(value / us(shape, dtype, "tritonforge"))
        elif spec.kind == "rotary_embedding" and provider == "decomposed" and us(shape, dtype, "tritonforge"):
            form = shape.split()[0] if shape.split()[0] in spec.forms else "decomposed"
            tables.setdefault("SPEEDUP", {}).setdefault(dtype, {}).setdefault(form, []).append(
                value / us(shape, dtype, "tritonforge"))
    return {key: geomeans(by) for key, by in sorted(tables.items())}


def build(path: Path = RESULTS) -> dict:
    """The data file's document: every table of TABLES, per device with rows of its benchmark."""
    with Path(path).open(newline="") as f:
        rows = list(csv.DictReader(f))
    tables: dict[str, dict] = {}
    for name, spec in TABLES.items():
        devices = sorted({r["device"] for r in rows if r["benchmark"] == spec.benchmark and r["metric"] == "us"})
        for device in devices:
            derived = derive(spec, newest_rows(rows, device, spec.benchmark))
            if derived:
                tables.setdefault(name, {})[device] = derived
    return {"about": "The rewrite's measured choices per table and GPU: the library's speed-up over the export's "
                     "nodes or ORT's own op, {dtype: {form: speed-up}} (written by benchmarks/choices.py from "
                     "benchmarks/results/results.csv; do not edit).",
            "tables": tables}


def text(doc: dict) -> str:
    """The file's text: keys as JSON has them (softmax's row lengths as strings), one table level a line or so."""
    def key_order(d: dict) -> dict:
        return {str(k): key_order(v) if isinstance(v, dict) else v
                for k, v in sorted(d.items(), key=lambda kv: (isinstance(kv[0], str), kv[0]))}

    return json.dumps({"about": doc["about"], "tables": key_order(doc["tables"])}, indent=1) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--results", type=Path, default=RESULTS)
    ap.add_argument("--out", type=Path, default=DATA, help="the data file (default: the one the rewrite ships)")
    ap.add_argument("--check", action="store_true", help="compare with the file instead of writing it")
    args = ap.parse_args(argv)
    doc = build(args.results)
    missing = [name for name in TABLES if name not in doc["tables"]]
    if missing:
        print(f"error: {args.results} has no rows for {', '.join(missing)}: every table needs a GPU's rows",
              file=sys.stderr)
        return 1
    new = text(doc)
    shown = args.out.relative_to(ROOT) if args.out.is_relative_to(ROOT) else args.out
    if args.check:
        if not args.out.is_file() or args.out.read_text() != new:
            print(f"{shown} differs from what {args.results} gives: run python benchmarks/choices.py",
                  file=sys.stderr)
            return 1
        print(f"{shown} is what {args.results} gives")
        return 0
    from tritonforge.atomic import write_text

    write_text(args.out, new)
    for name, by_device in doc["tables"].items():
        print(f"{name}: " + "; ".join(f"{device} ({', '.join(sorted(t['SPEEDUP']))})"
                                      for device, t in by_device.items() if "SPEEDUP" in t))
    return 0


if __name__ == "__main__":
    sys.exit(main())
