"""Rendezvous of the programs of a cooperative kernel: a counter in global memory per team.

A team is the set of programs that share partial results (the parts of one softmax row, the tiles
of one GroupNorm image). Each publishes its partials, then `arrive_and_wait` until every member
has; after reading everyone's partials, `depart` counts it out again. The last member out gets
True and resets the counter (and any accumulators it owns) to zero, so the workspace is zero again
when the kernel ends and the next launch needs no memset.

Waiting is only safe when every member is resident at once: kernels that use this are launched
cooperatively (the driver refuses a grid that does not fit) and their contracts say so.
"""

import triton
import triton.language as tl


@triton.jit
def arrive_and_wait(counter_ptr, members):
    # The CTA barrier orders every thread's stores before the release that publishes them.
    tl.debug_barrier()
    count = tl.atomic_add(counter_ptr, 1, sem="acq_rel", scope="gpu") + 1
    while count < members:
        count = tl.atomic_add(counter_ptr, 0, sem="acquire", scope="gpu")
    tl.debug_barrier()


@triton.jit
def depart(counter_ptr, members):
    """Count this program out after it has read the team's partials; True in the last one out."""
    tl.debug_barrier()
    old = tl.atomic_add(counter_ptr, 1, sem="acq_rel", scope="gpu")
    return old == 2 * members - 1


@triton.jit
def team_sums(line_ptr, member, a, b, MEMBERS: tl.constexpr):
    """Sum two fp32 values over a small team (every member resident) at the cost of two stores and a
    poll: no counter on the way in, no fence. Member m writes (1 << 32 | bits) words to slots 2m and
    2m + 1 of its team's line (int64 slots after a counter in word 0): a 64-bit store is seen whole, so
    a nonzero tag means the value beside it has landed. Sums run in member order (the same result
    whoever arrives last). The last member to count out zeroes the line for the next launch."""
    tl.static_assert(2 * MEMBERS <= 56, "a team line holds up to 28 members")
    slots = line_ptr.to(tl.pointer_type(tl.int64), bitcast=True) + 8
    tag = 1 << 32
    tl.store(slots + 2 * member, a.to(tl.uint32, bitcast=True).to(tl.int64) | tag)
    tl.store(slots + 2 * member + 1, b.to(tl.uint32, bitcast=True).to(tl.int64) | tag)
    words = tl.arange(0, 2 * MEMBERS)
    seen = tl.load(slots + words, volatile=True)
    while tl.min((seen >> 32).to(tl.int32), 0) == 0:
        seen = tl.load(slots + words, volatile=True)
    values = (seen & 0xFFFFFFFF).to(tl.uint32).to(tl.float32, bitcast=True)
    total_a = tl.sum(tl.where(words % 2 == 0, values, 0.0), 0)
    total_b = tl.sum(tl.where(words % 2 == 1, values, 0.0), 0)
    # Counted out only after its values were read: the last one knows nobody reads the slots again.
    if tl.atomic_add(line_ptr, 1, sem="relaxed", scope="gpu") == MEMBERS - 1:
        tl.store(slots + words, tl.zeros([2 * MEMBERS], tl.int64))
        tl.atomic_xchg(line_ptr, 0, sem="relaxed", scope="gpu")
    return total_a, total_b
