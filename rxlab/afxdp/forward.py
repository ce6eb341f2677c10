"""An AF_XDP forwarding host: one ixgbe 10G port, in and out on the same port.

The user-space side follows Open vSwitch's AF_XDP netdev of 2019-2020
(``openvswitch/ovs: lib/netdev-afxdp.c``): a UMEM of ``4 * (2048 + 2048)`` frames in a
user-space pool; ``prepare_fill_queue`` refills the FILL ring 32 at a time;
``netdev_afxdp_rxq_recv`` takes up to 32 RX descriptors; ``__netdev_afxdp_batch_send``
first reaps the COMPLETION ring (``afxdp_complete_tx``, which marks each consumed entry
with ``UINT64_MAX`` and skips marked ones as ``afxdp_cq_skip``), copies each packet into
a frame popped from the pool, submits the TX ring and kicks the kernel with
``sendto()``; the received frames then go back to the pool.

The kernel side is the ixgbe zero-copy driver: RX clean (XDP redirect into the socket),
refill from the FILL ring, ``xsk_flush``; TX clean in one of the two variants of
:mod:`rxlab.afxdp.ixgbe_tx` followed by ``ixgbe_xmit_zc``.

:class:`ForwardingHost` holds the state and exposes each operation as one *step*; after
every step the :class:`rxlab.afxdp.invariants.RingChecker` runs. :func:`run_forwarding`
drives the steps in simulated time (two CPUs: cpu0 takes the NIC interrupt and runs the
NAPI poll in softirq, cpu1 runs the OVS PMD thread) against a tester sending at line
rate. Simplifications are listed in ``docs/afxdp.md``.
"""

from __future__ import annotations

from collections import Counter, deque
from dataclasses import dataclass, field, replace
from fractions import Fraction

import numpy as np

from rxlab.afxdp.invariants import RingChecker
from rxlab.afxdp.ixgbe_tx import (
    IXGBE_DEFAULT_TX_WORK,
    IXGBE_DEFAULT_TXD,
    IXGBE_TXD_STAT_DD,
    IxgbeTxRing,
    check_variant,
    hw_pending,
    hw_transmit,
    ixgbe_clean_xdp_tx_irq,
)
from rxlab.afxdp.xsk import (
    INVALID_ADDR,
    XSK_RING_CONS__DEFAULT_NUM_DESCS,
    XSK_RING_PROD__DEFAULT_NUM_DESCS,
    XSK_UMEM__DEFAULT_FRAME_SIZE,
    Umem,
    XskPool,
    check_ring_size,
    s32_diff,
    u32,
)
from rxlab.errors import UsageError

#: ixgbe.h: default RX descriptors per ring.
IXGBE_DEFAULT_RXD = 512
#: NAPI weight (``NAPI_POLL_WEIGHT``), the RX budget of one ixgbe poll with one ring.
NAPI_POLL_WEIGHT = 64
#: OVS ``NETDEV_MAX_BURST``: packets per PMD receive batch (``BATCH_SIZE``).
NETDEV_MAX_BURST = 32
#: ixgbe.h ``IXGBE_20K_ITR`` = 200 = 50 us << 2: the default interrupt throttle of an
#: RX queue vector (20k interrupts/s).
IXGBE_20K_ITR_NS = 50_000
#: Ethernet preamble (7) + start-of-frame delimiter (1) + minimum inter-frame gap (12).
ETH_WIRE_OVERHEAD = 20

DROP_REASONS = ("nic_no_rx_buffer", "xsk_rx_ring_full", "tx_pool_empty", "tx_ring_full",
                "overwritten")


def line_rate_fraction(size: int, link_bps: int = 10_000_000_000) -> Fraction:
    """Exact frames per second of ``size``-byte frames (FCS included) on the link:
    ``link_bps / ((size + 20) * 8)``: 7 bytes preamble, 1 byte start-of-frame delimiter and
    a 12-byte inter-frame gap per frame on the wire."""
    size = int(size)
    if size < 1:
        raise UsageError(f"size: frame size must be >= 1 byte, got {size}")
    return Fraction(int(link_bps), (size + ETH_WIRE_OVERHEAD) * 8)


def line_rate_pps(size: int, link_bps: int = 10_000_000_000) -> int:
    """:func:`line_rate_fraction` rounded to the nearest integer with integer arithmetic
    (14,880,952 at 64 bytes on 10G, as xdp-project/xdp-project
    areas/hints/traits01_bench_kmod.org tabulates)."""
    f = line_rate_fraction(size, link_bps)
    return (2 * f.numerator + f.denominator) // (2 * f.denominator)


