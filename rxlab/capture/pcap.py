"""pcap / pcapng captures as rxlab traffic: a flow table plus a chunked packet stream.

``open_capture(path)`` scans the file once (pass 1: validation, flow table, counts) and
``Capture.chunks()`` parses it again for each replay (pass 2), so memory stays bounded by
the read buffer, one output chunk and the flow table, whatever the capture's length.

Parsing runs in one jitted kernel (``_scan``) over a read buffer: pcap records and pcapng
packet blocks (EPB, SPB, obsolete PB) are handled there; pcapng section and interface
blocks (SHB, IDB: byte order, link type, ``if_tsresol``, ``if_tsoffset``, ``if_fcslen``)
are rare and handled in Python. Frames: Ethernet (with up to 4 802.1Q / 802.1ad tags),
Linux cooked v1/v2 and raw IP link types; IPv4 and IPv6 (hop-by-hop, routing,
destination-options and AH extension headers); TCP and UDP. Everything else is counted as
skipped, by reason, and not offered.

Each offered packet becomes (t_ns, flow, size):

* ``t_ns``: capture time minus the first offered packet's time, divided by the speed-up
  factor; kept non-decreasing (a packet stamped earlier than its predecessor is offered
  at its predecessor's time and counted in ``reordered``).
* ``flow``: row of the 5-tuple in the flow table, rows in order of first appearance.
* ``size``: Ethernet frame bytes including the 4-byte FCS, as ``rxlab.traffic`` counts
  them: wire length minus the link-layer header plus 14 + 4 (minus the FCS bytes a link
  type declares), at least 64.

A record that runs past the end of the file, or a malformed record or block, raises
``UsageError`` naming its byte offset; with ``allow_truncated=True`` the intact prefix
(every record before that offset) is replayed and ``Capture.notice`` says so. Malformed,
by the format's own rules (draft-ietf-opsawg-pcap, draft-ietf-opsawg-pcapng) and the
limits of the readers everyone uses (libpcap's sf-pcap.c / sf-pcapng.c):

* a captured length above libpcap's MAXIMUM_SNAPLEN (262144), or above the original
  length ("the minimum value among the Original Packet Length and the snapshot length");
* an original length above 524280 bytes, the largest packet Linux builds (GSO_MAX_SIZE
  = 8 * GSO_MAX_SEGS, include/linux/netdevice.h, since 5.19): the replay offers frames of
  that length, so a corrupt length is refused rather than offered as a 4 GB frame;
* a pcap timestamp fraction of a second or more; a pcapng timestamp (with its
  ``if_tsoffset``) before 1970 or past int64 nanoseconds (2262); a replay time (after
  the speed-up) past 2^62 ns.

A header snap length of 0 or above 262144 means 262144, and a record longer than its
file's snap length is cut to it before dissection, as libpcap does (pcap_adjust_snapshot;
the rest of the record is skipped). The file is opened once per pass, must be a regular
file of at most 4 GiB (a device or a FIFO would be read forever), and must not change
between the scan and the replay.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numba import njit

from rxlab.config import JIT, JIT_LEAF
from rxlab.errors import UsageError
from rxlab.traffic.flows import FlowTable
from rxlab.traffic.stream import Chunk

DEFAULT_CHUNK = 1 << 16
READ_BLOCK = 1 << 22  # bytes per read; the buffer grows only for larger pcapng blocks
MAX_BLOCK = 1 << 26  # a pcapng block longer than this is treated as corrupt
MAX_CAPLEN = 262144  # libpcap's MAXIMUM_SNAPLEN: a larger record length means corruption
MAX_WIRE = 8 * 65535  # Linux GSO_MAX_SIZE: no packet on a Linux host is longer
MIN_FRAME = 64
NO_LIMIT = (1 << 63) - 1  # replay time limit meaning "none"
MAX_TS_S = NO_LIMIT // 1_000_000_000 - 1  # whole seconds whose ns, plus a fraction, fit
MAX_REPLAY_NS = 1 << 62  # ~146 years: replay times keep headroom below int64 for the loop
MAX_CAPTURE_BYTES = 4 << 30  # scanned twice per run; the flow table is bounded by it too
MAX_PY_BLOCKS = 1 << 16  # pcapng section + interface blocks, each parsed in Python
# speed-up range, as traffic.pcap.speedup allows: a millionth to a million times
MIN_SPEEDUP, MAX_SPEEDUP = 1e-6, 1e6

# link types (www.tcpdump.org/linktypes.html)
LT_ETHERNET, LT_RAW, LT_SLL, LT_SLL2, LT_IPV4, LT_IPV6 = 1, 101, 113, 276, 228, 229
_RAW_ALIASES = (12, 14)  # DLT_RAW as some systems wrote it into files
SUPPORTED_LINKTYPES = (LT_ETHERNET, LT_RAW, LT_SLL, LT_SLL2, LT_IPV4, LT_IPV6) + _RAW_ALIASES

# kernel status codes
_NEED_MORE, _OUT_FULL, _FLOWS_FULL, _PY_BLOCK, _CORRUPT, _LIMIT = 0, 1, 2, 3, 4, 5
# and, from a record reader to the kernel only: a packet to dissect, a block to pass over
_PACKET, _NOT_PACKET = 6, 7

# state slots (int64 array shared by the kernel and Python)
(S_NFLOWS, S_OFFERED, S_RECORDS, S_SKIP_NONIP, S_SKIP_PROTO, S_SKIP_FRAG, S_SKIP_SHORT,
 S_SKIP_LINK, S_T0, S_HAVE_T0, S_LAST_T, S_REORDERED, S_NOUT, S_ERR, S_ERR_ARG, S_NEED,
 S_LAST_ABS, S_BYTES, S_SIZE, S_MAX_FLOWS, S_ERR_ARG2) = range(21)

SKIP_REASONS = {
    S_SKIP_NONIP: "not IPv4/IPv6",
    S_SKIP_PROTO: "not TCP/UDP",
    S_SKIP_FRAG: "IP fragment",
    S_SKIP_SHORT: "headers cut by the snap length",
    S_SKIP_LINK: "unsupported link type",
}

# corruption codes -> message (S_ERR_ARG carries the offending value)
_ERRORS = {
    1: "record length {} exceeds the 262144-byte maximum (libpcap's MAXIMUM_SNAPLEN)",
    2: "pcapng block length {} is not a multiple of 4 or below 12",
    3: "pcapng block length {} does not match its trailing copy",
    4: "pcapng packet block names interface {}, which no interface block defined",
    5: "pcapng packet length {} overruns its block",
    6: "pcapng block length {} exceeds 64 MiB",
    7: "pcapng packet block before any interface description block",
    8: "original (wire) length {} exceeds 524280 bytes, the largest packet Linux builds "
       "(GSO_MAX_SIZE)",
    9: "original (wire) length {} is below the captured length {}",
    10: "timestamp out of range (before 1970 or past 2262 in nanoseconds)",
    11: "record {} s after the first packet: replayed at this speed-up it lies past 2^62 ns "
        "(146 years); use a larger speed-up",
    12: "the file changed since it was scanned; run again",
    13: "timestamp fraction {} is not below {} (a second's micro- or nanoseconds)",
}

_IF_DEC, _IF_BIN = 0, 1


# --------------------------------------------------------------------------- kernel


@njit(**JIT)
def _u16(b, i, be):
    x0 = np.int64(b[i])
    x1 = np.int64(b[i + 1])
    return (x0 << 8) | x1 if be else (x1 << 8) | x0


@njit(**JIT)
def _u32(b, i, be):
    x0 = np.int64(b[i])
    x1 = np.int64(b[i + 1])
    x2 = np.int64(b[i + 2])
    x3 = np.int64(b[i + 3])
    if be:
        return (x0 << 24) | (x1 << 16) | (x2 << 8) | x3
    return (x3 << 24) | (x2 << 16) | (x1 << 8) | x0


@njit(**JIT)
def _be64(b, i):
    v = np.int64(0)
    for j in range(8):
        v = (v << 8) | np.int64(b[i + j])
    return v


@njit(**JIT)
def _dissect(b, p, caplen, lt, k):
    """Fill k[0:5] with the flow key of the frame at b[p:p+caplen]; 0 = ok, else a skip slot.

    Key: k0,k1 = source address (v4: 0, addr; v6: two big-endian halves), k2,k3 = the
    destination, k4 = sport << 32 | dport << 16 | proto << 8 | is_v6.
    """
    end = p + caplen
    if lt == 1:  # Ethernet
        if caplen < 14:
            return S_SKIP_SHORT
        et = _u16(b, p + 12, True)
        q = p + 14
        tags = 0
        while (et == 0x8100 or et == 0x88A8 or et == 0x9100) and tags < 4:
            if q + 4 > end:
                return S_SKIP_SHORT
            et = _u16(b, q + 2, True)
            q += 4
            tags += 1
    elif lt == 113:  # Linux cooked v1
        if caplen < 16:
            return S_SKIP_SHORT
        et = _u16(b, p + 14, True)
        q = p + 16
    elif lt == 276:  # Linux cooked v2
        if caplen < 20:
            return S_SKIP_SHORT
        et = _u16(b, p, True)
        q = p + 20
    elif lt == 101 or lt == 12 or lt == 14 or lt == 228 or lt == 229:  # raw IP
        if caplen < 1:
            return S_SKIP_SHORT
        v = np.int64(b[p]) >> 4
        et = 0x0800 if v == 4 else 0x86DD if v == 6 else 0
        q = p
    else:
        return S_SKIP_LINK
    if et == 0x0800:
        if q + 20 > end:
            return S_SKIP_SHORT
        if (np.int64(b[q]) >> 4) != 4:
            return S_SKIP_NONIP
        ihl = (np.int64(b[q]) & 15) * 4
        if ihl < 20:
            return S_SKIP_NONIP
        if _u16(b, q + 6, True) & 0x3FFF:  # MF set or a non-zero offset
            return S_SKIP_FRAG
        proto = np.int64(b[q + 9])
        k[0] = 0
        k[1] = _u32(b, q + 12, True)
        k[2] = 0
        k[3] = _u32(b, q + 16, True)
        l4 = q + ihl
        v6 = 0
    elif et == 0x86DD:
        if q + 40 > end:
            return S_SKIP_SHORT
        if (np.int64(b[q]) >> 4) != 6:
            return S_SKIP_NONIP
        nh = np.int64(b[q + 6])
        k[0] = _be64(b, q + 8)
        k[1] = _be64(b, q + 16)
        k[2] = _be64(b, q + 24)
        k[3] = _be64(b, q + 32)
        l4 = q + 40
        hops = 0
        while (nh == 0 or nh == 43 or nh == 60 or nh == 51 or nh == 44) and hops < 8:
            if l4 + 8 > end:
                return S_SKIP_SHORT
            if nh == 44:
                return S_SKIP_FRAG
            nxt = np.int64(b[l4])
            if nh == 51:
                l4 += (np.int64(b[l4 + 1]) + 2) * 4
            else:
                l4 += (np.int64(b[l4 + 1]) + 1) * 8
            nh = nxt
            hops += 1
        proto = nh
        v6 = 1
    else:
        return S_SKIP_NONIP
    if proto != 6 and proto != 17:
        return S_SKIP_PROTO
    if l4 + 4 > end:
        return S_SKIP_SHORT
    k[4] = (_u16(b, l4, True) << 32) | (_u16(b, l4 + 2, True) << 16) | (proto << 8) | v6
    return 0


@njit(**JIT)
def _slot(k, tab):
    h = k[0] * np.int64(-7046029254386353131)
    h = (h ^ k[1]) * np.int64(-4658895280553007687)
    h = (h ^ k[2]) * np.int64(-7046029254386353131)
    h = (h ^ k[3]) * np.int64(-4658895280553007687)
    h = (h ^ k[4]) * np.int64(-7046029254386353131)
    h ^= h >> 31
    return h & (tab.size - 1)


@njit(**JIT)
def _rehash(keys, n, tab):
    tab[:] = -1
    mask = tab.size - 1
    for f in range(n):
        s = _slot(keys[f], tab)
        while tab[s] >= 0:
            s = (s + 1) & mask
        tab[s] = f


@njit(**JIT)
def _ts_ns(hi, lo, mode, a, b):
    """A pcapng timestamp, unsigned 64 bits given as two 32-bit halves, in ns; -1 when it
    does not fit int64 ns. The 64-bit value itself may not fit int64: never formed whole."""
    if mode == _IF_DEC:
        if b == 1:  # units of a ns
            if hi >> 31:
                return -1
            raw = (hi << 32) | lo
            if raw > NO_LIMIT // a:
                return -1
            return raw * a
        # units of 1/b ns (b a power of ten up to 10^9): raw // b, one half at a time
        return ((hi // b) << 32) + ((((hi % b) << 32) | lo) // b)
    # units of 2^-b s (a unused)
    if b >= 32:
        whole = hi >> (b - 32)
        frac = ((hi & ((np.int64(1) << (b - 32)) - 1)) << 32) | lo
    elif b == 0:
        if hi >> 31:
            return -1
        whole = (hi << 32) | lo
        frac = np.int64(0)
    else:
        whole = (hi << (32 - b)) | (lo >> b)
        frac = lo & ((np.int64(1) << b) - 1)
    if whole > MAX_TS_S:
        return -1
    if b <= 33:  # frac * 10^9 < 2^63: exact
        return whole * 1_000_000_000 + ((frac * 1_000_000_000) >> b)
    # finer than 2^-33 s: float, kept below the next second
    return whole * 1_000_000_000 + min(np.int64(frac * 1e9 / float(np.int64(1) << b)),
                                       999_999_999)


@njit(**JIT)
def _lengths(caplen, origlen, st):
    """Record lengths by the format's rules; 0 = fine, else the error is set in st."""
    if caplen > MAX_CAPLEN:
        st[S_ERR] = 1
        st[S_ERR_ARG] = caplen
    elif origlen > MAX_WIRE:
        st[S_ERR] = 8
        st[S_ERR_ARG] = origlen
    elif origlen < caplen:
        st[S_ERR] = 9
        st[S_ERR_ARG] = origlen
        st[S_ERR_ARG2] = caplen
    else:
        return 0
    return 1


