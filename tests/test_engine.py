"""Engine-level invariants: packet conservation, determinism, chunk independence,
the softnet_stat format of each kernel version, and where RPS puts packets.

Expected values come from the kernel (``get_rps_cpu`` in net/core/dev.c and
``reciprocal_scale`` in include/linux/math.h, ``received_rps`` counted per IPI by
``net_rps_send_ipi``/``napi_schedule_rps`` in net/core/dev.c, ``softnet_seq_show`` in
net/core/net-procfs.c for softnet_stat) and from counting the offered packets
independently of the simulator (``PacketStream``), never from earlier outputs of rxlab.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from rxlab.build import build
from rxlab.scenario import scenario_from_dict
from rxlab.simulate import simulate
from rxlab.traffic.stream import PacketStream


def offered_per_flow(sc) -> np.ndarray:
    """Packets each flow offers, counted from the traffic stream alone."""
    m = build(sc)
    n = np.zeros(len(m.flows), np.int64)
    for ch in PacketStream(sc.traffic, m.flows, sc.seed, sc.duration).chunks():
        n += np.bincount(ch.flow, minlength=len(m.flows))
    return n


# ------------------------------------------------------------- scenarios -----------
def scenarios(scenario_dict, udp_group) -> dict:
    sink = {"name": "sink", "cpus": 2, "cost": {"user_ns": 0, "syscall_ns": 0},
            "rcvbuf": 64 << 20, "batch": 1024}
    return {
        # RPS from CPU 0 to CPU 1, which cannot keep up; no drain: packets stay queued
        "backlog_overload": scenario_dict(
            [udp_group("g", 100, 1_200_000)],
            duration=0.02, drain=0.0,
            host={"cpus": 3, "costs": {"stack_rx": 1000.0}},
            kernel={"rps_cpus": "2"}, apps=[sink],
        ),
        # a slow reader behind a tiny receive buffer
        "socket_drops": scenario_dict(
            [udp_group("g", 10, 200_000)],
            apps=[{"name": "slow", "cpus": 1, "cost": {"user_ns": 20_000},
                   "rcvbuf": 1024, "batch": 8}],
        ),
        # one group has a listener, the other does not (UdpNoPorts)
        "no_listener": scenario_dict(
            [udp_group("served", 10, 100_000), udp_group("stray", 10, 50_000)],
            apps=[{"name": "sink", "cpus": 1, "groups": ["served"],
                   "cost": {"user_ns": 0, "syscall_ns": 0}}],
        ),
        # NIC packet-rate ceiling below the offered rate, small FIFO
        "nic_overrun": scenario_dict(
            [udp_group("g", 10, 400_000)],
            nic={"max_pps": 100_000, "nic_fifo": 16},
        ),
        # a bit of everything: 2 queues, RPS, flow limit, jitter, small ring, 2 apps
        "mixed": scenario_dict(
            [udp_group("heavy", 1, 500_000, sport={"value": 7}),
             udp_group("light", 300, 700_000, arrivals="constant", size=512)],
            duration=0.03, drain=0.005,
            host={"cpus": 4, "cost_jitter": {"dist": "exponential"},
                  "costs": {"driver_rx": 1200.0, "stack_rx": 2000.0}},
            nic={"queues": 2, "irq_affinity": [0, 1], "ring_size": 64},
            kernel={"rps_cpus": "c", "flow_limit_cpu_bitmap": "3",
                    "netdev_max_backlog": 300},
            apps=[{"name": "b", "cpus": 0, "groups": ["light"], "rcvbuf": 1 << 20},
                  {"name": "a", "cpus": "2-3", "cost": {"user_ns": 300}, "rcvbuf": 65536}],
        ),
    }


EXPECTED_DROP = {
    "backlog_overload": ("backlog",),
    "socket_drops": ("socket_rcvbuf",),
    "no_listener": ("no_socket",),
    "nic_overrun": ("nic_overrun",),
    "mixed": ("ring_full", "backlog", "flow_limit", "socket_rcvbuf"),
}


@pytest.fixture(scope="module")
def scs(scenario_dict, udp_group):
    return {k: scenario_from_dict(v, k) for k, v in scenarios(scenario_dict, udp_group).items()}


@pytest.fixture(scope="module")
def results(scs):
    return {k: simulate(sc) for k, sc in scs.items()}


# ------------------------------------------------------------- conservation --------
@pytest.mark.parametrize("name", list(EXPECTED_DROP))
def test_conservation(scs, results, name):
    d = results[name].data
    pk = d["packets"]
    assert pk["offered"] == int(offered_per_flow(scs[name]).sum())
    assert pk["offered"] == pk["delivered"] + pk["dropped"] + pk["in_flight"]
    by = pk["dropped_by_reason"]
    assert pk["dropped"] == sum(by.values())
    assert all(by[r] > 0 for r in EXPECTED_DROP[name]), by
    # the per-place counters add up to the per-reason totals
    assert pk["delivered"] == sum(a["served"] for a in d["apps"])
    assert by["ring_full"] == sum(q["ring_full_drops"] for q in d["queues"])
    assert by["socket_rcvbuf"] == sum(a["socket_drops"] for a in d["apps"])
    assert by["backlog"] + by["flow_limit"] == sum(
        c["softnet_stat"]["dropped"] for c in d["cpus"])
    assert by["flow_limit"] == sum(c["softnet_stat"]["flow_limit_count"] for c in d["cpus"])


def test_in_flight_when_the_run_stops_with_full_queues(results):
    pk = results["backlog_overload"].data["packets"]
    assert pk["in_flight"] > 0  # drain 0: the overloaded backlog is still full


def test_no_listener_drops_exactly_the_stray_group(scs, results):
    sc = scs["no_listener"]
    per_flow = offered_per_flow(sc)
    stray = build(sc).flows.group == 1
    pk = results["no_listener"].data["packets"]
    assert pk["dropped_by_reason"]["no_socket"] == int(per_flow[stray].sum())
    assert pk["delivered"] + pk["in_flight"] == int(per_flow[~stray].sum())


# ------------------------------------------------------------- determinism ---------
def test_same_seed_gives_identical_json(scs, results):
    again = simulate(scs["mixed"])
    assert again.to_json() == results["mixed"].to_json()
    assert again.series == results["mixed"].series
    other = simulate(scs["mixed"], seed=2)
    assert other.to_json() != results["mixed"].to_json()


@pytest.mark.parametrize("name, chunk", [("mixed", 1000), ("backlog_overload", 1000),
                                         ("mixed", 7)])
def test_chunk_size_is_not_a_model_parameter(scs, results, name, chunk):
    small = simulate(scs[name], chunk_packets=chunk)
    assert small.to_json() == results[name].to_json()
    assert small.series == results[name].series


# ------------------------------------------------------------- softnet_stat --------
HEX8 = re.compile(r"^[0-9a-f]{8,}$")


@pytest.mark.parametrize("kernel, columns", [("3.11", 11), ("5.10", 13), ("6.19", 15)])
def test_softnet_stat_columns_per_kernel(scs, kernel, columns):
    res = simulate(scs["backlog_overload"], overrides={"host.kernel": kernel}).data
    assert res["config"]["softnet_stat_columns"] == columns
    lines = res["softnet_stat"]
    assert len(lines) == len(res["cpus"])  # one line per online CPU
    for c, line in enumerate(lines):
        f = line.split(" ")
        assert len(f) == columns, line
        assert all(HEX8.match(x) and len(x) == 8 for x in f), line  # u32 as %08x
        v = [int(x, 16) for x in f]
        row = res["cpus"][c]["softnet_stat"]
        # softnet_seq_show: processed, dropped, time_squeeze, 0, 0 0 0 0, 0, received_rps,
        # flow_limit_count [, backlog length, CPU index [, input_pkt_queue, process_queue]]
        assert v[:3] == [row["processed"], row["dropped"], row["time_squeeze"]]
        assert v[3:9] == [0] * 6
        assert v[9:11] == [row["received_rps"], row["flow_limit_count"]]
        if columns >= 13:
            assert v[11] == row["backlog_len"]
            assert v[12] == c
        if columns >= 15:
            assert v[13:15] == [row["input_pkt_queue_len"], row["process_queue_len"]]
            assert v[11] == v[13] + v[14]
    # the overloaded RPS target shows drops; the line has them in column 2
    assert int(lines[1].split()[1], 16) > 0


# ------------------------------------------------------------- RPS placement -------
RPS_MASK = "b"  # CPUs 0, 1, 3: CPU 0 is the IRQ CPU itself, CPU 2 is not a target


@pytest.fixture(scope="module")
def rps(scenario_dict, udp_group):
    sc = scenario_from_dict(scenario_dict(
        [udp_group("g", 500, 300_000)],
        duration=0.05, drain=0.01, host={"cpus": 4},
        kernel={"rps_cpus": RPS_MASK},
        apps=[{"name": "sink", "cpus": 2, "cost": {"user_ns": 0}, "rcvbuf": 64 << 20}],
    ))
    return sc, build(sc), simulate(sc).data


def test_rps_packets_land_where_reciprocal_scale_says(rps):
    sc, m, res = rps
    assert res["packets"]["dropped"] == 0
    rps_map = np.array([0, 1, 3])  # the mask's CPUs in increasing order (store_rps_map)
    h = m.params.flow["flow_hash"].astype(np.uint64) & np.uint64(0xFFFFFFFF)
    idx = (h * np.uint64(len(rps_map))) >> np.uint64(32)  # reciprocal_scale
    target = rps_map[idx.astype(np.int64)]
    target[h == 0] = 0  # hash 0: get_rps_cpu returns -1, processed on the IRQ CPU
    per_flow = offered_per_flow(sc)
    want = np.bincount(target, weights=per_flow, minlength=4).astype(np.int64)
    got = [c["softnet_stat"]["processed"] for c in res["cpus"]]
    assert got == want.tolist()
    assert got[2] == 0 and min(got[0], got[1], got[3]) > 0


def test_received_rps_only_on_remote_targets(rps):
    _, _, res = rps
    ipis = [c["softnet_stat"]["received_rps"] for c in res["cpus"]]
    assert ipis[0] == 0  # local target: scheduled directly, no IPI (napi_schedule_rps)
    assert ipis[2] == 0  # not in the map
    assert ipis[1] > 0 and ipis[3] > 0
