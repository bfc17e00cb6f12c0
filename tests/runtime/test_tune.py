"""The tuner: its method on a scripted setup and its shape files and problems (CPU); on a real GPU its
choices, cache validation and ORT export."""

from __future__ import annotations

import json

import pytest
from tritonforge.runtime.launch import Unsupported
from tritonforge.runtime.ops.softmax import Softmax, default_shapes
from tritonforge.runtime.ort_tuning import export
from tritonforge.runtime.tune import TuneError, problems_for, read_shape_files, read_shapes, tune, tune_problem
from tritonforge.runtime.tune_cache import TuneCacheError, load_cache

SHAPES = [(1, 2048), (64, 1000), (512, 4096)]


@pytest.fixture(scope="module")
def cache(registry):
    return tune(registry, {"softmax": SHAPES}, ops=("softmax", "log_softmax"), dtypes=("fp16",), budget_ms=2.0)


@pytest.mark.gpu
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


@pytest.mark.gpu
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


@pytest.mark.gpu
def test_op_follows_the_cache(cache, registry, tmp_path):
    path = tmp_path / "c.json"
    path.write_text(json.dumps(cache))
    loaded = load_cache(path, registry)
    op = Softmax(registry, "fp16", tune_cache=loaded)
    launch = op.prepare(0, 0, 512, 4096)
    assert launch.kernel.info.name == cache["results"]["softmax_fp16"]["512_4096"]["kernel"]


@pytest.mark.gpu
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


@pytest.mark.gpu
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


@pytest.mark.gpu
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


# ---- the method, on a scripted setup (no GPU): what is skipped, checked, timed and chosen ----------

class ScriptedSetup:
    """Candidates with fixed per-launch times; `wrong` ones fail the numerical check, `refused` ones
    cannot be prepared. Records every check and every timing request."""

    ort_group = "softmax_fp16"

    def __init__(self, times: dict[str, float], wrong=(), refused=(), ort=()):
        self.times, self.wrong, self.refused, self.ort = times, set(wrong), set(refused), set(ort)
        self.checked: list[str] = []
        self.reps: dict[str, list[int]] = {}

    def candidates(self):
        return list(self.times)

    def launch(self, name):
        if name in self.refused:
            raise Unsupported(f"{name}: refused")
        return name

    def is_ort(self, name):
        return name in self.ort

    def check(self, name):
        self.checked.append(name)
        return "max error 1.0" if name in self.wrong else None

    def time_ms(self, name, reps):
        self.reps.setdefault(name, []).append(reps)
        return self.times[name]


def test_slow_candidates_are_skipped_before_their_check():
    setup = ScriptedSetup({"a": 0.010, "slow": 0.025, "fast_wrong": 0.004, "b": 0.006, "gone": 0.001},
                          wrong={"fast_wrong"}, refused={"gone"})
    out = tune_problem(setup, budget_ms=1.0)
    assert out.best == "b" and out.best_ms == 0.006
    assert setup.checked == ["a", "fast_wrong", "b"]  # "slow" (over 2x "a") is never checked
    assert out.skipped == 1 and set(out.rejected) == {"fast_wrong", "gone"}
    assert "numerical check failed" in out.rejected["fast_wrong"] and "refused" in out.rejected["gone"]
    assert set(out.timed) == {"a", "b"}


def test_the_budget_covers_warm_up_and_five_replays():
    setup = ScriptedSetup({"long": 0.5, "short": 0.0001})
    tune_problem(setup, budget_ms=30.0)
    assert setup.reps["long"] == [3, 10]  # quick estimate, then 30 ms / (6 x 0.5 ms)
    assert setup.reps["short"] == [3, 100]  # capped at 100 launches


