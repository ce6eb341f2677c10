"""``ndo_rx_flow_steer`` of the modelled drivers (ice_arfs.c ``ice_rx_flow_steer``, en_arfs.c
``mlx5e_rx_flow_steer``).

- ``ice-hash-match``: ice before "net: ice: Perform accurate aRFS flow match" (2025):
  an existing entry in the raw-hash bucket matches on ``flow_id`` alone, so a new flow
  colliding with another is taken for it and re-points the other flow's filter.
- ``ice-tuple-match``: after the fix: the entry must also match the full 5-tuple.
- ``mlx5``: full tuple match in 4 tables x 256 buckets keyed by the ports.
Filters are programmed later by the service task / work item, a kworker on the CPU
that queued it (``rxlab.nic.arfs``).

Both drivers do the call's bucket walk, update or new entry and ``queue_work`` under
one lock per device (ice: ``spin_lock_bh(&vsi->arfs_lock)``, one per PF VSI; mlx5:
``spin_lock_bh(&arfs->arfs_lock)``), taken by every CPU whose softirq mis-steers, by
the ice service task for its whole walk (``ice_sync_arfs_fltrs``) and by each mlx5 work
item's expiry scan (``arfs_may_expire_flow``). ``arfs_lock`` models
it as a FIFO server: a caller spins until the lock is free, then holds it for its own
work; the hand-off itself costs nothing.
"""

import numpy as np
from numba import njit

from rxlab.config import JIT_STATE
from rxlab.engine.core import PRIO_TIMER, schedule
from rxlab.kernel.events import EV_ARFS_SVC
from rxlab.kernel.sched_states import SVC_IDLE, SVC_QUEUED
from rxlab.kernel.state import (
    ARFS_ACTIVE,
    ARFS_ICE_TUPLE_MATCH,
    ARFS_INACTIVE,
    ARFS_MLX5,
    ARFS_OFF,
)

ICE_ARFS_LST_MASK = 1023  # ICE_MAX_ARFS_LIST - 1
MLX5_ARFS_HASH = 256  # ARFS_HASH_SIZE buckets per table


@njit(**JIT_STATE)
def arfs_bucket(s, f, skb_hash):
    p = s.p
    if p.arfs_model == ARFS_MLX5:
        # mlx5: l = sport | (dport << 2) on the __be16 values (byte-swapped on LE),
        # hash_long(l, 8) on 64-bit: (l * GOLDEN_RATIO_64) >> 56
        sp = ((p.flow[f].flow_sport & 0xFF) << 8) | (p.flow[f].flow_sport >> 8)
        dp = ((p.flow[f].flow_dport & 0xFF) << 8) | (p.flow[f].flow_dport >> 8)
        l_ = np.uint64(sp | (dp << 2))
        h = (l_ * np.uint64(0x61C8864680B583EB)) >> np.uint64(56)
        return p.flow[f].flow_tt * MLX5_ARFS_HASH + np.int64(h)
    return skb_hash & ICE_ARFS_LST_MASK  # skb_get_hash_raw(skb) & ICE_ARFS_LST_MASK


@njit(**JIT_STATE)
def arfs_lock(s, t, hold):
    """``spin_lock_bh`` at t, then ``hold`` ns of work under the lock: returns the ns spent
    spinning (the lock is taken at t + wait and released at t + wait + hold).

    Callers take it in the order the model computes them, which is time order except
    across CPUs: a softirq segment is computed whole at its start, so a call computed
    later can come earlier in time than the latest hold. Such a call takes the lock
    without waiting when its hold fits in the time the lock is known free before that
    hold (``[lock_prev, lock_lo)``); otherwise it waits behind it. Holds never overlap."""
    g = s.ar.glob[0]
    if t >= g.lock_free:
        g.lock_prev = g.lock_free
        g.lock_lo = t
        g.lock_free = t + hold
        return np.int64(0)
    if t >= g.lock_prev and t + hold <= g.lock_lo:
        g.lock_prev = t + hold  # the free time before the latest hold now starts here
        return np.int64(0)
    wait = g.lock_free - t
    s.ar.cnt[0].arfs_lock_contended += 1
    g.lock_prev = g.lock_free
    g.lock_lo = g.lock_free
    g.lock_free += hold
    return wait


