"""The pipeline bench's machinery on a tiny pipeline on the CPU: export, folder rewrite, each side in a process of its
own, images compared, rows written (the numbers mean nothing on a CPU: the GPU's rows are the measurements)."""

from __future__ import annotations

import csv
import json

import pytest

for _module in ("torch", "diffusers", "transformers", "optimum.onnxruntime", "onnxruntime"):
    pytest.importorskip(_module, reason="the bench exports with optimum-onnx (pins/optimum.txt)")

from benchmarks import pipeline_bench  # noqa: E402


@pytest.mark.full
@pytest.mark.parametrize("model", pipeline_bench.pipeline_models.PIPELINES)
def test_a_tiny_pipeline_runs_on_every_side_and_writes_its_rows(model, ort_library, tmp_path):
    results = tmp_path / "r.csv"
    assert pipeline_bench.main(["--model", model, "--tiny", "--provider", "cpu", "--steps", "2", "--runs", "1",
                                "--compile", "none", "--library", str(ort_library), "--results", str(results)]) == 0
    rows = list(csv.DictReader(results.open()))
    got = {(r["provider"], r["metric"]) for r in rows}
    for side in ("export", "tritonforge", "torch_eager"):
        assert {(side, "s_per_image"), (side, "first_image_s"), (side, "max_abs_diff")} <= got, got
    assert ("tritonforge", "rewrite_s") in got and ("export", "rewrite_s") not in got
    # a second start from the first one's saved choices: its first image, timed and compared; eager torch has no
    # cache to warm
    assert {m for p, m in got if p == "tritonforge+tuned"} == {"first_image_s", "max_abs_diff"}
    assert not any(p.endswith("+warm") for p, _ in got)
    diff = next(float(r["value"]) for r in rows if r["provider"] == "tritonforge" and r["metric"] == "max_abs_diff")
    assert diff < pipeline_bench.TOL["fp32"]
    assert {r["shape"] for r in rows} == {f"{model}_tiny@32 2 steps"}
    first = [r for r in rows if r["metric"] == "first_image_s"]
    for r in first:  # where the first image's time went, and the phases add up to it
        spent = [float(x.split()[-2]) for x in r["extra"].split("; ")[-1].split(", ")]
        assert len(spent) == 3 and abs(sum(spent) - float(r["value"])) < 0.2, r["extra"]


def test_a_work_folder_made_for_another_pipeline_is_refused_before_anything_runs(ort_library, tmp_path):
    (tmp_path / "made.json").write_text(json.dumps({"model": "sd15", "tiny": True, "layers": [], "provider": "cpu"}))
    with pytest.raises(SystemExit, match="holds another pipeline"):
        pipeline_bench.main(["--model", "sdxl", "--tiny", "--provider", "cpu", "--library", str(ort_library),
                             "--work", str(tmp_path), "--results", str(tmp_path / "r.csv")])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["made.json"]


@pytest.mark.parametrize(("argv", "said"), [(["--model", "sd15", "--layers", "2"], "--layers cuts the transformer"),
                                            (["--model", "sdxl", "--prepare"], "--prepare keeps what it makes")])
def test_arguments_that_cannot_hold_are_refused_before_anything_is_made(argv, said, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exc:
        pipeline_bench.main([*argv, "--results", str(tmp_path / "r.csv")])
    assert exc.value.code == 2 and said in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []
