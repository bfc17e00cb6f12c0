"""A pipeline folder as optimum-onnx exports it, rewritten as a whole.

    from tritonforge.runtime.ortlib.rewrite.folder import rewrite_folder
    reports = rewrite_folder("sd15-onnx", "sd15-onnx.tf")   # {component: Report}

`optimum-cli export onnx --model <pipeline> --task text-to-image DIR` writes `model_index.json`, one subfolder
per model (`unet/` or `transformer/`, `vae_decoder/`, `vae_encoder/`, `text_encoder*/`, each a `model.onnx`, its
external data and a `config.json`) and the rest of the pipeline (tokenizers, scheduler). Each component's
`model.onnx` is rewritten (rewrite_file: the same choices, checks and external data as for one file) and written
under the same name; every other file is copied as it is. OUT is made in a staging folder beside it and renamed
into place once every component has been rewritten and loaded: a component that fails names itself and leaves no
OUT. OUT must not exist (a folder is never written over).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

INDEX = "model_index.json"
MODEL = "model.onnx"


def components(src: Path) -> list[str]:
    """The subfolders of pipeline folder `src` that hold a model.onnx, in name order; RewriteError for a folder
    that is not an optimum pipeline export."""
    from . import RewriteError

    if not src.is_dir():
        raise RewriteError(f"{src}: not a folder")
    index = src / INDEX
    if not index.is_file():
        raise RewriteError(f"{src}: not a pipeline folder (no {INDEX}; optimum-cli export onnx --task text-to-image "
                           "writes one)")
    try:
        json.loads(index.read_text())
    except ValueError as exc:
        raise RewriteError(f"{index}: not JSON ({exc})") from None
    found = sorted(p.name for p in src.iterdir() if p.is_dir() and (p / MODEL).is_file())
    if not found:
        raise RewriteError(f"{src}: no component folder holds a {MODEL}")
    return found


def _external_files(model_path: Path) -> set[str]:
    """The files (relative to the model's folder) `model_path`'s tensors keep their data in."""
    import onnx

    model = onnx.load(str(model_path), load_external_data=False)
    from .files import tensors

    return {kv.value for t in tensors(model) if t.data_location == t.EXTERNAL
            for kv in t.external_data if kv.key == "location"}


def rewrite_folder(src: str | os.PathLike, dst: str | os.PathLike, say=lambda line: None, **options) -> dict:
    """Rewrite every component of pipeline folder `src` into `dst` (module docstring); `options` go to
    rewrite_file (library, use_library, softmax_min_cols, attention, layout, check_load, gpu). `say` hears a line
    as each component starts. Returns {component: its Report}."""
    from . import RewriteError, rewrite_file

    src, dst = Path(src), Path(dst)
    names = components(src)
    if dst.exists():
        raise RewriteError(f"{dst}: exists; name a new folder for the rewritten pipeline")
    if dst.resolve().is_relative_to(src.resolve()):
        raise RewriteError(f"{dst}: inside the folder being read; write the rewrite elsewhere")
    dst.parent.mkdir(parents=True, exist_ok=True)
    stage = Path(tempfile.mkdtemp(prefix=f".{dst.name}.", dir=dst.parent))
    reports = {}
    try:
        for entry in sorted(src.iterdir()):
            if entry.name not in names:
                (shutil.copytree if entry.is_dir() else shutil.copy2)(entry, stage / entry.name)
        for i, name in enumerate(names, 1):
            say(f"[{i}/{len(names)}] {name}")
            folder, out = src / name, stage / name
            out.mkdir()
            try:
                data = _external_files(folder / MODEL)
                for entry in sorted(folder.iterdir()):
                    if entry.name != MODEL and entry.name not in data:
                        (shutil.copytree if entry.is_dir() else shutil.copy2)(entry, out / entry.name)
                reports[name] = rewrite_file(folder / MODEL, out / MODEL, **options)
            except RewriteError as exc:
                raise RewriteError(f"{src}: component {name}: {exc}") from None
            except Exception as exc:  # onnx's parse errors and the like share no base class
                said = " ".join(str(exc).split()) or "no message"
                raise RewriteError(f"{src}: component {name}: {folder / MODEL}: {type(exc).__name__}: {said}") \
                    from None
        os.replace(stage, dst)
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise
    for report in reports.values():  # where they are now
        report.wrote = [str(dst / Path(p).relative_to(stage)) for p in report.wrote]
    return reports
