"""The receive-path event loop: packet arrivals merged with the calendar (jitted).

Arrivals stream beside the heap, already shaped by the wire and the NIC (``shape``):
an arrival costs one ring enqueue, and only the first packet on an idle queue raises an
interrupt event. Every other event is a batch the kernel itself has: an interrupt, an
IPI, a wake-up, or a CPU finishing a segment (a NAPI poll or an application read).
New mechanisms add an event kind (``rxlab.kernel.events``) and a branch in
``handle_event`` (never an edit to ``rxlab.engine.core``).
"""

import numpy as np
from numba import njit

from rxlab.config import JIT_HELPER, JIT_LEAF, JIT_STATE, JIT_STATE_OUTLINE
from rxlab.engine.core import PRIO_CPU, PRIO_FIRST, PRIO_WAKE, peek_time, pop, schedule
from rxlab.engine.rng import uniform
from rxlab.kernel.accounting import account, cost, hist_index
from rxlab.kernel.backlog import napi_list_add
from rxlab.kernel.counters import LAT_NIC, T_HARDIRQ, T_KSOFTIRQD, T_SOFTIRQ, T_SYSTEM, T_USER
from rxlab.kernel.events import (
    EV_ARFS_SVC,
    EV_ARFS_TIMER,
    EV_BUSY_POLL,
    EV_CPU,
    EV_CPUMAP_WAKE,
    EV_IPI,
    EV_IRQ,
    EV_MIGRATE,
    EV_NAPI_TIMER,
    EV_NAPI_WAKE,
    EV_WAKE,
)
from rxlab.kernel.napi import (
    jiffies,
    napi_poll,
    napi_segment_end,
    net_rx_action_next,
    softirq_context,
)
from rxlab.kernel.napi_busy_loop import (
    BP_DONE,
    busy_poll_budget,
    busy_poll_kick,
    busy_poll_pass,
    busy_poll_seg_end,
    busy_poll_turn,
    busy_spin_end,
)
from rxlab.kernel.napi_defer import napi_watchdog
from rxlab.kernel.napi_thread import napi_thread_after, napi_thread_arrive, napi_thread_pass
from rxlab.kernel.nic_rx import ingest
from rxlab.kernel.profile import (
    P_EV0,
    P_INGEST,
    P_NAPI_POLL,
    P_PICK_NEXT,
    P_RUN,
    P_RUN_THREAD,
    P_RX_ACTION_NEXT,
    P_SEGMENT_END,
    P_SOFTIRQ_SEGMENT,
    prof_start,
    prof_stop,
)
from rxlab.kernel.sched import (
    SCHED_APP,
    SCHED_CPUMAP_KTHREAD,
    SCHED_KSOFTIRQD,
    SCHED_KWORKER,
    SCHED_NAPI_THREAD,
    SCHED_SOFTIRQ,
    app_next,
    has_runnable_thread,
    napi_thread_next,
    pick_next,
    place_woken,
    wake_preempt,
)
from rxlab.kernel.sched_states import (
    BH_APP,
    BH_NAPI_THREAD,
    POLL_BUSY,
    POLL_KTHREAD,
    SEG_APP,
    SEG_BUSY_POLL,
    SEG_BUSY_SPIN,
    SEG_CPUMAP,
    SEG_KWORKER,
    SEG_NAPI,
    SEG_NAPI_THREAD,
    SEG_NONE,
    TH_RUNNABLE,
    TH_WAKING,
)
from rxlab.kernel.socket import app_after_read, app_read
from rxlab.kernel.stages import C_HARDIRQ, C_IPI_RECV, C_NAPI_WATCHDOG
from rxlab.kernel.state import W_NEXT, Arrivals
from rxlab.kernel.wake import kick_cpu, napi_thread_wake, ttwu_arrive
from rxlab.nic.arfs import kworker_after, kworker_step, kworker_wake, service_timer
from rxlab.xdp.cpumap import cpumap_after_batch, cpumap_kthread_step


