"""Socket busy polling, the socket's side (include/net/busy_poll.h, read in 6.18.2):
which NAPI a socket polls and when a read busy-polls instead of sleeping; the loop
itself is ``rxlab.kernel.napi_busy_loop``.

``__skb_recv_udp`` (net/ipv4/udp.c) and ``tcp_recvmsg`` (net/ipv4/tcp.c) call
``sk_busy_loop`` when the receive queue is empty and ``sk_can_busy_loop`` (``sk_ll_usec``:
SO_BUSY_POLL, default ``net.core.busy_read``), before they sleep, if the socket has a
valid NAPI id: the rx queue's NAPI that last delivered to it (``sk_mark_napi_id``; an
unconnected UDP socket keeps the first, ``sk_mark_napi_id_once``). The loop ends at
``sk_busy_loop_timeout``: ``busy_loop_current_time()`` is ``ktime_get_ns() >> 10``, so
at the first 1024 ns tick past start + ``sk_ll_usec``.
"""

import numpy as np
from numba import njit

from rxlab.config import JIT_STATE, JIT_STATE_OUTLINE
from rxlab.engine.core import PRIO_WAKE, schedule
from rxlab.kernel.events import EV_BUSY_POLL
from rxlab.kernel.sched_states import BP_LOOP, SEG_BUSY_SPIN
from rxlab.kernel.state import XDP_REDIRECT
from rxlab.nic.arfs_steer import flow_rx_queue


@njit(**JIT_STATE)
def sk_note_flows(s, sk, n, last):
    """Socket sk's read took n packets, the last of flow ``last``: keep the flows of the
    first packet it ever read and of the latest, whose rx queues are the NAPI ids
    ``sk_mark_napi_id`` left on it (``sk_napi_id``)."""
    so = s.so
    if so.sock[sk].so_first_flow < 0:
        first = s.p.sock_off[sk] + ((so.sock[sk].so_head - n) & so.sock[sk].sock_mask)
        so.sock[sk].so_first_flow = so.sq[first].flow
    so.sock[sk].so_last_flow = last


@njit(**JIT_STATE)
def sk_napi_id(s, sk):
    """sk->sk_napi_id as a read that finds socket sk empty sees it: the rx queue of the
    latest packet for a connected socket (``sk_mark_napi_id`` on every packet: UDP with
    a destination, TCP established), of the first for an unconnected one
    (``sk_mark_napi_id_once``), or -1: nothing has come yet, or its skbs carry no NAPI
    id (``netif_rx``; a cpumap kthread's). The socket is empty, so the latest packet
    queued is the latest read (rxlab keeps no mark of a packet the socket dropped)."""
    p, so = s.p, s.so
    f = so.sock[sk].so_last_flow
    if not (so.sock[sk].sock_record or so.sock[sk].sock_tcp):
        f = so.sock[sk].so_first_flow
    if f < 0 or p.netif_rx or (p.xdp_on and p.flow[f].xdp_act == XDP_REDIRECT):
        return np.int64(-1)
    return flow_rx_queue(s, np.int32(f))  # int32, as ingest passes it: one signature


@njit(**JIT_STATE)
def sock_ready_at(s, sk):
    """When socket sk's first queued packet is there to read (-1: its queue is empty)."""
    so = s.so
    if so.sock[sk].so_head == so.sock[sk].so_tail:
        return np.int64(-1)
    return so.sq[s.p.sock_off[sk] + (so.sock[sk].so_head & so.sock[sk].sock_mask)].stamp


@njit(**JIT_STATE_OUTLINE)
def sk_busy_loop_start(s, c, th, t):
    """Thread th on CPU c found its socket empty at t: True if it busy-polls (then it
    stays runnable in its loop), False if it sleeps (no SO_BUSY_POLL, or no NAPI id yet:
    ``sk_can_busy_loop``, ``napi_id_valid``)."""
    so = s.so
    sk = so.thread[th].thread_sock
    usec = so.sock[sk].sock_ll_usec
    if usec == 0 or sk_napi_id(s, sk) < 0:
        return False
    so.thread[th].th_bp = BP_LOOP
    # sk_busy_loop_timeout: time_after(now >> 10, (start >> 10) + sk_ll_usec)
    end = ((t >> 10) + usec + 1) << 10
    so.thread[th].th_bp_end = end
    s.sd.cpu[c].bp_thread = th
    if so.thread[th].th_bp_tev < 0:  # else an earlier loop's, due first, re-arms it
        so.thread[th].th_bp_tev = end
        schedule(s.ev, end, PRIO_WAKE, EV_BUSY_POLL, th)
    return True


@njit(**JIT_STATE)
def wake_busy_poller(s, th, t):
    """Something thread th's busy loop waits for happened at t (a descriptor on the NAPI
    it holds, data on its socket, the NAPI it wants freed): if it is spinning, its CPU
    goes round again then (an EV_BUSY_POLL, so a CPU never kicks itself mid-segment)."""
    so, sd = s.so, s.sd
    c = so.thread[th].thread_cpu
    if (sd.cpu[c].seg_kind == SEG_BUSY_SPIN and sd.cpu[c].seg_arg == th
            and sd.cpu[c].ev_pending == 0 and so.thread[th].th_bp_kick == 0):
        _post_busy_poll(s, th, t)


@njit(**JIT_STATE_OUTLINE)
def _post_busy_poll(s, th, t):
    """The calendar push, out of line (the callers' hot paths keep only the test): a
    kick is EV_BUSY_POLL with arg -1 - th, one in flight per thread."""
    s.so.thread[th].th_bp_kick = 1
    schedule(s.ev, t, PRIO_WAKE, EV_BUSY_POLL, -1 - th)
