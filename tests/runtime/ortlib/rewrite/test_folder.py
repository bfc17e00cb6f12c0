"""A pipeline folder as optimum-onnx exports it, rewritten in one command: every component's model rewritten, every
other file copied, a failing component named and no OUT left. The default suite checks the folder mechanics on a
folder laid out as optimum lays one out, made of committed tiny exports; the full run exports tiny SD 1.5- and
SD3-style pipelines with optimum-cli and runs each rewrite in optimum's ORTDiffusionPipeline to the export's image."""

from __future__ import annotations

import filecmp
import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="the rewrite edits ONNX models")
pytest.importorskip("onnxruntime", reason="the rewritten models run in onnxruntime")

from tests.cli import invoke  # noqa: E402

from .test_layout import _run  # noqa: E402  (random feeds for every input, on the CPU EP)

ROOT = Path(__file__).resolve().parents[4]
EXPORTS = Path(__file__).parent / "exports"
# component -> the committed export it holds (the VAE's keeps its weights in a .data file beside it)
LAID_OUT = {"unet": "sd15_unet_tiny.torchscript.fp16.onnx", "vae_decoder": "sd15_vae_decoder_tiny.dynamo.fp16.onnx"}


def _cli(*args, cwd, env=None):
    return subprocess.run([sys.executable, "-m", "tritonforge.runtime.ortlib.cli", *map(str, args)], cwd=cwd,
                          capture_output=True, text=True, timeout=300, env=env)


@pytest.fixture
def folder(tmp_path):
    """A pipeline folder laid out as optimum-cli export onnx writes one: model_index.json, a model.onnx (and its
    external data, under its own name) and a config.json per component, a tokenizer and a scheduler."""
    src = tmp_path / "sd-onnx"
    for name, export in LAID_OUT.items():
        (src / name).mkdir(parents=True)
        shutil.copy(EXPORTS / export, src / name / "model.onnx")
        if (EXPORTS / f"{export}.data").is_file():
            shutil.copy(EXPORTS / f"{export}.data", src / name / f"{export}.data")
        (src / name / "config.json").write_text(json.dumps({"_class_name": name}))
    for part, file in (("tokenizer", "vocab.json"), ("scheduler", "scheduler_config.json")):
        (src / part).mkdir()
        (src / part / file).write_text(json.dumps({"part": part}))
    (src / "model_index.json").write_text(json.dumps({"_class_name": "StableDiffusionPipeline"}))
    return src


def _optimum():
    for module in ("torch", "diffusers", "transformers", "optimum.onnxruntime"):
        pytest.importorskip(module, reason="the pipeline is exported by optimum-onnx (pins/optimum.txt)")
    from benchmarks.pipeline_models import export, save

    return export, save


def _image(folder: Path, library=None) -> np.ndarray:  # noqa: F821
    import torch
    from optimum.onnxruntime import ORTDiffusionPipeline
    from tritonforge.runtime import ortlib

    sessions = ortlib.pipeline_sessions(folder, library, providers=["CPUExecutionProvider"]) if library else {}
    pipe = ORTDiffusionPipeline.from_pretrained(folder, **sessions)
    out = pipe("a cat", num_inference_steps=3, height=32, width=32, guidance_scale=7.5, output_type="np",
               generator=torch.Generator().manual_seed(0))
    return out.images[0]


