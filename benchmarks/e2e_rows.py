"""The e2e bench's rows: a run's Result per (model, exporter, dtype), written into a results file (`record`), read
back (`from_rows`), and the tables made from them (`table` for `e2e_bench.py --report`, `headline` for the README's
first screen). No torch, onnxruntime or GPU here: the report is made from results.csv alone."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks.e2e_sides import TOL, _first_line
from benchmarks.results import write_rows

# the torch sides' row names, by mode; torchao-fp8 is torchao's fp8 row-wise recipe compiled with reduce-overhead
TORCH = {"reduce-overhead": "torch_compile", "max-autotune": "torch_compile_max_autotune", "torchao-fp8": "torchao_fp8"}
RATIO_RIVALS = {"speedup_same_settings": "ort_best", "speedup_vs_torch_compile": "torch_compile",
                "speedup_vs_max_autotune": "torch_compile_max_autotune",
                "speedup_vs_torchao_fp8": "torchao_fp8"}  # the ratio rows a run writes
OWN_PROCESS = "own process"  # what a torch row's extra says: timed with nothing else in its process
ORT_SIDES = ("ort", "ort_best", "tritonforge")
FP8_MIN_COSINE = 0.995  # the fp8 rewrite's output against the export's: the bound it is held to before timing


@dataclass
class Result:
    model: str  # with "@<side>" when the image side is not the model's own
    exporter: str  # with ".dynamic" for an export with dynamic axes
    dtype: str
    ms: dict = field(default_factory=dict)  # side ("ort", "ort_best", "tritonforge", TORCH's) -> median wall ms
    ms_events: dict = field(default_factory=dict)  # a torch side -> median ms between CUDA events
    first_s: dict = field(default_factory=dict)  # side ("tritonforge", "tritonforge+tuned", "torch_compile",
    #                                              "torch_compile+warm", ...) -> s from a fresh process to the output
    resize_s: dict = field(default_factory=dict)  # "tritonforge" / "torch_compile" -> s of the first run at `resize`
    resize: str = ""  # "512->768"
    rewritten: int = 0
    left: list = field(default_factory=list)
    diff: float = float("nan")
    breakdown: dict = field(default_factory=dict)  # session -> {kind: ms per run}
    layout_kernels: dict = field(default_factory=dict)  # session -> {layout-conversion kernel: ms per run}
    kernels: dict = field(default_factory=dict)  # session -> {other kind: {its costliest kernels: ms per run}}
    error: str = ""  # what stopped the measurement
    export_error: str = ""  # why onnxruntime refuses the export as it is (then checked against eager torch)
    recorded_speedup: float | None = None  # as a results file holds it: its ms are rounded, the ratio was not
    recorded_over: dict = field(default_factory=dict)  # rival side -> the ratio its run took (a column merged in
    #                                                     from a later run keeps that run's own ratio)
    settings: dict = field(default_factory=dict)  # session -> what ortlib.session applied and dropped, said in a line
    compile_diff: dict = field(default_factory=dict)  # a torch side -> its output against the export's
    compile_error: dict = field(default_factory=dict)  # a torch side -> why it was not timed
    compile_cosine: dict = field(default_factory=dict)  # a torch side -> its output's cosine against the export's
    device: str = ""  # the device it ran on, as its rows name it (set once recorded)
    cosine: float | None = None  # the rewrite's output against the export's, where a bound on it decides (fp8)
    rewrite_s: float | None = None  # how long the rewrite took (with --choices measured, its timing included)
    changed: int | None = None  # with --choices measured: the sites its timing decided unlike the shipped tables

    @property
    def speedup(self) -> float:
        if self.recorded_speedup is not None:
            return self.recorded_speedup
        return self.ms["ort"] / self.ms["tritonforge"] if "ort" in self.ms else float("nan")

    @property
    def same_settings_speedup(self) -> float | None:
        """The rewrite against the export under the same settings (--settings best), else None."""
        return self.over("ort_best")

    @property
    def vs_compile(self) -> float | None:
        """torch.compile's time over the rewrite's, else None: above 1 the rewrite is faster."""
        return self.over("torch_compile")

    def over(self, side: str) -> float | None:
        """`side`'s time over the rewrite's (above 1: the rewrite is faster), else None."""
        if side in self.recorded_over:
            return self.recorded_over[side]
        return self.ms[side] / self.ms["tritonforge"] if side in self.ms and "tritonforge" in self.ms else None

    @property
    def ok(self) -> bool:
        if "+fp8" in self.exporter:  # held to its cosine: e4m3 moves single values past the dtype's tolerance
            return not self.error and self.cosine is not None and self.cosine >= FP8_MIN_COSINE
        return not self.error and bool(self.diff <= TOL.get(self.dtype, 5e-3))


# ---- rows -------------------------------------------------------------------------------------------------------

def record(results: list[Result], device: str, path) -> None:
    rows = []
    for r in results:
        r.device = device
        common = {"shape": f"{r.model}/{r.exporter}", "dtype": r.dtype}
        left = "; ".join(r.left)
        if r.cosine is not None:
            rows.append({**common, "provider": "rewrite", "metric": "cosine", "unit": "", "value": f"{r.cosine:.6f}",
                         "extra": "the rewrite's output against the export's"})
        if r.rewrite_s is not None and "+measured" in r.exporter:
            rows.append({**common, "provider": "rewrite", "metric": "rewrite_s", "unit": "s",
                         "value": f"{r.rewrite_s:.1f}", "extra": "tritonforge-rewrite --measure on, timing included"})
        if r.changed is not None and "+measured" in r.exporter:
            rows.append({**common, "provider": "rewrite", "metric": "choices_changed", "unit": "sites",
                         "value": str(r.changed), "extra": "sites the timing on this GPU decided unlike the shipped "
                         "tables (rewrite/choices.json)"})
        rows.append({**common, "provider": "rewrite", "metric": "max_rel_diff", "unit": "", "value": f"{r.diff:.3g}",
                     "extra": f"{r.rewritten} nodes rewritten, {len(r.left)} left" + (f": {left}" if left else "")
                     + (f" | export refused: {r.export_error}" if r.export_error else "")
                     + (f" | not run: {r.error}" if r.error else "")})
        for k, ms in r.ms.items():
            rows.append({**common, "provider": k, "metric": "ms", "unit": "ms", "value": f"{ms:.3f}",
                         "extra": r.settings.get(k, "") if k in ORT_SIDES else _torch_said(k)})
        for k, ms in r.ms_events.items():
            rows.append({**common, "provider": k, "metric": "ms_events", "unit": "ms", "value": f"{ms:.3f}",
                         "extra": _torch_said(k)})
        for k, s in r.first_s.items():
            rows.append({**common, "provider": k, "metric": "first_result_s", "unit": "s", "value": f"{s:.2f}",
                         "extra": "from a fresh process to the first output"})
        for k, s in r.resize_s.items():
            rows.append({**common, "provider": k, "metric": "resize_first_result_s", "unit": "s", "value": f"{s:.2f}",
                         "extra": f"the first run at another side: {r.resize}"})
        if "ort" in r.ms and "tritonforge" in r.ms:
            rows.append({**common, "provider": "tritonforge", "metric": "speedup", "unit": "x",
                         "value": f"{r.speedup:.3f}"})
        for metric, rival in RATIO_RIVALS.items():
            if r.over(rival) is not None:
                rows.append({**common, "provider": "tritonforge", "metric": metric, "unit": "x",
                             "value": f"{r.over(rival):.3f}"})
        for k, cos in r.compile_cosine.items():
            rows.append({**common, "provider": k, "metric": "cosine", "unit": "", "value": f"{cos:.6f}",
                         "extra": "its output against the export's"})
        for k in dict.fromkeys([*r.compile_diff, *r.compile_error]):
            rows.append({**common, "provider": k, "metric": "max_rel_diff", "unit": "",
                         "value": f"{r.compile_diff.get(k, float('nan')):.3g}", "extra": r.compile_error.get(k, "")})
        for k, kinds in r.breakdown.items():
            named = {**r.kernels.get(k, {}), "layout conversion": r.layout_kernels.get(k, {})}
            rows += [{**common, "provider": k, "metric": f"gpu_ms:{kind}", "unit": "ms", "value": f"{ms:.3f}",
                      "extra": "; ".join(f"{n} {t:.3f}" for n, t in named.get(kind, {}).items())}
                     for kind, ms in kinds.items()]
    if rows:
        write_rows("e2e", device, rows, path)


def _torch_said(side: str) -> str:
    """A torch row's extra: the mode, and that it ran with nothing else in its process."""
    mode = next(m for m, name in TORCH.items() if name == side)
    if mode == "torchao-fp8":
        return (f"{OWN_PROCESS}; torchao Float8DynamicActivationFloat8WeightConfig(PerRow, "
                "set_inductor_config=False) + torch.compile(mode='reduce-overhead'); cudnn.benchmark")
    return f"{OWN_PROCESS}; torch.compile(mode={mode!r}); cudnn.benchmark"


