"""RFS (``get_rps_cpu`` and ``set_rps_cpu`` in net/core/dev.c, the socket table of
include/net/rps.h) against references written from the kernel (tests/support/rfs_harness.py),
never from rxlab.

* hash_32 / reciprocal_scale / (int)(a - b) with test vectors worked independently;
* the per-queue slot of each kernel version (``hash & mask`` up to 6.14, ``hash_32``
  since 6.15) and ``rps_flow_is_active`` / ``rps_may_expire_flow`` thresholds and cases;
* the move rule of ``get_rps_cpu`` case by case, including u32 wrap-around of head / last_qtail and
  the RPS_NO_CPU edge case of the socket table, then randomised sequences against the reference;
* what ``enqueue_to_backlog`` and ``process_backlog`` do to last_qtail and the head;
* table sizes rounded the kernel's way and bad RFS input as one-line UsageErrors;
* end to end on a 4-CPU host: packets follow their consumer thread, migrations move
  flows, and the out-of-order guard keeps every flow in order.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.one_line import usage_error
from support.rfs_harness import (
    Harness,
    apply_op,
    e2e_dict,
    rfs_dict,
    rfs_tables_of,
    run_with_snapshots,
    set_positions,
    tcp_group,
)
from support.rfs_reference import (
    RPS_NO_CPU,
    RPS_NO_FILTER,
    U32,
    RefKernel,
    ref_active_limit,
    ref_hash_32,
    ref_is_active,
    ref_reciprocal_scale,
    ref_rfs_slot,
    s32,
)

from rxlab.build import build
from rxlab.mechanisms.rfs import table_sizes as rfs_table_sizes
from rxlab.scenario import scenario_from_dict

VERSIONS = ("6.14", "6.15", "6.19")
H = 0x12345678  # hash_32(H, 10) = 478; H & 1023 = 0x278
Q = 0  # rx queue the test packets arrive on (its IRQ is on CPU 0)


@pytest.fixture(scope="module")
def hx():
    """4 CPUs, 4 queues, rps_sock_flow_entries 4096, rps_flow_cnt 1024, per version."""
    return {v: Harness(rfs_dict(cpus=4, version=v)) for v in VERSIONS}


@pytest.fixture
def h19(hx):
    return hx["6.19"].reset()


def slot_of(h: Harness, hv: int, q: int = Q) -> int:
    v = h.m.scenario.host.kernel
    from support.rfs_reference import hash32_rule

    return ref_rfs_slot(hv, h.log(q), hash32_rule(v))


def put(h: Harness, hv: int, tcpu: int, last_qtail: int, q: int = Q) -> int:
    slot = slot_of(h, hv, q)
    h.rf.dev["cpu"][q, slot] = tcpu
    h.rf.dev["last_qtail"][q, slot] = last_qtail
    return slot


def counters(h: Harness) -> dict:
    from rxlab.kernel.counters import RFS_CNT

    return {k: int(h.rf.cnt[0][k]) for k in RFS_CNT}


# ------------------------------------------------------------ hash functions -------
def test_reference_helpers_match_document_vectors():
    assert ref_hash_32(0x12345678, 10) == 0x1DE == 478
    assert ref_hash_32(0xDEADBEEF, 12) == 1757
    assert ref_hash_32(1, 7) == 48
    assert ref_reciprocal_scale(0x12345678, 4) == 0
    assert ref_reciprocal_scale(0xDEADBEEF, 3) == 2
    assert ref_reciprocal_scale(0xFFFFFFFF, 5) == 4
    assert s32(5, 0xFFFFFFF0) == 21 and s32(0xFFFFFFF0, 5) == -21
    assert s32(0x7FFFFFFF, 0) == 0x7FFFFFFF and s32(0x80000000, 0) == -(1 << 31)


def test_simulator_hash_helpers_match_document_vectors():
    from rxlab.kernel.hashfn import hash_32, reciprocal_scale, s32_diff

    assert hash_32(0x12345678, 10) == 478
    assert hash_32(0xDEADBEEF, 12) == 1757
    assert hash_32(1, 7) == 48
    assert reciprocal_scale(0x12345678, 4) == 0
    assert reciprocal_scale(0xDEADBEEF, 3) == 2
    assert reciprocal_scale(0xFFFFFFFF, 5) == 4
    assert s32_diff(5, 0xFFFFFFF0) == 21 and s32_diff(0xFFFFFFF0, 5) == -21
    assert s32_diff(0x80000000, 0) == -(1 << 31)


@settings(max_examples=300, deadline=None)
@given(v=st.integers(0, U32), bits=st.integers(1, 32))
def test_simulator_hash_32_matches_reference(v, bits):
    from rxlab.kernel.hashfn import hash_32

    assert int(hash_32(v, bits)) == ref_hash_32(v, bits)


# ------------------------------------------------------------- rfs_slot ------------
@pytest.mark.parametrize("version", VERSIONS)
def test_rfs_slot_per_version(hx, version):
    from support.compiled_calls import rfs_slot

    h = hx[version]
    hash32 = version != "6.14"
    assert h.m.config["rfs_slot"] == ("hash_32" if hash32 else "hash & mask")
    # worked vectors: slot of 0x12345678 in 1024 entries, 0xdeadbeef in 4096
    assert int(rfs_slot(h.s, 0x12345678, 10)) == (478 if hash32 else 0x278)
    assert int(rfs_slot(h.s, 0xDEADBEEF, 12)) == (1757 if hash32 else 0xEEF)
    assert int(rfs_slot(h.s, 1, 7)) == (48 if hash32 else 1)
    rng = np.random.default_rng(3)
    for hv in rng.integers(1, 1 << 32, 200, dtype=np.int64).tolist() + [U32, 1 << 31]:
        for log in (1, 4, 9, 10, 11, 16, 20):
            want = ref_hash_32(hv, log) if hash32 else hv & ((1 << log) - 1)
            assert int(rfs_slot(h.s, hv, log)) == want, (hex(hv), log)


# -------------------------------------------------- rps_flow_is_active ------------
@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("last", [1000, 0xFFFFFF00, 0x7FFFFFF0])
def test_rps_flow_is_active_threshold(hx, version, last):
    """Active while fewer than 10 << log (since 6.15; 10 * mask before) packets left
    the CPU's backlog since the entry's last_qtail; the count wraps modulo 2^32."""
    from support.compiled_calls import rps_flow_is_active

    h = hx[version].reset()
    log = h.log()
    limit = ref_active_limit(log, version != "6.14")
    assert limit == (10240 if version != "6.14" else 10230)
    slot = 17
    h.rf.dev["last_qtail"][Q, slot] = last
    for delta, active in ((0, True), (limit - 1, True), (limit, False), (limit + 1, False),
                          (-5, True), (1 << 31, True)):  # 2^31 reads as negative
        h.sd.cpu["input_queue_head"][2] = (last + delta) & U32
        assert bool(rps_flow_is_active(h.s, Q, slot, 2)) is active, (delta, active)
        assert ref_is_active((last + delta) & U32, last, 2, 4, log, version != "6.14") is active
    # an unset CPU is never active
    assert not rps_flow_is_active(h.s, Q, slot, RPS_NO_CPU)
    assert not rps_flow_is_active(h.s, Q, slot, 4)


# -------------------------------------------------- rps_may_expire_flow -----------
def test_rps_may_expire_flow_five_cases():
    """net/core/dev.c: keep (False) only with a table, flow_id < 2^log, the same filter id and
    an active entry; every other case expires."""
    from support.compiled_calls import rps_may_expire_flow

    # queue 1 has no table; queue 0 has 1024 entries, queue 2 has 256
    h = Harness(rfs_dict(cpus=4, version="6.19", flow_cnt={0: 1024, 2: 256, 3: 1024}))
    rf, sd = h.rf, h.sd
    log0 = h.log(0)
    assert log0 == 10 and h.log(1) == 0 and h.log(2) == 8
    fid, filt = 300, 7
    for q in (0, 2):
        f = fid if q == 0 else 200
        rf.dev["cpu"][q, f] = 3
        rf.dev["filter"][q, f] = filt
        rf.dev["last_qtail"][q, f] = 0xFFFFFFF0
    sd.cpu["input_queue_head"][3] = 0xFFFFFFF0 + 100 & U32  # wrapped, 100 packets later
    expire = lambda q, f, flt: bool(rps_may_expire_flow(h.s, q, f, flt))  # noqa: E731
    assert expire(0, fid, filt) is False  # the keep case
    assert expire(1, fid, filt) is True  # 1. queue without a table
    assert expire(2, 256, filt) is True  # 2. flow_id out of range (table of 256)
    assert expire(2, 200, filt) is False  # (in range on that queue: kept)
    assert expire(0, fid, filt + 1) is True  # 3. slot re-used by another filter
    rf.dev["cpu"][0, fid] = RPS_NO_CPU
    assert expire(0, fid, filt) is True  # 4. CPU unset
    rf.dev["cpu"][0, fid] = 3
    sd.cpu["input_queue_head"][3] = (0xFFFFFFF0 + (10 << log0) - 1) & U32
    assert expire(0, fid, filt) is False  # still active one packet before the limit
    sd.cpu["input_queue_head"][3] = (0xFFFFFFF0 + (10 << log0)) & U32
    assert expire(0, fid, filt) is True  # 5. stale


def test_rps_may_expire_flow_before_6_15_uses_ten_times_mask():
    from support.compiled_calls import rps_may_expire_flow

    h = Harness(rfs_dict(cpus=4, version="6.14", flow_cnt=1024))
    h.rf.dev["cpu"][0, 5] = 1
    h.rf.dev["filter"][0, 5] = 9
    h.rf.dev["last_qtail"][0, 5] = 50
    h.sd.cpu["input_queue_head"][1] = 50 + 10 * 1023 - 1
    assert not rps_may_expire_flow(h.s, 0, 5, 9)
    h.sd.cpu["input_queue_head"][1] = 50 + 10 * 1023
    assert rps_may_expire_flow(h.s, 0, 5, 9)


# ------------------------------------------------------------- move rule ----------
def test_keep_when_tcpu_equals_next_cpu(h19):
    h19.record(H, 2)
    slot = put(h19, H, 2, 500)
    h19.sd.cpu["input_queue_head"][2] = 100  # not caught up: irrelevant when tcpu == next_cpu
    cpu, rflow = h19.get_rps_cpu(Q, H)
    assert (cpu, rflow) == (2, (Q, slot))
    assert h19.ent(Q, slot)[:3] == [2, RPS_NO_FILTER, 500]  # untouched
    c = counters(h19)
    assert (c["rfs_moves"], c["rfs_held"], c["rfs_steered"]) == (0, 0, 1)


def test_unset_tcpu_switches_and_resets_last_qtail_to_head(h19):
    h19.record(H, 3)
    slot = slot_of(h19, H)
    assert h19.ent(Q, slot)[0] == RPS_NO_CPU  # tables start with RPS_NO_CPU
    h19.sd.cpu["input_queue_head"][3] = 0xABCDEF01
    h19.sd.cpu["input_queue_tail"][3] = 0xABCDEF01
    cpu, rflow = h19.get_rps_cpu(Q, H)
    assert (cpu, rflow) == (3, (Q, slot))
    # set_rps_cpu without aRFS: last_qtail = head[next_cpu], cpu = next_cpu
    assert h19.ent(Q, slot)[:3] == [3, RPS_NO_FILTER, 0xABCDEF01]
    assert counters(h19)["rfs_moves"] == 0  # a first placement is not a move


@pytest.mark.parametrize(
    "head,last_qtail,switch",
    [
        (1000, 1000, True),  # caught up exactly
        (1001, 1000, True),  # past it
        (999, 1000, False),  # one packet still queued on the old CPU
        (5, 0xFFFFFFF0, True),  # (int)(5 - 0xfffffff0) = 21 >= 0: head wrapped past it
        (0xFFFFFFF0, 5, False),  # (int)(0xfffffff0 - 5) = -21: tail wrapped, head not
        (0, 0xFFFFFFFF, True),  # +1 across the wrap
        (0xFFFFFFFF, 0, False),  # -1 across the wrap
        (0x7FFFFFFF, 0, True),  # largest positive difference
        (0x80000000, 0, False),  # reads as -2^31: hold
    ],
)
def test_move_rule_with_u32_wrap(h19, head, last_qtail, switch):
    h19.record(H, 3)  # the application now reads on CPU 3
    slot = put(h19, H, 1, last_qtail)  # the flow is steered to CPU 1
    h19.sd.cpu["input_queue_head"][1] = head
    h19.sd.cpu["input_queue_head"][3] = 777
    cpu, rflow = h19.get_rps_cpu(Q, H)
    c = counters(h19)
    assert rflow == (Q, slot)
    if switch:
        assert cpu == 3
        assert h19.ent(Q, slot)[:3] == [3, RPS_NO_FILTER, 777]  # last_qtail = head[3]
        assert (c["rfs_moves"], c["rfs_held"]) == (1, 0)
    else:
        assert cpu == 1  # held on the old CPU: out-of-order guard
        assert h19.ent(Q, slot)[:3] == [1, RPS_NO_FILTER, last_qtail]
        assert (c["rfs_moves"], c["rfs_held"]) == (0, 1)
    want = RefKernel(4, 4, 10, "6.19")
    want.record(H, 3)
    want.ent(Q, slot)[0], want.ent(Q, slot)[2] = 1, last_qtail
    want.head[1], want.head[3] = head, 777
    assert want.get_rps_cpu(Q, H, 0)[0] == cpu


def test_socket_table_mismatch_falls_back(h19):
    """The socket entry stores the high hash bits: another flow's entry in the same
    socket slot does not match, and without an rps_map the packet is processed inline."""
    other = (H ^ 0x80000000) & U32  # same socket slot, different high bits
    h19.record(other, 2)
    assert h19.get_rps_cpu(Q, H) == (-1, None)
    assert counters(h19)["rfs_steered"] == 0
    assert h19.get_rps_cpu(Q, 0) == (-1, None)  # hash 0: never steered


def test_rps_no_cpu_edge_case_falls_back_to_rps():
    """get_rps_cpu, include/net/rps.h: with 3 CPUs (rps_cpu_mask 3), a hash whose bits
    outside the mask equal 0xffff's "matches" an empty socket slot with next_cpu = 3 >=
    nr_cpu_ids: the entry is set to 3 and the packet falls back to the RPS map."""
    h = Harness(rfs_dict(cpus=3, version="6.19", kernel={"rps_cpus": "7"}))
    assert h.p.rps_cpu_mask == 3
    for hv in (0xFFFC, 0xFFFD, 0xFFFE, 0xFFFF):
        assert (hv & ~3) == (0xFFFF & ~3)
        slot = slot_of(h, hv)
        cpu, rflow = h.get_rps_cpu(Q, hv)
        assert rflow is None  # RPS chose: the kernel's voidflow
        assert cpu == [0, 1, 2][ref_reciprocal_scale(hv, 3)]
        assert h.ent(Q, slot)[0] == 3  # set_rps_cpu stored next_cpu = 0xffff & 3
        assert h.get_rps_cpu(Q, hv)[0] == cpu  # and again: tcpu == next_cpu, invalid
    # a hash with other high bits does not match the empty slot
    assert h.get_rps_cpu(Q, 0x1FFFD)[1] is None
    assert h.ent(Q, slot_of(h, 0x1FFFD))[0] == RPS_NO_CPU


# randomised single decisions against the reference (6 CPUs: mask 7, CPUs 6 and 7
# do not exist; a small table so flows share slots)
@pytest.fixture(scope="module")
def h6():
    return Harness(rfs_dict(cpus=6, queues=2, version="6.19", flow_cnt=16,
                            kernel={"rps_cpus": "3f"}))


u32s = st.one_of(st.integers(0, U32), st.sampled_from([0, 1, 0x7FFFFFFF, 0x80000000,
                                                       0xFFFFFFF0, U32]))


@settings(max_examples=400, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_move_rule_random_against_reference(h6, data):
    h6.reset()
    ref = RefKernel(6, 2, 4, "6.19", rps_map=range(6))
    hv = data.draw(st.integers(0, U32), "hash")
    q = data.draw(st.integers(0, 1), "rxq")
    sock = data.draw(st.one_of(
        st.none(),  # never recorded: RPS_NO_CPU
        st.integers(0, 7).map(lambda c: ((hv & ~7) & U32) | c),  # recorded CPU (6, 7 bad)
        st.integers(0, U32)), "sock")
    if sock is not None:
        h6.rf.sock_flow[hv & 4095] = sock
        ref.sock[hv & 4095] = sock
    slot = ref_rfs_slot(hv, 4, True)
    tcpu = data.draw(st.sampled_from([0, 1, 2, 3, 4, 5, 6, 7, RPS_NO_CPU]), "tcpu")
    lq = data.draw(u32s, "last_qtail")
    h6.rf.dev["cpu"][q, slot] = tcpu
    h6.rf.dev["last_qtail"][q, slot] = lq
    ref.ent(q, slot)[0], ref.ent(q, slot)[2] = tcpu, lq
    for c in range(6):
        v = data.draw(st.one_of(u32s, st.integers(-3, 3).map(lambda d: (lq + d) & U32)))
        h6.sd.cpu["input_queue_head"][c] = v
        ref.head[c] = v
    got = h6.get_rps_cpu(q, hv)
    want = ref.get_rps_cpu(q, hv, 0)
    assert got == want
    sim, exp = rfs_tables_of(h6, ref, with_hash=False)
    assert sim == exp
    c = counters(h6)
    assert (c["rfs_moves"], c["rfs_held"]) == (ref.cnt["moves"], ref.cnt["held"])


# randomised sequences: packets, enqueues, dequeues and consumer moves
OPS = st.one_of(
    st.tuples(st.just("pkt"), st.integers(0, 5), st.integers(0, 1)),
    st.tuples(st.just("rec"), st.integers(0, 5), st.integers(0, 5)),
    st.tuples(st.just("deq"), st.integers(0, 5), st.integers(1, 40)),
)


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(hashes=st.lists(st.integers(1, U32), min_size=6, max_size=6),
       base=st.lists(u32s, min_size=6, max_size=6),
       ops=st.lists(OPS, min_size=1, max_size=60))
def test_move_rule_sequences_against_reference(h6, hashes, base, ops):
    h6.reset()
    ref = RefKernel(6, 2, 4, "6.19", rps_map=range(6))
    set_positions(h6, ref, base)
    for op in ops:
        got, want = apply_op(h6, ref, op, hashes, 0)
        assert got == want, op
    assert h6.sd.cpu["input_queue_tail"].tolist() == ref.tail
    assert h6.sd.cpu["input_queue_head"].tolist() == ref.head
    sim, exp = rfs_tables_of(h6, ref, with_hash=False)
    assert sim == exp
    c = counters(h6)
    assert (c["rfs_moves"], c["rfs_held"]) == (ref.cnt["moves"], ref.cnt["held"])


# --------------------------------------------- enqueue and backlog positions ------
def test_enqueue_stores_new_tail_in_the_chosen_rflow(h19):
    h19.record(H, 1)
    h19.sd.cpu["input_queue_head"][1] = h19.sd.cpu["input_queue_tail"][1] = 0xFFFFFFFE
    cpu, rflow = h19.get_rps_cpu(Q, H)
    slot = rflow[1]
    assert cpu == 1 and h19.ent(Q, slot)[2] == 0xFFFFFFFE  # head at the switch
    assert h19.enqueue(0, cpu, 0, H)
    assert int(h19.sd.cpu["input_queue_tail"][1]) == 0xFFFFFFFF
    assert h19.ent(Q, slot)[2] == 0xFFFFFFFF  # *qtail = ++tail
    h19.get_rps_cpu(Q, H)
    h19.enqueue(0, cpu, 0, H)
    assert int(h19.sd.cpu["input_queue_tail"][1]) == 0  # wrapped
    assert h19.ent(Q, slot)[2] == 0
    # the consumer moves to CPU 2 while both packets are still queued on CPU 1
    h19.record(H, 2)
    assert h19.get_rps_cpu(Q, H)[0] == 1  # (int)(0xfffffffe - 0) < 0: hold
    h19.sd.cpu["input_queue_head"][1] = 0xFFFFFFFF  # one of the two dequeued
    assert h19.get_rps_cpu(Q, H)[0] == 1
    h19.sd.cpu["input_queue_head"][1] = 0  # both dequeued (head wrapped too)
    assert h19.get_rps_cpu(Q, H)[0] == 2
    assert counters(h19)["rfs_held"] == 2


def test_rps_choice_does_not_touch_any_rflow():
    """When plain RPS chose the CPU the tail goes into the kernel's voidflow."""
    h = Harness(rfs_dict(cpus=4, version="6.19", kernel={"rps_cpus": "f"}))
    before = h.rf.dev["last_qtail"].copy()
    cpu, rflow = h.get_rps_cpu(Q, H)  # nothing recorded: RPS
    assert rflow is None and cpu == ref_reciprocal_scale(H, 4)
    h.enqueue(0, cpu, 0, H)
    assert int(h.sd.cpu["input_queue_tail"][cpu]) == 1
    assert np.array_equal(h.rf.dev["last_qtail"], before)


