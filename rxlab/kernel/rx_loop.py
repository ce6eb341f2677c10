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
from rxlab.engine.core import PRIO_CPU, PRIO_HARDIRQ, PRIO_WAKE, peek_time, pop, schedule
from rxlab.engine.rng import uniform
from rxlab.kernel.accounting import account, cost, drop, interval_of
from rxlab.kernel.backlog import enqueue_to_backlog, napi_list_add
from rxlab.kernel.events import (
    EV_ARFS_SVC,
    EV_ARFS_TIMER,
    EV_CPU,
    EV_CPUMAP_WAKE,
    EV_IPI,
    EV_IRQ,
    EV_MIGRATE,
    EV_WAKE,
)
from rxlab.kernel.napi import (
    napi_segment_end,
    net_rps_send_ipi,
    net_rx_action_step,
    softirq_context,
)
from rxlab.kernel.rps import get_rps_cpu
from rxlab.kernel.sched import (
    SCHED_APP,
    SCHED_CPUMAP_KTHREAD,
    SCHED_KSOFTIRQD,
    SCHED_KWORKER,
    SCHED_SOFTIRQ,
    pick_next,
)
from rxlab.kernel.socket import app_after_read, app_read
from rxlab.kernel.state import (
    C_DRIVER_RX,
    C_HARDIRQ,
    C_IPI_RECV,
    C_RPS_ENQUEUE,
    CNT_BAD_QUEUE,
    CNT_GOOD_QUEUE,
    CNT_OFFERED,
    DROP_NIC_OVERRUN,
    DROP_RING_FULL,
    SEG_APP,
    SEG_CPUMAP,
    SEG_KWORKER,
    SEG_NAPI,
    SEG_NONE,
    T_HARDIRQ,
    T_SYSTEM,
    T_USER,
    TH_RUNNABLE,
    TH_WAKING,
    TS_OFFERED,
)
from rxlab.nic.arfs import kworker_after, kworker_step, kworker_wake, service_timer
from rxlab.xdp.cpumap import cpumap_after_batch, cpumap_kthread_step


@njit(**JIT_LEAF)
def shape(t_gen, length, link_ps_per_byte, svc_ns, fifo, port_state, t_nic, overrun):
    """Wire serialisation (FIFO at line rate) and the NIC's packet-rate ceiling.

    ``port_state`` = [wire_free, nic_free] carries across chunks. Order is preserved, so
    ``t_nic`` stays non-decreasing. A packet that would wait behind more than ``fifo``
    packets at the NIC ceiling is an overrun drop.
    """
    wire_free = port_state[0]
    nic_free = port_state[1]
    for i in range(t_gen.size):
        # preamble + SFD + inter-frame gap: 20 bytes beyond the frame (line-rate rule)
        ser = ((length[i] + 20) * link_ps_per_byte) // 1000
        start = max(t_gen[i], wire_free)
        wire_free = start + ser
        t = wire_free
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
def kick_cpu(s, c, t):
    """Make sure CPU c will dispatch at t (it is idle: no segment, no pending event)."""
    sd, ev = s.sd, s.ev
    if sd.cpu[c].ev_pending == 0:
        sd.cpu[c].ev_pending = 1
        schedule(ev, t, PRIO_CPU, EV_CPU, c)


@njit(**JIT_STATE)
def ingest(s, f, length, t, overrun):
    """A packet reaches the NIC at t: take a free descriptor or drop (ring full)."""
    p, nic, so, st, ev = s.p, s.nic, s.so, s.st, s.ev
    st.cnt[CNT_OFFERED] += 1
    st.ts_pkt[interval_of(s, t), TS_OFFERED] += 1
    seq = so.flow[f].flow_next_seq
    so.flow[f].flow_next_seq = seq + 1
    if overrun:
        drop(s, DROP_NIC_OVERRUN, t)
        return
    q = p.flow[f].flow_rxq
    if p.arfs_model != 0 and s.ar.fdir_queue[f] >= 0:
        q = s.ar.fdir_queue[f]  # an aRFS filter for this 5-tuple overrides RSS
    sk = p.flow[f].flow_sock
    if sk >= 0 and t >= p.warmup_ns:
        # good: the queue's interrupt lands where the flow's consumer runs now
        if p.queue[q].irq_cpu == so.sock[so.sock[sk].sock_thread].thread_cpu:
            st.cnt[CNT_GOOD_QUEUE] += 1
        else:
            st.cnt[CNT_BAD_QUEUE] += 1
    if p.netif_rx:
        netif_rx(s, q, f, length, t, seq)
        return
    if nic.queue[q].ring_tail - nic.queue[q].ring_rel >= p.ring_size:
        # descriptors the driver has taken by now are free again. Counted only when the
        # stale count says full: it can only overstate the occupancy, so the outcome is
        # the same as counting at every arrival (deq stamps rise with the index)
        rel = nic.queue[q].ring_rel
        while (rel < nic.queue[q].ring_head
               and nic.ring[q, rel & p.ring_mask].stamp <= t):
            rel += 1
        nic.queue[q].ring_rel = rel
        if nic.queue[q].ring_tail - rel >= p.ring_size:
            nic.queue[q].q_drops += 1
            drop(s, DROP_RING_FULL, t)
            return
    slot = nic.queue[q].ring_tail & p.ring_mask
    skb = nic.ring[q, slot]
    skb.flow = f
    skb.tarr = t
    skb.seq = seq
    skb.len = length
    nic.queue[q].ring_tail += 1
    nic.queue[q].q_packets += 1
    if nic.queue[q].napi_sched == 0:
        nic.queue[q].napi_sched = 1  # interrupt raised; masked until napi_complete_done
        schedule(ev, t + p.irq_delay_ns, PRIO_HARDIRQ, EV_IRQ, q)