def from_rows(path: Path, device: str | None = None) -> list[Result]:
    """The Results that `record` wrote into a results file (for --report), in the order they were written."""
    import csv

    out: dict[tuple, Result] = {}
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            if row["benchmark"] != "e2e" or (device and row["device"] != device):
                continue
            model, _, exporter = row["shape"].partition("/")
            r = out.setdefault((row["device"], row["shape"], row["dtype"]),
                               Result(model, exporter, row["dtype"], device=row["device"]))
            metric, side, value = row["metric"], row["provider"], float(row["value"])
            if metric == "ms":
                r.ms[side] = value
                if side in ORT_SIDES and row["extra"]:
                    r.settings[side] = row["extra"]
            elif metric == "ms_events":
                r.ms_events[side] = value
            elif metric == "first_result_s":
                r.first_s[side] = value
            elif metric == "resize_first_result_s":
                r.resize_s[side] = value
                r.resize = row["extra"].rpartition(": ")[2]
            elif metric == "rewrite_s":
                r.rewrite_s = value
            elif metric == "choices_changed":
                r.changed = int(value)
            elif metric == "speedup":
                r.recorded_speedup = value
            elif metric.startswith("speedup_"):
                rival = RATIO_RIVALS.get(metric)
                if rival:  # the ratio as its own run took it, not one across two runs' rows
                    r.recorded_over[rival] = value
            elif metric == "cosine" and side != "rewrite":
                r.compile_cosine[side] = value
            elif metric == "cosine":
                r.cosine = value
            elif metric == "max_rel_diff" and side != "rewrite":
                if value == value:
                    r.compile_diff[side] = value
                if row["extra"]:
                    r.compile_error[side] = row["extra"]
            elif metric == "max_rel_diff":
                r.diff = value
                counts = re.match(r"(\d+) nodes rewritten, (\d+) left", row["extra"])
                r.rewritten, r.left = int(counts.group(1)), [""] * int(counts.group(2))
                r.error = row["extra"].partition(" | not run: ")[2]
                r.export_error = row["extra"].partition(" | export refused: ")[2].partition(" | not run: ")[0]
            elif metric.startswith("gpu_ms:"):
                r.breakdown.setdefault(side, {})[metric[7:]] = value
                # "<kernel> <ms>; ..." (older rows of other kinds may hold a note instead: not kernels)
                named = {m.group(1): float(m.group(2)) for m in (re.fullmatch(r"(.+) (\d+\.\d+)", part)
                                                                 for part in (row.get("extra") or "").split("; ")) if m}
                if named:
                    if metric == "gpu_ms:layout conversion":
                        r.layout_kernels[side] = named
                    else:
                        r.kernels.setdefault(side, {})[metric[7:]] = named
    return list(out.values())


