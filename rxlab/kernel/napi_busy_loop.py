"""A socket's busy loop, the NAPI's side (net/core/dev.c ``__napi_busy_loop``,
``busy_poll_stop``, read in 6.18.2; the loop's shape since 217f69743681, v4.10).

A thread whose read found its socket empty (``rxlab.kernel.busy_poll``) goes round:
if the NAPI of its socket is free it takes it (SCHED | IN_BUSY_POLL) and polls it in
its own context (system time) with ``sk_busy_poll_budget`` (BUSY_POLL_BUDGET, 8);
while it holds it the driver's ``napi_complete_done`` returns false, so the IRQ stays
masked, and a device interrupt finds the NAPI taken (``napi_schedule_prep`` fails:
MISSED). If softirq or another thread has the NAPI, it only spins, and with
``SO_PREFER_BUSY_POLL`` sets PREFER_BUSY_POLL, which makes the softirq's next
full-budget poll complete early (``rxlab.kernel.napi.napi_prefer_busy_poll_exit``).
The loop ends when the socket has data or at the timeout; ``busy_poll_stop`` then polls
once more with IN_BUSY_POLL cleared, so the driver's ``napi_complete_done`` re-enables
the IRQ (with prefer and deferral set, the NAPI's hrtimer is armed instead); a last
poll that used the whole budget leaves the NAPI scheduled as a softirq. Packets the
loop's polls take count ``LINUX_MIB_BUSYPOLLRXPACKETS``.

The loop's larger functions are out of line (``JIT_STATE_OUTLINE``): only a scenario
whose sockets busy-poll calls them, the dispatch of every other one keeps its size, and
each is compiled once (a copy inlined into several callers would be compiled with each).

Simplifications (docs/model.md): the spin between polls is one stretch of system time
that ends when a descriptor reaches the held queue, data reaches the socket, the NAPI
is freed, the timeout passes or an interrupt or another task needs the CPU (an empty
round's ~100 ns is not sampled and its polls are not counted); a thread that loses the
CPU while it holds the NAPI hands it back as an empty ``busy_poll_stop`` would, without
that poll (``need_resched``: the loop resumes when the thread runs again).
"""

import numpy as np
from numba import njit

from rxlab.config import JIT_STATE, JIT_STATE_OUTLINE
from rxlab.engine.core import PRIO_CPU, PRIO_WAKE, schedule
from rxlab.kernel.accounting import account
from rxlab.kernel.backlog import napi_list_add
from rxlab.kernel.busy_poll import sk_napi_id, sock_ready_at
from rxlab.kernel.counters import T_SYSTEM
from rxlab.kernel.events import EV_BUSY_POLL, EV_CPU
from rxlab.kernel.napi import napi_complete_done
from rxlab.kernel.napi_defer import napi_timer_start
from rxlab.kernel.sched import SCHED_APP, app_next
from rxlab.kernel.sched_states import BP_LOOP, BP_OFF, BP_STOP, SEG_BUSY_POLL, SEG_BUSY_SPIN
from rxlab.kernel.socket import app_wait
from rxlab.kernel.wake import kick_cpu

BUSY_POLL_BUDGET = 8  # include/net/busy_poll.h

# busy_poll_next's answers besides a NAPI to poll; busy_poll_turn's BP_DONE: the CPU has
# nothing more to start now
BP_SPIN, BP_READ, BP_SLEEP, BP_DONE = -1, -2, -3, -4


@njit(**JIT_STATE)
def busy_poll_kick(s, arg, t):
    """EV_BUSY_POLL: a kick (arg -1 - thread: its loop has something to look at,
    ``wake_busy_poller``) or the thread's timeout (arg thread; a later loop's timeout is
    armed again from it). A thread still spinning goes round again at t."""
    so, sd = s.so, s.sd
    th = arg
    if arg < 0:
        th = -1 - arg
        so.thread[th].th_bp_kick = 0
    else:
        so.thread[th].th_bp_tev = -1
        if so.thread[th].th_bp != BP_OFF and so.thread[th].th_bp_end > t:
            so.thread[th].th_bp_tev = so.thread[th].th_bp_end
            schedule(s.ev, so.thread[th].th_bp_end, PRIO_WAKE, EV_BUSY_POLL, th)
            return
    c = so.thread[th].thread_cpu
    if sd.cpu[c].seg_kind == SEG_BUSY_SPIN and sd.cpu[c].seg_arg == th:
        kick_cpu(s, c, t)


