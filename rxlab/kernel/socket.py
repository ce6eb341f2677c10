"""Protocol delivery to sockets and application reads (simplified UDP/TCP receive).

``netif_receive_skb_core`` stands for __netif_receive_skb_core + ip_rcv + udp_rcv/
tcp_v4_rcv as one cost stage (``stack_rx``); the socket enqueue follows
__udp_enqueue_schedule_skb's rule: drop when sk_rmem_alloc is already above sk_rcvbuf.
Simplifications (docs/model.md): no TCP ACK/state machine, no GRO aggregation; the
truesize of a packet is modelled as max(768, len + 320) bytes.
"""

import numpy as np
from numba import njit

from rxlab.config import JIT_LEAF, JIT_STATE
from rxlab.engine.core import PRIO_WAKE, schedule
from rxlab.kernel.accounting import cost, drop, hist_index, interval_of, work_ns
from rxlab.kernel.constants import SKB_TRUESIZE_MIN, SKB_TRUESIZE_OVERHEAD
from rxlab.kernel.events import EV_WAKE
from rxlab.kernel.rfs import sock_rps_record_flow
from rxlab.kernel.state import (
    C_CROSS_CPU,
    C_SOCKET_ENQUEUE,
    C_STACK_RX,
    C_WAKEUP_LATENCY,
    CNT_DELIVERED,
    CNT_LAT_APP_N,
    CNT_LAT_SOCK_N,
    CNT_REORDERED,
    CNT_SOCKET_IN,
    DROP_NO_SOCKET,
    DROP_SOCKET_RCVBUF,
    TH_RUNNABLE,
    TH_SLEEP,
    TH_WAKING,
    TS_DELIVERED,
    TS_PROCESSED,
)


@njit(**JIT_LEAF)
def truesize(length):
    return max(SKB_TRUESIZE_MIN, length + SKB_TRUESIZE_OVERHEAD)


@njit(**JIT_STATE)
def netif_receive_skb_core(s, c, rx_cpu, f, tarr, seq, length, t):
    """Protocol processing of one packet on CPU c at time t; returns the new time."""
    p, sd, so, st = s.p, s.sd, s.so, s.st
    sd.cpu[c].processed += 1
    st.ts_pkt[interval_of(s, t), TS_PROCESSED] += 1
    if rx_cpu != c:
        t += cost(s, C_CROSS_CPU)  # skb head and data are cold on this CPU
    t += cost(s, C_STACK_RX)
    sk = p.flow[f].flow_sock
    if sk < 0:
        drop(s, DROP_NO_SOCKET, t)
        return t
    if (so.sock[sk].so_rmem > so.sock[sk].sock_rcvbuf
            or so.sock[sk].so_tail - so.sock[sk].so_head >= so.sock[sk].sock_cap):
        so.sock[sk].so_drops += 1
        drop(s, DROP_SOCKET_RCVBUF, t)
        return t
    t += cost(s, C_SOCKET_ENQUEUE)
    return sock_queue_tail(s, sk, f, tarr, seq, length, t)


@njit(**JIT_STATE)
def sock_queue_tail(s, sk, f, tarr, seq, length, t):
    """Append to socket sk's queue (room already checked) and wake its reader."""
    p, so, st, ev = s.p, s.so, s.st, s.ev
    ts = truesize(length)
    slot = p.sock_off[sk] + (so.sock[sk].so_tail & so.sock[sk].sock_mask)
    skb = so.sq[slot]
    skb.flow = f
    skb.tarr = tarr
    skb.seq = seq
    skb.len = length
    skb.stamp = t
    so.sock[sk].so_tail += 1
    so.sock[sk].so_rmem += ts
    st.cnt[CNT_SOCKET_IN] += 1
    lat = t - tarr
    st.lat_sock[hist_index(lat)] += 1
    st.lat_sum[0] += lat
    st.cnt[CNT_LAT_SOCK_N] += 1
    if seq < so.flow[f].flow_max_seq:
        st.cnt[CNT_REORDERED] += 1
    else:
        so.flow[f].flow_max_seq = seq
    th = so.sock[sk].sock_thread
    if so.sock[th].th_state == TH_SLEEP:
        so.sock[th].th_state = TH_WAKING
        schedule(ev, t + cost(s, C_WAKEUP_LATENCY), PRIO_WAKE, EV_WAKE, th)
    return t


@njit(**JIT_STATE)
def app_read(s, th, t):
    """A thread reads up to its batch of visible packets (recvmsg + user work).

    Returns (end time, packets, system ns, user ns).
    """
    p, so, st = s.p, s.so, s.st
    sk = so.sock[th].thread_sock
    n = 0
    sys_ns = np.int64(0)
    user_ns = np.int64(0)
    while (n < so.sock[th].thread_batch
           and so.sock[sk].so_head < so.sock[sk].so_tail):
        slot = p.sock_off[sk] + (so.sock[sk].so_head & so.sock[sk].sock_mask)
        skb = so.sq[slot]
        if skb.stamp > t:
            break  # queued by a segment that, in simulated time, has not happened yet
        ds = work_ns(s, so.sock[th].thread_sys_ns)
        du = work_ns(s, so.sock[th].thread_user_ns)
        sys_ns += ds
        user_ns += du
        t += ds + du
        so.sock[sk].so_rmem -= truesize(skb.len)
        so.sock[sk].so_head += 1
        f = skb.flow
        so.flow[f].flow_delivered += 1
        if so.sock[sk].sock_record:
            # recvmsg -> sock_rps_record_flow: RFS learns where the consumer runs
            sock_rps_record_flow(s, p.flow[f].flow_hash, so.sock[th].thread_cpu)
        lat = t - skb.tarr
        st.lat_app[hist_index(lat)] += 1
        st.lat_sum[1] += lat
        st.cnt[CNT_LAT_APP_N] += 1
        st.cnt[CNT_DELIVERED] += 1
        st.ts_pkt[interval_of(s, t), TS_DELIVERED] += 1
        n += 1
    so.sock[th].th_served += n
    return t, n, sys_ns, user_ns


@njit(**JIT_STATE)
def app_after_read(s, th, t):
    """Thread state after a read: runnable, waking for a queued packet, or asleep."""
    p, so, ev = s.p, s.so, s.ev
    sk = so.sock[th].thread_sock
    if so.sock[sk].so_head < so.sock[sk].so_tail:
        head = so.sock[sk].so_head
        stamp = so.sq[p.sock_off[sk] + (head & so.sock[sk].sock_mask)].stamp
        if stamp <= t:
            so.sock[th].th_state = TH_RUNNABLE
        else:
            so.sock[th].th_state = TH_WAKING
            schedule(ev, stamp + cost(s, C_WAKEUP_LATENCY), PRIO_WAKE, EV_WAKE, th)
    else:
        so.sock[th].th_state = TH_SLEEP

