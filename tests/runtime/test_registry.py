"""Registry and launcher behaviour on a real GPU: load once per context, guards, driver errors."""

from __future__ import annotations

import pytest
from tritonforge.runtime.registry import Registry

pytestmark = pytest.mark.gpu


def test_registry_order_and_lookup(registry):
    assert [k.index for k in registry.metadata] == list(range(len(registry.metadata)))
    group = registry.by_group["softmax_fp16"]  # in table order: kernels/ scripts by name, then entries
    assert [k.index for k in group] == sorted(k.index for k in group)
    assert group == [k for k in registry.metadata if k.group == "softmax_fp16"]
    with pytest.raises(KeyError, match="no kernel named"):
        registry.kernel("nope")


def test_modules_load_once_per_context(registry):
    a = registry.kernel("softmax_fp32_1024")
    assert registry.kernel("softmax_fp32_1024") is a
    assert registry.load_all() == len(registry.metadata)
    assert registry.kernel("softmax_fp32_1024") is a


def test_second_context_gets_its_own_module(registry, cuda):
    from cuda.bindings import driver as cu
    from tritonforge.runtime.cuda import check

    try:  # CUDA 13 takes creation params first; CUDA 12 does not
        ctx = check(cu.cuCtxCreate(None, 0, cuda.device), "cuCtxCreate")
    except TypeError:
        ctx = check(cu.cuCtxCreate(0, cuda.device), "cuCtxCreate")
    try:
        second = registry.kernel("softmax_fp32_1024")  # the created context is current now
        cuda.make_current()
        primary = registry.kernel("softmax_fp32_1024")
        assert second is not primary
        assert int(second.module) != int(primary.module)
    finally:
        cuda.make_current()
        check(cu.cuCtxDestroy(ctx), "cuCtxDestroy")


def test_wrong_arch_is_refused(registry, cuda):
    """A build for another major arch (its cubins cannot run here, and it holds no PTX) is refused."""
    arts = registry.artifacts
    other = "70" if int(cuda.arch) >= 80 else "90"
    target = {**arts.manifest["target"], "arch": other, "arch_name": f"sm_{other}"}
    arts_other = type(arts)(arts.path, {**arts.manifest, "target": target}, arts.kernels, arts.blobs)
    with pytest.raises(ValueError, match=f"built for sm_{other}, but the device is sm_{cuda.arch}"):
        Registry(arts_other, cuda)


def test_packed_buffer_is_orts_struct(registry):
    import struct

    k = registry.kernel("softmax_fp16_2048")
    launch = k.prepare({"output_ptr": 0x1000, "input_ptr": 0x2000, "input_row_stride": 7,
                        "output_row_stride": 9, "n_cols": 5}, (1, 1, 1))
    assert launch.packed() == struct.pack("<QQiii4xQQ", 0x1000, 0x2000, 7, 9, 5, 0, 0)
