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
"""

import numpy as np
from numba import njit

from rxlab.config import JIT_STATE
from rxlab.engine.core import PRIO_CPU, PRIO_FIRST, PRIO_WAKE, schedule
from rxlab.kernel.accounting import account, cost
from rxlab.kernel.backlog import net_rps_send_ipi
from rxlab.kernel.counters import T_SYSTEM
from rxlab.kernel.events import EV_CPU, EV_NAPI_WAKE
from rxlab.kernel.napi import driver_poll, napi_complete_done
from rxlab.kernel.nic_rx import kick_cpu
from rxlab.kernel.sched import SCHED_NAPI_THREAD, place_woken, sleep_lag, wake_preempt
from rxlab.kernel.sched_states import SEG_NAPI_THREAD, TH_RUNNABLE, TH_SLEEP, TH_WAKING
from rxlab.kernel.stages import C_NAPI_POLL, C_WAKEUP_LATENCY
from rxlab.kernel.wake import ttwu_arrive, ttwu_remote


@njit(**JIT_STATE)
def napi_thread_wake(s, c, q, t):
    """____napi_schedule on CPU c for queue q (threaded): wake_up_process(napi->thread).
    Returns the hardirq time the wake-up costs CPU c."""
    nq = s.nic.thread
    if nq[q].nt_state != TH_SLEEP:
        return 0  # running or already woken: NAPI_STATE_SCHED_THREADED makes it poll again
    nq[q].nt_state = TH_WAKING
    schedule(s.ev, t + cost(s, C_WAKEUP_LATENCY), PRIO_WAKE, EV_NAPI_WAKE, q)
    return ttwu_remote(s, c, s.p.queue[q].napi_cpu)


@njit(**JIT_STATE)
def napi_thread_arrive(s, q, t):
    """The wake-up reaches the kthread's CPU: placed by the fair class, runnable."""
    p, nq = s.p, s.nic.thread
    if nq[q].nt_state != TH_WAKING:
        return
    c = p.queue[q].napi_cpu
    nq[q].nt_vrt = place_woken(s, c, SCHED_NAPI_THREAD, nq[q].nt_vrt, nq[q].nt_lag)
    nq[q].nt_state = TH_RUNNABLE
    ttwu_arrive(s, p.queue[q].irq_cpu, c)
    wake_preempt(s, c, nq[q].nt_vrt)
    kick_cpu(s, c, t)


@njit(**JIT_STATE)
def napi_thread_poll(s, c, q, t0, t_ev):
    """One pass of napi_threaded_poll_loop on CPU c from t0: __napi_poll of queue q, then
    the RPS IPIs it queued. A poll that waits for the next traffic chunk pauses (as
    net_rx_action_step's does) and this call resumes it, first thing in that chunk."""
    sd, pz, nq, nt = s.sd, s.nic.pause[0], s.nic.queue, s.nic.thread
    if pz.on:
        pz.on = pz.thread = 0
        t, work, count, phase = pz.t, pz.work, pz.count, pz.phase
    else:
        t = t0 + cost(s, C_NAPI_POLL)
        nq[q].q_polls += 1
        work = count = phase = np.int64(0)  # one signature with the resumed poll's
    work, t, paused = driver_poll(s, c, q, t, work, count, phase)
    if paused:
        pz.on, pz.thread, pz.t0 = 1, 1, t0
        sd.cpu[c].ev_pending = 1
        schedule(s.ev, t_ev, PRIO_FIRST, EV_CPU, c)
        return
    t = net_rps_send_ipi(s, c, t)  # net_rps_action_and_irq_enable
    account(s, c, T_SYSTEM, t0, t)
    nt[q].nt_vrt += t - t0
    nt[q].nt_ns += t - t0
    sd.cpu[c].seg_kind = SEG_NAPI_THREAD
    sd.cpu[c].seg_t0 = t0
    sd.cpu[c].seg_arg = q
    sd.cpu[c].seg_work = work
    sd.cpu[c].ev_pending = 1
    schedule(s.ev, t, PRIO_CPU, EV_CPU, c)


@njit(**JIT_STATE)
def napi_thread_after(s, c, q, t):
    """After the poll: repoll (weight used up: cond_resched, still runnable), or
    napi_complete_done and sleep until the next interrupt."""
    nt = s.nic.thread
    if s.sd.cpu[c].seg_work >= s.p.napi_weight:
        return
    nt[q].nt_lag = sleep_lag(s, c, SCHED_NAPI_THREAD, nt[q].nt_vrt)
    nt[q].nt_state = TH_SLEEP
    napi_complete_done(s, q, t)
