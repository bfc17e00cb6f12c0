"""Choosing by timing on the machine that runs the model (rewrite/measure.py): the sites cut out and checked on
onnxruntime's CPU EP with the library's CPU ops, the verdicts forced by a fake timing source, and the CUDA EP on a
GPU."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

ort = pytest.importorskip("onnxruntime")
onnx = pytest.importorskip("onnx")

from tritonforge.runtime.ortlib import DOMAIN  # noqa: E402
from tritonforge.runtime.ortlib.errors import TritonforgeError  # noqa: E402
from tritonforge.runtime.ortlib.rewrite import rewrite, rewrite_file  # noqa: E402
from tritonforge.runtime.ortlib.rewrite.files import read  # noqa: E402
from tritonforge.runtime.ortlib.rewrite.graph import MS  # noqa: E402
from tritonforge.runtime.ortlib.rewrite.measure import MeasuredFile, OrtTimer, Timed, measure  # noqa: E402

from tests.runtime.ortlib.rewrite.sessions import run_once  # noqa: E402

EXPORTS = Path(__file__).resolve().parent / "exports"
UNET = EXPORTS / "sd15_unet_tiny.torchscript.fp16.onnx"
ROOT = Path(__file__).resolve().parents[4]


def cpu_timer(lib, runs=1):
    return OrtTimer(lib, providers=["CPUExecutionProvider"], runs=runs, warmup=0, device="the CPU")


class FakeTimer:
    """The CPU EP's outputs, with times that make `fastest` ("export", "library" or "ort": which the model is, by the
    domains of its nodes) win; `wrong`: that candidate's outputs moved off the export's."""

    device = "a fake GPU"

    def __init__(self, lib, fastest: str, wrong: str = ""):
        self.real, self.fastest, self.wrong = cpu_timer(lib), fastest, wrong
        self.seen = Counter()

    def __call__(self, model, feeds, copies):
        domains = {n.domain for n in model.graph.node}
        kind = "library" if DOMAIN in domains else "ort" if MS in domains else "export"
        self.seen[kind] += 1
        outputs = self.real(model, feeds, copies).outputs
        if kind == self.wrong:
            outputs = {k: v + 1.0 for k, v in outputs.items()}
        return Timed(1e-6 if kind == self.fastest else 2e-6, outputs)


def ops(model) -> Counter:
    return Counter((n.domain or "", n.op_type) for n in model.graph.node)


def rewritten(lib, timer=None, src=UNET, **kw):
    model, base = read(src)
    report = rewrite(model, lib, base_dir=base, timer=timer, **kw)
    return model, report




def test_every_site_of_a_unet_is_cut_out_checked_and_timed_on_the_cpu_ep(ort_library):
    """Real sessions, real outputs: every candidate of the SD 1.5 UNet's sites agrees with the export's nodes it
    replaces (a site cut wrong does not), and the model written from the verdicts computes the export."""
    model, report = rewritten(ort_library, cpu_timer(ort_library, runs=2))
    rows = report.measured_rows
    assert len(rows) >= 10, report.lines()
    for row in rows.values():
        assert isinstance(row["export"], float) and row["export"] > 0, row
        assert all(isinstance(v, float) for v in row.values()), row  # every candidate checked
    assert "decided by timing on the CPU" in report.measured
    assert any(line.startswith("choices timed here: ") for line in report.lines())
    export, _ = read(UNET)
    a, b = run_once(export), run_once(model, ort_library)
    assert np.abs(a - b).max() <= 2e-2 * np.abs(a).max()


@pytest.mark.parametrize("fastest", ["export", "library", "ort"])
def test_the_fastest_candidate_of_each_site_is_written(ort_library, fastest):
    timer = FakeTimer(ort_library, fastest)
    model, report = rewritten(ort_library, timer)
    tables, _ = rewritten(ort_library)
    got, base = ops(model), ops(tables)
    assert timer.seen["export"] >= 10 and timer.seen["library"] >= 10 and timer.seen["ort"] >= 1
    decided = report.measured.split(" site(s)")[0]
    n, of = (int(x) for x in decided.split(" of "))
    assert n == of > 0
    # the sites written otherwise than the tables write them, counted from the two models' fused nodes
    by_choice = {k: v for k, v in base.items() if k[0] in (DOMAIN, MS) and k[1] not in ("GroupNorm", "SkipGroupNorm")}
    moved = {"export": sum(by_choice.values()),  # every fused node the tables chose goes back to the export's nodes
             "library": sum(v for (d, _), v in by_choice.items() if d == MS)  # ORT's go, and more Linears come
             + got[(DOMAIN, "Linear")] - base[(DOMAIN, "Linear")],
             "ort": sum(v for (d, _), v in by_choice.items() if d == DOMAIN)}  # the library's go (ORT's stay)
    assert report.measured_changed == moved[fastest] > 0, (report.measured, by_choice)
    assert f"{moved[fastest]} differ from the shipped tables' choice" in report.measured
    if fastest == "export":
        # what the tables put in the library's or ORT's ops by choice is kept as exported: no fused norm, no
        # attention, no Linear (the one after each GEGLU too, whose input's dims inference leaves open and a walk
        # proves); the GroupNorms (no choice: the library's always) stay
        assert not {k for k in got if k[1] in ("MultiHeadAttention", "SkipLayerNormalization")}
        assert got[(DOMAIN, "Linear")] == 0 and "left to the tables" not in report.measured, report.measured
        assert got[(DOMAIN, "GroupNorm")] + got[(DOMAIN, "SkipGroupNorm")] == (
            base[(DOMAIN, "GroupNorm")] + base[(DOMAIN, "SkipGroupNorm")])
        assert any("measured on a fake GPU: the export 1.0 us" in why for why in report.left), report.left
    elif fastest == "library":
        assert got[(DOMAIN, "MultiHeadAttention")] == 8 and got[(MS, "MultiHeadAttention")] == 0
        assert got[(DOMAIN, "Linear")] >= base[(DOMAIN, "Linear")]
        assert got[(DOMAIN, "Softmax")] == 0  # each softmax is inside an attention that went whole
    else:
        assert got[(MS, "MultiHeadAttention")] == 8 and got[(DOMAIN, "MultiHeadAttention")] == 0


@pytest.mark.parametrize("name", ["sd3_medium_tiny.torchscript.fp32", "pixart_sigma_tiny.torchscript.fp16",
                                  "sdxl_unet_tiny.torchscript.fp16"])
def test_every_site_is_timed_once_its_chunked_inputs_dims_are_proved(ort_library, name):
    """The modulation chunks of SD3's and PixArt's AdaLayerNorms and a GEGLU's product, whose Slice bounds ONNX
    inference leaves open, are sized by the walk: no site is left to the tables, and each shape is timed once."""
    timer = FakeTimer(ort_library, fastest="library")
    _, report = rewritten(ort_library, timer, src=EXPORTS / f"{name}.onnx")
    assert "left to the tables" not in report.measured, report.measured
    timed = len(report.measured_rows)
    assert f"({timed} shape(s) timed now, 0 from the measured file" in report.measured, report.measured
    assert timer.seen["export"] == timed


def test_a_candidate_that_computes_something_else_is_never_chosen(ort_library):
    timer = FakeTimer(ort_library, fastest="library", wrong="library")
    model, report = rewritten(ort_library, timer)
    assert ops(model)[(DOMAIN, "MultiHeadAttention")] == 0
    wrong = [v for row in report.measured_rows.values() for v in row.values() if isinstance(v, str)]
    assert wrong and all(v.startswith("did not check: ") and "largest value from the export's" in v for v in wrong)


def test_past_the_budget_the_tables_decide_and_the_trials_change_nothing(ort_library):
    timer = FakeTimer(ort_library, fastest="export")
    model, report = rewritten(ort_library, timer, measure_budget=-1)
    tables, _ = rewritten(ort_library)
    assert sum(timer.seen.values()) == 0
    assert "0 of " in report.measured and "past the -1 s budget left to the tables" in report.measured
    assert [(n.domain, n.op_type, list(n.input), list(n.output)) for n in model.graph.node] == [
        (n.domain, n.op_type, list(n.input), list(n.output)) for n in tables.graph.node]


def test_the_budget_counts_from_where_the_rewrite_began_not_from_the_first_shape(ort_library):
    """rewrite_file counts the budget from its own start (its reading of the model included): a rewrite that began
    longer ago than the budget times nothing; one that began just now times every shape."""
    late = FakeTimer(ort_library, fastest="library")
    _, report = rewritten(ort_library, late, measure_budget=30, measure_from=time.monotonic() - 31)
    assert sum(late.seen.values()) == 0 and "past the 30 s budget left to the tables" in report.measured
    assert "give a larger --measure-budget" in report.measured  # rewriting again would spend it the same way
    now = FakeTimer(ort_library, fastest="library")
    _, report = rewritten(ort_library, now, measure_budget=30, measure_from=time.monotonic())
    assert now.seen["export"] == len(report.measured_rows) > 0 and "budget" not in report.measured


def test_rows_measured_before_are_not_timed_again_and_the_file_keeps_them_per_key(ort_library, tmp_path):
    first = FakeTimer(ort_library, fastest="library")
    _, report = rewritten(ort_library, first)
    kept = MeasuredFile(tmp_path / "unet.tf.onnx", {"device": "a fake GPU", "onnxruntime": ort.__version__})
    assert kept.path.name == "unet.tf.measured.json"
    kept.write(report.measured_rows)
    assert json.loads(kept.path.read_text())["rows"] == report.measured_rows
    assert MeasuredFile(tmp_path / "unet.tf.onnx", {"device": "another GPU"}).rows() == {}
    again = FakeTimer(ort_library, fastest="export")  # would flip every verdict, were it asked
    model, second = rewritten(ort_library, again, measured_rows=kept.rows())
    assert sum(again.seen.values()) == 0
    assert "0 shape(s) timed now" in second.measured
    assert ops(model)[(DOMAIN, "MultiHeadAttention")] == 8


class SlowTimer(FakeTimer):
    """A FakeTimer that takes 150 ms a side, so that a budget runs out part way."""

    def __call__(self, model, feeds, copies):
        time.sleep(0.15)
        return super().__call__(model, feeds, copies)


def test_a_rewrite_again_times_what_the_budget_left_and_reuses_what_was_timed(ort_library):
    rows: dict = {}
    rounds = 0
    while rounds < 40:
        rounds += 1
        timer = SlowTimer(ort_library, fastest="library")
        # the budget counts from the rewrite's start: well past its matching on a loaded 2-core machine
        _, report = rewritten(ort_library, timer, measure_budget=2.0, measured_rows=dict(rows))
        timed = int(report.measured.split(" shape(s) timed now")[0].rpartition("(")[2])
        assert timer.seen["export"] == timed and set(rows) < set(report.measured_rows), report.measured
        rows = report.measured_rows
        if "budget" not in report.measured:
            break
        assert "rewriting again times them: what was timed now is kept" in report.measured
    assert "budget" not in report.measured and "left to the tables" not in report.measured, report.measured
    assert rounds >= 2, rounds  # the budget did run out at first


def test_a_symbolic_dim_is_timed_once_it_is_sized(ort_library):
    src = EXPORTS / "sd15_unet_tiny.torchscript.dynamic.fp32.onnx"
    model, base = read(src)
    graph_dims = {d.dim_param for i in model.graph.input for d in i.type.tensor_type.shape.dim if d.dim_param}
    report = rewrite(model, ort_library, base_dir=base, timer=FakeTimer(ort_library, "library"))
    assert "left to the tables: an input's dims are not fixed (a dynamic export: size the model's symbolic input " \
        "dims with --dims NAME=SIZE)" in report.measured
    assert report.measured.startswith("0 of 0 site(s)")
    model, base = read(src)
    sizes = {d: 4 if "height" in d or "width" in d else 2 for d in graph_dims}
    sized = rewrite(model, ort_library, base_dir=base, timer=FakeTimer(ort_library, "library"), dims=sizes)
    assert int(sized.measured.split(" of ")[0]) >= 10, sized.measured
    model, base = read(src)
    with pytest.raises(TritonforgeError, match="--dims names nope, which the model's inputs do not have; its "
                       "symbolic dims are " + ", ".join(sorted(graph_dims))):
        rewrite(model, ort_library, base_dir=base, timer=FakeTimer(ort_library, "library"), dims={"nope": 2})


def test_measure_asks_nothing_of_a_model_without_choices(ort_library):
    from tritonforge.runtime.ortlib.rewrite.graph import Graph

    model, base = read(UNET)
    done = measure(Graph(model, base), lambda pick, verdicts: ({}, []), FakeTimer(ort_library, "export"))
    assert done.verdicts == {} and done.summary.startswith("0 of 0 site(s)")


def test_measure_on_says_what_this_machine_lacks_and_writes_nothing(ort_library, tmp_path):
    if "CUDAExecutionProvider" in ort.get_available_providers():
        pytest.skip("this onnxruntime has the CUDA EP: --measure on runs (the gpu test below)")
    out = tmp_path / "unet.tf.onnx"
    cmd = [sys.executable, "-m", "tritonforge.runtime.ortlib.cli", str(UNET), "-o", str(out), "--library",
           str(ort_library), "--measure", "on"]
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert done.returncode == 1, done.stderr
    assert "measure='on' times the choices on this machine's GPU, but " in done.stderr
    assert not out.exists() and list(tmp_path.iterdir()) == []
    bad = subprocess.run([*cmd[:-2], "--dims", "batch=two"], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert bad.returncode == 2 and "'batch=two' is not NAME=SIZE" in bad.stderr


@pytest.mark.gpu
def test_the_rewrite_times_its_choices_on_the_cuda_ep_and_keeps_them_beside_the_model(ort_cuda, library, tmp_path):
    dst = tmp_path / "unet.tf.onnx"
    said = []
    report = rewrite_file(UNET, dst, library, measure="on", progress=said.append)
    assert said[-1].startswith("writing ") and said[:-1] and all(line.startswith("measuring ") for line in said[:-1])
    kept = dst.with_name("unet.tf.measured.json")
    assert str(kept) in report.wrote and json.loads(kept.read_text())["rows"] == report.measured_rows
    assert all(isinstance(row["export"], float) for row in report.measured_rows.values())
    assert all(isinstance(v, float) for row in report.measured_rows.values() for v in row.values()), \
        report.measured_rows
    again = rewrite_file(UNET, dst, library, measure="on")
    assert "0 shape(s) timed now" in again.measured
    outs = [run_once(path, lib, ["CUDAExecutionProvider"]) for path, lib in ((UNET, None), (dst, library))]
    assert np.abs(outs[0] - outs[1]).max() <= 2e-2 * np.abs(outs[0]).max()


@pytest.mark.gpu
def test_fp8_is_timed_on_the_cuda_ep_against_each_linear_as_it_is(ort_cuda, library, tmp_path):
    """On a GPU with fp8 tensor cores, each Linear of the tiny DiT is timed there as it is and as Fp8Linear, both
    sides checked and timed (no row holds a failure), and the model written runs within fp8's bound."""
    from tritonforge.runtime.ortlib.rewrite import choices

    known = choices.model_of(choices.detect_gpu() or "")
    if known is None or choices.ARCHS[known[0]][0] not in ("ada", "hopper", "blackwell"):
        pytest.skip("this GPU has no fp8 tensor cores (or is none the rewrite knows)")
    dst = tmp_path / "dit.tf.onnx"
    report = rewrite_file(FP8_EXPORT, dst, library, measure="on", precision="fp8")
    rows = {k: v for k, v in report.measured_rows.items() if k.startswith("fp8:")}
    assert rows and all(isinstance(v, float) for row in rows.values() for v in row.values()), rows
    assert "Linear(s) decided by timing on" in report.fp8_measured, report.lines()
    outs = [run_once(path, lib, ["CUDAExecutionProvider"]) for path, lib in ((FP8_EXPORT, None), (dst, library))]
    a, b = (o.astype(np.float64).ravel() for o in outs)
    assert a @ b / np.linalg.norm(a) / np.linalg.norm(b) >= 0.995