# _scan's helpers, called once per record, are compiled into its loop (forceinline) and
# without numba's runtime (JIT_LEAF): as calls they made the scan of a 1M-packet capture
# 1.7 (pcap) to 2.2 (pcapng) times slower; inlined but reference-counting the arrays they
# take, 1.2 to 1.5 times.
_JIT_INLINE = dict(JIT_LEAF, forceinline=True)

# The record readers answer (code, iface, ts, p, caplen, origlen, nxt): _PACKET with the
# frame at buf[p:p+caplen], its interface, capture time (ns) and wire length, and the
# position of the next record; or _NEED_MORE (st[S_NEED] set), _CORRUPT (st[S_ERR] set),
# _PY_BLOCK, or _NOT_PACKET (a block to pass over: nxt only).


@njit(**_JIT_INLINE)
def _no_packet(code):
    return code, np.int64(0), np.int64(0), np.int64(0), np.int64(0), np.int64(0), np.int64(0)


@njit(**_JIT_INLINE)
def _corrupt(st, err, arg):
    st[S_ERR] = err
    st[S_ERR_ARG] = arg
    return _no_packet(_CORRUPT)


@njit(**_JIT_INLINE)
def _pcap_record(buf, pos, end, be, if_a, st):
    """The pcap record at buf[pos]."""
    if pos + 16 > end:
        st[S_NEED] = 16
        return _no_packet(_NEED_MORE)
    caplen = _u32(buf, pos + 8, be)
    origlen = _u32(buf, pos + 12, be)
    err = _lengths(caplen, origlen, st)
    frac = _u32(buf, pos + 4, be)
    if not err and frac * if_a[0] >= 1_000_000_000:  # "elapsed since that second"
        st[S_ERR] = 13
        st[S_ERR_ARG] = frac
        st[S_ERR_ARG2] = 1_000_000_000 // if_a[0]
        err = 1
    if err:
        return _no_packet(_CORRUPT)
    if pos + 16 + caplen > end:
        st[S_NEED] = 16 + caplen
        return _no_packet(_NEED_MORE)
    ts = _u32(buf, pos, be) * 1_000_000_000 + frac * if_a[0]
    return _PACKET, np.int64(0), ts, pos + 16, caplen, origlen, pos + 16 + caplen


