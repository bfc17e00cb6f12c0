"""One long-format results file (benchmarks/results/results.csv) shared by every benchmark script.

A run replaces its own earlier rows (same benchmark and device) and keeps everyone else's.
"""

from __future__ import annotations

import csv
import datetime as _dt
import shlex
import sys
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results" / "results.csv"
COLUMNS = ["benchmark", "device", "provider", "shape", "dtype", "metric", "unit", "value", "extra",
           "command", "timestamp"]


def command_line() -> str:
    return "python " + " ".join(shlex.quote(a) for a in sys.argv)


def write_rows(benchmark: str, device: str, rows: list[dict], path: Path | str = RESULTS) -> Path:
    path = Path(path)
    keep = []
    if path.exists():
        with path.open(newline="") as f:
            keep = [r for r in csv.DictReader(f) if (r["benchmark"], r["device"]) != (benchmark, device)]
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    cmd = command_line()
    new = [{c: "" for c in COLUMNS} | {"benchmark": benchmark, "device": device, "command": cmd,
                                       "timestamp": stamp} | r for r in rows]
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    with tmp.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS)
        w.writeheader()
        w.writerows(keep + new)
    tmp.replace(path)
    return path
