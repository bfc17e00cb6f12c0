"""A small copy of kernels/ for tests: every real script and helper, each table cut to a few kernels
per group.

Each script is copied as it is, with a footer that wraps its get_function_table(): per group it keeps
the first entry and the first entry of every jit function the group uses. Every script, group, launch
contract, jit function, helper import and PLATFORMS / MIN_SM / MAX_SM declaration is compiled and
checked; the tuning variants are not (the `full` tests build those).
"""

from __future__ import annotations

import shutil
from pathlib import Path

FOOTER = '''

# --- tests/kernel_subset.py: the first entry per group, and one entry per jit function ---
def _subset(table):
    groups = {}
    for entry in table:
        groups.setdefault(entry["group"], []).append(entry)
    keep = set()
    for entries in groups.values():
        keep.add(id(entries[0]))
        funcs = {}
        for entry in entries:
            funcs.setdefault(entry["func"], id(entry))
        keep.update(funcs.values())
    return [entry for entry in table if id(entry) in keep]


get_function_table = (lambda full: lambda: _subset(full()))(get_function_table)
'''


def write_subset(src: Path, dest: Path) -> Path:
    """Copy `src`'s scripts (with the footer) and helpers (`_*.py`, unchanged) into `dest`."""
    dest.mkdir(parents=True, exist_ok=True)
    for path in sorted(Path(src).glob("*.py")):
        if path.name.startswith("_"):
            shutil.copy(path, dest / path.name)
        else:
            (dest / path.name).write_text(path.read_text() + FOOTER)
    return dest
