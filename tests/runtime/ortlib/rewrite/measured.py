"""Tests' view of the rewrite's shipped tables (runtime/ortlib/rewrite/choices.json): set one entry as if every GPU
had measured it so."""

from __future__ import annotations

import copy

from tritonforge.runtime.ortlib.rewrite import choices


def measured_as(monkeypatch, table: str, dtype: str, entries: dict | None, key: str = "SPEEDUP") -> None:
    """choices.table(table) answers `entries` ({form: speed-up}) for `dtype` under `key` (SPEEDUP or LIBRARY) on
    every GPU for the rest of the test; None: `dtype` not measured at all."""
    tables = choices.shipped()
    by_device = copy.deepcopy(tables.get(table)) or {"NVIDIA H100 80GB HBM3": {}}
    for rows in by_device.values():
        if entries is None:
            rows.get(key, {}).pop(dtype, None)
        else:
            rows.setdefault(key, {})[dtype] = dict(entries)
    monkeypatch.setitem(tables, table, by_device)
