"""Per-CPU backlog: ``enqueue_to_backlog()`` and ``process_backlog()`` (net/core/dev.c).

One FIFO per CPU holds both kernel queues: [head, proc) is ``process_queue`` and
[proc, tail) is ``input_pkt_queue``; a splice moves ``proc`` to ``tail``, exactly as
skb_queue_splice_tail_init moves the whole input queue behind the process queue.

Simplification (docs/model.md, "atomic segments"): a NAPI poll runs as one segment at
its start time; the packets it enqueues carry the time of their enqueue (``bl_stamp``)
and a consumer only takes packets whose stamp is not in its future.
"""

import numpy as np
from numba import njit

from rxlab.config import JIT_STATE
from rxlab.engine.core import PRIO_HARDIRQ, schedule
from rxlab.kernel.accounting import cost, drop
from rxlab.kernel.drop_reasons import DROP_BACKLOG, DROP_FLOW_LIMIT
from rxlab.kernel.events import EV_IPI
from rxlab.kernel.flow_limit import skb_flow_limit
from rxlab.kernel.sched import SCHED_IDLE
from rxlab.kernel.socket import netif_receive_skb_core
from rxlab.kernel.stages import C_IPI_LATENCY, C_IPI_SEND
from rxlab.kernel.state import SOFTNET_DATA, U32, SoftnetData
from rxlab.kernel.wake import napi_thread_wake


def new_softnet_data(ncpu: int, nq: int, declared: dict, fl_cpus: list[int]) -> SoftnetData:
    """Each CPU's empty ``softnet_data``: its backlog FIFO and flow limit history and
    buckets as RPS and flow limit declare them (``declared``: rxlab/mechanisms/ ``Array``s,
    flow limit on for ``fl_cpus``), empty NAPI lists (napi ids: the nq queues', nq + cpu
    for a backlog) and RPS IPI list, and no task holding the CPU."""
    lists = nq + 2
    sd = SoftnetData(
        cpu=np.zeros(ncpu, SOFTNET_DATA), bl=declared["bl"].zeros(),
        poll_list=np.zeros((ncpu, lists), np.int64), local_list=np.zeros((ncpu, lists), np.int64),
        repoll=np.zeros((ncpu, lists), np.int64),
        rps_ipi_list=np.zeros((ncpu, ncpu), np.int64),
        fl_history=declared["fl_history"].zeros(), fl_buckets=declared["fl_buckets"].zeros(),
    )
    sd.cpu["fl_on"] = [c in fl_cpus for c in range(ncpu)]
    sd.cpu["cur_who"] = SCHED_IDLE  # no task holds a CPU yet
    sd.cpu["bp_thread"] = -1
    return sd


@njit(**JIT_STATE)
def napi_list_add(s, c, napi):
    """____napi_schedule: append a NAPI to sd->poll_list and raise NET_RX_SOFTIRQ."""
    sd = s.sd
    sd.poll_list[c, sd.cpu[c].pl_n] = napi
    sd.cpu[c].pl_n += 1
    sd.cpu[c].softirq_pending = 1


