"""The build's summary: one row per target and per multi archive, with what was compiled and cached."""

from __future__ import annotations

from rich.console import Console
from tritonforge.pipeline.report import compile_progress, summary_table


def test_the_summary_has_a_row_per_build(built):
    report = built[0]
    console = Console(width=200, record=True)
    console.print(summary_table(report))
    text = console.export_text()
    for t in report.targets:
        row = next(line for line in text.splitlines() if f"{t.target.platform}/{t.target.arch_name} " in line)
        assert f" {t.kernels} " in row and f"{t.archive_bytes:,}" in row
    for m in report.multi:
        assert f"{m.platform}/multi ({'+'.join(m.archs)})" in text
    assert f"triton {report.triton_version}" in text


def test_a_quiet_build_has_no_progress_callback():
    with compile_progress(False) as progress:
        assert progress is None
    with compile_progress(True) as progress:
        progress("plan", total=3, cached=1)
        progress("done", target="sm_90", name="k")
