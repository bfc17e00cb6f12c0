"""The tuner on a real GPU: choices, cache validation, ORT export."""

from __future__ import annotations

import json

import pytest
from tritonforge.runtime.ops.softmax import Softmax
from tritonforge.runtime.ort_tuning import export
from tritonforge.runtime.tune import tune
from tritonforge.runtime.tune_cache import TuneCacheError, load_cache

pytestmark = pytest.mark.gpu

SHAPES = [(1, 2048), (64, 1000), (512, 4096)]


@pytest.fixture(scope="module")
def cache(registry):
    return tune(registry, {"softmax": SHAPES}, ops=("softmax", "log_softmax"), dtypes=("fp16",), budget_ms=2.0)


def test_every_problem_gets_a_viable_choice(cache, registry):
    for op_key in ("softmax_fp16", "log_softmax_fp16"):
        entries = cache["results"][op_key]
        assert sorted(entries) == sorted(f"{b}_{n}" for b, n in SHAPES)
        for sig, e in entries.items():
            batch, n = map(int, sig.split("_"))
            op = Softmax(registry, "fp16", op_key.startswith("log"))
            assert e["kernel"] in dict(op.candidates(batch, n))
            ort = registry.by_name[e["ort_kernel"]]
            assert ort.group == op_key and n <= ort.constants["BLOCK_SIZE"]  # a kernel ORT's op would admit
            assert e["us"] > 0 and e["ort_us"] > 0 and e["timed"] >= 1


def test_the_choice_is_the_fastest_checked_candidate(registry):
    """tune_problem's bookkeeping: every candidate is timed, skipped or rejected with a reason; the
    choice is the fastest of those timed, the ORT pick the fastest timed one of ORT's group; the choice
    gives the right answer on another input."""
    import numpy as np
    from tritonforge.runtime.ops.softmax import SoftmaxProblem, SoftmaxSetup
    from tritonforge.runtime.timing import GraphTimer
    from tritonforge.runtime.tune import tune_problem

    rng = np.random.default_rng(7)
    setup = SoftmaxSetup(registry, GraphTimer(registry.backend), SoftmaxProblem("softmax", "fp16", 512, 4096), rng)
    try:
        out = tune_problem(setup, 2.0)
        names = setup.candidates()
        assert len(out.timed) + out.skipped + len(out.rejected) == len(names)
        assert set(out.timed) | set(out.rejected) <= set(names) and all(out.rejected.values())
        assert out.best == min(out.timed, key=out.timed.get) and out.best_ms == out.timed[out.best]
        ort = {k: v for k, v in out.timed.items() if setup.is_ort(k)}
        assert ort and out.ort_best == min(ort, key=ort.get)
    finally:
        setup.free()
    again = SoftmaxSetup(registry, GraphTimer(registry.backend), SoftmaxProblem("softmax", "fp16", 512, 4096),
                         np.random.default_rng(8))
    try:
        assert again.check(out.best) is None
    finally:
        again.free()


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


CUDA_VALIDATORS = {"ORT_VERSION": "1.22.0", "ORT_GIT_COMMIT": "", "ORT_BUILD_CONFIG": "ENABLE_TRITON=1|",
                   "CUDA_VERSION": "12080", "DEVICE_MODEL": "NVIDIA H200"}


def test_export_to_ort_tuning_results(cache, registry):
    """A tune cache made here exports the ORT-group choices as ids after the op's own implementations."""
    sig = "onnxruntime::cuda::SoftmaxTunableOp<__half, __half, float>"
    (doc,) = export(cache, registry.artifacts.manifest, "cuda", {"softmax_fp16": sig}, {"softmax_fp16": 8},
                    CUDA_VALIDATORS)
    assert doc["ep"] == "CUDAExecutionProvider" and doc["validators"] == CUDA_VALIDATORS
    group = [k.name for k in registry.by_group["softmax_fp16"]]
    assert sorted(doc["results"][sig]) == sorted(cache["results"]["softmax_fp16"])
    for params_sig, kid in doc["results"][sig].items():
        assert group[kid - 8] == cache["results"]["softmax_fp16"][params_sig]["ort_kernel"]


def test_group_norm_tuning_and_cache(registry, tmp_path):
    from tritonforge.runtime.ops.group_norm import GroupNorm

    shapes = [(2, 64 * 64, 320, 32), (1, 8 * 8, 1280, 32)]
    cache = tune(registry, ops=("group_norm_silu",), dtypes=("fp16",), budget_ms=2.0, shapes={"group_norm": shapes})
    entries = cache["results"]["group_norm_silu_fp16"]
    assert sorted(entries) == sorted(f"{n}_{hw}_{c}_{g}_silu_noskip_nobroadcast_nobias" for n, hw, c, g in shapes)
    op = GroupNorm(registry, "fp16", silu=True)
    for (n, hw, c, g) in shapes:
        e = entries[f"{n}_{hw}_{c}_{g}_silu_noskip_nobroadcast_nobias"]
        assert e["kernel"] in dict(op.candidates(n, hw, c, g))
        ort = registry.by_name[e["ort_kernel"]]
        cpg = c // g
        assert ort.group == "GroupNormTriton_Silu_fp16"  # and one ORT's rules admit:
        assert cpg <= ort.constants["BLOCK_SIZE"] < 2 * cpg and hw % ort.constants["HW_SIZE"] == 0
    path = tmp_path / "gn.json"
    path.write_text(json.dumps(cache))
    tuned = GroupNorm(registry, "fp16", silu=True, tune_cache=load_cache(path, registry))
    launch = tuned.prepare(out=0, inp=0, gamma=0, beta=0, n=2, hw=4096, c=320, groups=32)
    assert launch.kernel.info.name == entries["2_4096_320_32_silu_noskip_nobroadcast_nobias"]["kernel"]
    sig = "onnxruntime::contrib::cuda::GroupNormNHWCOp<__half>"
    (doc,) = export(cache, registry.artifacts.manifest, "cuda", {"group_norm_silu_fp16": sig},
                    {"group_norm_silu_fp16": 16}, CUDA_VALIDATORS)
    passes = len(registry.by_group["GroupNormTriton_Pass_fp16"])  # ORT registers the Pass group first
    group = [k.name for k in registry.by_group["GroupNormTriton_Silu_fp16"]]
    for params_sig, kid in doc["results"][sig].items():
        assert group[kid - 16 - passes] == entries[params_sig]["ort_kernel"]