class Fp8FakeTimer(FakeTimer):
    """A FakeTimer that also tells the fp8 node apart: a model holding an Fp8Linear is "fp8"."""

    def __call__(self, model, feeds, copies):
        if not any(n.op_type == "Fp8Linear" for n in model.graph.node):
            return super().__call__(model, feeds, copies)
        self.seen["fp8"] += 1
        outputs = self.real(model, feeds, copies).outputs
        if self.wrong == "fp8":
            outputs = {k: -v for k, v in outputs.items()}
        return Timed(1e-6 if self.fastest == "fp8" else 3e-6, outputs)


FP8_EXPORT = EXPORTS / "sd3_medium_tiny.ort.fp16.onnx"


@pytest.mark.parametrize("fastest", ["fp8", "export"])
def test_each_linear_goes_to_fp8_where_it_timed_faster_here(ort_library, fastest):
    """With a timer the fp8 rewrite times every Linear it may take as it is and as Fp8Linear (both run on the CPU EP,
    the fp8 one checked against the other first) and keeps the faster: the tiny model's narrow Linears, which the
    break-even alone keeps, go to fp8 where fp8 is timed faster and stay where it is not."""
    timer = Fp8FakeTimer(ort_library, fastest=fastest)
    model, report = rewritten(ort_library, timer, src=FP8_EXPORT, precision="fp8", fp8_check=False)
    fp8 = ops(model)[(DOMAIN, "Fp8Linear")]
    said = report.fp8_measured
    decided = int(said.split(" Linear(s) decided")[0])
    assert decided > 0 and timer.seen["fp8"] == int(said.split("GPU (")[1].split(" shape(s)")[0]) > 0, said
    assert fp8 == (decided if fastest == "fp8" else 0) and f": {fp8} to fp8, {decided - fp8} kept" in said, said
    assert sum(1 for k in report.measured_rows if k.startswith("fp8:")) == timer.seen["fp8"]
    assert any(line.startswith("fp8 timed here: ") for line in report.lines())


