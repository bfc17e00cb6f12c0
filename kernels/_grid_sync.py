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
