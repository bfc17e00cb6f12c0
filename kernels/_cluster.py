"""A thread-block cluster's members (sm_90+) swap two fp32 values each through their shared memories.

Every member has a mailbox: 8 slots of two fp32 values (16 in clusters of more than 8, which are
non-portable: the launch must allow them) and an mbarrier. `cluster_start` readies it as
the program starts. At the exchange, thread r of each member pushes the member's pair into its slot of
member r's mailbox with `st.async`, which counts the 8 bytes on member r's mbarrier; each member then
waits on its own mbarrier until all the cluster's pushes have landed. Every member reads the same slots,
so whatever it computes from them in rank order has the same bits in all of them.

A program may write into another's shared memory only once that one runs and has set up its mbarrier:
`cluster_start` arrives on the cluster barrier after the set-up, and the exchange waits on that barrier
just before pushing. By then every member has long started, and the wait costs nothing.

One exchange per launch: the mbarrier's phase 0 is the only one waited on. Inline PTX: CUDA only.
"""

import triton
import triton.language as tl

PORTABLE = tl.constexpr(8)  # the largest cluster every sm_90+ device launches
MAX_MEMBERS = 16  # the largest an H100/H200 launches, once the function allows non-portable sizes

# The mailbox (8 or 16 slots of two fp32) and its mbarrier, declared at the kernel's scope.
_START = """.shared .align 8 .b64 tf_team_mbar;
        .shared .align 16 .b32 tf_team_sums[SLOTS];
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
        }"""
_START_8 = tl.constexpr(_START.replace("SLOTS", "16"))
_START_16 = tl.constexpr(_START.replace("SLOTS", "32"))

# Push this program's pair ($a, $b) to every member (thread r pushes to member r), then wait until the
# pairs of all $n members have landed in this program's mailbox (`base`).
_PUSH = """
        .reg .u32 base, slot, remote, remote_mbar, mbar, rank, tid;
        .reg .pred pusher, in, done;
        mov.u32 base, tf_team_sums;
        mov.u32 mbar, tf_team_mbar;
        mov.u32 rank, %cluster_ctarank;
        mov.u32 tid, %tid.x;
        setp.lt.u32 pusher, tid, $n;
        mad.lo.u32 slot, rank, 8, base;
        barrier.cluster.wait.aligned;
        @pusher mapa.shared::cluster.u32 remote, slot, tid;
        @pusher mapa.shared::cluster.u32 remote_mbar, mbar, tid;
        @pusher st.async.shared::cluster.mbarrier::complete_tx::bytes.v2.f32 [remote], {$a, $b}, [remote_mbar];
        tf_team_wait:
        mbarrier.try_wait.parity.shared::cta.b64 done, [mbar], 0;
        @!done bra tf_team_wait;
"""
_PUSH_2 = _PUSH.replace("$n", "$4").replace("$a", "$2").replace("$b", "$3")  # outputs $0, $1

# Slot k, added to ($0, $1) when member k exists.
_ADD_SLOTS = "".join(f"""
        setp.gt.u32 in, $4, {k}; @in ld.shared.v2.f32 {{x, y}}, [base+{8 * k}];
        @in add.f32 $0, $0, x; @in add.f32 $1, $1, y;""" for k in range(1, 8))
_SUMS = tl.constexpr("{\n        .reg .f32 x, y;" + _PUSH_2 + "        ld.shared.v2.f32 {$0, $1}, [base];"
                     + _ADD_SLOTS + "\n        }")

# The largest first slot ($0 = M), then the sum over slots (m, s) of s * 2^((m - M) * log2(e)), slots
# with m = -inf left out (so an all -inf row gives M = -inf, sum 0, not NaN).
_MAX_SLOTS = "".join(f"""
        setp.gt.u32 in, $4, {k}; @in ld.shared.f32 x, [base+{8 * k}]; @in max.f32 $0, $0, x;""" for k in
                     range(1, MAX_MEMBERS))
_SCALED_SLOTS = "".join(f"""
        setp.gt.u32 in, $4, {k}; @in ld.shared.v2.f32 {{x, y}}, [base+{8 * k}];
        setp.gt.and.f32 live, x, 0fFF800000, in;
        @live sub.f32 x, x, $0; @live mul.f32 x, x, 0f3FB8AA3B; @live ex2.approx.ftz.f32 x, x;
        @live fma.rn.f32 $1, x, y, $1;""" for k in range(MAX_MEMBERS))
_MAX_SUM = tl.constexpr("{\n        .reg .f32 x, y;\n        .reg .pred live;" + _PUSH_2
                        + "        ld.shared.f32 $0, [base];" + _MAX_SLOTS + "\n        mov.f32 $1, 0f00000000;"
                        + _SCALED_SLOTS + "\n        }")


@triton.jit
def cluster_start(MEMBERS: tl.constexpr):
    """Thread 0 readies this program's mailbox: an mbarrier whose phase 0 completes once MEMBERS
    8-byte pushes have landed. Then every thread arrives on the cluster barrier: this program has
    started and its mailbox may be written."""
    if MEMBERS > PORTABLE:
        tl.inline_asm_elementwise(_START_16, "=r,r", [MEMBERS], dtype=tl.int32, is_pure=False, pack=1)
    else:
        tl.inline_asm_elementwise(_START_8, "=r,r", [MEMBERS], dtype=tl.int32, is_pure=False, pack=1)


@triton.jit
def cluster_sums(a, b, members):
    """(sum of a, sum of b) over the cluster's `members` programs (at most 8), in rank order."""
    return tl.inline_asm_elementwise(_SUMS, "=f,=f,f,f,r", [a, b, members], dtype=(tl.float32, tl.float32),
                                     is_pure=False, pack=1)


@triton.jit
def cluster_max_sum(m, s, members):
    """Softmax statistics of a row spread over the cluster's `members` programs: from each
    member's max m and sum s of exp(x - m), the row's max and sum of exp(x - max), in rank order (up to
    16 members)."""
    return tl.inline_asm_elementwise(_MAX_SUM, "=f,=f,f,f,r", [m, s, members], dtype=(tl.float32, tl.float32),
                                     is_pure=False, pack=1)