# ---- tables -----------------------------------------------------------------------------------------------------

def _ms(r: Result, side: str) -> str:
    if side in r.ms:
        return f"{r.ms[side]:.2f}"
    return f"not timed: {r.compile_error[side]}" if side in r.compile_error else "-"


def _ratio(x: float | None) -> str:
    return f"{x:.2f}x" if x is not None else "-"


def _seconds(r: Result, side: str, then: str | None = None) -> str:
    said = f"{r.first_s[side]:.1f}" if side in r.first_s else "-"
    return said + (f" ({r.first_s[then]:.1f})" if then and then in r.first_s else "")


def table(results: list[Result]) -> list[str]:
    lines = ["| model | device | exporter | dtype | as exported ms | rewritten ms | speed-up | "
             "as exported, same settings ms | speed-up, same settings | torch.compile ms | vs torch.compile | "
             "max-autotune ms | vs max-autotune | first result s: rewritten (tune file) | "
             "first result s: torch.compile (warm cache) | after a resize s: rewritten / torch.compile | "
             "nodes rewritten | left | max rel diff |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | "
             "--- | --- |"]
    for r in results:
        ms = r.ms or {}
        exported = f"{ms['ort']:.2f}" if "ort" in ms else "refused" if r.export_error else \
            "-" if "ort_best" in ms else "nan"
        speedup = f"{r.speedup:.2f}x" if "ort" in ms else "-" if r.export_error or "ort_best" in ms else \
            "not run" if r.error else "not timed"
        resized = (f"{r.resize}: " + " / ".join(f"{r.resize_s[k]:.1f}" if k in r.resize_s else "-"
                                                for k in ("tritonforge", "torch_compile"))) if r.resize else "-"
        lines.append(f"| {r.model} | {_device_cell(r)} | {r.exporter} | {r.dtype} | {exported} | "
                     f"{ms.get('tritonforge', float('nan')):.2f} | {speedup} | {_ms(r, 'ort_best')} | "
                     f"{_ratio(r.same_settings_speedup)} | {_ms(r, 'torch_compile')} | {_ratio(r.vs_compile)} | "
                     f"{_ms(r, 'torch_compile_max_autotune')} | {_ratio(r.over('torch_compile_max_autotune'))} | "
                     f"{_seconds(r, 'tritonforge', 'tritonforge+tuned')} | "
                     f"{_seconds(r, 'torch_compile', 'torch_compile+warm')} | {resized} | "
                     f"{r.rewritten} | {len(r.left)} | {r.diff:.2g}" +
                     (f" (cosine {r.cosine:.5f})" if r.cosine is not None else "") + " |")
    for r in results:
        if r.export_error:
            lines.append(f"- {r.model}/{r.exporter} {r.dtype} on {_device_cell(r)}: onnxruntime refuses the export "
                         f"({_first_line(r.export_error)}); the rewrite is checked against the module in eager torch")
        if r.error and not r.ms:
            lines.append(f"- {r.model}/{r.exporter} {r.dtype} on {_device_cell(r)}: not run: {_first_line(r.error)}")
        if "torchao_fp8" in r.ms or "torchao_fp8" in r.compile_error:
            cos = r.compile_cosine.get("torchao_fp8")
            said = (f"{_ms(r, 'torchao_fp8')} ms, the rewrite {_ratio(r.over('torchao_fp8'))} against it"
                    + (f", its cosine {cos:.5f}" if cos is not None else "")) if "torchao_fp8" in r.ms else \
                f"not timed: {_first_line(r.compile_error['torchao_fp8'])}"
            lines.append(f"- {r.model}/{r.exporter} {r.dtype} on {_device_cell(r)}: torchao fp8 + torch.compile {said}")
    lines += _against_tables(results)
    for r in results:
        for k, kinds in r.breakdown.items():
            top = ", ".join(f"{kind} {ms:.2f}" for kind, ms in list(kinds.items())[:6])
            lines.append(f"- {r.model}/{r.exporter} {r.dtype} {k} on {_device_cell(r)}: {top} (GPU ms per run)")
            named = ", ".join(f"{n} {ms:.2f}" for n, ms in r.layout_kernels.get(k, {}).items())
            if named:
                lines.append(f"  - layout conversions: {named}")
            for kind, by_name in r.kernels.get(k, {}).items():
                if kind in ("elementwise", "transpose / copy", "other") and by_name:
                    lines.append(f"  - {kind}: " + ", ".join(f"{n} {ms:.2f}" for n, ms in by_name.items()))
    return lines