@njit(**JIT_LEAF)
def shape(t_gen, length, link_ps_per_byte, svc_ns, fifo, port_state, t_wire, t_nic,
          overrun):
    """Wire serialisation (FIFO at line rate) and the NIC's packet-rate ceiling.

    ``t_wire``: the frame's last bit is in (every latency starts there); ``t_nic``: it
    leaves the NIC's FIFO, served at ``svc_ns`` per packet (``nic.max_pps``), and its
    descriptor is written. ``port_state`` = [wire_free, nic_free] carries across chunks.
    Order is preserved, so both stay non-decreasing. A packet that would wait behind more
    than ``fifo`` packets at the NIC ceiling is an overrun drop.
    """
    wire_free = port_state[0]
    nic_free = port_state[1]
    for i in range(t_gen.size):
        # preamble + SFD + inter-frame gap: 20 bytes beyond the frame (line-rate rule)
        ser = ((length[i] + 20) * link_ps_per_byte) // 1000
        start = max(t_gen[i], wire_free)
        wire_free = start + ser
        t = wire_free
        t_wire[i] = t
        overrun[i] = False
        if svc_ns > 0:
            s = max(t, nic_free)
            if (s - t) > fifo * svc_ns:
                overrun[i] = True
            else:
                nic_free = s + svc_ns
                t = nic_free
        t_nic[i] = t
    port_state[0] = wire_free
    port_state[1] = nic_free


@njit(**JIT_STATE)
def interrupt(s, c, napi, irq_cost, t):
    """Hard interrupt on CPU c that schedules a NAPI and raises NET_RX_SOFTIRQ, or, for
    a threaded NAPI, wakes its kthread (____napi_schedule)."""
    p, sd = s.p, s.sd
    if napi < p.nq:
        s.nic.queue[napi].q_sched = 1
    if p.napi_threaded and napi < p.nq and p.queue[napi].napi_cpu >= 0:
        sd.cpu[c].irq_debt += irq_cost + napi_thread_wake(s, c, napi, t)
        kick_cpu(s, c, t)  # the hardirq's time is charged when c dispatches
        return
    sd.cpu[c].irq_debt += irq_cost
    napi_list_add(s, c, napi)
    if sd.cpu[c].ksoftirqd and not p.ksoftirqd_defers:
        # since v6.5 irq_exit runs pending softirqs inline even while ksoftirqd is awake
        sd.cpu[c].ksoftirqd = 0
    kick_cpu(s, c, t)


@njit(**JIT_STATE)
def tick_irq_exit(s, c, kind, t):
    """The scheduler tick (every jiffy on a busy CPU) interrupted the thread segment that
    just ended on CPU c if a jiffy boundary lies in it: its irq_exit -> invoke_softirq
    runs a pending NET_RX inline even while ksoftirqd is awake (up to v4.8, and since
    v6.5; kernel/softirq.c), on the interrupted task's time; v4.9-v6.4 leave it to
    ksoftirqd. Served at the segment's end, as every interrupt during a segment is."""
    sd = s.sd
    if not sd.cpu[c].ksoftirqd or not sd.cpu[c].softirq_pending or s.p.ksoftirqd_defers:
        return
    if jiffies(s, sd.cpu[c].seg_t0) == jiffies(s, t):
        return
    sd.cpu[c].ksoftirqd = 0
    if kind == SEG_APP:
        sd.cpu[c].bh_inline, sd.cpu[c].bh_task = BH_APP, sd.cpu[c].seg_arg
    elif kind == SEG_NAPI_THREAD:
        sd.cpu[c].bh_inline, sd.cpu[c].bh_task = BH_NAPI_THREAD, sd.cpu[c].seg_arg


