"""The shipped choice tables: one data file, what benchmarks/choices.py derives from the committed rows, read back by
the rewrite for the GPU it is told of, seen, or none."""

from __future__ import annotations

import pytest
from tritonforge.runtime.ortlib.rewrite import choices

from benchmarks import choices as choice_file
from benchmarks.results import write_rows


def _row(shape, dtype, provider, us):
    return {"provider": provider, "shape": shape, "dtype": dtype, "metric": "us", "unit": "us", "value": str(us)}


@pytest.fixture
def shipped_from(tmp_path, monkeypatch):
    """Make the rewrite read a data file written by benchmarks/choices.py from rows given here."""
    def make(rows_by_benchmark) -> dict:
        path = tmp_path / "r.csv"
        for (benchmark, device), rows in getattr(rows_by_benchmark, "items", lambda: rows_by_benchmark)():
            write_rows(benchmark, device, rows, path)
        doc = choice_file.build(path)
        data = tmp_path / "choices.json"
        data.write_text(choice_file.text(doc))
        monkeypatch.setattr(choices, "DATA", data)
        choices.shipped.cache_clear()
        return doc

    yield make
    choices.shipped.cache_clear()


def test_the_shipped_file_is_what_the_committed_rows_give():
    assert choice_file.main(["--check"]) == 0
    assert choices.DATA.read_text() == choice_file.text(choice_file.build())
    assert set(choices.shipped()) == set(choice_file.TABLES)


def test_the_file_round_trips_from_the_rows_to_the_rewrites_tables(shipped_from):
    doc = shipped_from({("ortlib", "NVIDIA H200"): [_row("softmax 8x77", "fp16", "ort", 10),
                                                    _row("softmax 8x77", "fp16", "tritonforge", 20),
                                                    _row("softmax 8x4096", "fp16", "ort", 30),
                                                    _row("softmax 8x4096", "fp16", "tritonforge", 10)]})
    assert doc["tables"]["softmax"] == {"NVIDIA H200": {"SPEEDUP": {"fp16": {77: 0.5, 4096: 3.0}}}}
    with choices.deciding(detect=False):
        t = choices.table("softmax")
    assert t.speedup == {"fp16": {77: 0.5, 4096: 3.0}} and t.device == "NVIDIA H200"  # row lengths read back as ints


def test_a_fused_ops_speed_up_is_the_geometric_mean_of_its_newest_rows_per_dtype_and_form(shipped_from):
    doc = shipped_from({("gelu", "GPU"): [_row("a", "fp16", "decomposed", 30), _row("a", "fp16", "fast_gelu", 10),
                                          _row("b", "fp16", "decomposed", 40), _row("b", "fp16", "fast_gelu", 30),
                                          _row("a", "fp32", "decomposed", 5), _row("a", "fp32", "fast_gelu", 10),
                                          _row("c", "fp32", "decomposed", 9)],  # c: no fused row, no ratio
                        ("gelu", "other GPU"): [_row("a", "fp16", "fast_gelu", 1)]})
    assert doc["tables"]["gelu"] == {"GPU": {"SPEEDUP": {"fp16": {"decomposed": round((3 * 4 / 3) ** 0.5, 3)},
                                                         "fp32": {"decomposed": 0.5}}}}


def test_the_geglu_table_holds_orts_node_and_the_librarys_each_from_its_own_rows(shipped_from):
    doc = shipped_from({("bias_split_gelu", "GPU"): [_row("sd15_unet 8192x320", "fp16", p, us) for p, us in (
        ("decomposed", 60), ("onnx_gelu", 66), ("bias_split_gelu", 30), ("tritonforge", 20))]})
    assert doc["tables"]["bias_split_gelu"]["GPU"] == {"SPEEDUP": {"fp16": {"decomposed": 2.0, "onnx_gelu": 2.2}},
                                                       "LIBRARY": {"fp16": {"decomposed": 3.0, "onnx_gelu": 3.3}}}
    t = choices.table("bias_split_gelu")
    assert t.speedup["fp16"]["onnx_gelu"] == 2.2 and t.library["fp16"]["onnx_gelu"] == 3.3


