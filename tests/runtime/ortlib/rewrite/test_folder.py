"""A pipeline folder as optimum-onnx exports it, rewritten in one command: every component's model rewritten, every
other file copied, the result run by optimum's ORTDiffusionPipeline with the library on the CPU EP and its image the
export's; bad folders refused with no OUT."""

from __future__ import annotations

import filecmp
import subprocess
import sys
from pathlib import Path

import pytest

onnx = pytest.importorskip("onnx", reason="the rewrite edits ONNX models")
pytest.importorskip("onnxruntime", reason="the rewritten models run in onnxruntime")
for _module in ("torch", "diffusers", "transformers", "optimum.onnxruntime"):
    pytest.importorskip(_module, reason="the pipeline is exported by optimum-onnx (pins/optimum.txt; scripts/setup "
                                        "installs it)")

from benchmarks.pipeline_models import export, save  # noqa: E402
from tests.cli import invoke  # noqa: E402

ROOT = Path(__file__).resolve().parents[4]
COMPONENTS = ["text_encoder", "unet", "vae_decoder", "vae_encoder"]


def _cli(*args, cwd, env=None):
    return subprocess.run([sys.executable, "-m", "tritonforge.runtime.ortlib.cli", *map(str, args)], cwd=cwd,
                          capture_output=True, text=True, timeout=300, env=env)


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """The tiny SD 1.5-style pipeline, exported as a user does: optimum-cli export onnx --task text-to-image."""
    where = tmp_path_factory.mktemp("pipeline")
    save("sd15", where / "torch", tiny=True)
    done = export(where / "torch", where / "onnx")
    assert done.returncode == 0, done.stderr[-3000:]
    return where / "onnx"


def _image(folder: Path, library=None) -> np.ndarray:  # noqa: F821
    import torch
    from optimum.onnxruntime import ORTDiffusionPipeline
    from tritonforge.runtime import ortlib

    sessions = ortlib.pipeline_sessions(folder, library, providers=["CPUExecutionProvider"]) if library else {}
    pipe = ORTDiffusionPipeline.from_pretrained(folder, **sessions)
    out = pipe("a cat", num_inference_steps=3, height=32, width=32, guidance_scale=7.5, output_type="np",
               generator=torch.Generator().manual_seed(0))
    return out.images[0]


def test_the_folder_is_rewritten_whole_and_optimum_runs_it_to_the_exports_image(exported, ort_library, tmp_path):
    import numpy as np

    out = tmp_path / "sd.tf"
    proc = _cli(exported, "--out", out, "--library", ort_library, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert [f"== {c}" for c in COMPONENTS] == [line for line in lines if line.startswith("== ")]
    said = proc.stdout
    assert "GroupNormalization: 21 node(s)" in said and "MultiHeadAttention: 8 node(s)" in said  # the UNet's
    # the text encoder's: CLIP's causal-masked attention (causal.py) and its LayerNorms
    encoder = said.split("== text_encoder")[1].split("== unet")[0]
    assert "MultiHeadAttention: 2 node(s)" in encoder and "AdaLayerNorm: 5 node(s)" in encoder, encoder
    assert f"wrote {out}: " + ", ".join(f"{c}/model.onnx" for c in COMPONENTS) in said
    # every file but the models is the export's, byte for byte; each model is a rewrite onnxruntime loads
    for path in exported.rglob("*"):
        twin = out / path.relative_to(exported)
        assert twin.exists(), twin
        if path.is_file() and path.name != "model.onnx":
            assert filecmp.cmp(path, twin, shallow=False), twin
    for c in COMPONENTS:
        domains = {n.domain for n in onnx.load(str(out / c / "model.onnx")).graph.node}
        assert "tritonforge" in domains, c
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no staging left
    ours, theirs = _image(out, ort_library), _image(exported)
    assert ours.shape == (32, 32, 3) and np.abs(ours - theirs).max() < 1e-4


@pytest.mark.full
def test_an_sd3_style_folder_with_three_text_encoders_runs_to_the_exports_image(ort_library, tmp_path):
    """SD3's pipeline: two CLIP encoders with projections and T5's, a joint-attention transformer, a 16-channel VAE
    and flow matching; the rewritten folder's image is the export's."""
    import numpy as np
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


def test_invoke_rewrite_takes_a_folder_too(exported, ort_library, tmp_path):
    done = invoke(ROOT, "rewrite", "--model", str(exported), "--out", str(tmp_path / "i.tf"), "--library",
                  str(ort_library))
    assert done.returncode == 0, done.stdout
    assert (tmp_path / "i.tf/unet/model.onnx").is_file() and "== unet" in done.stdout


@pytest.mark.parametrize("case", ["no model_index.json", "a component that fails", "OUT exists", "OUT inside"])
def test_a_bad_folder_is_refused_naming_what_and_leaves_no_out(exported, ort_library, tmp_path, case, capsys):
    import shutil

    src = tmp_path / "src"
    shutil.copytree(exported, src)
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
    assert err.startswith(f"error: {says}") and len(err.strip().splitlines()) == 1, err
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # no OUT, no staging folder
    if case == "OUT exists":
        assert not any(out.iterdir())


def test_pipeline_sessions_refuses_a_folder_without_models(tmp_path, ort_library):
    from tritonforge.runtime import ortlib

    with pytest.raises(ortlib.TritonforgeError, match="no unet, transformer"):
        ortlib.pipeline_sessions(tmp_path, ort_library)
