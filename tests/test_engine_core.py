"""The event calendar and the latency histogram index against plain references:
``heapq`` over (time, priority, sequence) tuples, and the bucket rule written as the
obvious loop."""

from __future__ import annotations

import heapq

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from rxlab.engine.core import new_calendar, peek_time, pending, pop, schedule
from rxlab.kernel.accounting import hist_index


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(
    st.tuples(st.just("push"), st.integers(0, 50), st.integers(0, 3)),
    st.tuples(st.just("pop"), st.just(0), st.just(0))), max_size=120))
def test_calendar_pops_in_time_priority_sequence_order(ops):
    ev = new_calendar(256)
    ref: list = []
    seq = 0
    for op, t, prio in ops:
        if op == "push":
            schedule(ev, t, prio, 1, seq)
            heapq.heappush(ref, (t, prio, seq))
            seq += 1
        elif ref:
            t_ref, _prio, s_ref = heapq.heappop(ref)
            assert peek_time(ev) == t_ref
            t_got, kind, arg = pop(ev)
            assert (t_got, kind, arg) == (t_ref, 1, s_ref)
        assert pending(ev) == len(ref)
    while ref:
        t_ref, _p, s_ref = heapq.heappop(ref)
        assert pop(ev)[0::2] == (t_ref, s_ref)


def _hist_index_loop(v: int) -> int:
    if v < 128:
        return max(v, 0)
    e, x = 0, v
    while x >= 128:
        x >>= 1
        e += 1
    return min(128 + (e - 1) * 64 + (x - 64), 128 + 64 * 40 - 1)


@settings(max_examples=500, deadline=None)
@given(st.one_of(st.integers(-5, 1 << 12), st.integers(0, (1 << 62) - 1)))
def test_hist_index_equals_the_shift_loop(v):
    assert hist_index(np.int64(v)) == _hist_index_loop(v)


@settings(max_examples=500, deadline=None)
@given(st.integers(1, 10**10), st.integers(0, 1 << 50))
def test_interval_by_reciprocal_equals_floor_division(interval, t):
    from rxlab.kernel.accounting import _interval

    n = 1 << 60
    assert _interval(np.int64(interval), 1.0 / interval, n, np.int64(t)) == t // interval


def test_the_arena_keeps_types_values_and_one_region():
    """relocate() copies every state array into one region without changing what numba
    sees (a changed layout would compile the loop a second time, silently) or any value;
    the named rows of a group are views that write through."""
    import numba

    from rxlab.build import build
    from rxlab.engine.arena import relocate
    from rxlab.kernel.sim import sim_of
    from rxlab.scenario import load_scenario

    m = build(load_scenario("default"))
    sim = sim_of(m)
    plain = [type(part)(*(np.array(v) if isinstance(v, np.ndarray) else v for v in part))
             for part in sim]
    moved = relocate(plain)
    assert numba.typeof(tuple(moved)) == numba.typeof(tuple(plain))
    bases = set()
    for a, b in zip(plain, moved, strict=True):
        for x, y in zip(a, b, strict=True):
            if isinstance(x, np.ndarray):
                assert y.flags.c_contiguous and y.flags.writeable
                assert y.dtype == x.dtype and y.shape == x.shape
                np.testing.assert_array_equal(x, y)
                base = y
                while base.base is not None and isinstance(base.base, np.ndarray):
                    base = base.base
                bases.add(id(base))
    assert len(bases) == 1
    m.sd.cpu["processed"][0] = 7  # a named row is a view of its group
    assert m.sd.cpu[0].tolist().count(7) >= 1


def test_state_tables_are_records_of_their_structs():
    """Each kernel struct the model keeps is one array of its structured dtype, one record
    per entry (CPU, queue, socket, rps_dev_flow slot, aRFS entry, cpumap entry, queued
    packet); Python reads a field of every entry as a view. No table is a stack of
    same-typed rows indexed by constants."""
    from rxlab.build import build
    from rxlab.kernel import state as S
    from rxlab.scenario import load_scenario

    m = build(load_scenario("default"))
    want = [
        (m.params, "queue", S.QUEUE_PARAMS, (m.params.nq,)),
        (m.params, "cpu", S.CPU_PARAMS, (m.params.ncpu,)),
        (m.params, "cpumap", S.CPUMAP_PARAMS, None),
        (m.nic, "ring", S.SKB, None), (m.sd, "bl", S.SKB, None), (m.so, "sq", S.SKB, None),
        (m.cm, "bq", S.SKB, None), (m.cm, "ring", S.SKB, None),
        (m.rf, "dev", S.RPS_DEV_FLOW, None), (m.ar, "entry", S.ARFS_ENTRY, None),
        (m.ar, "glob", S.ARFS_GLOB, (1,)), (m.cm, "entry", S.CPUMAP_ENTRY, None),
    ]
    for part, attr, dtype, shape in want:
        arr = getattr(part, attr)
        assert arr.dtype == dtype and arr.flags.c_contiguous, attr
        if shape is not None:
            assert arr.shape == shape, attr
        for name in dtype.names:
            assert np.shares_memory(arr[name], arr), (attr, name)
    # an entry's fields are adjacent: a field written by name lands in that entry's record
    m.rf.dev["last_qtail"][0, 0] = 77
    assert m.rf.dev[0, 0]["last_qtail"] == 77 and m.rf.dev.shape[0] == m.params.nq
    # no registry of named rows or records is left
    assert not hasattr(S, "ROW_GROUPS") and not hasattr(S, "RECORD_GROUPS")
    # one record per CPU: a CPU's softnet_data fields are adjacent in memory
    assert m.sd.cpu.dtype == S.SOFTNET_DATA and m.sd.cpu.shape == (m.params.ncpu,)
    m.sd.cpu["processed"][1] = 9  # a field written by name lands in CPU 1's record
    assert m.sd.cpu[1]["processed"] == 9
    assert m.nic.queue.dtype == S.RX_RING and m.nic.queue.shape == (m.params.nq,)
    assert m.so.sock.dtype == S.SOCK and m.so.sock.shape == (m.params.nthreads,)
    assert m.params.flow.dtype == S.FLOW and m.so.flow.dtype == S.FLOW_SEQ
    m.params.flow["flow_hash"][3] = 12345  # a field written by name lands in flow 3's record
    assert m.params.flow[3]["flow_hash"] == 12345
