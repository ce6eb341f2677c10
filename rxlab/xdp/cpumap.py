"""XDP cpumap: bulk queues, the ptr_ring and the remote kthread (kernel/bpf/cpumap.c,
include/linux/ptr_ring.h).

RX side (``kernel/bpf/cpumap.c``): ``bq_enqueue`` fills a per-source-CPU bulk queue of
``CPU_MAP_BULK_SIZE`` (8) frames per entry and flushes it into the entry's ptr_ring when
full; ``xdp_do_flush`` at the end of the driver's NAPI poll flushes every pending bulk
queue and wakes the entry's kthread. A frame whose ptr_ring slot is not empty is
dropped (the kernel reports it only in the ``xdp:xdp_cpumap_enqueue`` tracepoint).

ptr_ring capacity (``include/linux/ptr_ring.h``): the consumer NULLs consumed slots in
batches of 16 (``2 * SMP_CACHE_BYTES / sizeof(void *)``, or 1 when that exceeds half the
ring) and at the ring's end, so up to 15 consumed slots still look occupied to the
producer. With free-running counters: ``prod`` produced, ``cons`` consumed, ``clear``
zeroed; the producer's slot is free iff ``prod - clear < qsize``.

Remote side: the kthread consumes up to ``CPUMAP_BATCH`` (8) frames, builds an skb
around each (no hash, no rx queue recorded), optionally hands it to GRO (v6.15+), and
delivers it with ``netif_receive_skb_list``: RPS/RFS run again on this CPU with the
software hash and rx queue 0's tables.

Simplifications (docs/model.md): the producer sees the consumer's progress as of the
start of its NAPI poll (atomic segments); GRO holds nothing back (UDP without a GRO
socket is flushed at once, ``udp_gro_receive``), so only its cost is modelled; the
kthread's time is system time, as /proc/stat counts a kernel thread outside softirq.
"""

import numpy as np
from numba import njit

from rxlab.config import JIT_LEAF, JIT_STATE, JIT_STATE_OUTLINE
from rxlab.engine.core import PRIO_WAKE, schedule
from rxlab.kernel.accounting import cost, drop
from rxlab.kernel.backlog import enqueue_to_backlog
from rxlab.kernel.constants import CPU_MAP_BULK_SIZE, CPUMAP_BATCH
from rxlab.kernel.drop_reasons import DROP_CPUMAP_FULL
from rxlab.kernel.events import EV_CPUMAP_WAKE
from rxlab.kernel.rps import get_rps_cpu
from rxlab.kernel.sched import SCHED_CPUMAP_KTHREAD, sleep_lag
from rxlab.kernel.sched_states import TH_RUNNABLE, TH_SLEEP, TH_WAKING
from rxlab.kernel.socket import netif_receive_skb_core
from rxlab.kernel.stages import (
    C_CPUMAP_ENQUEUE_FULL,
    C_CPUMAP_KTHREAD,
    C_GRO,
    C_RPS_ENQUEUE,
    C_SKB_BUILD,
    C_SW_HASH,
    C_WAKEUP_LATENCY,
)
from rxlab.kernel.state import CpumapState
from rxlab.kernel.wake import ttwu_remote, ttwu_remote_owed

PTR_RING_CACHE_BATCH = 16  # 2 * SMP_CACHE_BYTES / sizeof(void *) on x86-64


def ptr_ring_batch(size: int) -> int:
    """``ptr_ring_set_size``: the consumer's zeroing batch for a ring of ``size``."""
    b = PTR_RING_CACHE_BATCH
    return 1 if b > size // 2 or b == 0 else b



def new_cpumap_state(declared: dict) -> CpumapState:
    """Empty cpumap state as rxlab/mechanisms/cpumap.py declares it (``declared``: its
    ``Array``s): bulk queues, flush lists, ptr_rings, entries, round-robin positions."""
    return CpumapState(**{name: a.zeros() for name, a in declared.items()})


