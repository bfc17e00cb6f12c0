"""PROBE, NOT SHIPPED: ways for a thread-block cluster of GroupNorm members to add up their sums (SYNC).

The kernels are kernels/group_norm_cluster_triton.py's (which ships SYNC 8's exchange) with one more
constexpr, SYNC, picking how the members meet:
  0  no exchange: each member normalises with its own sums (wrong output: what the exchange costs);
     group GroupNormClusterS0 launched in clusters, GroupNormPlainS0 without;
  1  thread 0 pushes with st.shared::cluster, then a cluster barrier (arrive.release / wait.acquire);
  2  tagged 64-bit pushes polled in the member's own shared memory (zeroed at start);
  3  the cluster barrier alone (wrong output);
  4  the pushes with no barrier after them (faulted: a member exited while others still wrote to it);
  5  as 1, thread r pushing to member r;
  7  pull: each member stores its sums locally, one barrier, reads every member's remotely, and waits
     on a second barrier phase at its very end so its shared memory outlives the others' reads;
  8  st.async pushes counted on the receiver's mbarrier (shipped).
Measured on the H200 (benchmarks/results/group_norm_probes_h200.log, runs 7-10; SYNC 8 then had its own
copy of the shipped exchange, which it now imports). To rebuild: copy this file beside
kernels/group_norm_cluster_triton.py, group_norm_whole_triton.py and _grid_sync.py, compile that directory
(INVOKE_TRITONFORGE_KERNELS_DIR=<dir> invoke compile --platform cuda --arch sm_90 -o build/gnp), add the
groups' families (ClusterS0, PlainS0, ClusterS1, ...) to FAMILIES in runtime/ops/group_norm.py on the GPU
machine, and time them with benchmarks/probes/time_families.py (the wrong-output modes fail the numerical
check that family_bench.py applies).
"""

import triton
import triton.language as tl
from group_norm_cluster_triton import _cluster_start
from group_norm_cluster_triton import _cluster_sums as _async_push  # SYNC 8: the shipped exchange
from group_norm_whole_triton import SIG, _add2, _mean_rstd, _member, _sums, _vectors, _write, part_variants

PLATFORMS = ("cuda",)  # inline PTX
MIN_SM = 90  # thread-block clusters and distributed shared memory


@triton.jit
def _cluster_arrive():
    """This program has started: the first half of the barrier that `_cluster_sums` completes."""
    tl.inline_asm_elementwise("barrier.cluster.arrive.relaxed.aligned; mov.u32 $0, 0;", "=r", [], dtype=tl.int32,
                              is_pure=False, pack=1)


