"""Threaded NAPI: a queue's polls run in its kthread ``napi/DEV-ID``, not in softirq
(net/core/dev.c, v5.12+, 29863d41bb6e; read in 6.18.2).

With ``/sys/class/net/DEV/threaded`` set, ``____napi_schedule`` (from the device
interrupt) wakes ``napi->thread`` instead of adding the NAPI to ``sd->poll_list`` and
raising NET_RX. The kthread (``napi_threaded_poll`` -> ``napi_threaded_poll_loop``) runs
one ``__napi_poll`` at a time under ``local_bh_disable``: the driver's poll with its
``napi_weight``, and no ``netdev_budget`` or time limit. After each poll it sends the RPS
IPIs the poll queued (``net_rps_action_and_irq_enable``) and ``local_bh_enable`` runs any
softirq the poll raised on its own CPU (a local backlog) inline, on the kthread's time.
A poll that used its whole weight repolls after ``cond_resched()``: the kthread stays
runnable and the scheduler (``rxlab.kernel.sched``) decides whether it goes on; one that
did not calls ``napi_complete_done`` (the IRQ is enabled again) and the kthread sleeps in
``napi_thread_wait`` until the next interrupt wakes it.

Its time is system time in ``/proc/stat`` (task context with BH disabled is not
``in_serving_softirq``) and the kthread's own in ``/proc/PID/stat``. The kernel creates
the kthread unpinned; rxlab runs it on ``nic.napi_thread_affinity`` (default: the CPU
of the queue's interrupt, where ``Documentation/networking/napi.rst`` recommends pinning
it); the scheduler's migration of an unpinned kthread is not modelled (docs/model.md).

Threaded backlog NAPI (``kernel.thread_backlog_napi``; dad6b9770263, v6.10): each CPU's
backlog has its per-CPU thread ``backlog_napi/N`` (smpboot, pinned), which runs the same
``napi_threaded_poll_loop`` over ``process_backlog``. ``napi_schedule_rps`` from another
CPU wakes it directly instead of queuing an RPS IPI (``rxlab.kernel.backlog``); the
CPU's own schedule of its backlog still raises NET_RX (``____napi_schedule``:
``use_local_napi``). Its NAPI id is nq + N, its record ``s.nic.thread[nq + N]``.
"""

import numpy as np
from numba import njit

from rxlab.config import JIT_STATE
from rxlab.engine.core import PRIO_CPU, schedule
from rxlab.kernel.accounting import account
from rxlab.kernel.backlog import net_rps_send_ipi
from rxlab.kernel.counters import T_SYSTEM
from rxlab.kernel.events import EV_CPU
from rxlab.kernel.napi import napi_complete_done
from rxlab.kernel.sched import SCHED_NAPI_THREAD, place_woken, sleep_lag, wake_preempt
from rxlab.kernel.sched_states import SEG_NAPI_THREAD, TH_RUNNABLE, TH_SLEEP, TH_WAKING
from rxlab.kernel.wake import kick_cpu, napi_thread_cpu, napi_thread_wake, ttwu_arrive


@njit(**JIT_STATE)
def napi_thread_arrive(s, nid, t):
    """The wake-up reaches the kthread's CPU: placed by the fair class, runnable."""
    nt = s.nic.thread
    if nt[nid].nt_state != TH_WAKING:
        return
    c = napi_thread_cpu(s, nid)
    nt[nid].nt_vrt = place_woken(s, c, np.int64(SCHED_NAPI_THREAD), nt[nid].nt_vrt, nt[nid].nt_lag)
    nt[nid].nt_state = TH_RUNNABLE
    ttwu_arrive(s, nt[nid].nt_waker, c)
    wake_preempt(s, c, nt[nid].nt_vrt)
    kick_cpu(s, c, t)


@njit(**JIT_STATE)
def napi_thread_pass(s, c, nid, t0, t, work):
    """The rest of one pass of napi_threaded_poll_loop on CPU c, whose __napi_poll of
    NAPI nid (``napi.napi_poll``: an rx queue's driver poll, or the CPU's backlog with
    its dev_weight quota) ran from t0 to t: the RPS IPIs the poll queued, then the
    segment is the kthread's system time."""
    sd, nt = s.sd, s.nic.thread
    t = net_rps_send_ipi(s, c, t)  # net_rps_action_and_irq_enable
    account(s, c, T_SYSTEM, t0, t)
    nt[nid].nt_vrt += t - t0
    nt[nid].nt_ns += t - t0
    sd.cpu[c].seg_kind = SEG_NAPI_THREAD
    sd.cpu[c].seg_t0 = t0
    sd.cpu[c].seg_arg = nid
    sd.cpu[c].seg_work = work
    sd.cpu[c].ev_pending = 1
    schedule(s.ev, t, PRIO_CPU, EV_CPU, c)


@njit(**JIT_STATE)
def napi_thread_after(s, c, nid, t):
    """After the poll: repoll (quota used up: cond_resched, still runnable), or complete
    and sleep until the next wake-up: a queue's napi_complete_done enables its IRQ; a
    backlog that another CPU scheduled again meanwhile (``nt_rewake``) polls again, at
    once if that packet is there already, else when its enqueuer's wake-up comes."""
    p, nt = s.p, s.nic.thread
    rewake = np.int64(-1)
    if nid >= p.nq:
        if s.sd.cpu[c].seg_work >= p.dev_rx_weight:
            return
        rewake = nt[nid].nt_rewake
        nt[nid].nt_rewake = -1
        if 0 <= rewake <= t:
            return
    elif s.sd.cpu[c].seg_work >= p.napi_weight:
        return
    nt[nid].nt_lag = sleep_lag(s, c, np.int64(SCHED_NAPI_THREAD), nt[nid].nt_vrt)
    nt[nid].nt_state = TH_SLEEP
    if nid < p.nq:
        napi_complete_done(s, c, nid, s.sd.cpu[c].seg_work, t)
    elif rewake > t:
        napi_thread_wake(s, c, nid, rewake)