def test_process_backlog_advances_head_once_per_call_and_releases_the_flow(h19):
    """net/core/dev.c: head += work at the end of each process_backlog call (v6.10+); the
    flow can move once the head has reached its last_qtail (here across the u32 wrap)."""
    from support.compiled_calls import process_backlog

    f = 0
    hv = int(h19.p.flow["flow_hash"][f])
    c = int(h19.m.so.thread["thread_cpu"][h19.m.so.sock["sock_thread"][h19.p.flow["flow_sock"][f]]])
    other = (c + 1) % 4
    h19.sd.cpu["input_queue_head"][c] = h19.sd.cpu["input_queue_tail"][c] = 0xFFFFFFFD
    h19.record(hv, c)
    slot = None
    from support.compiled_calls import enqueue_to_backlog

    tail0 = int(h19.sd.cpu["bl_tail"][c])
    for k in range(5):  # five packets queued on CPU c for this flow
        cpu, rflow = h19.get_rps_cpu(Q, hv, f)
        assert cpu == c
        slot = rflow[1]
        enqueue_to_backlog(h19.s, 0, c, hv, f, 0, k, 64, 0, *rflow)
        assert int(h19.sd.cpu["bl_tail"][c]) == tail0 + k + 1  # queued, not dropped
    assert int(h19.sd.cpu["input_queue_tail"][c]) == 2 and h19.ent(Q, slot)[2] == 2
    h19.record(hv, other)  # consumer migrates
    work, _ = process_backlog(h19.s, c, 10, 3)  # quota 3: three delivered
    assert work == 3 and int(h19.sd.cpu["input_queue_head"][c]) == 0
    assert h19.get_rps_cpu(Q, hv, f)[0] == c  # two still queued: hold
    work, _ = process_backlog(h19.s, c, 10, 64)
    assert work == 2 and int(h19.sd.cpu["input_queue_head"][c]) == 2
    assert h19.get_rps_cpu(Q, hv, f)[0] == other  # caught up: move


