"""The driver side that writes aRFS filters to hardware and expires them, as the work
of a kernel thread.

ice: every run of the service task calls ``ice_sync_arfs_fltrs`` (ice_arfs.c): under
``arfs_lock`` it walks all 1,024 buckets and every entry (``ice_arfs_update_flow_rules``):
INACTIVE entries become ACTIVE and go on an add list, ACTIVE ones that
``ice_arfs_is_flow_expired`` says so (``rps_may_expire_flow``, or UDP ones activated more
than 5 s ago) leave the table for a delete list; then, with the lock released, it
writes the deletes and the adds to hardware (``ice_fdir_write_fltr``). An add is
written with the entry's queue at write time; a failed write leaves the entry ACTIVE
without a filter (no retry). mlx5: the work item programs the rule, then
``arfs_may_expire_flow`` deletes at most 62 rules per scan.

Where the work runs (kernel/workqueue.c ``__queue_work``): ``queue_work`` passes
``WORK_CPU_UNBOUND``; a per-CPU workqueue then uses the pool of the CPU that called it,
an unbound one the pool of the CPU ``wq_select_unbound_cpu`` returns, which is that same
CPU while it is in ``wq_unbound_cpumask`` (the default: all CPUs). ice queues
``pf->serv_task`` on ``ice_wq`` (``ice_module_init``, drivers/net/ethernet/intel/ice/
ice_main.c: per-CPU, ``WQ_MEM_RECLAIM`` and later flags 0, until "ice: Unbind the
workqueue", 2024, made it ``WQ_UNBOUND``) from ``ice_rx_flow_steer`` (the CPU whose
softirq asked) or from the service timer (the model: CPU 0). mlx5 queues each rule's
work on ``create_singlethread_workqueue("mlx5e_arfs")`` (ordered, unbound, one item at a
time). The model runs the work on the CPU that called ``queue_work``: exact for a
per-CPU queue; for an unbound one the scheduler may wake the pool's worker on another
CPU of that CPU's affinity scope, which is not modelled.

The work item is one at a time (ice: one ``serv_task``, ``ICE_SERVICE_SCHED`` set from
``ice_service_task_schedule`` until ``ice_service_task_complete``; mlx5: an ordered
queue). An ice run starts with the walk: one step that spins for ``arfs_lock`` and
holds it (BH off: nothing else runs on that CPU meanwhile), all system time; then one
write per step, so a softirq on that CPU waits at most one write. Requests made during
a run find ``ICE_SERVICE_SCHED`` set and wait for the next trigger (a request after the
run, or the service timer); an mlx5 run takes the pending entries at its start and
goes on with the work items queued meanwhile.

Simplifications (docs/model.md): the work becomes runnable ``arfs_delay_ns`` after
``queue_work`` (the worker's wake-up); mlx5's expiry scan runs on a timer of
``nic.arfs.period_s`` rather than from its work items, and not under ``arfs_lock``.
"""

import numpy as np
from numba import njit

from rxlab.config import JIT_STATE, JIT_STATE_OUTLINE
from rxlab.engine.core import PRIO_TIMER, schedule
from rxlab.kernel.accounting import cost
from rxlab.kernel.counters import (
    ARFS_EXPIRE,
    ARFS_HW_FULL,
    ARFS_PROGRAMMED,
    ARFS_SYNC_HOLD_NS,
    ARFS_SYNC_RUNS,
    ARFS_SYNC_WAIT_NS,
)
from rxlab.kernel.events import EV_ARFS_TIMER
from rxlab.kernel.rfs import rps_may_expire_flow
from rxlab.kernel.sched_states import SVC_IDLE, SVC_QUEUED, SVC_RUNNABLE
from rxlab.kernel.stages import C_ARFS_PROGRAM, C_ARFS_SYNC_BUCKET, C_ARFS_SYNC_ENTRY
from rxlab.kernel.state import ARFS_ACTIVE, ARFS_FREE, ARFS_INACTIVE
from rxlab.nic.arfs_steer import arfs_lock, queue_service

ICE_ARFS_TIME_DELTA_EXPIRATION_NS = 5_000_000_000  # UDP filters live at most 5 s
MLX5E_ARFS_EXPIRY_QUOTA = 60
SERVICE_TIMER_CPU = 0  # the CPU that armed the ice service timer (probe): an assumption


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


@njit(**JIT_STATE)
def arfs_program_one(s, k, t):
    """Write pending entry k if it is still INACTIVE (an entry of the ice walk's add
    list: whatever its state now); returns the CPU ns spent."""
    ar = s.ar
    e = ar.pend[k]
    walked = ar.entry[e].pend == 2
    ar.entry[e].pend = 0
    if walked:
        # ice_arfs_add_flow_rules: the walk marked it ACTIVE; written with its queue now
        if ar.entry[e].state == ARFS_FREE:
            return np.int64(0)
        _program(s, e)
        return cost(s, C_ARFS_PROGRAM)
    if ar.entry[e].state == ARFS_INACTIVE:
        if _program(s, e):
            ar.entry[e].state = ARFS_ACTIVE
            ar.entry[e].time = t
        return cost(s, C_ARFS_PROGRAM)
    return np.int64(0)


@njit(**JIT_STATE_OUTLINE)
def arfs_program_pending(s, t):
    """Write every entry still INACTIVE on the pending list; returns CPU ns spent."""
    ar = s.ar
    spent = 0
    for k in range(ar.glob[0].pend_n):
        spent += arfs_program_one(s, k, t)
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


