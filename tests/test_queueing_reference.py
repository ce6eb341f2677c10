"""The setup-time formula of tests/support/queueing_reference.py against its own event simulation.

The simulation is independent of the formula (a FIFO recursion over Poisson arrivals);
the figures are the default cost profile's fixed overheads (irq_latency 500 ns, hardirq
300 ns, napi_poll 19 ns) and a 1 us per-packet service, as a NAPI queue sees them.
"""

from __future__ import annotations

import pytest
from support.queueing_reference import md1_wait, mg1_setup, simulate_napi

S = 1000.0  # ns per packet
D = 500.0 + 300.0 + 19.0  # ns before the first packet of a busy period is served
N = 2_000_000
TOL = 0.02


def _close(got: float, want: float) -> bool:
    return abs(got / want - 1) <= TOL


@pytest.mark.parametrize("rho", [0.3, 0.6, 0.85])
def test_deterministic_service(rho):
    lam = rho / S
    th = mg1_setup(lam, S, S * S, D)
    sim = simulate_napi(lam, S, D, N, seed=11)
    assert _close(sim["wait"], th["wait"]), (sim, th)
    assert _close(sim["polls_per_packet"], th["polls_per_packet"]), (sim, th)


def test_exponential_service_and_setup():
    """General service and a random setup: the second moments enter as the formula says."""
    lam = 0.8 / S
    th = mg1_setup(lam, S, 2 * S * S, D, 2 * D * D)
    sim = simulate_napi(lam, lambda rng, n: rng.exponential(S, n),
                        lambda rng, n: rng.exponential(D, n), N, seed=5)
    assert _close(sim["wait"], th["wait"]), (sim, th)
    assert _close(sim["polls_per_packet"], th["polls_per_packet"]), (sim, th)


def test_no_setup_is_pollaczek_khinchine():
    lam = 0.85 / S
    sim = simulate_napi(lam, S, 0.0, N, seed=7)
    assert _close(sim["wait"], md1_wait(lam, S))
    assert _close(sim["polls_per_packet"], 1 - 0.85)  # one poll per M/D/1 busy period


@pytest.mark.parametrize("rho", [0.3, 0.85])
def test_setup_matters(rho):
    """The comparison can fail: ignoring the setup is far outside the tolerance."""
    lam = rho / S
    sim = simulate_napi(lam, S, D, N // 4, seed=3)
    assert not _close(sim["wait"], md1_wait(lam, S))
    assert not _close(sim["polls_per_packet"], 1 - rho)


def test_weight_adds_polls_at_high_load():
    """A poll that reaches the NAPI weight is polled again: more polls than one per busy
    period once busy periods exceed 64 packets (the formula assumes they never do)."""
    lam = 0.85 / S
    th = mg1_setup(lam, S, S * S, D)
    sim = simulate_napi(lam, S, D, N, seed=11, weight=64, repoll_cost=19.0)
    assert sim["polls_per_packet"] > th["polls_per_packet"] * (1 + TOL)
    assert _close(sim["wait"], th["wait"])  # 19 ns per 64 packets barely moves the wait