def _against_tables(results: list[Result]) -> list[str]:
    """A line per rewrite whose choices were timed on its GPU: the sites that changed from the shipped tables', its
    ms beside the tables' rewrite of the same export on the same GPU, and the rewrite's seconds."""
    by_key = {(r.device, r.model, r.exporter, r.dtype): r for r in results}
    lines = []
    for r in results:
        if "+measured" not in r.exporter or "tritonforge" not in r.ms:
            continue
        tables = by_key.get((r.device, r.model, r.exporter.replace("+measured", "+tables"), r.dtype))
        against = (f" against {tables.ms['tritonforge']:.2f} ms with the shipped tables"
                   if tables and "tritonforge" in tables.ms else "")
        changed = f"; {r.changed} site(s) decided unlike the shipped tables" if r.changed is not None else ""
        took = f", the rewrite {r.rewrite_s:.1f} s with its timing" if r.rewrite_s is not None else ""
        lines.append(f"- {r.model}/{r.exporter} {r.dtype} on {_device_cell(r)}: choices timed on this GPU, "
                     f"{r.ms['tritonforge']:.2f} ms{against}{took}{changed}")
    return lines


# The README's headline: one row per model, the newest run of each that timed torch.compile in its own process.
HEADLINE = ("sd15_unet", "sdxl_unet", "sd15_vae_decoder", "sd3_medium", "flux_dev", "pixart_sigma")


