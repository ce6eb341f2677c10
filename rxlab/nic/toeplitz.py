"""Toeplitz RSS hash as in tools/testing/selftests/drivers/net/hw/toeplitz.c.

Two implementations: ``toeplitz_hash`` is the slow, obviously-correct streaming form;
``convert_rss_key`` + ``softrss`` is the table-driven form (DPDK ``rte_thash`` idea):
Toeplitz is linear over GF(2), so the contribution of input byte ``p`` having value ``v``
is a fixed u32, precomputed once per key into a ``[n_bytes, 256]`` table; a 12-byte
input is then 12 lookups and XORs.

Address layout used throughout rxlab: IPv4 addresses are u32 host integers of the dotted
address (``10.0.0.1`` -> ``0x0a000001``); IPv6 addresses are ``(n, 16)`` uint8 rows in
network order. A mixed-family flow table stores every address as a 16-byte row, IPv4
ones in IPv4-mapped form (``::ffff:a.b.c.d``, see ``v4_mapped``), plus a bool ``is_v6``
column; only bytes 12..15 of an IPv4 row are read.
"""

import ipaddress
import sys
from collections.abc import Mapping

import numpy as np
from numba import njit

from rxlab.config import JIT

MS_RSS_KEY = bytes.fromhex(
    "6d5a56da255b0ec24167253d43a38fb0d0ca2bcbae7b30b477cb2da38030f20c6a42b73bbeac01fa"
)
"""Microsoft RSS verification-suite key (40 bytes)."""

_LITTLE = sys.byteorder == "little"  # the word loop reads input bytes as little-endian u32
XFRMS = ("none", "sym-xor", "sym-or-xor")

# ethtool rx-flow-hash flow types we model -> (is_v6, has_ports).
FLOW_TYPES = {
    "tcp4": (False, True), "udp4": (False, True), "sctp4": (False, True), "ip4": (False, False),
    "tcp6": (True, True), "udp6": (True, True), "sctp6": (True, True), "ip6": (True, False),
}
# Defaults are device specific (many NICs hash UDP on the 2-tuple); rxlab's default is
# the 4-tuple for every L4 type and the 2-tuple otherwise.
DEFAULT_RX_FLOW_HASH = {t: ("sdfn" if ports else "sd") for t, (_, ports) in FLOW_TYPES.items()}
_KIND_PROTO = {"tcp": 6, "udp": 17, "sctp": 132}
_KINDS = ("ip", *_KIND_PROTO)
_PROTO_KIND = {v: k for k, v in _KIND_PROTO.items()}
# ethtool letters whose serialisation into the hash input is NIC specific
# (ethtool_set_rxfh_fields, net/ethtool/ioctl.c).
_UNMODELLED = {"m": "L2DA", "v": "VLAN", "t": "L3 proto", "e": "GTP TEID", "r": "discard"}


def parse_key(hex_str: str, min_len: int = 40) -> bytes:
    """Parse an RSS key given as ``6d5a56da...`` or ethtool's ``6d:5a:56:...`` form.

    ``min_len`` defaults to 40 bytes, the key length an IPv6 4-tuple (36 bytes) needs.
    """
    s = hex_str.strip().lower()
    if ":" in s:
        parts = s.split(":")
        if any(len(p) != 2 for p in parts):
            raise ValueError(f"RSS key {hex_str!r}: colon form needs exactly 2 hex digits per byte")
        s = "".join(parts)
    if not s or any(c not in "0123456789abcdef" for c in s):
        raise ValueError(f"RSS key {hex_str!r}: not a hex string")
    if len(s) % 2:
        raise ValueError(f"RSS key {hex_str!r}: odd number of hex digits ({len(s)})")
    key = bytes.fromhex(s)
    if len(key) < min_len:
        raise ValueError(f"RSS key is {len(key)} bytes; at least {min_len} are needed")
    return key


def toeplitz_hash(key: bytes, data: bytes) -> int:
    """toeplitz() of the kernel selftest: streaming form, one input bit at a time.

    The register holds the 32-bit key window starting at the current bit; it is XORed
    into the result for each set input bit, then slides one key bit to the left.
    """
    key, data = bytes(key), bytes(data)
    if len(key) < len(data) + 4:
        raise ValueError(f"{len(data)}-byte input needs a key of >= {len(data) + 4} bytes")
    reg = int.from_bytes(key[:4], "big")
    result = 0
    for i in range(8 * len(data)):
        if (data[i >> 3] >> (7 - (i & 7))) & 1:
            result ^= reg
        nxt = 32 + i  # key bit shifted in next
        bit = (key[nxt >> 3] >> (7 - (nxt & 7))) & 1 if nxt < 8 * len(key) else 0
        reg = ((reg << 1) | bit) & 0xFFFFFFFF
    return result