@njit(**JIT_STATE)
def netif_rx(s, q, f, length, t, seq):
    """A device without NAPI polling (veth, tun, legacy drivers): ``netif_rx()``.

    Every packet goes straight to a backlog from the receiving context on the queue's
    CPU, so no driver poll limits how fast one flow reaches the backlog (reference 3.3).
    The per-packet driver work is charged as interrupt time on that CPU.
    """
    p, nic, sd = s.p, s.nic, s.sd
    c = p.queue[q].irq_cpu
    nic.queue[q].q_packets += 1
    sd.cpu[c].irq_debt += cost(s, C_DRIVER_RX)
    cpu = c
    rq = rs = np.int64(-1)
    if p.rps_needed:
        target, rq, rs, spent = get_rps_cpu(s, q, p.flow[f].flow_hash, f, t)
        sd.cpu[c].irq_debt += spent
        if target >= 0:
            cpu = target
            sd.cpu[c].irq_debt += cost(s, C_RPS_ENQUEUE)
    enqueue_to_backlog(s, c, cpu, p.flow[f].flow_hash, f, t, seq, length, t, rq, rs)
    if sd.cpu[c].ipi_n > 0:
        net_rps_send_ipi(s, c, t)  # simplification: sent at once, not at softirq end
    kick_cpu(s, c, t)  # charges the receive work now, runs the softirq if one is pending


@njit(**JIT_STATE)
def interrupt(s, c, napi, irq_cost, t):
    """Hard interrupt on CPU c that schedules a NAPI and raises NET_RX_SOFTIRQ."""
    p, sd = s.p, s.sd
    sd.cpu[c].irq_debt += irq_cost
    napi_list_add(s, c, napi)
    if sd.cpu[c].ksoftirqd and not p.ksoftirqd_defers:
        # since v6.5 irq_exit runs pending softirqs inline even while ksoftirqd is awake
        sd.cpu[c].ksoftirqd = 0
    kick_cpu(s, c, t)


@njit(**JIT_HELPER)
def dispatch(s, c, t):
    """CPU c finished its segment at t: bookkeeping, then start the next segment."""
    sd, so, ev = s.sd, s.so, s.ev
    sd.cpu[c].ev_pending = 0
    kind = sd.cpu[c].seg_kind
    sd.cpu[c].seg_kind = SEG_NONE
    if kind == SEG_NAPI:
        t0 = t
        ctx = sd.cpu[c].seg_ctx
        t = napi_segment_end(s, c, sd.cpu[c].seg_arg, t)
        account(s, c, ctx, t0, t)
    elif kind == SEG_APP:
        t = app_after_read(s, c, sd.cpu[c].seg_arg, t)
    elif kind == SEG_CPUMAP:
        cpumap_after_batch(s, sd.cpu[c].seg_arg, t)
    elif kind == SEG_KWORKER:
        kworker_after(s, t)
    if sd.cpu[c].irq_debt > 0:
        account(s, c, T_HARDIRQ, t, t + sd.cpu[c].irq_debt)
        t += sd.cpu[c].irq_debt
        sd.cpu[c].irq_debt = 0
    who, vmin = pick_next(s, c)
    if who == SCHED_SOFTIRQ or who == SCHED_KSOFTIRQD:
        was_ks = sd.cpu[c].ksoftirqd
        ctx = softirq_context(s, c)
        t_end, napi = net_rx_action_step(s, c, t)
        account(s, c, ctx, t, t_end)
        if was_ks:
            sd.cpu[c].ks_vrt += t_end - t
        if sd.cpu[c].ksoftirqd and not was_ks:
            sd.cpu[c].ks_vrt = vmin  # a woken thread starts level in CFS
        if napi >= 0:
            sd.cpu[c].seg_kind = SEG_NAPI
            sd.cpu[c].seg_arg = napi
            sd.cpu[c].seg_ctx = ctx
        sd.cpu[c].ev_pending = 1
        schedule(ev, t_end, PRIO_CPU, EV_CPU, c)
    elif who == SCHED_CPUMAP_KTHREAD:
        e = s.p.cpu[c].cm_entry
        t_end = cpumap_kthread_step(s, c, e, t)
        account(s, c, T_SYSTEM, t, t_end)
        s.cm.entry[e].kt_vrt += t_end - t
        sd.cpu[c].seg_kind = SEG_CPUMAP
        sd.cpu[c].seg_arg = e
        sd.cpu[c].ev_pending = 1
        schedule(ev, t_end, PRIO_CPU, EV_CPU, c)
    elif who == SCHED_KWORKER:
        t_end = kworker_step(s, c, t)  # the driver's aRFS work: system time on c
        account(s, c, T_SYSTEM, t, t_end)
        sd.cpu[c].kw_vrt += t_end - t
        sd.cpu[c].seg_kind = SEG_KWORKER
        sd.cpu[c].ev_pending = 1
        schedule(ev, t_end, PRIO_CPU, EV_CPU, c)
    elif who == SCHED_APP:
        nth = so.cpu_nthreads[c]
        th = -1
        for k in range(nth):
            cand = so.cpu_threads[c, (sd.cpu[c].rr + k) % nth]
            if so.sock[cand].th_state == TH_RUNNABLE:
                th = cand
                sd.cpu[c].rr = (sd.cpu[c].rr + k + 1) % nth
                break
        t_end, n, sys_ns, user_ns = app_read(s, th, t)
        account(s, c, T_SYSTEM, t, t + sys_ns)
        account(s, c, T_USER, t + sys_ns, t_end)
        sd.cpu[c].app_vrt += t_end - t
        sd.cpu[c].seg_kind = SEG_APP
        sd.cpu[c].seg_arg = th
        sd.cpu[c].ev_pending = 1
        schedule(ev, t_end, PRIO_CPU, EV_CPU, c)
    # else (SCHED_IDLE): idle until an interrupt, IPI or wake-up kicks it