@njit(**JIT_STATE_OUTLINE)
def busy_poll_turn(s, c, who, t):
    """CPU c at t, after ``pick_next`` chose ``who`` (not softirq): the thread that was
    busy-polling here gives its NAPI back if it lost the CPU (``busy_poll_yield``); an
    application thread chosen now (``app_next``) goes on with its busy loop. Returns
    (NAPI to poll, thread), (BP_READ, thread or -1): no busy loop, start the chosen task
    as usual, or (BP_DONE, thread): spinning, or the loop ended empty and the thread
    sleeps (the CPU picks again at t)."""
    sd, so = s.sd, s.so
    th = app_next(s, c) if who == SCHED_APP else np.int64(-1)
    if sd.cpu[c].bp_thread >= 0 and th != sd.cpu[c].bp_thread:
        busy_poll_yield(s, c, t)  # the busy-polling thread loses the CPU
    if th < 0 or so.thread[th].th_bp == BP_OFF:
        return np.int64(BP_READ), th
    napi = busy_poll_next(s, c, th, t)
    if napi == BP_SLEEP:
        _app_wait(s, c, th, t)
        sd.cpu[c].ev_pending = 1
        schedule(s.ev, t, PRIO_CPU, EV_CPU, c)
        return np.int64(BP_DONE), th
    if napi == BP_SPIN:
        return np.int64(BP_DONE), th
    return napi, th


@njit(**JIT_STATE)
def busy_poll_next(s, c, th, t):
    """One round of thread th's busy loop on CPU c at t (``__napi_busy_loop``): the NAPI
    to poll now (a round's poll, or busy_poll_stop's), or BP_SPIN (spinning: the NAPI is
    taken by softirq or another thread), BP_READ (the loop ended with data: read it) or
    BP_SLEEP (it ended empty: the thread sleeps)."""
    so, nic, sd = s.so, s.nic, s.sd
    sk = so.thread[th].thread_sock
    q = so.thread[th].th_bp_napi
    sd.cpu[c].bp_thread = th
    if so.thread[th].th_bp == BP_STOP:
        return q
    ready = sock_ready_at(s, sk)
    if 0 <= ready <= t or t >= so.thread[th].th_bp_end:  # sk_busy_loop_end
        if q >= 0:
            so.thread[th].th_bp = BP_STOP
            return q
        so.thread[th].th_bp = BP_OFF
        sd.cpu[c].bp_thread = -1
        return BP_READ if 0 <= ready <= t else BP_SLEEP
    if q < 0:
        n = sk_napi_id(s, sk)
        if nic.queue[n].q_sched:  # softirq, a kthread or another busy poll has it
            if so.sock[sk].sock_bp_prefer:
                nic.queue[n].q_prefer = 1
            nic.queue[n].q_bp_waiter = th
            busy_spin(s, c, th, t)
            return BP_SPIN
        nic.queue[n].q_sched = 1  # cmpxchg: SCHED | IN_BUSY_POLL
        nic.queue[n].q_bp_owner = th
        so.thread[th].th_bp_napi = n
        q = n
    return q


@njit(**JIT_STATE)
def busy_poll_budget(s, sk):
    """sk_busy_poll_budget ?: BUSY_POLL_BUDGET."""
    b = s.so.sock[sk].sock_bp_budget
    return b if b > 0 else np.int64(BUSY_POLL_BUDGET)


@njit(**JIT_STATE_OUTLINE)
def busy_poll_pass(s, c, th, q, t0, t, work):
    """Thread th's poll of NAPI q ran on CPU c over [t0, t) and took ``work`` packets:
    the thread's system time; then busy_poll_stop's ending, the next round (the poll
    found packets), or a spin until something arrives."""
    so, nic, sd = s.so, s.nic, s.sd
    account(s, c, T_SYSTEM, t0, t)
    sd.cpu[c].app_vrt += t - t0
    so.thread[th].th_ns += t - t0
    so.thread[th].th_bp_ns += t - t0
    if so.thread[th].th_bp == BP_STOP:
        so.thread[th].th_bp = BP_OFF
        sd.cpu[c].bp_thread = -1
        busy_poll_release(s, c, th, q, work, t)
    else:
        so.thread[th].th_bp_pkts += work
        nic.queue[q].q_bp_pkts += work  # LINUX_MIB_BUSYPOLLRXPACKETS
        if work == 0:
            busy_spin(s, c, th, t)
            return
    sd.cpu[c].seg_kind = SEG_BUSY_POLL
    sd.cpu[c].seg_arg = th
    sd.cpu[c].seg_t0 = t0
    sd.cpu[c].ev_pending = 1
    schedule(s.ev, t, PRIO_CPU, EV_CPU, c)