def test_sock_rps_record_flow_value_and_index():
    from support.compiled_calls import sock_rps_record_flow

    h = Harness(rfs_dict(cpus=6, queues=2, version="6.19", entries=3000))
    assert h.p.sock_flow_mask == 4095 and h.p.rps_cpu_mask == 7
    sock_rps_record_flow(h.s, 0xDEADBEEF, 5)
    assert int(h.rf.sock_flow[0xDEADBEEF & 4095]) == (0xDEADBEEF & ~7 & U32) | 5
    before = h.rf.sock_flow.copy()
    sock_rps_record_flow(h.s, 0, 3)  # sk_rxhash == 0: not recorded
    assert np.array_equal(before, h.rf.sock_flow)


# ------------------------------------------------------ tables from the scenario ---
@pytest.mark.parametrize("n,entries", [(1, 1), (3000, 4096), (4096, 4096), (4097, 8192),
                                       ((1 << 29) - 5, 1 << 29), (1 << 29, 1 << 29), (0, 0)])
def test_rps_sock_flow_entries_rounding(n, entries):
    sc = scenario_from_dict(rfs_dict(entries=n, flow_cnt=0))
    got, _ = rfs_table_sizes(sc)
    assert got == entries


@pytest.mark.parametrize("cnt,size", [(2, 2), (3, 4), (1000, 1024), (1024, 1024),
                                      (1025, 2048), (0, 0)])
