"""What the rewrite's measured-table scripts share (softmax_choice.py, attention_choice.py): read the rows,
then write the table module or, with --check, compare it with the committed one."""

from __future__ import annotations

import argparse
import csv
import math
import sys
import textwrap
from pathlib import Path

from benchmarks.results import RESULTS

ROOT = Path(__file__).resolve().parent.parent


def run(argv, description: str, table_path: Path, device: str, speedups, module_text, what: str, summary) -> int:
    """speedups(results, device) -> table; module_text(table, device) -> the module; summary(table) -> lines."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--results", type=Path, default=RESULTS)
    ap.add_argument("--device", default=device)
    ap.add_argument("--check", action="store_true", help="compare with the committed table instead of writing it")
    ap.add_argument("--allow-drop", action="store_true",
                    help="write the table even where it loses a dtype the committed one has (that dtype then keeps "
                         "ORT's nodes)")
    args = ap.parse_args(argv)
    table = speedups(args.results, args.device)
    if not table:
        raise SystemExit(f"error: {args.results} has no {what} rows for {args.device}")
    text = module_text(table, args.device)
    name = table_path.relative_to(ROOT) if table_path.is_relative_to(ROOT) else table_path
    lost = [] if args.check or args.allow_drop or not table_path.exists() else dropped(table_path.read_text(), text)
    if lost:  # another device's rows with fewer dtypes: every model of that dtype would lose the fused node
        print(f"error: {name} would lose {', '.join(lost)}: {args.results} has no such {what} rows for "
              f"{args.device} (--allow-drop writes it anyway)", file=sys.stderr)
        return 1
    if args.check:
        if table_path.read_text() != text:
            print(f"{name} differs from what {args.results} gives: run python benchmarks/{Path(sys.argv[0]).name}",
                  file=sys.stderr)
            return 1
        print(f"{name} is what {args.results} gives")
        return 0
    from tritonforge.atomic import write_text

    write_text(table_path, text)
    for line in summary(table):
        print(line)
    return 0


def dropped(old: str, new: str) -> list[str]:
    """The dtypes a table module's text `old` holds in SPEEDUP (and LIBRARY) that `new` does not, as "SPEEDUP fp32"."""
    def dtypes(text: str) -> dict[str, set]:
        scope: dict = {}
        exec(text, scope)  # a module this package wrote: DEVICE and its dicts
        return {k: set(scope[k]) for k in ("SPEEDUP", "LIBRARY") if isinstance(scope.get(k), dict)}

    was, now = dtypes(old), dtypes(new)
    return [f"{k} {dt}" for k, keys in was.items() for dt in sorted(keys - now.get(k, set()))]


def newest_rows(path: Path, device: str, benchmark: str, metric: str = "us") -> dict[tuple, dict]:
    """{(shape, dtype, provider): the newest row} of one benchmark's `metric` rows on `device`."""
    newest: dict[tuple, dict] = {}
    with Path(path).open(newline="") as f:
        for row in csv.DictReader(f):
            if row["benchmark"] != benchmark or row["device"] != device or row["metric"] != metric:
                continue
            key = (row["shape"], row["dtype"], row["provider"])
            if key not in newest or row["timestamp"] >= newest[key]["timestamp"]:
                newest[key] = row
    return newest


def fused_speedups(path: Path, device: str, benchmark: str, fused: str, forms) -> dict[str, dict[str, float]]:
    """{dtype: {form: geometric mean over shapes of the form's us / the `fused` provider's us}} of a benchmark whose
    rows have one provider per form (the export's nodes) and one for the node the rewrite writes."""
    newest = newest_rows(path, device, benchmark)
    ratios: dict[str, dict[str, list[float]]] = {}
    for (shape, dtype, provider), row in newest.items():
        one = newest.get((shape, dtype, fused))
        if provider in forms and one is not None:
            ratios.setdefault(dtype, {}).setdefault(provider, []).append(float(row["value"]) / float(one["value"]))
    return geomeans(ratios)


def per_dtype(device: str, speedups_of) -> dict:
    """{dtype: its entry} of `speedups_of(one device)` for each of the comma-separated `device`s in turn: a dtype
    takes the first device's that has rows of it (a newer GPU's rows, and an older one's for the dtypes it lacks)."""
    table: dict = {}
    for one in device.split(","):
        for dtype, entry in speedups_of(one.strip()).items():
            table.setdefault(dtype, entry)
    return dict(sorted(table.items()))


def device_said(device: str) -> str:
    """A comma-separated device list as a table's text says it: "A, else B"."""
    return ", else ".join(d.strip() for d in device.split(","))


def labelled_speedups(path: Path, device: str, benchmark: str) -> dict[str, dict[str, float]]:
    """{dtype: {form: geometric mean over shapes of the `export` provider's us / the `tritonforge` provider's us}} of a
    benchmark whose shape labels start with the form (`<form> <model> <dims>`)."""
    newest = newest_rows(path, device, benchmark)
    ratios: dict[str, dict[str, list[float]]] = {}
    for (shape, dtype, provider), row in newest.items():
        ours = newest.get((shape, dtype, "tritonforge"))
        if provider == "export" and ours is not None:
            ratios.setdefault(dtype, {}).setdefault(shape.split()[0], []).append(
                float(row["value"]) / float(ours["value"]))
    return geomeans(ratios)


def geomeans(ratios: dict[str, dict[str, list[float]]]) -> dict[str, dict[str, float]]:
    """{dtype: {key: [ratio, ...]}} -> {dtype: {key: geometric mean, 3 decimals}}, sorted."""
    return {dt: {k: round(math.exp(sum(map(math.log, v)) / len(v)), 3) for k, v in sorted(by.items())}
            for dt, by in sorted(ratios.items())}


def docstring(text: str) -> list[str]:
    """`text` as a generated module's docstring: its lines, quotes included, wrapped to the project's 120 columns
    whatever the device's name adds."""
    return textwrap.wrap(f'"""{text}"""', width=120, break_on_hyphens=False)


def form_table_text(doc: list[str], table: dict[str, dict[str, float]], device: str) -> str:
    """A *_measured.py module of per-form speed-ups: `doc` (its docstring's lines, quotes included), DEVICE, and
    SPEEDUP = {dtype: {form: speed-up}}."""
    lines = [*doc, "", f'DEVICE = "{device}"', "SPEEDUP = {"]
    lines += [f'    "{dtype}": {by!r},' for dtype, by in table.items()]
    lines.append("}")
    return "\n".join(lines) + "\n"


def form_summary(table: dict[str, dict[str, float]]) -> list[str]:
    return [f"{dtype}: " + ", ".join(f"{form} {v}x" for form, v in by.items()) for dtype, by in table.items()]
