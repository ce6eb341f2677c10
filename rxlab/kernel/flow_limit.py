"""Flow limit: ``skb_flow_limit()`` in net/core/dev.c.

The table consulted is the *enqueuing* CPU's, while ``qlen`` is the *target* CPU's
input_pkt_queue length; ``flow_limit_count`` therefore lands on the enqueuing CPU and
the drop itself on the target's ``dropped`` column (the caller counts that).
"""

from numba import njit

from rxlab.config import JIT_STATE
from rxlab.kernel.hashfn import hash_32


@njit(**JIT_STATE)
def flow_limit_bucket(s, skb_hash):
    """Bucket of a flow: hash_32(hash, log) since v6.16, hash & (len - 1) before."""
    p = s.p
    if p.fl_hash32:
        return hash_32(skb_hash, p.fl_log)
    return skb_hash & ((1 << p.fl_log) - 1)


@njit(**JIT_STATE)
def skb_flow_limit(s, this_cpu, skb_hash, qlen):
    """True if the packet must be dropped. Mirrors skb_flow_limit() (6.19)."""
    p, sd = s.p, s.sd
    # fast path: no accounting while the target queue is under half of max_backlog
    if qlen < (p.max_backlog >> 1):
        return False
    if not sd.cpu[this_cpu].fl_on:
        return False
    new_flow = flow_limit_bucket(s, skb_hash)
    head = sd.cpu[this_cpu].fl_head
    old_flow = sd.fl_history[this_cpu, head]
    sd.fl_history[this_cpu, head] = new_flow
    sd.cpu[this_cpu].fl_head = (head + 1) & (p.fl_history - 1)
    if sd.fl_buckets[this_cpu, old_flow] > 0:
        sd.fl_buckets[this_cpu, old_flow] -= 1
    sd.fl_buckets[this_cpu, new_flow] += 1
    # drop once the flow holds more than half of the recent history
    if sd.fl_buckets[this_cpu, new_flow] > (p.fl_history >> 1):
        sd.cpu[this_cpu].flow_limit_count += 1
        return True
    return False