def test_rps_flow_cnt_rounding(cnt, size):
    m = build(scenario_from_dict(rfs_dict(flow_cnt=cnt)))
    assert m.config["rps_flow_cnt"] == [size] * 4
    if size:
        assert m.rf.dev_log.tolist() == [size.bit_length() - 1] * 4
        assert (m.rf.dev["cpu"][:, :size] == RPS_NO_CPU).all()
        assert (m.rf.dev["filter"][:, :size] == RPS_NO_FILTER).all()


def test_tables_start_empty_and_cpu_mask():
    m = build(scenario_from_dict(rfs_dict(cpus=6, queues=2, entries=100,
                                          flow_cnt={0: 16, 1: 64})))
    assert m.config["rps_sock_flow_entries"] == 128
    assert m.config["rps_flow_cnt"] == [16, 64]
    assert m.params.rps_cpu_mask == 7  # roundup_pow_of_two(nr_cpu_ids) - 1
    assert (m.rf.sock_flow == RPS_NO_CPU).all()  # every entry RPS_NO_CPU


# ------------------------------------------------------------- bad input ----------
def build_dict(d):
    return build(scenario_from_dict(d))


def test_rps_flow_cnt_one_is_rejected():
    usage_error(lambda: build_dict(rfs_dict(flow_cnt=1)), "rps_flow_cnt")
    usage_error(lambda: build_dict(rfs_dict(flow_cnt={2: 1})), "rps_flow_cnt")


