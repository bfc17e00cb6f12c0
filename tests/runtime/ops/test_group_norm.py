"""GroupNorm (NHWC, skip / bias / SiLU) from the shipped archive on a real GPU, against float64."""

from __future__ import annotations

import os

import numpy as np
import pytest
from tritonforge.runtime.launch import Unsupported
from tritonforge.runtime.memory import DeviceArray, element_size
from tritonforge.runtime.ops.group_norm import GroupNorm, group_norm_mismatch, group_norm_numpy, group_norm_ref
from tritonforge.runtime.reference import quantize

pytestmark = pytest.mark.gpu

SEED = int.from_bytes(os.urandom(4), "little")
UNET = [(h, c) for h in (8, 16, 32, 64) for c in (320, 640, 1280)]
VARIANTS = [  # (silu, skip mode, bias)
    (True, "none", False), (False, "none", False), (True, "full", True), (False, "full", False),
    (True, "broadcast", True), (False, "none", True),
]


def check(registry, rng, n, h, w, c, groups, dtype, silu, skip_mode, has_bias, kernel=None, what=""):
    x = (rng.standard_normal((n, h, w, c)) * rng.uniform(0.5, 3) + rng.uniform(-1, 1)).astype(np.float32)
    gamma = rng.standard_normal(c).astype(np.float32)
    beta = rng.standard_normal(c).astype(np.float32)
    skip = None
    if skip_mode == "full":
        skip = rng.standard_normal((n, h, w, c)).astype(np.float32)
    elif skip_mode == "broadcast":
        skip = rng.standard_normal((n, c)).astype(np.float32)
    bias = rng.standard_normal(c).astype(np.float32) if has_bias else None
    y, add = group_norm_numpy(registry, x, gamma, beta, groups, dtype, 1e-5, silu, skip, bias, kernel)
    q = lambda a: None if a is None else quantize(a, dtype)
    ref, ref_add = group_norm_ref(q(x), gamma.astype(np.float64), beta.astype(np.float64), groups, 1e-5, silu,
                                  q(skip), q(bias))
    label = f"{what} n={n} {h}x{w}x{c}/{groups} {dtype} silu={silu} skip={skip_mode} bias={has_bias} seed={SEED}"
    problem = group_norm_mismatch(y, ref, dtype)
    assert problem is None, f"{label}: {problem}"
    if skip is not None:
        problem = group_norm_mismatch(add, ref_add, dtype)
        assert problem is None, f"{label}: add_out {problem}"


@pytest.fixture
def rng(request):
    return np.random.default_rng([SEED, abs(hash(request.node.nodeid)) % 2**32])


@pytest.mark.parametrize("dtype", ["fp16", "fp32", "bf16"])
@pytest.mark.parametrize("n", [1, 2])
def test_unet_shapes(registry, rng, dtype, n):
    for i, (h, c) in enumerate(UNET):
        silu, skip_mode, has_bias = VARIANTS[(i + n) % len(VARIANTS)]
        names = [k for k, _ in GroupNorm(registry, dtype, silu).candidates(n, h * h, c, 32)]
        assert names, f"no candidate for {h}x{h}x{c}"
        for kernel in dict.fromkeys((names[0], names[-1])):
            check(registry, rng, n, h, h, c, 32, dtype, silu, skip_mode, has_bias, kernel, "unet")


@pytest.mark.parametrize("silu, skip_mode, has_bias", VARIANTS)
def test_every_variant_on_one_shape(registry, rng, silu, skip_mode, has_bias):
    check(registry, rng, 2, 16, 16, 640, 32, "fp16", silu, skip_mode, has_bias, what="variant")


@pytest.mark.parametrize("n, h, w, c, groups", [
    (3, 4, 12, 96, 32),    # 3 channels per group
    (1, 16, 1, 160, 32),   # 5 channels per group, a 16x1 image
    (2, 8, 6, 2048, 32),   # 64 channels per group
    (1, 4, 4, 128, 1),     # one group of 128 channels
    (5, 2, 8, 24, 3),      # 8 channels per group
    (1, 7, 7, 24, 3),      # 49 pixels and 24 channels: the GroupNormAny fallback
    (1, 5, 5, 600, 2),     # 300 channels per group: past ORT's 128, the fallback again
    (2, 5, 3, 40, 8),      # 15 pixels, 40 channels (not a multiple of 16)
])
def test_awkward_shapes(registry, rng, n, h, w, c, groups):
    for dtype in ("fp16", "fp32"):
        by_group = {}
        for name, _ in GroupNorm(registry, dtype, True).candidates(n, h * w, c, groups):
            by_group.setdefault(registry.by_name[name].group, name)
        assert by_group, f"no candidate for n={n} {h}x{w}x{c}/{groups}"
        for kernel in by_group.values():  # the first kernel of each group that admits the shape
            check(registry, rng, n, h, w, c, groups, dtype, True, "full", True, kernel, what="awkward")


