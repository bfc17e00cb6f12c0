"""Tune-cache inputs that need no GPU: shape files and the default grid."""

import pytest

from runtime.tune import default_shapes, device_slug, read_shapes


def test_default_grid_is_60_bounded_shapes():
    shapes = default_shapes()
    assert len(shapes) == 60 and len(set(shapes)) == 60
    assert all(b * n <= 2**27 for b, n in shapes)


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