def headline(results: list[Result]) -> list[str]:
    """The README's table: per model of HEADLINE, its newest fp16 row with torch.compile timed on its own (rows
    written later win; fp8 rewrites are a claim of their own, left out): the GPU, both sides' ms, the ratio,
    max-autotune's ms and ratio (or why it was not timed), the rewrite against the export at its best settings, and
    both sides' first result."""
    newest: dict[str, Result] = {}
    for r in results:
        model = r.model.partition(":")[0].partition("@")[0]
        if (model in HEADLINE and r.dtype == "fp16" and "+fp8" not in r.exporter and "torch_compile" in r.ms
                and "tritonforge" in r.ms):
            newest[model] = r
    lines = ["| model | GPU | rewritten ms | torch.compile ms | vs torch.compile | max-autotune ms (vs) | "
             "vs export at best | first result s: rewritten / torch.compile |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for model in HEADLINE:
        r = newest.get(model)
        if r is None:
            continue
        depth = f" ({r.model.partition(':')[2]} blocks)" if ":" in r.model else ""
        lines.append(f"| {model}{depth} | {_device_cell(r)} | {r.ms['tritonforge']:.2f} | "
                     f"{r.ms['torch_compile']:.2f} | {_ratio(r.vs_compile)} | {_autotuned(r)} | "
                     f"{_ratio(r.same_settings_speedup)} | "
                     f"{_seconds(r, 'tritonforge')} / {_seconds(r, 'torch_compile')} |")
    return lines


def _autotuned(r: Result) -> str:
    """max-autotune's ms with the rewrite's ratio over it, or why it was not timed."""
    side = "torch_compile_max_autotune"
    if side in r.ms:
        return f"{r.ms[side]:.2f} ({_ratio(r.over(side))})"
    return r.compile_error.get(side, "-")


def _device_cell(r: Result) -> str:
    return r.device.removeprefix("NVIDIA ") or "-"


def report_order(r: Result) -> tuple:
    """Model, then image side, dtype, exporter (as exported before ORT's optimizer, static before dynamic,
    ORT's default settings before the best), then device."""
    model, _, side = r.model.partition("@")
    name, _, best = r.exporter.partition("+")
    exporter, _, dynamic = name.partition(".")
    known = ("torchscript", "dynamo", "dynamo23", "ort", "file")
    return (model, int(side.partition(":")[0] or 0), r.dtype, known.index(exporter) if exporter in known
            else len(known), dynamic, best, r.device)
