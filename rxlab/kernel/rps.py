"""RPS CPU choice: ``get_rps_cpu(s,)`` in net/core/dev.c (reference sec. 3.4).

Plain RPS uses the *high* bits of the flow hash (``reciprocal_scale``) over the queue's
``rps_map``; the RSS indirection table uses the low bits, so the two are independent.
The RFS branch (socket flow table, per-queue flow table, the move rule) plugs in here.
"""

from numba import njit

from rxlab.config import JIT_LEAF, JIT_STATE
from rxlab.kernel.hashfn import reciprocal_scale


@njit(**JIT_STATE)
def get_rps_cpu(s, rxq, skb_hash):
    """Target CPU for a packet of hash ``skb_hash`` received on ``rxq``, or -1 (inline)."""
    p = s.p
    n = p.rps_len[rxq]
    if n == 0:
        return -1  # no map on this queue: the hash is not even computed
    if skb_hash == 0:
        return -1
    return p.rps_map[rxq, reciprocal_scale(skb_hash, n)]
