"""ORT TuningResults from a tune cache (CPU): ORT's format field for field, ids as ORT registers them, and
the refusals that keep a file ORT would silently misapply from being written."""

from __future__ import annotations

import json

import pytest
from tritonforge.runtime.ort_tuning import ExportError, export, main, validators_from

ROCM = {"ORT_VERSION": "1.22.0", "ORT_GIT_COMMIT": "f217402897f4", "ORT_BUILD_CONFIG": "USE_CK=1|",
        "HIP_VERSION": "60342134", "ROCBLAS_VERSION": "4.4.1.2d8b2e2e-dirty", "DEVICE_MODEL": "AMD Instinct MI300X"}
SOFTMAX = "onnxruntime::rocm::SoftmaxTunableOp<__half, __half, float>"
GROUP_NORM = "onnxruntime::contrib::rocm::GroupNormNHWCTunableOp<__half>"


@pytest.fixture
def manifest(built):
    return json.loads((built[1] / "rocm/gfx942/kernels.json").read_text())


@pytest.fixture
def cache(manifest):
    """A ROCm tune cache choosing the last softmax kernel and the first GroupNorm SiLU kernel of ORT's groups."""
    softmax = manifest["groups"]["softmax_fp16"]["kernels"]
    silu = manifest["groups"]["GroupNormTriton_Silu_fp16"]["kernels"]
    return {"schema": "tritonforge.tune/1", "validators": {"archive_sha256": manifest["archive"]["sha256"]},
            "results": {
                "softmax_fp16": {"8_1024": {"kernel": "x", "ort_kernel": softmax[-1]},
                                 "1_100000": {"kernel": "y", "ort_kernel": None}},  # no ORT candidate: left out
                "log_softmax_fp16": {"8_1024": {"kernel": "z", "ort_kernel": "log_softmax_fp16_32"}},
                "group_norm_silu_fp16": {"2_4096_320_32_silu_noskip_nobroadcast_nobias": {"kernel": "w",
                                                                                           "ort_kernel": silu[0]}}}}


def test_rocm_export_is_orts_format(manifest, cache):
    doc = export(cache, manifest, "rocm", {"softmax_fp16": SOFTMAX, "group_norm_silu_fp16": GROUP_NORM},
                 {"softmax_fp16": 11, "group_norm_silu_fp16": 19}, ROCM)
    passes = len(manifest["groups"]["GroupNormTriton_Pass_fp16"]["kernels"])
    softmax = manifest["groups"]["softmax_fp16"]["kernels"]
    assert doc == [{"ep": "ROCMExecutionProvider", "validators": ROCM, "results": {
        SOFTMAX: {"8_1024": 11 + len(softmax) - 1},
        GROUP_NORM: {"2_4096_320_32_silu_noskip_nobroadcast_nobias": 19 + passes}}}]
    assert list(doc[0]) == ["ep", "validators", "results"]


@pytest.mark.parametrize("change, message", [
    (lambda v, o, ops: v.pop("ROCBLAS_VERSION"), r"missing \['ROCBLAS_VERSION'\]"),
    (lambda v, o, ops: v.update(CUDA_VERSION="12080"), r"not rocm's \['CUDA_VERSION'\]"),
    (lambda v, o, ops: o.pop("softmax_fp16"), r"no id offset for \['softmax_fp16'\]"),
    (lambda v, o, ops: ops.update(log_softmax_fp16="x") or o.update(log_softmax_fp16=0),
     "no Triton op for 'log_softmax_fp16'"),
    (lambda v, o, ops: ops.update(softmax_fp32="x") or o.update(softmax_fp32=0), "no results for 'softmax_fp32'"),
])
def test_refusals(manifest, cache, change, message):
    validators, offsets, ops = dict(ROCM), {"softmax_fp16": 11}, {"softmax_fp16": SOFTMAX}
    change(validators, offsets, ops)
    with pytest.raises(ExportError, match=message):
        export(cache, manifest, "rocm", ops, offsets, validators)


def test_a_cache_for_another_archive_is_refused(manifest, cache):
    cache["validators"]["archive_sha256"] = "0" * 64
    with pytest.raises(ExportError, match="made for archive 0000"):
        export(cache, manifest, "rocm", {"softmax_fp16": SOFTMAX}, {"softmax_fp16": 11}, ROCM)


def test_cli_reads_validators_from_an_ort_build(built, cache, tmp_path):
    (tmp_path / "tune.json").write_text(json.dumps({**cache, "validators": {**cache["validators"],
                                                                             "target": "gfx942"}}))
    (tmp_path / "ort.json").write_text(json.dumps([{"ep": "ROCMExecutionProvider", "validators": ROCM,
                                                    "results": {}}]))
    assert validators_from(tmp_path / "ort.json", "rocm") == ROCM
    with pytest.raises(ExportError, match="no CUDAExecutionProvider entry"):
        validators_from(tmp_path / "ort.json", "cuda")
    argv = ["--cache", str(tmp_path / "tune.json"), "--dist", str(built[1]), "--platform", "rocm",
            "--op", f"softmax_fp16={SOFTMAX}", "--validators-from", str(tmp_path / "ort.json"),
            "--out", str(tmp_path / "out.json")]
    assert main(argv) == 1 and not (tmp_path / "out.json").exists()  # no offset: nothing written
    assert main([*argv, "--offset", "softmax_fp16=11"]) == 0
    (doc,) = json.loads((tmp_path / "out.json").read_text())
    assert doc["ep"] == "ROCMExecutionProvider" and doc["validators"] == ROCM and list(doc["results"]) == [SOFTMAX]