def test_rps_flow_cnt_above_the_7_1_maximum():
    # 7.1-dev: mask <= INT_MAX / sizeof(entry) - 1, so 2^27 entries at most
    # (store_rps_dev_flow_table_cnt, net/core/net-sysfs.c)
    usage_error(lambda: build_dict(rfs_dict(version="7.1", flow_cnt=(1 << 27) + 1)),
                   "rps_flow_cnt", "maximum", str(1 << 27))


def test_rps_flow_cnt_above_the_6_19_maximum():
    # 6.19 on 64-bit: the rounded mask must fit in u32 -> 2^32 + 1 is -EINVAL
    usage_error(lambda: build_dict(rfs_dict(version="6.19", flow_cnt=(1 << 32) + 1)),
                   "rps_flow_cnt", "maximum")


def test_rps_flow_cnt_6_19_kernel_maximum_is_2_pow_32():
    msg = usage_error(lambda: build_dict(rfs_dict(version="6.19", flow_cnt=1 << 32)),
                         "rps_flow_cnt")
    assert "kernel maximum" not in msg, msg  # the kernel accepts 2^32 (6.19)
    msg = usage_error(lambda: build_dict(rfs_dict(version="6.19", flow_cnt=(1 << 32) + 1)))
    assert str(1 << 32) in msg, msg