@njit(**JIT_LEAF)
def ring_has_room(prod, clear, qsize):
    """__ptr_ring_produce succeeds iff the slot at ``producer`` holds NULL."""
    return prod - clear < qsize


@njit(**JIT_LEAF)
def ring_discard_one(cons, clear, qsize, batch):
    """__ptr_ring_discard_one after a consume: returns the new (cons, clear).

    The kernel keeps ring indices (reset at the end) and zeroes [consumer_tail,
    consumer_head] when ``consumer_head - consumer_tail >= batch`` or the head reaches
    the ring's end; in free-running counts both tests read as below.
    """
    cons += 1
    if cons - clear >= batch or cons % qsize == 0:
        clear = cons
    return cons, clear


@njit(**JIT_STATE_OUTLINE)
def bq_flush_to_queue(s, c, e, t):
    """Produce CPU c's bulk queue for entry e into the entry's ptr_ring."""
    p, cm = s.p, s.cm
    qsize = p.cpumap[e].qsize
    if cm.bq_n[c, e] > 0:
        cm.cnt[e].flushes += 1  # one xdp:xdp_cpumap_enqueue event
    for i in range(cm.bq_n[c, e]):
        if ring_has_room(cm.entry[e].prod, cm.entry[e].clear, qsize):
            skb = cm.ring[e, cm.entry[e].prod % qsize]
            skb.flow = cm.bq[c, e, i].flow
            skb.tarr = cm.bq[c, e, i].tarr
            skb.seq = cm.bq[c, e, i].seq
            skb.len = cm.bq[c, e, i].len
            skb.stamp = t
            cm.entry[e].prod += 1
            cm.cnt[e].enqueued += 1
        else:
            cm.cnt[e].enqueue_drops += 1
            t += cost(s, C_CPUMAP_ENQUEUE_FULL)  # xdp_return_frame_rx_napi
            drop(s, DROP_CPUMAP_FULL, t)
    cm.bq_n[c, e] = 0
    return t


@njit(**JIT_STATE)
def bq_enqueue(s, c, e, f, tarr, seq, length, t):
    """cpu_map_enqueue -> bq_enqueue on the RX CPU c; returns the time after it."""
    cm = s.cm
    if cm.bq_n[c, e] == CPU_MAP_BULK_SIZE:
        t = bq_flush_to_queue(s, c, e, t)
    i = cm.bq_n[c, e]
    skb = cm.bq[c, e, i]
    skb.flow = f
    skb.tarr = tarr
    skb.seq = seq
    skb.len = length
    cm.bq_n[c, e] = i + 1
    for k in range(cm.flush_n[c]):
        if cm.flush_list[c, k] == e:
            return t
    cm.flush_list[c, cm.flush_n[c]] = e  # list_add(&bq->flush_node, flush_list)
    cm.flush_n[c] += 1
    return t


@njit(**JIT_STATE_OUTLINE)
def xdp_do_flush(s, c, t):
    """__cpu_map_flush at the end of the driver poll: flush, then wake each kthread."""
    cm = s.cm
    for k in range(cm.flush_n[c]):
        e = cm.flush_list[c, k]
        t = bq_flush_to_queue(s, c, e, t)
        if t > cm.entry[e].last_flush:
            cm.entry[e].last_flush = t
            cm.entry[e].flush_cpu = c
        if cm.entry[e].kt_state == TH_SLEEP:
            cm.entry[e].kt_state = TH_WAKING
            cm.cnt[e].kthread_wakeups += 1
            schedule(s.ev, t + cost(s, C_WAKEUP_LATENCY), PRIO_WAKE, EV_CPUMAP_WAKE, e)
            cm.entry[e].flush_cpu = c
            t += ttwu_remote(s, c, s.p.cpumap[e].cpu)  # wake_up_process(rcpu->kthread)
    cm.flush_n[c] = 0
    return t


