"""NAPI: the driver poll and ``net_rx_action()`` with budget, time limit, repoll and the
softirq restart / ksoftirqd hand-off (reference sec. 7).

One NAPI poll is one CPU segment: ``net_rx_action_step`` starts it and
``napi_segment_end`` does what net_rx_action does after ``__napi_poll`` returns.
NAPI ids: rx queue ``q`` (driver) or ``nq + cpu`` (that CPU's backlog).
"""

import numpy as np
from numba import njit

from rxlab.config import JIT_STATE
from rxlab.engine.core import PRIO_HARDIRQ, schedule
from rxlab.kernel.accounting import cost
from rxlab.kernel.backlog import enqueue_to_backlog, process_backlog
from rxlab.kernel.constants import MAX_SOFTIRQ_RESTART
from rxlab.kernel.events import EV_IPI, EV_IRQ
from rxlab.kernel.rps import get_rps_cpu
from rxlab.kernel.sched import need_resched
from rxlab.kernel.socket import netif_receive_skb_core
from rxlab.kernel.state import (
    C_DRIVER_RX,
    C_GRO,
    C_IPI_LATENCY,
    C_IPI_SEND,
    C_NAPI_POLL,
    C_RPS_ENQUEUE,
    T_KSOFTIRQD,
    T_SOFTIRQ,
    XDP_PASS,
)
from rxlab.xdp.cpumap import xdp_do_flush
from rxlab.xdp.program import xdp_rx


@njit(**JIT_STATE)
def jiffies(s, t):
    p = s.p
    return t // p.jiffy_ns


@njit(**JIT_STATE)
def driver_poll(s, c, q, t):
    """The driver's NAPI poll of rx queue q: up to napi_weight descriptors."""
    p, nic = s.p, s.nic
    nic.queue[q].q_polls += 1
    n = min(nic.queue[q].ring_tail - nic.queue[q].ring_head, p.napi_weight)
    for _ in range(n):
        idx = nic.queue[q].ring_head
        slot = idx & p.ring_mask
        skb = nic.ring[q, slot]
        skb.stamp = t  # the descriptor goes back to the NIC from now on
        nic.queue[q].ring_head = idx + 1
        f = skb.flow
        tarr = skb.tarr
        seq = skb.seq
        length = skb.len
        if p.xdp_on:
            act, t = xdp_rx(s, c, q, f, tarr, seq, length, t)
            if act != XDP_PASS:
                continue
        t += cost(s, C_DRIVER_RX) + cost(s, C_GRO)
        cpu = rq = rs = np.int64(-1)
        if p.rps_needed:
            cpu, rq, rs, spent = get_rps_cpu(s, q, p.flow[f].flow_hash, f, t)
            t += spent
        if cpu >= 0:
            # netif_receive_skb with RPS: always through a backlog, even the local one
            t += cost(s, C_RPS_ENQUEUE)
            enqueue_to_backlog(s, c, cpu, p.flow[f].flow_hash, f, tarr, seq, length, t, rq, rs)
        else:
            t = netif_receive_skb_core(s, c, c, f, tarr, seq, length, t)
    if p.xdp_on:
        t = xdp_do_flush(s, c, t)  # the driver's xdp_do_flush() at the end of its poll
    return n, t


@njit(**JIT_STATE)
def net_rps_send_ipi(s, c, t):
    """Send the IPIs queued on CPU c's rps_ipi_list; returns the time after sending."""
    sd, ev = s.sd, s.ev
    for k in range(sd.cpu[c].ipi_n):
        t += cost(s, C_IPI_SEND)
        schedule(ev, t + cost(s, C_IPI_LATENCY), PRIO_HARDIRQ, EV_IPI,
                 sd.rps_ipi_list[c, k])
    sd.cpu[c].ipi_n = 0
    return t


@njit(**JIT_STATE)
def _take_poll_list(s, c):
    """list_splice_init(&sd->poll_list, &list): net_rx_action's private list."""
    sd = s.sd
    n = sd.cpu[c].pl_n
    for k in range(n):
        sd.local_list[c, k] = sd.poll_list[c, k]
    sd.cpu[c].ll_pos = 0
    sd.cpu[c].ll_n = n
    sd.cpu[c].pl_n = 0


