"""One long-format results file (benchmarks/results/results.csv) shared by every benchmark script.

A run replaces its own earlier rows for what it measured (same benchmark, device, shape and dtype)
and keeps everyone else's, so a run over a subset of shapes updates just those.

    python benchmarks/results.py merge OTHER.csv   # fold a results file from a GPU machine in
    python benchmarks/results.py merge OTHER.csv --only torch_compile_max_autotune,tritonforge:speedup_vs_max_autotune

`--only` folds in just the rows of those providers (or provider:metric pairs), each replacing the row of the same
provider and metric and keeping the rest of the earlier run: a later run that measured one more column (a ratio it
took within its own run) adds that column without mixing its other numbers into the earlier run's.
"""

from __future__ import annotations

import csv
import datetime as _dt
import io
import shlex
import sys
from pathlib import Path

from tritonforge.atomic import write_text

RESULTS = Path(__file__).resolve().parent / "results" / "results.csv"
COLUMNS = ["benchmark", "device", "provider", "shape", "dtype", "metric", "unit", "value", "extra",
           "command", "timestamp"]


def command_line() -> str:
    return "python " + " ".join(shlex.quote(a) for a in sys.argv)


def _key(row: dict) -> tuple:
    return row["benchmark"], row["device"], row.get("shape", ""), row.get("dtype", "")


def read_rows(path: Path) -> list[dict]:
    """The rows of a results file (none where it does not exist)."""
    if not path.exists():
        return []
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def _replace(path: Path, new: list[dict]) -> Path:
    """Write `new` into `path`, dropping earlier rows with the same key; atomic (temp file + rename)."""
    measured = {_key(r) for r in new}
    keep = [r for r in read_rows(path) if _key(r) not in measured]
    text = io.StringIO(newline="")
    w = csv.DictWriter(text, fieldnames=COLUMNS)
    w.writeheader()
    w.writerows(keep + new)
    return write_text(path, text.getvalue())


def write_rows(benchmark: str, device: str, rows: list[dict], path: Path | str = RESULTS) -> Path:
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    cmd = command_line()
    new = [{c: "" for c in COLUMNS} | {"benchmark": benchmark, "device": device, "command": cmd,
                                       "timestamp": stamp} | r for r in rows]
    return _replace(Path(path), new)


def _selected(row: dict, only: list[str]) -> bool:
    return row["provider"] in only or f"{row['provider']}:{row['metric']}" in only


def merge(src: Path | str, dst: Path | str = RESULTS, only: list[str] | None = None) -> int:
    """Fold the rows of another results file into `dst` (same replacement rule); returns rows merged. `only`:
    just the rows of those providers or provider:metric pairs, each replacing its own provider and metric's row."""
    rows = read_rows(Path(src))
    if rows and set(rows[0]) != set(COLUMNS):
        raise SystemExit(f"error: {src} does not have the columns {COLUMNS}")
    rows = [{c: r[c] for c in COLUMNS} for r in rows]
    if only is None:
        _replace(Path(dst), rows)
        return len(rows)
    rows = [r for r in rows if _selected(r, only)]
    if not rows:
        raise SystemExit(f"error: {src} has no rows of {','.join(only)}")
    cell = lambda r: (_key(r), r["provider"], r["metric"])  # noqa: E731
    taken = {cell(r) for r in rows}
    keep = [r for r in read_rows(Path(dst)) if cell(r) not in taken]
    text = io.StringIO(newline="")
    w = csv.DictWriter(text, fieldnames=COLUMNS)
    w.writeheader()
    w.writerows(keep + rows)
    write_text(Path(dst), text.getvalue())
    return len(rows)


if __name__ == "__main__":
    args = sys.argv[1:]
    only = None
    if len(args) == 4 and args[2] == "--only":
        only, args = [s for s in args[3].split(",") if s], args[:2]
    if len(args) != 2 or args[0] != "merge":
        raise SystemExit("usage: python benchmarks/results.py merge OTHER.csv [--only PROVIDER[:METRIC],...]")
    print(f"merged {merge(args[1], only=only)} rows into {RESULTS}")