@njit(**JIT_HELPER)
def dispatch(s, c, t):
    """CPU c finished its segment at t: bookkeeping, then start the next segment.

    Every NAPI poll, in softirq or in a NAPI kthread, goes through the one call of
    ``napi_poll`` at the end, so the receive path is inlined into the loop once. A driver
    poll that paused at the end of a chunk goes on through that same call: an event at
    this dispatch's time, ahead of every other event then, so it is the first thing the
    next chunk runs, in the same order of effects as without a chunk boundary."""
    sd, pz = s.sd, s.nic.pause[0]
    sd.cpu[c].ev_pending = 0
    t_ev = t  # no pending event is earlier, no arrival of the next chunk as early
    thread = ctx = was_ks = np.int64(0)
    budget = np.int64(s.p.napi_weight)
    if pz.on:
        # the paused poll (napi_poll resumes it), as its segment started
        napi, thread, t, ctx, was_ks = pz.q, pz.thread, pz.t0, pz.ctx, pz.was_ks
    else:
        p0 = prof_start()
        kind = sd.cpu[c].seg_kind
        sd.cpu[c].seg_kind = SEG_NONE
        if kind == SEG_NAPI:
            t0 = t
            ctx = sd.cpu[c].seg_ctx
            t = napi_segment_end(s, c, sd.cpu[c].seg_arg, t)
            account(s, c, ctx, t0, t)
            if ctx == T_SOFTIRQ:
                bh_task_time(s, c, t - t0)
        elif kind == SEG_APP:
            t = app_after_read(s, c, sd.cpu[c].seg_arg, t)
            if sd.cpu[c].bh_inline:
                # the read's local_bh_enable runs the pending softirq (socket.py
                # bh_enable_runs_softirq): inline, whether or not ksoftirqd is awake
                sd.cpu[c].ksoftirqd = 0
            else:
                tick_irq_exit(s, c, kind, t)
        elif kind == SEG_CPUMAP:
            cpumap_after_batch(s, sd.cpu[c].seg_arg, t)
            tick_irq_exit(s, c, kind, t)
        elif kind == SEG_KWORKER:
            kworker_after(s, t)
            tick_irq_exit(s, c, kind, t)
        elif kind == SEG_BUSY_SPIN:
            t = busy_spin_end(s, c, sd.cpu[c].seg_arg, t)
        elif kind == SEG_BUSY_POLL:
            busy_poll_seg_end(s, c, sd.cpu[c].seg_arg, t)
        elif kind == SEG_NAPI_THREAD:
            napi_thread_after(s, c, sd.cpu[c].seg_arg, t)
            tick_irq_exit(s, c, kind, t)
            if sd.cpu[c].softirq_pending and not (sd.cpu[c].ksoftirqd
                                                  and s.p.ksoftirqd_defers):
                # the pass's local_bh_enable runs what its poll raised here (a local
                # backlog) inline, on the kthread's time
                sd.cpu[c].bh_inline = BH_NAPI_THREAD
                sd.cpu[c].bh_task = sd.cpu[c].seg_arg
                sd.cpu[c].ksoftirqd = 0
        if sd.cpu[c].wake_debt > 0:
            # wake-ups of threads elsewhere the segment did (rxlab.kernel.wake)
            debt = sd.cpu[c].wake_debt
            account(s, c, sd.cpu[c].wake_ctx, t, t + debt)
            if sd.cpu[c].wake_ctx == T_KSOFTIRQD:
                sd.cpu[c].ks_vrt += debt
            elif sd.cpu[c].wake_ctx == T_SOFTIRQ:
                bh_task_time(s, c, debt)
            elif kind == SEG_CPUMAP:
                s.cm.entry[sd.cpu[c].seg_arg].kt_vrt += debt
                s.cm.entry[sd.cpu[c].seg_arg].kt_ns += debt
            elif kind == SEG_NAPI_THREAD:
                s.nic.thread[sd.cpu[c].seg_arg].nt_vrt += debt
                s.nic.thread[sd.cpu[c].seg_arg].nt_ns += debt
            t += debt
            sd.cpu[c].wake_debt = 0
        if sd.cpu[c].irq_debt > 0:
            account(s, c, T_HARDIRQ, t, t + sd.cpu[c].irq_debt)
            t += sd.cpu[c].irq_debt
            sd.cpu[c].irq_debt = 0
        prof_stop(s, P_SEGMENT_END, p0)
        p0 = prof_start()
        who = pick_next(s, c, t)
        prof_stop(s, P_PICK_NEXT, p0)
        if who != SCHED_SOFTIRQ:
            sd.cpu[c].bh_inline = 0  # the reader's do_softirq has returned
        th = np.int64(-1)
        if s.p.busy_poll_on and who != SCHED_SOFTIRQ:
            # a thread's busy loop takes its turn (out of line: only these scenarios)
            napi, th = busy_poll_turn(s, c, who, t)
            if napi == BP_DONE:
                return
            if napi >= 0:
                thread, ctx, t_ev = POLL_BUSY, th, t
                budget = busy_poll_budget(s, s.so.thread[th].thread_sock)
        if thread == POLL_BUSY:
            pass
        elif who == SCHED_NAPI_THREAD:
            thread, napi, t_ev = POLL_KTHREAD, napi_thread_next(s, c), t
        elif who != SCHED_SOFTIRQ and who != SCHED_KSOFTIRQD:
            p0 = prof_start()
            run_thread(s, c, who, th, t)
            prof_stop(s, P_RUN_THREAD, p0)
            return
        else:
            was_ks = sd.cpu[c].ksoftirqd
            ctx = softirq_context(s, c)
            p0 = prof_start()
            napi, t_end = net_rx_action_next(s, c, t)  # -1: net_rx_action returned
            prof_stop(s, P_RX_ACTION_NEXT, p0)
    if napi >= 0:
        p0 = prof_start()
        if thread == POLL_BUSY:
            sd.cpu[c].ev_pending = 1  # the poll's own segment: nothing kicks it meanwhile
        work, t_end, paused = napi_poll(s, c, napi, t, budget)
        prof_stop(s, P_NAPI_POLL, p0)
        if paused:
            # the driver poll waits for the next chunk's arrivals
            pz.on, pz.thread, pz.t0, pz.ctx, pz.was_ks = 1, thread, t, ctx, was_ks
            sd.cpu[c].ev_pending = 1
            schedule(s.ev, t_ev, PRIO_FIRST, EV_CPU, c)
            return
        if thread == POLL_KTHREAD:
            napi_thread_pass(s, c, napi, t, t_end, work)
            return
        if thread == POLL_BUSY:
            busy_poll_pass(s, c, ctx, napi, t, t_end, work)
            return
        sd.cpu[c].seg_work = work
    p0 = prof_start()
    softirq_segment(s, c, t, t_end, napi, ctx, was_ks)
    prof_stop(s, P_SOFTIRQ_SEGMENT, p0)