ADA = [("NVIDIA H200", "fp16", 40), ("NVIDIA H100 80GB HBM3", "fp16", 20), ("NVIDIA H100 80GB HBM3", "fp32", 30),
       ("NVIDIA A100-SXM4-80GB", "fp16", 50)]


@pytest.fixture
def three_gpus(shipped_from):
    return shipped_from([(("ada_layer_norm", device), [_row("plain sd3_medium 8192x1536", dtype, p, us)
                                                       for p, us in (("export", export), ("tritonforge", 10))])
                         for device, dtype, export in ADA])


@pytest.mark.parametrize("gpu, fp16, decided", [
    ("NVIDIA H200", 4.0, "NVIDIA H200"),  # its own rows
    ("H200 NVL", 4.0, "NVIDIA H200"),  # the same model, another board
    ("NVIDIA GH200 480GB", 2.0, "NVIDIA H100 80GB HBM3"),  # the same architecture: DEFAULT_ORDER's first of it
    ("NVIDIA A10", 5.0, "NVIDIA A100-SXM4-80GB"),  # the same architecture
    ("NVIDIA L4", 2.0, "NVIDIA H100 80GB HBM3"),  # Ada: Hopper (one step newer) before Ampere (one step older)
    ("NVIDIA B200", 2.0, "NVIDIA H100 80GB HBM3"),  # Blackwell: Hopper is the nearest measured
    (None, 2.0, "NVIDIA H100 80GB HBM3"),  # no GPU: DEFAULT_ORDER
])
def test_each_entry_comes_from_the_nearest_gpu_that_measured_it(three_gpus, gpu, fp16, decided):
    with choices.deciding(gpu, detect=False) as scope:
        t = choices.table("ada_layer_norm")
    assert t.speedup["fp16"]["plain"] == fp16 and t.devices["fp16"] == decided
    # fp32: only the H100 measured it, and every GPU takes those rows
    assert t.speedup["fp32"]["plain"] == 3.0 and t.devices["fp32"] == "NVIDIA H100 80GB HBM3"
    assert scope.used["ada_layer_norm"] == t.device and decided in t.device
    assert scope.how == ("named" if gpu else "none")


def test_a_gpu_the_rewrite_cannot_place_is_refused_naming_the_known_ones():
    with pytest.raises(choices.UnknownGpu) as err:
        with choices.deciding("Radeon RX 7900", detect=False):
            pass
    assert "--gpu 'Radeon RX 7900'" in str(err.value) and "hopper: " in str(err.value) and "H100" in str(err.value)


def test_an_unreadable_data_file_is_an_error_naming_it(tmp_path, monkeypatch):
    bad = tmp_path / "choices.json"
    bad.write_text("{not json")
    monkeypatch.setattr(choices, "DATA", bad)
    choices.shipped.cache_clear()
    try:
        with pytest.raises(choices.TritonforgeError, match=str(bad)):
            choices.table("softmax")
    finally:
        choices.shipped.cache_clear()


def test_the_shipped_softmax_table_keeps_orts_kernel_at_77_columns_and_takes_4096():
    table = choices.table("softmax").speedup["fp16"]
    assert table[77] < 1 < table[4096]


def test_check_says_when_the_file_is_not_what_the_rows_give(tmp_path, capsys):
    out = tmp_path / "choices.json"
    assert choice_file.main(["--out", str(out)]) == 0
    assert choice_file.main(["--out", str(out), "--check"]) == 0
    out.write_text(out.read_text().replace("0.951", "1.951"))
    assert choice_file.main(["--out", str(out), "--check"]) == 1
    assert "differs from what" in capsys.readouterr().err
