"""The end-to-end bench on the CPU: an export of the fixtures as `--onnx`, through the same code a GPU
run takes (rewrite, both sessions bound, outputs compared, interleaved timing, results rows); its output
check catches a wrong model."""

from __future__ import annotations

import csv
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("onnxruntime", reason="the bench runs models in onnxruntime")
pytest.importorskip("onnx", reason="the bench rewrites ONNX models")

from benchmarks import e2e_bench  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
EXPORT = ROOT / "tests/runtime/ortlib/rewrite/exports/sd15_vae_decoder_tiny.dynamo.fp16.onnx"


def _own_export(ort_library, tmp_path, *extra, runs: str = "3"):
    """e2e_bench.py --onnx on a copy of the tiny VAE export in `tmp_path` (the rewrite goes beside the model), on the
    CPU EP: (the process, the results file)."""
    import shutil

    for f in EXPORT.parent.glob(EXPORT.name + "*"):
        shutil.copy(f, tmp_path / f.name)
    results = tmp_path / "results.csv"
    proc = subprocess.run([sys.executable, "benchmarks/e2e_bench.py", "--onnx", str(tmp_path / EXPORT.name),
                           "--provider", "cpu", "--library", str(ort_library), "--runs", runs, "--warmup", "1",
                           *extra, "--results", str(results)], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc, results


def test_an_export_of_your_own_is_rewritten_checked_timed_and_recorded(ort_library, tmp_path):
    proc, results = _own_export(ort_library, tmp_path)
    rows = {(r["provider"], r["metric"]): r for r in csv.DictReader(results.open())}
    assert {r["benchmark"] for r in rows.values()} == {"e2e"}
    # the printed row names the device its rows name (a CPU here)
    device = rows[("ort", "ms")]["device"].removeprefix("NVIDIA ")
    assert f"| sd15_vae_decoder_tiny.dynamo.fp16 | {device} | file | fp16 |" in proc.stdout
    assert float(rows[("ort", "ms")]["value"]) > 0 and float(rows[("tritonforge", "ms")]["value"]) > 0
    assert float(rows[("rewrite", "max_rel_diff")]["value"]) < 2e-2
    # the export's own count: each GroupNorm (an InstanceNormalization pattern) and its one attention, one node each,
    # and where the library's Linear measured faster in fp16, the attention's four projections (MatMul + bias Add)
    import onnx
    from tritonforge.runtime.ortlib.rewrite import choices

    m = onnx.load(str(EXPORT), load_external_data=False)
    ops = [n.op_type for n in m.graph.node]
    weights = {t.name for t in m.graph.initializer if len(t.dims) == 2}
    linears = sum(1 for n in m.graph.node if n.op_type == "MatMul" and n.input[1] in weights)
    done, left = ops.count("InstanceNormalization") + ops.count("Softmax"), 0
    assert (done, ops.count("Softmax"), linears) == (15, 1, 4)
    done += linears if choices.table("linear").speedup.get("fp16", {}).get("none", 0) >= 1 else 0
    assert rows[("rewrite", "max_rel_diff")]["extra"].startswith(f"{done} nodes rewritten, {left} left")
    assert (tmp_path / "sd15_vae_decoder_tiny.dynamo.fp16.tf.onnx.data").is_file()
    table = subprocess.run([sys.executable, "benchmarks/e2e_bench.py", "--report", "--results", str(results)],
                           cwd=ROOT, capture_output=True, text=True, timeout=60)
    speedup = float(rows[("tritonforge", "speedup")]["value"])
    assert table.returncode == 0 and "| fp16 | " in table.stdout
    first = float(rows[("tritonforge", "first_result_s")]["value"])  # the rewrite's first result, a fresh process's
    # no best settings, no torch.compile, no resize
    assert f"| {speedup:.2f}x | - | - | - | - | - | - | {first:.1f} | - | - | {done} | {left} |" in table.stdout


def test_an_fp8_rewrite_is_held_to_its_cosine_and_its_rows_say_so(ort_library, tmp_path):
    """--precision fp8 --fp8-min-features 0 on the tiny VAE (its attention's four Linears, 32 wide): the rewrite is
    checked by its cosine against the export, not the dtype's tolerance, timed, and its rows (exporter `+fp8`, a
    `cosine` row) come back in the report."""
    _, results = _own_export(ort_library, tmp_path, "--precision", "fp8", "--fp8-min-features", "0", runs="2")
    rows = {(r["provider"], r["metric"]): r for r in csv.DictReader(results.open())}
    assert {r["shape"] for r in rows.values()} == {"sd15_vae_decoder_tiny.dynamo.fp16/file+fp8"}
    cosine = float(rows[("rewrite", "cosine")]["value"])
    assert e2e_bench.FP8_MIN_COSINE <= cosine <= 1 and float(rows[("tritonforge", "ms")]["value"]) > 0
    assert (tmp_path / "sd15_vae_decoder_tiny.dynamo.fp16.fp8.tf.onnx").is_file()
    table = subprocess.run([sys.executable, "benchmarks/e2e_bench.py", "--report", "--results", str(results)],
                           cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert f"(cosine {cosine:.5f}) |" in table.stdout, table.stdout
    bad = subprocess.run([sys.executable, "benchmarks/e2e_bench.py", "--onnx", str(tmp_path / EXPORT.name),
                          "--fp8-min-features", "0"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "--fp8-min-features goes with --precision fp8" in bad.stderr


@pytest.mark.parametrize("choices, said", [
    ("nope", "error: --choices: 'nope' is not a comma list of tables and measured"),
    ("tables,measured", "error: --choices measured times the rewrite's choices on the GPU the sides run on: it needs "
                        "--provider cuda")])
def test_choices_the_bench_cannot_make_are_refused_before_anything_runs(tmp_path, choices, said):
    proc = subprocess.run([sys.executable, "benchmarks/e2e_bench.py", "--onnx", str(EXPORT), "--provider", "cpu",
                           "--choices", choices, "--results", str(tmp_path / "r.csv")], cwd=ROOT, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode != 0 and said in proc.stderr and not (tmp_path / "r.csv").exists()


def test_best_settings_time_the_export_under_them_too_and_say_what_they_were(ort_library, tmp_path):
    _, results = _own_export(ort_library, tmp_path, "--settings", "best", "--layout", "nchw,nhwc", runs="2")
    every = list(csv.DictReader(results.open()))
    # both layouts' rewrites timed against the one export, each beside it
    assert {r["shape"] for r in every} == {"sd15_vae_decoder_tiny.dynamo.fp16/file+best",
                                           "sd15_vae_decoder_tiny.dynamo.fp16/file+best+nhwc"}
    assert (tmp_path / "sd15_vae_decoder_tiny.dynamo.fp16.nhwc.tf.onnx").is_file()
    rows = {(r["provider"], r["metric"]): r for r in every if r["shape"].endswith("+best")}
    ms = {p: float(rows[(p, "ms")]["value"]) for p in ("ort_best", "tritonforge")}
    assert all(v > 0 for v in ms.values()) and ("ort", "ms") not in rows  # the export at its best settings only
    # on the CPU EP the CUDA options do not apply, and the rows say so
    assert rows[("ort_best", "ms")]["extra"] == rows[("tritonforge", "ms")]["extra"] == "settings: none"
    same = float(rows[("tritonforge", "speedup_same_settings")]["value"])
    assert same == pytest.approx(ms["ort_best"] / ms["tritonforge"], rel=5e-2)
    table = subprocess.run([sys.executable, "benchmarks/e2e_bench.py", "--report", "--results", str(results)],
                           cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert f"| file+best | fp16 | - | {ms['tritonforge']:.2f} | - |" in table.stdout
    # the report gives the ratio as the run took it (its ms unrounded), not one derived again from the rows
    assert f"| {ms['ort_best']:.2f} | {same:.2f}x |" in table.stdout, table.stdout


def test_outputs_are_compared_relative_to_their_largest_magnitude_and_nans_fail():
    a = np.array([1.0, -4.0, 2.0], np.float16)
    assert e2e_bench.rel_diff(a, a) == 0
    assert e2e_bench.rel_diff(a, a + np.float16(0.5)) == pytest.approx(0.125)
    assert np.isnan(e2e_bench.rel_diff(a, np.array([1.0, np.nan, 2.0])))


CUDNN_NHWC = ("void cudnn::ops::nchwToNhwcKernel<__half, __half, float, false, true>"
              "(cudnn::ops::nchw2nhwc_params_t<float>, __half const*, __half*)")


def test_kernels_are_told_apart_by_what_they_do():
    kind = {name: next((k for k, rx in e2e_bench.KINDS if re.search(rx, name)), "other")
            for name in ("group_norm_nchw_kernel", "softmax_rows_kernel", "bn_fw_tr_1C11_kernel_NCHW",
                         "sm90_xmma_fprop_implicit_gemm_f16f16_f16f32", "sm90_xmma_gemm_f16f16_f16f32",
                         "onnxruntime::cuda::softmax_warp_forward", "GroupNormNHWCSumKernel",
                         CUDNN_NHWC, "void onnxruntime::cuda::Transpose4DKernel<uint16_t>(int)")}
    assert kind == {"group_norm_nchw_kernel": "tritonforge", "softmax_rows_kernel": "tritonforge",
                    "bn_fw_tr_1C11_kernel_NCHW": "group/instance norm (ORT)",
                    "sm90_xmma_fprop_implicit_gemm_f16f16_f16f32": "convolution",
                    "sm90_xmma_gemm_f16f16_f16f32": "matmul",
                    "onnxruntime::cuda::softmax_warp_forward": "softmax (ORT)",
                    "GroupNormNHWCSumKernel": "group/instance norm (ORT)",
                    CUDNN_NHWC: "layout conversion",
                    "void onnxruntime::cuda::Transpose4DKernel<uint16_t>(int)": "layout conversion"}
    # the report names layout conversions by function, without namespace, template or parameters
    assert e2e_bench.kernel_name(CUDNN_NHWC) == "nchwToNhwcKernel"
    assert e2e_bench.kernel_name("void onnxruntime::cuda::Transpose4DKernel<uint16_t>(int)") == "Transpose4DKernel"


def test_torchaos_side_is_quantized_compiled_and_held_to_the_fp8_bound():
    assert e2e_bench._mode_argv("torchao-fp8") == ["--mode", "reduce-overhead", "--quantize", "torchao-fp8-row",
                                                   "--min-cosine", e2e_bench.FP8_MIN_COSINE]
    assert e2e_bench._mode_argv("max-autotune") == ["--mode", "max-autotune"]


TORCH_SIDE = dict(own="own process; torch.compile(mode='reduce-overhead'); cudnn.benchmark")


def _torch_run(ort_library, tmp_path, *extra):
    """e2e_bench.py --onnx on the tiny torch module's export, its torch.compile side from tiny_torch.make."""
    pytest.importorskip("torch", reason="the torch side needs torch (pins/bench.txt)")
    from . import tiny_torch

    model = tmp_path / "tiny_block.onnx"
    tiny_torch.export(model)
    results = tmp_path / "results.csv"
    proc = subprocess.run([sys.executable, "benchmarks/e2e_bench.py", "--onnx", str(model), "--provider", "cpu",
                           "--library", str(ort_library), "--runs", "3", "--warmup", "1", "--torch-compile",
                           "--torch-module", "tests.benchmarks.tiny_torch:make", "--compile-modes", "reduce-overhead",
                           "--results", str(results), *extra], cwd=ROOT, capture_output=True, text=True, timeout=600)
    return proc, {(r["provider"], r["metric"]): r for r in csv.DictReader(results.open())} if results.is_file() else {}


def test_a_run_stopped_part_way_keeps_the_rows_of_the_sides_it_finished(ort_library, tmp_path):
    """The bench stopped while torch.compile compiles (a GPU call's time limit, say): the results file already holds
    the onnxruntime side's rows, complete and readable."""
    import os
    import signal
    import time

    pytest.importorskip("torch", reason="the torch side needs torch (pins/bench.txt)")
    from . import tiny_torch

    model, results = tmp_path / "tiny_block.onnx", tmp_path / "results.csv"
    tiny_torch.export(model)
    proc = subprocess.Popen([sys.executable, "benchmarks/e2e_bench.py", "--onnx", str(model), "--provider", "cpu",
                             "--library", str(ort_library), "--runs", "3", "--warmup", "1", "--torch-compile",
                             "--torch-module", "tests.benchmarks.tiny_torch:make", "--compile-modes",
                             "reduce-overhead", "--results", str(results)], cwd=ROOT, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 240
        while proc.poll() is None and time.monotonic() < deadline and not (
                results.is_file() and "tritonforge,tiny_block" in results.read_text().replace('"', "")):
            time.sleep(0.2)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    assert proc.returncode == -signal.SIGKILL, "the bench ended before it could be stopped part way"
    rows = {(r["provider"], r["metric"]): r for r in csv.DictReader(results.open())}
    assert float(rows[("tritonforge", "ms")]["value"]) > 0 and ("torch_compile", "ms") not in rows


@pytest.mark.full  # 25 s on the 2-core CI machine: the default suite keeps the compile-limit and refused-export runs
@pytest.mark.parametrize("again", [False, True])
def test_torch_compile_is_timed_in_a_process_of_its_own_with_both_sides_first_results(ort_library, tmp_path, again):
    """The torch side's machinery on the CPU: the module compiled in a fresh process, its output checked against the
    export's, timed once steady; both sides' first result from a fresh process; with --first-result (`again`, in the
    full run) once more each: the rewrite with the tune file its first run wrote, torch.compile from the cache its
    first run filled."""
    proc, rows = _torch_run(ort_library, tmp_path, *(["--first-result"] if again else []))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    compiled = rows[("torch_compile", "ms")]
    assert compiled["extra"] == TORCH_SIDE["own"] and float(compiled["value"]) > 0
    assert float(rows[("torch_compile", "max_rel_diff")]["value"]) < 5e-3  # checked before it was timed
    assert rows[("torch_compile", "max_rel_diff")]["extra"] == ""
    ratio = float(compiled["value"]) / float(rows[("tritonforge", "ms")]["value"])  # as the report derives it
    assert float(rows[("tritonforge", "speedup_vs_torch_compile")]["value"]) == pytest.approx(ratio, rel=0.05)
    sides = ("tritonforge", "torch_compile") + (("tritonforge+tuned", "torch_compile+warm") if again else ())
    first = {p: float(rows[(p, "first_result_s")]["value"]) for p in sides}
    assert all(s > 0 for s in first.values()) and len(first) == len(
        [k for k in rows if k[1] == "first_result_s"]), first
    # a fresh process's compile of even this block costs more than making the session and running it
    assert first["torch_compile"] > first["tritonforge"], first
    table = subprocess.run([sys.executable, "benchmarks/e2e_bench.py", "--report", "--results",
                            str(tmp_path / "results.csv")], cwd=ROOT, capture_output=True, text=True, timeout=60)
    tuned = f" ({first['tritonforge+tuned']:.1f})" if again else ""
    warm = f" ({first['torch_compile+warm']:.1f})" if again else ""
    assert (f"| {float(compiled['value']):.2f} | {ratio:.2f}x | - | - | {first['tritonforge']:.1f}{tuned} | "
            f"{first['torch_compile']:.1f}{warm} |" in table.stdout), table.stdout


def test_a_compile_past_its_limit_is_stopped_and_said(ort_library, tmp_path):
    proc, rows = _torch_run(ort_library, tmp_path, "--compile-limit", "1")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert rows[("torch_compile", "max_rel_diff")]["extra"] == "did not compile in 1 s"
    assert ("torch_compile", "ms") not in rows and ("tritonforge", "ms") in rows
    table = subprocess.run([sys.executable, "benchmarks/e2e_bench.py", "--report", "--results",
                            str(tmp_path / "results.csv")], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert "| not timed: did not compile in 1 s | - |" in table.stdout, table.stdout
