import pytest
from tritonforge.pipeline.compile.targets import parse_target, parse_targets
from tritonforge.pipeline.errors import PipelineError


@pytest.mark.parametrize("text, spec, name", [
    ("cuda:90", "cuda:90:32", "sm_90"),
    ("sm_80", "cuda:80:32", "sm_80"),
    ("sm_90a", "cuda:90:32", "sm_90"),
    ("cuda:120", "cuda:120:32", "sm_120"),
    ("sm_103a", "cuda:103:32", "sm_103"),  # B300 and GB10: Triton's Blackwell code is arch-specific
    ("sm_121", "cuda:121:32", "sm_121"),
    ("hip:gfx942", "hip:gfx942:64", "gfx942"),
    ("rocm:gfx90a", "hip:gfx90a:64", "gfx90a"),
    ("gfx1100", "hip:gfx1100:32", "gfx1100"),  # RDNA is wave32
    ("hip:gfx1100:64", "hip:gfx1100:64", "gfx1100"),
])
def test_parse(text, spec, name):
    t = parse_target(text)
    assert t.spec() == spec and t.arch_name == name
    assert parse_target(t.spec()) == t


@pytest.mark.parametrize("text, fragment", [
    ("cuda:77", "unknown CUDA target"),
    ("hip:gfx000", "unknown ROCm target"),
    ("metal:1", "unknown backend"),
    ("hip:gfx942:32", "wave64 only"),
    ("cuda:90:64", "32 threads"),
    ("whatever", "unknown target"),
])
def test_parse_rejects(text, fragment):
    with pytest.raises(PipelineError, match=fragment):
        parse_target(text)


def test_parse_targets_checks_platform_and_dedupes():
    assert [t.arch_name for t in parse_targets("sm_90,cuda:90,sm_80", platform="cuda")] == ["sm_90", "sm_80"]
    with pytest.raises(PipelineError, match="not a cuda target"):
        parse_targets(["gfx942"], platform="cuda")
    with pytest.raises(PipelineError, match="no target"):
        parse_targets("")
