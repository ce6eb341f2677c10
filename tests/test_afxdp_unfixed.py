"""The unfixed (ixgbe-2019) rate of seed 002 and the mechanism it comes out of.

Mechanism: the 2019 TX clean reports every descriptor it walks, stale ones included
(``xsk_tx_completed``), so the completion ring's published producer runs ahead of what
``xsk_tx_peek_desc`` reserved by exactly the stale descriptors cleaned; a walk that used the
whole ``work_limit`` returns ``budget > 0 && xmit_done`` = false, so NAPI polls again; and
OVS's ``afxdp_complete_tx`` walks every published entry, skipping the ones it already
marked, on the PMD's time. The seed's table (E. Chaudron, netdev, 23 Aug 2019) is the
reference; the
tolerances are the issue's: fixed within 7 %, unfixed within 15 % at five of seven sizes.
"""

from __future__ import annotations

from dataclasses import asdict

import numpy as np
import pytest

from rxlab.afxdp.forward import ForwardingCosts, ForwardingHost, HostConfig, run_forwarding
from rxlab.afxdp.ixgbe_tx import (
    IXGBE_TXD_STAT_DD,
    IxgbeTxRing,
    hw_transmit,
    ixgbe_clean_xdp_tx_irq,
    ixgbe_xmit_zc,
)
from rxlab.afxdp.xsk import Umem, XskPool, s32_diff, u32
from rxlab.errors import UsageError
from rxlab.repro.afxdp_tx_clean import SEED_FIX, SEED_NO_FIX, SIZES

DUR = 2_000_000  # simulated ns per run


@pytest.fixture(scope="module")
def runs():
    return {(v, s): run_forwarding(s, v, duration_ns=DUR)
            for v in ("fixed", "ixgbe-2019") for s in SIZES}


# -- mechanism ----------------------------------------------------------------------

def _posted_uncleaned(h: ForwardingHost) -> int:
    return int(h.txr.shadow_posted.sum())


@pytest.mark.parametrize("variant", ["fixed", "ixgbe-2019"])
@pytest.mark.parametrize("start", [0, 2**32 - 3])
def test_completion_producer_excess_is_the_stale_cleans(variant, start):
    """published producer - reserved (cached_prod) = stale descriptors cleaned - descriptors
    posted and not yet cleaned, after every step: every completion the driver reports is a
    reserved entry or a stale clean, nothing else."""
    cfg = HostConfig(variant=variant, frames=64, fill_size=16, comp_size=16, rx_size=16,
                     tx_size=16, tx_descs=8, rx_descs=8, work_limit=8, napi_budget=8,
                     batch=4, start_index=start, check=False)
    h = ForwardingHost(cfg)
    h.app_setup()
    h.napi_rx(0)
    rng = np.random.default_rng(7)
    for _ in range(400):
        op = int(rng.integers(5))
        if op == 0:
            h.nic_receive(int(rng.integers(1, 6)))
        elif op == 1:
            h.napi_poll()
        elif op == 2:
            h.app_iteration()
        elif op == 3:
            h.nic_transmit(int(rng.integers(1, 9)))
        else:
            h.app_complete_tx()
        excess = s32_diff(h.pool.comp_ring.producer, h.pool.cq.cached_prod)
        assert excess == h.txr.stale_cleans - _posted_uncleaned(h)
    if variant == "fixed":
        assert h.txr.stale_cleans == 0
    else:
        assert h.txr.stale_cleans > 0  # the sequence does reach the double clean


def _drained_ring(variant: str, count: int = 16, work_limit: int = 8):
    """A TX ring after its first lap: every slot sent (DD set), one descriptor in flight
    and already sent."""
    pool = XskPool(Umem(32), fill=32, comp=32, rx=32, tx=32)
    r = IxgbeTxRing(count)
    r.status[:] = IXGBE_TXD_STAT_DD
    idx = pool.user_tx.reserve(1)
    pool.tx_ring.write(u32(idx), 0, 64)
    pool.user_tx.submit(1)
    assert ixgbe_xmit_zc(r, pool, work_limit).posted == 1  # slot 0, its DD cleared
    assert hw_transmit(r) == [0]  # the NIC sent it and wrote DD back
    return r, pool


def test_2019_clean_that_used_its_budget_asks_for_a_repoll():
    r, pool = _drained_ring("ixgbe-2019")
    c = ixgbe_clean_xdp_tx_irq(r, pool, "ixgbe-2019", 8)
    # one real completion + 7 stale slots = the whole work_limit; nothing left to send
    assert (c.xsk_frames, c.stale, c.posted) == (8, 7, 0)
    assert c.done is False  # "return budget > 0 && xmit_done"
    assert s32_diff(pool.comp_ring.producer, pool.cq.cached_prod) == 7


def test_fixed_clean_returns_xmit_result():
    r, pool = _drained_ring("fixed")
    c = ixgbe_clean_xdp_tx_irq(r, pool, "fixed", 8)
    assert (c.xsk_frames, c.stale, c.done) == (1, 0, True)
    assert s32_diff(pool.comp_ring.producer, pool.cq.cached_prod) == 0


def test_the_rate_loss_is_the_pmd_walking_marked_entries():
    """At 64 B (PMD-bound) the unfixed run loses rate only through the PMD's walk over
    completion entries OVS already marked: with that cost at 0 it forwards what the fixed
    driver does."""
    base = run_forwarding(64, "fixed", duration_ns=DUR)
    free = run_forwarding(64, "ixgbe-2019", duration_ns=DUR,
                          costs=ForwardingCosts(cq_skip_ns=0.0))
    slow = run_forwarding(64, "ixgbe-2019", duration_ns=DUR)
    assert free.app["cq_skip"] > 0 and slow.app["cq_skip"] > 0
    assert free.pps >= 0.99 * base.pps
    assert slow.pps < 0.97 * base.pps