@njit(**JIT_STATE)
def napi_schedule_rps(s, this_cpu, target, t):
    """Wake the target's backlog: locally at once (NET_RX), remotely by an IPI sent later,
    or, with threaded backlog NAPI (v6.10+), by waking the target's backlog_napi thread
    now (``__napi_schedule_irqoff(&sd->backlog)``; a local one still takes the softirq:
    ``____napi_schedule``'s ``use_local_napi``). Returns the ns the wake-up costs."""
    p, sd = s.p, s.sd
    if target == this_cpu:
        napi_list_add(s, this_cpu, p.nq + target)
    elif p.backlog_threaded:
        return napi_thread_wake(s, this_cpu, p.nq + target, t)
    else:
        sd.rps_ipi_list[this_cpu, sd.cpu[this_cpu].ipi_n] = target
        sd.cpu[this_cpu].ipi_n += 1
    return 0


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
def enqueue_to_backlog(s, this_cpu, cpu, skb_hash, f, tarr, seq, length, t, rq, rs):
    """Queue a packet on CPU ``cpu``'s backlog (or drop it); returns the ns this CPU
    spent waking the target's backlog thread (threaded backlog NAPI), else 0.

    (rq, rs): the rflow get_rps_cpu chose, whose ``last_qtail`` records the enqueue, or
    rq = -1."""
    p, sd = s.p, s.sd
    # input_pkt_queue length (lockless read)
    qlen = sd.cpu[cpu].bl_tail - sd.cpu[cpu].bl_proc
    if qlen > p.max_backlog:
        sd.cpu[cpu].dropped += 1
        drop(s, DROP_BACKLOG, t)
        return 0
    if skb_flow_limit(s, this_cpu, skb_hash, qlen):
        sd.cpu[cpu].dropped += 1
        drop(s, DROP_FLOW_LIMIT, t)
        return 0
    spent = 0
    if qlen == 0 and sd.cpu[cpu].bl_sched == 0:
        sd.cpu[cpu].bl_sched = 1  # __test_and_set_bit(NAPI_STATE_SCHED)
        spent = napi_schedule_rps(s, this_cpu, cpu, t)
    slot = sd.cpu[cpu].bl_tail & p.bl_mask
    skb = sd.bl[cpu, slot]
    skb.flow = f
    skb.tarr = tarr
    skb.seq = seq
    skb.len = length
    skb.stamp = t
    skb.src = this_cpu
    sd.cpu[cpu].bl_tail += 1
    sd.cpu[cpu].input_queue_tail = (sd.cpu[cpu].input_queue_tail + 1) & U32
    if rq >= 0:  # *qtail = ++sd->input_queue_tail into the chosen rflow
        s.rf.dev[rq, rs].last_qtail = sd.cpu[cpu].input_queue_tail
    return spent


@njit(**JIT_STATE)
def process_backlog(s, c, t, quota):
    """Drain CPU c's backlog up to ``quota`` packets; returns (work, end time)."""
    p, sd, ev = s.p, s.sd, s.ev
    work = 0
    while True:
        while sd.cpu[c].bl_head < sd.cpu[c].bl_proc:
            skb = sd.bl[c, sd.cpu[c].bl_head & p.bl_mask]
            sd.cpu[c].bl_head += 1
            t = netif_receive_skb_core(
                # the source CPU as int64, as the other callers pass it: one compiled
                # netif_receive_skb_core, not one per argument type
                s, c, np.int64(skb.src), skb.flow, skb.tarr, skb.seq, skb.len, t,
            )
            work += 1
            if work >= quota:
                # input_queue_head advances once per call (v6.10+); with atomic
                # segments this equals the older per-packet update at segment end
                sd.cpu[c].input_queue_head = (sd.cpu[c].input_queue_head + work) & U32
                return work, t
        # splice the visible part of input_pkt_queue behind process_queue
        k = sd.cpu[c].bl_proc
        while k < sd.cpu[c].bl_tail and sd.bl[c, k & p.bl_mask].stamp <= t:
            k += 1
        if k == sd.cpu[c].bl_proc:
            sd.cpu[c].bl_sched = 0  # queue empty: napi completes, SCHED cleared
            if sd.cpu[c].bl_tail > k:
                # packets enqueued later in simulated time found the queue empty and
                # not scheduled: their enqueuer IPIs this CPU (approximated at stamp),
                # or wakes its backlog thread (threaded backlog, from another CPU)
                sd.cpu[c].bl_sched = 1
                stamp = sd.bl[c, k & p.bl_mask].stamp
                src = np.int64(sd.bl[c, k & p.bl_mask].src)
                if p.backlog_threaded and src != c:
                    napi_thread_wake(s, src, p.nq + c, max(stamp, t))
                else:
                    schedule(ev, max(stamp + cost(s, C_IPI_LATENCY), t), PRIO_HARDIRQ,
                             EV_IPI, c)
            break
        sd.cpu[c].bl_proc = k
    if work:
        sd.cpu[c].input_queue_head = (sd.cpu[c].input_queue_head + work) & U32
    return work, t
