"""Protocol delivery to sockets and application reads (simplified UDP/TCP receive).

``netif_receive_skb_core`` stands for __netif_receive_skb_core + ip_rcv + udp_rcv/
tcp_v4_rcv up to the socket lookup as one cost stage (``stack_rx``); the UDP enqueue
follows __udp_enqueue_schedule_skb's rule: drop when sk_rmem_alloc is already above
sk_rcvbuf. A TCP packet's work depends on where it runs relative to the reading thread
(tcp_v4_rcv, net/ipv4/tcp_ipv4.c): on the thread's CPU (``tcp_rcv``, cache-warm socket);
on another CPU while the thread is not inside recvmsg (``tcp_rcv`` + ``tcp_remote``: the
socket's lines move and sk_data_ready wakes the reader across CPUs); on another CPU while
the thread holds the socket lock (``sock_owned_by_user``: tcp_add_backlog, and the thread
runs ``tcp_rcv`` in release_sock -> __release_sock as system time). Out-of-order segments
(tcp_data_queue_ofo, and the hole-filling segment after them) cost ``tcp_ofo`` (ofo queue
and the immediate SACK/ACK). Simplifications (docs/model.md): ACKs are part of the cost
stages, not a state machine; no GRO aggregation; the truesize of a packet is modelled as
max(768, len + 320) bytes.
"""

import numpy as np
from numba import njit

from rxlab.config import JIT_LEAF, JIT_STATE
from rxlab.engine.core import PRIO_WAKE, schedule
from rxlab.kernel.accounting import account, cost, drop, hist_index, interval_of, work_ns
from rxlab.kernel.busy_poll import sk_busy_loop_start, sk_note_flows, wake_busy_poller
from rxlab.kernel.constants import SKB_TRUESIZE_MIN, SKB_TRUESIZE_OVERHEAD
from rxlab.kernel.counters import (
    CNT_DELIVERED,
    CNT_LAT_APP_N,
    CNT_LAT_SOCK_N,
    CNT_REORDERED,
    CNT_SOCKET_IN,
    LAT_APP,
    LAT_SOCK,
    T_SYSTEM,
    TS_DELIVERED,
    TS_PROCESSED,
)
from rxlab.kernel.drop_reasons import DROP_NO_SOCKET, DROP_SOCKET_BACKLOG, DROP_SOCKET_RCVBUF
from rxlab.kernel.events import EV_WAKE
from rxlab.kernel.hashfn import roundup_pow_of_two
from rxlab.kernel.rfs import sock_rps_record_flow
from rxlab.kernel.sched import app_sleeps
from rxlab.kernel.sched_states import BH_APP, BP_LOOP, TH_RUNNABLE, TH_SLEEP, TH_WAKING
from rxlab.kernel.stages import (
    C_CROSS_CPU,
    C_SOCKET_ENQUEUE,
    C_STACK_RX,
    C_TCP_OFO,
    C_TCP_RCV,
    C_TCP_REMOTE,
    C_WAKEUP_LATENCY,
)
from rxlab.kernel.state import APP_THREAD, FLOW_SEQ, SKB, SOCK, SockState
from rxlab.kernel.wake import ttwu_remote, ttwu_remote_owed

TCP_SNDBUF = 16384  # tcp_wmem[1]: the sk_sndbuf tcp_add_backlog's limit counts half of


def sock_queue_offsets(cap) -> np.ndarray:
    """Where each socket's queue starts in the one flat ``SockState.sq``, then its end:
    a queue of ``cap[i]`` packets is stored at the next power of two (read
    ``position & sock_mask``)."""
    store = np.array([roundup_pow_of_two(int(c)) for c in cap], np.int64)
    return np.concatenate([[0], np.cumsum(store)]).astype(np.int64)


