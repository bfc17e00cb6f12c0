"""layout.py: the GroupNorms channels-last between Transposes (the real exports, both exporters), numbers
equal to the export's on the library's CPU ops, and what stays NCHW named."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="the rewrite edits ONNX models")
ort = pytest.importorskip("onnxruntime", reason="the rewritten models run in onnxruntime")

from tritonforge.runtime.ortlib.rewrite import RewriteError, rewrite  # noqa: E402

from tests.runtime.ortlib.rewrite.sessions import run_once  # noqa: E402

EXPORTS = Path(__file__).parent / "exports"


def _run(model, lib=None):
    return run_once(model, lib)


@pytest.mark.parametrize("name", ["sd15_unet_tiny.torchscript.fp16.onnx", "sd15_vae_decoder_tiny.torchscript.fp32.onnx",
                                  "sd15_vae_decoder_tiny.dynamo.fp16.onnx"])
def test_every_4d_group_norm_runs_channels_last_between_inverse_transposes(ort_library, name):
    m = onnx.load(str(EXPORTS / name))
    want = _run(m)
    report = rewrite(m, ort_library, layout="nhwc")
    g = m.graph
    producer = {o: n for n in g.node for o in n.output}
    readers = {}
    for n in g.node:
        for i in n.input:
            readers.setdefault(i, []).append(n)
    norms = [n for n in g.node if n.domain == "tritonforge" and n.op_type in ("GroupNorm", "SkipGroupNorm")]
    assert norms and len(norms) == report.channels_last
    for n in norms:
        before, after = producer[n.input[0]], readers[n.output[0]]
        assert before.op_type == "Transpose" and list(before.attribute[0].ints) == [0, 2, 3, 1], n.name
        assert [a.op_type for a in after] == ["Transpose"] and list(after[0].attribute[0].ints) == [0, 3, 1, 2]
    nchw = [n for n in g.node if n.domain == "tritonforge" and n.op_type == "GroupNormalization"]
    stays = [why for why in report.left if "stays NCHW" in why]
    assert len(stays) == len(nchw) and all("its input has rank 3" in why for why in stays), stays
    assert f"channels-last: {len(norms)} GroupNormalization node(s)" in "\n".join(report.lines())
    got = _run(m, ort_library)
    tol = 2e-2 if "fp16" in name else 1e-4
    assert np.abs(got - want).max() / np.abs(want).max() < tol


def test_the_layout_is_nchw_or_nhwc(ort_library):
    m = onnx.load(str(EXPORTS / "sd15_unet_tiny.torchscript.fp16.onnx"))
    with pytest.raises(RewriteError, match="layout='nc': choose nchw or nhwc"):
        rewrite(m, ort_library, layout="nc")
    nchw = onnx.load(str(EXPORTS / "sd15_unet_tiny.torchscript.fp16.onnx"))
    rewrite(nchw, ort_library, layout="nchw")  # the export's layout: no Transpose added
    assert not [n for n in nchw.graph.node if n.op_type == "GroupNorm"]
    # the default is the command line's (tritonforge-rewrite --layout's), for the sessions ortlib.session makes
    default = rewrite(m, ort_library)
    assert default.channels_last > 0 and [n for n in m.graph.node if n.op_type == "GroupNorm"]


@pytest.mark.parametrize("name", ["sd15_unet_tiny.torchscript.fp16.onnx", "sd15_unet_tiny.dynamo.fp32.onnx",
                                  "sdxl_unet_tiny.torchscript.fp16.onnx"])
def test_a_resnets_time_embedding_add_goes_into_its_norm_as_a_broadcast_skip(ort_library, name):
    m = onnx.load(str(EXPORTS / name))
    want = _run(m)
    adds = _time_adds(m)
    assert len(adds) == 8  # one per ResNet block of the tiny UNets: conv1's output plus the time embedding
    report = rewrite(m, ort_library, layout="nhwc")
    g = m.graph
    producer = {o: n for n in g.node for o in n.output}
    skips = [n for n in g.node if n.domain == "tritonforge" and n.op_type == "SkipGroupNorm"]
    assert len(skips) == report.time_skips == len(adds), report.lines()
    assert not adds & {n.name for n in g.node}, "the folded Adds are gone"
    for n in skips:
        flat = producer[n.input[3]]
        assert flat.op_type == "Flatten" and flat.attribute[0].i == 1, n.name
        assert producer[n.input[0]].op_type == "Transpose", n.name
        assert len(n.output) == 2 and n.output[1], "the sum output is named for older onnxruntime"
    assert f"{len(skips)} of them tritonforge.SkipGroupNorm" in "\n".join(report.lines())
    got = _run(m, ort_library)
    tol = 2e-2 if "fp16" in name else 1e-4
    assert np.abs(got - want).max() / np.abs(want).max() < tol


def test_a_time_embedding_add_of_a_batch_the_model_leaves_open_stays(ort_library):
    """A dynamic export's batch is symbolic on both sides of the Add, and the op needs the skip's batch to
    be the image's: the Add stays, the norm is plain GroupNorm."""
    m = onnx.load(str(EXPORTS / "sd15_unet_tiny.torchscript.dynamic.fp32.onnx"))
    report = rewrite(m, ort_library, layout="nhwc")
    assert report.channels_last > 0 and report.time_skips == 0
    assert not [n for n in m.graph.node if n.op_type == "SkipGroupNorm"]
    assert len(_time_adds(m)) == 8


def _time_adds(m) -> set[str]:
    """The Adds of a (N, C, H, W) value and a (N, C, 1, 1) one: a ResNet's `h + temb`."""
    from tritonforge.runtime.ortlib.rewrite.graph import Graph

    g = Graph(m)
    shapes = [[g.dims(i) for i in n.input] for n in g.nodes]
    return {n.name for n, d in zip(g.nodes, shapes) if n.op_type == "Add" and len(d) == 2 and
            all(x is not None and len(x) == 4 for x in d) and sorted(x[2:] == [1, 1] for x in d) == [False, True]}


def test_a_time_embedding_add_read_elsewhere_too_stays(ort_library):
    """Folding the Add away is only right when the norm is its one reader."""
    m = onnx.load(str(EXPORTS / "sd15_unet_tiny.torchscript.fp16.onnx"))
    add = next(n for n in m.graph.node if n.name == "/unet/down_blocks.0/resnets.0/Add")
    m.graph.output.append(onnx.helper.make_tensor_value_info(add.output[0], onnx.TensorProto.FLOAT16, None))
    report = rewrite(m, ort_library, layout="nhwc")
    assert report.time_skips == 7, report.lines()
    assert add.name in {n.name for n in m.graph.node}
