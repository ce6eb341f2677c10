"""The driver side that writes aRFS filters to hardware and expires them, as the work
of a kernel thread.

ice: every run of the service task calls ``ice_sync_arfs_fltrs`` (ice_arfs.c): under
``arfs_lock`` it walks all 1,024 buckets and every entry (``ice_arfs_update_flow_rules``):
INACTIVE entries become ACTIVE and go on an add list, ACTIVE ones that
``ice_arfs_is_flow_expired`` says so (``rps_may_expire_flow``, or UDP ones activated more
than 5 s ago) leave the table for a delete list; then, with the lock released, it
writes the deletes and the adds to hardware (``ice_fdir_write_fltr``). An add is
written with the entry's queue at write time; a failed write leaves the entry ACTIVE
without a filter (no retry). mlx5 (en_arfs.c ``arfs_handle_work``): each work item
programs its rule, then calls ``arfs_may_expire_flow``, which under ``arfs_lock`` walks
the 4 x 256 buckets in order, takes every rule whose work is not pending and that
``rps_may_expire_flow`` lets go, and stops after 62 of them; with the lock released it
deletes them (``mlx5_del_flow_rules``). mlx5 has no timer for it.

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
run, or the service timer); an mlx5 run takes one work item per step, its write and
its expiry scan (the scan spins for ``arfs_lock`` and holds it for the buckets and
rules it visits), then the scan's deletions one per step, and goes on with the work
items queued meanwhile.

Simplifications (docs/model.md): the work becomes runnable ``arfs_delay_ns`` after
``queue_work`` (the worker's wake-up); an mlx5 scan decides which rules go at the time
it asks for the lock, not when it gets it (the two differ by its spin).
"""

import numpy as np
from numba import njit

from rxlab.config import JIT_STATE, JIT_STATE_OUTLINE
from rxlab.engine.core import PRIO_TIMER, schedule
from rxlab.kernel.accounting import cost
from rxlab.kernel.counters import ARFS_COUNTERS
from rxlab.kernel.events import EV_ARFS_TIMER
from rxlab.kernel.rfs import rps_may_expire_flow
from rxlab.kernel.sched import SCHED_KWORKER, place_woken, sleep_lag, wake_preempt
from rxlab.kernel.sched_states import SVC_IDLE, SVC_QUEUED, SVC_RUNNABLE
from rxlab.kernel.stages import C_ARFS_PROGRAM, C_ARFS_SYNC_BUCKET, C_ARFS_SYNC_ENTRY
from rxlab.kernel.state import (
    ARFS_ACTIVE,
    ARFS_ENTRY,
    ARFS_FREE,
    ARFS_GLOB,
    ARFS_ICE_HASH_MATCH,
    ARFS_ICE_TUPLE_MATCH,
    ARFS_INACTIVE,
    ARFS_MLX5,
    ArfsState,
)
from rxlab.nic.arfs_steer import arfs_lock, queue_service

ICE_ARFS_TIME_DELTA_EXPIRATION_NS = 5_000_000_000  # UDP filters live at most 5 s
MLX5E_ARFS_EXPIRY_QUOTA = 60
SERVICE_TIMER_CPU = 0  # the CPU that armed the ice service timer (probe): an assumption



def new_arfs_state(cap: int, model: int, nflows: int) -> ArfsState:
    """The driver's empty filter list: ``cap`` entries on the free stack (entry 0 popped
    first), the hash buckets (mlx5's 4 rule tables of 256, ice's 1024) empty, no flow
    with a programmed filter."""
    entry = np.zeros(cap, ARFS_ENTRY)
    entry["state"] = ARFS_FREE
    entry["next"] = -1
    glob = np.zeros(1, ARFS_GLOB)
    glob["free_n"] = cap
    nb = 4 * 256 if model == ARFS_MLX5 else 1024
    return ArfsState(
        entry=entry, free=np.arange(cap - 1, -1, -1, dtype=np.int64),
        pend=np.zeros(cap, np.int64), bucket=np.full(nb, -1, np.int64), glob=glob,
        fdir_queue=np.full(nflows, -1, np.int64), cnt=np.zeros(1, ARFS_COUNTERS),
    )


@njit(**JIT_STATE)
def _program(s, e):
    ar, p = s.ar, s.p
    f = ar.entry[e].flow
    if ar.fdir_queue[f] < 0:
        if ar.glob[0].hw_count >= p.arfs_capacity:
            ar.cnt[0].arfs_hw_full += 1
            return False
        ar.glob[0].hw_count += 1
    ar.fdir_queue[f] = ar.entry[e].q
    ar.cnt[0].arfs_programmed += 1
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
    ar.cnt[0].arfs_expire += 1
    return nxt


