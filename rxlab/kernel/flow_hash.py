"""Software flow hash ``__skb_get_hash_net()`` of net/core/flow_dissector.c.

hash = low 32 bits of SipHash-2-4(hashrnd, struct flow_keys from ``basic`` on), 0 -> 1,
after ``__flow_hash_consistentify()`` sorted addresses and ports so both directions of a
flow hash alike. The buffer layout (``flow_keys_bytes``) is x86-64's. Modelled keys:
addresses, ports, IP protocol, IPv6 flow label; VLAN, GRE key and tunnels stay zero.
"""

import numpy as np
from numba import njit

from rxlab.config import JIT
from rxlab.nic.toeplitz import flow_addr_rows, int_column

DEFAULT_HASHRND = b"rxlab-flow-hash!".hex()
"""Our fixed stand-in for the boot-random 128-bit ``hashrnd`` (the kernel's is unknowable):
the 16 ASCII bytes ``rxlab-flow-hash!`` as 32 hex chars, in memory order."""

ETH_P_IP, ETH_P_IPV6 = 0x0800, 0x86DD
# proto_ports_offset() (include/linux/in.h): protocols whose first 4 L4 bytes (AH: bytes
# 4..7) are the "ports"; for ESP/AH that is the SPI, passed here as sport = SPI >> 16,
# dport = SPI & 0xffff. Other protocols hash with ports 0.
PORT_PROTOS = (6, 17, 33, 50, 51, 132, 136)  # TCP UDP DCCP ESP AH SCTP UDP-Lite
ADDRS_OFF = 36  # offset of flow_keys.addrs relative to flow_keys.basic
HASH_LEN_V4, HASH_LEN_V6 = 48, 72  # flow_keys_hash_length(): struct tail after addrs

_C0, _C1 = np.uint64(0x736F6D6570736575), np.uint64(0x646F72616E646F6D)
_C2, _C3 = np.uint64(0x6C7967656E657261), np.uint64(0x7465646279746573)


def siphash_key(hashrnd: str = DEFAULT_HASHRND) -> tuple[int, int]:
    """32 hex chars -> (k0, k1): the two little-endian u64 halves of ``siphash_key_t``."""
    s = hashrnd.strip().lower()
    if len(s) != 32 or any(c not in "0123456789abcdef" for c in s):
        raise ValueError(f"hashrnd {hashrnd!r}: need exactly 32 hex digits (128 bits)")
    b = bytes.fromhex(s)
    return int.from_bytes(b[:8], "little"), int.from_bytes(b[8:], "little")


@njit(**JIT)
def _rotl(x, b):
    return (x << np.uint64(b)) | (x >> np.uint64(64 - b))


@njit(**JIT)
def _sipround(v0, v1, v2, v3):
    v0 += v1
    v1 = _rotl(v1, 13) ^ v0
    v0 = _rotl(v0, 32)
    v2 += v3
    v3 = _rotl(v3, 16) ^ v2
    v0 += v3
    v3 = _rotl(v3, 21) ^ v0
    v2 += v1
    v1 = _rotl(v1, 17) ^ v2
    v2 = _rotl(v2, 32)
    return v0, v1, v2, v3


@njit(**JIT)
def siphash24(k0, k1, data):
    """siphash() of lib/siphash.c: SipHash-2-4, 64-bit output, little-endian message words."""
    k0, k1 = np.uint64(k0), np.uint64(k1)
    v0, v1, v2, v3 = k0 ^ _C0, k1 ^ _C1, k0 ^ _C2, k1 ^ _C3
    n = data.shape[0]
    end = n - (n & 7)
    for off in range(0, end, 8):
        m = np.uint64(0)
        for j in range(8):
            m |= np.uint64(data[off + j]) << np.uint64(8 * j)
        v3 ^= m
        v0, v1, v2, v3 = _sipround(v0, v1, v2, v3)
        v0, v1, v2, v3 = _sipround(v0, v1, v2, v3)
        v0 ^= m
    b = np.uint64(n & 0xFF) << np.uint64(56)  # final word carries len << 56
    for j in range(n - end):
        b |= np.uint64(data[end + j]) << np.uint64(8 * j)
    v3 ^= b
    v0, v1, v2, v3 = _sipround(v0, v1, v2, v3)
    v0, v1, v2, v3 = _sipround(v0, v1, v2, v3)
    v0 ^= b
    v2 ^= np.uint64(0xFF)
    for _ in range(4):
        v0, v1, v2, v3 = _sipround(v0, v1, v2, v3)
    return v0 ^ v1 ^ v2 ^ v3


@njit(**JIT)
def _flow_hash_rows(k0, k1, bufs, out):
    """__flow_hash_from_keys() per row: u32 truncation of siphash, 0 reserved for "no hash"."""
    for i in range(bufs.shape[0]):
        h = np.uint32(siphash24(k0, k1, bufs[i]) & np.uint64(0xFFFFFFFF))
        out[i] = h if h != 0 else np.uint32(1)
    return out