# -- a socket carried over from earlier runs -----------------------------------------

HOST_DROPS = ("nic_no_rx_buffer", "xsk_rx_ring_full", "tx_pool_empty", "tx_ring_full")


def test_carried_over_socket_starts_past_reserved_and_walks_at_once():
    """The state earlier runs leave: published producer ``cq_excess`` past the reservation,
    user space caught up, DD on every TX slot; the first 2019 clean walks its whole budget
    of stale slots, the fixed one none."""
    for variant, excess in (("ixgbe-2019", 700), ("fixed", 0)):
        h = ForwardingHost(HostConfig(variant=variant, cq_excess=excess))
        assert s32_diff(h.pool.comp_ring.producer, h.pool.cq.cached_prod) == excess
        assert h.pool.user_cq.peek(2048)[1] == 0  # nothing left to read
        c = h.napi_tx_clean()
        assert c.stale == (256 if variant == "ixgbe-2019" else 0)


@pytest.mark.parametrize("bad", [-1, 1 << 31, 1.5, True])
def test_cq_excess_must_be_a_u32_offset(bad):
    with pytest.raises(UsageError, match=r"host\.cq_excess"):
        ForwardingHost(HostConfig(variant="ixgbe-2019", cq_excess=bad))


def test_fixed_socket_has_no_excess():
    with pytest.raises(UsageError, match=r"host\.cq_excess: the fixed clean"):
        ForwardingHost(HostConfig(variant="fixed", cq_excess=5))


@pytest.mark.parametrize("size", [s for s in SIZES if s >= 512])
def test_wire_bound_rate_is_the_fixed_rate_on_a_carried_over_socket(size):
    """Where the wire is the bottleneck the 2019 clean still walks stale slots and publishes
    completions past the reservation, and frames go out with other packets' data, but no
    frame is dropped in the host and the port sends as many frames as the fixed driver:
    the frames a tester counts on the port (XENA's port total, test payload IDs off) do not
    fall, whatever excess the earlier runs left."""
    fixed = run_forwarding(size, "fixed", duration_ns=DUR, cfg=HostConfig(cq_excess=0))
    for excess in (700, 2000):  # the excess modulo the ring size is not known
        r = run_forwarding(size, "ixgbe-2019", duration_ns=DUR,
                           cfg=HostConfig(cq_excess=excess))
        assert r.stale_cleans > 0
        assert r.cq_producer_excess > 0
        assert all(r.packets["dropped_by_reason"][k] == 0 for k in HOST_DROPS)
        # window edges move a few frames either way; the seed's smallest loss here is 2.2 %
        assert abs(r.pps / fixed.pps - 1) <= 0.005


# -- the seed's table -----------------------------------------------------------------

@pytest.mark.parametrize("size", [s for s in SIZES if s <= 256])
def test_pps_counts_every_frame_on_the_wire(runs, size):
    """The seed's tester (ovs_perf: XENA's port pr_total, test payload IDs disabled) counts
    frames, whatever they carry: on a new socket nearly every unfixed frame leaves with
    another packet's data, and ``pps`` still counts it."""
    r = runs[("ixgbe-2019", size)]
    assert r.tx_corrupted > 0
    assert r.intact_pps < 0.5 * r.pps


@pytest.mark.parametrize("size", SIZES)
def test_fixed_row_within_7_percent(runs, size):
    assert abs(runs[("fixed", size)].pps / SEED_FIX[size] - 1) <= 0.07


@pytest.mark.parametrize("size", [s for s in SIZES if s <= 256])
def test_unfixed_below_fixed_where_cpu_bound(runs, size):
    assert runs[("ixgbe-2019", size)].pps < runs[("fixed", size)].pps


@pytest.mark.xfail(strict=True, reason="gap left visible: with the cited costs the PMD's "
                   "walk takes 3-11 % at 64-256 B, the seed lost 20-31 %; at 512-1514 B the "
                   "port sets the rate, no frame is dropped in the host and the tester "
                   "(XENA pr_total, payload IDs off) counts every frame on the wire, so the "
                   "seed's 2-32 % there does not come from this mechanism (docs/afxdp.md)")
def test_unfixed_row_as_the_issue_asks(runs):
    within = sum(abs(runs[("ixgbe-2019", s)].pps / SEED_NO_FIX[s] - 1) <= 0.15 for s in SIZES)
    below = all(runs[("ixgbe-2019", s)].pps < runs[("fixed", s)].pps for s in SIZES)
    assert within >= 5 and below


@pytest.mark.parametrize("variant", ["fixed", "ixgbe-2019"])
def test_every_packet_accounted_for(runs, variant):
    for s in SIZES:
        p = runs[(variant, s)].packets
        assert p["offered"] == p["delivered"] + p["dropped"] + p["in_flight"]
        assert p["dropped"] == sum(p["dropped_by_reason"].values())
        assert p["offered"] > 0 and p["delivered"] > 0


def test_deterministic():
    a = asdict(run_forwarding(128, "ixgbe-2019", duration_ns=500_000, seed=5))
    b = asdict(run_forwarding(128, "ixgbe-2019", duration_ns=500_000, seed=5))
    c = asdict(run_forwarding(128, "ixgbe-2019", duration_ns=500_000, seed=6))
    assert a == b
    assert a != c
