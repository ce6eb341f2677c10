"""CPU time, drops, latency histograms and per-interval series (jitted helpers).

Every packet leaves through ``drop()`` with a reason or through ``app delivery``; the
conservation check in ``rxlab.simulate`` relies on that single exit per outcome.
"""

import numpy as np
from numba import njit

from rxlab.config import JIT_HELPER, JIT_LEAF
from rxlab.engine.rng import jittered, new_state
from rxlab.kernel.counters import (
    CNT_DROP0,
    CPU_CATS,
    HIST_BINS,
    LAT_SUMS,
    N_CNT,
    TS_DROPPED,
    TS_PKT,
)
from rxlab.kernel.drop_reasons import N_DROP_SLOTS
from rxlab.kernel.profile import SITES
from rxlab.kernel.state import IC_HI, IC_INTERVAL, IC_LO, Stats


def new_stats(ncpu: int, n_int: int, seed: int) -> Stats:
    """Zeroed counters, histograms, CPU time by category (whole run, traffic window and
    ``n_int`` intervals) and the jitter generator seeded with ``seed``."""
    i64, ncat = np.int64, len(CPU_CATS)
    return Stats(
        cnt=np.zeros(N_CNT, i64), lat_sock=np.zeros(HIST_BINS, i64),
        lat_app=np.zeros(HIST_BINS, i64), lat_nic=np.zeros(HIST_BINS, i64),
        lat_sum=np.zeros(len(LAT_SUMS), np.float64),
        cpu_ns=np.zeros((ncpu, ncat), i64), win_cpu=np.zeros((ncpu, ncat), i64),
        ts_cpu=np.zeros((n_int, ncpu, ncat), i64),
        ts_pkt=np.zeros((n_int, len(TS_PKT)), i64),
        ts_drop=np.zeros((n_int, N_DROP_SLOTS), i64),
        rng=new_state(seed), icache=np.zeros(3, i64),
        prof=np.zeros((len(SITES), 2), i64),
    )


@njit(**JIT_HELPER)
def cost(s, stage):
    """ns of CPU time for one unit of a stage (jittered for per-packet stages)."""
    p = s.p
    if p.jitter_kind == 0 or not p.jitter_mask[stage]:
        return p.cost_i[stage]  # np.int64(cost_ns + 0.5), rounded once at build
    m = jittered(s.st.rng, p.cost_ns[stage], p.jitter_kind, p.jitter_sigma)
    return np.int64(m + 0.5)


@njit(**JIT_HELPER)
def work_ns(s, mean):
    """Jittered application work (mean ns) as an integer number of ns."""
    p, st = s.p, s.st
    if p.jitter_kind != 0:
        mean = jittered(st.rng, mean, p.jitter_kind, p.jitter_sigma)
    return np.int64(mean + 0.5)


@njit(**JIT_LEAF)
def _interval(interval_ns, inv, n_intervals, t):
    """t // interval_ns, by the reciprocal and one correction (no integer division)."""
    i = np.int64(t * inv)
    if i * interval_ns > t:
        i -= 1
    elif (i + 1) * interval_ns <= t:
        i += 1
    return min(max(i, 0), n_intervals - 1)


@njit(**JIT_HELPER)
def interval_of(s, t):
    """The series interval of t; the last one found is cached with its bounds, since
    most packets of a run fall in the same interval as the previous one."""
    p, ic = s.p, s.st.icache
    if ic[IC_LO] <= t < ic[IC_HI]:
        return ic[IC_INTERVAL]
    i = _interval(p.interval_ns, p.interval_inv, p.n_intervals, t)
    ic[IC_INTERVAL] = i
    ic[IC_LO] = i * p.interval_ns if i > 0 else -(np.int64(1) << 62)  # _interval clamps
    ic[IC_HI] = (i + 1) * p.interval_ns if i < p.n_intervals - 1 else np.int64(1) << 62
    return i


@njit(**JIT_LEAF)
def _account(cpu_ns, win_cpu, ts_cpu, interval_ns, inv, n_intervals, win_ns, c, cat, t0,
             t1):
    if t1 <= t0:
        return
    cpu_ns[c, cat] += t1 - t0
    # a segment is charged when it starts and may run past the traffic window or the
    # end of the run: only its part inside each span counts there, so a CPU's shares
    # of a window (or an interval) never sum past 1
    if t0 < win_ns:
        win_cpu[c, cat] += min(t1, win_ns) - t0
    t = t0
    t_stop = min(t1, n_intervals * interval_ns)  # past the last interval: no interval
    while t < t_stop:
        i = _interval(interval_ns, inv, n_intervals, t)
        end = min((i + 1) * interval_ns, t_stop)
        ts_cpu[i, c, cat] += end - t
        t = end


@njit(**JIT_HELPER)
def account(s, c, cat, t0, t1):
    """Charge CPU c's time [t0, t1) to a category: its part inside the traffic window
    (the run's shares) and its parts inside each series interval."""
    p = s.p
    # np.int64(): one compiled _account, not one per literal category
    _account(s.st.cpu_ns, s.st.win_cpu, s.st.ts_cpu, p.interval_ns, p.interval_inv,
             p.n_intervals, p.win_ns, c, np.int64(cat), t0, t1)


@njit(**JIT_LEAF)
def _drop(cnt, ts_drop, ts_pkt, interval_ns, inv, n_intervals, reason, t):
    i = _interval(interval_ns, inv, n_intervals, t)
    cnt[CNT_DROP0 + reason] += 1
    ts_drop[i, reason] += 1
    ts_pkt[i, TS_DROPPED] += 1


@njit(**JIT_HELPER)
def drop(s, reason, t):
    """The one exit for a dropped packet: counted by reason and in the series."""
    st = s.st
    p = s.p
    _drop(st.cnt, st.ts_drop, st.ts_pkt, p.interval_ns, p.interval_inv, p.n_intervals,
          np.int64(reason), t)  # np.int64(): one compiled _drop, not one per literal reason


@njit(**JIT_LEAF)
def hist_index(v):
    """Log-linear bucket: exact below 128 ns, then 64 sub-buckets per power of two."""
    if v < 128:
        return max(v, 0)
    # e = bit length - 7, by halving steps: each shift keeps x >= 64, so x ends in
    # [64, 128) (v in [2^(e+6), 2^(e+7)))
    e = 0
    x = v
    if x >= np.int64(1) << 38:
        x >>= 32
        e += 32
    if x >= 1 << 22:
        x >>= 16
        e += 16
    if x >= 1 << 14:
        x >>= 8
        e += 8
    if x >= 1 << 10:
        x >>= 4
        e += 4
    if x >= 1 << 8:
        x >>= 2
        e += 2
    if x >= 1 << 7:
        x >>= 1
        e += 1
    idx = 128 + (e - 1) * 64 + (x - 64)
    return min(idx, HIST_BINS - 1)


def hist_value(idx: np.ndarray) -> np.ndarray:
    """Midpoint (ns) of each bucket: the inverse of hist_index, for percentiles."""
    idx = np.asarray(idx, dtype=np.int64)
    out = idx.astype(np.float64)
    hi = idx >= 128
    e = (idx[hi] - 128) // 64 + 1
    x = (idx[hi] - 128) % 64 + 64
    out[hi] = (x.astype(np.float64) + 0.5) * np.exp2(e.astype(np.float64))
    return out