@dataclass
class HostConfig:
    """Sizes and behaviour of the forwarding host. Defaults are OVS's and ixgbe's."""

    variant: str = "fixed"
    frames: int = 4 * (XSK_RING_PROD__DEFAULT_NUM_DESCS + XSK_RING_CONS__DEFAULT_NUM_DESCS)
    frame_size: int = XSK_UMEM__DEFAULT_FRAME_SIZE
    fill_size: int = XSK_RING_PROD__DEFAULT_NUM_DESCS
    comp_size: int = XSK_RING_CONS__DEFAULT_NUM_DESCS
    rx_size: int = XSK_RING_CONS__DEFAULT_NUM_DESCS
    tx_size: int = XSK_RING_PROD__DEFAULT_NUM_DESCS
    tx_descs: int = IXGBE_DEFAULT_TXD
    rx_descs: int = IXGBE_DEFAULT_RXD
    work_limit: int = IXGBE_DEFAULT_TX_WORK
    napi_budget: int = NAPI_POLL_WEIGHT
    batch: int = NETDEV_MAX_BURST
    initial_fill: int | None = None  # OVS fills the whole FILL ring at socket setup
    mark_cq: bool = True  # OVS afxdp_complete_tx's UINT64_MAX marking
    start_index: int = 0  # initial value of every ring's free-running indices
    # None: a new socket (zeroed ring memory, TX descriptors never used). An int: the socket
    # as earlier runs on the same port leave it, the completion ring's published producer
    # that many entries past what was reserved (see ForwardingHost.carry_over)
    cq_excess: int | None = None
    check: bool = True

    def validate(self) -> None:
        check_variant(self.variant)
        for name in ("fill_size", "comp_size", "rx_size", "tx_size"):
            check_ring_size(f"xsk.{name}", getattr(self, name))
        for name in ("frames", "tx_descs", "rx_descs", "work_limit", "napi_budget", "batch"):
            v = getattr(self, name)
            if not isinstance(v, int) or v < 1:
                raise UsageError(f"host.{name}: must be a positive integer, got {v!r}")
        if self.tx_descs < 2 or self.rx_descs < 2:
            raise UsageError("host.tx_descs / rx_descs: need at least 2 descriptors")
        e = self.cq_excess
        if e is not None:
            if isinstance(e, bool) or not isinstance(e, int) or not 0 <= e < 1 << 31:
                raise UsageError(f"host.cq_excess: must be None or an integer in [0, 2**31), "
                                 f"got {e!r}")
            if e and self.variant == "fixed":
                raise UsageError(f"host.cq_excess: the fixed clean never publishes past what "
                                 f"was reserved; use 0 or None with variant fixed, got {e}")


@dataclass
class AppStats:
    """OVS coverage counters and drops of the application."""

    rx_packets: int = 0
    tx_submitted: int = 0
    cq_reaped: int = 0
    cq_skip: int = 0  # afxdp_cq_skip
    cq_empty: int = 0  # afxdp_cq_empty
    fq_full: int = 0  # afxdp_fq_full
    tx_full: int = 0  # afxdp_tx_full
    pool_empty: int = 0  # "send failed due to exhausted memory pool"


