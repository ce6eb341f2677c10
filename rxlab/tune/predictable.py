"""Predictable RSS: field values that land a flow on a chosen queue (``rxlab hash
--to-queue``), as DPDK's ``rte_thash`` helpers do for crafting test traffic.

The Toeplitz hash is linear over GF(2) in its input bits (Microsoft RSS specification),
and the input bytes are affine in any one field (also after the ``sym-xor`` transform).
So with the other fields fixed, ``hash(x) = hash(0) ^ M x`` for the field value ``x``, where
column ``i`` of ``M`` is ``hash(1 << i) ^ hash(0)``. The bucket is the low ``log2(size)``
bits (``hash & (size - 1)``); for each bucket ``b`` the table sends to
queue ``Q``, the values with that bucket form an affine subspace ``x0 + span(N)``.

With ``N`` in fully reduced echelon form by highest bit (distinct leading bits, each
leading bit clear in every other vector and in ``x0``), ``x(k) = x0 ^ XOR of N[j] for
the set bits j of k`` (``N`` sorted by leading bit, highest first, as k's bits from the
top) is strictly increasing in ``k``: the first differing ``k`` bit decides the highest
differing bit of ``x``. That gives the smallest values in a range by binary search and
exact counts, without enumerating. ``sym-or-xor`` is not affine (``a | b``): ports are
then searched exhaustively (65536 values), addresses are refused.
"""

from __future__ import annotations

import heapq
import ipaddress
from dataclasses import dataclass

import numpy as np

from rxlab.nic.toeplitz import convert_rss_key, hash_input

FIELDS = ("sport", "dport", "src", "dst")


def toeplitz_rows(prepared: np.ndarray, data: np.ndarray) -> np.ndarray:
    """Hash of every row: XOR of one precomputed u32 per input byte (numpy only)."""
    if data.shape[0] == 0:
        return np.zeros(0, np.uint32)
    pos = np.arange(data.shape[1])
    return np.bitwise_xor.reduce(prepared[pos[None, :], data], axis=1).astype(np.uint32)


@dataclass
class Flow:
    key: bytes
    src: bytes  # packed address (4 or 16 bytes)
    dst: bytes
    sport: int | None
    dport: int | None
    xfrm: str = "none"

    @property
    def fields(self) -> str:
        return "sdfn" if self.sport is not None else "sd"


def hasher(flow: Flow, vary: str):
    """``h(values) -> hashes`` with field ``vary`` set to each value (addresses as ints)."""
    prepared = convert_rss_key(flow.key)
    alen = len(flow.src)

    def h(values) -> np.ndarray:
        vals = list(values)
        n = len(vals)
        s = np.broadcast_to(np.frombuffer(flow.src, np.uint8), (n, alen))
        d = np.broadcast_to(np.frombuffer(flow.dst, np.uint8), (n, alen))
        sp = dp = None
        if flow.sport is not None:
            sp = np.full(n, flow.sport, np.int64)
            dp = np.full(n, flow.dport, np.int64)
        if vary in ("sport", "dport"):
            arr = np.asarray(vals, np.int64)
            if vary == "sport":
                sp = arr
            else:
                dp = arr
        else:
            rows = np.frombuffer(b"".join(int(v).to_bytes(alen, "big") for v in vals),
                                 np.uint8).reshape(n, alen)
            if vary == "src":
                s = rows
            else:
                d = rows
        return toeplitz_rows(prepared, hash_input(s, d, sp, dp, flow.fields, flow.xfrm))

    return h


def _reduce(v: int, basis: dict[int, int]) -> int:
    while v:
        top = v.bit_length() - 1
        if top not in basis:
            break
        v ^= basis[top]
    return v


def echelon(vectors: list[int]) -> list[int]:
    """Fully reduced basis of span(vectors): distinct leading bits, each leading bit
    clear in all the others; sorted by leading bit, highest first."""
    basis: dict[int, int] = {}
    for v in vectors:
        v = _reduce(v, basis)
        if v:
            basis[v.bit_length() - 1] = v
    tops = sorted(basis, reverse=True)
    for t in tops:  # clear each leading bit from every other vector
        for u in tops:
            if u != t and basis[u] >> t & 1:
                basis[u] ^= basis[t]
    return [basis[t] for t in tops]


@dataclass
class Coset:
    """The values ``x0 ^ span(basis)``, enumerated in increasing order."""

    x0: int
    basis: list[int]  # fully reduced, leading bit descending

    @property
    def size(self) -> int:  # not __len__: len() must fit in 64 bits, a /64 has 2^64 values
        return 1 << len(self.basis)

    def at(self, k: int) -> int:
        x, d = self.x0, len(self.basis)
        for j in range(d):
            if k >> (d - 1 - j) & 1:
                x ^= self.basis[j]
        return x

    def first_at_least(self, lo: int) -> int:
        """Smallest k with at(k) >= lo (self.size if none)."""
        a, b = 0, self.size
        while a < b:
            mid = (a + b) // 2
            if self.at(mid) >= lo:
                b = mid
            else:
                a = mid + 1
        return a


