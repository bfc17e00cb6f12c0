"""ortlib.session (settings.py): the CUDA EP options it starts from, a session that runs the library's ops,
and on a GPU what onnxruntime accepts of the options, a CUDA graph on fixed shapes, and the refusals."""

from __future__ import annotations

import numpy as np
import pytest
from tritonforge.runtime import ortlib
from tritonforge.runtime.ortlib.rewrite import rewrite
from tritonforge.runtime.ortlib.settings import BEST, SessionError, cuda_options, refused_option

onnx = pytest.importorskip("onnx", reason="the tests build ONNX models")
ort = pytest.importorskip("onnxruntime", reason="the sessions are onnxruntime's")

CUDA = "CUDAExecutionProvider"


def test_the_options_start_from_the_best_settings_and_never_fuse_the_bias_without_nhwc():
    assert cuda_options() == {"prefer_nhwc": "1", "fuse_conv_bias": "1"} == BEST
    assert cuda_options(cuda_graph=True)["enable_cuda_graph"] == "1"
    assert cuda_options(prefer_nhwc=0, fuse_conv_bias=0) == {"prefer_nhwc": "0", "fuse_conv_bias": "0"}
    # the caller's prefer_nhwc=0 turns off the bias fusion that needs it; asking for both is the error
    assert cuda_options(prefer_nhwc="0") == {"prefer_nhwc": "0", "fuse_conv_bias": "0"}
    with pytest.raises(SessionError, match="fuse_conv_bias=1 needs prefer_nhwc=1"):
        cuda_options(prefer_nhwc="0", fuse_conv_bias="1")


@pytest.mark.parametrize("message, dropped", [
    # what onnxruntime says when it refuses an option: the option goes, in the order they are given up
    ("[ONNXRuntimeError] : 1 : FAIL : This session cannot use the graph capture feature as requested by the user as "
     "all compute graph nodes have not been partitioned to the CUDA execution provider", "enable_cuda_graph"),
    ("[ONNXRuntimeError] : 1 : FAIL : Failed to initialize CUDNN Frontend", "fuse_conv_bias"),
    ("Unknown provider option: fuse_conv_bias", "fuse_conv_bias"),
    ("[ONNXRuntimeError] : 2 : INVALID_ARGUMENT : NHWC is not supported in this build", "prefer_nhwc"),
    ("[ONNXRuntimeError] : 1 : FAIL : This build does not support NHWC layout", "prefer_nhwc"),
    ("Unknown provider option: prefer_nhwc", "prefer_nhwc"),
    # a model whose name says nhwc, in an error about something else
    ("[ONNXRuntimeError] : 3 : NO_SUCHFILE : Load model from /models/unet.nhwc.tf.onnx failed:Load model "
     "/models/unet.nhwc.tf.onnx failed. File doesn't exist", None),
    ("[ONNXRuntimeError] : 10 : INVALID_GRAPH : Load model from unet_nhwc.onnx failed: tensor(float16) nhwc", None),
    # anything else is not about an option: raised as it is, nothing dropped
    ("[ONNXRuntimeError] : 3 : NO_SUCHFILE : Load model from unet.onnx failed:Load model unet.onnx failed. File doesn't"
     " exist", None),
    ("[ONNXRuntimeError] : 6 : RUNTIME_EXCEPTION : CUDA failure 2: out of memory", None),
    ("[ONNXRuntimeError] : 10 : INVALID_GRAPH : This is an invalid model. Type Error: Type 'tensor(bfloat16)'", None),
])
def test_only_a_refusal_of_an_option_drops_it(message, dropped):
    options = cuda_options(cuda_graph=True)
    assert refused_option(message, options, set()) == dropped
    if dropped:  # an option the caller gave is never dropped
        assert refused_option(message, options, {dropped}) != dropped


def test_the_models_own_path_is_no_refusal_whatever_it_is_called():
    options = cuda_options(cuda_graph=True)
    for path in ("/m/prefer_nhwc/unet.onnx", "fuse_conv_bias.onnx", "/m/enable_cuda_graph.onnx"):
        said = f"[ONNXRuntimeError] : 3 : NO_SUCHFILE : Load model from {path} failed. File doesn't exist"
        assert refused_option(said, options, set(), path) is None, path
    # onnxruntime's refusal of the option is still one when the path is taken out
    assert refused_option("This build does not support NHWC layout (/m/unet.nhwc.onnx)", options, set(),
                          "/m/unet.nhwc.onnx") == "prefer_nhwc"


