"""Deterministic, chunked packet stream over all traffic groups.

Each group is generated in fixed time blocks anchored at its own ``start``:
``block_ns = clamp(2**15 / pps seconds, 1 us, 1 s)`` (pps = the group's ON rate), so a
block holds about 2**15 packets. Block k of group g draws from its own
``SeedSequence([seed, 2, g, k])``. Hence the packets depend only on (seed, group spec,
group index): not on ``max_packets``, not on the other groups, and not on ``duration``
or ``stop`` beyond truncation (a block is always generated whole, then cut).
Groups are merged by (time, group index, generation order); ``chunks`` only re-slices
that merged sequence.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
from numba import njit

from rxlab.config import JIT_LEAF
from rxlab.traffic.flows import FlowTable
from rxlab.traffic.sampling import alias_draw, alias_table
from rxlab.traffic.spec import GroupSpec, TrafficSpec

BLOCK_PACKETS = 1 << 15
MIN_BLOCK_NS, MAX_BLOCK_NS = 1_000, 1_000_000_000
DEFAULT_CHUNK = 1 << 16
MERGE_PACKETS = 1 << 16
_INF = 1 << 62  # "no more packets" horizon; larger than any run in ns


def _ns(seconds: float) -> int:
    return int(round(seconds * 1e9))


@dataclass(frozen=True, eq=False)
class Chunk:
    t_ns: np.ndarray  # int64 arrival time, non-decreasing across the whole stream
    flow: np.ndarray  # int32 row into the FlowTable
    size: np.ndarray  # int32 frame bytes incl. FCS

    def __len__(self) -> int:
        return self.t_ns.size


class _Categorical:
    """Draws indices with the given weights; fast paths for one and for equal weights."""

    def __init__(self, w: np.ndarray):
        self.n = w.size
        self.equal = bool(np.all(w == w[0]))
        if not self.equal:
            self.prob, self.alias = alias_table(np.ascontiguousarray(w, np.float64))

    def draw(self, rng: np.random.Generator, n: int) -> np.ndarray:
        if self.n == 1:
            return np.zeros(n, np.int32)
        if self.equal:
            return rng.integers(0, self.n, n, dtype=np.int32)
        return alias_draw(rng.random(n), self.prob, self.alias)


class _Source:
    """One group's packets, block by block, in integer nanoseconds."""

    def __init__(self, g: GroupSpec, gi: int, w: np.ndarray, first: int, seed: int, dur: int):
        self.gi, self.seed, self.first = gi, seed, first
        self.pps = g.rate.pps
        self.start = _ns(g.start)
        self.end = min(dur, _ns(g.stop)) if g.stop is not None else dur
        self.block = min(max(_ns(BLOCK_PACKETS / self.pps), MIN_BLOCK_NS), MAX_BLOCK_NS)
        a = g.arrivals
        self.onoff = a.process == "onoff"
        self.process = a.within if self.onoff else a.process
        if self.onoff:
            self.on = max(_ns(a.on_s), 1)
            self.period = self.on + _ns(a.off_s)
        # Constant spacing as an exact rational number of ns: floor(j * num / den); the
        # rate is read as a fraction with denominator <= 1000 (exact for 3 decimals).
        p = Fraction(10**9) / Fraction(self.pps).limit_denominator(1000)
        self.num, self.den = p.numerator, p.denominator
        self.p_int, self.p_rem = divmod(self.num, self.den)
        self._full: np.ndarray | None = None
        self.flows = _Categorical(w)
        self.choices = np.asarray(g.size.choices, np.int32)
        self.sizes = _Categorical(np.asarray(g.size.probs()))
        self.k = 0  # next block

    @property
    def horizon(self) -> int:
        """All packets before this time are generated (_INF once exhausted)."""
        t = self.start + self.k * self.block
        return t if t < self.end else _INF

    def on_time(self, t: int) -> int:
        """ns of ON time in [start, t)."""
        u = max(t - self.start, 0)
        if not self.onoff:
            return u
        q, r = divmod(u, self.period)
        return q * self.on + min(r, self.on)

    def _poisson(self, rng: np.random.Generator, b0: int, b1: int) -> np.ndarray:
        # Exact Poisson process floored to the ns grid: Poisson count, uniform integer
        # positions in the block's ON time, then mapped back to wall-clock time.
        f0, f1 = self.on_time(b0), self.on_time(b1)
        n = rng.poisson(self.pps * (f1 - f0) * 1e-9) if f1 > f0 else 0
        s = rng.integers(f0, f1, n, dtype=np.int64) if n else np.zeros(0, np.int64)
        s.sort()
        if self.onoff:
            q, r = np.divmod(s, self.on)
            return self.start + q * self.period + r
        return self.start + s

    def _run(self, lo: int, hi: int) -> np.ndarray:
        """Offsets floor(j * num / den) in [lo, hi), j >= 0, without int64 overflow."""
        jlo = -((-lo * self.den) // self.num)
        jhi = -((-hi * self.den) // self.num)
        q, r = divmod(jlo * self.num, self.den)
        i = np.arange(max(jhi - jlo, 0), dtype=np.int64)
        return q + i * self.p_int + (r + i * self.p_rem) // self.den

    def _constant(self, b0: int, b1: int) -> np.ndarray:
        if not self.onoff:
            return self.start + self._run(b0 - self.start, b1 - self.start)
        # The train restarts at every ON edge; whole periods inside the block share
        # one offset pattern (short, since the period is then shorter than the block).
        m0 = (b0 - self.start) // self.period
        m1 = (b1 - 1 - self.start) // self.period
        edge = []
        for m in sorted({m0, m1}):
            origin = self.start + m * self.period
            edge.append(origin + self._run(max(b0 - origin, 0), min(b1 - origin, self.on)))
        if m1 - m0 < 2:
            return np.concatenate(edge)
        if self._full is None:
            self._full = self._run(0, self.on)
        mid = self.start + np.arange(m0 + 1, m1, dtype=np.int64) * self.period
        return np.concatenate([edge[0], (mid[:, None] + self._full).ravel(), edge[1]])

    def next_block(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        b0 = self.start + self.k * self.block
        b1 = b0 + self.block
        rng = np.random.default_rng(np.random.SeedSequence([self.seed, 2, self.gi, self.k]))
        self.k += 1
        t = self._poisson(rng, b0, b1) if self.process == "poisson" else self._constant(b0, b1)
        n = t.size
        flow = self.flows.draw(rng, n)
        flow += np.int32(self.first)
        if self.choices.size == 1:  # no draw (none is made for one choice), no gather
            size = np.full(n, self.choices[0], np.int32)
        else:
            size = self.choices[self.sizes.draw(rng, n)]
        cut = int(np.searchsorted(t, self.end)) if b1 > self.end else n
        return t[:cut], flow[:cut], size[:cut]

    def expected(self) -> float:
        return self.pps * 1e-9 * (self.on_time(self.end) - self.on_time(self.start))


def _cat(parts: list[tuple[np.ndarray, ...]]) -> tuple[np.ndarray, ...]:
    if len(parts) == 1:
        return parts[0]
    return tuple(np.concatenate(c) for c in zip(*parts, strict=True))


def _emit(bufs: list[tuple[np.ndarray, ...]], ready: list[tuple[int, int]],
          safe: int) -> Iterator[tuple[np.ndarray, ...]]:
    """Pop every buffered packet before ``safe`` in (time, group, generation) order.

    ``ready`` is a heap of (first buffered time, group) over the non-empty buffers, so a
    step looks only at the groups it releases: with thousands of groups, a scan of every
    buffer per step would be quadratic. Groups often share a block phase, so one horizon
    step can release ~2**15 packets per group; merging them in equal time slices of
    ~MERGE_PACKETS keeps the sort in cache and the temporaries small. Slicing by time
    does not change the merged order.
    """
    due = []
    while ready and ready[0][0] < safe:
        due.append(heapq.heappop(ready)[1])
    if not due:
        return
    due.sort()  # group order: a tie in time goes to the lower group
    cuts = [bufs[g][0].size if safe >= _INF else int(bufs[g][0].searchsorted(safe))
            for g in due]
    total = sum(cuts)
    lo = min(int(bufs[g][0][0]) for g in due)
    hi = max(int(bufs[g][0][c - 1]) for g, c in zip(due, cuts, strict=True)) + 1
    pieces = -(-total // MERGE_PACKETS)
    for p in range(1, pieces + 1):
        edge = lo + (hi - lo) * p // pieces
        out = []
        for g in due:
            b = bufs[g]
            cut = int(b[0].searchsorted(edge))
            if cut:
                out.append(tuple(c[:cut] for c in b))
                bufs[g] = tuple(c[cut:] for c in b)
        if len(out) == 1:
            yield out[0]
        elif out:
            yield _merge(out)
    for g in due:
        if bufs[g][0].size:
            heapq.heappush(ready, (int(bufs[g][0][0]), g))


@njit(**JIT_LEAF)
def _merge_runs(t, flow, size, pos, end, ot, of, osz):
    """Merge the sorted runs t[pos[g]:end[g]] (g in group order) into ``ot, of, osz``.

    Ties go to the lower run, then keep generation order: exactly the order of a stable
    argsort of the concatenation, in O(n x runs) instead of a sort plus three gathers.
    """
    k = pos.size
    for i in range(ot.size):
        best = -1
        bt = 0
        for g in range(k):
            j = pos[g]
            if j < end[g] and (best < 0 or t[j] < bt):
                best = g
                bt = t[j]
        j = pos[best]
        pos[best] = j + 1
        ot[i] = bt
        of[i] = flow[j]
        osz[i] = size[j]


@njit(**JIT_LEAF)
def _merge_two(t0, f0, s0, t1, f1, s1, ot, of, osz):
    """``_merge_runs`` for two runs, read in place (no concatenation first) and chosen
    without a branch: which group comes next is a coin toss for the branch predictor."""
    n0 = t0.size
    n1 = t1.size
    i = 0
    j = 0
    o = 0
    while i < n0 and j < n1:
        a = t0[i]
        b = t1[j]
        c = np.int64(b < a)  # a tie goes to run 0, the lower group
        ot[o] = b if c else a
        of[o] = f1[j] if c else f0[i]
        osz[o] = s1[j] if c else s0[i]
        i += 1 - c
        j += c
        o += 1
    # one run is used up: the rest of the other follows as it is (one side is empty)
    o = _copy_rest(t0, f0, s0, i, ot, of, osz, o)
    _copy_rest(t1, f1, s1, j, ot, of, osz, o)


@njit(**JIT_LEAF)
def _copy_rest(t, f, sz, i, ot, of, osz, o):
    """Copy run[i:] to out[o:] (a loop: slicing would need numba's runtime); returns the
    next output position."""
    for k in range(t.size - i):
        ot[o + k] = t[i + k]
        of[o + k] = f[i + k]
        osz[o + k] = sz[i + k]
    return o + t.size - i


def _merge(out: list[tuple[np.ndarray, ...]]) -> tuple[np.ndarray, ...]:
    """Groups' time-sorted pieces, merged by (time, group, generation order)."""
    if len(out) == 2:
        (t0, f0, s0), (t1, f1, s1) = out
        n = t0.size + t1.size
        res = (np.empty(n, t0.dtype), np.empty(n, f0.dtype), np.empty(n, s0.dtype))
        _merge_two(t0, f0, s0, t1, f1, s1, *res)
        return res
    t, flow, size = _cat(out)
    lens = np.array([o[0].size for o in out], np.int64)
    end = np.cumsum(lens)
    pos = end - lens
    res = (np.empty_like(t), np.empty_like(flow), np.empty_like(size))
    _merge_runs(t, flow, size, pos, end, *res)
    return res


class PacketStream:
    """All groups' packets in time order, in [0, duration) and each group's [start, stop)."""

    def __init__(self, spec: TrafficSpec, flows: FlowTable, seed: int, duration_s: float):
        if not duration_s > 0:
            raise ValueError(f"duration_s must be > 0, got {duration_s}")
        if flows.group_names != [g.name for g in spec.groups]:
            raise ValueError("flow table was built from a different traffic spec")
        self.spec, self.flows, self.seed = spec, flows, int(seed)
        self.duration_ns = _ns(duration_s)

    def _sources(self) -> list[_Source]:
        return [
            _Source(
                g,
                gi,
                self.flows.weight[self.flows.rows(gi)],
                int(self.flows.group_first[gi]),
                self.seed,
                self.duration_ns,
            )
            for gi, g in enumerate(self.spec.groups)
        ]

    @property
    def block_ns(self) -> list[int]:
        """Generation block length per group (ns); fixed by the scenario."""
        return [s.block for s in self._sources()]

    def expected_packets(self) -> float:
        """Mean packet count of the whole run (for progress bars)."""
        return sum(s.expected() for s in self._sources())

    def _merged(self) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        # Advance the group whose horizon is earliest (the lower group on a tie);
        # everything before the smallest horizon is final and can go out, once that
        # horizon has moved. Buffers stay about one block per group; heaps keep a step
        # O(log groups) plus the groups it releases.
        srcs = self._sources()
        empty = (np.zeros(0, np.int64), np.zeros(0, np.int32), np.zeros(0, np.int32))
        bufs = [empty] * len(srcs)
        due = [(s.horizon, gi) for gi, s in enumerate(srcs) if s.horizon < _INF]
        heapq.heapify(due)
        ready: list[tuple[int, int]] = []
        released = -_INF
        while True:
            if due:
                gi = heapq.heappop(due)[1]
                blk = srcs[gi].next_block()
                if bufs[gi][0].size:
                    bufs[gi] = _cat([bufs[gi], blk])
                elif blk[0].size:
                    bufs[gi] = blk
                    heapq.heappush(ready, (int(blk[0][0]), gi))
                if srcs[gi].horizon < _INF:
                    heapq.heappush(due, (srcs[gi].horizon, gi))
            safe = due[0][0] if due else _INF
            if safe > released:  # new packets start at or after the old horizon
                yield from _emit(bufs, ready, safe)
                released = safe
            if safe >= _INF:
                return

    def chunks(self, max_packets: int = DEFAULT_CHUNK) -> Iterator[Chunk]:
        """The stream in chunks of exactly ``max_packets`` (the last may be shorter)."""
        if max_packets < 1:
            raise ValueError(f"max_packets must be >= 1, got {max_packets}")
        pend: list[tuple[np.ndarray, ...]] = []
        n = 0
        for blk in self._merged():
            if not blk[0].size:
                continue
            pend.append(blk)
            n += blk[0].size
            if n < max_packets:
                continue
            t, flow, size = _cat(pend)
            k = 0
            while n - k >= max_packets:
                yield Chunk(
                    t[k : k + max_packets], flow[k : k + max_packets], size[k : k + max_packets]
                )
                k += max_packets
            pend = [(t[k:], flow[k:], size[k:])] if k < n else []
            n -= k
        if n:
            yield Chunk(*_cat(pend))

    def __iter__(self) -> Iterator[Chunk]:
        return self.chunks()
