"""`tritonforge-rewrite` (python -m tritonforge.runtime.ortlib.cli): what it says, and every failure as one
line on stderr with a non-zero exit."""

from __future__ import annotations

import subprocess
import sys

import pytest

onnx = pytest.importorskip("onnx", reason="the rewrite edits ONNX models")
pytest.importorskip("onnxruntime", reason="the rewrite loads what it writes in onnxruntime")


def _cli(*args, cwd):
    return subprocess.run([sys.executable, "-m", "tritonforge.runtime.ortlib.cli", *map(str, args)], cwd=cwd,
                          capture_output=True, text=True, timeout=120)


def test_it_says_what_it_rewrote_checked_and_wrote(ort_library, tmp_path):
    from .rewrite.test_rewrite import sd_block

    onnx.save(sd_block(21), str(tmp_path / "block.onnx"))
    proc = _cli("block.onnx", "--library", ort_library, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == ("GroupNormalization: 1 node(s) -> tritonforge.GroupNormalization "
                        "(from 1 ONNX GroupNormalization)")
    assert lines[-3].startswith("checked: it loads in onnxruntime ") and lines[-2] == "wrote block.tf.onnx"
    assert lines[-1].startswith("run it with tritonforge_ort.session(path)") and "prefer_nhwc=1" in lines[-1]


@pytest.mark.parametrize("attention", ["tritonforge", "ort"])
def test_attention_goes_where_it_is_told(ort_library, tmp_path, attention):
    from .rewrite.test_attention import _decomposed

    onnx.save(_decomposed(), str(tmp_path / "attn.onnx"))
    proc = _cli("attn.onnx", "--library", ort_library, "--attention", attention, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    domain = "tritonforge" if attention == "tritonforge" else "com.microsoft"
    assert proc.stdout.splitlines()[0].startswith(f"MultiHeadAttention: 1 node(s) -> {domain}.MultiHeadAttention "
                                                  "(from 1 torch.onnx decomposition")
    bad = _cli("attn.onnx", "--library", ort_library, "--attention", "fastest", cwd=tmp_path)
    assert bad.returncode == 2 and "--attention: invalid choice: 'fastest'" in bad.stderr


def test_the_layout_is_chosen_on_the_command_line_and_through_invoke(ort_library, tmp_path):
    from tests.cli import invoke

    from .rewrite.test_rewrite import sd_block

    onnx.save(sd_block(21), str(tmp_path / "block.onnx"))
    proc = _cli("block.onnx", "--library", ort_library, "--layout", "nhwc", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "channels-last: 1 GroupNormalization node(s) as tritonforge.GroupNorm between Transposes" in proc.stdout
    ops = [n.op_type for n in onnx.load(str(tmp_path / "block.tf.onnx")).graph.node]
    assert ops[:3] == ["Transpose", "GroupNorm", "Transpose"], ops
    from pathlib import Path

    root = Path(__file__).resolve().parents[3]
    done = invoke(root, "rewrite", "--model", str(tmp_path / "block.onnx"), "--out", str(tmp_path / "i.onnx"),
                  "--library", str(ort_library), "--layout", "nhwc")
    assert done.returncode == 0 and "channels-last: 1 GroupNormalization" in done.stdout, done.stdout
    bad = invoke(root, "rewrite", "--model", str(tmp_path / "block.onnx"), "--layout", "hwc")
    assert bad.returncode == 2 and "error: --layout must be nchw or nhwc, not 'hwc'" in bad.stdout, bad.stdout


def test_the_gpu_named_is_the_one_whose_measurements_decide_and_the_report_says_whose_did(ort_library, tmp_path,
                                                                                           capsys):
    from tests.cli import invoke

    from .rewrite.test_attention import _decomposed

    onnx.save(_decomposed(), str(tmp_path / "attn.onnx"))
    proc = _cli("attn.onnx", "--library", ort_library, "--gpu", "NVIDIA L4", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    # only the H200 measured attention: an Ada GPU takes the nearest measured architecture's rows, and says so
    assert "choices for NVIDIA L4 (named): measured on NVIDIA H200 (attention)" in proc.stdout.splitlines(), \
        proc.stdout
    (tmp_path / "attn.tf.onnx").unlink()
    from tritonforge.runtime.ortlib import cli

    assert cli.main([str(tmp_path / "attn.onnx"), "--library", str(ort_library), "--gpu", "Radeon RX 7900"]) == 1
    assert capsys.readouterr().err.startswith("error: --gpu 'Radeon RX 7900' is no GPU the rewrite knows")
    assert not (tmp_path / "attn.tf.onnx").exists()
    from pathlib import Path

    root = Path(__file__).resolve().parents[3]
    done = invoke(root, "rewrite", "--model", str(tmp_path / "attn.onnx"), "--out", str(tmp_path / "i.onnx"),
                  "--library", str(ort_library), "--gpu", "NVIDIA B200")
    assert done.returncode == 0 and "choices for NVIDIA B200 (named): measured on NVIDIA H200 (attention)" in \
        done.stdout, done.stdout


@pytest.mark.parametrize("case", ["no model", "not a model", "a library that does not load", "no library"])
def test_every_failure_is_one_line_on_stderr(ort_library, tmp_path, case):
    from .rewrite.test_rewrite import sd_block

    onnx.save(sd_block(21), str(tmp_path / "block.onnx"))
    (tmp_path / "junk.onnx").write_bytes(b"\x08junk")
    (tmp_path / "libbroken.so").write_bytes(b"\x7fELF not really")
    args, says = {
        "no model": (["gone.onnx", "--library", ort_library], "gone.onnx: cannot read an ONNX model: no such file"),
        "not a model": (["junk.onnx", "--library", ort_library], "junk.onnx: cannot read an ONNX model"),
        "a library that does not load": (["block.onnx", "--library", "libbroken.so"],
                                         "libbroken.so: the library does not load here"),
        "no library": (["block.onnx", "--library", "nowhere.so"], "nowhere.so: no such library"),
    }[case]
    proc = _cli(*args, cwd=tmp_path)
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("error: ") and says in proc.stderr, proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["block.onnx", "junk.onnx", "libbroken.so"]


def test_fp8_is_asked_for_on_the_command_line_and_through_invoke(ort_library, tmp_path, capsys):
    """--precision fp8 --fp8-min-features 0 on a tiny SD3 export: its Linears said and written as Fp8Linear;
    --fp8-min-features alone is refused in one line; invoke rewrite takes both options and --no-fp8-check."""
    from pathlib import Path

    from tritonforge.runtime.ortlib import cli

    from tests.cli import invoke

    from .rewrite.test_fp8 import EXPORTS, FP8_CASES

    src = EXPORTS / FP8_CASES[0]
    out = tmp_path / "fp8.onnx"
    assert cli.main([str(src), "-o", str(out), "--library", str(ort_library), "--precision", "fp8",
                     "--fp8-min-features", "0"]) == 0
    lines = capsys.readouterr().out.splitlines()
    said = [ln for ln in lines if ln.startswith("fp8: ")]
    assert any(ln.startswith("fp8 checked on the model's own activations") for ln in lines), lines
    ops = [n.op_type for n in onnx.load(str(out), load_external_data=False).graph.node]
    assert said == [f"fp8: {ops.count('Fp8Linear')} Linear(s) of 0+ features -> tritonforge.Fp8Linear (e4m3 weights "
                    "per output channel, activations per token; rewrite/fp8.py)"] and ops.count("Fp8Linear") > 0
    assert cli.main([str(src), "-o", str(tmp_path / "x.onnx"), "--library", str(ort_library),
                     "--fp8-min-features", "16"]) == 1
    assert capsys.readouterr().err.startswith("error: fp8_min_features=16: a count of features >= 0, with "
                                              "precision='fp8'")
    assert not (tmp_path / "x.onnx").exists()
    root = Path(__file__).resolve().parents[3]
    done = invoke(root, "rewrite", "--model", str(src), "--out", str(tmp_path / "i.onnx"), "--library",
                  str(ort_library), "--precision", "fp8", "--fp8-min-features", "0", "--no-fp8-check")
    assert done.returncode == 0 and "Linear(s) of 0+ features -> tritonforge.Fp8Linear" in done.stdout, done.stdout
    assert "fp8 checked" not in done.stdout, done.stdout  # the check skipped, as asked
    bad = invoke(root, "rewrite", "--model", str(src), "--precision", "fp4")
    assert bad.returncode == 2 and "error: --precision must be fp8" in bad.stdout, bad.stdout


def test_the_choices_are_timed_here_or_not_as_asked_on_the_command_line_and_through_invoke(ort_library, tmp_path):
    """--measure off writes what the tables decide and no timings; --measure on without a CUDA GPU says what is
    missing and writes nothing; --dims takes NAME=SIZE only (invoke and the console script alike)."""
    from pathlib import Path

    from tests.cli import invoke

    from .rewrite.test_rewrite import sd_block

    onnx.save(sd_block(21), str(tmp_path / "block.onnx"))
    root = Path(__file__).resolve().parents[3]
    done = invoke(root, "rewrite", "--model", str(tmp_path / "block.onnx"), "--out", str(tmp_path / "off.onnx"),
                  "--library", str(ort_library), "--measure", "off", "--dims", "batch=2")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "choices timed here" not in done.stdout and not list(tmp_path.glob("*.measured.json"))
    bad = invoke(root, "rewrite", "--model", str(tmp_path / "block.onnx"), "--dims", "batch")
    assert bad.returncode == 2 and "error: --dims: 'batch' is not NAME=SIZE with a size of at least 1" in bad.stdout
    bad = invoke(root, "rewrite", "--model", str(tmp_path / "block.onnx"), "--measure", "always")
    assert bad.returncode == 2 and "error: --measure must be auto, on or off, not 'always'" in bad.stdout
    import onnxruntime as ort

    if "CUDAExecutionProvider" not in ort.get_available_providers():
        on = _cli("block.onnx", "--library", ort_library, "--measure", "on", "-o", "on.onnx", cwd=tmp_path)
        assert on.returncode == 1 and "measure='on' times the choices on this machine's GPU, but " in on.stderr
        assert not (tmp_path / "on.onnx").exists()