@njit(**JIT_STATE_OUTLINE)
def migrate_thread(s, th, t):
    """Move a thread to another CPU (an explicit move, or a random one every period)."""
    p, so = s.p, s.so
    k = so.sock[th].th_mig_k
    new = -1
    if k < so.sock[th].mig_n:
        new = p.mig_cpu[th, k]
        so.sock[th].th_mig_k = k + 1
        if k + 1 < so.sock[th].mig_n:
            schedule(s.ev, p.mig_t[th, k + 1], PRIO_WAKE, EV_MIGRATE, th)
    elif so.sock[th].mig_every_ns > 0:
        n = so.sock[th].mig_set_n
        new = p.mig_set[th, np.int64(uniform(s.st.rng) * n) % n]
        schedule(s.ev, t + so.sock[th].mig_every_ns, PRIO_WAKE, EV_MIGRATE, th)
    old = so.sock[th].thread_cpu
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
    so.sock[th].thread_cpu = new
    so.sock[th].th_migrations += 1
    if so.sock[th].th_state == TH_RUNNABLE:
        kick_cpu(s, new, t)


@njit(**JIT_HELPER)
def handle_event(s, t, kind, arg):
    p, sd, so = s.p, s.sd, s.so
    if kind == EV_CPU:
        dispatch(s, arg, t)
    elif kind == EV_IRQ:
        c = p.queue[arg].irq_cpu
        interrupt(s, c, arg, cost(s, C_HARDIRQ), t)
    elif kind == EV_IPI:
        sd.cpu[arg].received_rps += 1  # rps_trigger_softirq on the target
        interrupt(s, arg, p.nq + arg, cost(s, C_IPI_RECV), t)
    elif kind == EV_WAKE:
        if so.sock[arg].th_state == TH_WAKING:
            so.sock[arg].th_state = TH_RUNNABLE
            kick_cpu(s, so.sock[arg].thread_cpu, t)
    elif kind == EV_MIGRATE:
        migrate_thread(s, arg, t)
    elif kind == EV_ARFS_SVC:
        if kworker_wake(s, arg, t):
            kick_cpu(s, arg, t)
    elif kind == EV_CPUMAP_WAKE:
        if s.cm.entry[arg].kt_state == TH_WAKING:
            c = p.cpumap[arg].cpu
            s.cm.entry[arg].kt_state = TH_RUNNABLE
            # CFS placement
            s.cm.entry[arg].kt_vrt = max(s.cm.entry[arg].kt_vrt, sd.cpu[c].app_vrt)
            kick_cpu(s, c, t)
    elif kind == EV_ARFS_TIMER:
        service_timer(s, t)


@njit(**JIT_LEAF)
def run(s, t_nic, flow, length, overrun, t_until):
    """Merge this chunk's arrivals with the calendar.

    With ``t_until < 0`` stop when the chunk is consumed (events at or after the last
    arrival wait for the next chunk, whose arrivals cannot be earlier); otherwise run the
    calendar up to ``t_until`` after the last arrival.
    """
    ev = s.ev
    i = 0
    n = t_nic.size
    while True:
        te = peek_time(ev)
        if i < n:
            if t_nic[i] <= te:
                ingest(s, flow[i], length[i], t_nic[i], overrun[i])
                i += 1
                continue
        elif t_until < 0 or te > t_until:
            return
        t, kind, arg = pop(ev)
        handle_event(s, t, kind, arg)