@triton.jit
def _cluster_sums(a, b, members):
    """(sum of a, sum of b) over the cluster's `members` programs (at most 8), in rank order. Every
    thread runs it (the barriers count every thread); only thread 0 of each program stores."""
    return tl.inline_asm_elementwise(
        """{
        .shared .align 16 .b32 team_sums[16];
        .reg .u32 base, mine, rem, rank, tid;
        .reg .pred lead, in;
        .reg .f32 x, y;
        mov.u32 base, team_sums;
        mov.u32 rank, %cluster_ctarank;
        mov.u32 tid, %tid.x;
        setp.eq.u32 lead, tid, 0;
        mad.lo.u32 mine, rank, 8, base;
        barrier.cluster.wait.aligned;
        mapa.shared::cluster.u32 rem, mine, 0;
        @lead st.shared::cluster.v2.f32 [rem], {$2, $3};
        setp.gt.and.u32 in, $4, 1, lead; @in mapa.shared::cluster.u32 rem, mine, 1;
        @in st.shared::cluster.v2.f32 [rem], {$2, $3};
        setp.gt.and.u32 in, $4, 2, lead; @in mapa.shared::cluster.u32 rem, mine, 2;
        @in st.shared::cluster.v2.f32 [rem], {$2, $3};
        setp.gt.and.u32 in, $4, 3, lead; @in mapa.shared::cluster.u32 rem, mine, 3;
        @in st.shared::cluster.v2.f32 [rem], {$2, $3};
        setp.gt.and.u32 in, $4, 4, lead; @in mapa.shared::cluster.u32 rem, mine, 4;
        @in st.shared::cluster.v2.f32 [rem], {$2, $3};
        setp.gt.and.u32 in, $4, 5, lead; @in mapa.shared::cluster.u32 rem, mine, 5;
        @in st.shared::cluster.v2.f32 [rem], {$2, $3};
        setp.gt.and.u32 in, $4, 6, lead; @in mapa.shared::cluster.u32 rem, mine, 6;
        @in st.shared::cluster.v2.f32 [rem], {$2, $3};
        setp.gt.and.u32 in, $4, 7, lead; @in mapa.shared::cluster.u32 rem, mine, 7;
        @in st.shared::cluster.v2.f32 [rem], {$2, $3};
        barrier.cluster.arrive.release.aligned;
        barrier.cluster.wait.acquire.aligned;
        ld.shared.v2.f32 {$0, $1}, [base];
        setp.gt.u32 in, $4, 1; @in ld.shared.v2.f32 {x, y}, [base+8];
        @in add.f32 $0, $0, x; @in add.f32 $1, $1, y;
        setp.gt.u32 in, $4, 2; @in ld.shared.v2.f32 {x, y}, [base+16];
        @in add.f32 $0, $0, x; @in add.f32 $1, $1, y;
        setp.gt.u32 in, $4, 3; @in ld.shared.v2.f32 {x, y}, [base+24];
        @in add.f32 $0, $0, x; @in add.f32 $1, $1, y;
        setp.gt.u32 in, $4, 4; @in ld.shared.v2.f32 {x, y}, [base+32];
        @in add.f32 $0, $0, x; @in add.f32 $1, $1, y;
        setp.gt.u32 in, $4, 5; @in ld.shared.v2.f32 {x, y}, [base+40];
        @in add.f32 $0, $0, x; @in add.f32 $1, $1, y;
        setp.gt.u32 in, $4, 6; @in ld.shared.v2.f32 {x, y}, [base+48];
        @in add.f32 $0, $0, x; @in add.f32 $1, $1, y;
        setp.gt.u32 in, $4, 7; @in ld.shared.v2.f32 {x, y}, [base+56];
        @in add.f32 $0, $0, x; @in add.f32 $1, $1, y;
        }""",
        "=f,=f,f,f,r", [a, b, members], dtype=(tl.float32, tl.float32), is_pure=False, pack=1)


@triton.jit
def _zero_and_arrive():
    tl.inline_asm_elementwise(
        """.shared .align 16 .b64 tf_team_slots[16];
        {
        .reg .u32 tid, at;
        .reg .pred zero;
        mov.u32 tid, %tid.x;
        setp.lt.u32 zero, tid, 16;
        mov.u32 at, tf_team_slots;
        mad.lo.u32 at, tid, 8, at;
        @zero st.shared.b64 [at], 0;
        barrier.cluster.arrive.release.aligned;
        mov.u32 $0, 0;
        }""", "=r", [], dtype=tl.int32, is_pure=False, pack=1)


@triton.jit
def _polled_sums(a, b, members):
    return tl.inline_asm_elementwise(
        """{
        .reg .u32 base, mine, rem, rank, tid, r, off;
        .reg .u64 wa, wb, v;
        .reg .pred lead, in, go;
        .reg .f32 x;
        .reg .b32 lo, hi;
        mov.u32 base, tf_team_slots;
        mov.u32 rank, %cluster_ctarank;
        mov.u32 tid, %tid.x;
        setp.eq.u32 lead, tid, 0;
        mad.lo.u32 mine, rank, 16, base;
        mov.b32 hi, 1;
        mov.b64 wa, {$2, hi};
        mov.b64 wb, {$3, hi};
        barrier.cluster.wait.acquire.aligned;
        mov.u32 r, 0;
        tf_push:
        @lead mapa.shared::cluster.u32 rem, mine, r;
        @lead st.shared::cluster.b64 [rem], wa;
        @lead st.shared::cluster.b64 [rem+8], wb;
        add.u32 r, r, 1;
        setp.lt.u32 go, r, $4;
        @go bra tf_push;
        mov.f32 $0, 0f00000000;
        mov.f32 $1, 0f00000000;
        mov.u32 r, 0;
        mov.u32 off, base;
        tf_poll:
        ld.volatile.shared.b64 v, [off];
        mov.b64 {lo, hi}, v;
        setp.eq.u32 in, hi, 0;
        @in bra tf_poll;
        mov.b32 x, lo;
        add.f32 $0, $0, x;
        tf_poll_b:
        ld.volatile.shared.b64 v, [off+8];
        mov.b64 {lo, hi}, v;
        setp.eq.u32 in, hi, 0;
        @in bra tf_poll_b;
        mov.b32 x, lo;
        add.f32 $1, $1, x;
        add.u32 off, off, 16;
        add.u32 r, r, 1;
        setp.lt.u32 go, r, $4;
        @go bra tf_poll;
        }""",
        "=f,=f,f,f,r", [a, b, members], dtype=(tl.float32, tl.float32), is_pure=False, pack=1)


