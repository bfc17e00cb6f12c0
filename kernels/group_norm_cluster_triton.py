"""GroupNorm of small NHWC images by a team of programs that add up their sums in shared memory.

`GroupNormParts` (group_norm_whole_triton.py) splits an (image, group) over a team of PARTS programs,
each holding cdiv(H*W, PARTS) pixels, and the team adds up its two sums through a line in global
memory: a store and a poll through L2, about 1 us on an H200, plus a cooperative launch. Here the team
is a thread-block cluster (sm_90+) and the sums travel between the members' shared memories: thread r
of each member pushes the member's two sums into its slot of member r's mailbox with `st.async`, which
also counts the 8 bytes on member r's mbarrier; each member waits on its own mbarrier until all PARTS
pushes have landed and adds the slots up in rank order (the same bits in every member). A plain launch
with a cluster dimension, no workspace: the hardware schedules a cluster's programs together.

A program may only write into another's shared memory once that program runs and has set up its
mbarrier, so each member does that and arrives on the cluster barrier as it starts, and waits on the
barrier just before pushing: by then every member has long started, and the wait costs nothing.

What the exchange costs on an H200 (fp16, 2 x 16x16 x 640, best of each way; the same kernel with no
exchange at all takes 3.03 us): these pushes 3.33 us; pushes with `st.shared::cluster` and a cluster
barrier to publish them 3.71 us (the barrier alone 3.50 us); GroupNormParts' global line 4.34 us.

Group `GroupNormCluster_{Silu|Pass}_<dtype>`: ORT's 14 arguments, grid (n, groups, PARTS) in
clusters of (1, 1, PARTS); the launch must carry the cluster dimension (runtime/cuda.py), which ORT's
launcher does not do, so ORT's own groups never list these kernels. Inline PTX: CUDA only, sm_90+.
"""

import triton
import triton.language as tl
from group_norm_whole_triton import SIG, _add2, _mean_rstd, _member, _sums, _vectors, _write, part_variants

PLATFORMS = ("cuda",)  # inline PTX
MIN_SM = 90  # thread-block clusters and distributed shared memory


@triton.jit
def _cluster_start(members):
    """Thread 0 readies this program's mailbox: an mbarrier whose phase 0 completes once `members`
    8-byte pushes have landed. Then every thread arrives on the cluster barrier: this program has
    started and its mailbox may be written (`_cluster_sums` waits on that before pushing)."""
    tl.inline_asm_elementwise(
        """.shared .align 8 .b64 tf_team_mbar;
        .shared .align 16 .b32 tf_team_sums[16];
        {
        .reg .u32 tid, mbar, bytes;
        .reg .pred lead;
        .reg .b64 state;
        mov.u32 tid, %tid.x;
        setp.eq.u32 lead, tid, 0;
        mov.u32 mbar, tf_team_mbar;
        shl.b32 bytes, $1, 3;
        @lead mbarrier.init.shared::cta.b64 [mbar], 1;
        @lead mbarrier.arrive.expect_tx.shared::cta.b64 state, [mbar], bytes;
        @lead fence.mbarrier_init.release.cluster;
        barrier.cluster.arrive.relaxed.aligned;
        mov.u32 $0, 0;
        }""", "=r,r", [members], dtype=tl.int32, is_pure=False, pack=1)


@triton.jit
def _cluster_sums(a, b, members):
    """(sum of a, sum of b) over the cluster's `members` programs (at most 8), in rank order. Thread r
    of each program pushes its two values into slot `rank` of member r's mailbox (`st.async`, counted
    by member r's mbarrier); then every thread waits on its own mbarrier and adds the slots up."""
    return tl.inline_asm_elementwise(
        """{
        .reg .u32 base, slot, remote, remote_mbar, mbar, rank, tid;
        .reg .pred pusher, in, done;
        .reg .f32 x, y;
        mov.u32 base, tf_team_sums;
        mov.u32 mbar, tf_team_mbar;
        mov.u32 rank, %cluster_ctarank;
        mov.u32 tid, %tid.x;
        setp.lt.u32 pusher, tid, $4;
        mad.lo.u32 slot, rank, 8, base;
        barrier.cluster.wait.aligned;
        @pusher mapa.shared::cluster.u32 remote, slot, tid;
        @pusher mapa.shared::cluster.u32 remote_mbar, mbar, tid;
        @pusher st.async.shared::cluster.mbarrier::complete_tx::bytes.v2.f32 [remote], {$2, $3}, [remote_mbar];
        tf_team_wait:
        mbarrier.try_wait.parity.shared::cta.b64 done, [mbar], 0;
        @!done bra tf_team_wait;
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
def group_norm_cluster_kernel(input_ptr, skip_ptr, bias_ptr, output_ptr, add_out_ptr, gamma_ptr, beta_ptr,
                              img_size, c, c_per_group, eps, has_skip, has_bias, broadcast_skip,
                              VECTORS: tl.constexpr, TAIL: tl.constexpr, VEC: tl.constexpr, PARTS: tl.constexpr,
                              ACTIVATION_SILU: tl.constexpr):
    _cluster_start(PARTS)
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
    total, total_sq = _cluster_sums(total, total_sq, PARTS)
    mean, rstd = _mean_rstd(total, total_sq, img_size * c_per_group, eps)
    _write(x, gamma, beta, offs, mask, mean, rstd, out_ptr, ACTIVATION_SILU)
    if TAIL > 0:
        _write(x2, gamma2, beta2, offs2, mask2, mean, rstd, out_ptr, ACTIVATION_SILU)


DTYPES = ("fp32", "fp16", "bf16")
MAX_PARTS = 8  # the largest portable cluster (and the slots _cluster_sums adds up)


def cluster_variants(dtype: str) -> list[tuple[int, int, int, int, int]]:
    """(PARTS, VEC, VECTORS, TAIL, num_warps): the cooperative teams' shapes, up to 8 members."""
    return [v for v in part_variants(dtype) if v[0] <= MAX_PARTS]


def get_function_table():
    table = []
    for silu in (True, False):
        act = "Silu" if silu else "Pass"
        for dtype in DTYPES:
            for parts, vec, vectors, tail, warps in cluster_variants(dtype):
                table.append({
                    "name": f"GroupNormCluster_{act}_{dtype}_p{parts}_v{vec}_e{(vectors + tail) * vec}_w{warps}",
                    "group": f"GroupNormCluster_{act}_{dtype}",
                    "func": group_norm_cluster_kernel,
                    "sig": SIG.format(t=dtype),
                    "kwargs": {"num_warps": warps, "constants": {"VECTORS": vectors, "TAIL": tail, "VEC": vec,
                                                                 "PARTS": parts, "ACTIVATION_SILU": int(silu)}},
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
        "doc": "NHWC; a cluster of PARTS programs per (image, group), each holding cdiv(hw, PARTS) pixels of it as "
               "VEC-channel vectors, sums added up in shared memory; 16-byte aligned pointers",
    }
    return {f"GroupNormCluster_{act}_{dt}": contract for act in ("Silu", "Pass") for dt in DTYPES}