@njit(**JIT_STATE)
def _expired(s, e, t):
    ar, p = s.ar, s.p
    if rps_may_expire_flow(s, ar.entry[e].q, ar.entry[e].flow_id,
                           ar.entry[e].fltr_id):
        return True
    return p.arfs_model != ARFS_MLX5 and p.flow[ar.entry[e].flow].flow_udp and (
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
    """An expiry scan at t, buckets in order. mlx5 (``arfs_may_expire_flow``): a rule
    whose work is not pending (not on the pending list) and that ``rps_may_expire_flow``
    lets go leaves the table; stop after the 62nd (``if (quota++ >
    MLX5E_ARFS_EXPIRY_QUOTA) break``). ice (the expiry half of its sync walk, as the test
    harness drives it): expired ACTIVE entries leave, INACTIVE ones not pending are
    queued again. Returns the buckets and entries visited and the ns of hardware
    deletions owed (a rule that was never written costs none)."""
    ar, p = s.ar, s.p
    mlx5 = p.arfs_model == ARFS_MLX5
    quota = 0
    rules = np.int64(0)
    spent = np.int64(0)
    for b in range(ar.bucket.size):
        prev = np.int64(-1)  # int64 from the start: one compiled _delete
        e = ar.bucket[b]
        while e >= 0:
            rules += 1
            if mlx5:
                gone = ar.entry[e].pend == 0 and rps_may_expire_flow(
                    s, ar.entry[e].q, ar.entry[e].flow_id, ar.entry[e].fltr_id)
            elif ar.entry[e].state == ARFS_INACTIVE and ar.entry[e].pend == 0:
                ar.entry[e].pend = 1
                ar.pend[ar.glob[0].pend_n] = e
                ar.glob[0].pend_n += 1
                gone = False
            else:
                gone = ar.entry[e].state == ARFS_ACTIVE and _expired(s, e, t)
            if gone:
                if ar.fdir_queue[ar.entry[e].flow] >= 0:
                    spent += cost(s, C_ARFS_PROGRAM)  # the hardware rule's deletion
                e = _delete(s, b, prev, e)
                if mlx5:
                    stop = quota > MLX5E_ARFS_EXPIRY_QUOTA
                    quota += 1
                    if stop:
                        return np.int64(b + 1), rules, spent
                continue
            prev = e
            e = ar.entry[e].next
    return np.int64(ar.bucket.size), rules, spent


@njit(**JIT_STATE_OUTLINE)
def mlx5_expire(s, t):
    """``arfs_may_expire_flow``'s locked part, started at t: the walk, then spin for
    ``arfs_lock`` and hold it for the buckets and rules visited; the deletions are owed
    as ``svc_debt``. Returns the locked part's end."""
    ar = s.ar
    buckets, rules, spent = arfs_expire_scan(s, t)
    ar.glob[0].svc_debt += spent
    hold = buckets * cost(s, C_ARFS_SYNC_BUCKET) + rules * cost(s, C_ARFS_SYNC_ENTRY)
    wait = arfs_lock(s, t, hold)
    ar.cnt[0].arfs_sync_runs += 1
    ar.cnt[0].arfs_sync_wait_ns += wait
    ar.cnt[0].arfs_sync_hold_ns += hold
    return t + wait + hold


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
    ar.cnt[0].arfs_sync_runs += 1
    ar.cnt[0].arfs_sync_wait_ns += wait
    ar.cnt[0].arfs_sync_hold_ns += hold
    ice_sync_walk(s, t + wait)
    return t + wait + hold


@njit(**JIT_STATE)
def arm_timer(s, t):
    # ice's service timer; mlx5 has none
    if s.p.arfs_model == ARFS_ICE_HASH_MATCH or s.p.arfs_model == ARFS_ICE_TUPLE_MATCH:
        schedule(s.ev, t + s.p.arfs_period_ns, PRIO_TIMER, EV_ARFS_TIMER, 0)


@njit(**JIT_STATE)
def service_timer(s, t):
    """ice's service timer (``ice_service_timer``): queues the work, whose run syncs as
    every run does; re-armed."""
    queue_service(s, np.int64(SERVICE_TIMER_CPU), t)
    arm_timer(s, t)


@njit(**JIT_STATE_OUTLINE)
def kworker_step(s, c, t):
    """One step of the work on CPU c's kworker: at an ice run's start the sync walk under
    the lock (one step), then one filter write per step; for mlx5 one work item per step
    (its rule's write, then ``arfs_may_expire_flow``), its deletions one per step before
    the next. Returns the step's end."""
    g = s.ar.glob[0]
    if g.svc_run == 0:
        g.svc_run = 1
        g.svc_n0 = g.pend_n
        g.svc_pos = 0
        if s.p.arfs_model != ARFS_MLX5:
            # ice: every run syncs the whole list under the lock, then writes
            t_end = ice_sync(s, t)
            g.svc_n0 = g.pend_n
            return t_end
    if g.svc_debt > 0:
        step = min(g.svc_debt, max(cost(s, C_ARFS_PROGRAM), np.int64(1)))
        g.svc_debt -= step
        return t + step
    while g.svc_pos < g.svc_n0:
        k = g.svc_pos
        g.svc_pos = k + 1
        spent = arfs_program_one(s, k, t)
        if s.p.arfs_model == ARFS_MLX5:
            # arfs_handle_work: every work item ends with arfs_may_expire_flow
            return mlx5_expire(s, t + spent)
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
    if s.p.arfs_model == ARFS_MLX5 and g.pend_n > 0:
        return  # mlx5: the ordered queue holds the work items queued meanwhile
    c = g.svc_cpu
    s.sd.cpu[c].kw_lag = sleep_lag(s, c, np.int64(SCHED_KWORKER), s.sd.cpu[c].kw_vrt)
    g.svc_pending = SVC_IDLE  # ice_service_task_complete: the next request queues it


@njit(**JIT_STATE)
def kworker_wake(s, c, t):
    """The kworker on CPU c is woken for the work (EV_ARFS_SVC): placed by the fair
    class (rxlab.kernel.sched), runnable."""
    g, sd = s.ar.glob[0], s.sd
    if g.svc_pending == SVC_QUEUED:
        sd.cpu[c].kw_vrt = place_woken(s, c, np.int64(SCHED_KWORKER), sd.cpu[c].kw_vrt,
                                       sd.cpu[c].kw_lag)
        g.svc_pending = SVC_RUNNABLE
        wake_preempt(s, c, sd.cpu[c].kw_vrt)
        return True
    return False
