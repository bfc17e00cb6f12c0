"""The e2e rows: a run's Result written into a results file, read back as it was, and tabled (what
`e2e_bench.py --report` and the README's headline are made from)."""

from __future__ import annotations

import csv

import pytest

from benchmarks import e2e_rows


def test_a_result_passes_within_its_dtypes_tolerance_and_nans_fail():
    r = e2e_rows.Result("m", "torchscript", "fp16", diff=0.019)
    assert r.ok and not e2e_rows.Result("m", "dynamo", "fp32", diff=0.006).ok
    assert not e2e_rows.Result("m", "dynamo", "fp32", diff=float("nan")).ok


def test_kernels_are_recorded_by_name_within_their_kind_and_read_back(tmp_path):
    r = e2e_rows.Result("sd15_unet", "torchscript+best", "fp16", ms={"ort": 2.0, "tritonforge": 1.0}, diff=0.001,
                        breakdown={"tritonforge": {"convolution": 5.0, "layout conversion": 0.5}},
                        layout_kernels={"tritonforge": {"nchwToNhwcKernel": 0.3, "Transpose4DKernel": 0.2}},
                        kernels={"tritonforge": {"convolution": {"sm90_xmma_fprop": 4.5, "im2col": 0.5}}})
    e2e_rows.record([r], "test GPU", tmp_path / "r.csv")
    (back,) = e2e_rows.from_rows(tmp_path / "r.csv")
    assert back.breakdown == r.breakdown and back.layout_kernels == r.layout_kernels and back.kernels == r.kernels
    assert "  - layout conversions: nchwToNhwcKernel 0.30, Transpose4DKernel 0.20" in e2e_rows.table([back])


def test_a_run_that_did_not_happen_says_why_in_the_report(tmp_path):
    r = e2e_rows.Result("sd3_medium", "torchscript+best", "bf16",
                        error="rewrite: x.onnx: not written: onnxruntime refuses the export itself\nTraceback ...")
    e2e_rows.record([r], "test GPU", tmp_path / "r.csv")
    (back,) = e2e_rows.from_rows(tmp_path / "r.csv")
    lines = e2e_rows.table([back])
    assert "| sd3_medium | test GPU | torchscript+best | bf16 | nan | nan | not run |" in lines[2]
    assert ("- sd3_medium/torchscript+best bf16 on test GPU: not run: rewrite: x.onnx: not written: onnxruntime "
            "refuses the export itself") in lines


def test_an_export_onnxruntime_refuses_is_timed_rewritten_against_torch_compile_alone(tmp_path):
    r = e2e_rows.Result("sd3_medium", "dynamo23+best", "bf16", ms={"tritonforge": 2.0, "torch_compile": 3.0},
                        diff=0.004, compile_diff={"torch_compile": 0.003}, rewritten=12,
                        compile_error={"torch_compile_max_autotune": "did not compile in 600 s"},
                        first_s={"tritonforge": 4.0, "torch_compile": 50.0},
                        export_error="[ONNXRuntimeError] : 10 : INVALID_GRAPH : Type 'tensor(bfloat16)' of Einsum")
    e2e_rows.record([r], "test GPU", tmp_path / "r.csv")
    (back,) = e2e_rows.from_rows(tmp_path / "r.csv")
    assert back.export_error == r.export_error and not back.error and back.ok
    assert (back.compile_diff, back.compile_error, back.first_s) == (r.compile_diff, r.compile_error, r.first_s)
    lines = e2e_rows.table([back])
    assert lines[2].startswith("| sd3_medium | test GPU | dynamo23+best | bf16 | refused | 2.00 | - | - | - | 3.00 "
                               "| 1.50x | not timed: did not compile in 600 s | - | 4.0 | 50.0 | - | 12 | 0 |")
    assert ("- sd3_medium/dynamo23+best bf16 on test GPU: onnxruntime refuses the export ([ONNXRuntimeError] : 10 : "
            "INVALID_GRAPH : Type 'tensor(bfloat16)' of Einsum); the rewrite is checked against the module in eager "
            "torch") in lines