def test_rps_sock_flow_entries_above_2_pow_29():
    usage_error(lambda: build_dict(rfs_dict(entries=(1 << 29) + 1)),
                   "rps_sock_flow_entries")


def test_consumer_thread_on_missing_cpu():
    d = rfs_dict(cpus=4, apps=[{"name": "a", "cpus": "0-4"}])
    usage_error(lambda: scenario_from_dict(d), "apps[0].cpus", "CPU 4")


def test_migrate_move_to_missing_cpu():
    d = rfs_dict(cpus=4, apps=[{"name": "a", "cpus": 1,
                                "migrate": [{"at": 0.01, "cpu": 2}, {"at": 0.02, "cpu": 7}]}])
    usage_error(lambda: scenario_from_dict(d), "apps[0].migrate[1].cpu", "CPU 7")
    d = rfs_dict(cpus=4, apps=[{"name": "a", "cpus": 1,
                                "migrate": {"every_s": 0.01, "cpus": "0-5"}}])
    usage_error(lambda: scenario_from_dict(d), "apps[0].migrate.cpus")


@pytest.mark.parametrize("bad", [
    {"kernel": {"rps_flow_cnt": 1}},
    {"kernel": {"rps_sock_flow_entries": (1 << 29) + 1}},
    {"apps": [{"name": "a", "cpus": "0-4"}]},
    {"apps": [{"name": "a", "cpus": 0, "migrate": [{"at": 0.01, "cpu": 4}]}]},
])
def test_cli_exit_2_and_one_line(tmp_path, capsys, bad):
    import yaml

    from rxlab.cli.main import main

    d = rfs_dict(cpus=4)
    d.update({k: v for k, v in bad.items() if k == "apps"})
    if "kernel" in bad:
        d["kernel"].update(bad["kernel"])
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(d))
    assert main(["run", str(path), "--json"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("rxlab: error:"), err


# ------------------------------------------------------------- end to end ----------
def placement_gap(m, snaps, a, b):
    """Per-CPU packets processed in window [a, b) vs packets of the flows whose consumer
    thread ran on that CPU; returns (processed, expected, share of packets misplaced)."""
    sa, sb = snaps[a], snaps[b]
    proc = sb["processed"] - sa["processed"]
    deliv = sb["delivered"] - sa["delivered"]
    thread = m.so.sock["sock_thread"][m.params.flow["flow_sock"]]
    expected = np.bincount(sb["thread_cpu"][thread], weights=deliv, minlength=m.params.ncpu)
    gap = np.abs(proc - expected).sum() / 2 / max(1, proc.sum())
    return proc, expected, gap


@pytest.fixture(scope="module")
def e2e():
    out = {}
    for label, kw in (("rfs", {}), ("off", {"entries": 0}), ("unconnected",
                                                             {"connected": False})):
        m = build(scenario_from_dict(e2e_dict(**kw)))
        out[label] = (m, run_with_snapshots(m, [0.01, 0.03, 0.035]))
    return out


def test_e2e_packets_processed_where_the_consumer_runs(e2e):
    m, snaps = e2e["rfs"]
    # snapshots: 10 ms (warm), 30 ms (migration), 35 ms (settled), end
    proc, expected, gap = placement_gap(m, snaps, 0, 1)
    assert proc.sum() > 1000
    assert gap < 0.01, (proc, expected)
    proc, expected, gap = placement_gap(m, snaps, 2, 3)
    assert gap < 0.01, (proc, expected)
    assert proc[0] == proc[1] == 0  # every thread left CPUs 0 and 1
    # the control: without RFS packets are processed where RSS put them, so CPUs 0
    # and 1 keep about half of the work after their threads left
    m0, s0 = e2e["off"]
    p0, _, _ = placement_gap(m0, s0, 2, 3)
    assert (p0[0] + p0[1]) / p0.sum() > 0.25, p0


def test_e2e_migration_moves_flows_in_order(e2e):
    m, snaps = e2e["rfs"]
    from rxlab.kernel.counters import CNT_REORDERED

    assert int(m.so.thread["th_migrations"].sum()) == 2
    # before the migration the only moves come from flows of different consumers that
    # share a (queue, slot) entry (2 such pairs among these 64 flows): a low rate
    background = int(snaps[1]["rfs"][0]["rfs_moves"] - snaps[0]["rfs"][0]["rfs_moves"]) / 20e-3
    moves = int(snaps[2]["rfs"][0]["rfs_moves"] - snaps[1]["rfs"][0]["rfs_moves"])
    assert moves >= 30  # the 32 flows of the two moved threads (1250 pps each)
    assert moves > 3 * background * 5e-3
    assert int(m.st.cnt[CNT_REORDERED]) == 0
    pk = m.st.cnt
    assert pk[0] == pk[1]  # offered == delivered: nothing dropped, nothing left


def test_e2e_every_steered_packet_went_through_a_backlog(e2e):
    m, _ = e2e["rfs"]

    sd = m.sd
    assert (sd.cpu["input_queue_head"] == sd.cpu["input_queue_tail"]).all()  # all drained
    assert int(sd.cpu["input_queue_tail"].sum()) == int(m.rf.cnt[0]["rfs_steered"])


def test_e2e_unconnected_sockets_are_not_recorded(e2e):
    m, snaps = e2e["unconnected"]
    assert (m.rf.sock_flow == RPS_NO_CPU).all()
    assert sum(m.rf.cnt[0].tolist()) == 0
    p0, _, _ = placement_gap(m, snaps, 2, 3)
    assert (p0[0] + p0[1]) / p0.sum() > 0.25, p0


def test_e2e_guard_holds_flows_under_load_and_keeps_order():
    """Busy CPUs and a move every 2 ms per thread: the guard must hold some packets on
    the old CPU (rfs_held > 0) and no packet may overtake an earlier one of its flow."""
    groups = [tcp_group(f"g{i}", flows=16, pps=300_000, src={"cidr": f"10.{i}.0.0/16"})
              for i in range(4)]
    apps = [{"name": f"a{i}", "cpus": i, "groups": [f"g{i}"], "cost": {"user_ns": 500},
             "migrate": [{"at": 0.01 + 0.002 * k, "cpu": (i + 1 + k) % 4} for k in range(5)]}
            for i in range(4)]
    from rxlab.kernel.counters import CNT_REORDERED
    from rxlab.simulate import run_model

    m = build(scenario_from_dict(rfs_dict(cpus=4, groups=groups, apps=apps, duration=0.03)))
    run_model(m)
    assert int(m.so.thread["th_migrations"].sum()) == 20
    assert int(m.rf.cnt[0]["rfs_moves"]) > 64
    assert int(m.rf.cnt[0]["rfs_held"]) > 0
    assert int(m.st.cnt[CNT_REORDERED]) == 0


def test_e2e_random_migration_keeps_order():
    groups = [tcp_group("g", flows=32, pps=200_000)]
    apps = [{"name": "a", "cpus": "0-1", "spread": "round_robin", "cost": {"user_ns": 300},
             "migrate": {"every_s": 0.001, "cpus": "0-3"}}]
    from rxlab.kernel.counters import CNT_REORDERED
    from rxlab.simulate import run_model

    m = build(scenario_from_dict(rfs_dict(cpus=4, groups=groups, apps=apps, duration=0.03)))
    run_model(m)
    assert int(m.so.thread["th_migrations"].sum()) > 10
    assert int(m.rf.cnt[0]["rfs_moves"]) > 0
    assert int(m.st.cnt[CNT_REORDERED]) == 0