def cosets(h0: int, cols: list[int], buckets, mask: int) -> list[Coset]:
    """Per target bucket b: the values x with (h0 ^ M x) & mask == b."""
    width = len(cols)
    # linear basis over images, tracking which variables combine into each
    basis: dict[int, tuple[int, int]] = {}
    kernel = []
    for i in range(width):
        v, c = cols[i] & mask, 1 << i
        while v:
            top = v.bit_length() - 1
            if top not in basis:
                break
            bv, bc = basis[top]
            v, c = v ^ bv, c ^ bc
        if v:
            basis[v.bit_length() - 1] = (v, c)
        else:
            kernel.append(c)
    kern = echelon(kernel)
    kb = {k.bit_length() - 1: k for k in kern}
    out = []
    for b in sorted(set(int(x) for x in buckets)):
        t, c = (b ^ h0) & mask, 0
        while t:
            top = t.bit_length() - 1
            if top not in basis:
                break
            bv, bc = basis[top]
            t, c = t ^ bv, c ^ bc
        if t:
            continue  # this bucket is unreachable by varying the field
        out.append(Coset(_reduce_full(c, kb), kern))
    return out


def _reduce_full(x: int, kb: dict[int, int]) -> int:
    for top in sorted(kb, reverse=True):
        if x >> top & 1:
            x ^= kb[top]
    return x


def find(flow: Flow, vary: str, table: np.ndarray, queue: int, *, lo: int, hi: int,
         base: int = 0, width: int = 16, count: int = 8) -> dict:
    """The ``count`` smallest field values in ``[lo, hi]`` (offsets above ``base`` for
    addresses) whose flow lands on ``queue``; exact total in range; verified hashes."""
    size = int(table.size)
    buckets = np.nonzero(np.asarray(table) == queue)[0]
    h = hasher(flow, vary)

    def value(x: int) -> int:
        return base | x

    out = {"queue": queue, "buckets": buckets.tolist(), "vary": vary}
    if buckets.size == 0:
        return {**out, "values": [], "total_in_range": 0, "method": "none"}
    affine = flow.xfrm != "sym-or-xor" and size & (size - 1) == 0
    if affine:
        probe = [0] + [1 << i for i in range(width)]
        hs = [int(x) for x in h([value(x) for x in probe])]
        h0, cols = hs[0], [x ^ hs[0] for x in hs[1:]]
        cs = cosets(h0, cols, buckets, size - 1)
        total = sum(c.first_at_least(hi + 1) - c.first_at_least(lo) for c in cs)
        heap = []
        for i, c in enumerate(cs):
            k = c.first_at_least(lo)
            if k < c.size:
                heapq.heappush(heap, (c.at(k), i, k))
        xs = []
        while heap and len(xs) < count:
            x, i, k = heapq.heappop(heap)
            if x > hi:
                break
            xs.append(x)
            if k + 1 < cs[i].size:
                heapq.heappush(heap, (cs[i].at(k + 1), i, k + 1))
        method = "GF(2) solve"
    else:
        if width > 20:
            raise ValueError(f"{flow.xfrm} makes the hash non-linear in {vary}; vary a "
                             "port (searched exhaustively) instead")
        allx = np.arange(lo, hi + 1, dtype=np.int64)
        hsh = h([value(int(x)) for x in allx]) if vary in ("src", "dst") else h(allx | base)
        idx = hsh & np.uint32(size - 1) if size & (size - 1) == 0 else hsh % np.uint32(size)
        ok = np.asarray(table)[idx] == queue
        total = int(ok.sum())
        xs = [int(x) for x in allx[ok][:count]]
        method = "exhaustive"
    vals = [value(x) for x in xs]
    hashes = h(vals) if vals else np.zeros(0, np.uint32)
    bidx = hashes & np.uint32(size - 1) if size & (size - 1) == 0 else hashes % np.uint32(size)
    if not all(int(np.asarray(table)[b]) == queue for b in bidx):  # verified, not trusted
        raise RuntimeError("predictable RSS: a solution does not hash to the queue")
    return {**out, "values": vals, "hashes": [int(x) for x in hashes],
            "total_in_range": int(total), "method": method}


def addr_text(v: int, v6: bool) -> str:
    return str(ipaddress.IPv6Address(v) if v6 else ipaddress.IPv4Address(v))