@njit(**JIT_STATE_OUTLINE)
def ice_sync_walk(s, t):
    """``ice_arfs_update_flow_rules`` over every bucket, at t (under the lock): INACTIVE
    entries are marked ACTIVE and make the add list (the pending list, rebuilt); expired
    ACTIVE ones leave the table, their hardware writes owed as ``svc_debt``."""
    ar = s.ar
    g = ar.glob[0]
    g.pend_n = 0
    for b in range(ar.bucket.size):
        prev = np.int64(-1)
        e = ar.bucket[b]
        while e >= 0:
            ar.entry[e].pend = 0
            if ar.entry[e].state == ARFS_INACTIVE:
                ar.entry[e].state = ARFS_ACTIVE
                ar.entry[e].time = t  # time_activated
                ar.entry[e].pend = 2  # on the add list
                ar.pend[g.pend_n] = e
                g.pend_n += 1
            elif ar.entry[e].state == ARFS_ACTIVE and _expired(s, e, t):
                g.svc_debt += cost(s, C_ARFS_PROGRAM)  # ice_arfs_del_flow_rules' write
                e = _delete(s, b, prev, e)
                continue
            prev = e
            e = ar.entry[e].next


@njit(**JIT_STATE_OUTLINE)
def ice_sync(s, t):
    """``ice_sync_arfs_fltrs``' locked part, started at t: spin for ``arfs_lock``, then
    hold it for the walk of every bucket head and every entry. Returns the walk's end."""
    ar = s.ar
    n = ar.entry.size - ar.glob[0].free_n  # entries in the table: all are walked
    hold = ar.bucket.size * cost(s, C_ARFS_SYNC_BUCKET) + n * cost(s, C_ARFS_SYNC_ENTRY)
    wait = arfs_lock(s, t, hold)
    ar.cnt[ARFS_SYNC_RUNS] += 1
    ar.cnt[ARFS_SYNC_WAIT_NS] += wait
    ar.cnt[ARFS_SYNC_HOLD_NS] += hold
    ice_sync_walk(s, t + wait)
    return t + wait + hold


@njit(**JIT_STATE)
def arm_timer(s, t):
    if s.p.arfs_model != 0:
        schedule(s.ev, t + s.p.arfs_period_ns, PRIO_TIMER, EV_ARFS_TIMER, 0)


@njit(**JIT_STATE)
def service_timer(s, t):
    """The service timer: queues the work (ice: its run syncs as every run does; mlx5: the
    run scans for expired rules); re-armed."""
    s.ar.glob[0].svc_scan = 1
    queue_service(s, np.int64(SERVICE_TIMER_CPU), t)
    arm_timer(s, t)


@njit(**JIT_STATE_OUTLINE)
def kworker_step(s, c, t):
    """One step of the work on CPU c's kworker: at an ice run's start the sync walk under
    the lock (one step); at an mlx5 run's start the expiry scan (when the timer asked)
    and the snapshot of pending entries; then one filter write, or one write's worth of
    the deletions. Returns the step's end."""
    g = s.ar.glob[0]
    if g.svc_run == 0:
        g.svc_run = 1
        if s.p.arfs_model != 3:
            # ice: every run syncs the whole list under the lock, then writes
            g.svc_scan = 0
            t_end = ice_sync(s, t)
            g.svc_n0 = g.pend_n
            g.svc_pos = 0
            return t_end
        if g.svc_scan:
            g.svc_scan = 0
            g.svc_debt += arfs_expire_scan(s, t)  # retries failed writes: pend grows
        g.svc_n0 = g.pend_n
        g.svc_pos = 0
    if g.svc_debt > 0:
        step = min(g.svc_debt, max(cost(s, C_ARFS_PROGRAM), np.int64(1)))
        g.svc_debt -= step
        return t + step
    while g.svc_pos < g.svc_n0:
        k = g.svc_pos
        g.svc_pos = k + 1
        spent = arfs_program_one(s, k, t)
        if spent > 0:
            return t + spent
    return t


@njit(**JIT_STATE_OUTLINE)
def kworker_after(s, t):
    """After a step: the run goes on, or it ends (the work item completes)."""
    ar = s.ar
    g = ar.glob[0]
    if g.svc_debt > 0 or g.svc_pos < g.svc_n0:
        return
    # entries queued during the run move to the front of the pending list
    n0 = g.svc_n0
    for k in range(n0, g.pend_n):
        ar.pend[k - n0] = ar.pend[k]
    g.pend_n -= n0
    g.svc_n0 = 0
    g.svc_pos = 0
    g.svc_run = 0
    if s.p.arfs_model == 3 and g.pend_n > 0:
        return  # mlx5: the ordered queue holds the work items queued meanwhile
    g.svc_pending = SVC_IDLE  # ice_service_task_complete: the next request queues it


@njit(**JIT_STATE)
def kworker_wake(s, c, t):
    """The kworker on CPU c is woken for the work (EV_ARFS_SVC): CFS placement starts it
    level with the CPU's threads."""
    g = s.ar.glob[0]
    if g.svc_pending == SVC_QUEUED:
        g.svc_pending = SVC_RUNNABLE
        s.sd.cpu[c].kw_vrt = max(s.sd.cpu[c].kw_vrt, s.sd.cpu[c].app_vrt)
        return True
    return False