def test_a_column_merged_from_a_later_run_keeps_that_runs_ratio(tmp_path):
    """`results.py merge --only` adds max-autotune's rows from a later run beside an earlier run's: the report's
    ratio is the one the later run took against its own rewrite, not one across the two runs' rows."""
    from benchmarks.results import merge

    first, later = tmp_path / "first.csv", tmp_path / "later.csv"
    e2e_rows.record([e2e_rows.Result("vae", "ts+best", "fp16", ms={"tritonforge": 6.0, "torch_compile": 8.0},
                                     diff=0.001)], "test GPU", first)
    e2e_rows.record([e2e_rows.Result("vae", "ts+best", "fp16", ms={"tritonforge": 7.0,
                                                                    "torch_compile_max_autotune": 7.7},
                                     diff=0.001)], "test GPU", later)
    merge(later, first, only=["torch_compile_max_autotune", "tritonforge:speedup_vs_max_autotune"])
    (back,) = e2e_rows.from_rows(first)
    assert back.ms["tritonforge"] == 6.0 and back.over("torch_compile") == pytest.approx(8.0 / 6.0, abs=1e-3)
    assert back.over("torch_compile_max_autotune") == pytest.approx(1.1, abs=1e-3)  # 7.7 / 7.0, not 7.7 / 6.0


def test_torchaos_fp8_side_is_recorded_with_its_cosine_and_said_in_the_report(tmp_path):
    r = e2e_rows.Result("sd3_medium", "torchscript+best+fp8", "fp16", diff=0.09, cosine=0.9991, rewritten=300,
                        ms={"tritonforge": 20.0, "torch_compile": 38.0, "torchao_fp8": 25.0},
                        compile_diff={"torch_compile": 0.004, "torchao_fp8": 0.12},
                        compile_cosine={"torchao_fp8": 0.99905})
    e2e_rows.record([r], "test GPU", tmp_path / "r.csv")
    rows = {(row["provider"], row["metric"]): row for row in csv.DictReader((tmp_path / "r.csv").open())}
    said = rows[("torchao_fp8", "ms")]["extra"]
    assert "torchao Float8DynamicActivationFloat8WeightConfig(PerRow, set_inductor_config=False)" in said
    assert float(rows[("tritonforge", "speedup_vs_torchao_fp8")]["value"]) == pytest.approx(1.25)
    (back,) = e2e_rows.from_rows(tmp_path / "r.csv")
    assert back.compile_cosine == {"torchao_fp8": 0.99905} and back.cosine == pytest.approx(0.9991) and back.ok
    assert ("- sd3_medium/torchscript+best+fp8 fp16 on test GPU: torchao fp8 + torch.compile 25.00 ms, the rewrite "
            "1.25x against it, its cosine 0.99905") in e2e_rows.table([back])


def test_a_rewrite_timed_on_its_gpu_is_set_beside_the_tables_rewrite_with_the_sites_it_changed(tmp_path):
    tables = e2e_rows.Result("sdxl_unet", "torchscript+best+tables", "fp16", ms={"tritonforge": 30.6}, diff=0.002,
                             rewrite_s=12.0)
    measured = e2e_rows.Result("sdxl_unet", "torchscript+best+measured", "fp16", ms={"tritonforge": 30.2},
                               diff=0.002, rewrite_s=56.2, changed=7)
    e2e_rows.record([tables, measured], "test GPU", tmp_path / "r.csv")
    rows = [(row["shape"], row["provider"], row["metric"], row["value"])
            for row in csv.DictReader((tmp_path / "r.csv").open())]
    timed = "sdxl_unet/torchscript+best+measured"
    assert (timed, "rewrite", "choices_changed", "7") in rows and (timed, "rewrite", "rewrite_s", "56.2") in rows
    assert not any(metric in ("choices_changed", "rewrite_s") and "+tables" in shape
                   for shape, _, metric, _ in rows)  # only the timed rewrite's
    back = e2e_rows.from_rows(tmp_path / "r.csv")
    assert [(r.changed, r.rewrite_s) for r in back] == [(None, None), (7, 56.2)]
    assert ("- sdxl_unet/torchscript+best+measured fp16 on test GPU: choices timed on this GPU, 30.20 ms against "
            "30.60 ms with the shipped tables, the rewrite 56.2 s with its timing; 7 site(s) decided unlike the "
            "shipped tables") in e2e_rows.table(back)
