"""Accelerated RFS (``set_rps_cpu`` / ``rps_may_expire_flow`` in net/core/dev.c, the ice
and mlx5 ``ndo_rx_flow_steer``) against references written from the kernel
(tests/support/rfs_harness.py), never from rxlab.

* two flows crafted to share the ice bucket (hash & 1023) and flow_id: the original
  ice driver (flow_id match) re-points the first flow's filter and the second never
  gets its own; the fixed driver (5-tuple match) adds a second filter and counts the
  avoided mis-programming; mlx5 matches by tuple;
* filter ids (ice from 1, mlx5 from 0, both % 0xffff), the mlx5 bucket formula;
* set_rps_cpu's v6.18 protection of active filters and its filter hand-over;
* expiry: 10 << log (10 * mask before 6.15) packets dequeued on the flow's CPU, ice's
  5 s UDP limit, the mlx5 scan quota;
* randomised sequences of packets / consumer moves / dequeues / service runs / scans
  compared state by state with the reference, per driver and kernel version;
* end to end on a 4-CPU host: good-queue packets dominate with aRFS, and the
  original ice driver fights over shared filters where the fixed one does not;
* bad input: unknown driver model, aRFS without RFS tables.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.one_line import usage_error
from support.rfs_harness import (
    Harness,
    apply_op,
    e2e_dict,
    find_colliding,
    harness_scan,
    harness_service,
    ref_entries,
    rfs_dict,
    rfs_tables_of,
    run_with_snapshots,
    sim_entries,
    tcp_group,
)
from support.rfs_reference import (
    ICE_UDP_EXPIRY_NS,
    RPS_NO_CPU,
    RPS_NO_FILTER,
    U32,
    RefKernel,
    hash32_rule,
    ref_active_limit,
    ref_mlx5_bucket,
    ref_rfs_slot,
)

from rxlab.build import build
from rxlab.kernel.counters import CNT_BAD_QUEUE, CNT_GOOD_QUEUE, CNT_REORDERED
from rxlab.scenario import scenario_from_dict

MODELS = ("ice-hash-match", "ice-tuple-match", "mlx5")
HA = 0x12345678  # flow A's hash
MS = 1_000_000  # ns


def udp_group(name="udp", flows=2):
    return tcp_group(name, flows=flows, proto="udp", sport={"value": 6000},
                     src={"cidr": "10.9.0.0/16"})


def arfs_dict(model, version, flows=8, **kw):
    """4 CPUs and queues, IRQs 1:1, rps_flow_cnt 1024; TCP flows that all use the same
    ports (one mlx5 bucket) and two UDP flows (the last two flow indexes)."""
    groups = [tcp_group("tcp", flows=flows, sport={"value": 5000}), udp_group()]
    return rfs_dict(cpus=4, version=version, arfs=model, groups=groups, **kw)


_HARNESSES: dict = {}


def harness(model, version, **kw) -> Harness:
    key = (model, version, repr(sorted(kw.items())))
    if key not in _HARNESSES:
        _HARNESSES[key] = Harness(arfs_dict(model, version, **kw))
    return _HARNESSES[key].reset()


def reference(h: Harness) -> RefKernel:
    """The reference kernel + driver for a harness (same CPUs, tables, rmap, flows)."""
    p = h.p
    model = h.m.config["arfs"]
    fl = h.m.flows
    buckets = {f: int(p.flow[f]["flow_tt"]) * 256
               + ref_mlx5_bucket(int(fl.sport[f]), int(fl.dport[f])) for f in range(len(fl))}
    return RefKernel(p.ncpu, p.nq, [int(x) for x in h.rf.dev_log], h.m.scenario.host.kernel,
                     model=model, cpu_rmap=[int(c) for c in p.cpu["cpu_rmap"]],
                     sock_entries=p.sock_flow_mask + 1,
                     flow_udp={f: bool(p.flow["flow_udp"][f]) for f in range(len(fl))},
                     flow_bucket=buckets)


def acnt(h: Harness) -> dict:
    c = h.ar.cnt[0]
    return {"add": int(c["arfs_add"]), "update": int(c["arfs_update"]), "skip": int(c["arfs_skip"]),
            "expire": int(c["arfs_expire"]), "calls": int(h.rf.cnt[0]["arfs_calls"])}


def rcnt(ref: RefKernel) -> dict:
    return {k: ref.cnt[k] for k in ("add", "update", "skip", "expire", "calls")}


def hw(h: Harness) -> dict:
    return {f: int(q) for f, q in enumerate(h.ar.fdir_queue) if q >= 0}


def same_state(h: Harness, ref: RefKernel):
    assert acnt(h) == rcnt(ref)
    assert sim_entries(h) == ref_entries(ref)
    assert hw(h) == ref.hw
    sim, want = rfs_tables_of(h, ref)
    assert sim == want


def step(h, ref, op, hashes, t):
    got, want = apply_op(h, ref, op, hashes, t)
    assert got == want, op
    return got


# --------------------------------------------- two flows, one (bucket, flow_id) -----
@pytest.mark.parametrize("version", ["6.14", "6.15"])
@pytest.mark.parametrize("model", MODELS)
def test_two_colliding_flows(model, version):
    """Flow A (consumer on CPU 2) then flow B (consumer on CPU 3), same ice bucket and
    same flow_id; A arrives on queue 0, B on queue 1 (RSS)."""
    h = harness(model, version)
    ref = reference(h)
    log = h.log(2)
    hash32 = hash32_rule(version)
    (hb,) = find_colliding(HA, log, hash32)
    fid = ref_rfs_slot(HA, log, hash32)
    assert (hb & 1023, ref_rfs_slot(hb, log, hash32)) == (HA & 1023, fid)
    hashes = [HA, hb]
    A, B = 0, 1
    step(h, ref, ("rec", A, 2), hashes, 0)
    step(h, ref, ("rec", B, 3), hashes, 0)

    cpu, rflow = step(h, ref, ("pkt", A, 0), hashes, 1 * MS)
    assert cpu == 2 and rflow == (2, fid)  # the entry of the target queue's table
    assert h.ent(2, fid) == [2, 1 if model != "mlx5" else 0, 1, HA]  # tail after enqueue
    assert h.ent(0, ref_rfs_slot(HA, log, hash32))[0] == RPS_NO_CPU  # source untouched
    step(h, ref, ("svc",), hashes, 2 * MS)
    assert hw(h) == {A: 2}
    same_state(h, ref)

    cpu, rflow = step(h, ref, ("pkt", B, 1), hashes, 3 * MS)
    assert cpu == 3 and rflow == (3, fid)
    step(h, ref, ("svc",), hashes, 4 * MS)
    c, ents = acnt(h), sim_entries(h)
    if model == "ice-hash-match":
        # B is taken for A: A's filter now points at B's queue, B has none
        assert (c["add"], c["update"]) == (1, 1)
        assert sum(len(v) for v in ents.values()) == 1
        assert ents[HA & 1023] == [(A, fid, 1, 3, True)]
        assert hw(h) == {A: 3}
        assert h.ent(3, fid)[1:] == [1, 1, hb]  # B's rflow holds A's filter id
        assert int(h.ar.cnt[0]["arfs_avoided"]) == 0
    elif model == "ice-tuple-match":
        assert (c["add"], c["update"]) == (2, 0)
        assert ents[HA & 1023] == [(B, fid, 2, 3, True), (A, fid, 1, 2, True)]  # head
        assert hw(h) == {A: 2, B: 3}
        assert int(h.ar.cnt[0]["arfs_avoided"]) == 1
    else:  # mlx5: full tuple, flow_id not used; both flows in one port bucket
        assert (c["add"], c["update"]) == (2, 0)
        (chain,) = ents.values()
        assert chain == [(B, fid, 1, 3, True), (A, fid, 0, 2, True)]
        assert hw(h) == {A: 2, B: 3}
    same_state(h, ref)

    # the two keep sending; each arrives where the NIC steers it
    for k in range(6):
        for f in (A, B):
            q = hw(h).get(f, int(h.p.flow["flow_rxq"][f]))
            step(h, ref, ("pkt", f, q), hashes, (5 + k) * MS)
            for c_ in range(4):
                step(h, ref, ("deq", c_, 1000), hashes, (5 + k) * MS)
        step(h, ref, ("svc",), hashes, (5 + k) * MS + MS // 2)
        same_state(h, ref)
    if model == "ice-hash-match":
        assert acnt(h)["update"] >= 6  # the fight: re-pointed back and forth
    else:
        assert acnt(h)["update"] == 0
        assert hw(h) == {A: 2, B: 3}  # each on its consumer's queue


def test_mlx5_bucket_formula():
    from support.compiled_calls import arfs_bucket

    h = Harness(rfs_dict(cpus=4, arfs="mlx5", groups=[
        tcp_group("t", flows=40), udp_group("u", flows=40),
        tcp_group("t6", flows=20, src={"cidr": "fd00::/64"}, dst={"addr": "fd01::1"},
                  ip=6)]))
    fl = h.m.flows
    seen = set()
    for f in range(len(fl)):
        tt = (1 if fl.proto[f] == 17 else 0) + (2 if fl.is_v6[f] else 0)
        want = tt * 256 + ref_mlx5_bucket(int(fl.sport[f]), int(fl.dport[f]))
        assert int(arfs_bucket(h.s, f, int(h.p.flow["flow_hash"][f]))) == want
        seen.add(want // 256)
    assert seen == {0, 1, 2}
    # hand-computed: sport 0x1234 -> be 0x3412, dport 80 -> be 0x5000:
    # l = 0x3412 | 0x14000 = 0x17412; (l * GOLDEN_RATIO_64 mod 2^64) >> 56
    assert ref_mlx5_bucket(0x1234, 80) == ((0x17412 * 0x61C8864680B583EB) % 2**64) >> 56


# ------------------------------------------------------------------ filter ids ------
@pytest.mark.parametrize("model,first", [("ice-tuple-match", 1), ("ice-hash-match", 1),
                                         ("mlx5", 0)])
def test_filter_ids_start_and_wrap(model, first):
    from support.compiled_calls import ndo_rx_flow_steer

    h = harness(model, "6.19")
    steer = lambda f, fid: int(ndo_rx_flow_steer(h.s, f, 0x1000 * (f + 1), 2, fid, 0, 0))  # noqa
    assert [steer(f, 10 + f) for f in range(3)] == [first, first + 1, first + 2]
    h.reset()
    h.ar.glob[0]["last_fltr_id"] = 0xFFFD
    got = [steer(f, 10 + f) for f in range(4)]
    if model == "mlx5":  # last_filter_id++ % 0xffff
        assert got == [0xFFFD, 0xFFFE, 0, 1]
    else:  # ++arfs_last_fltr_id % 0xffff: wraps through 0
        assert got == [0xFFFE, 0, 1, 2]
    assert int(h.ar.cnt[0]["arfs_add"]) == 4


# --------------------------------------------------------- v6.18 protection -------
def setup_active_filter(h, ref, hashes, a_cpu=2):
    """Flow 0 recorded on a_cpu, steered from queue 0, filter programmed, one packet
    enqueued on a_cpu (its target entry is active)."""
    step(h, ref, ("rec", 0, a_cpu), hashes, 0)
    step(h, ref, ("pkt", 0, 0), hashes, MS)
    step(h, ref, ("svc",), hashes, 2 * MS)


@pytest.mark.parametrize("model", ["ice-hash-match", "ice-tuple-match"])
def test_618_active_filter_of_another_flow_is_not_overwritten(model):
    h = harness(model, "6.19")
    ref = reference(h)
    log = h.log(2)
    (hb,) = find_colliding(HA, log, True)
    fid = ref_rfs_slot(HA, log, True)
    hashes = [HA, hb]
    setup_active_filter(h, ref, hashes)
    before = acnt(h)
    step(h, ref, ("rec", 1, 2), hashes, 3 * MS)  # B's consumer is on CPU 2 too
    cpu, rflow = step(h, ref, ("pkt", 1, 1), hashes, 4 * MS)
    assert cpu == 2
    slot_b = ref_rfs_slot(hb, h.log(1), True)
    assert rflow == (1, slot_b)  # the source entry: no driver call
    assert acnt(h) == before  # ndo_rx_flow_steer not called, nothing counted
    assert h.ent(2, fid)[1:] == [1, 1, HA]  # A's entry kept
    assert h.ent(1, slot_b)[:3] == [2, RPS_NO_FILTER, 2]  # cpu 2, tail after its enqueue
    same_state(h, ref)
    # once A's entry is stale (10 << log packets later) B may take the slot
    step(h, ref, ("deq", 2, 2), hashes, 5 * MS)
    h.sd.cpu["input_queue_head"][2] = ref.head[2] = (ref.head[2] + (10 << log)) & U32
    # (on queue 1 B's own entry already says CPU 2; a packet of B on queue 0, whose
    # entry is unset, goes through set_rps_cpu towards queue 2 again)
    _, rflow = step(h, ref, ("pkt", 1, 0), hashes, 6 * MS)
    assert acnt(h)["calls"] == before["calls"] + 1
    assert rflow == (2, fid) and h.ent(2, fid)[3] == hb  # B's entry now
    if model == "ice-hash-match":
        assert h.ent(2, fid)[1] == 1  # the driver took B for A: same filter id
    else:
        assert h.ent(2, fid)[1] == 2  # B's own filter
    same_state(h, ref)


@pytest.mark.parametrize("version,protected", [("6.15", False), ("6.17", False),
                                               ("6.18", True), ("6.19", True)])
def test_same_flow_already_on_that_cpu_is_not_reprogrammed_since_618(version, protected):
    h = harness("ice-tuple-match", version)
    ref = reference(h)
    hashes = [HA]
    setup_active_filter(h, ref, hashes)
    before = acnt(h)
    # another packet of A still arrives on queue 0 (before the NIC follows the filter):
    # its queue-0 entry is unset, so set_rps_cpu runs again for next_cpu 2
    step(h, ref, ("pkt", 0, 0), hashes, 3 * MS)
    after = acnt(h)
    if protected:  # same hash but next_cpu == t.cpu: protected, no driver call
        assert after == before
    else:  # <= 6.17: every move calls the driver, which finds its own entry: skip
        assert after["calls"] == before["calls"] + 1 and after["skip"] == before["skip"] + 1
    same_state(h, ref)


def test_618_same_flow_to_another_cpu_is_not_protected():
    """hash == t.hash and next_cpu != t.cpu: the driver is called although active."""
    h = harness("ice-tuple-match", "6.19")
    ref = reference(h)
    log = h.log(3)
    fid = ref_rfs_slot(HA, log, True)
    # queue 3's slot holds an active filter of this very flow, on CPU 2
    h.rf.dev["cpu"][3, fid], h.rf.dev["filter"][3, fid], h.rf.dev["hash"][3, fid] = 2, 77, HA
    ref.ent(3, fid)[:] = [2, 77, 0, HA]
    hashes = [HA]
    step(h, ref, ("rec", 0, 3), hashes, 0)
    step(h, ref, ("pkt", 0, 0), hashes, MS)
    assert acnt(h)["calls"] == 1 and acnt(h)["add"] == 1
    assert h.ent(3, fid)[:2] == [3, 1] and h.ent(3, fid)[3] == HA
    same_state(h, ref)


def test_old_entry_gives_up_the_filter_id_it_hands_over():
    """set_rps_cpu: if the old rflow's filter equals the id the driver returned, the old
    rflow is reset to RPS_NO_FILTER (net/core/dev.c)."""
    h = harness("ice-tuple-match", "6.19")
    ref = reference(h)
    hashes = [HA]
    slot0 = ref_rfs_slot(HA, h.log(0), True)
    setup_active_filter(h, ref, hashes)  # filter id 1 for A, in queue 2's table
    h.rf.dev["filter"][0, slot0] = 1  # pretend queue 0's entry held that filter
    ref.ent(0, slot0)[1] = 1
    # A's consumer moves to CPU 3 and A still arrives on queue 0: the driver re-points
    # filter 1 to queue 3 and queue 0's entry must drop its copy of the id
    step(h, ref, ("deq", 2, 5), hashes, 3 * MS)
    step(h, ref, ("rec", 0, 3), hashes, 3 * MS)
    _, rflow = step(h, ref, ("pkt", 0, 0), hashes, 4 * MS)
    assert rflow[0] == 3 and h.ent(3, rflow[1])[1] == 1
    assert h.ent(0, slot0)[1] == RPS_NO_FILTER
    same_state(h, ref)


MIXED = {0: 256, 1: 1024, 2: 4096, 3: 64}  # rps_flow_cnt per rx queue


@pytest.mark.parametrize("model", MODELS)
def test_flow_id_is_the_slot_in_the_target_queues_table(model):
    """set_rps_cpu (with the Feb-2026 fix 8a8a9fac9efa): flow_id = hash_32(hash, log of the
    TARGET queue's table), not of the queue the packet arrived on."""
    h = harness(model, "6.19", flow_cnt=MIXED)
    ref = reference(h)
    assert [h.log(q) for q in range(4)] == [8, 10, 12, 6]
    hashes = [HA]
    step(h, ref, ("rec", 0, 2), hashes, 0)
    _, rflow = step(h, ref, ("pkt", 0, 0), hashes, MS)  # arrives on q0 (256), to q2 (4096)
    fid = ref_rfs_slot(HA, 12, True)
    assert fid != ref_rfs_slot(HA, 8, True)
    assert rflow == (2, fid)
    (chain,) = sim_entries(h).values()
    assert chain[0][1] == fid  # the driver got the target table's slot
    step(h, ref, ("svc",), hashes, 2 * MS)
    step(h, ref, ("deq", 2, 1), hashes, 2 * MS)
    step(h, ref, ("rec", 0, 3), hashes, 2 * MS)
    _, rflow = step(h, ref, ("pkt", 0, 1), hashes, 3 * MS)  # from q1 (1024) to q3 (64)
    assert rflow == (3, ref_rfs_slot(HA, 6, True))
    same_state(h, ref)


# ------------------------------------------------------------------- expiry ---------
@pytest.mark.parametrize("version", ["6.14", "6.19"])
@pytest.mark.parametrize("model", MODELS)
def test_expiry_after_table_size_packets_on_the_flows_cpu(model, version):
    h = harness(model, version)
    ref = reference(h)
    log = h.log(2)
    limit = ref_active_limit(log, hash32_rule(version))
    hashes = [HA]
    base = 0xFFFFFF00  # the count crosses the u32 wrap
    for c in range(4):
        h.sd.cpu["input_queue_head"][c] = h.sd.cpu["input_queue_tail"][c] = base
        ref.head[c] = ref.tail[c] = base
    setup_active_filter(h, ref, hashes)
    last = (base + 1) & U32  # the tail after A's one enqueue on CPU 2
    fid = ref_rfs_slot(HA, log, hash32_rule(version))
    assert h.ent(2, fid)[2] == last and hw(h) == {0: 2}
    h.sd.cpu["input_queue_head"][2] = ref.head[2] = (last + limit - 1) & U32
    step(h, ref, ("scan",), hashes, 10 * MS)
    assert hw(h) == {0: 2} and acnt(h)["expire"] == 0  # one packet short: kept
    h.sd.cpu["input_queue_head"][2] = ref.head[2] = (last + limit) & U32
    step(h, ref, ("scan",), hashes, 20 * MS)
    assert hw(h) == {} and acnt(h)["expire"] == 1 and sim_entries(h) == {}
    assert int(h.ar.glob[0]["hw_count"]) == 0
    same_state(h, ref)


@pytest.mark.parametrize("model", MODELS)
def test_udp_filters_expire_after_5_s_in_ice_only(model):
    h = harness(model, "6.19")
    ref = reference(h)
    udp = [f for f in range(len(h.m.flows)) if h.p.flow["flow_udp"][f]]
    tcp = 0
    hashes = {tcp: HA, udp[0]: 0x0BADF00D}
    hl = [hashes.get(f, 0) for f in range(max(hashes) + 1)]
    t0 = 1_000_000_000
    for f in (tcp, udp[0]):
        step(h, ref, ("rec", f, 2), hl, 0)
        step(h, ref, ("pkt", f, 0), hl, t0 - MS)
    step(h, ref, ("svc",), hl, t0)  # both programmed at t0, both stay active
    step(h, ref, ("scan",), hl, t0 + ICE_UDP_EXPIRY_NS - 1)
    assert hw(h) == {tcp: 2, udp[0]: 2}
    step(h, ref, ("scan",), hl, t0 + ICE_UDP_EXPIRY_NS)
    if model == "mlx5":
        assert hw(h) == {tcp: 2, udp[0]: 2}  # mlx5 has no time limit
    else:
        assert hw(h) == {tcp: 2}  # ICE_ARFS_TIME_DELTA_EXPIRATION: 5000 ms
    same_state(h, ref)


@pytest.fixture(scope="module")
def many():
    return Harness(arfs_dict("mlx5", "6.19", flows=120))


def make_stale_rules(h, n):
    from support.compiled_calls import ndo_rx_flow_steer

    for f in range(n):  # flow_ids whose rps_dev_flow entries never got the filter id
        assert int(ndo_rx_flow_steer(h.s, f, 0x100 + f, 2, f, 0, 0)) == f
    harness_service(h, MS)


def test_mlx5_expiry_scan_stops_after_its_quota(many):
    """arfs_may_expire_flow: ``if (quota++ > MLX5E_ARFS_EXPIRY_QUOTA) break`` after
    queueing a rule for deletion: at most 62 deletions per scan (en_arfs.c)."""
    ref = RefKernel(4, 4, 10, "6.19", model="mlx5",
                    flow_bucket={f: 0 for f in range(100)})
    for f in range(100):
        ref.steer(f, 0x100 + f, 2, f, 0)
    ref.service(MS)
    ref.expire_scan(10 * MS)
    assert ref.cnt["expire"] == 62
    h = many.reset()
    make_stale_rules(h, 100)
    harness_scan(h, 10 * MS)
    assert acnt(h)["expire"] == 62
    harness_scan(h, 20 * MS)
    assert acnt(h)["expire"] == 100  # the rest at the next scan
    assert sim_entries(h) == {} and hw(h) == {}


def test_mlx5_rule_with_busy_work_is_not_repointed():
    """mlx5e_rx_flow_steer returns the filter id unchanged while the rule's work item is
    busy (en_arfs.c): the rule keeps its queue until the work has run."""
    h = harness("mlx5", "6.19")
    ref = reference(h)
    hashes = [HA]
    step(h, ref, ("rec", 0, 2), hashes, 0)
    step(h, ref, ("pkt", 0, 0), hashes, MS)  # rule created, work queued (not run)
    step(h, ref, ("rec", 0, 3), hashes, MS)
    step(h, ref, ("pkt", 0, 0), hashes, MS)  # steered again before the work ran
    step(h, ref, ("svc",), hashes, 2 * MS)
    assert hw(h) == ref.hw == {0: 2}
    same_state(h, ref)


# --------------------------------------------------- randomised differential -------
def hash_set(seed_hashes, log, hash32):
    """Six flows: A with two colliding partners, B with one, and C alone (the partners
    may share socket-table slots with other flows: both sides handle that)."""
    a, b, c = seed_hashes
    a1, a2 = find_colliding(a, log, hash32, n=2, avoid=(b, c), sock_mask=None)
    (b1,) = find_colliding(b, log, hash32, n=1, avoid=(a, a1, a2, c), sock_mask=None)
    return [a, a1, a2, b, b1, c]


OPS = st.one_of(
    st.tuples(st.just("pkt"), st.integers(0, 5), st.integers(-1, 3)),  # -1: the NIC's
    st.tuples(st.just("rec"), st.integers(0, 5), st.integers(0, 3)),
    st.tuples(st.just("deq"), st.integers(0, 3), st.sampled_from([1, 5, 50, 3000, 20000])),
    st.tuples(st.just("svc")),
    st.tuples(st.just("scan")),
)


@pytest.mark.parametrize("version", ["6.14", "6.15", "6.19", "6.19-mixed"])
@pytest.mark.parametrize("model", MODELS)
@settings(max_examples=200, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seeds=st.lists(st.integers(1, U32), min_size=3, max_size=3, unique=True),
       base=st.sampled_from([0, 0xFFFFFF00, 0x7FFFFFF0]),
       ops=st.lists(OPS, min_size=1, max_size=50))
def test_sequences_against_reference(model, version, seeds, base, ops):
    if version.endswith("-mixed"):  # per-queue tables of different sizes
        h = harness(model, version.removesuffix("-mixed"), flow_cnt=MIXED)
        version = "6.19"
    else:
        h = harness(model, version)
    ref = reference(h)
    log = h.log(0)
    hashes = hash_set(seeds, log, hash32_rule(version))
    for c in range(4):
        h.sd.cpu["input_queue_head"][c] = h.sd.cpu["input_queue_tail"][c] = base
        ref.head[c] = ref.tail[c] = base
    t = 0
    for op in ops:
        t += MS
        if op[0] == "pkt" and op[2] < 0:  # arrive where the NIC steers the flow
            op = ("pkt", op[1], ref.hw.get(op[1], int(h.p.flow["flow_rxq"][op[1]])))
        step(h, ref, op, hashes, t)
        assert acnt(h) == rcnt(ref), op
    same_state(h, ref)


# ---------------------------------------------------------------- end to end -------
def good_share(snaps, a, b):
    d = snaps[b]["cnt"] - snaps[a]["cnt"]
    good, bad = int(d[CNT_GOOD_QUEUE]), int(d[CNT_BAD_QUEUE])
    return good / max(1, good + bad), good + bad


@pytest.fixture(scope="module")
def e2e():
    out = {}
    for label, kw in (("tuple", {"arfs": "ice-tuple-match"}), ("rfs", {}),
                      ("hash614", {"arfs": "ice-hash-match", "version": "6.14",
                                   "flows": 64, "pps": 50_000}),
                      ("tuple614", {"arfs": "ice-tuple-match", "version": "6.14",
                                    "flows": 64, "pps": 50_000})):
        if "arfs" in kw:
            kw["nic"] = {"arfs": {"period_s": 0.005}}
        m = build(scenario_from_dict(e2e_dict(drain=0.05, **kw)))
        # snapshots: 10 ms (warm), 30 ms (migration), 35 ms (settled), 60 ms (end of
        # traffic), end of drain
        out[label] = (m, run_with_snapshots(m, [0.01, 0.03, 0.035, 0.06]))
    return out


def test_e2e_good_queue_packets_dominate_with_arfs(e2e):
    m, snaps = e2e["tuple"]
    share, n = good_share(snaps, 0, 1)
    assert n > 1000 and share > 0.97, share
    share, _ = good_share(snaps, 2, 3)  # after the two threads moved
    assert share > 0.97, share
    assert int(m.st.cnt[CNT_REORDERED]) == 0
    assert int(m.ar.cnt[0]["arfs_update"]) >= 16  # the moved flows' filters were re-pointed
    # RFS alone steers CPUs, not queues: about one packet in four lands on the
    # consumer's queue by RSS chance
    m0, s0 = e2e["rfs"]
    share0, _ = good_share(s0, 0, 1)
    assert share0 < 0.5, share0


def test_e2e_idle_filters_do_not_expire(e2e):
    """Expiry counts packets dequeued on the flow's CPU, not time (rps_may_expire_flow): after the
    traffic stops, 10 scans of the drain window remove nothing."""
    m, snaps = e2e["tuple"]
    assert int(snaps[4]["arfs"][0]["arfs_expire"]) == int(snaps[3]["arfs"][0]["arfs_expire"])
    assert int(m.ar.glob[0]["hw_count"]) > 0


def test_e2e_original_ice_fights_over_shared_filters(e2e):
    """6.14 rule (flow_id = hash & mask, nested in ice's hash & 1023 bucket), 256 flows:
    ~32 colliding pairs. Between warm-up and the migration the original driver keeps
    re-pointing shared filters; the fixed one makes no update and puts more packets on
    good queues."""
    mh, sh = e2e["hash614"]
    mt, stt = e2e["tuple614"]
    upd_h = int(sh[1]["arfs"][0]["arfs_update"] - sh[0]["arfs"][0]["arfs_update"])
    upd_t = int(stt[1]["arfs"][0]["arfs_update"] - stt[0]["arfs"][0]["arfs_update"])
    assert upd_t == 0 and upd_h > 20, (upd_h, upd_t)
    assert int(stt[1]["arfs"][0]["arfs_avoided"]) > 0
    gh, _ = good_share(sh, 0, 1)
    gt, _ = good_share(stt, 0, 1)
    assert gt > gh + 0.03, (gh, gt)
    assert int(mh.st.cnt[CNT_REORDERED]) == int(mt.st.cnt[CNT_REORDERED]) == 0


# ------------------------------------------------------------------ bad input -------
def test_unknown_driver_model():
    d = rfs_dict(arfs="ixgbe")
    usage_error(lambda: scenario_from_dict(d), "nic.arfs.model")


@pytest.mark.parametrize("kernel", [{"rps_sock_flow_entries": 0},
                                    {"rps_flow_cnt": 0},
                                    {"rps_sock_flow_entries": 0, "rps_flow_cnt": 0}])
def test_arfs_without_rfs_tables(kernel):
    d = rfs_dict(arfs="ice-tuple-match", kernel=kernel)
    usage_error(lambda: build(scenario_from_dict(d)), "nic.arfs", "RFS")


@pytest.mark.parametrize("arfs", [{"model": "ixgbe"}, {"model": "mlx5", "capacity": 0},
                                  {"model": "ice-hash-match", "period_s": 0},
                                  {"model": "ice-hash-match", "typo": 1}])
def test_cli_bad_arfs_exit_2_one_line(tmp_path, capsys, arfs):
    import yaml

    from rxlab.cli.main import main

    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(rfs_dict(arfs=arfs)))
    assert main(["run", str(path), "--json"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("rxlab: error:") and "nic.arfs" in err[0], err


def test_cli_arfs_without_rfs_exit_2(tmp_path, capsys):
    import yaml

    from rxlab.cli.main import main

    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(rfs_dict(arfs="mlx5", entries=0)))
    assert main(["run", str(path), "--json"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "nic.arfs" in err[0], err


def test_mlx5_scenario_takes_overrides_and_refuses_a_service_timer():
    """mlx5 has no service timer: period_s given for it is refused, but a scenario re-read
    after an override (--duration, --seed, compare's variants) is not, and ice without
    period_s gets its 1 s timer (ice_init_pf: serv_tmr_period = HZ)."""
    from rxlab.scenario import with_overrides

    sc = scenario_from_dict(rfs_dict(arfs="mlx5"))
    assert with_overrides(sc, {"duration": 0.02, "seed": 9}).nic.arfs.period_s is None
    usage_error(lambda: scenario_from_dict(rfs_dict(arfs={"model": "mlx5", "period_s": 1.0})),
                "nic.arfs", "period_s")
    ice = scenario_from_dict(rfs_dict(arfs="ice-tuple-match"))
    assert build(ice).params.arfs_period_ns == 1_000_000_000