@njit(**JIT_HELPER)
def run_thread(s, c, who, th, t):
    """Start the segment of the thread ``pick_next`` chose on CPU c (not softirq; ``th``:
    the application thread, when busy polling's turn has chosen it already, else -1)."""
    sd, so, ev = s.sd, s.so, s.ev
    if who == SCHED_CPUMAP_KTHREAD:
        e = s.p.cpu[c].cm_entry
        t_end = cpumap_kthread_step(s, c, e, t)
        account(s, c, T_SYSTEM, t, t_end)
        s.cm.entry[e].kt_vrt += t_end - t
        s.cm.entry[e].kt_ns += t_end - t
        sd.cpu[c].seg_kind = SEG_CPUMAP
        sd.cpu[c].seg_t0 = t
        sd.cpu[c].seg_arg = e
        sd.cpu[c].ev_pending = 1
        schedule(ev, t_end, PRIO_CPU, EV_CPU, c)
    elif who == SCHED_KWORKER:
        t_end = kworker_step(s, c, t)  # the driver's aRFS work: system time on c
        account(s, c, T_SYSTEM, t, t_end)
        sd.cpu[c].kw_vrt += t_end - t
        sd.cpu[c].kw_ns += t_end - t
        sd.cpu[c].seg_kind = SEG_KWORKER
        sd.cpu[c].seg_t0 = t
        sd.cpu[c].ev_pending = 1
        schedule(ev, t_end, PRIO_CPU, EV_CPU, c)
    elif who == SCHED_APP:
        if th < 0:
            th = app_next(s, c)
        t_end, n, sys_ns, user_ns = app_read(s, th, t)
        account(s, c, T_SYSTEM, t, t + sys_ns)
        account(s, c, T_USER, t + sys_ns, t_end)
        sd.cpu[c].app_vrt += t_end - t
        so.thread[th].th_ns += t_end - t
        sd.cpu[c].seg_kind = SEG_APP
        sd.cpu[c].seg_t0 = t
        sd.cpu[c].seg_arg = th
        sd.cpu[c].ev_pending = 1
        schedule(ev, t_end, PRIO_CPU, EV_CPU, c)
    # else (SCHED_IDLE): idle until an interrupt, IPI or wake-up kicks it


@njit(**JIT_STATE)
def bh_task_time(s, c, ns):
    """Inline softirq time on CPU c: the task whose local_bh_enable runs it has it in its
    /proc/PID/stat (tick-based accounting); at irq exit it is no task's."""
    sd = s.sd
    if sd.cpu[c].bh_inline == BH_APP:
        s.so.thread[sd.cpu[c].bh_task].th_bh_ns += ns
    elif sd.cpu[c].bh_inline == BH_NAPI_THREAD:
        s.nic.thread[sd.cpu[c].bh_task].nt_bh_ns += ns


