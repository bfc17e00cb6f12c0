"""Tune-cache inputs that need no GPU: shape files and the default grid."""

import pytest
from tritonforge.runtime.ops.softmax import default_shapes
from tritonforge.runtime.tune import TuneError, problems_for, read_shape_files, read_shapes
from tritonforge.runtime.tune_cache import device_slug


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


def test_device_slug():
    assert device_slug("NVIDIA H200") == "NVIDIA_H200"
    assert device_slug("AMD Instinct MI300X/MI300") == "AMD_Instinct_MI300X_MI300"


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