def test_an_fp8_node_that_computes_something_else_is_kept_out_and_rows_are_reused(ort_library):
    wrong = Fp8FakeTimer(ort_library, fastest="fp8", wrong="fp8")
    model, report = rewritten(ort_library, wrong, src=FP8_EXPORT, precision="fp8", fp8_check=False)
    assert ops(model)[(DOMAIN, "Fp8Linear")] == 0
    rows = {k: v for k, v in report.measured_rows.items() if k.startswith("fp8:")}
    assert rows and all(v["fp8"].startswith("did not check: ") for v in rows.values()), rows
    again = Fp8FakeTimer(ort_library, fastest="fp8")  # would take every one, were it asked
    model, _ = rewritten(ort_library, again, src=FP8_EXPORT, precision="fp8", fp8_check=False,
                         measured_rows=report.measured_rows)
    assert again.seen["fp8"] == 0 and ops(model)[(DOMAIN, "Fp8Linear")] == 0


def test_past_the_budget_the_break_even_decides_fp8(ort_library):
    timer = Fp8FakeTimer(ort_library, fastest="fp8")
    model, report = rewritten(ort_library, timer, src=FP8_EXPORT, precision="fp8", fp8_check=False, measure_budget=-1)
    assert timer.seen["fp8"] == 0 and ops(model)[(DOMAIN, "Fp8Linear")] == 0  # the tiny widths are below it
    assert "past the -1 s budget left to the break-even" in report.fp8_measured, report.fp8_measured