@njit(**JIT_STATE_OUTLINE)
def busy_poll_release(s, c, th, q, rc, t):
    """busy_poll_stop after its last poll took ``rc`` packets: IN_BUSY_POLL cleared;
    with SO_PREFER_BUSY_POLL and deferral set, the hrtimer is armed instead of the IRQ;
    a poll that used the whole budget leaves the NAPI scheduled as a softirq on c
    (``__busy_poll_stop``), else the driver's ``napi_complete_done`` completes it."""
    so, nic, p = s.so, s.nic, s.p
    sk = so.thread[th].thread_sock
    nic.queue[q].q_bp_owner = -1
    so.thread[th].th_bp_napi = -1
    skip_schedule = False
    if so.sock[sk].sock_bp_prefer:
        nic.queue[q].defer_count = p.queue[q].defer_hard_irqs
        timeout = p.queue[q].gro_flush_ns
        if nic.queue[q].defer_count and timeout:
            napi_timer_start(s, c, q, t + timeout)
            skip_schedule = True
    if rc >= busy_poll_budget(s, sk):
        if skip_schedule:
            nic.queue[q].q_sched = 0  # IRQ masked, the hrtimer polls it next
        else:
            napi_list_add(s, c, q)  # __napi_schedule: still SCHED
    else:
        napi_complete_done(s, c, q, rc, t)


@njit(**JIT_STATE)
def busy_poll_yield(s, c, t):
    """CPU c goes to another task while its busy-polling thread holds a NAPI: the thread
    gives it back (need_resched -> busy_poll_stop, here without its last poll) and
    resumes its loop when it runs again."""
    sd, so = s.sd, s.so
    th = sd.cpu[c].bp_thread
    sd.cpu[c].bp_thread = -1
    q = so.thread[th].th_bp_napi
    if q >= 0:
        if so.thread[th].th_bp == BP_STOP:
            so.thread[th].th_bp = BP_LOOP  # the stop's poll is the one left out
        busy_poll_release(s, c, th, q, np.int64(0), t)


@njit(**JIT_STATE)
def busy_spin(s, c, th, t):
    """Thread th spins on CPU c from t (``cpu_relax`` between rounds): no event pending,
    unless a descriptor on the NAPI it holds or data on its socket is already known to
    come, then the CPU goes round again then."""
    so, nic, sd, p = s.so, s.nic, s.sd, s.p
    sd.cpu[c].seg_kind = SEG_BUSY_SPIN
    sd.cpu[c].seg_arg = th
    sd.cpu[c].seg_t0 = t
    wake = sock_ready_at(s, so.thread[th].thread_sock)
    q = so.thread[th].th_bp_napi
    if q >= 0 and nic.queue[q].ring_tail > nic.queue[q].ring_head:
        st = nic.ring[q, nic.queue[q].ring_head & p.ring_mask].stamp
        wake = st if wake < 0 else min(wake, st)
    if wake >= 0:
        sd.cpu[c].ev_pending = 1
        schedule(s.ev, max(t, wake), PRIO_CPU, EV_CPU, c)
    else:
        sd.cpu[c].ev_pending = 0


@njit(**JIT_STATE)
def busy_spin_end(s, c, th, t):
    """CPU c's spin for thread th ends at t: the spin is the thread's system time.
    Returns the time the CPU goes on from (the spin's start, if that is later)."""
    so, sd = s.so, s.sd
    t0 = sd.cpu[c].seg_t0
    t = max(t, t0)
    account(s, c, T_SYSTEM, t0, t)
    sd.cpu[c].app_vrt += t - t0
    so.thread[th].th_ns += t - t0
    so.thread[th].th_bp_ns += t - t0
    return t


@njit(**JIT_STATE)
def busy_poll_seg_end(s, c, th, t):
    """A poll of thread th's busy loop has ended on CPU c at t: after busy_poll_stop's
    poll the loop is over, and the thread reads what came or waits."""
    if s.so.thread[th].th_bp == BP_OFF:
        _app_wait(s, c, th, t)


@njit(**JIT_STATE_OUTLINE)
def _app_wait(s, c, th, t):
    """``app_wait`` once, out of line, for the loop's two ends (its inlined copy stays
    in the read path)."""
    app_wait(s, c, th, t)
