"""RPS and RFS CPU choice: ``get_rps_cpu()`` in net/core/dev.c.

Plain RPS uses the *high* bits of the flow hash (``reciprocal_scale``) over the queue's
``rps_map``; RFS uses the socket flow table and the queue's ``rps_dev_flow`` table with
the move rule that keeps a flow's packets in order (``rxlab.kernel.rfs``).
"""

import numpy as np
from numba import njit

from rxlab.config import JIT_STATE
from rxlab.kernel.hashfn import reciprocal_scale, s32_diff
from rxlab.kernel.rfs import rfs_slot, set_rps_cpu
from rxlab.kernel.state import U32


@njit(**JIT_STATE)
def get_rps_cpu(s, rxq, skb_hash, f, t):
    """What get_rps_cpu chose for a packet received on ``rxq``: (target CPU or -1 to
    process inline, the rflow to record the enqueue in as (queue, slot) or (-1, -1),
    the kernel's ``voidflow``, and the CPU ns of the aRFS driver call).
    """
    p, rf, sd = s.p, s.rf, s.sd
    none = np.int64(-1)
    n = p.queue[rxq].rps_len
    log = rf.dev_log[rxq]
    if n == 0 and log == 0:
        return none, none, none, np.int64(0)  # no map, no flow table: no hash computed
    if skb_hash == 0:
        return none, none, none, np.int64(0)
    if log > 0 and p.rfs_on:
        ident = rf.sock_flow[skb_hash & p.sock_flow_mask]
        if ((ident ^ skb_hash) & ~p.rps_cpu_mask & U32) == 0:
            next_cpu = ident & p.rps_cpu_mask
            slot = rfs_slot(s, skb_hash, log)
            tcpu = rf.dev[rxq, slot].cpu
            rq = np.int64(rxq)
            rs = np.int64(slot)
            spent = np.int64(0)
            if tcpu != next_cpu:
                # move only once the old CPU has dequeued this flow's last packet
                if tcpu >= p.ncpu or s32_diff(sd.cpu[tcpu].input_queue_head,
                                              rf.dev[rxq, slot].last_qtail) >= 0:
                    if tcpu < p.ncpu:
                        rf.cnt[0].rfs_moves += 1
                    tcpu = next_cpu
                    rq, rs, spent = set_rps_cpu(s, rxq, slot, next_cpu, skb_hash, f, t)
                else:
                    rf.cnt[0].rfs_held += 1
            if tcpu < p.ncpu:
                rf.cnt[0].rfs_steered += 1
                return np.int64(tcpu), rq, rs, spent
            if n > 0:
                return p.rps_map[rxq, reciprocal_scale(skb_hash, n)], none, none, spent
            return none, none, none, spent
    if n > 0:
        return p.rps_map[rxq, reciprocal_scale(skb_hash, n)], none, none, np.int64(0)
    return none, none, none, np.int64(0)