def test_the_folder_is_rewritten_whole_every_other_file_copied_and_each_model_computes_the_same(folder,
                                                                                               ort_library, tmp_path):
    out = tmp_path / "sd.tf"
    proc = _cli(folder, "--out", out, "--library", ort_library, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert [line for line in lines if line.startswith("== ")] == ["== unet", "== vae_decoder"]
    assert f"wrote {out}: unet/model.onnx, vae_decoder/model.onnx rewritten, every other file copied" in lines
    # every file but the models and their data is the export's, byte for byte
    for path in folder.rglob("*"):
        if path.is_file() and path.name != "model.onnx" and not path.name.endswith(".onnx.data"):
            assert filecmp.cmp(path, out / path.relative_to(folder), shallow=False), path
    assert sorted(p.name for p in (out / "vae_decoder").iterdir()) == ["config.json", "model.onnx", "model.onnx.data"]
    for name in LAID_OUT:
        theirs, ours = onnx.load(str(folder / name / "model.onnx")), onnx.load(str(out / name / "model.onnx"))
        assert "tritonforge" in {n.domain for n in ours.graph.node}, name
        want, got = _run(theirs), _run(ours, ort_library)
        assert np.abs(got - want).max() <= 2e-2 * np.abs(want).max(), name
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no staging left


@pytest.mark.full
def test_an_sd15_style_folder_exported_by_optimum_runs_to_the_exports_image(ort_library, tmp_path):
    """optimum-cli's export of a tiny SD 1.5-style pipeline (CLIP, UNet, VAE), rewritten whole, run by optimum's
    ORTDiffusionPipeline with the library's sessions: the export's image."""
    export, save = _optimum()
    save("sd15", tmp_path / "torch", tiny=True)
    done = export(tmp_path / "torch", tmp_path / "onnx")
    assert done.returncode == 0, done.stderr[-3000:]
    out = tmp_path / "sd.tf"
    proc = _cli(tmp_path / "onnx", "--out", out, "--library", ort_library, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    said = proc.stdout
    names = ["text_encoder", "unet", "vae_decoder", "vae_encoder"]
    assert [line[3:] for line in said.splitlines() if line.startswith("== ")] == names
    assert "GroupNormalization: 21 node(s)" in said and "MultiHeadAttention: 8 node(s)" in said  # the UNet's
    # the text encoder's: CLIP's causal-masked attention (causal.py) and its LayerNorms
    encoder = said.split("== text_encoder")[1].split("== unet")[0]
    assert "MultiHeadAttention: 2 node(s)" in encoder and "AdaLayerNorm: 5 node(s)" in encoder, encoder
    ours, theirs = _image(out, ort_library), _image(tmp_path / "onnx")
    assert ours.shape == (32, 32, 3) and np.abs(ours - theirs).max() < 1e-4


@pytest.mark.full
def test_an_sd3_style_folder_with_three_text_encoders_runs_to_the_exports_image(ort_library, tmp_path):
    """SD3's pipeline: two CLIP encoders with projections and T5's, a joint-attention transformer, a 16-channel VAE
    and flow matching; the rewritten folder's image is the export's."""
    export, save = _optimum()
    import torch
    from optimum.onnxruntime import ORTDiffusionPipeline
    from tritonforge.runtime import ortlib

    save("sd3", tmp_path / "torch", tiny=True)
    done = export(tmp_path / "torch", tmp_path / "onnx")
    assert done.returncode == 0, done.stderr[-3000:]
    proc = _cli(tmp_path / "onnx", "--library", ort_library, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    names = ["text_encoder", "text_encoder_2", "text_encoder_3", "transformer", "vae_decoder", "vae_encoder"]
    assert [line[3:] for line in proc.stdout.splitlines() if line.startswith("== ")] == names
    images = []
    for folder, sessions in ((tmp_path / "onnx", {}), (tmp_path / "onnx.tf", None)):
        if sessions is None:
            sessions = ortlib.pipeline_sessions(folder, ort_library, providers=["CPUExecutionProvider"])
        pipe = ORTDiffusionPipeline.from_pretrained(folder, **sessions)
        images.append(pipe("a cat", num_inference_steps=2, height=32, width=32, output_type="np",
                           max_sequence_length=16, generator=torch.Generator().manual_seed(0)).images[0])
    assert np.abs(images[0] - images[1]).max() < 1e-4


def test_invoke_rewrite_takes_a_folder_too(folder, ort_library, tmp_path):
    done = invoke(ROOT, "rewrite", "--model", str(folder), "--out", str(tmp_path / "i.tf"), "--library",
                  str(ort_library))
    assert done.returncode == 0, done.stdout
    assert (tmp_path / "i.tf/unet/model.onnx").is_file() and "== unet" in done.stdout


@pytest.mark.parametrize("case", ["no model_index.json", "a component that fails", "OUT exists", "OUT inside"])
def test_a_bad_folder_is_refused_naming_what_and_leaves_no_out(folder, ort_library, tmp_path, case, capsys):
    src = folder
    out = tmp_path / "out"
    if case == "no model_index.json":
        (src / "model_index.json").unlink()
        says = f"{src}: not a pipeline folder (no model_index.json"
    elif case == "a component that fails":
        (src / "vae_decoder" / "model.onnx").write_bytes(b"not a model")
        says = f"{src}: component vae_decoder: "
    elif case == "OUT exists":
        out.mkdir()
        says = f"{out}: exists; name a new folder"
    else:
        out = src / "out"
        says = f"{out}: inside the folder being read"
    before = sorted(p.name for p in tmp_path.iterdir())
    from tritonforge.runtime.ortlib import cli

    assert cli.main([str(src), "--out", str(out), "--library", str(ort_library)]) == 1  # in this process: faster
    err = capsys.readouterr().err
    lines = err.strip().splitlines()  # progress lines, if a component got that far, then the one error
    assert lines[-1].startswith(f"error: {says}") and not any("error" in line for line in lines[:-1]), err
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # no OUT, no staging folder
    if case == "OUT exists":
        assert not any(out.iterdir())
    else:
        assert not out.exists()


def test_pipeline_sessions_refuses_a_folder_without_models(tmp_path, ort_library):
    from tritonforge.runtime import ortlib

    with pytest.raises(ortlib.TritonforgeError, match="no unet, transformer"):
        ortlib.pipeline_sessions(tmp_path, ort_library)
