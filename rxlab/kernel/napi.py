"""NAPI: the driver poll and ``net_rx_action()`` with budget, time limit, repoll and the
softirq restart / ksoftirqd hand-off (net/core/dev.c: net_rx_action, __napi_poll;
kernel/softirq.c: handle_softirqs).

One NAPI poll is one CPU segment: ``net_rx_action_next`` picks the NAPI, ``napi_poll``
polls it and ``napi_segment_end`` does what net_rx_action does after ``__napi_poll``
returns.
NAPI ids: rx queue ``q`` (driver) or ``nq + cpu`` (that CPU's backlog).
"""

import numpy as np
from numba import njit

from rxlab.config import JIT_STATE, JIT_STATE_OUTLINE
from rxlab.engine.core import PRIO_HARDIRQ, schedule
from rxlab.kernel.accounting import cost
from rxlab.kernel.backlog import (
    enqueue_to_backlog,
    napi_list_add,
    net_rps_send_ipi,
    process_backlog,
)
from rxlab.kernel.busy_poll import wake_busy_poller
from rxlab.kernel.constants import MAX_SOFTIRQ_RESTART
from rxlab.kernel.counters import T_KSOFTIRQD, T_SOFTIRQ
from rxlab.kernel.events import EV_IRQ
from rxlab.kernel.napi_defer import napi_defer_irqs
from rxlab.kernel.nic_rx import ingest_until
from rxlab.kernel.profile import P_ENQUEUE, P_GET_RPS_CPU, P_RECEIVE, prof_start, prof_stop
from rxlab.kernel.rps import get_rps_cpu
from rxlab.kernel.sched import SCHED_KSOFTIRQD, need_resched, sleep_lag
from rxlab.kernel.socket import netif_receive_skb_core
from rxlab.kernel.stages import C_DRIVER_RX, C_GRO, C_NAPI_POLL, C_RPS_ENQUEUE
from rxlab.kernel.state import REFILL_AFTER_LOOP, REFILL_IN_LOOP, REFILL_PER_PACKET, XDP_PASS
from rxlab.xdp.cpumap import xdp_do_flush
from rxlab.xdp.program import xdp_rx


@njit(**JIT_STATE)
def jiffies(s, t):
    p = s.p
    return t // p.jiffy_ns


@njit(**JIT_STATE)
def jiffy_start(s, j):
    """The time jiffy j begins: ``jiffies(t) >= j`` is ``t >= jiffy_start(j)``, a
    comparison where the per-poll and per-pick checks would divide."""
    return j * s.p.jiffy_ns


@njit(**JIT_STATE)
def refill(s, q, t):
    """Give every consumed descriptor back to the NIC at t (one tail write)."""
    p, nic = s.p, s.nic
    for k in range(nic.queue[q].ring_ret, nic.queue[q].ring_head):
        nic.ring[q, k & p.ring_mask].stamp = t
    nic.queue[q].ring_ret = nic.queue[q].ring_head