def test_every_kernel_runs(registry, rng):
    """Every kernel of ORT's groups and of the GroupNormAny fallback (odd H*W there)."""
    ran = []
    for group, infos in registry.by_group.items():
        if not group.startswith(("GroupNormTriton_", "GroupNormAny_")):
            continue
        silu, dtype = group.split("_")[1] == "Silu", group.split("_")[2]
        for info in infos:
            block, hw_size = info.constants["BLOCK_SIZE"], info.constants["HW_SIZE"]
            step = hw_size * info.constants["TILES"]
            cpg = max(1, block * 3 // 4) if block > 1 else 1
            cpg = cpg if block < 2 * cpg else block  # the contract: BLOCK is the next power of two
            # An odd channel count per group too: no vectors, the kernel's element path.
            odd = [block // 2 + 1] if block >= 4 else []
            vec = info.constants.get("VEC", 0)
            if vec:  # a kernel made for a vector that does not divide BLOCK_SIZE's channels: 30 of 32, 60 of 64
                odd.append(block - vec)
            # One step (read once), and three with a partial last one (pass 2 walks back over two).
            for hw in (step, 2 * step + hw_size):
                hw = hw + 5 if group.startswith("GroupNormAny_") else hw
                for k in [cpg, *odd]:
                    check(registry, rng, 2, hw, 1, 2 * k, 2, dtype, silu, "full", True, info.name, "kernel")
            if info.constants.get("FLAT"):  # x alone over several steps: pass 1 over the group's vectors
                vec = vec or min(block // 8, 16 // element_size(dtype))
                # several vectors a pixel (6 and 5, or 15 and 13): rows past the last whole pixel
                for k in sorted({cpg, 5 * vec} if not info.constants.get("VEC") else {block - vec, block - 3 * vec}):
                    check(registry, rng, 2, 3 * step + hw_size, 1, 2 * k, 2, dtype, silu, "none", False, info.name,
                          "flat")
            ran.append(info.name)
    assert len(ran) == sum(len(v) for g, v in registry.by_group.items()
                           if g.startswith(("GroupNormTriton_", "GroupNormAny_")))


def kernels_of(registry, family: str):
    """(op, dtype, silu, info) for every kernel of the family's groups `<family>_{Silu|Pass}_<dtype>`."""
    for group, infos in registry.by_group.items():
        if group.startswith(f"{family}_"):
            _, act, dtype = group.split("_")
            op = GroupNorm(registry, dtype, act == "Silu")
            for info in infos:
                yield op, dtype, act == "Silu", info


def test_every_whole_kernel_runs(registry, rng):
    """Each whole-group kernel on a group that fills it between half and all: c_per_group three
    vectors (so vectors of a pixel straddle 2*VEC boundaries), a partial last row of vectors; kernels
    with a tail also on a group of five vectors per pixel that fills body and tail exactly."""
    ran = 0
    for op, dtype, silu, info in kernels_of(registry, "GroupNormWhole"):
        vec, held = info.constants["VEC"], info.constants["VECTORS"] + info.constants["TAIL"]
        skip_mode = ("full", "broadcast", "none")[info.index % 3]
        shapes = [(held // 3 - 1, 3)] + ([(held // 5, 5)] if info.constants["TAIL"] else [])
        for hw, per_pixel in shapes:
            admitted = dict(op.candidates(2, hw, 2 * per_pixel * vec, 2))
            assert info.name in admitted, f"{info.name}: its contract rejects hw={hw}, {per_pixel} vectors"
            check(registry, rng, 2, hw, 1, 2 * per_pixel * vec, 2, dtype, silu, skip_mode, info.index % 2 == 0,
                  info.name, "whole kernel")
        ran += 1
    assert ran, "no GroupNormWhole kernels in the archive"


@pytest.mark.parametrize("family", ["GroupNormParts", "GroupNormCluster"])
def test_every_team_kernel_runs(registry, rng, family):
    """Each team kernel on a group that fills its members between half and all: three vectors per
    pixel and one pixel short of full members (the last member holds one pixel less), or, for every
    other kernel with a tail, five vectors per pixel with every member exactly full. Each runs twice,
    so the second launch finds a team's workspace line as the first must leave it: zero. Clusters are
    built from sm_90 (MIN_SM), the cooperative teams up to sm_89 (MAX_SM): exactly one family is here."""
    built_here = (int(registry.backend.arch) >= 90) == (family == "GroupNormCluster")
    if not built_here:
        assert not any(g.startswith(f"{family}_") for g in registry.by_group), f"{family} on sm_{registry.backend.arch}"
        pytest.skip(f"{family} is not built for sm_{registry.backend.arch}")
    ran = 0
    for op, dtype, silu, info in kernels_of(registry, family):
        vec, parts = info.constants["VEC"], info.constants["PARTS"]
        held = info.constants["VECTORS"] + info.constants["TAIL"]
        full = info.constants["TAIL"] and info.index % 2
        hw, per_pixel = (parts * (held // 5), 5) if full else (parts * (held // 3 - 1) - 1, 3)
        admitted = dict(op.candidates(2, hw, 2 * per_pixel * vec, 2))
        assert admitted.get(info.name) == (2, 2, parts), f"{info.name}: hw={hw}, {per_pixel} vectors"
        for attempt in range(2):
            skip_mode = ("full", "broadcast", "none")[(info.index + attempt) % 3]
            check(registry, rng, 2, hw, 1, 2 * per_pixel * vec, 2, dtype, silu, skip_mode,
                  (info.index + attempt) % 2 == 0, info.name, f"team kernel, launch {attempt + 1}")
            assert registry.workspace_nonzero_bytes() == 0, f"{info.name} left its workspace dirty"
        ran += 1
    assert ran, f"no {family} kernels in the archive"


def test_orts_rules_pick_candidates(registry):
    op = GroupNorm(registry, "fp16", silu=True)
    ort = lambda cands: [(k, g) for k, g in cands if registry.by_name[k].group == op.group]
    picked = ort(op.candidates(2, 64 * 64, 320, 32))
    assert picked
    for name, grid in picked:
        info = registry.by_name[name]
        assert info.constants["BLOCK_SIZE"] == 16 and 4096 % info.constants["HW_SIZE"] == 0 and grid == (2, 32, 1)
    # ORT's rule (HW_SIZE divides H*W) on a 7x7 image: only the one-pixel-tile kernels (HW_SIZE 1) qualify
    odd = ort(op.candidates(1, 7 * 7, 320, 32))
    assert odd and all(49 % registry.by_name[k].constants["HW_SIZE"] == 0 for k, _ in odd)
    assert {registry.by_name[k].constants["HW_SIZE"] for k, _ in odd} == {1}
    assert len(op.candidates(1, 7 * 7, 320, 32)) > len(odd), "the other families (and the fallback) take it too"
    with pytest.raises(ValueError, match="do not split"):
        op.candidates(1, 64, 100, 32)


def split_kernels(registry):
    return [info for group, infos in registry.by_group.items() if group.startswith("GroupNormSplit") for info in infos]


def test_every_split_kernel_runs(registry, rng):
    """Each tiled kernel once: channel chunks with groups that straddle them, and a partial last tile."""
    kernels = split_kernels(registry)
    assert kernels, "no GroupNormSplit kernels"
    for info in kernels:
        _, act, dtype = info.group.split("_")
        block = info.constants["BLOCK_C"]
        c, groups = 3 * block, 16  # 16 groups of 3 to 12 channels over 3 chunks
        hw = 2 * info.constants["TILE_HW"] + 3
        skip_mode = ("full", "broadcast", "none")[info.index % 3]
        check(registry, rng, 2, hw, 1, c, groups, dtype, act == "Silu", skip_mode, info.index % 2 == 0, info.name,
              "split kernel")


def test_misaligned_pointers_fall_back_to_the_any_kernels(registry, rng):
    """Tensors one element past a 16-byte boundary: the GroupNormAny fallback (no alignment hints) runs
    them, the aligned tiled kernels are skipped instead of failing."""
    cuda = registry.backend
    n, h, w, c, groups = 2, 7, 7, 64, 32  # 49 pixels: aligned, ORT's one-pixel tiles (HW_SIZE 1) take it
    x = rng.standard_normal((n, h, w, c)).astype(np.float32)
    gamma, beta = rng.standard_normal(c).astype(np.float32), rng.standard_normal(c).astype(np.float32)
    host = np.ascontiguousarray(x.astype(np.float16))
    src, dst = cuda.alloc(host.nbytes + 64), cuda.alloc(host.nbytes + 64)
    g = DeviceArray.from_numpy(cuda, gamma.reshape(1, c), "fp32")
    b = DeviceArray.from_numpy(cuda, beta.reshape(1, c), "fp32")
    try:
        op = GroupNorm(registry, "fp16", silu=True)
        aligned = op.prepare(out=dst, inp=src, gamma=g.ptr, beta=b.ptr, n=n, hw=h * w, c=c, groups=groups)
        assert aligned.kernel.info.group != "GroupNormAny_Silu_fp16"  # a kernel that assumes 16-byte alignment
        cuda.copy_htod(src + 2, host.ctypes.data, host.nbytes)
        cuda.memset(dst, 0xFF, host.nbytes + 64)
        launch = op.prepare(out=dst + 2, inp=src + 2, gamma=g.ptr, beta=b.ptr, n=n, hw=h * w, c=c, groups=groups)
        assert launch.kernel.info.group == "GroupNormAny_Silu_fp16"
        launch()
        cuda.synchronize()
        got = np.empty(host.shape, np.float16)
        cuda.copy_dtoh(got.ctypes.data, dst + 2, host.nbytes)
        ref, _ = group_norm_ref(quantize(x, "fp16"), gamma.astype(np.float64), beta.astype(np.float64), groups,
                                1e-5, True, None, None)
        problem = group_norm_mismatch(got.astype(np.float32), ref, "fp16")
        assert problem is None, f"misaligned {launch.kernel.info.name} seed={SEED}: {problem}"
        assert registry.workspace_nonzero_bytes() == 0
    finally:
        cuda.free(src)
        cuda.free(dst)
        g.free()
        b.free()


@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
def test_split_kernels_loop_and_run_back_to_back(registry, rng, dtype):
    """Grids of every resident program: on large images each program strides over many tiles (both
    passes), small ones give each a single tile. Run twice in a row: the second launch only works if
    the first left the workspace zeroed."""
    op = GroupNorm(registry, dtype, silu=True)
    for n, h, c in ((2, 128, 640), (2, 64, 640), (2, 64, 320), (2, 32, 1280), (8, 16, 320), (1, 8, 1280)):
        tiled = [(k, g) for k, g in op.candidates(n, h * h, c, 32) if "Split" in k]
        assert tiled, f"no tiled kernel for n={n} {h}x{h}x{c}"
        biggest = max(tiled, key=lambda kg: kg[1][0] * kg[1][1])[0]
        for kernel in dict.fromkeys((tiled[0][0], biggest)):
            for attempt in ("first", "second"):
                check(registry, rng, n, h, h, c, 32, dtype, True, "full" if attempt == "first" else "none",
                      attempt == "second", kernel, attempt)
                assert registry.workspace_nonzero_bytes() == 0, f"{kernel} left its workspace dirty"


def test_cluster_kernels_check_their_launch(registry):
    """The runtime refuses a cluster launch the device cannot make (clusters that do not divide the grid)
    and finds room for the family's largest cluster."""
    infos = registry.by_group.get("GroupNormCluster_Silu_fp16")
    if not infos:
        pytest.skip(f"no cluster kernels for sm_{registry.backend.arch} (they need sm_90+)")
    info = max(infos, key=lambda k: (k.constants["PARTS"], k.num_warps))
    kernel, parts = registry.kernel(info.name), info.constants["PARTS"]
    with pytest.raises(Unsupported, match=f"{info.name}: clusters of .* do not divide the grid"):
        kernel.check_cluster((2, 32, parts + 1), (1, 1, parts))
    kernel.check_cluster((2, 32, parts), (1, 1, parts))
    assert registry.backend.resident_clusters(kernel.function, info.threads_per_block, info.shared, (1, 1, parts),
                                              info.name) >= registry.backend.limits["sm_count"] // 18


def test_fallback_keeps_fp32_precision_on_a_large_group(registry, rng):
    """GroupNormAny's kernels walk a group in a few pixel rows: on a 512x512 image a lane sums 16K to 64K
    values, where plain fp32 sums drift past fp32's tolerance (a mean of 2 and a spread of 0.5 make
    E[x^2] - E[x]^2 17 times as sensitive as the sums); the fallback's compensated sums must hold it."""
    n, h, w, c, groups = 1, 512, 512, 16, 2  # 8 channels per group: every kernel of the fallback admits it
    x = (rng.standard_normal((n, h, w, c)) * 0.5 + 2).astype(np.float32)
    gamma, beta = np.ones(c, np.float32), np.zeros(c, np.float32)
    ref, _ = group_norm_ref(x.astype(np.float64), gamma.astype(np.float64), beta.astype(np.float64), groups, 1e-5,
                            True)
    names = [k for k, _ in GroupNorm(registry, "fp32", True).candidates(n, h * w, c, groups)
             if registry.by_name[k].group.startswith("GroupNormAny_")]
    assert len(names) == 2
    for name in names:
        y, _ = group_norm_numpy(registry, x, gamma, beta, groups, "fp32", 1e-5, True, kernel=name)
        problem = group_norm_mismatch(y, ref, "fp32")
        assert problem is None, f"{name} on n=1 512x512x16/2 fp32: {problem}"
