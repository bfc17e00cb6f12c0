"""Remake the exports beside this file: tiny diffusers models (benchmarks/e2e_models.py's `tiny` configs of the
same classes, GroupNorm affine drawn at random) exported as users export them, with static shapes and with
dynamic axes (batch, height and width symbolic), for the CPU tests of the rewrite. Needs torch, diffusers,
onnxscript and onnxruntime (its transformers optimizer); the tests don't.

    python tests/runtime/ortlib/rewrite/exports/make.py [NAME ...]     # NAME: a part of the file names to remake
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[4]))

import onnx  # noqa: E402

from benchmarks import e2e_models  # noqa: E402

# (model, exporter, dtype, dynamic axes): both exporters, both dtypes, a UNet and a VAE, ORT's optimizer's output
# (a VAE's and SD3's), and each model from each exporter with dynamic axes; the diffusion transformers (SD3, SD3.5's
# per-head norms, Flux, PixArt) from every exporter that exports them, dynamo at opset 18 and 23, static and dynamic
# axes. PixArt's dynamo exports (diffusers 0.42, torch 2.13) and its TorchScript export with dynamic axes are refused
# by onnxruntime itself (a Squeeze of its 16-patch axis): TorchScript with static axes is what users of it can run.
# In bfloat16 onnxruntime takes Flux's export as it is and SD3's dynamo export at opset 23 once the rewrite writes its
# unpatchify Einsum (no bfloat16 in ONNX's schemas) as a Transpose; SD3's other exports and PixArt's keep a Conv
# (before opset 22) or a Squeeze it refuses.
EXPORTS = (("sd15_vae_decoder", "torchscript", "fp32", False), ("sd15_vae_decoder", "dynamo", "fp16", False),
           ("sd15_unet", "torchscript", "fp16", False), ("sd15_unet", "dynamo", "fp32", False),
           ("sdxl_unet", "torchscript", "fp16", False), ("sd15_vae_decoder", "ort", "fp16", False),
           ("sd15_vae_decoder", "torchscript", "fp16", True), ("sd15_vae_decoder", "dynamo", "fp32", True),
           ("sd15_unet", "torchscript", "fp32", True), ("sd15_unet", "dynamo", "fp16", True),
           ("sd3_medium", "torchscript", "fp32", False), ("sd3_medium", "dynamo", "fp16", True),
           ("sd3_medium", "dynamo23", "fp32", False), ("sd3_medium", "torchscript", "fp16", True),
           ("sd35_medium", "torchscript", "fp32", False), ("sd35_medium", "dynamo23", "fp32", True),
           ("flux_dev", "dynamo", "fp32", False), ("flux_dev", "dynamo23", "fp16", False),
           ("flux_dev", "dynamo23", "fp32", True), ("flux_dev", "dynamo23", "bf16", False),
           ("sd3_medium", "dynamo23", "bf16", False),
           ("pixart_sigma", "torchscript", "fp32", False), ("pixart_sigma", "torchscript", "fp16", False),
           ("sd3_medium", "ort", "fp16", False))


def main(only: list[str]) -> None:
    with tempfile.TemporaryDirectory() as work:
        for name, exporter, dtype, dynamic in EXPORTS:
            stem = f"{name}_tiny.{exporter}{'.dynamic' if dynamic else ''}.{dtype}"
            if only and not any(o in stem for o in only):
                continue
            path = e2e_models.export(e2e_models.MODELS[name], exporter, dtype, Path(work), "cpu", tiny=True,
                                     dynamic=dynamic)
            model = onnx.load(str(path), load_external_data=False)
            _strip(model.graph)  # debug text only (stack traces, source names): the graph is as exported
            onnx.save(model, str(HERE / path.name))
            for f in path.parent.glob(f"{path.name}.data"):  # the dynamo exporter's external data
                shutil.copy(f, HERE / f.name)
            print(path.name)


def _strip(graph) -> None:
    for n in graph.node:
        del n.metadata_props[:]
        n.doc_string = ""
    for v in [*graph.value_info, *graph.input, *graph.output, *graph.initializer]:
        del v.metadata_props[:]
        v.doc_string = ""


if __name__ == "__main__":
    main(sys.argv[1:])
