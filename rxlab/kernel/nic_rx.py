"""The NIC side of the receive path: a shaped arrival takes a descriptor (``ingest``),
or a non-NAPI device hands it to a backlog (``netif_rx``).

Arrivals stream beside the calendar (``rx_loop.run``); a driver poll that keeps
cleaning its ring ingests the arrivals that reach the NIC while it runs
(``ingest_until``), from the same stream and cursor, so no arrival is taken twice or
skipped.
"""

import numpy as np
from numba import njit

from rxlab.config import JIT_STATE, JIT_STATE_OUTLINE
from rxlab.engine.core import PRIO_HARDIRQ, schedule
from rxlab.kernel.accounting import cost, drop, interval_of
from rxlab.kernel.backlog import enqueue_to_backlog, net_rps_send_ipi
from rxlab.kernel.busy_poll import wake_busy_poller
from rxlab.kernel.counters import CNT_BAD_QUEUE, CNT_GOOD_QUEUE, CNT_OFFERED, TS_OFFERED
from rxlab.kernel.drop_reasons import DROP_NIC_OVERRUN, DROP_RING_FULL
from rxlab.kernel.events import EV_IRQ
from rxlab.kernel.rps import get_rps_cpu
from rxlab.kernel.stages import C_DRIVER_RX, C_RPS_ENQUEUE
from rxlab.kernel.state import W_LAST, W_NEXT, NicState
from rxlab.kernel.wake import kick_cpu
from rxlab.nic.arfs_steer import flow_rx_queue


def new_nic_state(declared: dict) -> NicState:
    """Empty rx rings as rxlab/mechanisms/nic.py declares them (``declared``: its
    ``Array``s), no poll paused, and every NAPI's kthread (the nq queues', then the ncpu
    backlogs') asleep with no re-wake due."""
    nic = NicState(**{name: a.zeros() for name, a in declared.items()})
    nic.thread["nt_rewake"] = -1
    for field in ("timer_at", "q_bp_owner", "q_bp_waiter"):
        nic.queue[field] = -1
    return nic


@njit(**JIT_STATE)
def ring_limit(s, q, t):
    """The position below which the NIC may write a descriptor at time t.

    The driver gives descriptors back in its own batches (``refill`` in rxlab/drivers.py),
    each stamped with the time it did; the NIC sees the tail the driver wrote: given back
    + ring size - the slots the driver keeps empty, rounded down as the tail register
    takes it. Stamps rise with the position, so the scan resumes where it stopped.
    """
    p, nic = s.p, s.nic
    rel = nic.queue[q].ring_rel
    while rel < nic.queue[q].ring_ret and nic.ring[q, rel & p.ring_mask].stamp <= t:
        rel += 1
    nic.queue[q].ring_rel = rel
    lim = (rel + p.ring_size - p.refill_keep) // p.refill_align * p.refill_align
    nic.queue[q].ring_lim = lim
    return lim


@njit(**JIT_STATE)
def ingest(s, f, length, t_wire, t, overrun):
    """A packet leaves the NIC's FIFO at t: take a free descriptor or drop (ring full)."""
    p, nic, so, st, ev = s.p, s.nic, s.so, s.st, s.ev
    st.cnt[CNT_OFFERED] += 1
    st.ts_pkt[interval_of(s, t), TS_OFFERED] += 1
    seq = so.flow[f].flow_next_seq
    so.flow[f].flow_next_seq = seq + 1
    if overrun:
        drop(s, DROP_NIC_OVERRUN, t)
        return
    q = flow_rx_queue(s, f)
    sk = p.flow[f].flow_sock
    if sk >= 0 and t >= p.warmup_ns:
        # good: the queue's interrupt lands where the flow's consumer runs now
        if p.queue[q].irq_cpu == so.thread[so.sock[sk].sock_thread].thread_cpu:
            st.cnt[CNT_GOOD_QUEUE] += 1
        else:
            st.cnt[CNT_BAD_QUEUE] += 1
    if p.netif_rx:
        netif_rx(s, q, f, length, t_wire, t, seq)
        return
    # the limit the NIC saw last can only understate what is free now: look again only
    # when it says full (the outcome is the same as looking at every arrival)
    if (nic.queue[q].ring_tail >= nic.queue[q].ring_lim
            and nic.queue[q].ring_tail >= ring_limit(s, q, t)):
        nic.queue[q].q_drops += 1
        drop(s, DROP_RING_FULL, t)
        return
    slot = nic.queue[q].ring_tail & p.ring_mask
    skb = nic.ring[q, slot]
    skb.flow = f
    skb.tarr = t_wire
    skb.stamp = t  # the descriptor is written back (DD bit) at t
    skb.seq = seq
    skb.len = length
    nic.queue[q].ring_tail += 1
    nic.queue[q].q_packets += 1
    if nic.queue[q].napi_sched == 0:
        nic.queue[q].napi_sched = 1  # interrupt raised; masked until napi_complete_done
        schedule(ev, t + p.irq_delay_ns, PRIO_HARDIRQ, EV_IRQ, q)
    if p.busy_poll_on and nic.queue[q].q_bp_owner >= 0:
        wake_busy_poller(s, nic.queue[q].q_bp_owner, t)  # its next round polls it



@njit(**JIT_STATE)
def ingest_next(s):
    """Ingest the stream's next arrival."""
    w = s.wire
    i = w.pos[W_NEXT]
    w.pos[W_NEXT] = i + 1
    ingest(s, w.flow[i], w.length[i], w.t_wire[i], w.t_nic[i], w.overrun[i])


@njit(**JIT_STATE_OUTLINE)
def ingest_until(s, t):
    """A driver poll at t re-reads a descriptor its ring does not hold yet: ingest every
    arrival that reached the NIC by t, in order, whatever its queue. Returns 1 if one did
    or the next is later (the answer is known), 0 if the chunk ran out first and more
    arrivals may follow (the poll must wait for them)."""
    w = s.wire
    n = w.t_nic.size
    while w.pos[W_NEXT] < n and w.t_nic[w.pos[W_NEXT]] <= t:
        ingest_next(s)
    if w.pos[W_NEXT] < n or w.pos[W_LAST] != 0:
        return 1
    return 0


@njit(**JIT_STATE)
def netif_rx(s, q, f, length, t_wire, t, seq):
    """A device without NAPI polling (veth, tun, legacy drivers): ``netif_rx()``.

    Every packet goes straight to a backlog from the receiving context on the queue's
    CPU, so no driver poll limits how fast one flow reaches the backlog (net/core/dev.c:
    netif_rx -> netif_rx_internal -> enqueue_to_backlog).
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
    sd.cpu[c].irq_debt += enqueue_to_backlog(s, c, cpu, p.flow[f].flow_hash, f, t_wire, seq,
                                             length, t, rq, rs)
    if sd.cpu[c].ipi_n > 0:
        net_rps_send_ipi(s, c, t)  # simplification: sent at once, not at softirq end
    kick_cpu(s, c, t)  # charges the receive work now, runs the softirq if one is pending