def test_ort_candidates_are_timed_against_the_ort_best():
    """A candidate of ORT's own group is kept while within 2x of the best ORT kernel, however far it is
    from the overall best, so the ORT-contract figure is the best ORT can pick."""
    setup = ScriptedSetup({"fast": 0.001, "ort_1": 0.010, "ort_2": 0.008}, ort={"ort_1", "ort_2"})
    out = tune_problem(setup, budget_ms=1.0)
    assert out.best == "fast" and out.ort_best == "ort_2" and out.ort_ms == 0.008
    assert setup.checked == ["fast", "ort_1", "ort_2"]


def test_exhaustive_checks_and_times_everything():
    setup = ScriptedSetup({"a": 0.001, "slow": 0.1})
    out = tune_problem(setup, exhaustive=True)
    assert setup.checked == ["a", "slow"] and set(out.timed) == {"a", "slow"} and out.skipped == 0
    # every candidate timed with four times the budget: 40 ms / (6 x 0.1 ms) launches, at most 100
    assert setup.reps["slow"] == [3, 66] and setup.reps["a"] == [3, 100]


# ---- shape files and problems (no GPU) ----------------------------------------------------------------

def test_default_grid_is_the_zoos_softmax_shapes():
    from tritonforge.runtime import zoo

    shapes = default_shapes()
    assert shapes == zoo.softmax_problems() and len(set(shapes)) == len(shapes)
    assert (16, 128256) in shapes and (2 * 8 * 4096, 4096) in shapes and (12 * 197, 197) in shapes


def test_read_shapes(tmp_path):
    f = tmp_path / "s.txt"
    f.write_text("# batch, n_cols\n1,2048\n 64 1000  # spaces work too\n\n")
    assert read_shapes(f) == [(1, 2048), (64, 1000)]
    f.write_text("1,2048\n3,x\n")
    with pytest.raises(ValueError, match=r"s.txt:2: expected 'batch,n_cols'"):
        read_shapes(f)
    f.write_text("# nothing\n")
    with pytest.raises(ValueError, match="no shapes"):
        read_shapes(f)


def test_group_norm_shapes_and_ops():
    from tritonforge.runtime.ops import group_norm
    from tritonforge.runtime.ops.group_norm import GroupNormProblem, signature

    shapes = group_norm.default_shapes()
    assert len(shapes) == len(set(shapes)) and (2, 4096, 320, 32) in shapes and (1, 512 * 512, 128, 32) in shapes
    problems = problems_for(["softmax", "group_norm_silu"], ["fp16"],
                            {"softmax": [(1, 2048)], "group_norm": [(2, 4096, 320, 32)]})
    assert problems[1] == GroupNormProblem("fp16", 2, 4096, 320, 32, True)
    # ORT's GroupNormNHWCTunableParams::Signature()
    assert problems[1].params_signature == "2_4096_320_32_silu_noskip_nobroadcast_nobias"
    assert signature(1, 64, 640, 32, False, 1, True, 1) == "1_64_640_32_pass_skip_broadcast_bias"
    with pytest.raises(TuneError, match="unknown op 'layer_norm': choose from .*group_norm_silu.*log_softmax"):
        problems_for(["layer_norm"], ["fp16"])
    # a family without shapes of its own takes the zoo's
    assert len(problems_for(["group_norm_pass"], ["fp32"], {"softmax": [(1, 2)]})) == len(shapes)


def test_read_group_norm_shapes(tmp_path):
    f = tmp_path / "gn.txt"
    f.write_text("2,4096,320,32\n1 64 1280 32\n")
    assert read_shape_files({"group_norm": str(f), "softmax": None}) == {
        "group_norm": [(2, 4096, 320, 32), (1, 64, 1280, 32)]}
    f.write_text("2,4096,320\n")
    with pytest.raises(ValueError, match="gn.txt:1: expected 'n,hw,c,groups'"):
        read_shape_files({"group_norm": str(f)})
    with pytest.raises(TuneError, match="no op family 'layer_norm'"):
        read_shape_files({"layer_norm": str(f)})
