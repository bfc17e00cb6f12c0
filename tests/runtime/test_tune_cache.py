"""Tune caches without a GPU: the file names a device gets."""

from tritonforge.runtime.tune_cache import device_slug


def test_device_slug():
    assert device_slug("NVIDIA H200") == "NVIDIA_H200"
    assert device_slug("AMD Instinct MI300X/MI300") == "AMD_Instinct_MI300X_MI300"