@njit(**JIT_STATE)
def softirq_segment(s, c, t, t_end, napi, ctx, was_ks):
    """A softirq segment [t, t_end) has run on CPU c: charge it, end it at t_end."""
    sd = s.sd
    account(s, c, ctx, t, t_end)
    sd.cpu[c].seg_ctx = ctx  # also the context of wake-ups it owes (rxlab.kernel.wake)
    if was_ks:
        sd.cpu[c].ks_vrt += t_end - t
    elif sd.cpu[c].bh_inline == BH_APP:
        sd.cpu[c].app_vrt += t_end - t  # inside the reader's syscall: its runtime
    elif sd.cpu[c].bh_inline == BH_NAPI_THREAD:
        s.nic.thread[sd.cpu[c].bh_task].nt_vrt += t_end - t
    if ctx == T_SOFTIRQ:
        bh_task_time(s, c, t_end - t)
    if sd.cpu[c].ksoftirqd and not was_ks:
        if not sd.cpu[c].ks_running:
            # wakeup_softirqd at the end of handle_softirqs: the fair class places it
            sd.cpu[c].ks_vrt = place_woken(s, c, np.int64(SCHED_KSOFTIRQD), sd.cpu[c].ks_vrt,
                                           sd.cpu[c].ks_lag)
            wake_preempt(s, c, sd.cpu[c].ks_vrt)
        sd.cpu[c].ks_running = 1
    if napi >= 0:
        sd.cpu[c].seg_kind = SEG_NAPI
        sd.cpu[c].seg_arg = napi
        sd.cpu[c].seg_ctx = ctx
    sd.cpu[c].ev_pending = 1
    schedule(s.ev, t_end, PRIO_CPU, EV_CPU, c)


@njit(**JIT_STATE_OUTLINE)
def migrate_thread(s, th, t):
    """Move a thread to another CPU (an explicit move, or a random one every period)."""
    p, so = s.p, s.so
    k = so.thread[th].th_mig_k
    new = -1
    if k < so.thread[th].mig_n:
        new = p.mig_cpu[th, k]
        so.thread[th].th_mig_k = k + 1
        if k + 1 < so.thread[th].mig_n:
            schedule(s.ev, p.mig_t[th, k + 1], PRIO_WAKE, EV_MIGRATE, th)
    elif so.thread[th].mig_every_ns > 0:
        n = so.thread[th].mig_set_n
        new = p.mig_set[th, np.int64(uniform(s.st.rng) * n) % n]
        schedule(s.ev, t + so.thread[th].mig_every_ns, PRIO_WAKE, EV_MIGRATE, th)
    old = so.thread[th].thread_cpu
    if new < 0 or new == old:
        return
    # unlink from the old CPU's list, append to the new one's
    m = so.cpu_nthreads[old]
    for i in range(m):
        if so.cpu_threads[old, i] == th:
            so.cpu_threads[old, i] = so.cpu_threads[old, m - 1]
            so.cpu_nthreads[old] = m - 1
            break
    so.cpu_threads[new, so.cpu_nthreads[new]] = th
    so.cpu_nthreads[new] += 1
    so.thread[th].thread_cpu = new
    so.thread[th].th_migrations += 1
    if so.thread[th].th_state == TH_RUNNABLE:
        kick_cpu(s, new, t)