def convert_rss_key(key: bytes) -> np.ndarray:
    """Prepare ``key`` once: uint32 ``[len(key) - 4, 256]`` table, ``T[p, v]`` = hash of
    byte ``v`` at input position ``p`` (all other bytes zero). Supports inputs up to
    ``len(key) - 4`` bytes."""
    key = bytes(key)
    if len(key) < 5:
        raise ValueError(f"RSS key of {len(key)} bytes is too short")
    nbits = 8 * (len(key) - 4)
    k = int.from_bytes(key, "big")
    shift = 8 * len(key) - 32
    win = np.array([(k >> (shift - i)) & 0xFFFFFFFF for i in range(nbits)], dtype=np.uint32)
    win = win.reshape(-1, 8)  # [position, bit 0 = MSB]
    bits = (np.arange(256)[:, None] >> (7 - np.arange(8))) & 1  # [value, bit]
    sel = np.where(bits[None, :, :] == 1, win[:, None, :], np.uint32(0))
    return np.bitwise_xor.reduce(sel, axis=2).astype(np.uint32)


@njit(**JIT)
def _rows_bytes(tf, df, out, width):
    """Row loop, one byte at a time: XOR of one table entry per input byte."""
    b = 0
    for i in range(out.shape[0]):
        h = np.uint32(0)
        for p in range(width):
            h ^= tf[(p << 8) + np.int64(df[b + p])]
        out[i] = h
        b += width


@njit(**JIT)
def _rows_words(tf, dw, out, nw):
    """Row loop over little-endian u32 words: one load feeds four table lookups."""
    for i in range(out.shape[0]):
        h = np.uint32(0)
        for q in range(nw):
            w = np.int64(dw[i * nw + q])
            t = q << 10  # table row of the word's first byte, times 256
            h ^= (tf[t + (w & 255)] ^ tf[t + 256 + ((w >> 8) & 255)]
                  ^ tf[t + 512 + ((w >> 16) & 255)] ^ tf[t + 768 + (w >> 24)])
        out[i] = h


@njit(**JIT)
def _softrss_rows(table, data, out):
    """softrss kernel. Widths that are whole words take the word loop; the usual ones
    (IPv4 2/4-tuple, IPv6 2/4-tuple) pass a literal word count, which LLVM propagates and
    fully unrolls. That beats a plain byte-table loop in C (-O3)."""
    width = data.shape[1]
    tf = table.ravel()
    if _LITTLE and width % 4 == 0:
        dw = data.ravel().view(np.uint32)
        nw = width // 4
        if nw == 3:
            _rows_words(tf, dw, out, 3)
        elif nw == 2:
            _rows_words(tf, dw, out, 2)
        elif nw == 9:
            _rows_words(tf, dw, out, 9)
        elif nw == 8:
            _rows_words(tf, dw, out, 8)
        else:
            _rows_words(tf, dw, out, nw)
    else:
        _rows_bytes(tf, data.ravel(), out, width)
    return out


def softrss(prepared: np.ndarray, data: np.ndarray) -> np.ndarray:
    """Hash every row of an ``(n, L)`` uint8 array with a ``convert_rss_key`` table."""
    data = np.ascontiguousarray(data, dtype=np.uint8)
    if data.ndim != 2:
        raise ValueError(f"softrss wants an (n, L) uint8 array, got shape {data.shape}")
    if data.shape[1] > prepared.shape[0]:
        raise ValueError(f"{data.shape[1]}-byte input needs a key of >= {data.shape[1] + 4} bytes")
    out = np.empty(data.shape[0], dtype=np.uint32)
    return _softrss_rows(np.ascontiguousarray(prepared, dtype=np.uint32), data, out)


# ---- hash inputs -------------------------------------------------------------------


def int_column(x, hi: int, what: str) -> np.ndarray:
    """Integer array-like (or scalar) -> 1-D array, checked to lie in ``0..hi``."""
    a = np.atleast_1d(np.asarray(x))
    if a.dtype.kind not in "iu":
        raise ValueError(f"{what} must be integers, got dtype {a.dtype}")
    if a.size and (int(a.min()) < 0 or int(a.max()) > hi):
        raise ValueError(f"{what} out of range 0..{hi}")
    return a


def _be_bytes(x, width: int, what: str) -> np.ndarray:
    """Integers -> (n, width) uint8 rows in network order."""
    a = int_column(x, (1 << (8 * width)) - 1, what)
    return a.astype(f">u{width}").view(np.uint8).reshape(-1, width)


