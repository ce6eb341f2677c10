"""AF_XDP rings (rxlab.afxdp.xsk): index arithmetic with wrap-around, reserve/submit/cancel,
peek/release/publish, sizes, descriptor validation, TX back-pressure."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rxlab.afxdp.xsk import (
    INVALID_ADDR,
    U32_MASK,
    Umem,
    UserRingCons,
    UserRingProd,
    XdpRing,
    XskPool,
    XskQueue,
    check_ring_size,
    s32_diff,
    u32,
    u32_sub,
)
from rxlab.errors import UsageError

NEAR_WRAP = 2**32 - 3

u32s = st.integers(min_value=0, max_value=U32_MASK)


# --- u32 helpers -------------------------------------------------------------------

def test_u32_helpers_wrap():
    assert u32(U32_MASK + 1) == 0
    assert u32(-1) == U32_MASK
    assert u32_sub(2, U32_MASK) == 3  # producer wrapped past consumer: 3 entries
    assert s32_diff(1, U32_MASK) == 2
    assert s32_diff(U32_MASK, 1) == -2
    assert s32_diff(0x80000000, 0) == -0x80000000


@settings(deadline=None)  # the first call loads the jitted helper
@given(u32s, u32s)
def test_s32_diff_matches_the_kernel_helper(a, b):
    from rxlab.kernel.hashfn import s32_diff as kernel_s32_diff

    assert s32_diff(a, b) == int(kernel_s32_diff(a, b))


@given(u32s, st.integers(min_value=0, max_value=2**31 - 1))
def test_u32_sub_inverts_addition(a, n):
    assert u32_sub(u32(a + n), a) == n
    assert s32_diff(u32(a + n), a) == n


# --- sizes ---------------------------------------------------------------------------

@pytest.mark.parametrize("bad", [0, 3, 6, 1000, -4, 2.5, "8", True])
def test_ring_size_must_be_a_power_of_two(bad):
    with pytest.raises(UsageError) as e:
        check_ring_size("xsk.rx_size", bad)
    msg = str(e.value)
    assert msg.startswith("xsk.rx_size:") and "\n" not in msg


@pytest.mark.parametrize("field,kw", [("xsk.fill_size", {"fill": 100}),
                                      ("xsk.comp_size", {"comp": 0}),
                                      ("xsk.rx_size", {"rx": 12}),
                                      ("xsk.tx_size", {"tx": 2047})])
def test_pool_names_the_bad_ring(field, kw):
    with pytest.raises(UsageError, match=field):
        XskPool(Umem(16), **kw)


def test_power_of_two_sizes_accepted():
    for n in (1, 2, 64, 2048, 1 << 20):
        assert check_ring_size("x", n) == n
    r = XdpRing("rx", 8)
    assert r.ring_mask == 7


# --- kernel producer (RX, COMPLETION) across the wrap --------------------------------

def test_kernel_producer_reserve_submit_across_wrap():
    ring = XdpRing("completion", 8, start=NEAR_WRAP)
    q = XskQueue(ring)
    for k in range(5):
        assert q.prod_reserve_addr(0x1000 * k)
    assert q.cached_prod == 2  # 2**32 - 3 + 5 wrapped
    assert ring.producer == NEAR_WRAP  # nothing published yet
    q.prod_submit()
    assert ring.producer == 2
    assert ring.occupancy() == 5
    # slot of index i is i & mask: NEAR_WRAP -> slot 5, 0 -> slot 0
    assert [int(ring.addr[(NEAR_WRAP + k) & 7]) for k in range(5)] == [0, 0x1000, 0x2000,
                                                                        0x3000, 0x4000]
    assert int(ring.written_at[0]) == 0 and int(ring.written_at[5]) == NEAR_WRAP


def test_kernel_producer_full_ring_and_consumer_refresh():
    ring = XdpRing("rx", 4, start=U32_MASK)
    q = XskQueue(ring)
    for k in range(4):
        assert q.prod_reserve_desc(k, 60)
    assert not q.prod_reserve_desc(9, 60)  # -ENOBUFS: 4 outstanding
    q.prod_submit()
    user = UserRingCons(ring)
    idx, n = user.peek(3)
    assert (idx, n) == (U32_MASK, 3)
    user.release(3)
    assert ring.consumer == 2
    # the kernel's cached_cons is stale until nb_free needs more room
    assert q.nb_free(3) == 3
    assert q.cached_cons == 2
    assert q.prod_reserve_desc(10, 60)


def test_kernel_submit_n_and_cancel_n_wrap():
    ring = XdpRing("completion", 8, start=1)
    q = XskQueue(ring)
    q.prod_cancel_n(3)  # cached_prod 1 -> 2**32 - 2
    assert q.cached_prod == 2**32 - 2
    q.prod_submit_n(4)  # producer 1 -> 5 (blindly, as xsk_tx_completed does)
    assert ring.producer == 5
    assert s32_diff(ring.producer, q.cached_prod) == 7  # published past reserved


def test_nb_free_wraps_above_nentries_when_consumer_is_ahead():
    """u32 arithmetic as in C: a consumer ahead of cached_prod (only possible after a
    broken completion count) makes the free count exceed the ring size."""
    ring = XdpRing("completion", 8, start=NEAR_WRAP)
    q = XskQueue(ring)
    ring.consumer = u32(NEAR_WRAP + 5)
    q.cached_cons = NEAR_WRAP + 0  # stale
    assert q.nb_free(9) == 9  # free = 8 + 5 = 13 >= 9


# --- kernel consumer (TX, FILL) ------------------------------------------------------

def test_kernel_consumer_peek_release_publish_across_wrap():
    ring = XdpRing("fill", 4, start=2**32 - 2)
    user = UserRingProd(ring)
    idx = user.reserve(3)
    assert idx == 2**32 - 2
    for j in range(3):
        ring.write(u32(idx + j), 0x1000 * (j + 1))
    user.submit(3)
    assert ring.producer == 1
    q = XskQueue(ring)
    seen = []
    while (i := q.cons_peek()) is not None:
        seen.append(int(ring.addr[i & ring.ring_mask]))
        q.cons_release()
    assert seen == [0x1000, 0x2000, 0x3000]
    # the empty peek published the releases (consumer = cached_cons)
    assert ring.consumer == 1
    assert q.queue_empty_descs == 1


def test_kernel_consumer_publish_is_explicit_until_empty():
    ring = XdpRing("tx", 4)
    user = UserRingProd(ring)
    user.reserve(2)
    user.submit(2)
    q = XskQueue(ring)
    assert q.cons_peek() == 0
    q.cons_release()
    assert ring.consumer == 0  # local only
    q.cons_publish()
    assert ring.consumer == 1
    assert q.nb_entries(8) == 1


# --- user space (libbpf) -------------------------------------------------------------

def test_user_reserve_is_all_or_nothing_and_cancel():
    ring = XdpRing("tx", 4, start=NEAR_WRAP)
    p = UserRingProd(ring)
    assert p.reserve(5) is None
    idx = p.reserve(3)
    assert idx == NEAR_WRAP and p.cached_prod == 0
    p.cancel(1)
    assert p.cached_prod == U32_MASK
    p.submit(2)
    assert ring.producer == U32_MASK
    assert p.nb_free(2) == 2
    assert p.reserve(3) is None


def test_user_consumer_peek_refreshes_only_when_empty():
    ring = XdpRing("rx", 8, start=U32_MASK - 1)
    k = XskQueue(ring)
    c = UserRingCons(ring)
    for j in range(3):
        k.prod_reserve_desc(j, 64)
    k.prod_submit()
    assert c.peek(2) == (U32_MASK - 1, 2)
    for j in range(3):
        k.prod_reserve_desc(j, 64)
    k.prod_submit()
    assert c.peek(8) == (0, 1)  # cached view still held 1 entry: no refresh
    assert c.peek(8) == (1, 3)  # now refreshed
    c.release(6)
    assert ring.consumer == 4


# --- UMEM, pool ----------------------------------------------------------------------

def test_validate_desc():
    u = Umem(4, 4096)
    assert u.validate_desc(0, 64)
    assert u.validate_desc(4096 + 100, 3996)
    assert not u.validate_desc(0, 0)  # zero length
    assert not u.validate_desc(4000, 200)  # crosses a chunk
    assert not u.validate_desc(4 * 4096, 64)  # outside the umem
    assert not u.validate_desc(0, 64, options=1)
    assert u.frame_of(8191) == 1 and u.frame_of(4 * 4096) == -1
    assert u.frame_of(INVALID_ADDR) == -1


def test_tx_peek_reserves_completion_first_and_backpressures():
    pool = XskPool(Umem(16, 4096), fill=4, comp=2, rx=4, tx=4, start=NEAR_WRAP)
    idx = pool.user_tx.reserve(3)
    for j in range(3):
        pool.tx_ring.write(u32(idx + j), 4096 * j, 64)
    pool.user_tx.submit(3)
    assert pool.xsk_tx_peek_desc()[0] == 0
    assert pool.xsk_tx_peek_desc()[0] == 4096
    # completion ring (2 entries) full: no transmit, TX entry left in place
    assert pool.xsk_tx_peek_desc() is None
    assert pool.tx.cached_cons == u32(NEAR_WRAP + 2)
    pool.xsk_tx_release()
    assert pool.tx_ring.consumer == u32(NEAR_WRAP + 2)
    # written but unpublished until the driver reports completions
    assert pool.comp_ring.producer == NEAR_WRAP
    pool.xsk_tx_completed(2)
    assert pool.comp_ring.producer == u32(NEAR_WRAP + 2)
    idx, n = pool.user_cq.peek(8)
    assert n == 2 and [int(a) for a in pool.comp_ring.entries(idx, n)] == [0, 4096]


def test_tx_invalid_descriptor_is_skipped_and_counted():
    pool = XskPool(Umem(4, 4096), fill=4, comp=4, rx=4, tx=4)
    idx = pool.user_tx.reserve(2)
    pool.tx_ring.write(idx, 0, 0)  # zero length
    pool.tx_ring.write(idx + 1, 4096, 64)
    pool.user_tx.submit(2)
    assert pool.xsk_tx_peek_desc()[0] == 4096
    assert pool.stats.tx_invalid_descs == 1


def test_rx_ring_full_and_fill_empty_counters():
    pool = XskPool(Umem(8, 4096), fill=2, comp=2, rx=2, tx=2)
    assert pool.xp_alloc() is None
    assert pool.stats.rx_fill_ring_empty_descs == 1
    assert pool.xsk_rcv_zc(0, 64) and pool.xsk_rcv_zc(4096, 64)
    assert not pool.xsk_rcv_zc(8192, 64)
    assert pool.stats.rx_ring_full == 1
    pool.xsk_flush()
    assert pool.rx_ring.producer == 2


def test_costs_modes():
    from rxlab.afxdp.xsk import xsk_costs

    zc, cp = xsk_costs("zerocopy"), xsk_costs("copy")
    assert zc.kernel_ns(1514) == zc.kernel_ns(64)  # no per-byte cost without a copy
    assert cp.kernel_ns(1514) > cp.kernel_ns(64) > zc.kernel_ns(64)
    assert all(zc.sources.values()) and all(cp.sources.values())
    with pytest.raises(UsageError, match="xsk.mode"):
        xsk_costs("turbo")