@njit(**JIT_STATE)
def queue_service(s, c, t):
    """``queue_work`` from CPU c (ice_service_task_schedule / mlx5 arfs queue_work): a
    no-op while the work is queued or running; else its kworker on c wakes later."""
    g = s.ar.glob[0]
    if g.svc_pending == SVC_IDLE:
        g.svc_pending = SVC_QUEUED
        g.svc_cpu = c
        schedule(s.ev, t + s.p.arfs_delay_ns, PRIO_TIMER, EV_ARFS_SVC, c)


@njit(**JIT_STATE)
def arfs_kick_service(s, e, c, t):
    """Entry e needs writing: on the pending list, and the work queued from CPU c."""
    ar = s.ar
    if ar.entry[e].pend == 0:
        ar.entry[e].pend = 1
        ar.pend[ar.glob[0].pend_n] = e
        ar.glob[0].pend_n += 1
    queue_service(s, c, t)


@njit(**JIT_STATE)
def ndo_rx_flow_steer(s, f, skb_hash, rxq, flow_id, c, t):
    """Called on CPU c (the softirq that mis-steered); returns the filter id (>= 0), or
    -1 (no memory)."""
    p, ar = s.p, s.ar
    b = arfs_bucket(s, f, skb_hash)
    e = ar.bucket[b]
    avoided = False
    while e >= 0:
        if p.arfs_model == ARFS_MLX5:
            hit = ar.entry[e].flow == f  # arfs_cmp: ports, EtherType, addresses
        else:
            hit = ar.entry[e].flow_id == flow_id
            if hit and p.arfs_model == ARFS_ICE_TUPLE_MATCH and ar.entry[e].flow != f:
                hit = False  # ice_arfs_cmp refuses another flow's entry
                avoided = True
        if hit:
            if avoided:
                ar.cnt[0].arfs_avoided += 1
            # ice: same queue or not yet ACTIVE; mlx5: same queue or its work item is
            # still pending (work_busy): return the filter id unchanged
            if p.arfs_model == ARFS_MLX5:
                busy = ar.entry[e].pend != 0
            else:
                busy = ar.entry[e].state != ARFS_ACTIVE
            if ar.entry[e].q == rxq or busy:
                ar.cnt[0].arfs_skip += 1
                return ar.entry[e].fltr_id
            ar.entry[e].q = rxq
            if ar.entry[e].state == ARFS_ACTIVE:
                ar.entry[e].state = ARFS_INACTIVE  # reprogram with the new queue
            ar.cnt[0].arfs_update += 1
            arfs_kick_service(s, e, c, t)
            return ar.entry[e].fltr_id
        e = ar.entry[e].next
    if avoided:
        ar.cnt[0].arfs_avoided += 1
    if ar.glob[0].free_n == 0:
        ar.cnt[0].arfs_no_memory += 1
        return -1
    ar.glob[0].free_n -= 1
    e = ar.free[ar.glob[0].free_n]
    if p.arfs_model == ARFS_MLX5:
        fid = ar.glob[0].last_fltr_id % 0xFFFF  # last_filter_id++ % 0xffff, from 0
    else:
        fid = (ar.glob[0].last_fltr_id + 1) % 0xFFFF  # ++arfs_last_fltr_id % 0xffff, from 1
    ar.glob[0].last_fltr_id += 1
    ar.entry[e].flow = f
    ar.entry[e].flow_id = flow_id
    ar.entry[e].fltr_id = fid
    ar.entry[e].q = rxq
    ar.entry[e].state = ARFS_INACTIVE
    ar.entry[e].time = t
    ar.entry[e].next = ar.bucket[b]  # insert at the head of the bucket
    ar.bucket[b] = e
    ar.cnt[0].arfs_add += 1
    arfs_kick_service(s, e, c, t)
    return fid

@njit(**JIT_STATE)
def flow_rx_queue(s, f):
    """The rx queue flow f reaches now: RSS's, unless an aRFS filter for its 5-tuple
    overrides it."""
    q = s.p.flow[f].flow_rxq
    if s.p.arfs_model != ARFS_OFF and s.ar.fdir_queue[f] >= 0:
        q = s.ar.fdir_queue[f]
    return q