@njit(**JIT_HELPER)
def handle_event(s, t, kind, arg):
    p, sd, so = s.p, s.sd, s.so
    if kind == EV_CPU:
        dispatch(s, arg, t)
    elif kind == EV_IRQ:
        c = p.queue[arg].irq_cpu
        s.nic.queue[arg].q_irqs += 1
        if p.busy_poll_on and s.nic.queue[arg].q_sched:
            # a busy poll holds the NAPI: napi_schedule_prep fails (NAPI_STATE_MISSED)
            sd.cpu[c].irq_debt += cost(s, C_HARDIRQ)
            kick_cpu(s, c, t)
        else:
            interrupt(s, c, arg, cost(s, C_HARDIRQ), t)
    elif kind == EV_IPI:
        sd.cpu[arg].received_rps += 1  # rps_trigger_softirq on the target
        interrupt(s, arg, p.nq + arg, cost(s, C_IPI_RECV), t)
    elif kind == EV_WAKE:
        if so.thread[arg].th_state == TH_WAKING:
            c = so.thread[arg].thread_cpu
            if not has_runnable_thread(s, c):  # the CPU's application entity wakes
                sd.cpu[c].app_vrt = place_woken(s, c, np.int64(SCHED_APP), sd.cpu[c].app_vrt,
                                                sd.cpu[c].app_lag)
            so.thread[arg].th_state = TH_RUNNABLE
            ttwu_arrive(s, so.thread[arg].th_waker, c)
            wake_preempt(s, c, sd.cpu[c].app_vrt)
            kick_cpu(s, c, t)
    elif kind == EV_MIGRATE:
        migrate_thread(s, arg, t)
    elif kind == EV_ARFS_SVC:
        if kworker_wake(s, arg, t):
            kick_cpu(s, arg, t)
    elif kind == EV_CPUMAP_WAKE:
        if s.cm.entry[arg].kt_state == TH_WAKING:
            c = p.cpumap[arg].cpu
            ent = s.cm.entry
            ent[arg].kt_vrt = place_woken(s, c, np.int64(SCHED_CPUMAP_KTHREAD), ent[arg].kt_vrt,
                                          ent[arg].kt_lag)
            ent[arg].kt_state = TH_RUNNABLE
            ttwu_arrive(s, ent[arg].flush_cpu, c)
            wake_preempt(s, c, ent[arg].kt_vrt)
            kick_cpu(s, c, t)
    elif kind == EV_ARFS_TIMER:
        service_timer(s, t)
    elif kind == EV_NAPI_WAKE:
        napi_thread_arrive(s, arg, t)
    elif kind == EV_NAPI_TIMER:
        # napi_watchdog: __napi_schedule_irqoff on the CPU that armed the hrtimer
        c = napi_watchdog(s, arg, t)
        if c >= 0:
            if s.nic.queue[arg].q_sched:  # a busy poll holds it: test_and_set_bit fails
                sd.cpu[c].irq_debt += cost(s, C_NAPI_WATCHDOG)
                kick_cpu(s, c, t)
            else:
                s.nic.queue[arg].q_prefer = 0
                interrupt(s, c, arg, cost(s, C_NAPI_WATCHDOG), t)
    elif kind == EV_BUSY_POLL:
        busy_poll_kick(s, arg, t)


@njit(**JIT_LEAF)
def run(s, t_until):
    """Merge the chunk of arrivals in ``s.wire`` with the calendar.

    With ``t_until < 0`` stop when the chunk is consumed (events at or after the last
    arrival wait for the next chunk, whose arrivals cannot be earlier); otherwise (the
    last call: no arrivals follow) run the calendar up to ``t_until`` after the last
    arrival. A driver poll that cleans its ring takes arrivals from the same cursor.
    """
    ev, w = s.ev, s.wire
    n = w.t_nic.size
    i = w.pos[W_NEXT]  # kept in a register between events; a driver poll may move it
    t_run = prof_start()
    while True:
        te = peek_time(ev)
        if i < n:
            if w.t_nic[i] <= te:
                t0 = prof_start()
                ingest(s, w.flow[i], w.length[i], w.t_wire[i], w.t_nic[i], w.overrun[i])
                prof_stop(s, P_INGEST, t0)
                i += 1
                continue
        elif t_until < 0 or te > t_until:
            w.pos[W_NEXT] = i
            prof_stop(s, P_RUN, t_run)
            return
        w.pos[W_NEXT] = i
        t, kind, arg = pop(ev)
        t0 = prof_start()
        handle_event(s, t, kind, arg)
        prof_stop(s, P_EV0 + kind - 1, t0)
        i = w.pos[W_NEXT]


@njit(**JIT_LEAF)
def nic_wait(st, t_wire, t_nic, overrun, svc_ns):
    """The wait in the NIC's FIFO (before its own service time) of each packet it kept."""
    if svc_ns == 0:  # no ceiling: no FIFO, nothing waits (and nothing overruns)
        st.lat_nic[hist_index(np.int64(0))] += t_nic.size
        return
    for i in range(t_nic.size):
        if not overrun[i]:
            d = t_nic[i] - svc_ns - t_wire[i]
            st.lat_nic[hist_index(d)] += 1
            st.lat_sum[LAT_NIC] += d


def feed(sim, t_wire, t_nic, flow, length, overrun, t_until=-1):
    """Run the loop over one chunk of shaped arrivals (``shape``); ``t_until >= 0`` on
    the last call, with no arrivals after it."""
    w = Arrivals(t_wire, t_nic, flow, length, overrun,
                 np.array([0, 1 if t_until >= 0 else 0], np.int64))
    if t_nic.size:
        nic_wait(sim.st, t_wire, t_nic, overrun, sim.p.nic_svc_ns)
    run(sim._replace(wire=w), t_until)


def feed_end(sim, t_until):
    """The last call: run the calendar to ``t_until`` with no arrivals left."""
    e = np.empty(0, np.int64)
    i = np.empty(0, np.int32)
    feed(sim, e, e, i, i, np.empty(0, np.bool_), t_until)