@njit(**_JIT_INLINE)
def _pcapng_block(buf, pos, end, be, if_mode, if_a, if_b, if_off, nif, st):
    """The pcapng block at buf[pos]: its length checked, then read by its type."""
    if pos + 12 > end:
        st[S_NEED] = 12
        return _no_packet(_NEED_MORE)
    btype = _u32(buf, pos, be)
    blen = _u32(buf, pos + 4, be)
    if btype == 0x0A0D0D0A:  # section header: byte order may change, Python reads it
        return _no_packet(_PY_BLOCK)
    if blen < 12 or blen & 3:
        return _corrupt(st, 2, blen)
    if blen > MAX_BLOCK:
        return _corrupt(st, 6, blen)
    if pos + blen > end:
        st[S_NEED] = blen
        return _no_packet(_NEED_MORE)
    if _u32(buf, pos + blen - 4, be) != blen:
        return _corrupt(st, 3, blen)
    if btype == 1:  # interface description
        return _no_packet(_PY_BLOCK)
    if btype == 6 or btype == 2:  # enhanced / obsolete packet block
        return _pcapng_epb(buf, pos, btype, blen, be, if_mode, if_a, if_b, if_off, nif, st)
    if btype == 3:  # simple packet block: no timestamp, interface 0
        return _pcapng_spb(buf, pos, blen, be, nif, st)
    # statistics, name resolution, custom, ...: not packets
    return (_NOT_PACKET, np.int64(0), np.int64(0), np.int64(0), np.int64(0), np.int64(0),
            pos + blen)