def new_sock_state(ncpu: int, nflows: int, sock_off: np.ndarray, sock: dict,
                   thread: dict) -> SockState:
    """Empty socket queues at ``sock_off`` (``sock_queue_offsets``), socket i read by
    application thread i; ``sock`` and ``thread`` give SOCK and APP_THREAD fields per
    socket and per thread (``thread_cpu``: where each thread starts), no flow delivered."""
    nth = len(sock_off) - 1
    per_cpu = [[t for t in range(nth) if thread["thread_cpu"][t] == c] for c in range(ncpu)]
    maxt = max(1, nth)  # a CPU may end up with every thread after migrations
    cpu_threads = np.full((ncpu, maxt), -1, np.int64)
    for c, lst in enumerate(per_cpu):
        cpu_threads[c, : len(lst)] = lst
    so = SockState(
        sq=np.zeros(int(sock_off[-1]) or 1, SKB), sock=np.zeros(nth, SOCK),
        thread=np.zeros(nth, APP_THREAD), flow=np.zeros(nflows, FLOW_SEQ),
        cpu_threads=cpu_threads,
        cpu_nthreads=np.array([len(x) for x in per_cpu], np.int64),
    )
    so.flow["flow_max_seq"] = -1
    so.sock["sock_thread"] = so.thread["thread_sock"] = np.arange(nth)
    so.sock["sock_mask"] = np.diff(sock_off) - 1  # each queue's storage - 1
    so.sock["so_first_flow"] = so.sock["so_last_flow"] = -1  # nothing read yet
    so.thread["th_bp_napi"] = so.thread["th_bp_tev"] = -1
    for name, values in sock.items():
        so.sock[name] = values
    for name, values in thread.items():
        so.thread[name] = values
    return so


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
    if so.sock[sk].sock_tcp:
        return tcp_v4_rcv_sock(s, c, sk, f, tarr, seq, length, t)
    if (so.sock[sk].so_rmem > so.sock[sk].sock_rcvbuf
            or so.sock[sk].so_tail - so.sock[sk].so_head >= so.sock[sk].sock_cap):
        so.sock[sk].so_drops += 1
        drop(s, DROP_SOCKET_RCVBUF, t)
        return t
    t += cost(s, C_SOCKET_ENQUEUE)
    return sock_queue_tail(s, c, sk, f, tarr, seq, length, t)


@njit(**JIT_STATE)
def tcp_ofo_cost(s, sk, f, seq):
    """An out-of-order segment: beyond a hole (tcp_data_queue_ofo: ofo queue, SACK at
    once) or filling one (tcp_ofo_queue moves the queue, the ACK goes at once)."""
    so = s.so
    mx = so.flow[f].flow_max_seq
    if seq > mx + 1 or seq < mx:
        so.sock[sk].tcp_ofo_n += 1
        return cost(s, C_TCP_OFO)
    return np.int64(0)


@njit(**JIT_STATE)
def tcp_v4_rcv_sock(s, c, sk, f, tarr, seq, length, t):
    """tcp_v4_rcv once the established socket is found, on CPU c at time t."""
    p, so = s.p, s.so
    th = so.sock[sk].sock_thread
    tc = so.thread[th].thread_cpu
    slot = p.sock_off[sk] + (so.sock[sk].so_tail & so.sock[sk].sock_mask)
    full = so.sock[sk].so_tail - so.sock[sk].so_head >= so.sock[sk].sock_cap
    if c != tc and so.thread[th].th_own_lo <= t < so.thread[th].th_own_hi:
        # sock_owned_by_user: tcp_add_backlog (limit since v6.10, ec00ed472bdb:
        # 2 x sk_rcvbuf + sk_sndbuf / 2 + 64 KB against backlog + sk_rmem_alloc)
        limit = 2 * so.sock[sk].sock_rcvbuf + TCP_SNDBUF // 2 + 65536
        if full or so.sock[sk].so_rmem > limit:
            so.sock[sk].so_drops += 1
            drop(s, DROP_SOCKET_BACKLOG, t)
            return t
        t += cost(s, C_SOCKET_ENQUEUE)  # bh_lock_sock + __sk_add_backlog
        so.sock[sk].tcp_backlog_n += 1
        ofo = tcp_ofo_cost(s, sk, f, seq)
        # __release_sock -> tcp_v4_do_rcv on the thread's CPU, at the read's end
        so.thread[th].th_bl_ns += cost(s, C_TCP_RCV) + ofo
        sock_queue_tail(s, tc, sk, f, tarr, seq, length, so.thread[th].th_rel)
        so.sq[slot].src = c
        return t
    if full or so.sock[sk].so_rmem > so.sock[sk].sock_rcvbuf:
        so.sock[sk].so_drops += 1  # tcp_data_queue: tcp_try_rmem_schedule failed
        drop(s, DROP_SOCKET_RCVBUF, t)
        return t
    ofo = tcp_ofo_cost(s, sk, f, seq)
    t += cost(s, C_TCP_RCV) + ofo  # tcp_v4_do_rcv -> tcp_rcv_established, the ACK
    if c != tc:
        # the socket's lines are dirty on the reader's CPU; sk_data_ready wakes it there
        t += cost(s, C_TCP_REMOTE)
        so.sock[sk].tcp_remote_n += 1
    else:
        so.sock[sk].tcp_local += 1
    t = sock_queue_tail(s, c, sk, f, tarr, seq, length, t)
    return t


