"""The long-format results file: partial runs update only what they measured."""

import csv

import pytest

from benchmarks.results import merge, write_rows


def rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def test_a_run_replaces_only_the_shapes_it_measured(tmp_path):
    path = tmp_path / "r.csv"
    write_rows("bw", "H200", [{"shape": "1x2", "dtype": "fp16", "metric": "us", "value": "1"},
                              {"shape": "3x4", "dtype": "fp16", "metric": "us", "value": "2"}], path)
    write_rows("other", "H200", [{"shape": "1x2", "dtype": "fp16", "metric": "us", "value": "9"}], path)
    write_rows("bw", "H200", [{"shape": "1x2", "dtype": "fp16", "metric": "us", "value": "5"}], path)
    got = {(r["benchmark"], r["shape"]): r["value"] for r in rows(path)}
    assert got == {("bw", "1x2"): "5", ("bw", "3x4"): "2", ("other", "1x2"): "9"}
    assert not (tmp_path / "r.tmp").exists()


def test_merge_keeps_the_source_command_and_time(tmp_path):
    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    write_rows("bw", "H200", [{"shape": "1x2", "dtype": "fp32", "value": "1"}], a)
    write_rows("bw", "H200", [{"shape": "1x2", "dtype": "fp32", "value": "7"}], b)
    src = rows(b)[0]
    assert merge(b, a) == 1
    (only,) = rows(a)
    assert only["value"] == "7" and only["timestamp"] == src["timestamp"] and only["command"] == src["command"]


def test_merge_only_adds_the_named_columns_and_keeps_the_earlier_run(tmp_path):
    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    write_rows("e2e", "H100", [{"shape": "m", "dtype": "fp16", "provider": "tritonforge", "metric": "ms", "value": "6"},
                               {"shape": "m", "dtype": "fp16", "provider": "torch_compile", "metric": "ms",
                                "value": "8"}], a)
    write_rows("e2e", "H100", [{"shape": "m", "dtype": "fp16", "provider": "tritonforge", "metric": "ms", "value": "7"},
                               {"shape": "m", "dtype": "fp16", "provider": "max", "metric": "ms", "value": "9"},
                               {"shape": "m", "dtype": "fp16", "provider": "tritonforge", "metric": "vs_max",
                                "value": "1.3"}], b)
    assert merge(b, a, only=["max", "tritonforge:vs_max"]) == 2
    got = {(r["provider"], r["metric"]): r["value"] for r in rows(a)}
    assert got == {("tritonforge", "ms"): "6", ("torch_compile", "ms"): "8", ("max", "ms"): "9",
                   ("tritonforge", "vs_max"): "1.3"}


def test_merge_only_refuses_a_file_without_those_rows(tmp_path):
    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    write_rows("e2e", "H100", [{"shape": "m", "provider": "tritonforge", "metric": "ms", "value": "6"}], b)
    with pytest.raises(SystemExit, match="no rows of max"):
        merge(b, a, only=["max"])
    assert not a.exists()
