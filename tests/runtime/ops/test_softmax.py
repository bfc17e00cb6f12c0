"""Softmax / LogSoftmax from the shipped archive on a real GPU, against float64 references.

ORT's kernel_explorer grid and more: fresh random inputs every run, outputs poisoned before every
launch and every element (padding included) checked.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
from tritonforge.runtime.launch import Unsupported
from tritonforge.runtime.memory import DTYPES, DeviceArray
from tritonforge.runtime.ops.softmax import Softmax, softmax_numpy, softmax_ref
from tritonforge.runtime.reference import assert_close, quantize

pytestmark = pytest.mark.gpu

ELEMENTS = [1, 2, 3, 4, 5, 7, 8, 9, 11, 16, 31, 32, 33, 64, 65, 127, 128, 1024, 1025, 2048, 4096, 8191, 16384]
BATCHES = [1, 8, 1000]
FLOATS = ["fp32", "fp16", "bf16"]
POISON = 0xFF  # every float type reads 0xFF.. as NaN

SEED = int.from_bytes(os.urandom(4), "little")


@pytest.fixture
def rng(request):
    # Fresh inputs each run; the seed is in the test id's failure message for reproduction.
    return np.random.default_rng([SEED, abs(hash(request.node.nodeid)) % 2**32])


def run_and_check(registry, kernel, dtype, log, x, in_stride=None, out_stride=None, what=""):
    cuda = registry.backend
    batch, n = x.shape
    src = DeviceArray.from_numpy(cuda, x, dtype, row_stride=in_stride)
    dst = DeviceArray(cuda, batch, n, dtype, row_stride=out_stride)
    try:
        dst.fill_bytes(POISON)
        op = Softmax(registry, dtype, log)
        op.prepare(dst.ptr, src.ptr, batch, n, src.row_stride, dst.row_stride, kernel=kernel)()
        cuda.synchronize()
        storage = dst.storage()
        pad = storage[:, n:]
        assert (pad.view(np.uint8) == POISON).all(), f"{what}: {kernel} wrote past n_cols into the row padding"
        assert_close(dst.to_numpy(), softmax_ref(quantize(x, dtype), log), dtype, log,
                     f"{what} {kernel} seed={SEED}")
    finally:
        src.free()
        dst.free()


@pytest.mark.parametrize("log", [False, True], ids=["softmax", "log_softmax"])
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("batch", BATCHES)
def test_kernel_explorer_grid(registry, rng, dtype, log, batch):
    for n in ELEMENTS:
        x = rng.standard_normal((batch, n)).astype(np.float32) * rng.uniform(0.5, 8)
        op = Softmax(registry, dtype, log)
        by_group = {}
        for name, _ in op.candidates(batch, n):
            by_group.setdefault(registry.by_name[name].group, []).append(name)
        assert f"{'log_' if log else ''}softmax_{dtype}" in by_group or n > 16384, f"no ORT candidate {batch}x{n}"
        # In each family, the smallest tile that fits and the largest: different masking and reductions.
        for names in by_group.values():
            for kernel in dict.fromkeys((names[0], names[-1])):
                run_and_check(registry, kernel, dtype, log, x, what=f"{batch}x{n}")


@pytest.mark.parametrize("dtype", FLOATS)
def test_strided_rows(registry, rng, dtype):
    for n in (5, 127, 1025, 4096):
        x = rng.standard_normal((37, n)).astype(np.float32)
        for log in (False, True):
            op = Softmax(registry, dtype, log)
            for kernel, _ in op.candidates(37, n, n + 13, n + 7)[:3]:
                run_and_check(registry, kernel, dtype, log, x, in_stride=n + 13, out_stride=n + 7,
                              what=f"strided 37x{n}")


@pytest.mark.parametrize("dtype", FLOATS)
def test_minus_inf_and_large_magnitudes(registry, rng, dtype):
    n = 1000
    big = 6e4 if dtype == "fp16" else 1e30
    x = rng.standard_normal((6, n)).astype(np.float32)
    x[0, ::3] = -np.inf  # masked-out positions, as attention masks produce
    x[1, :] = -np.inf
    x[1, 17] = 0.0  # a single survivor
    x[2, :] = rng.uniform(-big, big, n)
    x[3, :] = big  # all equal and huge: uniform 1/n
    x[4, :] = -big
    x[5, 123] = big  # one dominant element
    for log in (False, True):
        ref = softmax_ref(quantize(x, dtype), log)
        if log:
            # log(0) = -inf is exact for masked positions, and a finite value below the storage type's
            # range also rounds to -inf (fp16: -131008 does not fit); compare the rest.
            finite = np.isfinite(quantize(ref, dtype))
            for kernel, _ in Softmax(registry, dtype, log).candidates(6, n)[:2]:
                y = softmax_numpy(registry, x, dtype, log=True, kernel=kernel)
                assert not np.isnan(y).any()
                assert (np.isneginf(y) == ~finite).all(), f"{kernel}: -inf where the answer is finite"
                assert_close(y[finite], ref[finite], dtype, True, f"{kernel} special values")
            continue
        for kernel, _ in Softmax(registry, dtype, log).candidates(6, n)[:2]:
            run_and_check(registry, kernel, dtype, log, x, what="special values")


def test_every_kernel_of_every_group_runs(registry, rng):
    """Each kernel in the archive for this arch launches and gives the right answer at least once."""
    ran = []
    softmax_groups = {g: infos for g, infos in registry.by_group.items() if "softmax" in g}
    for group, infos in softmax_groups.items():
        contract = registry.artifacts.contract(group)
        assert contract is not None, f"group {group} has no launch contract"
        dtype = group.rsplit("_", 1)[1]
        log = group.startswith("log_")
        op = Softmax(registry, dtype, log)
        for info in infos:
            block = info.constants.get("CHUNK", info.constants["BLOCK_SIZE"])  # streamed: the piece
            # The first row length this kernel's contract admits: a partial vector inside the block,
            # a multiple of 16, (streamed kernels) several blocks and a remainder, (cluster kernels)
            # SPLIT pieces, the last one partial, or (streamed, 16-aligned) two blocks and a partial one.
            batch = 2 * info.constants.get("ROWS", 1) + 1
            split = info.constants.get("SPLIT", 1)
            for n in (max(1, block - 3), max(16, block - 16), 2 * block + 5, split * block - 48,
                      2 * split * block + 48):
                if info.name in dict(op.candidates(batch, n)):
                    break
            else:
                raise AssertionError(f"{info.name}: no row length admitted by its contract")
            x = rng.standard_normal((batch, n)).astype(np.float32)
            run_and_check(registry, info.name, dtype, log, x, what=f"{batch}x{n}")
            ran.append(info.name)
    assert sorted(ran) == sorted(k.name for infos in softmax_groups.values() for k in infos)


@pytest.mark.parametrize("dtype", FLOATS)
def test_long_rows(registry, rng, dtype):
    """Rows held by thread-block clusters (where the device has them) and streamed twice by one program:
    more rows than clusters, pieces that are all -inf or past the row's end, a row of equal huge values
    (where max + log(sum) would round the log away), each launched twice."""
    for n, batch in ((16400, 700), (40000, 300), (65552, 97), (131072, 33), (262128, 9), (300000, 3)):
        x = rng.standard_normal((batch, n)).astype(np.float32) * rng.uniform(0.5, 8)
        x[0, :] = -np.inf
        x[0, n - 1] = 1.0  # every piece but the last is all -inf
        x[1, :] = 6e4 if dtype == "fp16" else 1e30  # all equal and huge: log-softmax is -log(n), not 0
        x[-1, : n // 2] = -np.inf
        for log in (False, True):
            cands = [name for name, _ in Softmax(registry, dtype, log).candidates(batch, n)]
            streamed = [name for name in cands if "_stream_" in name or "_any_" in name]
            clustered = [name for name in cands if "_cluster_" in name]
            assert streamed, f"no streamed kernel admits {batch}x{n}"
            if registry.backend.limits.get("clusters") and n <= 262144:
                assert clustered, f"no cluster kernel admits {batch}x{n}"
            picks = streamed[:1] + streamed[-1:] + clustered[:1] + clustered[len(clustered) // 2:][:1] + clustered[-1:]
            for kernel in dict.fromkeys(picks):
                for attempt in ("first", "second"):
                    ref = softmax_ref(quantize(x, dtype), log)
                    if log:
                        finite = np.isfinite(quantize(ref, dtype))
                        y = softmax_numpy(registry, x, dtype, log=True, kernel=kernel)
                        assert (np.isneginf(y) == ~finite).all(), f"{kernel}: -inf where the answer is finite"
                        assert_close(y[finite], ref[finite], dtype, True, f"{attempt} {batch}x{n} {kernel}")
                    else:
                        run_and_check(registry, kernel, dtype, log, x, what=f"{attempt} {batch}x{n}")


@pytest.mark.parametrize("dtype", FLOATS)
def test_every_family_gives_the_same_answer(registry, rng, dtype):
    """One input through every group that admits it, rows of -inf included: the same NaNs (an all -inf
    row is NaN, as torch gives) and the same numbers, whichever kernel the tuner picks."""
    for n in (64, 1000, 4096, 16384, 40000, 131072):
        x = rng.standard_normal((12, n)).astype(np.float32) * 3
        x[0, :] = -np.inf  # no survivor
        x[1, :] = -np.inf
        x[1, n // 2] = 2.0  # one survivor
        x[2, ::2] = -np.inf  # masked positions
        x[3, :] = 6e4 if dtype == "fp16" else 1e30  # equal and huge
        for log in (False, True):
            by_group = {}
            for name, _ in Softmax(registry, dtype, log).candidates(12, n):
                by_group.setdefault(registry.by_name[name].group, name)
            assert len(by_group) >= 2, (n, by_group)  # a family besides the fallback
            outs = {k: softmax_numpy(registry, x, dtype, log=log, kernel=k) for k in by_group.values()}
            ref = softmax_ref(quantize(x, dtype), log)
            for kernel, y in outs.items():
                assert np.isnan(y[0]).all(), f"{kernel}: an all -inf row must give NaN"
                assert not np.isnan(y[1:]).any(), f"{kernel}: NaN in a row with a survivor"
                finite = np.isfinite(quantize(ref[1:], dtype))
                assert (np.isfinite(y[1:]) == finite).all(), f"{kernel}: infinities differ from the reference"
                assert_close(y[1:][finite], ref[1:][finite], dtype, log, f"{kernel} {12}x{n}")


@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
def test_packed_rows_special_values_and_strides(registry, rng, dtype):
    """The packed-row kernels unpack each 32-bit word into two columns: -inf and huge values in either
    half, a row shorter than the block (masked words), padded strides, and rows of one survivor."""
    packed = [name for name in registry.by_name if "_packed_" in name]
    if not packed:
        pytest.skip("no packed-row kernels in this archive (CUDA only)")
    big = 6e4 if dtype == "fp16" else 1e30
    for n, stride in ((16000, 16000), (20000, 20032), (32768, 32768), (65520, 65536)):
        x = rng.standard_normal((7, n)).astype(np.float32) * 4
        x[0, ::2] = -np.inf  # low halves masked
        x[1, 1::2] = -np.inf  # high halves masked
        x[2, :] = -np.inf
        x[2, n - 1] = -3.0  # the single survivor is the last high half
        x[3, :] = rng.uniform(-big, big, n)
        x[4, :] = big
        x[5, 0] = big
        for log in (False, True):
            names = [name for name, _ in Softmax(registry, dtype, log).candidates(7, n, stride, stride)
                     if "_packed_" in name]
            assert names, f"no packed kernel admits 7x{n}"
            for kernel in names:
                if log:
                    ref = softmax_ref(quantize(x, dtype), True)
                    finite = np.isfinite(quantize(ref, dtype))
                    y = softmax_numpy(registry, x, dtype, log=True, kernel=kernel)
                    assert (np.isneginf(y) == ~finite).all(), f"{kernel}: -inf where the answer is finite"
                    assert_close(y[finite], ref[finite], dtype, True, f"{kernel} 7x{n}")
                else:
                    run_and_check(registry, kernel, dtype, log, x, in_stride=stride, out_stride=stride,
                                  what=f"packed 7x{n} stride {stride}")


def test_cuda_array_interface_inputs(registry, rng):
    cuda = registry.backend
    x = rng.standard_normal((9, 300)).astype(np.float32)
    src = DeviceArray.from_numpy(cuda, x, "fp16", row_stride=320)
    dst = DeviceArray(cuda, 9, 300, "fp16")
    Softmax(registry, "fp16")(dst, src)
    cuda.synchronize()
    assert_close(dst.to_numpy(), softmax_ref(quantize(x, "fp16"), False), "fp16", False, "CAI")
    with pytest.raises(ValueError, match="does not match fp32"):
        Softmax(registry, "fp32")(dst, src)
    assert DTYPES["bf16"][1] == "<u2"



def test_default_choice_falls_back_when_pointers_rule_a_kernel_out(registry, rng):
    """A tuned kernel that needs 16-byte aligned pointers gives way to the next candidate for pointers
    that are not aligned, instead of failing the launch."""
    cuda = registry.backend
    batch, n = 4, 40000
    aligned = next(name for name, _ in Softmax(registry, "fp16").candidates(batch, n)
                   if registry.by_name[name].params[0]["divisibility"] == 16)  # the output pointer: 16-byte aligned
    op = Softmax(registry, "fp16", tune_cache={"results": {"softmax_fp16": {f"{batch}_{n}": {"kernel": aligned}}}})
    x = rng.standard_normal((batch, n)).astype(np.float32)
    host = np.ascontiguousarray(x.astype(np.float16))
    nbytes = host.nbytes
    src, dst = cuda.alloc(nbytes + 64), cuda.alloc(nbytes + 64)
    try:
        assert op.prepare(dst, src, batch, n).kernel.info.name == aligned  # aligned: the tuned choice
        cuda.copy_htod(src + 2, host.ctypes.data, nbytes)
        cuda.memset(dst, POISON, nbytes + 64)
        launch = op.prepare(dst + 2, src + 2, batch, n)  # one element in: not 16-byte aligned
        assert launch.kernel.info.name != aligned
        launch()
        cuda.synchronize()
        got = np.empty((batch, n), np.float16)
        cuda.copy_dtoh(got.ctypes.data, dst + 2, nbytes)
        assert_close(got, softmax_ref(quantize(x, "fp16"), False), "fp16", False, f"fallback {launch.kernel.info.name}")
    finally:
        cuda.free(src)
        cuda.free(dst)


def test_cluster_sizes(registry, rng):
    """Clusters of 16 programs are not portable: the runtime allows them on the function before it asks
    the device for room, and refuses sizes no device launches."""
    infos = [k for k in registry.by_group.get("softmax_cluster_fp16", []) if k.constants["SPLIT"] == 16]
    if not infos:
        pytest.skip(f"no cluster kernels for sm_{registry.backend.arch} (they need sm_90+)")
    kernel = registry.kernel(infos[0].name)
    with pytest.raises(Unsupported, match="exceed the 16 programs"):
        kernel.check_cluster((64, 1, 1), (32, 1, 1))
    kernel.check_cluster((32, 1, 1), (16, 1, 1))
    n = 15 * infos[0].constants["BLOCK_SIZE"] + 16  # the last member holds one vector
    x = rng.standard_normal((5, n)).astype(np.float32)
    run_and_check(registry, infos[0].name, "fp16", False, x, what=f"5x{n}")
