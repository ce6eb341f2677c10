"""Flow limit (``skb_flow_limit`` in net/core/dev.c) against a reference written from the
kernel, and end to end.

The reference below is ours, from ``skb_flow_limit`` and ``struct sd_flow_limit``
(net/core/dev.c, net/core/dev.h) only: history of 128 bucket
ids starting full of bucket 0, per-bucket counters, drop when a bucket holds more than
64 (FLOW_LIMIT_HISTORY >> 1) of the last 128 recorded packets, bucket = hash_32(hash,
log2(table_len)) since v6.16 and hash & (table_len - 1) before, no accounting while the
target queue is under max_backlog >> 1, and the table (and ``count``) of the
*enqueuing* CPU.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.compiled_calls import skb_flow_limit

from rxlab.build import build
from rxlab.kernel.sim import sim_of
from rxlab.metrics.result import assemble
from rxlab.scenario import scenario_from_dict
from rxlab.simulate import in_flight, run_model
from rxlab.traffic.stream import PacketStream

HISTORY = 128
GOLDEN_RATIO_32 = 0x61C88647


def ref_hash_32(v: int, bits: int) -> int:
    return ((v * GOLDEN_RATIO_32) & 0xFFFFFFFF) >> (32 - bits)


class RefFlowLimit:
    """struct sd_flow_limit of one CPU plus skb_flow_limit() (net/core/dev.c)."""

    def __init__(self, table_len: int, use_hash_32: bool):
        self.table_len = table_len
        self.log = table_len.bit_length() - 1
        self.use_hash_32 = use_hash_32
        self.history = [0] * HISTORY  # zero-initialised: full of bucket 0
        self.head = 0
        self.buckets = [0] * table_len
        self.count = 0

    def bucket(self, h: int) -> int:
        return ref_hash_32(h, self.log) if self.use_hash_32 else h & (self.table_len - 1)

    def __call__(self, h: int, qlen: int, max_backlog: int) -> bool:
        if qlen < (max_backlog >> 1):
            return False
        new = self.bucket(h)
        old = self.history[self.head]
        self.history[self.head] = new
        self.head = (self.head + 1) & (HISTORY - 1)
        if self.buckets[old] > 0:
            self.buckets[old] -= 1
        self.buckets[new] += 1
        if self.buckets[new] > HISTORY >> 1:
            self.count += 1
            return True
        return False


def test_reference_hash_32_matches_document_vectors():
    # worked independently of rxlab from include/linux/hash.h (GOLDEN_RATIO_32)
    assert ref_hash_32(0x12345678, 10) == 0x1DE
    assert ref_hash_32(0xDEADBEEF, 12) == 1757
    assert ref_hash_32(1, 7) == 48


# ----------------------------------------------------------------- models ----------
# (kernel, flow_limit_table_len, netdev_max_backlog, flow_limit_cpu_bitmap)
CONFIGS = {
    "hash32": ("6.19", 16, 1000, "2"),  # table on CPU 1 only
    "mask": ("6.15", 16, 1000, "2"),  # before "net: flow_limit: use hash_32()"
    "odd_backlog": ("6.19", 4096, 7, "2"),  # max_backlog >> 1 = 3
    "both": ("6.19", 16, 1000, "3"),  # tables on CPUs 0 and 1
}


class Harness:
    def __init__(self, scenario_dict, udp_group, key):
        kernel, table_len, max_backlog, bitmap = CONFIGS[key]
        d = scenario_dict(
            [udp_group("g", 1, 1000)],
            host={"cpus": 2, "kernel": kernel},
            kernel={"flow_limit_cpu_bitmap": bitmap, "flow_limit_table_len": table_len,
                    "netdev_max_backlog": max_backlog},
        )
        self.m = build(scenario_from_dict(d))
        self.s = sim_of(self.m)
        self.table_len, self.max_backlog = table_len, max_backlog
        self.hash32 = kernel == "6.19"

    def reset(self):
        sd = self.m.sd
        for a in (sd.fl_history, sd.cpu["fl_head"], sd.fl_buckets, sd.cpu["flow_limit_count"]):
            a[...] = 0

    def ref(self) -> RefFlowLimit:
        return RefFlowLimit(self.table_len, self.hash32)

    def call(self, cpu: int, h: int, qlen: int) -> bool:
        return bool(skb_flow_limit(self.s, int(cpu), int(h), int(qlen)))

    def assert_state(self, cpu: int, ref: RefFlowLimit):
        sd = self.m.sd
        assert int(sd.cpu["fl_head"][cpu]) == ref.head
        assert sd.fl_history[cpu].tolist() == ref.history
        assert sd.fl_buckets[cpu].tolist() == ref.buckets
        assert int(sd.cpu["flow_limit_count"][cpu]) == ref.count


@pytest.fixture(scope="module")
def harnesses(scenario_dict, udp_group):
    return {k: Harness(scenario_dict, udp_group, k) for k in CONFIGS}


@pytest.fixture
def hx(harnesses, request):
    h = harnesses[request.param]
    h.reset()
    return h


def hashes_in_buckets(ref: RefFlowLimit, want: list[int]) -> list[int]:
    """The smallest non-zero u32 hash landing in each wanted bucket."""
    out = []
    for b in want:
        v = 1
        while ref.bucket(v) != b:
            v += 1
        out.append(v)
    return out


def test_model_config_reports_the_bucket_rule(harnesses):
    assert harnesses["hash32"].m.config["flow_limit_bucket"] == "hash_32"
    assert harnesses["mask"].m.config["flow_limit_bucket"] == "hash & (len - 1)"
    assert harnesses["hash32"].m.config["flow_limit_history"] == HISTORY


# ------------------------------------------------------ hand-computed sequences ----
@pytest.mark.parametrize("hx", ["hash32", "mask", "odd_backlog"], indirect=True)
def test_fast_path_below_half_backlog_records_nothing(hx):
    below = (hx.max_backlog >> 1) - 1
    for h in (1, 7, 0xDEADBEEF) * 100:
        assert hx.call(1, h, below) is False
    hx.assert_state(1, hx.ref())  # untouched
    # at exactly max_backlog >> 1 the packet is recorded
    assert hx.call(1, 7, hx.max_backlog >> 1) is False
    assert int(hx.m.sd.cpu["fl_head"][1]) == 1


@pytest.mark.parametrize("hx", ["hash32"], indirect=True)
def test_cpu_without_table_never_accounts(hx):
    for _ in range(300):
        assert hx.call(0, 5, hx.max_backlog) is False
    assert hx.m.sd.cpu["fl_head"].tolist() == [0, 0]
    assert hx.m.sd.cpu["flow_limit_count"].tolist() == [0, 0]
    assert not hx.m.sd.fl_buckets.any()


@pytest.mark.parametrize("hx", ["hash32", "mask"], indirect=True)
def test_lone_flow_shed_after_64_packets(hx):
    ref = hx.ref()
    (h,) = hashes_in_buckets(ref, [5])
    got = [hx.call(1, h, hx.max_backlog) for _ in range(300)]
    # packets 1..64 pass; from the 65th on the flow holds > 64 of the history
    assert got == [False] * 64 + [True] * 236
    b = hx.m.sd.fl_buckets[1]
    assert b[5] == HISTORY and b.sum() == HISTORY  # window full of this flow
    assert hx.m.sd.cpu["flow_limit_count"].tolist() == [0, 236]  # on the enqueuing CPU


@pytest.mark.parametrize("hx", ["hash32", "mask"], indirect=True)
def test_lone_flow_in_bucket_0_is_never_shed(hx):
    # the history starts full of bucket 0: each of this flow's packets pops a 0 and
    # decrements the bucket it just incremented, so its count stays at 1 (skb_flow_limit,
    # net/core/dev.c)
    ref = hx.ref()
    (h,) = hashes_in_buckets(ref, [0])
    assert not any(hx.call(1, h, hx.max_backlog) for _ in range(400))
    assert hx.m.sd.fl_buckets[1, 0] == 1
    assert hx.m.sd.cpu["flow_limit_count"][1] == 0


@pytest.mark.parametrize("hx", ["hash32", "mask"], indirect=True)
def test_flow_at_exactly_half_passes_heavier_flow_is_shed(hx):
    ref = hx.ref()
    heavy, *light = hashes_in_buckets(ref, list(range(1, 16)))
    # exactly half: H L H L ... -> H holds 64 of every 128, never more
    seq = [heavy if i % 2 == 0 else light[(i // 2) % len(light)] for i in range(1000)]
    assert not any(hx.call(1, h, hx.max_backlog) for h in seq)
    assert hx.m.sd.fl_buckets[1, ref.bucket(heavy)] == 64
    hx.reset()
    # three quarters: H H H L -> once H holds 65 entries it is dropped every time,
    # while each light flow (1 of 4 packets, spread over 14 buckets) always passes
    seq = [heavy if i % 4 != 3 else light[(i // 4) % len(light)] for i in range(1000)]
    got = [hx.call(1, h, hx.max_backlog) for h in seq]
    n_heavy = sum(h == heavy for h in seq)
    heavy_drops = [d for h, d in zip(seq, got, strict=True) if h == heavy]
    assert heavy_drops == [False] * 64 + [True] * (n_heavy - 64)
    assert not any(d for h, d in zip(seq, got, strict=True) if h != heavy)
    assert hx.m.sd.cpu["flow_limit_count"][1] == n_heavy - 64


@pytest.mark.parametrize("hx", ["hash32"], indirect=True)
def test_dropped_packet_is_recorded_in_history(hx):
    ref = hx.ref()
    (h,) = hashes_in_buckets(ref, [9])
    for _ in range(65):
        hx.call(1, h, hx.max_backlog)
    assert hx.m.sd.fl_history[1, 64] == 9  # the 65th (dropped) packet's slot
    assert hx.m.sd.fl_buckets[1, 9] == 65


@pytest.mark.parametrize("hx", ["both"], indirect=True)
def test_tables_are_per_enqueuing_cpu(hx):
    ref = hx.ref()
    (h,) = hashes_in_buckets(ref, [3])
    for _ in range(100):
        hx.call(0, h, hx.max_backlog)
    # CPU 0's table sheds the flow; CPU 1's table has seen nothing and lets it pass
    assert hx.m.sd.cpu["flow_limit_count"].tolist() == [36, 0]
    assert hx.call(1, h, hx.max_backlog) is False
    assert hx.call(0, h, hx.max_backlog) is True
    assert hx.m.sd.cpu["flow_limit_count"].tolist() == [37, 0]


# ----------------------------------------------------------------- property -------
# (index into the hash pool, enqueuing CPU, index into the qlen choices)
STEP = st.tuples(st.integers(0, 5), st.integers(0, 1), st.integers(0, 4))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    key=st.sampled_from(["hash32", "mask", "odd_backlog"]),
    pool=st.lists(st.integers(0, 0xFFFFFFFF), min_size=1, max_size=6, unique=True),
    steps=st.one_of(
        st.lists(STEP, min_size=1, max_size=60),
        st.lists(STEP, min_size=200, max_size=700),  # wraps the 128-entry history
    ),
)
def test_matches_reference_on_random_sequences(harnesses, key, pool, steps):
    hx = harnesses[key]
    hx.reset()
    ref = hx.ref()
    mb = hx.max_backlog
    # qlen choices straddle the fast-path threshold and the top of the queue
    qlens = [0, (mb >> 1) - 1, mb >> 1, mb - 1, mb]
    for i, (pi, cpu, qi) in enumerate(steps):
        h = pool[pi % len(pool)]
        q = max(qlens[qi], 0)
        want = ref(h, q, mb) if cpu == 1 else False  # only CPU 1 has a table
        assert hx.call(cpu, h, q) is want, (i, h, q, cpu)
    hx.assert_state(1, ref)
    assert int(hx.m.sd.cpu["flow_limit_count"][0]) == 0


# ----------------------------------------------------------------- end to end -----
HEAVY_PPS, LIGHT_PPS = 840_000, 360_000  # 70 % of the packets in one flow


def e2e_scenario(scenario_dict, udp_group, bitmap):
    """RPS from the IRQ CPU 0 to CPU 1 only; CPU 1 serves ~0.94 Mpps (stack_rx 1 us)
    against 1.2 Mpps offered, so its backlog overflows."""
    return scenario_from_dict(scenario_dict(
        [udp_group("heavy", 1, HEAVY_PPS, sport={"value": 5000}),
         udp_group("light", 200, LIGHT_PPS)],
        name="flow-limit-e2e", seed=3, duration=0.1, drain=0.02,
        host={"cpus": 3, "costs": {"stack_rx": 1000.0}},
        nic={"queues": 1, "irq_affinity": [0], "ring_size": 4096},
        kernel={"rps_cpus": "2", "flow_limit_cpu_bitmap": bitmap},
        apps=[{"name": "sink", "cpus": 2, "cost": {"user_ns": 0, "syscall_ns": 0},
               "rcvbuf": 64 << 20, "batch": 1024}],
    ))


def e2e_run(sc):
    m = build(sc)
    offered = np.zeros(len(m.flows), np.int64)
    for ch in PacketStream(sc.traffic, m.flows, sc.seed, sc.duration).chunks():
        offered += np.bincount(ch.flow, minlength=len(m.flows))
    run_model(m)
    res = assemble(m, in_flight(m)).data
    delivered = m.so.flow["flow_delivered"].copy()
    return res, offered, delivered


@pytest.fixture(scope="module")
def e2e(scenario_dict, udp_group):
    return {bm: e2e_run(e2e_scenario(scenario_dict, udp_group, bm)) for bm in ("0", "1")}


def test_e2e_flow_limit_sheds_the_heavy_flow(e2e):
    res_off, off0, dl_off = e2e["0"]
    res_on, off1, dl_on = e2e["1"]
    assert (off0 == off1).all()  # same traffic
    heavy_off, heavy_on = dl_off[0] / off0[0], dl_on[0] / off1[0]
    light_off = dl_off[1:].sum() / off0[1:].sum()
    light_on = dl_on[1:].sum() / off1[1:].sum()
    # without flow limit the backlog tail-drops blindly: all flows lose about alike
    assert res_off["packets"]["dropped_by_reason"]["backlog"] > 0.1 * off0.sum()
    assert heavy_off == pytest.approx(light_off, abs=0.03)
    # with it the heavy flow's drops rise and the light flows get through
    assert 1 - heavy_on > 1 - heavy_off + 0.05
    assert light_on > light_off + 0.1
    assert light_on > 0.99
    assert res_on["packets"]["dropped_by_reason"]["flow_limit"] > 0


def test_e2e_counters_enqueuing_vs_target_cpu(e2e):
    res, _, _ = e2e["1"]
    pk = res["packets"]["dropped_by_reason"]
    rows = [c["softnet_stat"] for c in res["cpus"]]
    # flow_limit_count on the enqueuing (IRQ) CPU 0; the drop in the target's column
    assert rows[0]["flow_limit_count"] == pk["flow_limit"]
    assert rows[1]["flow_limit_count"] == rows[2]["flow_limit_count"] == 0
    assert rows[1]["dropped"] == pk["flow_limit"] + pk["backlog"]
    assert rows[0]["dropped"] == rows[2]["dropped"] == 0