@njit(**JIT_STATE)
def driver_poll(s, c, q, t, work, count, phase, budget):
    """The driver's NAPI poll of rx queue q: up to ``budget`` descriptors (the NAPI
    weight; a busy poll's budget).

    Returns (work, t, paused). A poll that cleans until an unwritten descriptor
    (``poll_clean``: ice_clean_rx_irq, i40e_clean_rx_irq, ixgbe_clean_rx_irq,
    mlx5e_poll_rx_cq) re-reads the next descriptor after each packet, so a packet that
    reaches the NIC while it runs is taken in the same poll; one that reads the count
    once (mvpp2_rx: mvpp2_rxq_received) takes at most what was written when it started.
    Descriptors go back to the NIC as the driver refills (``refill_*``). ``work``,
    ``count`` and ``phase`` carry a poll that paused at the end of a traffic chunk
    (``napi_poll`` resumes it); a new poll passes 0, 0, 0.
    """
    p, nic = s.p, s.nic
    if phase == 0:
        if not p.poll_clean:
            if ingest_until(s, t) == 0:
                return _pause(s, c, q, t, work, count, phase, budget)
            # mvpp2_rxq_received: descriptors the NIC has written by now
            h = nic.queue[q].ring_head
            count = 0
            while (h + count < nic.queue[q].ring_tail and count < budget
                   and nic.ring[q, (h + count) & p.ring_mask].stamp <= t):
                count += 1
        phase = 1
    while work < budget:
        if (p.refill_where == REFILL_IN_LOOP
                and nic.queue[q].ring_head - nic.queue[q].ring_ret >= p.refill_batch):
            refill(s, q, t)  # i40e/ixgbe: at the top of an iteration, before the read
        idx = nic.queue[q].ring_head
        if p.poll_clean:
            if idx == nic.queue[q].ring_tail:
                if ingest_until(s, t) == 0:
                    return _pause(s, c, q, t, work, count, phase, budget)
                if idx == nic.queue[q].ring_tail:
                    break  # nothing has reached this queue by now: DD bit clear
            if nic.ring[q, idx & p.ring_mask].stamp > t:
                break  # written later (taken from the stream by another CPU's poll)
        elif work >= count:
            break
        skb = nic.ring[q, idx & p.ring_mask]
        nic.queue[q].ring_head = idx + 1
        if p.refill_where == REFILL_PER_PACKET:
            skb.stamp = t  # the descriptor goes back to the NIC from now on
            nic.queue[q].ring_ret = idx + 1
        work += 1
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
            t0 = prof_start()
            cpu, rq, rs, spent = get_rps_cpu(s, q, p.flow[f].flow_hash, f, t)
            prof_stop(s, P_GET_RPS_CPU, t0)
            t += spent
        t0 = prof_start()
        if cpu >= 0:
            # netif_receive_skb with RPS: always through a backlog, even the local one
            t += cost(s, C_RPS_ENQUEUE)
            t += enqueue_to_backlog(s, c, cpu, p.flow[f].flow_hash, f, tarr, seq, length, t,
                                    rq, rs)
            prof_stop(s, P_ENQUEUE, t0)
        else:
            t = netif_receive_skb_core(s, c, c, f, tarr, seq, length, t)
            prof_stop(s, P_RECEIVE, t0)
    if (p.refill_where == REFILL_AFTER_LOOP
            and nic.queue[q].ring_head - nic.queue[q].ring_ret >= p.refill_batch):
        refill(s, q, t)  # ice, mvpp2: once per poll; mlx5: post_wqes after the CQ loop
    if p.xdp_on:
        t = xdp_do_flush(s, c, t)  # the driver's xdp_do_flush() at the end of its poll
    return work, t, 0


@njit(**JIT_STATE)
def _pause(s, c, q, t, work, count, phase, budget):
    pz = s.nic.pause[0]
    pz.c, pz.q, pz.t, pz.work, pz.count, pz.phase = c, q, t, work, count, phase
    pz.budget = budget
    return work, t, 1


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
def net_rx_action_next(s, c, t):
    """The next NAPI that net_rx_action polls on CPU c at time t, or -1 when
    net_rx_action returns (then t is when it has returned: ``finish_rx_action``)."""
    p, sd = s.p, s.sd
    if not sd.cpu[c].in_rx_action:
        if not sd.cpu[c].hs_active and not sd.cpu[c].ksoftirqd:
            # handle_softirqs(): restart window of MAX_SOFTIRQ_TIME, MAX_SOFTIRQ_RESTART
            sd.cpu[c].hs_active = 1
            sd.cpu[c].hs_end_t = jiffy_start(s, jiffies(s, t) + p.max_softirq_jiffies)
            sd.cpu[c].hs_restart = MAX_SOFTIRQ_RESTART
        sd.cpu[c].in_rx_action = 1
        sd.cpu[c].softirq_pending = 0
        sd.cpu[c].budget = p.netdev_budget
        sd.cpu[c].time_limit_t = jiffy_start(s, jiffies(s, t) + p.budget_jiffies)
        _take_poll_list(s, c)
    while sd.cpu[c].ll_pos >= sd.cpu[c].ll_n:
        if sd.cpu[c].rp_n == 0 and sd.cpu[c].pl_n > 0:
            _take_poll_list(s, c)  # the poll list was refilled meanwhile: goto start
            continue
        return np.int64(-1), finish_rx_action(s, c, t)
    napi = sd.local_list[c, sd.cpu[c].ll_pos]
    sd.cpu[c].ll_pos += 1
    return napi, t


@njit(**JIT_STATE)
def napi_poll(s, c, napi, t, budget):
    """__napi_poll of NAPI ``napi`` on CPU c from t, for net_rx_action (softirq), a NAPI
    kthread and a socket's busy poll alike: the driver's poll of an rx queue with
    ``budget`` (the NAPI weight, or the busy poll's), or ``process_backlog`` with the
    backlog's ``dev_rx_weight``. Returns (work, t, paused).

    A driver poll that paused at the end of the last traffic chunk (``s.nic.pause``) is
    resumed here instead, where it was. This is the one call site of the driver poll and
    of process_backlog, so their whole receive path is inlined into the loop once.
    """
    p, pz = s.p, s.nic.pause[0]
    if pz.on:
        pz.on = pz.thread = 0
        napi, t, work, count, phase, budget = pz.q, pz.t, pz.work, pz.count, pz.phase, pz.budget
    else:
        t += cost(s, C_NAPI_POLL)
        if napi >= p.nq:
            work, t = process_backlog(s, c, t, p.dev_rx_weight)
            return work, t, 0
        s.nic.queue[napi].q_polls += 1
        # one signature with the resumed poll's int64 state
        work = count = phase = np.int64(0)
    return driver_poll(s, c, napi, t, work, count, phase, budget)