def flow_keys_bytes(src, dst, sport, dport, proto, is_v6: bool, flow_label=0) -> np.ndarray:
    """The hashed bytes of ``struct flow_keys`` for flows of one family: ``(n, 48)`` (IPv4)
    or ``(n, 72)`` (IPv6) uint8, after canonicalisation (struct flow_keys,
    include/net/flow_dissector.h).

    Addresses as in rxlab.nic.toeplitz: IPv4 u32 host integers, IPv6 ``(n, 16)`` rows.
    A non-zero IPv6 ``flow_label`` stops dissection after the IPv6 header (ports 0).
    """
    s16, d16, _ = flow_addr_rows(src, dst, bool(is_v6))
    cols = _columns(s16.shape[0], sport, dport, proto, flow_label)
    return _keys_buf(s16, d16, bool(is_v6), *cols)


def _columns(n, sport, dport, proto, flow_label):
    """Validate and broadcast the per-flow integer columns to length ``n``."""
    lab = 0 if flow_label is None else flow_label
    return tuple(np.broadcast_to(int_column(x, hi, what), (n,)) for x, hi, what in (
        (sport, 0xFFFF, "sport"), (dport, 0xFFFF, "dport"), (proto, 255, "proto"),
        (lab, 0xFFFFF, "flow label")))


def _keys_buf(s16, d16, is_v6, sport, dport, proto, lab):
    """Fill the flow_keys bytes from 16-byte address rows (IPv4 in bytes 12..15)."""
    n, a = s16.shape[0], 16 if is_v6 else 4
    s, d = s16[:, 16 - a:].copy(), d16[:, 16 - a:].copy()
    if not is_v6 and lab.any():
        raise ValueError("flow label is an IPv6 field")
    has_ports = np.isin(proto, PORT_PROTOS) & (lab == 0)
    sp_b = np.where(has_ports, sport, 0).astype(">u2").view(np.uint8).reshape(n, 2)
    dp_b = np.where(has_ports, dport, 0).astype(">u2").view(np.uint8).reshape(n, 2)
    # __flow_hash_consistentify(): addresses and ports are sorted independently.
    if is_v6:  # memcmp(dst, src) < 0 == lexicographic compare of big-endian u64 halves
        shi, slo = s[:, :8].view(">u8")[:, 0], s[:, 8:].view(">u8")[:, 0]
        dhi, dlo = d[:, :8].view(">u8")[:, 0], d[:, 8:].view(">u8")[:, 0]
        swap_a = (dhi < shi) | ((dhi == shi) & (dlo < slo))
    else:  # (u32) dst < (u32) src on network-order memory loaded little-endian (x86)
        swap_a = d.view("<u4")[:, 0] < s.view("<u4")[:, 0]
    swap_p = dp_b.view("<u2")[:, 0] < sp_b.view("<u2")[:, 0]  # (u16) compare, same idea
    s[swap_a], d[swap_a] = d[swap_a], s[swap_a].copy()
    sp_b[swap_p], dp_b[swap_p] = dp_b[swap_p], sp_b[swap_p].copy()
    buf = np.zeros((n, HASH_LEN_V6 if is_v6 else HASH_LEN_V4), dtype=np.uint8)
    buf[:, 0:2] = np.frombuffer((ETH_P_IPV6 if is_v6 else ETH_P_IP).to_bytes(2, "big"), np.uint8)
    buf[:, 2] = proto
    buf[:, 4:8] = lab.astype("<u4").view(np.uint8).reshape(n, 4)  # host-order u32
    buf[:, 28:30], buf[:, 30:32] = sp_b, dp_b
    buf[:, ADDRS_OFF:ADDRS_OFF + a], buf[:, ADDRS_OFF + a:ADDRS_OFF + 2 * a] = s, d
    return buf


def flow_keys_have_l4(sport, dport, proto, flow_label=0) -> np.ndarray:
    """flow_keys_have_l4(): ``ports.ports != 0 or tags.flow_label != 0`` (after dissection)."""
    pr, lab = np.asarray(proto), np.asarray(flow_label)
    ports = (np.asarray(sport).astype(np.int64) << 16) | np.asarray(dport).astype(np.int64)
    return (np.isin(pr, PORT_PROTOS) & (lab == 0) & (ports != 0)) | (lab != 0)


def skb_get_hash_flows(hashrnd, src, dst, sport, dport, proto, is_v6=False, flow_label=None):
    """``skb_get_hash()`` of every flow (software path): ``(hash uint32, l4_hash bool)``.

    Mixed families as in ``rss_hash_flows``: a bool ``is_v6`` array with 16-byte address
    rows (IPv4-mapped for IPv4 flows). ``hashrnd``: 32 hex chars, or None for the default.
    """
    k0, k1 = (np.uint64(k) for k in siphash_key(hashrnd or DEFAULT_HASHRND))
    s16, d16, v6 = flow_addr_rows(src, dst, is_v6)
    cols = _columns(s16.shape[0], sport, dport, proto, flow_label)
    out = np.zeros(s16.shape[0], dtype=np.uint32)
    for fam in np.unique(v6):
        idx = np.nonzero(v6 == fam)[0]
        buf = _keys_buf(s16[idx], d16[idx], bool(fam), *(c[idx] for c in cols))
        out[idx] = _flow_hash_rows(k0, k1, buf, np.empty(idx.size, dtype=np.uint32))
    return out, flow_keys_have_l4(*cols)
