"""Ring-invariant checker for an AF_XDP socket and its ixgbe TX ring.

After every step (one kernel or user-space operation) :meth:`RingChecker.after` checks:

``cq_producer_past_reserved``
    The COMPLETION ring's published producer never passes the kernel's reserved/written
    position (``ring.producer <= cached_prod``, 10.2; before the 2019 rework
    ``prod_tail <= prod_head``). One record per step that pushes it further ahead.
``unwritten_completion``
    A newly published completion entry whose slot was not written for that index in
    this lap (user space reads a stale or zero address). One record per entry.
``double_completion``
    A newly published completion names a frame that was not posted-and-sent at the NIC
    before the step, or names it more often than it was in flight (no frame completed
    twice). One record per entry.
``clean_past_next_to_use``
    The driver cleaned a descriptor that was not posted (``next_to_clean`` walked past
    ``next_to_use``). One record per descriptor.
``ring_overfull``
    A ring holds more than ``nentries`` published entries (``producer - consumer``).
    One record when it starts.
``ownership``
    Every UMEM frame is owned by exactly one party: ``user`` (the application's free
    pool), ``fill`` (FILL ring), ``kernel_rx`` (driver RX descriptors), ``rx`` (RX
    ring), ``tx`` (TX ring), ``nic`` (posted TX descriptors) or ``completion``
    (published, not yet reaped). One record per new extra holder of a frame and per
    frame that becomes owned by nobody.

The first violation is kept with the step number and the action that caused it.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np

from rxlab.afxdp.ixgbe_tx import IXGBE_TXD_STAT_DD
from rxlab.afxdp.xsk import INVALID_ADDR, s32_diff

PARTIES = ("user", "fill", "kernel_rx", "rx", "tx", "nic", "completion")
KINDS = ("cq_producer_past_reserved", "unwritten_completion", "double_completion",
         "clean_past_next_to_use", "ring_overfull", "ownership")


@dataclass(frozen=True)
class Violation:
    step: int
    action: str
    kind: str
    detail: str

    def __str__(self) -> str:
        return f"step {self.step} ({self.action}): {self.kind}: {self.detail}"


class RingChecker:
    """Checks a host (see :class:`rxlab.afxdp.forward.ForwardingHost`) after each step.

    The host provides ``pool`` (:class:`rxlab.afxdp.xsk.XskPool`), ``txr``
    (:class:`rxlab.afxdp.ixgbe_tx.IxgbeTxRing`), ``umem`` and ``ownership()`` -> {party:
    array of frame numbers}.
    """

    def __init__(self, host):
        self.host = host
        self.steps = 0
        self.first: Violation | None = None
        self.count = 0
        self.by_kind: Counter = Counter()
        self.violating_steps = 0
        nframes = host.umem.nframes
        self._dev = np.zeros(nframes, dtype=np.int64)  # |holders - 1| per frame
        # a socket carried over from earlier runs starts with its excess (ForwardingHost)
        self._cq_excess = max(s32_diff(host.pool.comp_ring.producer, host.pool.cq.cached_prod), 0)
        self._overfull: set[str] = set()
        self._stale_seen = host.txr.stale_cleans
        self._pre_prod = host.pool.comp_ring.producer
        self._pre_done = np.zeros(nframes, dtype=np.int64)

    # -- hooks ----------------------------------------------------------------------
    def before(self) -> None:
        """Snapshot what may legitimately complete in the coming step."""
        h = self.host
        txr = h.txr
        self._pre_prod = h.pool.comp_ring.producer
        done = txr.shadow_posted & txr.shadow_sent & ((txr.status & IXGBE_TXD_STAT_DD) != 0)
        frames = h.umem.frames_of(txr.buffer_addr[done])
        self._pre_done = np.bincount(frames[frames >= 0], minlength=h.umem.nframes)

    def after(self, action: str) -> list[Violation]:
        self.steps += 1
        found: list[Violation] = []
        h = self.host
        pool = h.pool
        ring = pool.comp_ring

        def add(kind: str, detail: str, n: int = 1) -> None:
            if n <= 0:
                return
            v = Violation(self.steps, action, kind, detail)
            found.append(v)
            self.count += n
            self.by_kind[kind] += n
            if self.first is None:
                self.first = v

        # 4. descriptors cleaned that were not posted
        stale = h.txr.stale_cleans - self._stale_seen
        self._stale_seen = h.txr.stale_cleans
        if stale > 0:
            add("clean_past_next_to_use",
                f"cleaned {stale} descriptor(s) never posted (stale DD from an earlier lap; "
                f"first slot {h.txr.stale_slots[0] if h.txr.stale_slots else '?'}); "
                f"next_to_clean={h.txr.next_to_clean} next_to_use={h.txr.next_to_use}",
                stale)

        # 1. published completion producer vs reserved/written position
        excess = s32_diff(ring.producer, pool.cq.cached_prod)
        if excess > self._cq_excess:
            add("cq_producer_past_reserved",
                f"completion producer {ring.producer} is {excess} past the reserved "
                f"cached_prod {pool.cq.cached_prod}")
        self._cq_excess = max(excess, 0)

        # 2./3. entries published by this step
        n_new = s32_diff(ring.producer, self._pre_prod)
        if n_new > 0:
            k = min(n_new, ring.nentries)
            idx = (self._pre_prod + np.arange(k, dtype=np.int64)) & 0xFFFFFFFF
            slots = idx & ring.ring_mask
            unwritten = ring.written_at[slots] != idx
            nu = int(unwritten.sum())
            if nu:
                i0 = int(idx[unwritten][0])
                add("unwritten_completion",
                    f"{nu} of {n_new} completions published at indices never written in "
                    f"this lap (first index {i0}, slot holds "
                    f"{_fmt_addr(int(ring.addr[i0 & ring.ring_mask]))})", nu)
            written = ~unwritten
            frames = h.umem.frames_of(ring.addr[slots[written]])
            frames = frames[frames >= 0]
            got = np.bincount(frames, minlength=h.umem.nframes)
            extra = np.maximum(got - self._pre_done, 0)
            nd = int(extra.sum())
            if nd:
                f = int(np.flatnonzero(extra)[0])
                add("double_completion",
                    f"{nd} completion(s) of frames not in flight at the NIC "
                    f"(first: frame {f})", nd)

        # 5. ring occupancy
        for name, r in pool.rings().items():
            occ = s32_diff(r.producer, r.consumer)
            if occ > r.nentries or occ < 0:
                if name not in self._overfull:
                    self._overfull.add(name)
                    add("ring_overfull",
                        f"{name} ring producer {r.producer} - consumer {r.consumer} = {occ} "
                        f"outside [0, {r.nentries}]")
            else:
                self._overfull.discard(name)

        # 6. ownership
        parts = h.ownership()
        allf = np.concatenate([p[p >= 0] for p in parts.values()])
        counts = np.bincount(allf, minlength=h.umem.nframes)
        dev = np.abs(counts - 1)
        grew = np.maximum(dev - self._dev, 0)
        self._dev = dev
        nb = int(grew.sum())
        if nb:
            f = int(np.flatnonzero(grew)[0])
            holders = [p for p, arr in parts.items() for _ in range(int((arr == f).sum()))]
            desc = ", ".join(holders) if holders else "nobody (lost)"
            add("ownership", f"{nb} new extra or missing holding(s) of frames "
                             f"(first: frame {f} held by {desc})", nb)

        if found:
            self.violating_steps += 1
        return found

    def ownership_summary(self) -> dict:
        """Frames owned by nobody and by more than one party, right now."""
        parts = self.host.ownership()
        allf = np.concatenate([p[p >= 0] for p in parts.values()])
        counts = np.bincount(allf, minlength=self.host.umem.nframes)
        return {"frames_lost": int((counts == 0).sum()),
                "frames_multi_owned": int((counts > 1).sum()),
                "by_party": {p: int((a >= 0).sum()) for p, a in parts.items()}}


def _fmt_addr(a: int) -> str:
    return "UINT64_MAX (consumed mark)" if a == INVALID_ADDR else f"address {a:#x}"