@triton.jit
def _barrier_only(a, b, members):
    # probe: the cluster barrier alone (own sums: wrong output)
    return tl.inline_asm_elementwise(
        """{
        barrier.cluster.wait.aligned;
        barrier.cluster.arrive.release.aligned;
        barrier.cluster.wait.acquire.aligned;
        mov.f32 $0, $2;
        mov.f32 $1, $3;
        }""", "=f,=f,f,f,r", [a, b, members], dtype=(tl.float32, tl.float32), is_pure=False, pack=1)


@triton.jit
def _stores_only(a, b, members):
    # probe: the pushes with no barrier after them (wrong output; nobody waits to read)
    return tl.inline_asm_elementwise(
        """{
        .shared .align 16 .b32 team_sums[16];
        .reg .u32 base, mine, rem, rank, tid, r;
        .reg .pred lead, go;
        mov.u32 base, team_sums;
        mov.u32 rank, %cluster_ctarank;
        mov.u32 tid, %tid.x;
        setp.eq.u32 lead, tid, 0;
        mad.lo.u32 mine, rank, 8, base;
        barrier.cluster.wait.aligned;
        mov.u32 r, 0;
        tf_push:
        @lead mapa.shared::cluster.u32 rem, mine, r;
        @lead st.shared::cluster.v2.f32 [rem], {$2, $3};
        add.u32 r, r, 1;
        setp.lt.u32 go, r, $4;
        @go bra tf_push;
        mov.f32 $0, $2;
        mov.f32 $1, $3;
        }""", "=f,=f,f,f,r", [a, b, members], dtype=(tl.float32, tl.float32), is_pure=False, pack=1)


@triton.jit
def _parallel_push(a, b, members):
    # probe: thread r pushes to member r (all stores in flight at once)
    return tl.inline_asm_elementwise(
        """{
        .shared .align 16 .b32 team_sums[16];
        .reg .u32 base, mine, rem, rank, tid;
        .reg .pred pusher, in;
        .reg .f32 x, y;
        mov.u32 base, team_sums;
        mov.u32 rank, %cluster_ctarank;
        mov.u32 tid, %tid.x;
        setp.lt.u32 pusher, tid, $4;
        mad.lo.u32 mine, rank, 8, base;
        barrier.cluster.wait.aligned;
        @pusher mapa.shared::cluster.u32 rem, mine, tid;
        @pusher st.shared::cluster.v2.f32 [rem], {$2, $3};
        barrier.cluster.arrive.release.aligned;
        barrier.cluster.wait.acquire.aligned;
        ld.shared.v2.f32 {$0, $1}, [base];
        setp.gt.u32 in, $4, 1; @in ld.shared.v2.f32 {x, y}, [base+8];
        @in add.f32 $0, $0, x; @in add.f32 $1, $1, y;
        setp.gt.u32 in, $4, 2; @in ld.shared.v2.f32 {x, y}, [base+16];
        @in add.f32 $0, $0, x; @in add.f32 $1, $1, y;
        setp.gt.u32 in, $4, 3; @in ld.shared.v2.f32 {x, y}, [base+24];
        @in add.f32 $0, $0, x; @in add.f32 $1, $1, y;
        setp.gt.u32 in, $4, 4; @in ld.shared.v2.f32 {x, y}, [base+32];
        @in add.f32 $0, $0, x; @in add.f32 $1, $1, y;
        setp.gt.u32 in, $4, 5; @in ld.shared.v2.f32 {x, y}, [base+40];
        @in add.f32 $0, $0, x; @in add.f32 $1, $1, y;
        setp.gt.u32 in, $4, 6; @in ld.shared.v2.f32 {x, y}, [base+48];
        @in add.f32 $0, $0, x; @in add.f32 $1, $1, y;
        setp.gt.u32 in, $4, 7; @in ld.shared.v2.f32 {x, y}, [base+56];
        @in add.f32 $0, $0, x; @in add.f32 $1, $1, y;
        }""", "=f,=f,f,f,r", [a, b, members], dtype=(tl.float32, tl.float32), is_pure=False, pack=1)


