"""skb allocation and release, and the one way a queue of skb ids is read and written.

``alloc_skb`` takes a record from the slab when the NIC fills a descriptor (or a
netif_rx device receives a frame); ``kfree_skb`` (a drop, counted by reason) and
``consume_skb`` (delivered to an application or sent back out) return it. Queues are
rings of ids over storage of a power of two, indexed by free-running positions.
"""

import numpy as np
from numba import njit

from rxlab.config import JIT_HELPER, JIT_STATE
from rxlab.kernel.accounting import drop


@njit(**JIT_STATE)
def alloc_skb(s, f, length, t, seq):
    """A new skb of flow f that reached the NIC at t; returns its id."""
    c = s.skbs
    n = c.free_n[0] - 1
    c.free_n[0] = n
    skb = np.int64(c.free[n])
    rec = c.rec[skb]
    rec.flow = f
    rec.len = length
    rec.tarr = t
    rec.seq = seq
    rec.stamp = t
    rec.hash = s.p.flow[f].flow_hash
    rec.src = -1
    return skb


@njit(**JIT_HELPER)
def consume_skb(s, skb):
    """The packet left the host (delivered, or transmitted by XDP_TX)."""
    c = s.skbs
    c.free[c.free_n[0]] = skb
    c.free_n[0] += 1


@njit(**JIT_HELPER)
def kfree_skb(s, skb, reason, t):
    """The one exit for a dropped skb: freed, and counted by reason."""
    consume_skb(s, skb)
    drop(s, reason, t)


@njit(**JIT_HELPER)
def skb_queue_put(ids, pos, mask, skb):
    """Store skb at free-running position pos of a ring of ids (storage mask + 1)."""
    ids[pos & mask] = skb


@njit(**JIT_HELPER)
def skb_queue_at(ids, pos, mask):
    """The skb id at free-running position pos of a ring of ids."""
    return np.int64(ids[pos & mask])
