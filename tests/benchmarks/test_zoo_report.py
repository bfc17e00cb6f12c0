"""The zoo report reads the benchmark's rows back per model and holds ORT's group to the targets: faster
than ORT's own kernel, or launch-bound, or within 1.1x of the copy on ORT's grid (one pass or two)."""

from __future__ import annotations

from tritonforge.runtime import zoo

from benchmarks import zoo_report
from benchmarks.results import write_rows


def rows(shape, dtype, **us):
    return [{"provider": p, "shape": shape, "dtype": dtype, "metric": "us", "unit": "us", "value": str(v)}
            for p, v in us.items()]


def test_verdicts_follow_the_ceiling_rules():
    assert zoo_report.verdict({"ort_group": 5.0, "ort_own": 6.0}, True, 0.5) == ("wins 1.20x", True)
    text, met = zoo_report.verdict({"ort_group": 10.0, "ort_own": 8.0, "grid_copy": 9.5, "grid_copy2": 20.0}, True,
                                   0.5)
    assert met and "ceiling met" in text  # on chip: the one-pass copy is the ceiling
    text, met = zoo_report.verdict({"ort_group": 10.0, "ort_own": 8.0, "grid_copy": 5.0, "grid_copy2": 9.5}, False,
                                   0.5)
    assert met and "1.05x the ORT-grid copy" in text
    text, met = zoo_report.verdict({"ort_group": 30.0, "ort_own": 8.0, "grid_copy": 5.0, "grid_copy2": 9.5}, False,
                                   0.5)
    assert not met and "3.16x the ORT-grid copy" in text
    text, met = zoo_report.verdict({"ort_group": 2.5, "ort_own": 2.0}, True, 0.5)
    assert not met and "launch-bound" in text  # launch-bound counts only when ours is no slower
    assert zoo_report.verdict({"ort_group": 2.5}, True, 0.5) == ("not measured", False)


def test_report_totals_a_model_and_names_what_is_missing(tmp_path):
    results = tmp_path / "results.csv"
    model = zoo.MODELS["gpt2"]
    write_rows("zoo_softmax", "GPU", rows("1x50257", "fp16", ort_group=10, best=8, ort_own=12, torch=11, copy=2)
               + [{"provider": "tuned", "shape": "1x50257", "dtype": "fp16", "metric": "tuned_vs_best",
                   "unit": "ratio", "value": "1.05"}], results)
    write_rows("zoo_softmax", "GPU", rows("16x50257", "fp16", ort_group=20, best=19, ort_own=16, torch=11, copy=3,
                                          grid_copy=19), results)
    write_rows("zoo_floor", "GPU", rows("1", "", empty_kernel=0.5), results)
    data = zoo_report.load(results, "GPU")
    text, stats = zoo_report.report(data, [model], ["fp16"], 0.5)
    assert "| softmax 1x50257 | 1 | 10.00 | 8.00 | 12.00 | 11.00 | 2.00 | - | wins 1.20x |" in text
    assert "| softmax 16x50257 | 1 | 20.00 | 19.00 | 16.00 | 11.00 | 3.00 | 19.00 | 0.80x; 1.05x the ORT-grid copy " \
        "(ceiling met) |" in text
    assert "| **total (us)** | | **10.0** | **8.0** | **12.0** | **11.0** | **2.0** | | |" in text  # one table a batch
    assert "tokens = 16, fp16" in text and "tokens = 128" not in text
    assert stats["missing"] == ["gpt2 fp16 softmax 128x50257"]
    assert stats["tuned_missed"] == ["gpt2 fp16 softmax 1x50257: 1.050"]
    assert stats["best_missed"] == ["gpt2 fp16 softmax 16x50257: 0.84x (target 1.2x)"]
    assert zoo_report.main(["--results", str(results), "--device", "GPU", "--model", "gpt2", "--dtypes", "fp16"]) == 0
