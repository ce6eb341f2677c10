"""XDP_REDIRECT into AF_XDP sockets in the host simulation (net/xdp/xsk.c): the socket
in XSKMAP[rx_queue_index] gets the frame, a queue without one aborts, and a full RX ring
or an empty FILL ring drops with its own reason."""

from __future__ import annotations

import pytest

from rxlab.scenario import scenario_from_dict
from rxlab.simulate import simulate


def xsk_scenario(scenario_dict, udp_group, *, user_ns=0.0, rx_ring=2048, umem=4096,
                 mode="zero-copy"):
    return scenario_from_dict(scenario_dict(
        [udp_group("g", 64, 200_000)], host={"cpus": 3},
        nic={"queues": 2, "irq_affinity": [0, 1]},
        xdp={"rules": [{"match": {"proto": "udp"}, "action": "redirect-xsk"}]},
        apps=[{"name": "xsk", "cpus": 2, "batch": 64, "cost": {"user_ns": user_ns},
               "afxdp": {"queues": [0], "rx_ring": rx_ring, "umem_frames": umem,
                         "mode": mode}}],
    ))


@pytest.fixture(scope="module")
def fast(scenario_dict, udp_group):
    return simulate(xsk_scenario(scenario_dict, udp_group)).data


def test_queue_zero_reaches_the_socket_queue_one_aborts(fast):
    q = {r["queue"]: r["packets"] for r in fast["queues"]}
    pk = fast["packets"]
    assert q[0] > 0 and q[1] > 0
    assert pk["delivered"] + pk["in_flight"] == q[0]
    assert pk["dropped_by_reason"]["xdp_aborted"] == q[1] == pk["dropped"]
    assert all(c["softnet_stat"]["processed"] == 0 for c in fast["cpus"])  # no skb, no stack


def test_zero_copy_is_cheaper_than_copy(scenario_dict, udp_group, fast):
    copy = simulate(xsk_scenario(scenario_dict, udp_group, mode="copy")).data
    assert copy["packets"]["delivered"] == fast["packets"]["delivered"]
    assert copy["cpus"][0]["util"]["softirq"] > fast["cpus"][0]["util"]["softirq"]


@pytest.mark.parametrize("rx_ring,umem,reason", [(64, 4096, "xsk_rx_ring_full"),
                                                 (2048, 32, "xsk_fill_empty")])
def test_a_slow_reader_fills_the_smaller_bound(scenario_dict, udp_group, rx_ring, umem,
                                               reason):
    d = simulate(xsk_scenario(scenario_dict, udp_group, user_ns=20_000, rx_ring=rx_ring,
                              umem=umem)).data
    by = d["packets"]["dropped_by_reason"]
    other = "xsk_fill_empty" if reason == "xsk_rx_ring_full" else "xsk_rx_ring_full"
    assert by[reason] > 0 and by[other] == 0
    assert d["apps"][0]["socket_drops"] == by[reason]
    # the reader serves 1 / 20 us = 50k packets/s, plus what waits in the ring at the end
    rate = (d["apps"][0]["served"] - min(rx_ring, umem)) / d["duration_s"]
    assert abs(rate - 50_000) / 50_000 < 0.05


def test_ring_size_must_be_a_power_of_two(scenario_dict, udp_group):
    from rxlab.errors import UsageError

    with pytest.raises(UsageError, match=r"apps\[0\]\.afxdp\.rx_ring: 1000 is not a power"):
        xsk_scenario(scenario_dict, udp_group, rx_ring=1000)
