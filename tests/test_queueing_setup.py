"""Queueing theory with the default profile's real overheads, through ``rxlab run``.

One Poisson flow, one rx queue whose interrupt is on CPU 0, no RPS, the reader on CPU 1,
the ``modern-x86`` profile as it ships (interrupt latency 500 ns, hard interrupt 300 ns,
NAPI poll 19 ns, deterministic costs) with ``stack_rx`` set to 1 us. The setup time and
the service time come from the stages (tests/support/queueing_reference.py, "Mapping"):
D = irq_latency + hardirq + napi_poll, S = driver_rx + gro + stack_rx + socket_enqueue.

* ``ice`` cleans until an unwritten descriptor: the M/G/1 queue with setup times.
  Mean wait (latency to socket - S) and polls per packet within 3 % of the formula at
  rho 0.3, 0.6 and 0.8 (busy periods beyond the NAPI weight of 64 are rare enough there:
  queueing_reference.simulate_napi with weight 64 moves polls per packet by 1.6 % at 0.8).
* ``mvpp2`` reads the received count once per poll: packets that land during a poll wait
  for another interrupt. Its figures are compared with an event simulation of that rule
  written here, and shown to be far from the setup-time formula.
* The NIC's FIFO at its packet-rate ceiling (``nic.max_pps``) is an M/D/1 queue: its mean
  wait, reported as ``latency_ns.nic_wait``, within 5 % of Pollaczek-Khinchine at rho 0.9.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from support.queueing_reference import md1_wait, mg1_setup

from rxlab.build import build
from rxlab.kernel.stages import STAGES
from rxlab.scenario import scenario_from_dict
from rxlab.simulate import simulate

STACK_NS = 1000.0
DURATION = 1.0
TOL = 0.03
LOADS = (0.3, 0.6, 0.8)


def one_queue(scenario_dict, udp_group, driver, pps, duration=DURATION, nic=None,
              stack_ns=STACK_NS):
    d = scenario_dict(
        [udp_group("g", 1, pps)], name="one-queue", seed=1, duration=duration, drain=0.01,
        # the reader's wake-ups from CPU 0 (wakeup_remote, once per poll that finds it
        # asleep) are a cost the setup-time formula has no term for
        host={"cpus": 2, "costs": {"stack_rx": stack_ns, "wakeup_remote": 0.0}},
        nic={"queues": 1, "irq_affinity": [0], "link_gbps": 1000, "driver": driver,
             **(nic or {})},
    )
    d["nic"].pop("ring_size")  # the driver's own ring
    return scenario_from_dict(d)


@pytest.fixture(scope="module")
def stages(scenario_dict, udp_group):
    c = dict(zip(STAGES, build(one_queue(scenario_dict, udp_group, "ice", 1e5, 0.001))
                 .params.cost_ns.tolist(), strict=True))
    setup = c["irq_latency"] + c["hardirq"] + c["napi_poll"]
    service = c["driver_rx"] + c["gro"] + c["stack_rx"] + c["socket_enqueue"]
    assert setup > 0.5 * service  # real overheads: the setup is not negligible
    return setup, service, c["napi_poll"]


def measured(res, service):
    d = res.data
    pk = d["packets"]
    assert pk["dropped"] == 0 and pk["delivered"] == pk["offered"] > 100_000
    wait = d["latency_ns"]["to_socket"]["mean"] - service
    return wait, d["queues"][0]["polls"] / pk["delivered"]


@pytest.fixture(scope="module")
def runs(scenario_dict, udp_group, stages):
    _, service, _ = stages
    out = {}
    for driver in ("ice", "mvpp2"):
        for rho in LOADS:
            res = simulate(one_queue(scenario_dict, udp_group, driver, rho / service * 1e9))
            out[driver, rho] = measured(res, service)
    return out


@pytest.mark.parametrize("rho", LOADS)
def test_ice_is_the_setup_time_queue(runs, stages, rho):
    setup, service, _ = stages
    th = mg1_setup(rho / service, service, service**2, setup)
    wait, ppp = runs["ice", rho]
    assert wait == pytest.approx(th["wait"], rel=TOL), (wait, th)
    assert ppp == pytest.approx(th["polls_per_packet"], rel=TOL), (ppp, th)


def count_at_start(lam, service, setup, repoll, n, weight=64, seed=1):
    """Event simulation of a poll that reads the ring's count once (mvpp2_rx): a poll
    starts ``setup`` after the interrupt's cause, takes min(weight, packets arrived by
    then) and serves them; packets that arrived meanwhile raise the interrupt again when
    it ends (another ``setup``), a full poll is polled again for ``repoll``. Returns mean
    wait (arrival to service start) and polls per packet, after a tenth as warm-up."""
    rng = np.random.default_rng(seed)
    arr = np.cumsum(rng.exponential(1.0 / lam, n))
    skip = n // 10
    i = 0
    polls = 0
    wait = 0.0
    t = -math.inf  # when the CPU is done with the last poll
    full = False
    while i < n:
        if full:
            start = t + repoll  # NAPI weight used: polled again, no interrupt
        elif arr[i] > t:
            start = arr[i] + setup  # ring empty at the poll's end: next packet interrupts
        else:
            start = t + setup  # arrived during the poll: the interrupt fires again
        k = int(np.searchsorted(arr, start, side="right")) - i
        k = min(k, weight)
        polls += i >= skip
        for j in range(i, i + k):
            if j >= skip:
                wait += start - arr[j]
            start += service
        i += k
        t = start
        full = k == weight
    m = n - skip
    return wait / m, polls / m


@pytest.mark.parametrize("rho", LOADS)
def test_mvpp2_counts_at_poll_start(runs, stages, rho):
    setup, service, napi_poll = stages
    lam = rho / service
    th = mg1_setup(lam, service, service**2, setup)
    wait, ppp = runs["mvpp2", rho]
    ref_wait, ref_ppp = count_at_start(lam, service, setup, napi_poll, 400_000)
    assert wait == pytest.approx(ref_wait, rel=TOL), (wait, ref_wait)
    assert ppp == pytest.approx(ref_ppp, rel=TOL), (ppp, ref_ppp)
    # and not the setup-time queue: packets landing during a poll wait for a new one
    assert wait > th["wait"] * 1.25 and ppp > th["polls_per_packet"] * 1.25
    assert wait > runs["ice", rho][0] * 1.25


def test_nic_fifo_wait_is_md1(scenario_dict, udp_group):
    max_pps = 1_000_000
    rho = 0.9
    svc = 1e9 / max_pps
    # the profile's own stack cost: the CPU keeps up (~30 % busy), the NIC is the queue
    sc = one_queue(scenario_dict, udp_group, "ice", rho * max_pps, duration=2.0,
                   nic={"max_pps": max_pps}, stack_ns=167.0)
    res = simulate(sc)
    lat = res.data["latency_ns"]
    assert res.data["packets"]["dropped"] == 0
    want = md1_wait(rho / svc, svc)  # 4500 ns
    assert lat["nic_wait"]["samples"] == res.data["packets"]["offered"]
    assert lat["nic_wait"]["mean"] == pytest.approx(want, rel=0.05), (lat["nic_wait"], want)
    # every latency starts off the wire: the FIFO wait and the NIC's service are in it
    assert lat["to_socket"]["mean"] > lat["nic_wait"]["mean"] + svc
    assert lat["to_app"]["mean"] > lat["to_socket"]["mean"]
    # without a ceiling nothing waits there
    free = simulate(one_queue(scenario_dict, udp_group, "ice", rho * max_pps, duration=0.05,
                              stack_ns=167.0))
    assert free.data["latency_ns"]["nic_wait"]["max"] == 0