@njit(**JIT_STATE)
def sock_queue_tail(s, c, sk, f, tarr, seq, length, t):
    """CPU c appends to socket sk's queue (room already checked) and wakes its reader;
    returns the time after it (a reader on another CPU costs c ``wakeup_remote``)."""
    p, so, st, ev = s.p, s.so, s.st, s.ev
    ts = truesize(length)
    slot = p.sock_off[sk] + (so.sock[sk].so_tail & so.sock[sk].sock_mask)
    skb = so.sq[slot]
    skb.flow = f
    skb.tarr = tarr
    skb.seq = seq
    skb.len = length
    skb.stamp = t
    skb.src = c
    so.sock[sk].so_tail += 1
    so.sock[sk].so_rmem += ts
    st.cnt[CNT_SOCKET_IN] += 1
    lat = t - tarr
    st.lat_sock[hist_index(lat)] += 1
    st.lat_sum[LAT_SOCK] += lat
    st.cnt[CNT_LAT_SOCK_N] += 1
    if seq < so.flow[f].flow_max_seq:
        st.cnt[CNT_REORDERED] += 1
    else:
        so.flow[f].flow_max_seq = seq
    th = so.sock[sk].sock_thread
    if so.thread[th].th_state == TH_SLEEP:
        so.thread[th].th_state = TH_WAKING
        thread_woken(s, th, c)
        schedule(ev, t + cost(s, C_WAKEUP_LATENCY), PRIO_WAKE, EV_WAKE, th)
        t += ttwu_remote(s, c, so.thread[th].thread_cpu)  # sock_def_readable's try_to_wake_up
    elif p.busy_poll_on and so.thread[th].th_bp == BP_LOOP:
        wake_busy_poller(s, th, t)  # its busy loop sees the queue (no wake-up)
    return t


@njit(**JIT_STATE)
def thread_woken(s, th, waker):
    """Count a wake-up of thread th by CPU ``waker`` (result: ``apps[].wakeups``)."""
    so = s.so
    so.thread[th].th_wakeups += 1
    so.thread[th].th_waker = waker
    if waker != so.thread[th].thread_cpu:
        so.thread[th].th_wakeups_remote += 1


@njit(**JIT_STATE)
def bh_enable_runs_softirq(s, th):
    """__skb_recv_udp() ends each datagram with spin_unlock_bh(): local_bh_enable runs a
    pending NET_RX softirq inline in the reader's syscall (kernel/softirq.c
    __local_bh_enable_ip -> do_softirq), unless ksoftirqd is running and the kernel
    defers to it (v4.9-v6.4, ``ksoftirqd_running()``; reverted in v6.5 by d15121be7485).
    The reader's read ends after one datagram and the softirq runs next, on its time
    (with an empty queue too: the lock is taken and released all the same)."""
    p, so, sd = s.p, s.so, s.sd
    c = so.thread[th].thread_cpu
    if so.sock[so.thread[th].thread_sock].sock_tcp:
        return False
    if not (sd.cpu[c].softirq_pending or sd.cpu[c].in_rx_action):
        return False  # (in_rx_action: ksoftirqd's run, which no thread preempts midway)
    if sd.cpu[c].ksoftirqd and p.ksoftirqd_defers:
        return False
    sd.cpu[c].bh_inline = BH_APP
    sd.cpu[c].bh_task = th
    return True