@njit(**_JIT_INLINE)
def _pcapng_epb(buf, pos, btype, blen, be, if_mode, if_a, if_b, if_off, nif, st):
    """An enhanced or obsolete packet block of blen bytes at buf[pos]."""
    if blen < 32:
        return _corrupt(st, 2, blen)
    if btype == 6:
        iface = _u32(buf, pos + 8, be)
    else:
        iface = _u16(buf, pos + 8, be)
    if iface >= nif:
        return _corrupt(st, 4 if nif > 0 else 7, iface)
    caplen = _u32(buf, pos + 20, be)
    origlen = _u32(buf, pos + 24, be)
    if caplen > blen - 32:
        return _corrupt(st, 5, caplen)
    if _lengths(caplen, origlen, st):
        return _no_packet(_CORRUPT)
    ts = _ts_ns(_u32(buf, pos + 12, be), _u32(buf, pos + 16, be), if_mode[iface],
                if_a[iface], if_b[iface])
    off = if_off[iface]
    if ts < 0 or (off > 0 and ts > NO_LIMIT - off) or ts + off < 0:
        st[S_ERR] = 10
        return _no_packet(_CORRUPT)
    return _PACKET, iface, ts + off, pos + 28, caplen, origlen, pos + blen


@njit(**_JIT_INLINE)
def _pcapng_spb(buf, pos, blen, be, nif, st):
    """A simple packet block of blen bytes at buf[pos]: the previous record's time."""
    if blen < 16:
        return _corrupt(st, 2, blen)
    if nif == 0:
        return _corrupt(st, 7, 0)
    origlen = _u32(buf, pos + 8, be)
    caplen = min(origlen, blen - 16)
    if _lengths(0, origlen, st):
        return _no_packet(_CORRUPT)
    return _PACKET, np.int64(0), st[S_LAST_ABS], pos + 12, caplen, origlen, pos + blen


@njit(**_JIT_INLINE)
def _replay_ns(rel, speed):
    """Capture time since the first packet, divided by the speed-up: above MAX_REPLAY_NS
    when out of range, whatever it would have been."""
    if speed != 1.0:
        r = rel / speed  # kept in range before it becomes an integer again
        if r > MAX_REPLAY_NS:
            return np.int64(MAX_REPLAY_NS + 1)
        if r < 0:
            return np.int64(-1)
        return np.int64(r)
    return rel


@njit(**_JIT_INLINE)
def _flow_row(k, keys, tab, emit, st):
    """(_PACKET, the flow table row of key k, added if new), or (_FLOWS_FULL, -1), or
    (_CORRUPT, -1) when the replay meets a flow the scan did not."""
    mask = tab.size - 1
    s = _slot(k, tab)
    while tab[s] >= 0:
        g = tab[s]
        if (keys[g, 0] == k[0] and keys[g, 1] == k[1] and keys[g, 2] == k[2]
                and keys[g, 3] == k[3] and keys[g, 4] == k[4]):
            return _PACKET, g
        s = (s + 1) & mask
    n = st[S_NFLOWS]
    if emit and n >= st[S_MAX_FLOWS]:  # the scan saw fewer flows: not this file
        st[S_ERR] = 12
        return _CORRUPT, np.int64(-1)
    if n >= keys.shape[0] or 2 * (n + 1) > tab.size:
        return _FLOWS_FULL, np.int64(-1)
    for j in range(5):  # not keys[n, :] = k, which needs numba's runtime
        keys[n, j] = k[j]
    tab[s] = n
    st[S_NFLOWS] = n + 1
    return _PACKET, n


@njit(**_JIT_INLINE)
def _frame_size(origlen, fcs, lt):
    """Ethernet frame bytes with the FCS, as rxlab.traffic counts them."""
    size = origlen - fcs + 18  # origlen >= caplen, <= MAX_WIRE (_lengths)
    if lt == 1:
        size -= 14
    elif lt == 113:
        size -= 16
    elif lt == 276:
        size -= 20
    return max(size, MIN_FRAME)


