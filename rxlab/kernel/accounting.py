"""CPU time, drops, latency histograms and per-interval series (jitted helpers).

Every packet leaves through ``drop(s,)`` with a reason or through ``app delivery``; the
conservation check in ``rxlab.simulate`` relies on that single exit per outcome.
"""

import numpy as np
from numba import njit

from rxlab.config import JIT_LOOP
from rxlab.engine.rng import jittered
from rxlab.kernel.state import (
    CNT_DROP0,
    HIST_BINS,
    TS_DROPPED,
)


@njit(**JIT_LOOP)
def cost(s, stage):
    """ns of CPU time for one unit of a stage (jittered for per-packet stages)."""
    p, st = s.p, s.st
    m = p.cost_ns[stage]
    if p.jitter_kind != 0 and p.jitter_mask[stage]:
        m = jittered(st.rng, m, p.jitter_kind, p.jitter_sigma)
    return np.int64(m + 0.5)


@njit(**JIT_LOOP)
def work_ns(s, mean):
    """Jittered application work (mean ns) as an integer number of ns."""
    p, st = s.p, s.st
    if p.jitter_kind != 0:
        mean = jittered(st.rng, mean, p.jitter_kind, p.jitter_sigma)
    return np.int64(mean + 0.5)


@njit(**JIT_LOOP)
def interval_of(s, t):
    p = s.p
    i = t // p.interval_ns
    return min(max(i, 0), p.n_intervals - 1)


@njit(**JIT_LOOP)
def account(s, c, cat, t0, t1):
    """Charge CPU c's time [t0, t1) to a category, split over the series intervals."""
    p, st = s.p, s.st
    if t1 <= t0:
        return
    st.cpu_ns[c, cat] += t1 - t0
    t = t0
    while t < t1:
        i = interval_of(s, t)
        end = (i + 1) * p.interval_ns
        if i == p.n_intervals - 1 or end > t1:
            end = t1
        st.ts_cpu[i, c, cat] += end - t
        t = end


@njit(**JIT_LOOP)
def drop(s, reason, t):
    p, st = s.p, s.st
    st.cnt[CNT_DROP0 + reason] += 1
    st.ts_drop[interval_of(s, t), reason] += 1
    st.ts_pkt[interval_of(s, t), TS_DROPPED] += 1


@njit(**JIT_LOOP)
def hist_index(v):
    """Log-linear bucket: exact below 128 ns, then 64 sub-buckets per power of two."""
    if v < 128:
        return max(v, 0)
    e = 0
    x = v
    while x >= 128:
        x >>= 1
        e += 1
    # v in [2^(e+6), 2^(e+7)): x = v >> e in [64, 128)
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