class ForwardingHost:
    """State of the forwarding host and its steps (see the module docstring).

    Steps (each runs the checker afterwards): :meth:`app_setup`, :meth:`nic_receive`,
    :meth:`napi_tx_clean`, :meth:`napi_rx`, :meth:`nic_transmit`,
    :meth:`app_prepare_fill`, :meth:`app_complete_tx`, :meth:`app_forward` and the
    composites :meth:`napi_poll` and :meth:`app_iteration`.
    """

    def __init__(self, cfg: HostConfig | None = None):
        cfg = cfg or HostConfig()
        cfg.validate()
        self.cfg = cfg
        self.umem = Umem(cfg.frames, cfg.frame_size)
        self.pool = XskPool(self.umem, fill=cfg.fill_size, comp=cfg.comp_size, rx=cfg.rx_size,
                            tx=cfg.tx_size, start=cfg.start_index)
        self.txr = IxgbeTxRing(cfg.tx_descs)
        # driver RX ring: buffers posted to the NIC, and filled ones awaiting NAPI
        self.rx_posted: deque[int] = deque()
        self.rx_done: deque[tuple[int, int, int]] = deque()  # (addr, len, pid)
        # OVS umem pool (a stack of frame numbers), filled so that frame 0 pops first
        self.app_pool = np.arange(cfg.frames - 1, -1, -1, dtype=np.int64)
        self.app_top = cfg.frames
        self.app = AppStats()
        # packet accounting (simulation shadow): what each frame holds, fate of each pid
        self.frame_content = np.full(cfg.frames, -1, dtype=np.int64)
        self.pid_state = bytearray()  # 0 in the host, 1 delivered, 2 dropped
        self.drops: Counter = Counter({r: 0 for r in DROP_REASONS})
        self.offered = 0
        self.delivered = 0
        self.tx_corrupted = 0  # frames sent whose data was not the packet posted
        self.tx_duplicates = 0  # packets whose data left the port more than once
        self.steps = 0
        self.rx_refused = 0  # received frames the full socket RX ring refused
        if cfg.cq_excess is not None:
            self.carry_over(cfg.cq_excess)
        self.checker = RingChecker(self) if cfg.check else None

    def carry_over(self, excess: int) -> None:
        """Start from the socket earlier runs on the same port leave behind, idle.

        A test series runs every frame size on one socket (ovs_perf creates the bridge once
        per invocation). Afterwards every TX descriptor slot carries DD from an earlier lap
        (ixgbe never clears it); with the 2019 clean, the completion ring's published producer
        (``prod_tail``) stands ``excess`` entries past the reservation (``prod_head``), user
        space has read up to it (``xsk_ring_cons__peek`` reads to the producer) and
        ``afxdp_complete_tx`` marked every entry it read ``UINT64_MAX``. Simplification: the
        frames whose real entries were still unread when the earlier run stopped are back in
        the pool."""
        p = self.pool
        ring = p.comp_ring
        ring.producer = u32(ring.producer + excess)
        ring.consumer = ring.producer
        p.user_cq.cached_prod = p.user_cq.cached_cons = ring.producer
        p.cq.cached_cons = ring.producer  # the kernel's last read of the consumer
        ring.addr[:] = np.uint64(INVALID_ADDR)
        self.txr.status[:] = IXGBE_TXD_STAT_DD

    # -- step machinery -------------------------------------------------------------
    def _begin(self) -> None:
        if self.checker:
            self.checker.before()

    def _end(self, action: str) -> None:
        self.steps += 1
        if self.checker:
            self.checker.after(action)

    def ownership(self) -> dict[str, np.ndarray]:
        """Frames held by each party (see :mod:`rxlab.afxdp.invariants`)."""
        p = self.pool
        fr = self.umem.frames_of

        def span(ring, first, last):
            n = s32_diff(last, first)
            return fr(ring.entries(first, n)) if n > 0 else np.zeros(0, dtype=np.int64)

        # published, not yet reaped; entries OVS marked UINT64_MAX hold no frame
        cq = span(p.comp_ring, p.user_cq.cached_cons, p.comp_ring.producer)
        kr = [a for a in self.rx_posted] + [d[0] for d in self.rx_done]
        return {
            "user": self.app_pool[:self.app_top],
            "fill": span(p.fill_ring, p.fq.cached_cons, p.fill_ring.producer),
            "kernel_rx": fr(np.array(kr, dtype=np.uint64)),
            "rx": span(p.rx_ring, p.user_rx.cached_cons, p.rx.cached_prod),
            "tx": span(p.tx_ring, p.tx.cached_cons, p.tx_ring.producer),
            "nic": self.txr.posted_frames(self.umem),
            "completion": cq,
        }

    def _new_pid(self) -> int:
        self.pid_state.append(0)
        self.offered += 1
        return len(self.pid_state) - 1

    def _drop(self, pid: int, reason: str) -> None:
        if pid >= 0 and self.pid_state[pid] == 0:
            self.pid_state[pid] = 2
            self.drops[reason] += 1

    # -- user space (OVS lib/netdev-afxdp.c) ------------------------------------------
    def _pop(self, n: int) -> np.ndarray | None:
        if self.app_top < n:
            return None
        self.app_top -= n
        return self.app_pool[self.app_top:self.app_top + n].copy()

    def _push(self, frames) -> None:
        frames = np.asarray(frames, dtype=np.int64)
        n = len(frames)
        if self.app_top + n > len(self.app_pool):  # more frames returned than exist
            self.app_pool = np.concatenate([self.app_pool,
                                            np.zeros(n, dtype=np.int64)])
        self.app_pool[self.app_top:self.app_top + n] = frames
        self.app_top += n

    def app_setup(self) -> None:
        """``xsk_configure_socket``: fill the whole FILL ring from the pool."""
        self._begin()
        n = self.cfg.initial_fill if self.cfg.initial_fill is not None else self.cfg.fill_size
        n = min(n, self.cfg.fill_size, self.app_top)
        if n > 0:
            idx = self.pool.user_fq.reserve(n)
            if idx is not None:
                frames = self._pop(n)
                for j, f in enumerate(frames):
                    self.pool.fill_ring.write(u32(idx + j), self.umem.addr_of(f))
                self.pool.user_fq.submit(n)
        self._end("app: xsk_configure_socket (initial FILL)")

    def app_prepare_fill(self, n: int | None = None) -> int:
        """``prepare_fill_queue``: move ``n`` (default 32) frames from the pool to FILL,
        all or nothing."""
        self._begin()
        n = self.cfg.batch if n is None else n
        done = self._prepare_fill(n)
        self._end(f"app: prepare_fill_queue({n})")
        return done

    def _prepare_fill(self, n: int) -> int:
        fq = self.pool.user_fq
        if n <= 0 or fq.nb_free(n) < n:
            return 0
        frames = self._pop(n)
        if frames is None:
            return 0
        idx = fq.reserve(n)
        if idx is None:
            self._push(frames)
            self.app.fq_full += 1
            return 0
        for j, f in enumerate(frames):
            self.pool.fill_ring.write(u32(idx + j), self.umem.addr_of(f))
        fq.submit(n)
        return n

    def app_complete_tx(self, max_entries: int | None = None) -> int:
        """``afxdp_complete_tx``: reap up to ``max_entries`` (default the ring size)
        completions into the pool; returns the frames pushed back."""
        self._begin()
        n = self._complete_tx(max_entries)
        self._end(f"app: afxdp_complete_tx({max_entries or 'all'})")
        return n

    def _complete_tx(self, max_entries: int | None = None) -> int:
        p = self.pool
        ring = p.comp_ring
        nb = ring.nentries if max_entries is None else max_entries
        idx, n = p.user_cq.peek(nb)
        if n == 0:
            self.app.cq_empty += 1
            return 0
        slots = (idx + np.arange(n, dtype=np.int64)) & ring.ring_mask
        addrs = ring.addr[slots]
        if self.cfg.mark_cq:
            fresh = addrs != np.uint64(INVALID_ADDR)
            self.app.cq_skip += int((~fresh).sum())
            ring.addr[slots] = np.uint64(INVALID_ADDR)  # "Mark as pushed."
            addrs = addrs[fresh]
        frames = self.umem.frames_of(addrs)
        frames = frames[frames >= 0]
        self._push(frames)
        self.app.cq_reaped += len(frames)
        p.user_cq.release(n)
        return len(frames)

    def app_forward(self, max_packets: int | None = None) -> tuple[int, int]:
        """``netdev_afxdp_rxq_recv`` then ``__netdev_afxdp_batch_send`` on the same port
        (without the FILL refill): returns ``(received, submitted)``."""
        self._begin()
        r = self._forward(max_packets)
        self._end(f"app: rxq_recv + batch_send({max_packets or self.cfg.batch})")
        return r

    def _forward(self, max_packets: int | None = None, now: int = 0) -> tuple[int, int]:
        p = self.pool
        rx = p.rx_ring
        nb = self.cfg.batch if max_packets is None else max_packets
        idx, rcvd = p.user_rx.peek(nb)
        if rcvd == 0:
            return 0, 0
        batch = []
        for j in range(rcvd):
            s = (idx + j) & rx.ring_mask
            batch.append((int(rx.addr[s]), int(rx.len[s]), int(rx.shadow_pid[s])))
        p.user_rx.release(rcvd)
        self.app.rx_packets += rcvd
        # __netdev_afxdp_batch_send
        self._complete_tx()
        sent = 0
        elems = self._pop(rcvd)
        if elems is None:
            self.app.pool_empty += 1
            for _, _, pid in batch:
                self._drop(pid, "tx_pool_empty")
        else:
            tx_idx = p.user_tx.reserve(rcvd)
            if tx_idx is None:
                self._push(elems)
                self.app.tx_full += 1
                for _, _, pid in batch:
                    self._drop(pid, "tx_ring_full")
                self._complete_tx()
            else:
                for j, ((_, length, pid), f) in enumerate(zip(batch, elems, strict=True)):
                    self.frame_content[f] = pid  # memcpy into the popped frame
                    p.tx_ring.write(u32(tx_idx + j), self.umem.addr_of(f), length, 0, pid)
                p.user_tx.submit(rcvd)
                self.app.tx_submitted += rcvd
                sent = rcvd
        # free_afxdp_buf_batch: the received frames go back to the pool
        self._push([self.umem.frame_of(a) for a, _, _ in batch])
        return rcvd, sent

    def app_iteration(self, now: int = 0) -> tuple[int, int]:
        """One PMD iteration: ``prepare_fill_queue`` + receive + send (OVS order)."""
        self._begin()
        self._prepare_fill(self.cfg.batch)
        r = self._forward(None, now)
        self._end("app: pmd iteration (prepare_fill_queue, rxq_recv, batch_send)")
        return r

    # -- NIC ------------------------------------------------------------------------
    def nic_receive(self, n: int) -> int:
        """``n`` frames arrive; each takes a posted RX buffer (DMA) or is dropped."""
        self._begin()
        acc = self._nic_receive(n, 64)
        self._end(f"nic: receive {n}")
        return acc

    def _nic_receive(self, n: int, size: int) -> int:
        acc = min(n, len(self.rx_posted))
        for _ in range(acc):
            addr = self.rx_posted.popleft()
            pid = self._new_pid()
            self.frame_content[self.umem.frame_of(addr)] = pid
            self.rx_done.append((addr, size, pid))
        for _ in range(n - acc):
            pid = self._new_pid()
            self._drop(pid, "nic_no_rx_buffer")
        return acc

    def nic_transmit(self, n: int | None = None) -> int:
        """The NIC sends up to ``n`` posted descriptors and writes DD back."""
        self._begin()
        sent, _ = self._nic_transmit(n)
        self._end(f"nic: transmit {n if n is not None else 'all'}")
        return sent

    def _nic_transmit(self, n: int | None) -> tuple[int, int]:
        """Returns ``(frames sent, frames sent carrying the packet that was posted)``."""
        slots = hw_transmit(self.txr, n)
        intact = 0
        for i in slots:
            f = self.umem.frame_of(int(self.txr.buffer_addr[i]))
            actual = int(self.frame_content[f]) if f >= 0 else -1
            expected = int(self.txr.shadow_pid[i])
            if actual != expected:
                self.tx_corrupted += 1  # the frame was reused while the NIC held it
            else:
                intact += 1
            if actual >= 0:
                if self.pid_state[actual] == 0:
                    self.pid_state[actual] = 1
                    self.delivered += 1
                else:
                    self.tx_duplicates += 1  # this packet's data already left (or was dropped)
        return len(slots), intact

    # -- kernel (ixgbe zero-copy driver) -------------------------------------------
    def napi_tx_clean(self, work_limit: int | None = None, now: int = 0):
        """``ixgbe_clean_xdp_tx_irq`` (variant of the config) incl. ``ixgbe_xmit_zc``."""
        self._begin()
        wl = self.cfg.work_limit if work_limit is None else work_limit
        r = ixgbe_clean_xdp_tx_irq(self.txr, self.pool, self.cfg.variant, wl, now)
        self._end(f"kernel: ixgbe_clean_xdp_tx_irq[{self.cfg.variant}](work_limit={wl})")
        return r

    def napi_rx(self, budget: int | None = None) -> int:
        """``ixgbe_clean_rx_irq_zc``: up to ``budget`` received frames into the RX ring
        (XDP_REDIRECT to the socket), refill from FILL, ``xsk_flush``."""
        self._begin()
        budget = self.cfg.napi_budget if budget is None else budget
        n = self._napi_rx(budget)
        self._end(f"kernel: ixgbe_clean_rx_irq_zc(budget={budget})")
        return n

    def _napi_rx(self, budget: int) -> int:
        done = 0
        while self.rx_done and done < budget:
            addr, length, pid = self.rx_done.popleft()
            done += 1
            if not self.pool.xsk_rcv_zc(addr, length, pid):
                self.rx_refused += 1
                self._drop(pid, "xsk_rx_ring_full")
                self.rx_posted.append(addr)  # ixgbe_reuse_rx_buffer_zc
        # ixgbe_alloc_rx_buffers_zc: refill the descriptors from the FILL ring
        while len(self.rx_posted) + len(self.rx_done) < self.cfg.rx_descs - 1:
            addr = self.pool.xp_alloc()
            if addr is None:
                break
            self.rx_posted.append(addr)
        self.pool.xsk_flush()
        return done

    def napi_poll(self, now: int = 0):
        """``ixgbe_poll``: TX clean (with xmit) first, then RX with the NAPI budget."""
        self._begin()
        c = ixgbe_clean_xdp_tx_irq(self.txr, self.pool, self.cfg.variant,
                                   self.cfg.work_limit, now)
        n = self._napi_rx(self.cfg.napi_budget)
        self._end(f"kernel: ixgbe_poll (clean_xdp_tx_irq[{self.cfg.variant}], "
                  f"clean_rx_irq_zc)")
        return c, n

    # -- end of run -----------------------------------------------------------------
    def finish_accounting(self) -> dict:
        """Classify packets still in the host: in flight if their data is still in a
        frame on its way (driver RX, RX/TX ring, NIC), else lost (overwritten)."""
        parts = self.ownership()
        live_frames = np.concatenate([parts["kernel_rx"], parts["rx"], parts["tx"],
                                      parts["nic"]])
        live_frames = live_frames[live_frames >= 0]
        live = set(int(x) for x in self.frame_content[live_frames] if x >= 0)
        in_flight = 0
        for pid, st in enumerate(self.pid_state):
            if st == 0:
                if pid in live:
                    in_flight += 1
                else:
                    self.pid_state[pid] = 2
                    self.drops["overwritten"] += 1
        dropped = sum(self.drops.values())
        return {"offered": self.offered, "delivered": self.delivered, "dropped": dropped,
                "in_flight": in_flight, "dropped_by_reason": dict(self.drops)}


