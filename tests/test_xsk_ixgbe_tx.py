"""ixgbe zero-copy TX clean (rxlab.afxdp.ixgbe_tx), both variants, and the ring-invariant
checker (rxlab.afxdp.invariants) on a small deterministic forwarding host."""

from __future__ import annotations

import pytest

from rxlab.afxdp.forward import ForwardingHost, HostConfig
from rxlab.afxdp.ixgbe_tx import (
    IXGBE_TXD_STAT_DD,
    IxgbeTxRing,
    hw_transmit,
    ixgbe_clean_xdp_tx_irq,
    ixgbe_desc_unused,
    ixgbe_xmit_zc,
)
from rxlab.afxdp.xsk import Umem, XskPool, s32_diff, u32
from rxlab.errors import UsageError


def small_host(variant: str, start: int = 0, **kw) -> ForwardingHost:
    cfg = HostConfig(variant=variant, frames=64, fill_size=16, comp_size=16, rx_size=16,
                     tx_size=16, tx_descs=8, rx_descs=8, work_limit=8, napi_budget=8,
                     batch=4, start_index=start, **kw)
    h = ForwardingHost(cfg)
    h.app_setup()
    h.napi_rx(0)  # post the RX buffers
    return h


def forward_round(h: ForwardingHost, n: int = 4) -> None:
    """n packets in, through the socket, out on the wire, completions reaped."""
    h.nic_receive(n)
    h.napi_rx()
    h.app_forward(n)
    h.napi_tx_clean()  # posts the new descriptors
    h.nic_transmit()
    h.app_prepare_fill(n)


def post(pool: XskPool, ring: IxgbeTxRing, n: int) -> None:
    idx = pool.user_tx.reserve(n)
    for j in range(n):
        pool.tx_ring.write(u32(idx + j), 4096 * j, 64)
    pool.user_tx.submit(n)
    ixgbe_xmit_zc(ring, pool, 256)


def test_desc_unused():
    r = IxgbeTxRing(8)
    assert ixgbe_desc_unused(r) == 7
    r.next_to_use = 5
    assert ixgbe_desc_unused(r) == 2
    r.next_to_clean = 6  # ntc past ntu
    assert ixgbe_desc_unused(r) == 0


def test_xmit_posts_at_most_budget_and_clears_dd():
    pool = XskPool(Umem(32), fill=32, comp=32, rx=32, tx=32)
    r = IxgbeTxRing(64)
    r.status[:] = IXGBE_TXD_STAT_DD  # stale DD everywhere
    idx = pool.user_tx.reserve(10)
    for j in range(10):
        pool.tx_ring.write(u32(idx + j), 4096 * j, 64)
    pool.user_tx.submit(10)
    res = ixgbe_xmit_zc(r, pool, budget=4)
    # the whole budget used: "budget-- > 0" wraps the unsigned budget, so !!budget is true
    assert res.posted == 4 and res.work_done and r.next_to_use == 4 and r.tail == 4
    assert not (r.status[:4] & IXGBE_TXD_STAT_DD).any()
    assert pool.cq.cached_prod == 4  # a completion slot reserved per descriptor
    assert ixgbe_xmit_zc(r, pool, budget=256).posted == 6


def test_hw_never_passes_tail():
    pool = XskPool(Umem(32), fill=32, comp=32, rx=32, tx=32)
    r = IxgbeTxRing(8)
    post(pool, r, 3)
    assert hw_transmit(r) == [0, 1, 2]
    assert hw_transmit(r) == []


@pytest.mark.parametrize("variant", ["fixed", "ixgbe-2019"])
def test_first_lap_is_clean_in_both_variants(variant):
    """Before the ring has lapped no slot carries a stale DD: both variants agree."""
    pool = XskPool(Umem(32), fill=32, comp=32, rx=32, tx=32)
    r = IxgbeTxRing(8)
    post(pool, r, 3)
    hw_transmit(r)
    c = ixgbe_clean_xdp_tx_irq(r, pool, variant, work_limit=256)
    assert c.xsk_frames == 3 and c.stale == 0
    assert r.next_to_clean == 3 and pool.comp_ring.producer == 3


