"""Every committed report is what its script makes of the committed results: the zoo tables, the end-to-end
report in benchmarks/README.md."""

from __future__ import annotations

import contextlib
import io
import re

from benchmarks import e2e_bench, zoo_report

from ..conftest import ROOT


def _printed(main, argv) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(argv) == 0
    return out.getvalue()


def test_the_zoo_report_is_what_zoo_report_makes_of_the_results():
    committed = (ROOT / "benchmarks/results/zoo_report_h200.md").read_text()
    argv = re.match(r"<!-- made by: python benchmarks/zoo_report.py (.*) -->", committed).group(1).split()
    assert committed == _printed(zoo_report.main, argv)


def test_the_readmes_end_to_end_report_is_what_e2e_bench_prints():
    readme = (ROOT / "benchmarks/README.md").read_text()
    block = re.search(r"<!-- e2e report: python benchmarks/e2e_bench.py --report -->\n(.*)<!-- end of e2e report -->",
                      readme, re.S).group(1)
    assert block == _printed(e2e_bench.main, ["--report"])


def test_the_shipped_attention_table_routes_each_class_as_its_rows_say():
    from tritonforge.runtime.ortlib.rewrite.attention import measured_choice

    # what the H200 rows say: the VAE's one wide head stays decomposed; ORT's op (cuDNN's flash kernel) wins SD3's
    # d 64 and Flux's d 128 in fp16 and bf16; the library wins 77-key cross-attention and d 160
    assert measured_choice("fp16", 16384, 16384, 512)[0] == "decomposed"
    assert [measured_choice(dt, 4429, 4429, 64)[0] for dt in ("fp16", "bf16")] == ["ort", "ort"]
    assert [measured_choice(dt, 4608, 4608, 128)[0] for dt in ("fp16", "bf16")] == ["ort", "ort"]
    assert measured_choice("fp16", 4096, 77, 40)[0] == measured_choice("fp16", 256, 256, 160)[0] == "tritonforge"
    # a dtype with no rows of its own is said to be unmeasured, never routed by another dtype's rows
    where, why = measured_choice("fp32", 4096, 4096, 64)
    assert where == "tritonforge" and why.startswith("no fp32 self d64 attention was measured") or \
        why.startswith("no fp32 attention was measured"), why


def test_the_readmes_headline_is_what_e2e_bench_makes_of_the_rows():
    """The README's results table is `e2e_bench.py --headline`: each model's newest row with torch.compile timed in a
    process of its own, nothing typed by hand."""
    readme = (ROOT / "README.md").read_text()
    block = re.search(r"<!-- headline: python benchmarks/e2e_bench.py --headline -->\n(.*?)<!-- end of headline -->",
                      readme, re.S).group(1)
    assert block == _printed(e2e_bench.main, ["--headline"])
    assert block.count("\n") >= 8, block  # a row per model of e2e_bench.HEADLINE


def test_every_torch_compile_row_was_timed_in_a_process_of_its_own():
    import csv

    rows = [r for r in csv.DictReader((ROOT / "benchmarks/results/results.csv").open())
            if r["benchmark"] == "e2e" and r["provider"].startswith("torch_compile") and r["metric"] == "ms"]
    assert rows and all(r["extra"].startswith(e2e_bench.OWN_PROCESS) for r in rows)


def test_the_per_op_table_of_the_epilogues_is_the_rows():
    import csv

    readme = (ROOT / "benchmarks/README.md").read_text()
    lines = [line for line in readme.splitlines()
             if line.startswith(("| GELU-tanh + bias", "| AdaLN,", "| Skip + LayerNorm,", "| GEGLU,", "| RoPE,"))]
    assert len(lines) == 10
    rows = {f"{float(r['value']):.1f}" for r in csv.DictReader((ROOT / "benchmarks/results/results.csv").open())
            if r["benchmark"] in ("gelu", "ada_layer_norm", "skip_layer_norm", "bias_split_gelu", "rotary_embedding")
            and r["dtype"] == "fp16" and r["metric"] == "us"}
    for line in lines:
        cells = line.split("|")[2:]  # past the op's own name, whose widths are not times
        numbers = re.findall(r"\d+\.\d", "|".join(cells))
        assert numbers and set(numbers) <= rows, (line, set(numbers) - rows)