# -- time-driven run ----------------------------------------------------------------

@dataclass(frozen=True)
class ForwardingCosts:
    """CPU costs of the forwarding pipeline, each with its source: per packet on the PMD
    (``pmd_ns``) and on cpu0 (``kernel_rx_ns`` delivered, ``kernel_rx_refused_ns`` refused
    by the full socket RX ring), per TX descriptor posted (``kernel_tx_ns``) or consumed by
    the clean (``tx_clean_ns``), and per completion entry OVS walks over without a frame to
    return (``cq_skip_ns``). None is set from the seed's NO FIX row."""

    pmd_ns: float = 299.1
    kernel_rx_ns: float = 50.0
    kernel_rx_refused_ns: float = 31.21
    kernel_tx_ns: float = 0.0
    tx_clean_ns: float = 5.36
    cq_skip_ns: float = 1.266
    sources: dict = field(default_factory=lambda: {
        "pmd_ns": "seed 002 (E. Chaudron, netdev, 23 Aug 2019, Message-ID "
                  "<660415CE-6748-4749-84D6-7007F69D8EFB@redhat.com>): OVS AF_XDP physical "
                  "loopback, 64-byte frames, after the ixgbe fix: 3,343,188 pps = 299.1 "
                  "ns/pkt (computed); the whole pipeline's bottleneck, attributed to the "
                  "PMD thread",
        "kernel_rx_ns": "AF_XDP zero-copy to user space 'upwards of 20 Mpps' = at most "
                        "50 ns/pkt (XDP paper: Høiland-Jørgensen et al., 'The eXpress Data "
                        "Path', CoNEXT 2018, section Future directions)",
        "kernel_rx_refused_ns": "driver RX + XDP_DROP, i40e, 31.21 ns (1/32,042,560 pps, "
                                "xdp-project/xdp-project "
                                "areas/cpumap/cpumap04-map-xdp-prog.org): a frame the full "
                                "socket RX ring refuses goes through the driver and the XDP "
                                "program and its buffer is reused, as a dropped one is",
        "kernel_tx_ns": "no published figure found; 0 = folded into pmd_ns",
        "tx_clean_ns": "one L2 hit, 5.36 ns (lmbench on the E5-1650 v4 of "
                       "xdp-project/xdp-project areas/cpumap/cpumap04-map-xdp-prog.org), "
                       "per descriptor ixgbe_clean_xdp_tx_irq consumes: it reads the "
                       "write-back status and the tx_buffer_info entry and clears its "
                       "xdpf; no published per-descriptor TX clean cost",
        "cq_skip_ns": "1.266 ns = 4 cycles, the per-iteration "
                      "cost of the smallest loop measured on the seed-era CPU class "
                      "(direct-call benchmark, E5-1650 v4, xdp-project/xdp-project "
                      "areas/hints/traits01_bench_kmod.org), as the cost of one "
                      "afxdp_complete_tx iteration over an entry already marked UINT64_MAX "
                      "(load, compare, afxdp_cq_skip increment); a proxy: no published "
                      "per-entry cost of afxdp_complete_tx. Never charged with the fixed "
                      "driver, whose completion ring holds no marked entries",
    }, compare=False)

    def capacity_pps(self) -> Fraction:
        """Packets/s the PMD CPU can forward: 1e9 / pmd_ns (exact)."""
        return Fraction(10**9) / Fraction(str(self.pmd_ns))


