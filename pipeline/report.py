"""Progress bar and summary table for long builds (rich), shared by the CLIs and invoke tasks."""

from __future__ import annotations

import contextlib
import sys

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from tritonforge.pipeline.builds.dist import BuildReport

console = Console(stderr=True)


@contextlib.contextmanager
def compile_progress(enabled: bool = True):
    """Yields a callback for pipeline.builds.dist's progress events."""
    if not enabled:
        yield None
        return
    bar = Progress(TextColumn("[bold]compile"), BarColumn(), MofNCompleteColumn(),
                   TextColumn("{task.fields[last]}"), TimeElapsedColumn(), console=console,
                   transient=not sys.stderr.isatty())
    with bar:
        task = bar.add_task("compile", total=None, last="")

        def on_event(event, **info):
            if event == "plan":
                bar.update(task, total=info["total"], completed=info["cached"],
                           last=f"{info['cached']} cached")
            elif event == "done":
                bar.update(task, advance=1, last=f"{info['target']}/{info['name']}")

        yield on_event


def summary_table(report: BuildReport) -> Table:
    table = Table(title=f"triton {report.triton_version}: {report.seconds:.1f} s")
    for col in ("target", "kernels", "compiled", "cached", "cpu s", "archive B"):
        table.add_column(col, justify="left" if col == "target" else "right", no_wrap=True)
    for t in report.targets:
        table.add_row(f"{t.target.platform}/{t.target.arch_name}", str(t.kernels), str(t.compiled),
                      str(t.cached), f"{t.compile_seconds:.1f}", f"{t.archive_bytes:,}")
    for m in report.multi:
        table.add_row(f"{m.platform}/multi ({'+'.join(m.archs)})", str(m.kernels), "", "", "", f"{m.archive_bytes:,}")
    return table


def print_summary(report: BuildReport) -> None:
    console.print(summary_table(report))
    for t in report.targets:
        console.print(f"{t.target.arch_name}: {t.paths['archive'].parent}", highlight=False)
        groups = t.not_ort_launchable
        if groups:
            n = sum(map(len, groups.values()))
            console.print(f"[yellow]warning[/]: {t.target.arch_name}: {n} kernels that ORT's plain launch cannot "
                          f"run (ort_notes in kernels.json says why), in {len(groups)} groups: "
                          f"{', '.join(groups)}", highlight=False)
    for m in report.multi:
        if m.paths:
            console.print(f"multi: {m.paths['archive'].parent}", highlight=False)
        for i, line in enumerate(m.warnings()):
            console.print(f"[yellow]warning[/]: {escape(line)}" if i == 0 else escape(line), highlight=False,
                          soft_wrap=True)