@triton.jit
def _pull(a, b, members):
    # probe: each member stores its sums locally, one barrier, then reads every member's remotely; its
    # shared memory must outlive the others' reads, so it arrives again here and waits at its very end
    return tl.inline_asm_elementwise(
        """{
        .shared .align 16 .b32 own_sums[2];
        .reg .u32 base, rem, tid;
        .reg .pred lead, in;
        .reg .f32 x, y;
        mov.u32 base, own_sums;
        mov.u32 tid, %tid.x;
        setp.eq.u32 lead, tid, 0;
        barrier.cluster.wait.aligned;
        @lead st.shared.v2.f32 [base], {$2, $3};
        barrier.cluster.arrive.release.aligned;
        barrier.cluster.wait.acquire.aligned;
        mapa.shared::cluster.u32 rem, base, 0;
        ld.shared::cluster.v2.f32 {$0, $1}, [rem];
        setp.gt.u32 in, $4, 1; @in mapa.shared::cluster.u32 rem, base, 1; @in ld.shared::cluster.v2.f32 {x, y}, [rem];
        @in add.f32 $0, $0, x; @in add.f32 $1, $1, y;
        setp.gt.u32 in, $4, 2; @in mapa.shared::cluster.u32 rem, base, 2; @in ld.shared::cluster.v2.f32 {x, y}, [rem];
        @in add.f32 $0, $0, x; @in add.f32 $1, $1, y;
        setp.gt.u32 in, $4, 3; @in mapa.shared::cluster.u32 rem, base, 3; @in ld.shared::cluster.v2.f32 {x, y}, [rem];
        @in add.f32 $0, $0, x; @in add.f32 $1, $1, y;
        setp.gt.u32 in, $4, 4; @in mapa.shared::cluster.u32 rem, base, 4; @in ld.shared::cluster.v2.f32 {x, y}, [rem];
        @in add.f32 $0, $0, x; @in add.f32 $1, $1, y;
        setp.gt.u32 in, $4, 5; @in mapa.shared::cluster.u32 rem, base, 5; @in ld.shared::cluster.v2.f32 {x, y}, [rem];
        @in add.f32 $0, $0, x; @in add.f32 $1, $1, y;
        setp.gt.u32 in, $4, 6; @in mapa.shared::cluster.u32 rem, base, 6; @in ld.shared::cluster.v2.f32 {x, y}, [rem];
        @in add.f32 $0, $0, x; @in add.f32 $1, $1, y;
        setp.gt.u32 in, $4, 7; @in mapa.shared::cluster.u32 rem, base, 7; @in ld.shared::cluster.v2.f32 {x, y}, [rem];
        @in add.f32 $0, $0, x; @in add.f32 $1, $1, y;
        barrier.cluster.arrive.relaxed.aligned;
        }""", "=f,=f,f,f,r", [a, b, members], dtype=(tl.float32, tl.float32), is_pure=False, pack=1)


@triton.jit
def _cluster_wait_end(x):
    tl.inline_asm_elementwise("barrier.cluster.wait.aligned; mov.u32 $0, 0;", "=r", [], dtype=tl.int32,
                              is_pure=False, pack=1)