def _addr16(x, what: str) -> np.ndarray:
    a = np.frombuffer(x, np.uint8) if isinstance(x, bytes | bytearray) else np.asarray(x, np.uint8)
    a = a.reshape(1, 16) if a.shape == (16,) else a
    if a.ndim != 2 or a.shape[1] != 16:
        raise ValueError(f"{what} must be (n, 16) uint8 rows, got shape {a.shape}")
    return a


def v4_bytes(addr_u32) -> np.ndarray:
    """IPv4 u32 host integers -> (n, 4) uint8 in network order."""
    return _be_bytes(addr_u32, 4, "IPv4 address")


def v4_mapped(addr_u32) -> np.ndarray:
    """IPv4 u32 host integers -> (n, 16) IPv4-mapped rows ``::ffff:a.b.c.d``."""
    b = v4_bytes(addr_u32)
    out = np.zeros((b.shape[0], 16), dtype=np.uint8)
    out[:, 10:12] = 0xFF
    out[:, 12:] = b
    return out


def parse_addrs(addrs) -> tuple[np.ndarray, np.ndarray]:
    """Address strings -> (``(n, 16)`` uint8 rows, ``is_v6`` bool); IPv4 rows are mapped."""
    rows = np.zeros((len(addrs), 16), dtype=np.uint8)
    is_v6 = np.zeros(len(addrs), dtype=bool)
    for i, s in enumerate(addrs):
        ip = ipaddress.ip_address(s)  # ValueError with the offending text
        is_v6[i] = ip.version == 6
        packed = ip.packed if is_v6[i] else ipaddress.IPv6Address(f"::ffff:{ip}").packed
        rows[i] = np.frombuffer(packed, dtype=np.uint8)
    return rows, is_v6


def check_fields(fields: str, flow_type: str | None = None, input_xfrm: str = "none") -> str:
    """Validate ethtool rx-flow-hash letters; return the canonical subset of ``"sdfn"``.

    With a symmetric ``input_xfrm`` the set must hold src iff dst and sport iff dport
    (``ethtool_rxfh_config_is_sym`` in net/ethtool/common.c).
    """
    if input_xfrm not in XFRMS:
        raise ValueError(f"input_xfrm {input_xfrm!r}: choose one of {', '.join(XFRMS)}")
    for c in fields:
        if c in _UNMODELLED:
            raise ValueError(f"rx-flow-hash field {c!r} ({_UNMODELLED[c]}) is NIC specific, "
                             "not modelled")
        if c not in "sdfn":
            raise ValueError(f"rx-flow-hash field {c!r} unknown (use letters from 'sdfn')")
    canon = "".join(c for c in "sdfn" if c in fields)
    if not canon:
        raise ValueError("rx-flow-hash: no field selected")
    if flow_type is not None:
        if flow_type not in FLOW_TYPES:
            raise ValueError(f"flow type {flow_type!r}: choose one of {', '.join(FLOW_TYPES)}")
        if not FLOW_TYPES[flow_type][1] and ("f" in canon or "n" in canon):
            raise ValueError(f"flow type {flow_type} has no L4 ports (fields 'f'/'n')")
    if input_xfrm != "none" and (("s" in canon) != ("d" in canon) or
                                 ("f" in canon) != ("n" in canon)):
        raise ValueError(f"{input_xfrm} needs src with dst and sport with dport, got {fields!r}")
    return canon


def hash_input(src_b, dst_b, sport=None, dport=None, fields="sdfn", input_xfrm="none"):
    """Build the ``(n, L)`` Toeplitz input from byte columns, fields in src,dst,sport,dport
    order (toeplitz.c selftest) after the symmetric transform (RXH_XFRM_SYM_*,
    include/uapi/linux/ethtool.h)."""
    canon = check_fields(fields, None, input_xfrm)
    cols = {"s": np.atleast_2d(src_b), "d": np.atleast_2d(dst_b)}
    if "f" in canon or "n" in canon:
        if sport is None or dport is None:
            raise ValueError("fields 'f'/'n' need sport and dport")
        cols["f"], cols["n"] = _be_bytes(sport, 2, "port"), _be_bytes(dport, 2, "port")
    if input_xfrm != "none":
        for a, b in (("s", "d"), ("f", "n")):
            if a in canon:
                x = cols[a] ^ cols[b]
                cols[a] = (cols[a] | cols[b]) if input_xfrm == "sym-or-xor" else x
                cols[b] = x
    n = max(c.shape[0] for c in cols.values())  # scalars broadcast against columns
    parts = [np.broadcast_to(cols[c], (n, cols[c].shape[1])) for c in canon]
    return np.ascontiguousarray(np.concatenate(parts, axis=1), np.uint8)