@njit(**JIT)
def _scan(buf, pos, end, fmt, be, if_lt, if_mode, if_a, if_b, if_off, if_fcs, if_snap, nif,
          keys, counts, tab, st, emit, out_t, out_f, out_s, t_limit, speed):
    """Parse whole records in buf[pos:end]; returns (status, pos of the next record)."""
    k = np.empty(5, np.int64)
    nout = st[S_NOUT]  # packets already in the output arrays (Python resets it)
    while True:
        if emit and nout >= out_t.size:
            st[S_NOUT] = nout
            return _OUT_FULL, pos
        if fmt == 0:
            code, iface, ts, p, caplen, origlen, nxt = _pcap_record(buf, pos, end, be, if_a, st)
        else:
            code, iface, ts, p, caplen, origlen, nxt = _pcapng_block(
                buf, pos, end, be, if_mode, if_a, if_b, if_off, nif, st)
        if code == _NOT_PACKET:
            pos = nxt
            continue
        if code != _PACKET:
            st[S_NOUT] = nout
            return code, pos
        st[S_RECORDS] += 1
        st[S_LAST_ABS] = ts
        lt = if_lt[iface]
        # a record longer than the interface's snap length is cut to it (libpcap)
        code = _dissect(buf, p, min(caplen, if_snap[iface]), lt, k)
        if code != 0:
            st[code] += 1
            pos = nxt
            continue
        # replay time, before the flow table changes (a record refused here adds no flow)
        t0 = st[S_T0] if st[S_HAVE_T0] else ts
        rel = _replay_ns(ts - t0, speed)  # |ts - t0| < 2^63: both are in [0, 2^63)
        if rel > MAX_REPLAY_NS:
            st[S_ERR] = 11
            st[S_ERR_ARG] = (ts - t0) // 1_000_000_000
            st[S_RECORDS] -= 1
            st[S_NOUT] = nout
            return _CORRUPT, pos
        code, f = _flow_row(k, keys, tab, emit, st)
        if code != _PACKET:
            if code == _FLOWS_FULL:  # Python grows the table and hands the record back
                st[S_RECORDS] -= 1
            st[S_NOUT] = nout
            return code, pos
        st[S_T0] = t0
        st[S_HAVE_T0] = 1
        if rel < st[S_LAST_T]:  # stamped before its predecessor: offered right after it
            st[S_REORDERED] += 1
            rel = st[S_LAST_T]
        if emit and rel >= t_limit:
            st[S_RECORDS] -= 1
            st[S_NOUT] = nout
            return _LIMIT, pos
        st[S_LAST_T] = rel
        size = _frame_size(origlen, if_fcs[iface], lt)
        st[S_OFFERED] += 1
        st[S_BYTES] += size
        if emit:
            out_t[nout] = rel
            out_f[nout] = f
            out_s[nout] = size
            nout += 1
        else:
            counts[f] += 1
        pos = nxt


# --------------------------------------------------------------------------- Python side


def _snap(snaplen: int) -> int:
    """libpcap's pcap_adjust_snapshot: 0 or above the maximum means the maximum."""
    return MAX_CAPLEN if snaplen <= 0 or snaplen > MAX_CAPLEN else snaplen


@dataclass
class _Iface:
    linktype: int
    snaplen: int
    mode: int = _IF_DEC
    a: int = 1000  # decimal: ns = ts * a // b; binary: b = the power of two
    b: int = 1
    offset_ns: int = 0
    fcs: int = 0


class _Section:
    """A pcapng section's interfaces (pcap: the one in the file header), as the columns
    ``_scan`` takes; appending one is O(1), so many interface blocks cost linear time."""

    def __init__(self, be: bool):
        self.be = be
        self.n = 0
        self.cols = np.zeros((7, 4), np.int64)

    def add(self, i: _Iface) -> None:
        if self.n == self.cols.shape[1]:
            cols = np.zeros((7, 2 * self.n), np.int64)
            cols[:, :self.n] = self.cols
            self.cols = cols
        self.cols[:, self.n] = (i.linktype, i.mode, i.a, i.b, i.offset_ns, i.fcs,
                                _snap(i.snaplen))
        self.n += 1

    def arrays(self):
        c = self.cols
        return c[0], c[1], c[2], c[3], c[4], c[5], c[6], self.n


class _Truncated(Exception):
    def __init__(self, offset: int, message: str):
        super().__init__(message)
        self.offset, self.message = offset, message


def _fcs_bytes(network: int) -> tuple[int, int]:
    """pcap header link-type field -> (link type, FCS bytes declared by its F bit)."""
    lt = network & 0x0FFFFFFF
    fcs = ((network >> 29) & 7) * 2 if network & 0x10000000 else 0
    return lt, fcs


def _parse_idb(body: bytes, be: bool, at: int) -> _Iface:
    o = ">" if be else "<"
    if len(body) < 8:
        raise _Truncated(at, "corrupt capture: pcapng interface block shorter than 20 bytes")
    lt = int.from_bytes(body[0:2], "big" if be else "little")
    snap = int.from_bytes(body[4:8], "big" if be else "little")
    iface = _Iface(lt, snap)
    i = 8
    while i + 4 <= len(body):
        code = int.from_bytes(body[i:i + 2], "big" if be else "little")
        ln = int.from_bytes(body[i + 2:i + 4], "big" if be else "little")
        val = body[i + 4:i + 4 + ln]
        if code == 0:
            break
        if len(val) < ln:
            raise _Truncated(at, f"corrupt capture: pcapng interface option {code} overruns "
                                 "its block")
        if code == 9 and ln >= 1:  # if_tsresol
            r = val[0]
            if r & 0x80:
                if (r & 0x7F) > 62:
                    raise _Truncated(at, f"corrupt capture: pcapng if_tsresol 2^-{r & 0x7F} "
                                         "is out of range")
                iface.mode, iface.a, iface.b = _IF_BIN, 1, r & 0x7F
            else:
                if r > 18:
                    raise _Truncated(at, f"corrupt capture: pcapng if_tsresol 10^-{r} is out "
                                         "of range")
                iface.mode = _IF_DEC
                iface.a, iface.b = (10 ** (9 - r), 1) if r <= 9 else (1, 10 ** (r - 9))
        elif code == 14 and ln >= 8:  # if_tsoffset, seconds
            off = int(np.frombuffer(val[:8], o + "i8")[0])
            if abs(off) > MAX_TS_S:
                raise _Truncated(at, f"corrupt capture: pcapng if_tsoffset {off} s is past "
                                     "int64 nanoseconds")
            iface.offset_ns = off * 1_000_000_000
        elif code == 13 and ln >= 1:  # if_fcslen
            iface.fcs = val[0]
        i += 4 + ((ln + 3) & ~3)
    return iface