@triton.jit
def group_norm_cluster_kernel(input_ptr, skip_ptr, bias_ptr, output_ptr, add_out_ptr, gamma_ptr, beta_ptr,
                              img_size, c, c_per_group, eps, has_skip, has_bias, broadcast_skip,
                              VECTORS: tl.constexpr, TAIL: tl.constexpr, VEC: tl.constexpr, PARTS: tl.constexpr,
                              ACTIVATION_SILU: tl.constexpr, SYNC: tl.constexpr):
    if SYNC == 1 or (SYNC >= 3 and SYNC < 8):
        _cluster_arrive()
    if SYNC == 8:
        _cluster_start(PARTS)
    if SYNC == 2:
        _zero_and_arrive()
    image = tl.program_id(0).to(tl.int64)
    group = tl.program_id(1)
    part = tl.program_id(2)
    per_pixel = c_per_group // VEC
    cpg = per_pixel * VEC
    c_vec = (c // VEC) * VEC
    mine, in_ptr, sk_ptr, add_ptr, out_ptr = _member(input_ptr, skip_ptr, add_out_ptr, output_ptr, image, part,
                                                     img_size, c_vec, broadcast_skip, PARTS)
    x, gamma, beta, offs, mask = _vectors(in_ptr, sk_ptr, bias_ptr, add_ptr, gamma_ptr, beta_ptr, 0, group, mine,
                                          c_vec, cpg, per_pixel, has_skip, has_bias, broadcast_skip, 0, VECTORS,
                                          VEC)
    if TAIL > 0:
        x2, gamma2, beta2, offs2, mask2 = _vectors(in_ptr, sk_ptr, bias_ptr, add_ptr, gamma_ptr, beta_ptr, 0, group,
                                                   mine, c_vec, cpg, per_pixel, has_skip, has_bias, broadcast_skip,
                                                   VECTORS, TAIL, VEC)
    total, total_sq = _sums(x)
    if TAIL > 0:
        total, total_sq = _add2(total, total_sq, *_sums(x2))
    if SYNC == 1:
        total, total_sq = _cluster_sums(total, total_sq, PARTS)
    if SYNC == 2:
        total, total_sq = _polled_sums(total, total_sq, PARTS)
    if SYNC == 3:
        total, total_sq = _barrier_only(total, total_sq, PARTS)
    if SYNC == 4:
        total, total_sq = _stores_only(total, total_sq, PARTS)
    if SYNC == 5:
        total, total_sq = _parallel_push(total, total_sq, PARTS)
    if SYNC == 7:
        total, total_sq = _pull(total, total_sq, PARTS)
    if SYNC == 8:
        total, total_sq = _async_push(total, total_sq, PARTS)
    mean, rstd = _mean_rstd(total, total_sq, img_size * c_per_group, eps)
    _write(x, gamma, beta, offs, mask, mean, rstd, out_ptr, ACTIVATION_SILU)
    if TAIL > 0:
        _write(x2, gamma2, beta2, offs2, mask2, mean, rstd, out_ptr, ACTIVATION_SILU)
    if SYNC == 7:
        _cluster_wait_end(0)


DTYPES = ("fp32", "fp16", "bf16")
MAX_PARTS = 8  # the largest portable cluster (and the slots _cluster_sums adds up)


def cluster_variants(dtype: str) -> list[tuple[int, int, int, int, int]]:
    """(PARTS, VEC, VECTORS, TAIL, num_warps): the cooperative teams' shapes, up to 8 members."""
    return [v for v in part_variants(dtype) if v[0] <= MAX_PARTS]


# The modes of the last build (runs 9 and 10 had S0, PlainS0, S1, S3, S5, S7 and S8 between them).
MODES = (("ClusterS0", 0, True), ("PlainS0", 0, False), ("ClusterS1", 1, True), ("ClusterS3", 3, True),
         ("ClusterS5", 5, True), ("ClusterS8", 8, True))


def get_function_table():
    table = []
    for silu in (True, False):
        act = "Silu" if silu else "Pass"
        for dtype in DTYPES:
            for parts, vec, vectors, tail, warps in cluster_variants(dtype):
                if parts == 2 or vec != 4:
                    continue
                for mode, sync, _ in MODES:
                    table.append({
                        "name": f"GroupNorm{mode}_{act}_{dtype}_p{parts}_v{vec}_e{(vectors + tail) * vec}_w{warps}",
                        "group": f"GroupNorm{mode}_{act}_{dtype}",
                        "func": group_norm_cluster_kernel,
                        "sig": SIG.format(t=dtype),
                        "kwargs": {"num_warps": warps, "constants": {"VECTORS": vectors, "TAIL": tail, "VEC": vec,
                                                                     "PARTS": parts, "ACTIVATION_SILU": int(silu),
                                                                     "SYNC": sync}},
                    })
    return table


def get_launch_contracts():
    member = "cdiv(hw, PARTS) * (c_per_group // VEC)"
    contract = {
        "params": ["in", "skip", "bias", "out", "add_out", "gamma", "beta", "hw", "c", "c_per_group", "eps",
                   "has_skip", "has_bias", "broadcast_skip"],
        "grid": ["n", "groups", "PARTS"],
        "cluster": ["1", "1", "PARTS"],
        "requires": ["c_per_group % VEC == 0", f"{member} <= VECTORS + TAIL", f"2 * {member} > VECTORS + TAIL",
                     "ACTIVATION_SILU == silu"],
    }
    plain = {k: v for k, v in contract.items() if k != "cluster"}
    return {f"GroupNorm{mode}_{act}_{dt}": (contract if clu else plain) for mode, _, clu in MODES
            for act in ("Silu", "Pass") for dt in DTYPES}
