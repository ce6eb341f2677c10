"""ixgbe's AF_XDP zero-copy TX ring: ``ixgbe_xmit_zc`` and ``ixgbe_clean_xdp_tx_irq``.

Mirrors ``drivers/net/ethernet/intel/ixgbe/ixgbe_xsk.c``, in two variants of the clean
routine:

``ixgbe-2019``
    Before upstream commit bf280c0387eb "ixgbe: fix double clean of tx descriptors with
    xdp" (Ilya Maximets, Aug 2019; Fixes 8221c5eba8c1): ``do { ... } while (--budget)``
    with ``budget = tx.work_limit``, stopping only on a descriptor without DD. The DD bit
    is never cleared after cleaning (it is only overwritten when the slot is re-posted),
    so when fewer than ``budget`` descriptors are in flight the loop walks past
    ``next_to_use`` into slots whose DD is still set from an earlier lap, over-counts
    ``xsk_frames``, moves ``next_to_clean`` past ``next_to_use``, and
    ``xsk_tx_completed(pool, xsk_frames)`` pushes the COMPLETION ring's published
    producer past what was reserved and written.
``fixed``
    The loop is ``while (ntc != ntu)``: only descriptors posted to hardware.

The hardware side (:func:`hw_transmit`) sends posted descriptors from its head (TDH) up
to the tail (TDT) the driver wrote, and writes DD back into each (EOP|RS on every
descriptor).

Simulation shadows (not kernel state): ``shadow_posted[i]`` is True from the post of slot
``i`` until a clean consumes it, ``shadow_sent[i]`` once the NIC has sent it, and
``shadow_pid[i]`` the packet the application meant to send; ``stale_cleans`` counts
slots a clean consumed that were not posted (the double clean).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rxlab.afxdp.xsk import XskPool
from rxlab.errors import UsageError

#: ixgbe.h: default and limits of the TX descriptor ring.
IXGBE_DEFAULT_TXD = 512
IXGBE_MIN_TXD = 64
IXGBE_MAX_TXD = 4096
#: ixgbe.h: ``q_vector->tx.work_limit`` default (descriptors per clean / per xmit_zc).
IXGBE_DEFAULT_TX_WORK = 256
#: ixgbe_type.h: "descriptor done" bit of ``wb.status`` (overlaps ``read.olinfo_status``).
IXGBE_TXD_STAT_DD = 0x1
#: ixgbe_type.h: payload length position in ``olinfo_status`` (bit 0, DD, stays clear).
IXGBE_ADVTXD_PAYLEN_SHIFT = 14

VARIANTS = ("ixgbe-2019", "fixed")


def check_variant(variant: str) -> str:
    if variant not in VARIANTS:
        raise UsageError(f"driver.variant: unknown ixgbe TX clean variant {variant!r}; "
                         f"use one of {', '.join(VARIANTS)}")
    return variant


class IxgbeTxRing:
    """The XDP TX ring of one queue: descriptors, ``tx_buffer_info`` and the indices.

    ``next_to_use`` / ``next_to_clean`` are slot numbers in ``[0, count)`` (u16 in the
    driver), not free-running. ``hw_head`` is the NIC's TDH, ``tail`` the TDT the driver
    last wrote.
    """

    def __init__(self, count: int = IXGBE_DEFAULT_TXD):
        count = int(count)
        if count < 2:
            raise UsageError(f"driver.tx_descs: need at least 2 descriptors, got {count}")
        self.count = count
        self.next_to_use = 0
        self.next_to_clean = 0
        self.tail = 0
        self.hw_head = 0
        # descriptor memory (dma_alloc_coherent: zeroed, so DD = 0 before the first lap)
        self.buffer_addr = np.zeros(count, dtype=np.uint64)
        self.status = np.zeros(count, dtype=np.uint32)  # wb.status == read.olinfo_status
        # tx_buffer_info
        self.bytecount = np.zeros(count, dtype=np.int64)
        self.gso_segs = np.zeros(count, dtype=np.int64)
        self.xdpf = np.zeros(count, dtype=bool)  # an XDP_TX/redirect frame (never here)
        # simulation shadows
        self.shadow_posted = np.zeros(count, dtype=bool)
        self.shadow_sent = np.zeros(count, dtype=bool)
        self.shadow_pid = np.full(count, -1, dtype=np.int64)
        self.shadow_post_time = np.zeros(count, dtype=np.int64)
        # statistics
        self.packets = 0
        self.bytes = 0
        self.stale_cleans = 0
        self.stale_slots: list[int] = []  # slots of the stale cleans of the last clean

    def in_flight(self) -> int:
        """Descriptors in ``[next_to_clean, next_to_use)`` (what the driver believes)."""
        return (self.next_to_use - self.next_to_clean) % self.count

    def posted_frames(self, umem) -> np.ndarray:
        """Frames held by posted descriptors (ground truth, from the shadow)."""
        return umem.frames_of(self.buffer_addr[self.shadow_posted])


def ixgbe_desc_unused(ring: IxgbeTxRing) -> int:
    """``ixgbe_desc_unused``: ``((ntc > ntu) ? 0 : count) + ntc - ntu - 1``."""
    ntc, ntu = ring.next_to_clean, ring.next_to_use
    return (0 if ntc > ntu else ring.count) + ntc - ntu - 1


@dataclass
class XmitResult:
    posted: int
    work_done: bool


def ixgbe_xmit_zc(ring: IxgbeTxRing, pool: XskPool, budget: int = IXGBE_DEFAULT_TX_WORK,
                  now: int = 0) -> XmitResult:
    """``ixgbe_xmit_zc``: post up to ``budget`` AF_XDP descriptors while free ones exist.

    Each posted descriptor has its completion slot reserved (and written) by
    ``xsk_tx_peek_desc``; posting rewrites ``olinfo_status`` (length << 14), which
    clears DD. The tail (TDT) is bumped and the TX consumer published once at the end.
    """
    posted = 0
    work_done = True
    while budget > 0:  # while (budget-- > 0), budget an unsigned int
        budget -= 1
        if ixgbe_desc_unused(ring) == 0:
            work_done = False
            break
        desc = pool.xsk_tx_peek_desc()
        if desc is None:
            break
        addr, length, pid = desc
        i = ring.next_to_use
        ring.bytecount[i] = length
        ring.gso_segs[i] = 1
        ring.xdpf[i] = False
        ring.buffer_addr[i] = addr
        ring.status[i] = length << IXGBE_ADVTXD_PAYLEN_SHIFT  # DD (bit 0) now clear
        ring.shadow_posted[i] = True
        ring.shadow_sent[i] = False
        ring.shadow_pid[i] = pid
        ring.shadow_post_time[i] = now
        posted += 1
        ring.next_to_use = i + 1 if i + 1 < ring.count else 0
    else:
        # The failing test "budget-- > 0" still decrements: 0 wraps to UINT_MAX, so a call
        # that posted its whole budget returns work_done (true), not "more work" (Linux
        # 5.2 ixgbe_xsk.c; the "negative overflow" Jason Xing's 2025 ixgbe_xmit_zc fix
        # names).
        budget = 0xFFFFFFFF
    if posted:
        ring.tail = ring.next_to_use  # ixgbe_xdp_ring_update_tail
        pool.xsk_tx_release()  # xsk_umem_consume_tx_done / xsk_tx_release
    # "return !!budget && work_done": 0 only when a break came on the budget's last unit
    return XmitResult(posted, budget > 0 and work_done)


@dataclass
class CleanResult:
    """``xsk_frames`` completed (every descriptor the loop consumed), ``stale`` of them
    never posted, ``posted`` by the ``ixgbe_xmit_zc`` that follows, and ``done``: the
    function's return value, False asks ``ixgbe_poll`` to return the whole NAPI budget
    and be polled again."""

    xsk_frames: int
    stale: int
    posted: int
    done: bool


def ixgbe_clean_xdp_tx_irq(ring: IxgbeTxRing, pool: XskPool, variant: str = "fixed",
                           work_limit: int = IXGBE_DEFAULT_TX_WORK,
                           now: int = 0) -> CleanResult:
    """``ixgbe_clean_xdp_tx_irq``: reap descriptors with DD, report them to the pool,
    then post new ones with :func:`ixgbe_xmit_zc` (``work_limit`` of each).

    ``variant="ixgbe-2019"`` runs the pre-fix loop (``do {...} while (--budget)``, no
    bound at ``next_to_use``) and returns ``budget > 0 && xmit_done``: a walk that used
    the whole ``work_limit`` (stale slots included) reports unfinished work, so NAPI polls
    again. ``"fixed"`` stops at ``next_to_use`` and returns ``ixgbe_xmit_zc``'s result
    (upstream bf280c0387eb).
    """
    ntc = ring.next_to_clean
    ntu = ring.next_to_use
    xsk_frames = 0
    ring.stale_slots = []
    check_variant(variant)
    if int(work_limit) < 1:
        raise UsageError(f"driver.work_limit: must be >= 1, got {work_limit}")
    if variant == "fixed":
        while ntc != ntu:  # only descriptors posted to hardware
            if not ring.status[ntc] & IXGBE_TXD_STAT_DD:
                break
            xsk_frames += _clean_one(ring, ntc)
            ntc = ntc + 1 if ntc + 1 < ring.count else 0
        budget = 1  # the fixed function has no budget: its result is xmit_zc's alone
    else:
        budget = int(work_limit)  # unsigned int budget = q_vector->tx.work_limit
        while True:  # do { ... } while (likely(budget)): no bound at next_to_use
            if not ring.status[ntc] & IXGBE_TXD_STAT_DD:
                break
            xsk_frames += _clean_one(ring, ntc)
            ntc = ntc + 1 if ntc + 1 < ring.count else 0
            budget -= 1
            if budget == 0:
                break
    stale = len(ring.stale_slots)
    ring.next_to_clean = ntc
    ring.stale_cleans += stale
    if xsk_frames:
        pool.xsk_tx_completed(xsk_frames)
    xr = ixgbe_xmit_zc(ring, pool, work_limit, now)
    # 2019: "return budget > 0 && xmit_done"; fixed: "return ixgbe_xmit_zc(...)"
    return CleanResult(xsk_frames, stale, xr.posted, budget > 0 and xr.work_done)


def _clean_one(ring: IxgbeTxRing, i: int) -> int:
    """Account one descriptor; 1 if it was an AF_XDP frame (``xsk_frames++``)."""
    ring.bytes += int(ring.bytecount[i])
    ring.packets += int(ring.gso_segs[i])
    is_xsk = not ring.xdpf[i]
    ring.xdpf[i] = False  # tx_bi->xdpf = NULL; note: status (DD) is NOT cleared
    if not ring.shadow_posted[i]:
        ring.stale_slots.append(i)  # DD left over from an earlier lap: a double clean
    ring.shadow_posted[i] = False
    return 1 if is_xsk else 0


def hw_transmit(ring: IxgbeTxRing, n: int | None = None) -> list[int]:
    """The NIC sends up to ``n`` descriptors from TDH towards TDT, writing DD back.

    Returns the slots sent, in order. The NIC never passes the tail the driver wrote.
    """
    sent = []
    while ring.hw_head != ring.tail and (n is None or len(sent) < n):
        i = ring.hw_head
        ring.status[i] |= IXGBE_TXD_STAT_DD
        ring.shadow_sent[i] = True
        sent.append(i)
        ring.hw_head = i + 1 if i + 1 < ring.count else 0
    return sent


def hw_pending(ring: IxgbeTxRing) -> int:
    """Descriptors between TDH and TDT (handed to the NIC, not yet sent)."""
    return (ring.tail - ring.hw_head) % ring.count
