"""RFS and the core side of aRFS (get_rps_cpu, set_rps_cpu, rps_may_expire_flow in
net/core/dev.c).

Positions (``input_queue_head``, ``last_qtail``) are u32 and compared as the kernel
does, ``(int)(a - b)``, with ``s32_diff``. Version rules live in ``rfs_slot`` (per-queue
slot: ``hash_32`` since v6.15, ``hash & mask`` before) and ``rps_flow_is_active``.
"""

import numpy as np
from numba import njit

from rxlab.config import JIT_STATE, JIT_STATE_OUTLINE
from rxlab.kernel.accounting import cost
from rxlab.kernel.constants import RPS_NO_CPU, RPS_NO_FILTER
from rxlab.kernel.counters import RFS_COUNTERS
from rxlab.kernel.hashfn import hash_32, s32_diff
from rxlab.kernel.stages import C_ARFS_STEER
from rxlab.kernel.state import ARFS_OFF, U32, RfsState
from rxlab.nic.arfs_steer import arfs_lock, ndo_rx_flow_steer


def new_rfs_state(declared: dict, dev_logs: np.ndarray) -> RfsState:
    """Empty RFS tables as rxlab/mechanisms/rfs.py declares them (``declared``: its
    ``Array``s): the rps_sock_flow_table and each rx queue's rps_dev_flow table of
    2^dev_logs[q] slots (stored at the largest size), every entry RPS_NO_CPU (and
    RPS_NO_FILTER) as ``store_rps_dev_flow_table_cnt`` (net/core/net-sysfs.c) initialises
    them."""
    dev = declared["dev"].zeros()
    dev["cpu"] = RPS_NO_CPU
    dev["filter"] = RPS_NO_FILTER
    sock_flow = declared["sock_flow"].zeros()
    sock_flow[:] = RPS_NO_CPU
    dev_log = declared["dev_log"].zeros()
    dev_log[:] = dev_logs
    return RfsState(sock_flow=sock_flow, dev=dev, dev_log=dev_log, cnt=np.zeros(1, RFS_COUNTERS))


@njit(**JIT_STATE)
def rfs_slot(s, skb_hash, log):
    """Slot of a flow in a table of 2**log entries (f3483c8e1da6, v6.15: hash_32)."""
    if s.p.rfs_hash32:
        return hash_32(skb_hash, log)
    return skb_hash & ((1 << log) - 1)


@njit(**JIT_STATE)
def rps_flow_is_active(s, q, slot, cpu):
    """Fewer than 10 x table-size packets left ``cpu``'s backlog since the flow's last
    enqueue (v6.15+: ``10 << log``; before: ``10 * mask``)."""
    if cpu >= s.p.ncpu:
        return False
    log = s.rf.dev_log[q]
    limit = (10 << log) if s.p.rfs_hash32 else 10 * ((1 << log) - 1)
    head = s.sd.cpu[cpu].input_queue_head
    return s32_diff(head, s.rf.dev[q, slot].last_qtail) < limit


@njit(**JIT_STATE)
def rps_may_expire_flow(s, q, flow_id, filter_id):
    """True when the driver may remove the filter (mirrors rps_may_expire_flow)."""
    log = s.rf.dev_log[q]
    if log == 0 or flow_id >= (1 << log):
        return True
    if s.rf.dev[q, flow_id].filter != filter_id:
        return True
    return not rps_flow_is_active(s, q, flow_id, s.rf.dev[q, flow_id].cpu)


@njit(**JIT_STATE_OUTLINE)
def set_rps_cpu(s, q, slot, next_cpu, skb_hash, f, t):
    """Move a flow to ``next_cpu``; with aRFS ask the driver to steer it in hardware.

    Returns (queue, slot) of the rflow the caller must enqueue with (with aRFS it can
    be the entry in the *target* queue's table: v6.18+ form with the Feb-2026 fix) and
    the CPU ns of the driver call.
    """
    p, rf, sd = s.p, s.rf, s.sd
    rq = np.int64(q)
    rs = np.int64(slot)
    spent = np.int64(0)
    if next_cpu < p.ncpu:
        if p.arfs_model != ARFS_OFF:
            rxq_index = p.cpu[next_cpu].cpu_rmap
            if rxq_index >= 0 and rxq_index != q and rf.dev_log[rxq_index] > 0:
                flow_id = rfs_slot(s, skb_hash, rf.dev_log[rxq_index])
                t_cpu = rf.dev[rxq_index, flow_id].cpu
                protect = (
                    p.arfs_protect
                    and rf.dev[rxq_index, flow_id].filter != RPS_NO_FILTER
                    and rps_flow_is_active(s, rxq_index, flow_id, t_cpu)
                    and (skb_hash != rf.dev[rxq_index, flow_id].hash or next_cpu == t_cpu)
                )
                if not protect:
                    rf.cnt[0].arfs_calls += 1
                    # under the driver's arfs_lock: spin (softirq time) while it is held
                    hold = cost(s, C_ARFS_STEER)
                    wait = arfs_lock(s, t, hold)
                    s.ar.cnt[0].arfs_lock_wait_ns += wait
                    spent += wait + hold
                    # called from the softirq of the queue's CPU (the queue's IRQ CPU)
                    rc = ndo_rx_flow_steer(s, f, skb_hash, rxq_index, flow_id,
                                           p.queue[q].irq_cpu, t + wait)
                    if rc >= 0:
                        old_filter = rf.dev[q, slot].filter
                        rq = np.int64(rxq_index)
                        rs = np.int64(flow_id)
                        rf.dev[rq, rs].filter = rc
                        rf.dev[rq, rs].hash = skb_hash
                        if old_filter == rc:
                            rf.dev[q, slot].filter = RPS_NO_FILTER
        rf.dev[rq, rs].last_qtail = sd.cpu[next_cpu].input_queue_head
    rf.dev[rq, rs].cpu = next_cpu
    return rq, rs, spent


@njit(**JIT_STATE)
def sock_rps_record_flow(s, skb_hash, cpu):
    """rps_record_sock_flow: the socket table remembers the CPU that read the flow."""
    p, rf = s.p, s.rf
    if not p.rfs_on or skb_hash == 0:
        return
    val = (skb_hash & ~p.rps_cpu_mask & U32) | cpu
    idx = skb_hash & p.sock_flow_mask
    if rf.sock_flow[idx] != val:
        rf.sock_flow[idx] = val