@dataclass
class ForwardingResult:
    size: int
    variant: str
    duration_ns: int
    warmup_ns: int
    line_rate_pps: int
    cpu_capacity_pps: float
    pps: float  # frames the port sent per second (what a tester counts)
    intact_pps: float  # of which carried the packet that was posted
    packets: dict
    cpu_busy_ns: list
    cpu_softirq_ns: list
    napi_polls: int
    pmd_iterations: int
    steps: int
    violations: int
    violating_steps: int
    violations_by_kind: dict
    first_violation: str | None
    first_violation_step: int | None
    tx_corrupted: int
    tx_duplicates: int
    app: dict
    xsk_stats: dict
    ownership_end: dict
    stale_cleans: int
    cq_producer_excess: int


def run_forwarding(size: int, variant: str, duration_ns: int = 20_000_000,
                   warmup_ns: int | None = None, costs: ForwardingCosts | None = None,
                   cfg: HostConfig | None = None, itr_ns: int = IXGBE_20K_ITR_NS,
                   link_bps: int = 10_000_000_000, jitter: float = 0.1,
                   seed: int = 2) -> ForwardingResult:
    """Forward a line-rate stream of ``size``-byte frames (FCS included) for
    ``duration_ns`` of simulated time.

    cpu0 runs the NAPI poll (``ixgbe_poll``) when the queue vector's interrupt fires
    (no earlier than ``itr_ns`` after the previous one), when ``sendto()`` kicks it
    (``ixgbe_xsk_async_xmit``) or when the previous poll returned its whole budget (RX
    budget used, or the TX clean reported unfinished work: with the 2019 clean, any walk
    that used ``work_limit``); cpu1
    runs PMD iterations whenever the RX ring holds packets. A step's effects happen at
    its start; its CPU cost then keeps that CPU busy. Times are integer picoseconds.

    ``jitter`` spreads each PMD iteration's cost uniformly over ``[1 - jitter, 1 +
    jitter]`` times its mean (seeded by ``seed``), so the phase between the wire and
    the CPU is not locked: with perfectly periodic costs a wire-bound run can keep one
    descriptor in flight at every clean and never expose the stale DD bits.
    """
    if not 0 <= jitter < 1:
        raise UsageError(f"jitter: must be in [0, 1), got {jitter}")
    rng = np.random.default_rng(seed)
    costs = costs or ForwardingCosts()
    check_variant(variant)
    cfg = replace(cfg, variant=variant) if cfg else HostConfig(variant=variant)
    host = ForwardingHost(cfg)
    warmup_ns = duration_ns // 10 if warmup_ns is None else warmup_ns
    lr = line_rate_fraction(size, link_bps)
    wire_ps = Fraction(10**12) / lr  # picoseconds per frame on the wire (exact)
    if wire_ps.denominator != 1:
        raise UsageError(f"size: {size} bytes gives a non-integer wire time at {link_bps} bps")
    wire_ps = int(wire_ps)
    end = duration_ns * 1000
    warm = warmup_ns * 1000
    pmd_ps = round(costs.pmd_ns * 1000)
    krx_ps = round(costs.kernel_rx_ns * 1000)
    kref_ps = round(costs.kernel_rx_refused_ns * 1000)
    ktx_ps = round(costs.kernel_tx_ns * 1000)
    kclean_ps = round(costs.tx_clean_ns * 1000)
    skip_ps = round(costs.cq_skip_ns * 1000)
    itr_ps = itr_ns * 1000
    INF = float("inf")

    host.app_setup()
    # the RX descriptors start posted (ixgbe_alloc_rx_buffers_zc at ring setup)
    host._begin()
    host._napi_rx(0)
    host._end("kernel: RX ring setup (ixgbe_alloc_rx_buffers_zc)")

    arrived = 0  # arrivals processed so far (arrival k at k * wire_ps)
    tx_wire_free = 0
    hw_event = None  # earliest NIC event (RX DMA or TX write-back) not yet polled
    last_irq = -itr_ps
    kick = None  # time a sendto()/repoll scheduled NAPI
    napi_busy = 0
    pmd_busy = 0
    rx_visible = INF
    busy = [0, 0]
    wire_in_window = 0
    intact_in_window = 0
    polls = 0
    iters = 0

    def next_tx_done():
        if hw_pending(host.txr) == 0:
            return INF
        i = host.txr.hw_head
        return max(tx_wire_free, int(host.txr.shadow_post_time[i])) + wire_ps

    def nic_advance(t):
        nonlocal arrived, tx_wire_free, hw_event, wire_in_window, intact_in_window
        # RX: arrivals in (previous, t]
        upto = t // wire_ps + 1
        n = upto - arrived
        if n > 0:
            first_t = arrived * wire_ps
            acc = host._nic_receive(n, size)
            arrived = upto
            if acc and hw_event is None:
                hw_event = first_t
        # TX: descriptors whose wire time ends by t
        while True:
            d = next_tx_done()
            if d > t:
                break
            sent, intact = host._nic_transmit(1)
            tx_wire_free = d
            if hw_event is None:
                hw_event = d
            if d - wire_ps >= warm:  # whole frame inside the window: never above line rate
                wire_in_window += sent
                intact_in_window += intact

    while True:
        # when would NAPI run?
        cands = []
        if kick is not None:
            cands.append(kick)
        hw = hw_event
        if hw is None:
            nxt_rx = arrived * wire_ps if host.rx_posted else INF
            hw = min(nxt_rx, next_tx_done())
        if hw < INF:
            cands.append(max(hw, last_irq + itr_ps))
        tn = max(min(cands), napi_busy) if cands else INF
        # when would the PMD run?
        has_rx = s32_diff(host.pool.rx_ring.producer, host.pool.user_rx.cached_cons) > 0
        tp = max(rx_visible, pmd_busy) if has_rx else INF
        t = min(tn, tp)
        if t >= end:
            break
        t = int(t)
        nic_advance(t)
        if tn <= tp:
            if kick is None or (hw_event is not None and hw_event < kick):
                last_irq = t
            kick = None
            hw_event = None
            host._begin()
            c = ixgbe_clean_xdp_tx_irq(host.txr, host.pool, variant, cfg.work_limit, t)
            refused = host.rx_refused
            nrx = host._napi_rx(cfg.napi_budget)
            host._end(f"kernel: ixgbe_poll at {t / 1e6:.3f} us")
            refused = host.rx_refused - refused
            cost = ((nrx - refused) * krx_ps + refused * kref_ps + c.xsk_frames * kclean_ps
                    + c.posted * ktx_ps)
            napi_busy = t + cost
            busy[0] += min(cost, end - t)  # CPU time inside the run only
            polls += 1
            if nrx and rx_visible == INF:
                rx_visible = t + cost  # the PMD sees the RX ring non-empty from here
            progress = nrx or c.xsk_frames or c.posted
            if progress and (nrx >= cfg.napi_budget or not c.done):
                kick = t + cost  # ixgbe_poll returned its budget: NAPI repolls
        else:
            host._begin()
            host._prepare_fill(cfg.batch)
            skips = host.app.cq_skip
            rcvd, sent = host._forward(None, t)
            host._end(f"app: pmd iteration at {t / 1e6:.3f} us")
            skips = host.app.cq_skip - skips  # marked entries afxdp_complete_tx walked over
            cost = round(rcvd * pmd_ps * (1.0 + jitter * (2.0 * rng.random() - 1.0)))
            cost += skips * skip_ps
            pmd_busy = t + cost
            if s32_diff(host.pool.rx_ring.producer, host.pool.user_rx.cached_cons) <= 0:
                rx_visible = INF
            busy[1] += min(cost, end - t)
            iters += 1
            if sent:
                k = t + cost  # sendto() kick at the end of batch_send
                kick = k if kick is None else min(kick, k)
    nic_advance(end)
    packets = host.finish_accounting()
    ch = host.checker
    return ForwardingResult(
        size=size, variant=variant, duration_ns=duration_ns, warmup_ns=warmup_ns,
        line_rate_pps=line_rate_pps(size, link_bps),
        cpu_capacity_pps=float(costs.capacity_pps()),
        pps=wire_in_window / ((end - warm) / 1e12),
        intact_pps=intact_in_window / ((end - warm) / 1e12),
        packets=packets,
        cpu_busy_ns=[b / 1000 for b in busy],
        cpu_softirq_ns=[busy[0] / 1000, 0.0],
        napi_polls=polls, pmd_iterations=iters, steps=host.steps,
        violations=ch.count if ch else 0,
        violating_steps=ch.violating_steps if ch else 0,
        violations_by_kind=dict(ch.by_kind) if ch else {},
        first_violation=str(ch.first) if ch and ch.first else None,
        first_violation_step=ch.first.step if ch and ch.first else None,
        tx_corrupted=host.tx_corrupted, tx_duplicates=host.tx_duplicates,
        app=vars(host.app).copy(), xsk_stats=vars(host.pool.stats).copy(),
        ownership_end=ch.ownership_summary() if ch else {},
        stale_cleans=host.txr.stale_cleans,
        cq_producer_excess=s32_diff(host.pool.comp_ring.producer, host.pool.cq.cached_prod),
    )


__all__ = ["ForwardingHost", "HostConfig", "ForwardingCosts", "ForwardingResult",
           "run_forwarding", "line_rate_pps", "line_rate_fraction"]