def test_buggy_clean_walks_into_stale_slots_fixed_does_not():
    def lapped(variant):
        pool = XskPool(Umem(32), fill=32, comp=32, rx=32, tx=32, start=2**32 - 4)
        r = IxgbeTxRing(8)
        for _ in range(3):  # 3 x 3 descriptors: the ring laps once
            post(pool, r, 3)
            hw_transmit(r)
            ixgbe_clean_xdp_tx_irq(r, pool, variant, work_limit=256)
        return pool, r

    pool, r = lapped("fixed")
    assert r.next_to_clean == r.next_to_use == 1 and r.stale_cleans == 0
    assert pool.comp_ring.producer == pool.cq.cached_prod == u32(2**32 - 4 + 9)

    pool, r = lapped("ixgbe-2019")
    # the third round posts slots 6, 7, 0; behind them slots 1..5 still carry DD from
    # the first lap, so the loop runs on (lap after lap) until its budget of 256
    assert r.stale_cleans == 256 - 3
    assert s32_diff(pool.comp_ring.producer, pool.cq.cached_prod) == r.stale_cleans
    assert r.next_to_clean != r.next_to_use


def test_buggy_budget_bounds_the_walk():
    pool = XskPool(Umem(32), fill=32, comp=32, rx=32, tx=32)
    r = IxgbeTxRing(16)
    r.status[:] = IXGBE_TXD_STAT_DD  # every slot stale
    c = ixgbe_clean_xdp_tx_irq(r, pool, "ixgbe-2019", work_limit=5)
    assert c.xsk_frames == 5 and c.stale == 5 and r.next_to_clean == 5
    c = ixgbe_clean_xdp_tx_irq(IxgbeTxRing(16), pool, "fixed", work_limit=5)
    assert c.xsk_frames == 0


def test_bad_variant_and_work_limit():
    pool = XskPool(Umem(4), fill=4, comp=4, rx=4, tx=4)
    with pytest.raises(UsageError, match="driver.variant"):
        ixgbe_clean_xdp_tx_irq(IxgbeTxRing(8), pool, "ixgbe-2018")
    with pytest.raises(UsageError, match="work_limit"):
        ixgbe_clean_xdp_tx_irq(IxgbeTxRing(8), pool, "fixed", work_limit=0)
    with pytest.raises(UsageError, match="xsk.tx_size"):
        HostConfig(tx_size=100).validate()


# --- the checker on a whole host ----------------------------------------------------

@pytest.mark.parametrize("start", [0, 2**32 - 5])
def test_fixed_host_keeps_every_invariant(start):
    h = small_host("fixed", start)
    for _ in range(20):
        forward_round(h)
    h.app_complete_tx()
    assert h.checker.first is None, h.checker.first
    own = h.checker.ownership_summary()
    assert own["frames_lost"] == 0 and own["frames_multi_owned"] == 0
    assert h.txr.stale_cleans == 0
    assert h.delivered == 80 and h.tx_corrupted == 0


@pytest.mark.parametrize("start", [0, 2**32 - 5])
def test_buggy_host_reports_first_violation_and_step(start):
    h = small_host("ixgbe-2019", start)
    for _ in range(20):
        forward_round(h)
    first = h.checker.first
    assert first is not None
    # the root cause comes first, in the clean that walked past next_to_use
    assert first.kind == "clean_past_next_to_use"
    assert "ixgbe_clean_xdp_tx_irq[ixgbe-2019]" in first.action
    assert first.step > 0 and str(first).startswith(f"step {first.step} (")
    kinds = h.checker.by_kind
    assert kinds["cq_producer_past_reserved"] > 0
    assert kinds["unwritten_completion"] > 0


def test_buggy_first_violation_is_the_clean_after_the_first_lap():
    """Same traffic in both variants: the runs agree step for step until the buggy
    clean meets a stale DD bit, and that step is the one reported."""
    hf, hb = small_host("fixed"), small_host("ixgbe-2019")
    for _ in range(20):
        forward_round(hf)
        forward_round(hb)
        if hb.checker.first:
            break
    v = hb.checker.first
    assert v is not None and hf.checker.first is None
    assert hb.txr.stale_cleans > 0
    # it happened once the 8-descriptor ring had lapped (more than 8 posts)
    assert hb.txr.packets > 8


def test_user_space_sees_completions_of_never_written_entries():
    h = small_host("ixgbe-2019")
    for _ in range(12):
        forward_round(h)
    ring = h.pool.comp_ring
    assert s32_diff(ring.producer, h.pool.cq.cached_prod) > 0 or h.checker.by_kind[
        "unwritten_completion"] > 0
    assert h.app.cq_skip > 0  # OVS skipped entries it had already marked UINT64_MAX
