"""Where each flow goes: RSS bucket, rx queue, IRQ CPU, backlog CPU, socket, thread.

Computed from the built model the way the kernel decides it (all static choices; RFS
and aRFS move flows during a run, which the notes say), plus each flow's packets
offered and delivered as the run counted them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

U32 = np.uint64(0xFFFFFFFF)
GOLDEN_RATIO_32 = np.uint64(0x61C88647)  # include/linux/hash.h


def _reciprocal_scale(h: np.ndarray, n: int) -> np.ndarray:
    """reciprocal_scale() of include/linux/math.h, vectorised: (u64)h * n >> 32."""
    return ((h.astype(np.uint64) & U32) * np.uint64(n)) >> np.uint64(32)


def _hash_32(h: np.ndarray, bits: int) -> np.ndarray:
    """hash_32() of include/linux/hash.h, vectorised."""
    return (((h.astype(np.uint64) & U32) * GOLDEN_RATIO_32) & U32) >> np.uint64(32 - bits)


@dataclass
class Flows:
    """One row per flow (numpy arrays of equal length)."""

    table: object  # rxlab.traffic.flows.FlowTable (5-tuples)
    group: np.ndarray  # group name per flow
    offered: np.ndarray  # packets that reached the NIC
    lost: np.ndarray  # offered - delivered (any drop reason)
    bucket: np.ndarray  # RSS indirection-table entry (hash & (table_size - 1))
    rxq: np.ndarray
    irq_cpu: np.ndarray  # CPU of the rx queue's interrupt: runs the driver poll
    cpu: np.ndarray  # CPU whose backlog takes it (RPS/RFS target), or irq_cpu inline
    via_backlog: np.ndarray  # True when enqueue_to_backlog() takes it (RPS/RFS, netif_rx)
    sock: np.ndarray  # socket (= reading thread) or -1
    fl_bucket: np.ndarray  # flow-limit table bucket on the enqueuing CPU
    table_size: int
    notes: list

    def __len__(self) -> int:
        return self.rxq.size

    def describe(self, i: int) -> str:
        return self.table.describe(int(i))


def flows_of(m) -> Flows:
    """The flow table of a model that has run (``rxlab.build.Model``)."""
    from rxlab.build import flow_steering
    from rxlab.kernel.state import ARFS_OFF

    sc, p = m.scenario, m.params
    fl = m.flows
    steer = flow_steering(sc, fl)  # Toeplitz hash and indirection table, as the NIC does
    size = sc.nic.rss.table_size
    bucket = (steer["rss_hash"].astype(np.uint64) & np.uint64(size - 1)).astype(np.int64)
    rxq = np.asarray(p.flow["flow_rxq"], np.int64)
    h = np.asarray(p.flow["flow_hash"], np.int64)
    sock = np.asarray(p.flow["flow_sock"], np.int64)
    irq = np.asarray(p.queue["irq_cpu"], np.int64)
    irq_cpu = irq[rxq]
    cpu = irq_cpu.copy()
    via = np.zeros(len(fl), bool)
    notes = []
    # get_rps_cpu() (net/core/dev.c): plain RPS picks rps_map[reciprocal_scale(hash, len)]
    for q in range(p.nq):
        n = int(p.queue[q]["rps_len"])
        on_q = (rxq == q) & (h != 0)
        if n and on_q.any():
            cpu[on_q] = np.asarray(p.rps_map[q])[_reciprocal_scale(h[on_q], n).astype(np.int64)]
            via[on_q] = True
    thread_cpu = np.asarray(m.so.thread["thread_cpu"], np.int64)
    if p.rfs_on:
        # RFS steers a flow whose socket records its reader's CPU (connected UDP, TCP)
        rec = np.asarray(m.so.sock["sock_record"], bool)
        dev_on = np.asarray(m.rf.dev_log, np.int64)[rxq] > 0
        rfs = (sock >= 0) & dev_on & (h != 0)
        rfs[rfs] = rec[sock[rfs]]
        cpu[rfs] = thread_cpu[sock[rfs]]
        via[rfs] = True
        notes.append("RFS is on: a flow's backlog CPU is shown as its reading thread's CPU "
                     "(where rps_sock_flow_table points it)")
    if p.arfs_model != ARFS_OFF:
        notes.append("aRFS is on: filters move flows between queues during the run; queues "
                     "shown are RSS's")
    if p.netif_rx:
        via[:] = True  # netif_rx(): every packet through a backlog (the IRQ CPU's without RPS)
    tl = 1 << int(p.fl_log)
    fl_bucket = (_hash_32(h, int(p.fl_log)) if p.fl_hash32 and p.fl_log
                 else (h & (tl - 1)).astype(np.uint64)).astype(np.int64)
    offered = np.asarray(m.so.flow["flow_next_seq"], np.int64)
    delivered = np.asarray(m.so.flow["flow_delivered"], np.int64)
    names = np.array(fl.group_names, dtype=object)
    return Flows(table=fl, group=names[np.asarray(fl.group, np.int64)], offered=offered,
                 lost=np.maximum(offered - delivered, 0), bucket=bucket, rxq=rxq,
                 irq_cpu=irq_cpu, cpu=cpu, via_backlog=via, sock=sock, fl_bucket=fl_bucket,
                 table_size=size, notes=notes)
