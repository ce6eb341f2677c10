"""When RX buffers go back to the NIC, per driver (docs/model.md, "Driver RX polls").

The numbers come from the drivers' code, not from rxlab: the Intel drivers fill
``count - 1`` descriptors (``ICE_DESC_UNUSED``, ``I40E_DESC_UNUSED``,
``ixgbe_desc_unused`` keep next_to_use one behind next_to_clean), ice's tail register
ignores the low 3 bits (``ice_release_rx_desc``), mlx5's work queue and mvpp2's
descriptor counters start full. ice gives buffers back once per poll, after its loop
(``ice_clean_rx_irq``), so a poll can take only what was free when it started.
"""

from __future__ import annotations

import pytest

from rxlab.scenario import scenario_from_dict
from rxlab.simulate import simulate

RING = 64


def one_queue(scenario_dict, udp_group, driver, pps, duration):
    d = scenario_dict(
        [udp_group("g", 1, pps, arrivals="constant")], name="refill", seed=1,
        duration=duration, drain=0.01, host={"cpus": 2, "costs": {"stack_rx": 5000.0}},
        nic={"queues": 1, "irq_affinity": [0], "link_gbps": 1000, "driver": driver,
             "ring_size": RING},
    )
    return scenario_from_dict(d)


@pytest.mark.parametrize("driver, fillable", [
    ("generic", RING), ("mlx5", RING), ("mvpp2", RING),
    ("i40e", RING - 1), ("ixgbe", RING - 1),
    ("ice", (RING - 1) // 8 * 8),  # one slot kept empty, the tail rounded down to 8
])
def test_a_burst_fills_what_the_driver_posted(scenario_dict, udp_group, driver, fillable):
    # 100 packets 5 ns apart: all reach the NIC before the first poll starts (the
    # interrupt alone takes 500 ns), so the ring takes exactly what the driver posted
    res = simulate(one_queue(scenario_dict, udp_group, driver, 2e8, 100 / 2e8)).data
    pk = res["packets"]
    assert pk["offered"] == 100
    assert pk["dropped_by_reason"]["ring_full"] == 100 - fillable
    assert pk["delivered"] == fillable


def test_ice_refills_only_after_its_poll(scenario_dict, udp_group):
    """Overload (20 Mpps into a 5 us per packet CPU): every ice poll finds the 56 posted
    descriptors written and no more, since nothing goes back to the NIC before the poll
    ends; a driver that frees a descriptor as it takes it fills a whole NAPI weight."""
    ice = simulate(one_queue(scenario_dict, udp_group, "ice", 2e7, 0.01)).data
    polls, got = ice["queues"][0]["polls"], ice["packets"]["delivered"]
    assert got == polls * ((RING - 1) // 8 * 8)
    gen = simulate(one_queue(scenario_dict, udp_group, "generic", 2e7, 0.01)).data
    assert gen["packets"]["delivered"] >= (gen["queues"][0]["polls"] - 1) * 64
    # the ring holds fewer packets between polls: less time in it
    assert ice["latency_ns"]["to_socket"]["mean"] < 0.6 * gen["latency_ns"]["to_socket"]["mean"]
