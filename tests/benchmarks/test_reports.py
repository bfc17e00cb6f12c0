"""Every committed report is what its script makes of the committed results: the zoo tables, the end-to-end
report in benchmarks/README.md, and the rewrite's softmax table."""

from __future__ import annotations

import contextlib
import io
import re

import pytest

from benchmarks import attention_choice, e2e_bench, softmax_choice, zoo_report

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


@pytest.mark.parametrize("name", ["gelu", "ada_layer_norm", "skip_layer_norm", "bias_split_gelu"])
def test_the_rewrites_epilogue_tables_are_what_their_choice_scripts_derive(name):
    import importlib

    choice = importlib.import_module(f"benchmarks.{name}_choice")
    measured = importlib.import_module(f"tritonforge.runtime.ortlib.rewrite.{name}_measured")
    assert choice.TABLE.read_text() == choice.module_text(choice.speedups())
    tables = choice.speedups()
    if name == "bias_split_gelu":  # ORT's node and the library's, each of its own rows
        assert measured.LIBRARY == tables["LIBRARY"]
        tables = tables["SPEEDUP"]
    assert measured.SPEEDUP == tables and measured.SPEEDUP, name


def test_the_geglu_table_holds_orts_node_and_the_librarys_each_from_its_own_rows(tmp_path):
    from benchmarks import bias_split_gelu_choice as choice
    from benchmarks.results import write_rows

    path = tmp_path / "r.csv"
    write_rows("bias_split_gelu", "GPU", [{"provider": p, "shape": "sd15_unet 8192x320", "dtype": "fp16",
                                           "metric": "us", "unit": "us", "value": str(us)}
                                          for p, us in (("decomposed", 60), ("onnx_gelu", 66), ("bias_split_gelu", 30),
                                                        ("tritonforge", 20))], path)
    tables = choice.speedups(path, "GPU")
    assert tables == {"SPEEDUP": {"fp16": {"decomposed": 2.0, "onnx_gelu": 2.2}},
                      "LIBRARY": {"fp16": {"decomposed": 3.0, "onnx_gelu": 3.3}}}
    scope: dict = {}
    exec(choice.module_text(tables, "GPU"), scope)  # the module the rewrite imports
    assert scope["SPEEDUP"] == tables["SPEEDUP"] and scope["LIBRARY"] == tables["LIBRARY"] and scope["DEVICE"] == "GPU"
    assert choice.speedups(path, "other GPU") == {}


def test_a_fused_ops_speed_up_is_the_geometric_mean_of_its_newest_rows_per_dtype_and_form(tmp_path):
    from benchmarks import choice_table
    from benchmarks.results import write_rows

    path = tmp_path / "r.csv"
    row = lambda shape, dtype, provider, us: {"provider": provider, "shape": shape, "dtype": dtype,  # noqa: E731
                                              "metric": "us", "unit": "us", "value": str(us)}
    write_rows("op", "GPU", [row("a", "fp16", "export", 30), row("a", "fp16", "fused", 10),
                             row("b", "fp16", "export", 40), row("b", "fp16", "fused", 30),
                             row("a", "fp32", "export", 5), row("a", "fp32", "fused", 10),
                             row("c", "fp32", "export", 9)], path)  # c: no fused row, no ratio
    write_rows("op", "other GPU", [row("a", "fp16", "fused", 1)], path)
    got = choice_table.fused_speedups(path, "GPU", "op", "fused", ("export",))
    assert got == {"fp16": {"export": round((3 * 4 / 3) ** 0.5, 3)}, "fp32": {"export": 0.5}}


def test_the_rewrites_softmax_table_is_what_softmax_choice_derives():
    from tritonforge.runtime.ortlib.rewrite import softmax_measured

    assert softmax_choice.TABLE.read_text() == softmax_choice.module_text(softmax_choice.speedups())
    assert softmax_measured.SPEEDUP == softmax_choice.speedups()
    # what the rows say, read directly: fp16 loses at 77 columns and wins at 4096
    assert softmax_measured.SPEEDUP["fp16"][77] < 1 < softmax_measured.SPEEDUP["fp16"][4096]


def test_the_rewrites_attention_table_is_what_attention_choice_derives():
    from tritonforge.runtime.ortlib.rewrite import attention_measured
    from tritonforge.runtime.ortlib.rewrite.attention import measured_choice

    assert attention_choice.TABLE.read_text() == attention_choice.module_text(attention_choice.speedups())
    assert attention_measured.SPEEDUP == attention_choice.speedups()
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


def test_a_choice_table_that_would_lose_a_dtype_is_not_written_unless_allowed(tmp_path, capsys):
    from benchmarks import ada_layer_norm_choice as choice
    from benchmarks import choice_table
    from benchmarks.results import write_rows

    path, table = tmp_path / "r.csv", tmp_path / "ada_layer_norm_measured.py"
    write_rows("ada_layer_norm", "GPU", [{"provider": p, "shape": "plain sd3_medium 8192x1536", "dtype": "fp16",
                                          "metric": "us", "unit": "us", "value": str(us)}
                                         for p, us in (("export", 30), ("tritonforge", 10))], path)
    committed = choice.module_text({"fp16": {"plain": 2.0}, "fp32": {"plain": 2.0}}, "other GPU")
    table.write_text(committed)
    argv = ["--results", str(path), "--device", "GPU"]
    run = lambda extra: choice_table.run(argv + extra, "", table, "GPU", choice.speedups,  # noqa: E731
                                         choice.module_text, "ada_layer_norm", choice_table.form_summary)
    assert run([]) == 1 and table.read_text() == committed
    assert "would lose SPEEDUP fp32" in capsys.readouterr().err
    assert run(["--allow-drop"]) == 0
    scope: dict = {}
    exec(table.read_text(), scope)
    assert scope["SPEEDUP"] == {"fp16": {"plain": 3.0}} and scope["DEVICE"] == "GPU"


def test_a_dtype_one_device_has_no_rows_of_comes_from_the_next_device_listed(tmp_path):
    from benchmarks import ada_layer_norm_choice as choice
    from benchmarks.results import write_rows

    path = tmp_path / "r.csv"
    for device, dtype, export in (("new GPU", "fp16", 40), ("old GPU", "fp16", 20), ("old GPU", "fp32", 30)):
        write_rows("ada_layer_norm", device, [{"provider": p, "shape": "plain sd3_medium 8192x1536", "dtype": dtype,
                                              "metric": "us", "unit": "us", "value": str(us)}
                                             for p, us in (("export", export), ("tritonforge", 10))], path)
    table = choice.speedups(path, "new GPU,old GPU")
    assert table == {"fp16": {"plain": 4.0}, "fp32": {"plain": 3.0}}
    scope: dict = {}
    exec(choice.module_text(table, "new GPU,old GPU"), scope)
    assert scope["DEVICE"] == "new GPU, else old GPU" and scope["SPEEDUP"] == table
