"""The tuner on a real GPU: choices, cache validation, ORT export."""

from __future__ import annotations

import json

import pytest

from runtime.ops.softmax import Softmax
from runtime.tune import TuneCacheError, export_ort, load_cache, tune

pytestmark = pytest.mark.gpu

SHAPES = [(1, 2048), (64, 1000), (512, 4096)]


@pytest.fixture(scope="module")
def cache(registry):
    return tune(registry, SHAPES, ops=("softmax", "log_softmax"), dtypes=("fp16",), budget_ms=2.0)


def test_every_problem_gets_a_viable_choice(cache, registry):
    for op_key in ("softmax_fp16", "log_softmax_fp16"):
        entries = cache["results"][op_key]
        assert sorted(entries) == sorted(f"{b}_{n}" for b, n in SHAPES)
        for sig, e in entries.items():
            batch, n = map(int, sig.split("_"))
            op = Softmax(registry, "fp16", op_key.startswith("log"))
            assert e["kernel"] in dict(op.candidates(batch, n))
            assert registry.by_name[e["ort_kernel"]].group == op_key
            assert 0 < e["us"] <= e["ort_us"]


def test_op_follows_the_cache(cache, registry, tmp_path):
    path = tmp_path / "c.json"
    path.write_text(json.dumps(cache))
    loaded = load_cache(path, registry)
    op = Softmax(registry, "fp16", tune_cache=loaded)
    launch = op.prepare(0, 0, 512, 4096)
    assert launch.kernel.info.name == cache["results"]["softmax_fp16"]["512_4096"]["kernel"]


def test_mismatched_cache_is_rejected_naming_the_key(cache, registry, tmp_path):
    bad = json.loads(json.dumps(cache))
    bad["validators"]["device_model"] = "NVIDIA H100 80GB HBM3"
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(bad))
    with pytest.raises(TuneCacheError, match="validator 'device_model' differs"):
        load_cache(path, registry)
    bad = json.loads(json.dumps(cache))
    bad["validators"]["archive_sha256"] = "0" * 64
    path.write_text(json.dumps(bad))
    with pytest.raises(TuneCacheError, match="archive_sha256"):
        load_cache(path, registry)


def test_export_to_ort_tuning_results(cache, registry):
    sig = "onnxruntime::cuda::SoftmaxTunableOp<__half, __half, float>"
    ort = {"ORT_VERSION": "1.22.0", "ORT_GIT_COMMIT": "", "ORT_BUILD_CONFIG": "ENABLE_TRITON=0|",
           "CUDA_VERSION": "12080", "DEVICE_MODEL": registry.backend.device_name}
    (doc,) = export_ort(cache, registry, {"softmax_fp16": sig}, 8, ort)
    assert doc["ep"] == "CUDAExecutionProvider" and doc["validators"] == ort
    group = [k.name for k in registry.by_group["softmax_fp16"]]
    for params_sig, kid in doc["results"][sig].items():
        assert group[kid - 8] == cache["results"]["softmax_fp16"][params_sig]["ort_kernel"]
    with pytest.raises(ValueError, match="ORT_GIT_COMMIT"):
        export_ort(cache, registry, {"softmax_fp16": sig}, 0, {"ORT_VERSION": "1"})