@njit(**JIT_STATE)
def cpumap_deliver(s, c, f, tarr, seq, length, t):
    """netif_receive_skb_list_internal on the kthread's CPU: RPS again, or the stack."""
    p = s.p
    h = p.flow[f].flow_sw_hash
    sw = True
    if p.xdp_hash_meta and p.flow[f].flow_rss_hash != 0:
        h = p.flow[f].flow_rss_hash  # the seed's proposal: skb->hash from frame metadata
        sw = False
    cpu = rq = rs = np.int64(-1)
    if p.rps_needed:
        if sw and (p.queue[0].rps_len > 0 or s.rf.dev_log[0] > 0):
            t += cost(s, C_SW_HASH)  # skb_get_hash: flow dissector + siphash
        # no rx queue recorded: dev->_rx[0] (int64: a literal 0 would compile a second
        # get_rps_cpu, numba specialises on literal arguments)
        cpu, rq, rs, spent = get_rps_cpu(s, np.int64(0), h, f, t)
        t += spent
    if cpu >= 0:
        t += cost(s, C_RPS_ENQUEUE)
        return t + enqueue_to_backlog(s, c, cpu, h, f, tarr, seq, length, t, rq, rs)
    return netif_receive_skb_core(s, c, c, f, tarr, seq, length, t)


@njit(**JIT_STATE_OUTLINE)
def cpumap_kthread_step(s, c, e, t):
    """One loop of cpu_map_kthread_run on CPU c: up to CPUMAP_BATCH visible frames."""
    p, cm, sd = s.p, s.cm, s.sd
    qsize = p.cpumap[e].qsize
    n = 0
    ent = cm.entry[e]
    while n < CPUMAP_BATCH and ent.cons < ent.prod:
        skb = cm.ring[e, ent.cons % qsize]
        if skb.stamp > t:
            break  # produced by a poll that, in simulated time, has not got there yet
        f = skb.flow
        tarr = skb.tarr
        seq = skb.seq
        length = skb.len
        cons, clear = ring_discard_one(ent.cons, ent.clear, qsize, p.cpumap[e].batch)
        ent.cons = cons
        ent.clear = clear
        t += cost(s, C_CPUMAP_KTHREAD) + cost(s, C_SKB_BUILD)
        if p.cm_gro:
            t += cost(s, C_GRO)
        t = cpumap_deliver(s, c, f, tarr, seq, length, t)
        n += 1
    cm.cnt[e].kthread_processed += n
    cm.cnt[e].kthread_batches += 1
    if sd.cpu[c].ipi_n > 0:
        sd.cpu[c].softirq_pending = 1  # RPS raised NET_RX_SOFTIRQ: runs at local_bh_enable
    return t


@njit(**JIT_STATE_OUTLINE)
def cpumap_after_batch(s, e, t):
    """The kthread after a batch: go on, or sleep (keeping its lag, rxlab.kernel.sched),
    until the pending flush wakes it if there is one."""
    p, cm = s.p, s.cm
    if cm.entry[e].cons < cm.entry[e].prod and (
            cm.ring[e, cm.entry[e].cons % p.cpumap[e].qsize].stamp <= t):
        cm.entry[e].kt_state = TH_RUNNABLE
        return
    cm.entry[e].kt_lag = sleep_lag(s, p.cpumap[e].cpu, np.int64(SCHED_CPUMAP_KTHREAD),
                                   cm.entry[e].kt_vrt)
    if cm.entry[e].cons < cm.entry[e].prod:
        # the ring looks empty now; the flush that produced these frames wakes us
        # (and pays for it when its segment ends, if that flush is still to come)
        cm.entry[e].kt_state = TH_WAKING
        cm.cnt[e].kthread_wakeups += 1
        if cm.entry[e].last_flush > t:
            ttwu_remote_owed(s, cm.entry[e].flush_cpu, p.cpumap[e].cpu)
        schedule(s.ev, max(cm.entry[e].last_flush, t) + cost(s, C_WAKEUP_LATENCY),
                 PRIO_WAKE, EV_CPUMAP_WAKE, e)
    else:
        cm.entry[e].kt_state = TH_SLEEP
