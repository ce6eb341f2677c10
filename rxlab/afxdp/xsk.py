"""AF_XDP: the UMEM and the FILL, RX, TX and COMPLETION rings.

Mirrors ``net/xdp/xsk_queue.h``, ``net/xdp/xsk_queue.c`` and ``net/xdp/xsk.c`` (Linux 6.19)
and the user-space side of libbpf's ``xsk.h`` (``xsk_ring_prod__reserve`` / ``__submit``,
``xsk_ring_cons__peek`` / ``__release``).

A ring is one shared header (:class:`XdpRing`: ``producer``, ``consumer``, ``flags`` and
the entry array, as mmap()ed by both sides) plus a private view per side with its own
cached indices: :class:`XskQueue` is the kernel's ``struct xsk_queue`` (``cached_prod``,
``cached_cons``), :class:`UserRingProd` / :class:`UserRingCons` are libbpf's
``struct xsk_ring_prod`` / ``xsk_ring_cons``. The kernel produces RX and COMPLETION and
consumes TX and FILL; user space does the opposite.

Indices are free-running u32 (never masked when stored); the slot of index ``i`` is
``i & ring_mask``; occupancy is ``producer - consumer`` modulo 2**32. All index arithmetic
below goes through :func:`u32` / :func:`u32_sub` / :func:`s32_diff` (explicit masks), so a
ring started at ``2**32 - 3`` wraps exactly as the kernel's does.

Simulation-only shadows, which the kernel does not have, are named ``shadow_*`` or
``written_at``: they let :mod:`rxlab.afxdp.invariants` tell a never-written entry from a
written one.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from rxlab.errors import UsageError

U32_MASK = 0xFFFFFFFF

#: ``XDP_RING_NEED_WAKEUP`` (include/uapi/linux/if_xdp.h): bit in ``xdp_ring.flags``.
XDP_RING_NEED_WAKEUP = 1
#: mmap page offsets of the four rings (include/uapi/linux/if_xdp.h).
XDP_PGOFF_RX_RING = 0
XDP_PGOFF_TX_RING = 0x80000000
XDP_UMEM_PGOFF_FILL_RING = 0x100000000
XDP_UMEM_PGOFF_COMPLETION_RING = 0x180000000
#: TX descriptors taken from one socket per round of ``xsk_tx_peek_desc`` (net/xdp/xsk.c).
MAX_PER_SOCKET_BUDGET = 32
#: libbpf defaults (tools/lib/bpf/xsk.h, used by OVS lib/netdev-afxdp.c).
XSK_UMEM__DEFAULT_FRAME_SHIFT = 12
XSK_UMEM__DEFAULT_FRAME_SIZE = 1 << XSK_UMEM__DEFAULT_FRAME_SHIFT  # bytes
XSK_RING_PROD__DEFAULT_NUM_DESCS = 2048
XSK_RING_CONS__DEFAULT_NUM_DESCS = 2048
#: ``UINT64_MAX``: OVS marks a consumed completion entry with it ("Mark as pushed").
INVALID_ADDR = (1 << 64) - 1

RING_NAMES = ("fill", "rx", "tx", "completion")


# --- u32 index arithmetic ------------------------------------------------------------

def u32(x: int) -> int:
    """``x`` modulo 2**32: a free-running ring index after ``+=``/``-=``."""
    return x & U32_MASK


def u32_sub(a: int, b: int) -> int:
    """``a - b`` in u32 (the kernel's ``producer - consumer``), in ``[0, 2**32)``."""
    return (a - b) & U32_MASK


def s32_diff(a: int, b: int) -> int:
    """``(int)(a - b)`` on u32 counters: "how far is ``a`` ahead of ``b``", signed.

    Same arithmetic as :func:`rxlab.kernel.hashfn.s32_diff` (which is jitted); this
    pure-Python twin avoids a numba dispatch per ring operation.
    """
    d = (a - b) & U32_MASK
    return d - 0x100000000 if d >= 0x80000000 else d


def check_ring_size(field_name: str, entries) -> int:
    """Validate a ring size as ``xsk_init_queue`` does: non-zero power of two.

    Raises :class:`rxlab.errors.UsageError` naming ``field_name`` (the kernel answers
    ``-EINVAL``).
    """
    if isinstance(entries, bool) or not isinstance(entries, (int, np.integer)):
        raise UsageError(f"{field_name}: ring size must be an integer power of two, "
                         f"got {entries!r}")
    n = int(entries)
    if n <= 0 or n & (n - 1):
        raise UsageError(f"{field_name}: ring size must be a non-zero power of two "
                         f"(xsk_init_queue: -EINVAL), got {n}")
    if n > 1 << 31:
        raise UsageError(f"{field_name}: ring size {n} too large (at most 2**31 entries)")
    return n


# --- the shared ring -----------------------------------------------------------------

class XdpRing:
    """The mmap()ed ``struct xdp_ring`` header plus its entry array.

    ``producer`` and ``consumer`` are the only fields both sides see. FILL and COMPLETION
    entries are u64 umem addresses (``addr``); RX and TX entries are ``struct xdp_desc``
    (``addr``, ``len``, ``options``). ``written_at[slot]`` (simulation shadow) is the
    free-running index that last wrote the slot, -1 if never written.
    """

    def __init__(self, name: str, entries: int, *, start: int = 0, field_name: str = ""):
        self.name = name
        self.nentries = check_ring_size(field_name or f"{name}.entries", entries)
        self.ring_mask = self.nentries - 1
        self.producer = u32(start)
        self.consumer = u32(start)
        self.flags = 0
        # Ring memory is zeroed when the kernel allocates it: a never-written
        # COMPLETION entry reads as address 0.
        self.addr = np.zeros(self.nentries, dtype=np.uint64)
        self.len = np.zeros(self.nentries, dtype=np.uint32)
        self.options = np.zeros(self.nentries, dtype=np.uint32)
        self.written_at = np.full(self.nentries, -1, dtype=np.int64)
        self.shadow_pid = np.full(self.nentries, -1, dtype=np.int64)  # packet id carried

    def slot(self, idx: int) -> int:
        return idx & self.ring_mask

    def write(self, idx: int, addr: int, length: int = 0, options: int = 0,
              pid: int = -1) -> None:
        s = idx & self.ring_mask
        self.addr[s] = addr
        self.len[s] = length
        self.options[s] = options
        self.written_at[s] = idx
        self.shadow_pid[s] = pid

    def occupancy(self) -> int:
        """``producer - consumer`` modulo 2**32 (entries published and not consumed)."""
        return u32_sub(self.producer, self.consumer)

    def entries(self, first: int, n: int) -> np.ndarray:
        """Addresses at indices ``first .. first + n - 1`` (wrapping), as uint64."""
        if n <= 0:
            return np.zeros(0, dtype=np.uint64)
        n = min(n, self.nentries)
        slots = (first + np.arange(n, dtype=np.int64)) & self.ring_mask
        return self.addr[slots]

    def __repr__(self) -> str:
        return (f"XdpRing({self.name}, nentries={self.nentries}, producer={self.producer}, "
                f"consumer={self.consumer})")


# --- kernel side: struct xsk_queue ---------------------------------------------------

class XskQueue:
    """The kernel's private ``struct xsk_queue`` over one :class:`XdpRing`.

    Producer operations (RX, COMPLETION) follow net/xdp/xsk_queue.h: ``nb_free``,
    ``prod_reserve_addr`` / ``prod_reserve_desc`` (write the entry, ``cached_prod += 1``,
    not yet visible), ``prod_submit`` (``producer = cached_prod``), ``prod_submit_n``
    (``producer += n``), ``prod_cancel_n``. Consumer operations (TX, FILL) follow the same file:
    ``cons_peek`` (refreshes ``cached_prod`` and publishes pending releases only when the
    cached view is empty), ``cons_release[_n]`` (local), ``cons_publish``
    (``__xskq_cons_release``: ``consumer = cached_cons``), ``nb_entries``.
    """

    def __init__(self, ring: XdpRing):
        self.ring = ring
        self.nentries = ring.nentries
        self.ring_mask = ring.ring_mask
        self.cached_prod = ring.producer
        self.cached_cons = ring.consumer
        self.invalid_descs = 0
        self.queue_empty_descs = 0

    # producer side (kernel writes RX and COMPLETION)
    def nb_free(self, want: int) -> int:
        """Free slots, at most ``want``. u32 arithmetic as in C: if the consumer is
        *ahead* of ``cached_prod`` (only after a broken completion count) the result
        wraps to more than ``nentries``."""
        free = u32(self.nentries - u32_sub(self.cached_prod, self.cached_cons))
        if free >= want:
            return want
        self.cached_cons = self.ring.consumer  # refresh only when needed
        free = u32(self.nentries - u32_sub(self.cached_prod, self.cached_cons))
        return min(free, want)

    def prod_reserve_addr(self, addr: int, pid: int = -1) -> bool:
        """``xskq_prod_reserve_addr``: False means -ENOSPC (no slot)."""
        if self.nb_free(1) == 0:
            return False
        self.ring.write(self.cached_prod, addr, 0, 0, pid)
        self.cached_prod = u32(self.cached_prod + 1)
        return True

    def prod_reserve_desc(self, addr: int, length: int, options: int = 0,
                          pid: int = -1) -> bool:
        """``xskq_prod_reserve_desc``: False means -ENOBUFS (RX ring full)."""
        if self.nb_free(1) == 0:
            return False
        self.ring.write(self.cached_prod, addr, length, options, pid)
        self.cached_prod = u32(self.cached_prod + 1)
        return True

    def prod_submit(self) -> None:
        """``xskq_prod_submit``: publish everything written (store-release)."""
        self.ring.producer = self.cached_prod

    def prod_submit_n(self, n: int) -> None:
        """``xskq_prod_submit_n``: ``producer += n``. Correct only if ``n`` entries
        written and not yet published exist; nothing here checks that (as in the kernel)."""
        self.ring.producer = u32(self.ring.producer + n)

    def prod_cancel_n(self, n: int) -> None:
        self.cached_prod = u32(self.cached_prod - n)

    # consumer side (kernel reads TX and FILL)
    def cons_peek(self) -> int | None:
        """Index of the next entry to read, or None if the ring is empty."""
        if self.cached_cons == self.cached_prod:
            self.ring.consumer = self.cached_cons  # publish releases
            self.cached_prod = self.ring.producer  # READ_ACQUIRE
        if self.cached_cons != self.cached_prod:
            return self.cached_cons
        self.queue_empty_descs += 1
        return None

    def nb_entries(self, want: int) -> int:
        entries = u32_sub(self.cached_prod, self.cached_cons)
        if entries >= want:
            return want
        self.cached_prod = self.ring.producer
        return min(u32_sub(self.cached_prod, self.cached_cons), want)

    def cons_release(self) -> None:
        self.cached_cons = u32(self.cached_cons + 1)

    def cons_release_n(self, n: int) -> None:
        self.cached_cons = u32(self.cached_cons + n)

    def cons_publish(self) -> None:
        """``__xskq_cons_release``: make the local releases visible."""
        self.ring.consumer = self.cached_cons


# --- user-space side: libbpf xsk_ring_prod / xsk_ring_cons --------------------------

class UserRingProd:
    """libbpf ``struct xsk_ring_prod`` (user space produces FILL and TX).

    ``cached_cons`` is kept ``nentries`` ahead of the consumer, as libbpf does, so
    ``cached_cons - cached_prod`` is the free space.
    """

    def __init__(self, ring: XdpRing):
        self.ring = ring
        self.size = ring.nentries
        self.cached_prod = ring.producer
        self.cached_cons = u32(ring.consumer + ring.nentries)

    def nb_free(self, nb: int) -> int:
        free = u32_sub(self.cached_cons, self.cached_prod)
        if free >= nb:
            return free
        self.cached_cons = u32(self.ring.consumer + self.size)
        return u32_sub(self.cached_cons, self.cached_prod)

    def reserve(self, nb: int) -> int | None:
        """``xsk_ring_prod__reserve``: all ``nb`` slots or none; returns the first index."""
        if self.nb_free(nb) < nb:
            return None
        idx = self.cached_prod
        self.cached_prod = u32(self.cached_prod + nb)
        return idx

    def submit(self, nb: int) -> None:
        """``xsk_ring_prod__submit``: ``producer += nb`` (store-release)."""
        self.ring.producer = u32(self.ring.producer + nb)

    def cancel(self, nb: int) -> None:
        self.cached_prod = u32(self.cached_prod - nb)


class UserRingCons:
    """libbpf ``struct xsk_ring_cons`` (user space consumes RX and COMPLETION)."""

    def __init__(self, ring: XdpRing):
        self.ring = ring
        self.cached_prod = ring.producer
        self.cached_cons = ring.consumer

    def nb_avail(self, nb: int) -> int:
        entries = u32_sub(self.cached_prod, self.cached_cons)
        if entries == 0:
            self.cached_prod = self.ring.producer
            entries = u32_sub(self.cached_prod, self.cached_cons)
        return min(entries, nb)

    def peek(self, nb: int) -> tuple[int, int]:
        """``xsk_ring_cons__peek``: ``(first index, count)``; advances ``cached_cons``."""
        n = self.nb_avail(nb)
        idx = self.cached_cons
        if n > 0:
            self.cached_cons = u32(self.cached_cons + n)
        return idx, n

    def release(self, nb: int) -> None:
        """``xsk_ring_cons__release``: ``consumer += nb`` (store-release)."""
        self.ring.consumer = u32(self.ring.consumer + nb)


# --- UMEM ---------------------------------------------------------------------------

class Umem:
    """``struct xdp_umem`` / ``xsk_buff_pool`` in aligned mode: ``nframes`` chunks of
    ``frame_size`` bytes. Frame ``f`` starts at address ``f * frame_size``."""

    def __init__(self, nframes: int, frame_size: int = XSK_UMEM__DEFAULT_FRAME_SIZE):
        check_ring_size("umem.frame_size", frame_size)  # aligned mode: power of two
        if int(nframes) < 1:
            raise UsageError(f"umem.frames: need at least one frame, got {nframes}")
        self.nframes = int(nframes)
        self.frame_size = int(frame_size)
        self.frame_shift = self.frame_size.bit_length() - 1
        self.size = self.nframes * self.frame_size
        self.chunk_mask = ~(self.frame_size - 1)

    def addr_of(self, frame: int) -> int:
        return int(frame) << self.frame_shift

    def frame_of(self, addr: int) -> int:
        """Frame index of ``addr``, or -1 if ``addr`` is outside the umem."""
        a = int(addr)
        return a >> self.frame_shift if 0 <= a < self.size else -1

    def frames_of(self, addrs: np.ndarray) -> np.ndarray:
        """Vector form of :meth:`frame_of` over uint64 addresses (-1 when outside)."""
        a = np.asarray(addrs, dtype=np.uint64)
        ok = a < np.uint64(self.size)
        out = np.full(a.shape, -1, dtype=np.int64)
        out[ok] = (a[ok] >> np.uint64(self.frame_shift)).astype(np.int64)
        return out

    def validate_desc(self, addr: int, length: int, options: int = 0) -> bool:
        """``xp_validate_desc`` (aligned mode): non-zero length, inside the umem, within
        one chunk, no unknown option bits."""
        if length == 0 or options != 0:
            return False
        if addr < 0 or addr + length > self.size:
            return False
        return (addr & self.chunk_mask) == ((addr + length - 1) & self.chunk_mask)


# --- the pool: one socket bound to one queue -----------------------------------------

@dataclass
class XskStats:
    """``XDP_STATISTICS`` (getsockopt) plus the ring counters behind them."""

    rx_dropped: int = 0
    rx_ring_full: int = 0
    rx_fill_ring_empty_descs: int = 0
    tx_invalid_descs: int = 0
    tx_ring_empty_descs: int = 0


class XskPool:
    """One AF_XDP socket on one queue with its UMEM (``xsk_buff_pool``): the four rings,
    each with the kernel's :class:`XskQueue` and user space's libbpf view.

    Kernel entry points keep the kernel's names: :meth:`xsk_tx_peek_desc`,
    :meth:`xsk_tx_release`, :meth:`xsk_tx_completed`, :meth:`xp_alloc`,
    :meth:`xsk_rcv_zc`, :meth:`xsk_flush`.
    """

    def __init__(self, umem: Umem, *, fill: int = XSK_RING_PROD__DEFAULT_NUM_DESCS,
                 comp: int = XSK_RING_CONS__DEFAULT_NUM_DESCS,
                 rx: int = XSK_RING_CONS__DEFAULT_NUM_DESCS,
                 tx: int = XSK_RING_PROD__DEFAULT_NUM_DESCS, start: int = 0):
        self.umem = umem
        self.fill_ring = XdpRing("fill", fill, start=start, field_name="xsk.fill_size")
        self.comp_ring = XdpRing("completion", comp, start=start, field_name="xsk.comp_size")
        self.rx_ring = XdpRing("rx", rx, start=start, field_name="xsk.rx_size")
        self.tx_ring = XdpRing("tx", tx, start=start, field_name="xsk.tx_size")
        # kernel views
        self.fq = XskQueue(self.fill_ring)
        self.cq = XskQueue(self.comp_ring)
        self.rx = XskQueue(self.rx_ring)
        self.tx = XskQueue(self.tx_ring)
        # user-space (libbpf) views
        self.user_fq = UserRingProd(self.fill_ring)
        self.user_cq = UserRingCons(self.comp_ring)
        self.user_rx = UserRingCons(self.rx_ring)
        self.user_tx = UserRingProd(self.tx_ring)
        self.stats = XskStats()

    def rings(self) -> dict[str, XdpRing]:
        return {"fill": self.fill_ring, "rx": self.rx_ring, "tx": self.tx_ring,
                "completion": self.comp_ring}

    # TX (kernel consumes TX, produces COMPLETION)
    def xsk_tx_peek_desc(self) -> tuple[int, int, int] | None:
        """Next valid TX descriptor as ``(addr, len, pid)``, or None.

        For each descriptor it first reserves **and writes** the address into the
        COMPLETION ring (``cached_prod += 1``, unpublished): no completion slot, no
        transmit (the TX back-pressure). Then releases the TX entry locally. Invalid
        descriptors are counted and skipped. Simplification: one socket per pool, so
        the ``MAX_PER_SOCKET_BUDGET`` round-robin never switches sockets.
        """
        while True:
            idx = self.tx.cons_peek()
            if idx is None:
                self.stats.tx_ring_empty_descs += 1
                return None
            s = idx & self.tx_ring.ring_mask
            addr = int(self.tx_ring.addr[s])
            length = int(self.tx_ring.len[s])
            pid = int(self.tx_ring.shadow_pid[s])
            if not self.umem.validate_desc(addr, length, int(self.tx_ring.options[s])):
                self.tx.invalid_descs += 1
                self.stats.tx_invalid_descs += 1
                self.tx.cons_release()
                continue
            if not self.cq.prod_reserve_addr(addr, pid):
                return None  # completion ring full: leave the TX entry for later
            self.tx.cons_release()
            return addr, length, pid

    def xsk_tx_release(self) -> None:
        """Publish the TX consumer (user space sees the freed TX slots)."""
        self.tx.cons_publish()

    def xsk_tx_completed(self, nb_entries: int) -> None:
        """``xsk_tx_completed(pool, n)`` = ``xskq_prod_submit_n(cq, n)`` (before the
        Dec-2019 rework ``xsk_umem_complete_tx``: ``prod_tail += n``)."""
        self.cq.prod_submit_n(nb_entries)

    # RX (kernel consumes FILL, produces RX)
    def xp_alloc(self) -> int | None:
        """Take one buffer address from the FILL ring, or None (fill ring empty)."""
        while True:
            idx = self.fq.cons_peek()
            if idx is None:
                self.stats.rx_fill_ring_empty_descs += 1
                return None
            addr = int(self.fill_ring.addr[idx & self.fill_ring.ring_mask])
            self.fq.cons_release()
            if self.umem.frame_of(addr) < 0:
                self.fq.invalid_descs += 1  # xp_check_aligned failed: skip the entry
                continue
            return addr

    def xsk_rcv_zc(self, addr: int, length: int, pid: int = -1) -> bool:
        """Post a received frame to the RX ring; False (and ``rx_ring_full``) if full."""
        if not self.rx.prod_reserve_desc(addr, length, 0, pid):
            self.stats.rx_ring_full += 1
            self.stats.rx_dropped += 1
            return False
        return True

    def xsk_flush(self) -> None:
        """End of a NAPI poll: submit the RX producer, publish the FILL consumer."""
        self.rx.prod_submit()
        self.fq.cons_publish()


# --- costs -----------------------------------------------------------------------------

@dataclass(frozen=True)
class XskCosts:
    """CPU cost of moving one packet through AF_XDP, by binding mode.

    ``mode`` is ``"zerocopy"`` (``XDP_ZEROCOPY``: the NIC DMAs into the UMEM, no copy)
    or ``"copy"`` (``XDP_COPY``: the kernel copies each frame into the UMEM on RX and
    builds an skb on TX). Every number carries its source in ``sources``.
    """

    mode: str
    kernel_rx_ns: float
    kernel_tx_ns: float
    copy_ns_per_byte: float
    copy_tx_skb_ns: float
    sources: dict = field(default_factory=dict, compare=False)

    def kernel_ns(self, size: int) -> float:
        """Kernel CPU per forwarded packet of ``size`` bytes (RX to ring + TX from ring)."""
        ns = self.kernel_rx_ns + self.kernel_tx_ns
        if self.mode == "copy":
            ns += 2 * self.copy_ns_per_byte * size + self.copy_tx_skb_ns
        return ns


ZEROCOPY_COSTS = XskCosts(
    mode="zerocopy", kernel_rx_ns=50.0, kernel_tx_ns=0.0, copy_ns_per_byte=0.0,
    copy_tx_skb_ns=0.0,
    sources={
        "kernel_rx_ns": "AF_XDP zero-copy to user space, 'upwards of 20 Mpps' = at most "
                        "50 ns/pkt (computed; XDP paper: Høiland-Jørgensen et al., 'The "
                        "eXpress Data Path', CoNEXT 2018, section Future directions)",
        "kernel_tx_ns": "no published figure found; folded into the application's "
                        "measured per-packet cost",
    })

COPY_COSTS = XskCosts(
    mode="copy", kernel_rx_ns=50.0, kernel_tx_ns=0.0, copy_ns_per_byte=0.1675,
    copy_tx_skb_ns=71.0,
    sources={
        "kernel_rx_ns": ZEROCOPY_COSTS.sources["kernel_rx_ns"],
        "copy_ns_per_byte": "(computed, order of magnitude only) socket reader of "
                            "1472-byte payloads 676.15 ns (xdp-project/xdp-project "
                            "areas/core/xdp_frame01_checksum.org) vs udp_sink of 18-byte "
                            "payloads 432.60 ns (areas/cpumap/cpumap02-optimizations.org) "
                            "-> 243.55 ns / 1454 B; two different platforms",
        "copy_tx_skb_ns": "build an skb from a frame and bulk-free it, 71 ns "
                          "(xdp-project/xdp-project areas/cpumap/cpumap02-optimizations.org"
                          "); xsk_generic_xmit builds one skb per TX descriptor",
    })


def xsk_costs(mode: str) -> XskCosts:
    if mode == "zerocopy":
        return ZEROCOPY_COSTS
    if mode == "copy":
        return COPY_COSTS
    raise UsageError(f"xsk.mode: unknown binding mode {mode!r}; use 'zerocopy' or 'copy'")