def test_the_linear_epilogue_probe_table_is_the_rows():
    """Each line of benchmarks/README.md's GEMM-with-epilogue table: the fp16 H100 rows of its shape, in order (the
    GEMM alone, separate, cuBLASLt, the fastest Triton config)."""
    import csv

    rows: dict[str, dict[str, float]] = {}
    for r in csv.DictReader((ROOT / "benchmarks/results/results.csv").open()):
        if r["benchmark"] == "linear_gemm" and r["dtype"] == "fp16" and r["device"] == "NVIDIA H100 80GB HBM3":
            rows.setdefault(r["shape"], {})[r["provider"]] = float(r["value"])
    names = {"bias": "bias", "GELU-tanh": "gelu_tanh", "gated residual": "gated"}
    models = {"SD3": "sd3_medium", "Flux": "flux_dev", "PixArt": "pixart_sigma", "SDXL UNet": "sdxl_unet"}
    lines = [line for line in (ROOT / "benchmarks/README.md").read_text().splitlines()
             if line.startswith(("| bias, ", "| GELU-tanh, ", "| gated residual, "))]
    assert len(lines) == 8
    for line in lines:
        label, *cells = [c.strip() for c in line.strip("|").split("|")]
        epilogue, model, mkn = re.fullmatch(r"(.+), (.+) (\d+x\d+x\d+)", label).groups()
        got = rows[f"{names[epilogue]} {models[model]} {mkn}"]
        triton = min(v for k, v in got.items() if k.startswith("triton"))
        assert cells == [f"{v:.1f}" for v in (got["matmul"], got["separate"], got["cublaslt"], triton)], line


def test_the_linear_per_op_table_is_the_rows():
    """Each line of benchmarks/README.md's Linear table: the fp16 H100 `linear` rows of its shape, in order (the
    export's nodes, the library's Linear, torch, the GEMM alone)."""
    import csv

    rows: dict[str, dict[str, float]] = {}
    for r in csv.DictReader((ROOT / "benchmarks/results/results.csv").open()):
        if r["benchmark"] == "linear" and r["dtype"] == "fp16" and r["device"] == "NVIDIA H100 80GB HBM3":
            rows.setdefault(r["shape"], {})[r["provider"]] = float(r["value"])
    names = {"Linear + bias": "none", "Linear + GELU-tanh": "gelu_tanh"}
    models = {"SD3": "sd3_medium", "Flux": "flux_dev", "PixArt": "pixart_sigma", "SDXL UNet": "sdxl_unet"}
    lines = [line for line in (ROOT / "benchmarks/README.md").read_text().splitlines()
             if line.startswith(("| Linear + bias, ", "| Linear + GELU-tanh, "))]
    assert len(lines) == 9
    for line in lines:
        label, *cells = [c.strip() for c in line.strip("|").split("|")]
        epilogue, model, mkn = re.fullmatch(r"(.+), (.+) (\d+x\d+x\d+)", label).groups()
        got = rows[f"{names[epilogue]} {models[model]} {mkn}"]
        assert cells == [f"{got[p]:.1f}" for p in ("export", "tritonforge", "torch", "matmul")], line


def test_the_readmes_pipeline_table_is_what_pipeline_bench_makes_of_the_rows():
    from benchmarks import pipeline_bench

    readme = (ROOT / "README.md").read_text()
    marker = r"<!-- pipelines: python benchmarks/pipeline_bench.py --headline -->\n(.*?)<!-- end of pipelines -->"
    block = re.search(marker, readme, re.S).group(1)
    assert block == _printed(pipeline_bench.main, ["--headline"])
    assert "| sd15@512 30 steps |" in block


def test_the_pipeline_table_leaves_out_tiny_and_cpu_runs_and_divides_torchs_time_by_ours():
    from benchmarks import pipeline_bench

    def row(shape, provider, metric, value, dtype="fp16", device="NVIDIA H200"):
        return {"benchmark": "pipeline", "device": device, "provider": provider, "shape": shape, "dtype": dtype,
                "metric": metric, "value": str(value)}

    rows = [row("sdxl@1024 30 steps", "tritonforge", "s_per_image", 0.8), row("sdxl@1024 30 steps", "torch_compile",
            "s_per_image", 1.0), row("sdxl@1024 30 steps", "tritonforge", "first_image_s", 20),
            row("sd15_tiny@32 2 steps", "tritonforge", "s_per_image", 1), row("sd15_tiny@32 2 steps", "torch_compile",
            "s_per_image", 1), row("sd15@512 30 steps", "tritonforge", "s_per_image", 1, "fp32", "CPU"),
            row("sd15@512 30 steps", "torch_compile", "s_per_image", 1, "fp32", "CPU")]
    lines = pipeline_bench.headline(rows)
    assert lines[2:] == ["| sdxl@1024 30 steps | H200 | 0.800 | 1.000 | 1.25x | - | 20.0 / - | - |"], lines
    rows += [row("sdxl@1024 30 steps", "tritonforge+tuned", "first_image_s", 12.5),
             row("sdxl@1024 30 steps", "torch_compile", "first_image_s", 140), row("sdxl@1024 30 steps",
             "torch_compile+warm", "first_image_s", 60.25)]
    assert pipeline_bench.headline(rows)[2].endswith("| 20.0 (12.5) / 140.0 (60.2) | - |")