@njit(**JIT_STATE)
def app_read(s, th, t):
    """A thread reads up to its batch of visible packets (recvmsg + user work).

    Returns (end time, packets, system ns, user ns).
    """
    p, so, st = s.p, s.so, s.st
    sk = so.thread[th].thread_sock
    t0 = t
    n = 0
    sys_ns = np.int64(0)
    user_ns = np.int64(0)
    bh_softirq = bh_enable_runs_softirq(s, th)  # what is pending now stays so meanwhile
    f = -1
    while (n < so.thread[th].thread_batch
           and so.sock[sk].so_head < so.sock[sk].so_tail):
        slot = p.sock_off[sk] + (so.sock[sk].so_head & so.sock[sk].sock_mask)
        skb = so.sq[slot]
        if skb.stamp > t:
            break  # queued by a segment that, in simulated time, has not happened yet
        ds = work_ns(s, so.thread[th].thread_sys_ns)
        if so.sock[sk].sock_tcp and skb.src != so.thread[th].thread_cpu:
            ds += cost(s, C_CROSS_CPU)  # the copy reads lines another CPU wrote
        du = work_ns(s, so.thread[th].thread_user_ns)
        sys_ns += ds
        user_ns += du
        t += ds + du
        so.sock[sk].so_rmem -= truesize(skb.len)
        so.sock[sk].so_head += 1
        f = skb.flow
        so.flow[f].flow_delivered += 1
        if so.sock[sk].sock_record:
            # recvmsg -> sock_rps_record_flow: RFS learns where the consumer runs
            sock_rps_record_flow(s, p.flow[f].flow_hash, so.thread[th].thread_cpu)
        lat = t - skb.tarr
        st.lat_app[hist_index(lat)] += 1
        st.lat_sum[LAT_APP] += lat
        st.cnt[CNT_LAT_APP_N] += 1
        st.cnt[CNT_DELIVERED] += 1
        st.ts_pkt[interval_of(s, t), TS_DELIVERED] += 1
        n += 1
        if bh_softirq:
            break  # this datagram's spin_unlock_bh runs the softirq
    so.thread[th].th_served += n
    if p.busy_poll_on and n > 0:
        sk_note_flows(s, sk, n, f)  # the NAPI ids sk_mark_napi_id gave the socket
    if so.sock[sk].sock_tcp:
        # lock_sock .. release_sock around the copies (accounted first, as system)
        so.thread[th].th_own_lo = t0
        so.thread[th].th_own_hi = t0 + sys_ns
        so.thread[th].th_rel = t
    return t, n, sys_ns, user_ns


@njit(**JIT_STATE)
def app_after_read(s, c, th, t):
    """End of a read on CPU c: release_sock runs the socket backlog that softirqs on
    other CPUs queued meanwhile (system time), then the thread reads on, busy-polls an
    empty socket (``sk_busy_loop``), or waits (``app_wait``). Returns the time after the
    backlog."""
    so = s.so
    sk = so.thread[th].thread_sock
    if so.thread[th].th_bl_ns > 0:
        account(s, c, T_SYSTEM, t, t + so.thread[th].th_bl_ns)
        so.thread[th].th_ns += so.thread[th].th_bl_ns
        t += so.thread[th].th_bl_ns
        so.thread[th].th_bl_ns = 0
    if (s.p.busy_poll_on and so.sock[sk].so_head == so.sock[sk].so_tail
            and sk_busy_loop_start(s, c, th, t)):
        return t
    app_wait(s, c, th, t)
    return t


@njit(**JIT_STATE)
def app_wait(s, c, th, t):
    """Thread th on CPU c at t, its read over: runnable for a queued packet, waking for
    one still being delivered, or asleep."""
    p, so, ev = s.p, s.so, s.ev
    sk = so.thread[th].thread_sock
    queued = so.sock[sk].so_head < so.sock[sk].so_tail
    slot = p.sock_off[sk] + (so.sock[sk].so_head & so.sock[sk].sock_mask)
    if queued and so.sq[slot].stamp <= t:
        so.thread[th].th_state = TH_RUNNABLE
        return
    app_sleeps(s, c)
    if queued:
        # asleep when the segment that queued it (still running on its CPU) gets
        # there: that CPU wakes the thread, and pays for it when the segment ends
        so.thread[th].th_state = TH_WAKING
        src = np.int64(so.sq[slot].src)
        thread_woken(s, th, src)
        ttwu_remote_owed(s, src, c)
        schedule(ev, so.sq[slot].stamp + cost(s, C_WAKEUP_LATENCY), PRIO_WAKE, EV_WAKE, th)
    else:
        so.thread[th].th_state = TH_SLEEP

