"""Per-model tables of the zoo benchmark, read back from the results file, and the targets checked.

    python benchmarks/zoo_report.py [--results benchmarks/results/results.csv] [--device "NVIDIA H200"]
        [--model all] [--dtypes fp16,fp32]

For each model of runtime/zoo.py, batch and dtype: one row per shape (ORT's group, runtime best, ORT's
own, torch, copy, the copies on ORT's grid, in us) with totals over one forward pass, then the targets:
ORT's group at least as fast as ORT's own kernel on every shape and 1.3x it at the median, except where
ORT's own kernel is launch-bound (within 2 us of an empty kernel's launch, `zoo_floor`) and ours no
slower, or where ORT's group is within 1.1x of the tuned copy on ORT's grid (one pass where ORT's kernels
hold a group on chip, two otherwise); the runtime best 1.5x (GroupNorm) / 1.2x (softmax) ORT's own; the
tuner's pick within 3% of the exhaustive best. Shapes the results file lacks are named as missing.
"""

from __future__ import annotations

import argparse
import csv
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tritonforge.runtime import zoo  # noqa: E402

from benchmarks.results import RESULTS  # noqa: E402

LAUNCH_BOUND_US = 2.0
ON_CHIP_VALUES = 32768  # as benchmarks/zoo_bench.py: a group ORT's kernels read once
COLUMNS = ("ort_group", "best", "ort_own", "torch", "copy")
HEAD = ("| shape | x | ORT's group | runtime best | ORT's own | torch | copy | ORT-grid copy x1 / x2 "
        "| ORT's group vs own |")


def load(path: Path, device: str) -> dict:
    """{(benchmark, shape, dtype): {provider: {metric: value}}} of one device's rows."""
    out: dict = {}
    with path.open(newline="") as f:
        for row in csv.DictReader(f):
            if row["device"] != device or not row["benchmark"].startswith("zoo_"):
                continue
            cell = out.setdefault((row["benchmark"], row["shape"], row["dtype"]), {})
            cell.setdefault(row["provider"], {})[row["metric"]] = float(row["value"])
    return out


