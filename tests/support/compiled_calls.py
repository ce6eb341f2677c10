"""Python entry points, for tests, to mechanisms that only compiled code may call.

A mechanism that takes the state ``s`` is compiled without a CPython wrapper
(``rxlab.config.JIT_INNER``). Each function here is a compiled one-line call with a
wrapper, cached like the rest; a test imports the mechanism's name from here instead of
from its rxlab module (``tests/test_jit_entry.py`` checks that none does).
"""

from numba import njit

from rxlab.kernel import backlog, flow_limit, rfs, rps, sched, socket
from rxlab.nic import arfs, arfs_steer

JIT = dict(cache=True, _nrt=False)


@njit(**JIT)
def app_after_read(s, c, th, t):
    return socket.app_after_read(s, c, th, t)


@njit(**JIT)
def arfs_bucket(s, f, skb_hash):
    return arfs_steer.arfs_bucket(s, f, skb_hash)


@njit(**JIT)
def arfs_expire_scan(s, t):
    return arfs.arfs_expire_scan(s, t)


@njit(**JIT)
def arfs_program_pending(s, t):
    return arfs.arfs_program_pending(s, t)


@njit(**JIT)
def enqueue_to_backlog(s, this_cpu, cpu, skb_hash, f, tarr, seq, length, t, rq, rs):
    return backlog.enqueue_to_backlog(s, this_cpu, cpu, skb_hash, f, tarr, seq, length, t, rq, rs)


@njit(**JIT)
def get_rps_cpu(s, rxq, skb_hash, f, t):
    return rps.get_rps_cpu(s, rxq, skb_hash, f, t)


@njit(**JIT)
def kworker_wake(s, c, t):
    return arfs.kworker_wake(s, c, t)


@njit(**JIT)
def ndo_rx_flow_steer(s, f, skb_hash, rxq, flow_id, c, t):
    return arfs_steer.ndo_rx_flow_steer(s, f, skb_hash, rxq, flow_id, c, t)


@njit(**JIT)
def netif_receive_skb_core(s, c, rx_cpu, f, tarr, seq, length, t):
    return socket.netif_receive_skb_core(s, c, rx_cpu, f, tarr, seq, length, t)


@njit(**JIT)
def pick_next(s, c, t):
    return sched.pick_next(s, c, t)


@njit(**JIT)
def place_woken(s, c, k, v, lag):
    return sched.place_woken(s, c, k, v, lag)


@njit(**JIT)
def wake_preempt(s, c, v):
    return sched.wake_preempt(s, c, v)


@njit(**JIT)
def sleep_lag(s, c, k, v):
    return sched.sleep_lag(s, c, k, v)


@njit(**JIT)
def need_resched(s, c, t):
    return sched.need_resched(s, c, t)


@njit(**JIT)
def process_backlog(s, c, t, quota):
    return backlog.process_backlog(s, c, t, quota)


@njit(**JIT)
def rfs_slot(s, skb_hash, log):
    return rfs.rfs_slot(s, skb_hash, log)


@njit(**JIT)
def rps_flow_is_active(s, q, slot, cpu):
    return rfs.rps_flow_is_active(s, q, slot, cpu)


@njit(**JIT)
def rps_may_expire_flow(s, q, flow_id, filter_id):
    return rfs.rps_may_expire_flow(s, q, flow_id, filter_id)


@njit(**JIT)
def skb_flow_limit(s, this_cpu, skb_hash, qlen):
    return flow_limit.skb_flow_limit(s, this_cpu, skb_hash, qlen)


@njit(**JIT)
def sock_rps_record_flow(s, skb_hash, cpu):
    return rfs.sock_rps_record_flow(s, skb_hash, cpu)


@njit(**JIT)
def arfs_lock(s, t, hold):
    return arfs_steer.arfs_lock(s, t, hold)


@njit(**JIT)
def arfs_lock_each(s, t, hold, wait):
    """arfs_lock for each (t[i], hold[i]) in turn, its wait in wait[i] (one call from
    Python for a long stream)."""
    for i in range(t.size):
        wait[i] = arfs_steer.arfs_lock(s, t[i], hold[i])


@njit(**JIT)
def ice_sync(s, t):
    return arfs.ice_sync(s, t)


@njit(**JIT)
def mlx5_expire(s, t):
    return arfs.mlx5_expire(s, t)