@njit(**JIT_STATE)
def napi_complete_done(s, c, q, work, t):
    """The driver's poll of queue q on CPU c took ``work`` packets, less than its weight:
    the NAPI is no longer scheduled (SCHED and PREFER_BUSY_POLL cleared) and interrupts
    are re-enabled, unless IRQ deferral keeps them masked (``napi_defer_irqs``);
    descriptors that arrived during the poll raise the interrupt again at once. Returns
    False when the IRQ stays masked."""
    p, nic = s.p, s.nic
    if work == 0:
        nic.queue[q].q_empty_polls += 1
    napi_unsched(s, q, t)
    if p.napi_defer_on and napi_defer_irqs(s, c, q, work, t):
        return False  # the driver keeps its IRQ masked: the NAPI's hrtimer polls again
    nic.queue[q].napi_sched = 0
    h = nic.queue[q].ring_head
    if nic.queue[q].ring_tail > h:
        # written during the poll, or later (taken from the stream by another CPU)
        t_dd = max(t, nic.ring[q, h & p.ring_mask].stamp)
        nic.queue[q].napi_sched = 1
        schedule(s.ev, t_dd + p.irq_delay_ns, PRIO_HARDIRQ, EV_IRQ, q)
    return True


@njit(**JIT_STATE)
def napi_unsched(s, q, t):
    """Clear rx queue q's NAPI_STATE_SCHED and PREFER_BUSY_POLL at t; a thread whose busy
    loop waits for the NAPI (``q_bp_waiter``) may take it from now."""
    rq = s.nic.queue[q]
    rq.q_sched = 0
    rq.q_prefer = 0
    if s.p.busy_poll_on and rq.q_bp_waiter >= 0:
        wake_busy_poller(s, rq.q_bp_waiter, t)
        rq.q_bp_waiter = -1


@njit(**JIT_STATE_OUTLINE)
def napi_prefer_busy_poll_exit(s, c, q, work, t):
    """__napi_poll's "busy-polling is preferred. Exit early" (7fd3253a7de6, v5.11): a
    poll that used its whole weight completes instead of repolling, so the thread that
    asked for the NAPI gets it; with deferral set the IRQ stays masked and the hrtimer is
    armed (``napi_complete_done`` false), else ``napi_schedule`` puts it back on this
    CPU's poll list (the driver has not re-enabled its IRQ: it used the whole weight)."""
    napi_unsched(s, q, t)
    if s.p.napi_defer_on and napi_defer_irqs(s, c, q, work, t):
        return
    s.nic.queue[q].q_sched = 1
    napi_list_add(s, c, q)


@njit(**JIT_STATE)
def napi_segment_end(s, c, napi, t):
    """What net_rx_action does after __napi_poll returned ``seg_work`` packets."""
    p, sd = s.p, s.sd
    work = sd.cpu[c].seg_work
    weight = p.napi_weight if napi < p.nq else p.dev_rx_weight
    if work >= weight:
        if napi < p.nq and p.busy_poll_on and s.nic.queue[napi].q_prefer:
            napi_prefer_busy_poll_exit(s, c, napi, work, t)
        else:
            sd.repoll[c, sd.cpu[c].rp_n] = napi  # still owned: polled again next round
            sd.cpu[c].rp_n += 1
    elif napi < p.nq:
        napi_complete_done(s, c, napi, work, t)
    sd.cpu[c].budget -= work
    if sd.cpu[c].budget <= 0 or t >= sd.cpu[c].time_limit_t:
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
                t >= sd.cpu[c].hs_end_t
                or sd.cpu[c].hs_restart <= 0
                or need_resched(s, c, t)
            ):
                sd.cpu[c].hs_active = 0
                sd.cpu[c].ksoftirqd = 1  # wakeup_softirqd()
    else:
        sd.cpu[c].softirq_pending = 0
        sd.cpu[c].hs_active = 0
        if sd.cpu[c].ks_running:  # nothing left: ksoftirqd goes back to sleep
            sd.cpu[c].ks_lag = sleep_lag(s, c, np.int64(SCHED_KSOFTIRQD), sd.cpu[c].ks_vrt)
        sd.cpu[c].ksoftirqd = 0
        sd.cpu[c].ks_running = 0
    return t


@njit(**JIT_STATE)
def softirq_context(s, c):
    sd = s.sd
    return T_KSOFTIRQD if sd.cpu[c].ksoftirqd else T_SOFTIRQ