@njit(**JIT_STATE)
def net_rx_action_step(s, c, t):
    """Run the next NAPI poll of net_rx_action on CPU c at time t.

    Returns (segment end time, napi id); napi id -1 means net_rx_action returned.
    """
    p, sd = s.p, s.sd
    if not sd.cpu[c].in_rx_action:
        if not sd.cpu[c].hs_active and not sd.cpu[c].ksoftirqd:
            # handle_softirqs(): restart window of MAX_SOFTIRQ_TIME, MAX_SOFTIRQ_RESTART
            sd.cpu[c].hs_active = 1
            sd.cpu[c].hs_end_j = jiffies(s, t) + p.max_softirq_jiffies
            sd.cpu[c].hs_restart = MAX_SOFTIRQ_RESTART
        sd.cpu[c].in_rx_action = 1
        sd.cpu[c].softirq_pending = 0
        sd.cpu[c].budget = p.netdev_budget
        sd.cpu[c].time_limit_j = jiffies(s, t) + p.budget_jiffies
        _take_poll_list(s, c)
    while sd.cpu[c].ll_pos >= sd.cpu[c].ll_n:
        if sd.cpu[c].rp_n == 0 and sd.cpu[c].pl_n > 0:
            _take_poll_list(s, c)  # the poll list was refilled meanwhile: goto start
            continue
        return finish_rx_action(s, c, t), -1
    napi = sd.local_list[c, sd.cpu[c].ll_pos]
    sd.cpu[c].ll_pos += 1
    t += cost(s, C_NAPI_POLL)
    if napi < p.nq:
        work, t = driver_poll(s, c, napi, t)
    else:
        work, t = process_backlog(s, c, t, p.dev_rx_weight)
    sd.cpu[c].seg_work = work
    return t, napi


@njit(**JIT_STATE)
def napi_segment_end(s, c, napi, t):
    """What net_rx_action does after __napi_poll returned ``seg_work`` packets."""
    p, nic, sd, ev = s.p, s.nic, s.sd, s.ev
    work = sd.cpu[c].seg_work
    weight = p.napi_weight if napi < p.nq else p.dev_rx_weight
    if work >= weight:
        sd.repoll[c, sd.cpu[c].rp_n] = napi  # still owned: polled again next round
        sd.cpu[c].rp_n += 1
    elif napi < p.nq:
        # napi_complete_done: interrupts re-enabled; descriptors that arrived during the
        # poll raise the interrupt again at once
        nic.queue[napi].napi_sched = 0
        if nic.queue[napi].ring_tail > nic.queue[napi].ring_head:
            nic.queue[napi].napi_sched = 1
            schedule(ev, t + p.irq_delay_ns, PRIO_HARDIRQ, EV_IRQ, napi)
    sd.cpu[c].budget -= work
    if sd.cpu[c].budget <= 0 or jiffies(s, t) >= sd.cpu[c].time_limit_j:
        sd.cpu[c].time_squeeze += 1
        return finish_rx_action(s, c, t)
    return t


@njit(**JIT_STATE)
def finish_rx_action(s, c, t):
    """End of net_rx_action: requeue leftovers, send RPS IPIs, restart or defer."""
    sd = s.sd
    # remaining = rest of our list + newly scheduled + repoll, in that order; built in
    # place: the rest of our list moves to the front of local_list first
    n = 0
    for k in range(sd.cpu[c].ll_pos, sd.cpu[c].ll_n):
        sd.local_list[c, n] = sd.local_list[c, k]
        n += 1
    for k in range(sd.cpu[c].pl_n):
        sd.local_list[c, n] = sd.poll_list[c, k]
        n += 1
    for k in range(sd.cpu[c].rp_n):
        sd.local_list[c, n] = sd.repoll[c, k]
        n += 1
    for k in range(n):
        sd.poll_list[c, k] = sd.local_list[c, k]
    sd.cpu[c].pl_n = n
    sd.cpu[c].ll_n = 0
    sd.cpu[c].ll_pos = 0
    sd.cpu[c].rp_n = 0
    sd.cpu[c].in_rx_action = 0
    t = net_rps_send_ipi(s, c, t)
    if n > 0:
        sd.cpu[c].softirq_pending = 1
        if sd.cpu[c].hs_active:
            sd.cpu[c].hs_restart -= 1
            if (
                jiffies(s, t) >= sd.cpu[c].hs_end_j
                or sd.cpu[c].hs_restart <= 0
                or need_resched(s, c)
            ):
                sd.cpu[c].hs_active = 0
                sd.cpu[c].ksoftirqd = 1  # wakeup_softirqd()
    else:
        sd.cpu[c].softirq_pending = 0
        sd.cpu[c].hs_active = 0
        sd.cpu[c].ksoftirqd = 0  # nothing left: ksoftirqd goes back to sleep
    return t


@njit(**JIT_STATE)
def softirq_context(s, c):
    sd = s.sd
    return T_KSOFTIRQD if sd.cpu[c].ksoftirqd else T_SOFTIRQ