def test_tensors_kept_as_external_data_are_timed_too(ort_library, tmp_path):
    """A large export keeps its Constant nodes' tensors in the external file too (torch.onnx does past 2 GB, for a
    LayerNorm's ones and zeros, say; shapes stay inline): the cut-out sites carry them inline, since onnxruntime
    takes no external data in a model handed over as bytes."""
    model = onnx.load(str(EXPORTS / "sd3_medium_tiny.torchscript.fp32.onnx"))
    assert any(n.op_type == "Constant" for n in model.graph.node)
    from onnx import external_data_helper

    held = [n.attribute[0].t for n in model.graph.node if n.op_type == "Constant" and n.attribute[0].t.dims
            and n.attribute[0].t.data_type == onnx.TensorProto.FLOAT]
    assert held
    for t in held:
        external_data_helper.set_external_data(t, "sd3.onnx.data")
    src = tmp_path / "sd3.onnx"
    onnx.save(model, str(src), save_as_external_data=True, all_tensors_to_one_file=True, location="sd3.onnx.data")
    timer = FakeTimer(ort_library, fastest="library")
    _, report = rewritten(ort_library, timer, src=src)
    assert "left to the tables" not in report.measured, report.measured
    assert timer.seen["export"] == len(report.measured_rows) > 0