def shapes_of(model, batch: int):
    """(benchmark, label, count, on_chip, what) of every shape of the model at `batch`."""
    for s in model.group_norm:
        label = f"{batch}x{s.side}x{s.side}x{s.c}"
        yield ("zoo_group_norm" if s.silu else "zoo_group_norm_pass", label, s.count,
               s.side * s.side * (s.c // zoo.GROUPS) <= ON_CHIP_VALUES, f"GroupNorm{'+SiLU' if s.silu else ''} {label}")
    for s in model.softmax:
        label = "x".join(map(str, s.problem(batch)))
        yield "zoo_softmax", label, s.count, True, f"softmax {label}"


def verdict(us: dict, on_chip: bool, floor_us: float) -> tuple[str, bool]:
    """(text, met) for ORT's group against ORT's own kernel on one shape."""
    ort, own = us.get("ort_group"), us.get("ort_own")
    if ort is None or own is None:
        return "not measured", False
    if ort <= own:
        return f"wins {own / ort:.2f}x", True
    ceiling = us.get("grid_copy" if on_chip else "grid_copy2")
    if own <= floor_us + LAUNCH_BOUND_US:
        return f"{own / ort:.2f}x, launch-bound", False
    if ceiling and ort <= 1.1 * ceiling:
        return f"{own / ort:.2f}x; {ort / ceiling:.2f}x the ORT-grid copy (ceiling met)", True
    return f"{own / ort:.2f}x" + (f"; {ort / ceiling:.2f}x the ORT-grid copy" if ceiling else ""), False


def report(data: dict, models, dtypes, floor_us: float, batches=None) -> tuple[str, dict]:
    """(markdown tables, target statistics) of the models at `batches` (default: each model's own)."""
    lines, stats = [], {"ort_ratio": [], "ort_missed": [], "best_missed": [], "tuned_missed": [], "missing": []}
    for model in models:
        for batch in batches or model.batches:
            for dtype in dtypes:
                rows, totals, absent = [], dict.fromkeys(COLUMNS, 0.0), set()
                for bench, label, count, on_chip, what in shapes_of(model, batch):
                    cell = data.get((bench, label, dtype))
                    if not cell:
                        stats["missing"].append(f"{model.name} {dtype} {what}")
                        continue
                    us = {p: m["us"] for p, m in cell.items() if "us" in m}
                    for key in COLUMNS:
                        if key in us:
                            totals[key] += count * us[key]
                        else:
                            absent.add(key)
                    text, met = verdict(us, on_chip, floor_us)
                    where = f"{model.name} {dtype} {what}"
                    if "ort_group" in us and "ort_own" in us:
                        stats["ort_ratio"].append(us["ort_own"] / us["ort_group"])
                        if not met:
                            stats["ort_missed"].append(f"{where}: {text}")
                    need = 1.5 if bench.startswith("zoo_group_norm") else 1.2
                    if "best" in us and "ort_own" in us and us["ort_own"] / us["best"] < need:
                        stats["best_missed"].append(f"{where}: {us['ort_own'] / us['best']:.2f}x (target {need}x)")
                    ratio = cell.get("tuned", {}).get("tuned_vs_best")
                    if ratio and ratio > 1.03:
                        stats["tuned_missed"].append(f"{where}: {ratio:.3f}")
                    grid = " / ".join(f"{us[k]:.2f}" for k in ("grid_copy", "grid_copy2") if k in us) or "-"
                    cells = " | ".join(f"{us[k]:.2f}" if k in us else "-" for k in COLUMNS)
                    rows.append(f"| {what} | {count} | {cells} | {grid} | {text} |")
                if not rows:
                    continue
                tot = " | ".join("-" if k in absent else f"**{totals[k]:.1f}**" for k in COLUMNS)
                lines += [f"**{model.title}: {model.batch_is}s = {batch}, {dtype}**", "", HEAD,
                          "| --- | --- | --- | --- | --- | --- | --- | --- | --- |", *rows,
                          f"| **total (us)** | | {tot} | | |", ""]
    return "\n".join(lines), stats


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--results", default=str(RESULTS))
    ap.add_argument("--device", default="NVIDIA H200")
    ap.add_argument("--model", default="all")
    ap.add_argument("--dtypes", default="fp16,fp32")
    ap.add_argument("--floor-us", type=float, help="an empty kernel's launch (default: the zoo_floor row)")
    args = ap.parse_args(argv)
    try:
        models = [m for name in args.model.split(",") for m in zoo.models(name)]
    except KeyError as exc:
        raise SystemExit(f"error: {exc.args[0]}") from None
    path = Path(args.results)
    if not path.is_file():
        raise SystemExit(f"error: no results file at {path}")
    data = load(path, args.device)
    floor = args.floor_us
    if floor is None:
        rows = [v for (b, _, _), cell in data.items() if b == "zoo_floor" for v in [cell.get("empty_kernel", {})]]
        if not rows or "us" not in rows[0]:
            raise SystemExit(f"error: {path} has no zoo_floor row for {args.device}: give --floor-us")
        floor = rows[0]["us"]
    text, stats = report(data, models, args.dtypes.split(","), floor)
    print(f"<!-- made by: python benchmarks/zoo_report.py {' '.join(argv if argv is not None else sys.argv[1:])} -->\n")
    print(text)
    ratios = stats["ort_ratio"]
    if ratios:
        print(f"ORT's group vs ORT's own: median {statistics.median(ratios):.2f}x over {len(ratios)} shapes, "
              f"{sum(r >= 1 for r in ratios)} at least as fast; {len(stats['ort_missed'])} below target "
              f"and past the ORT-grid ceiling:")
        print("".join(f"  {m}\n" for m in stats["ort_missed"]), end="")
    print(f"runtime best below 1.5x (GroupNorm) / 1.2x (softmax) ORT's own: {len(stats['best_missed'])}")
    print("".join(f"  {m}\n" for m in stats["best_missed"]), end="")
    print(f"tuner's pick more than 3% over the exhaustive best: {len(stats['tuned_missed'])}")
    print("".join(f"  {m}\n" for m in stats["tuned_missed"]), end="")
    if stats["missing"]:
        print(f"not in the results file: {len(stats['missing'])}")
        print("".join(f"  {m}\n" for m in stats["missing"]), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
