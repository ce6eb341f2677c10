"""The driver side that writes aRFS filters to hardware and expires them.

ice: ``ice_sync_arfs_fltrs`` from the service task: INACTIVE entries become ACTIVE
(programmed: the NIC now steers that 5-tuple to the entry's queue); ACTIVE entries whose
``rps_may_expire_flow`` says so (or UDP ones older than 5 s) are deleted. mlx5: the work
item programs the rule, then ``arfs_may_expire_flow`` deletes at most 62 rules per scan.

Simplifications (docs/model.md): programming happens ``arfs_delay_ns`` after the first
request (one run handles every pending entry); the expiry scan runs on a timer of
``nic.arfs.period_s`` (ice: its 1 s service timer) rather than on every service-task or
work-item run.
"""

import numpy as np
from numba import njit

from rxlab.config import JIT_STATE, JIT_STATE_OUTLINE
from rxlab.engine.core import PRIO_TIMER, schedule
from rxlab.kernel.accounting import cost
from rxlab.kernel.events import EV_ARFS_TIMER
from rxlab.kernel.rfs import rps_may_expire_flow
from rxlab.kernel.state import (
    ARFS_ACTIVE,
    ARFS_EXPIRE,
    ARFS_FREE,
    ARFS_HW_FULL,
    ARFS_INACTIVE,
    ARFS_PROGRAMMED,
    C_ARFS_PROGRAM,
)

ICE_ARFS_TIME_DELTA_EXPIRATION_NS = 5_000_000_000  # UDP filters live at most 5 s
MLX5E_ARFS_EXPIRY_QUOTA = 60


@njit(**JIT_STATE)
def _program(s, e):
    ar, p = s.ar, s.p
    f = ar.entry[e].flow
    if ar.fdir_queue[f] < 0:
        if ar.glob[0].hw_count >= p.arfs_capacity:
            ar.cnt[ARFS_HW_FULL] += 1
            return False
        ar.glob[0].hw_count += 1
    ar.fdir_queue[f] = ar.entry[e].q
    ar.cnt[ARFS_PROGRAMMED] += 1
    return True


@njit(**JIT_STATE)
def _delete(s, b, prev, e):
    ar = s.ar
    nxt = ar.entry[e].next
    if prev < 0:
        ar.bucket[b] = nxt
    else:
        ar.entry[prev].next = nxt
    f = ar.entry[e].flow
    if ar.fdir_queue[f] >= 0:
        ar.fdir_queue[f] = -1
        ar.glob[0].hw_count -= 1
    ar.entry[e].state = ARFS_FREE
    ar.free[ar.glob[0].free_n] = e
    ar.glob[0].free_n += 1
    ar.cnt[ARFS_EXPIRE] += 1
    return nxt


@njit(**JIT_STATE)
def _expired(s, e, t):
    ar, p = s.ar, s.p
    if rps_may_expire_flow(s, ar.entry[e].q, ar.entry[e].flow_id,
                           ar.entry[e].fltr_id):
        return True
    return p.arfs_model != 3 and p.flow[ar.entry[e].flow].flow_udp and (
        t - ar.entry[e].time >= ICE_ARFS_TIME_DELTA_EXPIRATION_NS)


@njit(**JIT_STATE_OUTLINE)
def arfs_program_pending(s, t):
    """Write every entry still INACTIVE on the pending list; returns CPU ns spent."""
    ar = s.ar
    spent = 0
    for k in range(ar.glob[0].pend_n):
        e = ar.pend[k]
        ar.entry[e].pend = 0
        if ar.entry[e].state == ARFS_INACTIVE:
            if _program(s, e):
                ar.entry[e].state = ARFS_ACTIVE
                ar.entry[e].time = t
            spent += cost(s, C_ARFS_PROGRAM)
    ar.glob[0].pend_n = 0
    return spent


@njit(**JIT_STATE_OUTLINE)
def arfs_expire_scan(s, t):
    """Delete expired ACTIVE entries (mlx5: at most 62 per scan); returns CPU ns."""
    ar, p = s.ar, s.p
    spent = 0
    quota = 0
    for b in range(ar.bucket.size):
        prev = np.int64(-1)  # int64 from the start: one compiled _delete
        e = ar.bucket[b]
        while e >= 0:
            if ar.entry[e].state == ARFS_INACTIVE and ar.entry[e].pend == 0:
                # the sync loop retries entries whose write failed (table full)
                ar.entry[e].pend = 1
                ar.pend[ar.glob[0].pend_n] = e
                ar.glob[0].pend_n += 1
            elif ar.entry[e].state == ARFS_ACTIVE and _expired(s, e, t):
                spent += cost(s, C_ARFS_PROGRAM)
                e = _delete(s, b, prev, e)
                # mlx5: `if (quota++ > MLX5E_ARFS_EXPIRY_QUOTA) break` after queueing the
                # rule for deletion: at most 62 deletions per scan
                if p.arfs_model == 3:
                    if quota > MLX5E_ARFS_EXPIRY_QUOTA:
                        return spent
                    quota += 1
                continue
            prev = e
            e = ar.entry[e].next
    return spent


@njit(**JIT_STATE)
def arm_timer(s, t):
    if s.p.arfs_model != 0:
        schedule(s.ev, t + s.p.arfs_period_ns, PRIO_TIMER, EV_ARFS_TIMER, 0)