def _open(path: Path):
    """(binary file, its fstat) of a regular file of at most MAX_CAPTURE_BYTES, checked on
    the opened descriptor (O_NONBLOCK: a FIFO put in its place does not block the open)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        raise UsageError(f"{path}: no such capture file") from None
    except OSError as err:
        raise UsageError(f"{path}: cannot read the capture ({err.strerror})") from None
    st = os.fstat(fd)
    why = None
    if stat.S_ISDIR(st.st_mode):
        why = "is a directory; give a pcap or pcapng file"
    elif not stat.S_ISREG(st.st_mode):
        why = "not a regular file (a device or a pipe); give a pcap or pcapng file"
    elif st.st_size > MAX_CAPTURE_BYTES:
        why = (f"{st.st_size:,} bytes, more than a capture may have (4 GiB); replay a part, "
               "e.g. editcap -c 1000000 (one file per million packets)")
    if why:
        os.close(fd)
        raise UsageError(f"{path}: {why}")
    return os.fdopen(fd, "rb"), st


class _Parser:
    """Drives ``_scan`` over a file read block by block. ``expect`` (pass 2): the
    (size, mtime_ns, flows) the scan saw; the replay refuses a file that differs."""

    def __init__(self, path: Path, speedup: float, stop_at: int | None = None,
                 expect: tuple[int, int, int] | None = None):
        self.path, self.speed, self.stop_at, self.expect = path, float(speedup), stop_at, expect
        self.st = np.zeros(21, np.int64)
        self.st[S_MAX_FLOWS] = NO_LIMIT if expect is None else expect[2]
        self.keys = np.zeros((1024, 5), np.int64)
        self.counts = np.zeros(1024, np.int64)
        self.tab = np.full(4096, -1, np.int64)
        self.linktypes: set[int] = set()
        self.format = ""
        self.size = self.mtime_ns = 0

    # the flow table grows by doubling; the kernel asks when it is full
    def _grow(self) -> None:
        n = int(self.st[S_NFLOWS])
        cap = self.keys.shape[0] * 2
        keys = np.zeros((cap, 5), np.int64)
        keys[:n] = self.keys[:n]
        counts = np.zeros(cap, np.int64)
        counts[:n] = self.counts[:n]
        self.keys, self.counts = keys, counts
        self.tab = np.full(cap * 4, -1, np.int64)
        _rehash(self.keys, n, self.tab)

    def run(self, emit: bool, out_cap: int = DEFAULT_CHUNK,
            t_limit: int = NO_LIMIT) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """Yields filled output arrays (emit) or nothing (scan); raises _Truncated."""
        out_t = np.empty(out_cap if emit else 0, np.int64)
        out_f = np.empty(out_cap if emit else 0, np.int32)
        out_s = np.empty(out_cap if emit else 0, np.int32)
        fh, fst = _open(self.path)
        with fh:
            self.size, self.mtime_ns = fst.st_size, fst.st_mtime_ns
            if self.expect is not None and self.expect[:2] != (self.size, self.mtime_ns):
                raise _Truncated(0, _ERRORS[12])
            limit = self.size if self.stop_at is None else min(self.size, self.stop_at)
            yield from self._run(fh, limit, emit, out_t, out_f, out_s, t_limit)

    def _run(self, fh, limit, emit, out_t, out_f, out_s, t_limit):
        head = fh.read(24)
        section, fmt, start = self._header(head)
        buf = np.empty(READ_BLOCK, np.uint8)
        base = start  # file offset of buf[0]
        fh.seek(start)
        end = 0
        pos = 0
        arrays = section.arrays()
        eof = False
        py_blocks = 0
        while True:
            if not eof and end < buf.size:
                want = min(buf.size - end, limit - (base + end))
                if want > 0:
                    got = fh.readinto(memoryview(buf)[end:end + want])
                    end += got
                    if got == 0:
                        eof = True
                if base + end >= limit:
                    eof = True
            status, pos = _scan(buf, pos, end, fmt, section.be, *arrays, self.keys,
                                self.counts, self.tab, self.st, emit, out_t, out_f,
                                out_s, t_limit, self.speed)
            if status == _OUT_FULL:
                self.st[S_NOUT] = 0
                yield out_t, out_f, out_s
                continue
            if status == _LIMIT:
                yield from self._flush(emit, out_t, out_f, out_s)
                return
            if status == _FLOWS_FULL:
                self._grow()
                continue
            if status == _CORRUPT:
                code = int(self.st[S_ERR])
                msg = _ERRORS[code].format(int(self.st[S_ERR_ARG]), int(self.st[S_ERR_ARG2]))
                if code != 12:
                    msg = "corrupt capture: " + msg
                raise _Truncated(base + pos, msg)
            if status == _PY_BLOCK:
                blen = self._block_len(buf, pos, end, section.be, base, limit)
                if blen is not None:
                    py_blocks += 1
                    if py_blocks > MAX_PY_BLOCKS:
                        raise _Truncated(base + pos, f"corrupt capture: more than "
                                         f"{MAX_PY_BLOCKS} pcapng section and interface blocks")
                    body = bytes(buf[pos + 8:pos + blen - 4])
                    btype = int.from_bytes(bytes(buf[pos:pos + 4]), "little")
                    if btype == 0x0A0D0D0A:
                        section = _Section(be=self._shb(body, base + pos))
                    else:
                        iface = _parse_idb(body, section.be, base + pos)
                        section.add(iface)
                        self.linktypes.add(iface.linktype)
                    arrays = section.arrays()
                    pos += blen
                    continue
            # _NEED_MORE: move the tail to the front and read on
            need = int(self.st[S_NEED])
            if eof or base + pos + need > limit:  # the record or block passes the end
                if pos < end or base + pos < limit:
                    raise _Truncated(
                        base + pos,
                        f"truncated capture: the record at byte offset {base + pos} needs "
                        f"{need} bytes but the file ends after {limit - base - pos}")
                yield from self._flush(emit, out_t, out_f, out_s)
                return
            if need > buf.size:
                nb = np.empty(max(need, buf.size * 2), np.uint8)
                nb[:end - pos] = buf[pos:end]
                buf = nb
            else:
                buf[:end - pos] = buf[pos:end]
            base += pos
            end -= pos
            pos = 0

    def _flush(self, emit, out_t, out_f, out_s):
        n = int(self.st[S_NOUT])
        self.st[S_NOUT] = 0
        if emit and n:
            yield out_t[:n], out_f[:n], out_s[:n]

    def _block_len(self, buf, pos, end, be, base, limit) -> int | None:
        if pos + 12 > end:
            self.st[S_NEED] = 12
            return None
        btype = int.from_bytes(bytes(buf[pos:pos + 4]), "little")
        if btype == 0x0A0D0D0A:
            be = self._bom(bytes(buf[pos + 8:pos + 12]), base + pos)
        blen = int.from_bytes(bytes(buf[pos + 4:pos + 8]), "big" if be else "little")
        if btype == 0x0A0D0D0A and (blen < 28 or blen & 3):
            raise _Truncated(base + pos, f"corrupt capture: pcapng section header length "
                                         f"{blen} is not a multiple of 4 or below 28")
        if blen < 12 or blen & 3:
            raise _Truncated(base + pos, f"corrupt capture: {_ERRORS[2].format(blen)}")
        if blen > MAX_BLOCK:
            raise _Truncated(base + pos, f"corrupt capture: {_ERRORS[6].format(blen)}")
        if pos + blen > end:
            self.st[S_NEED] = blen  # the caller reads on, or says where the file ends
            return None
        tail = int.from_bytes(bytes(buf[pos + blen - 4:pos + blen]), "big" if be else "little")
        if tail != blen:
            raise _Truncated(base + pos, f"corrupt capture: {_ERRORS[3].format(blen)}")
        return blen

    @staticmethod
    def _bom(body: bytes, at: int) -> bool:
        bom = body[:4]
        if bom == b"\x4d\x3c\x2b\x1a":
            return False
        if bom == b"\x1a\x2b\x3c\x4d":
            return True
        raise _Truncated(at, f"corrupt capture: bad pcapng byte-order magic {bom.hex()}")

    @classmethod
    def _shb(cls, body: bytes, at: int) -> bool:
        """A section header's byte order; only major version 1 is defined (a reader
        must not guess at the layout of another)."""
        be = cls._bom(body, at)
        major, minor = np.frombuffer(body[4:8], (">" if be else "<") + "u2").tolist()
        if major != 1:
            raise _Truncated(at, f"corrupt capture: pcapng section version {major}.{minor}; "
                                 "only 1.x is defined")
        return be

    def _header(self, head: bytes) -> tuple[_Section, int, int]:
        if len(head) < 4:
            raise _Truncated(0, f"truncated capture: {len(head)} bytes, too short for a header")
        magic = head[:4]
        if magic == b"\x0a\x0d\x0d\x0a":
            self.format = "pcapng"
            return _Section(be=False), 1, 0  # the kernel hands the SHB back to Python
        pcap = {b"\xd4\xc3\xb2\xa1": (False, 1000), b"\xa1\xb2\xc3\xd4": (True, 1000),
                b"\x4d\x3c\xb2\xa1": (False, 1), b"\xa1\xb2\x3c\x4d": (True, 1)}
        if magic not in pcap:
            raise UsageError(f"{self.path}: not a pcap or pcapng file (magic {magic.hex()} at "
                             "byte offset 0)")
        be, mult = pcap[magic]
        if len(head) < 24:
            raise _Truncated(0, f"truncated capture: the 24-byte pcap file header has only "
                                f"{len(head)} bytes")
        o = ">" if be else "<"
        snaplen, network = np.frombuffer(head[16:24], o + "u4").tolist()
        lt, fcs = _fcs_bytes(int(network))
        self.format = "pcap-ns" if mult == 1 else "pcap"
        self.linktypes.add(lt)
        sec = _Section(be=be)
        sec.add(_Iface(lt, int(snaplen), _IF_DEC, mult, 1, 0, fcs))
        return sec, 0, 24


@dataclass(eq=False)
class Capture:
    """A scanned capture: its flow table, counts, and a re-parsing packet stream."""

    path: Path
    speedup: float
    flows: FlowTable
    packets: int  # offered (TCP/UDP over IPv4/IPv6) packets in the intact part
    records: int  # all packet records read
    skipped: dict[str, int]
    reordered: int
    duration_ns: int  # time of the last offered packet (after speed-up) + 1
    bytes: int
    format: str
    linktypes: list[int]
    truncated_at: int | None = None  # byte offset of the first bad record, if allowed
    truncation: str | None = None
    file_size: int = 0  # as scanned: the replay reads this much and refuses a changed file
    file_mtime_ns: int = 0

    @property
    def duration_s(self) -> float:
        return self.duration_ns / 1e9

    @property
    def notice(self) -> str | None:
        """One line to print when the capture was cut short (allow_truncated)."""
        if self.truncated_at is None:
            return None
        return (f"{self.path}: {self.truncation}; replaying the intact prefix "
                f"({self.records} records, {self.packets} packets before byte offset "
                f"{self.truncated_at})")

    def summary(self) -> dict:
        return {
            "file": str(self.path), "format": self.format, "linktypes": self.linktypes,
            "records": self.records, "packets": self.packets, "flows": len(self.flows),
            "skipped": self.skipped, "reordered": self.reordered, "bytes": self.bytes,
            "duration_s": self.duration_s, "speedup": self.speedup,
            "truncated_at": self.truncated_at, "truncation": self.truncation,
        }

    def chunks(self, max_packets: int = DEFAULT_CHUNK,
               duration_ns: int | None = None) -> Iterator[Chunk]:
        """Packets in chunks of exactly ``max_packets`` (the last may be shorter);
        with ``duration_ns``, only those offered before it."""
        if max_packets < 1:
            raise ValueError(f"max_packets must be >= 1, got {max_packets}")
        stop = self.file_size if self.truncated_at is None else self.truncated_at
        p = _Parser(self.path, self.speedup, stop,
                    expect=(self.file_size, self.file_mtime_ns, len(self.flows)))
        t_limit = NO_LIMIT if duration_ns is None else min(int(duration_ns), NO_LIMIT)
        try:
            for t, f, s in p.run(True, max_packets, t_limit):
                yield Chunk(t.copy(), f.copy(), s.copy())
        except _Truncated as err:  # the file changed since it was scanned
            raise UsageError(f"{self.path}: byte offset {err.offset}: {err.message}") from None

    def packets_before(self, duration_ns: int | None) -> int:
        if duration_ns is None or duration_ns >= self.duration_ns:
            return self.packets
        return sum(len(c) for c in self.chunks(DEFAULT_CHUNK * 4, duration_ns))


def _flow_table(keys: np.ndarray, counts: np.ndarray, duration_ns: int,
                group: str) -> FlowTable:
    n = keys.shape[0]
    is_v6 = (keys[:, 4] & 1).astype(bool)
    v6_bytes = lambda c: keys[:, c:c + 2].astype(">i8").view(np.uint8).reshape(n, 16)  # noqa: E731
    zero6 = np.zeros((n, 16), np.uint8)
    total = max(int(counts.sum()), 1)
    cols = dict(
        src_v4=np.where(is_v6, 0, keys[:, 1]).astype(np.uint32),
        dst_v4=np.where(is_v6, 0, keys[:, 3]).astype(np.uint32),
        src_v6=np.where(is_v6[:, None], v6_bytes(0), zero6),
        dst_v6=np.where(is_v6[:, None], v6_bytes(2), zero6),
        sport=((keys[:, 4] >> 32) & 0xFFFF).astype(np.uint16),
        dport=((keys[:, 4] >> 16) & 0xFFFF).astype(np.uint16),
        proto=((keys[:, 4] >> 8) & 0xFF).astype(np.uint8),
        is_v6=is_v6,
        group=np.zeros(n, np.int16),
        weight=counts / total,
        rate_pps=counts / (max(duration_ns, 1) / 1e9),
    )
    for a in cols.values():
        a.setflags(write=False)
    first = np.zeros(1, np.int64)
    first.setflags(write=False)
    return FlowTable(**cols, group_names=[group], group_first=first)


def open_capture(path: str | os.PathLike, *, speedup: float = 1.0,
                 allow_truncated: bool = False, group: str = "pcap") -> Capture:
    """Scan a pcap/pcapng file: validate it, build the flow table, count packets.

    Raises ``UsageError`` (one line, with the byte offset) for a truncated or corrupt
    capture unless ``allow_truncated``, for a missing file, a device, a FIFO or a file
    over 4 GiB, a speed-up factor outside [1e-6, 1e6], or a capture without any TCP/UDP
    packet.
    """
    p = Path(path)
    try:
        speed = float(speedup)
    except (TypeError, ValueError):
        raise UsageError(f"speedup: {speedup!r} is not a number") from None
    if not MIN_SPEEDUP <= speed <= MAX_SPEEDUP:  # also NaN
        raise UsageError(f"speedup: must be >= {MIN_SPEEDUP:g} and <= {MAX_SPEEDUP:g} (a "
                         "replay at between a millionth and a million times the captured "
                         f"speed); got {speed:g}")
    parser = _Parser(p, speed)
    truncated_at = truncation = None
    try:
        for _ in parser.run(False):
            pass
    except _Truncated as err:
        if not allow_truncated:
            raise UsageError(f"{p}: byte offset {err.offset}: {err.message} "
                             "(allow_truncated / --allow-truncated replays the intact "
                             "prefix)") from None
        truncated_at, truncation = err.offset, err.message
    except OSError as err:
        raise UsageError(f"{p}: cannot read: {err.strerror or err}") from None
    st = parser.st
    n = int(st[S_NFLOWS])
    skipped = {name: int(st[slot]) for slot, name in SKIP_REASONS.items() if st[slot]}
    if n == 0:
        what = ", ".join(f"{v} {k}" for k, v in skipped.items()) or "no packet records"
        where = f" before byte offset {truncated_at}" if truncated_at is not None else ""
        raise UsageError(f"{p}: no TCP or UDP packet over IPv4/IPv6{where} ({what})")
    duration = int(st[S_LAST_T]) + 1
    flows = _flow_table(parser.keys[:n], parser.counts[:n], duration, group)
    return Capture(
        path=p, speedup=speed, flows=flows, packets=int(st[S_OFFERED]),
        records=int(st[S_RECORDS]), skipped=skipped, reordered=int(st[S_REORDERED]),
        duration_ns=duration, bytes=int(st[S_BYTES]), format=parser.format,
        linktypes=sorted(parser.linktypes), truncated_at=truncated_at, truncation=truncation,
        file_size=parser.size, file_mtime_ns=parser.mtime_ns,
    )


class PcapStream:
    """Drop-in for ``rxlab.traffic.stream.PacketStream`` over a capture.

    ``duration_s`` (the scenario's duration) cuts the replay: packets offered at or after
    it are not replayed. ``flows`` is the capture's FlowTable (one group, ``pcap``).
    """

    def __init__(self, capture: Capture, duration_s: float | None = None):
        if duration_s is not None and not duration_s > 0:
            raise ValueError(f"duration_s must be > 0, got {duration_s}")
        self.capture = capture
        self.flows = capture.flows
        self.duration_ns = (None if duration_s is None
                            else int(round(min(duration_s, MAX_REPLAY_NS / 1e9) * 1e9)))
        self._expected: int | None = None

    def expected_packets(self) -> float:
        """Packets this replay offers (exact; may re-parse when the duration cuts it)."""
        if self._expected is None:
            self._expected = self.capture.packets_before(self.duration_ns)
        return float(self._expected)

    def chunks(self, max_packets: int = DEFAULT_CHUNK) -> Iterator[Chunk]:
        return self.capture.chunks(max_packets, self.duration_ns)

    def __iter__(self) -> Iterator[Chunk]:
        return self.chunks()