def tuple_bytes_v4(src_u32, dst_u32, sport=None, dport=None, with_ports=True,
                   input_xfrm="none") -> np.ndarray:
    """IPv4 2-tuple (8 bytes) or 4-tuple (12 bytes) Toeplitz input rows."""
    return hash_input(v4_bytes(src_u32), v4_bytes(dst_u32), sport, dport,
                      "sdfn" if with_ports else "sd", input_xfrm)


def tuple_bytes_v6(src16, dst16, sport=None, dport=None, with_ports=True,
                   input_xfrm="none") -> np.ndarray:
    """IPv6 2-tuple (32 bytes) or 4-tuple (36 bytes) Toeplitz input rows."""
    return hash_input(_addr16(src16, "IPv6 src"), _addr16(dst16, "IPv6 dst"), sport, dport,
                      "sdfn" if with_ports else "sd", input_xfrm)


def flow_addr_rows(src, dst, is_v6):
    """Normalise addresses of either family (module layout) to (src16, dst16, is_v6 mask)."""
    if np.ndim(is_v6) == 0:
        if is_v6:
            s16, d16 = _addr16(src, "IPv6 src"), _addr16(dst, "IPv6 dst")
        else:
            s16, d16 = v4_mapped(src), v4_mapped(dst)
        v6 = np.full(s16.shape[0], bool(is_v6))
    else:
        s16, d16 = _addr16(src, "src"), _addr16(dst, "dst")
        v6 = np.asarray(is_v6, dtype=bool).reshape(-1)
    if not s16.shape[0] == d16.shape[0] == v6.shape[0]:
        raise ValueError("src, dst and is_v6 must have the same number of flows")
    return s16, d16, v6


def flow_type_of(proto: int, is_v6: bool) -> str:
    """ethtool flow type of a packet: tcp/udp/sctp by IP protocol, else ip4/ip6."""
    return _PROTO_KIND.get(int(proto), "ip") + ("6" if is_v6 else "4")


def rss_hash_flows(key, src, dst, sport=None, dport=None, is_v6=False, fields="sdfn",
                   input_xfrm="none", proto=None) -> np.ndarray:
    """Toeplitz hash of every flow, vectorised; returns uint32 ``(n,)``.

    ``key``: key bytes or a ``convert_rss_key`` table. Addresses follow the module
    layout: ``is_v6`` False -> u32 arrays, True -> ``(n, 16)`` rows, bool array -> mixed
    table of 16-byte rows. ``fields``: letters used for every flow, or a mapping flow type
    -> letters (``DEFAULT_RX_FLOW_HASH`` fills gaps) which then needs ``proto`` per flow.
    """
    table = key if isinstance(key, np.ndarray) else convert_rss_key(key)
    per_type = isinstance(fields, Mapping)
    s16, d16, v6 = flow_addr_rows(src, dst, is_v6)
    n = s16.shape[0]
    kind = np.zeros(n, dtype=np.int64)  # index into _KINDS; 0 = "ip" (no L4 ports)
    if per_type:
        if proto is None:
            raise ValueError("per-flow-type fields need proto")
        pr = np.broadcast_to(int_column(proto, 255, "proto"), (n,))
        for k, name in enumerate(_KINDS[1:], 1):
            kind[pr == _KIND_PROTO[name]] = k
    sp = None if sport is None else np.broadcast_to(int_column(sport, 0xFFFF, "sport"), (n,))
    dp = None if dport is None else np.broadcast_to(int_column(dport, 0xFFFF, "dport"), (n,))
    out = np.zeros(n, dtype=np.uint32)
    group = 2 * kind + v6
    for g in np.unique(group):
        fam = bool(g & 1)
        if per_type:
            ftype = _KINDS[g >> 1] + ("6" if fam else "4")
            flds = check_fields(fields.get(ftype, DEFAULT_RX_FLOW_HASH[ftype]), ftype,
                                input_xfrm)
        else:
            flds = fields
        mask = group == g
        idx = np.nonzero(mask)[0]
        lo = 0 if fam else 12  # IPv4 rows carry the address in bytes 12..15
        inp = hash_input(s16[idx, lo:], d16[idx, lo:], None if sp is None else sp[idx],
                         None if dp is None else dp[idx], flds, input_xfrm)
        out[idx] = softrss(table, inp)
    return out