def test_an_error_that_is_not_a_refusal_is_raised_once_with_nothing_dropped(ort_library, tmp_path):
    missing = tmp_path / "no-such-model.onnx"
    with pytest.raises(Exception, match="no-such-model.onnx"):
        ortlib.session(missing, ort_library, providers=["CPUExecutionProvider"])


def _rewritten(lib, dynamic: bool = False):
    from .rewrite.test_rewrite import sd_block

    m = sd_block(21)
    if dynamic:
        m.graph.input[0].type.tensor_type.shape.dim[0].dim_param = "batch"
    want = _plain(m)
    rewrite(m, lib, softmax_min_cols=0)
    assert {n.domain for n in m.graph.node} >= {"tritonforge"}
    return m, want


def _feeds():
    return {"x": (np.random.default_rng(1).standard_normal((2, 8, 5, 6)) * 3 + 2).astype(np.float32)}


def _plain(m):
    return ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, _feeds())


def test_a_cpu_session_runs_the_librarys_ops_and_says_what_it_applied(ort_library, tmp_path):
    m, want = _rewritten(ort_library)
    onnx.save(m, str(tmp_path / "block.tf.onnx"))
    sess = ortlib.session(tmp_path / "block.tf.onnx", ort_library, providers=["CPUExecutionProvider"])
    assert sess.tritonforge_settings == {"providers": ["CPUExecutionProvider"], "cuda_options": {}, "dropped": {},
                                         "library": str(ort_library)}
    for got, w in zip(sess.run(None, _feeds()), want):
        np.testing.assert_allclose(got, w, rtol=1e-5, atol=1e-5)


def test_the_cuda_ep_asked_of_an_onnxruntime_without_it_is_a_clear_error(ort_library):
    if CUDA in ort.get_available_providers():
        pytest.skip(f"onnxruntime {ort.__version__} has the CUDA EP here")
    m, _ = _rewritten(ort_library)
    with pytest.raises(SessionError, match="has no CUDA EP"):
        ortlib.session(m.SerializeToString(), ort_library, providers=[CUDA, "CPUExecutionProvider"])


def test_a_cuda_graph_on_dims_that_are_not_fixed_names_the_input(ort_library):
    m, _ = _rewritten(ort_library, dynamic=True)
    with pytest.raises(SessionError, match=r"input 'x' has dims that are not fixed \(axes \[0\], shape \['batch', 8"):
        ortlib.session(m.SerializeToString(), ort_library, cuda_graph=True)
    with pytest.raises(SessionError, match="cuda_graph=True is a CUDA EP setting"):
        ortlib.session(_rewritten(ort_library)[0].SerializeToString(), ort_library, cuda_graph=True,
                       providers=["CPUExecutionProvider"])


# ---- on a GPU: onnxruntime-gpu's CUDA EP ------------------------------------------------------------------
def _bound(sess):
    """Runs on the same device buffers (IOBinding), as a CUDA graph needs: onnxruntime captures after its
    first runs and replays from then on."""
    b = sess.io_binding()
    x = ort.OrtValue.ortvalue_from_numpy(_feeds()["x"], "cuda", 0)
    b.bind_ortvalue_input("x", x)
    outs = [ort.OrtValue.ortvalue_from_shape_and_type([2, 8, 5, 6], np.float32, "cuda", 0) for _ in range(2)]
    for o, v in zip(sess.get_outputs(), outs):
        b.bind_ortvalue_output(o.name, v)
    for _ in range(4):
        sess.run_with_iobinding(b)
    return [v.numpy() for v in outs]


@pytest.mark.gpu
@pytest.mark.parametrize("cuda_graph", [False, True])
def test_on_the_cuda_ep_the_settings_apply_or_are_dropped_with_the_reason(ort_cuda, library, cuda_graph):
    m, want = _rewritten(library)
    sess = ortlib.session(m.SerializeToString(), library, cuda_graph=cuda_graph)
    s = sess.tritonforge_settings
    assert s["providers"][0] == CUDA
    # every option the session starts from is either applied or dropped with onnxruntime's reason
    assert set(s["cuda_options"]) | set(s["dropped"]) == set(cuda_options(cuda_graph))
    assert all(s["dropped"].values())
    applied = sess.get_provider_options()[CUDA]
    assert all(applied.get(k) == v for k, v in s["cuda_options"].items()), applied
    for got, w in zip(_bound(sess), want):
        np.testing.assert_allclose(got, w, rtol=1e-4, atol=1e-4)


