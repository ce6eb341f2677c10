"""SO_REUSEPORT: which socket of a group reads a flow (vectorised over the flow table).

Without a reuseport BPF program the kernel picks ``socks[reciprocal_scale(hash, n)]``
(reuseport_select_sock_by_hash(), net/core/sock_reuseport.c). The hash is not the skb
hash: the lookup computes its own keyed jhash of the 4-tuple, ``ehashfn(net, daddr,
hnum, saddr, sport)`` (inet_lookup_reuseport(), net/ipv4/inet_hashtables.c, in 6.x;
earlier the same call sits in udp4_lib_lookup2() and inet_lhash2_lookup(), since the
O(1) selection of v4.5 (UDP) and v4.6 (TCP)):

- UDP/IPv4 ``udp_ehashfn`` (net/ipv4/udp.c), TCP/IPv4 ``inet_ehashfn``
  (net/ipv4/inet_hashtables.c): ``__inet_ehashfn(laddr, lport, faddr, fport,
  secret + net_hash_mix(net))`` = ``jhash_3words(laddr, faddr, lport << 16 | fport,
  initval)`` (include/net/inet_sock.h);
- UDP/IPv6 ``udp6_ehashfn`` (net/ipv6/udp.c), TCP/IPv6 ``inet6_ehashfn``
  (net/ipv6/inet6_hashtables.c): ``jhash_3words(laddr->s6_addr32[3],
  __ipv6_addr_jhash(faddr, secret2), lport << 16 | fport, secret + net_hash_mix(net))``.

A TCP flow's reader is the listener chosen for its SYN, whose accept queue the thread
reads. Each secret is ``net_get_random_once()``, drawn at first use after boot, so the
pick of a flow is unknowable; here the secrets are drawn from the scenario's seed
(``SeedSequence([seed, 3])``): another seed is another boot. Addresses and ports enter
as the kernel reads them from the headers on a little-endian host (x86-64, arm64).

Version changes (mainline): v6.5 "tcp: Reduce chance of collisions in inet6_hashfn()"
hashes all four words of the address in ``__ipv6_addr_jhash`` (before: ``jhash_3words(
w0 ^ w1, w2, w3)``), and "udp6: fix udp6_ehashfn() typo" keys udp6_ehashfn with
``udp6_ehash_secret`` (before: ``udp_ipv6_hash_secret``, the faddr key). Both went to
stable kernels too. Kernels before v4.5 (UDP) / v4.6 (TCP) walked the group and chose
among its best-scoring sockets by next_pseudo_random32() seeded with the same hash; they
get the later rule here.
"""

from __future__ import annotations

import numpy as np

JHASH_INITVAL = 0xDEADBEEF  # include/linux/jhash.h
SECRETS = ("inet", "udp", "inet6", "ipv6", "udp6", "udp_ipv6", "hash_mix")
U32 = np.uint32


def _rol32(x: np.ndarray, k: int) -> np.ndarray:
    return (x << U32(k)) | (x >> U32(32 - k))


def _mix(a, b, c):
    """__jhash_mix (lookup3 mix())."""
    a = a - c; a = a ^ _rol32(c, 4); c = c + b  # noqa: E702
    b = b - a; b = b ^ _rol32(a, 6); a = a + c  # noqa: E702
    c = c - b; c = c ^ _rol32(b, 8); b = b + a  # noqa: E702
    a = a - c; a = a ^ _rol32(c, 16); c = c + b  # noqa: E702
    b = b - a; b = b ^ _rol32(a, 19); a = a + c  # noqa: E702
    c = c - b; c = c ^ _rol32(b, 4); b = b + a  # noqa: E702
    return a, b, c


def _final(a, b, c):
    """__jhash_final (lookup3 final()): the hash is c."""
    c = (c ^ b) - _rol32(b, 14)
    a = (a ^ c) - _rol32(c, 11)
    b = (b ^ a) - _rol32(a, 25)
    c = (c ^ b) - _rol32(b, 16)
    a = (a ^ c) - _rol32(c, 4)
    b = (b ^ a) - _rol32(a, 14)
    return (c ^ b) - _rol32(b, 24)


def _u32(*xs):
    return [np.atleast_1d(np.asarray(x, dtype=np.uint64)).astype(U32) for x in xs]


def jhash_3words(a, b, c, initval) -> np.ndarray:
    """jhash_3words() of include/linux/jhash.h, element-wise on u32 arrays."""
    a, b, c, iv = np.broadcast_arrays(*_u32(a, b, c, initval))
    iv = iv + U32(JHASH_INITVAL + 12)
    return _final(a + iv, b + iv, c + iv)


def jhash2_4(words, initval) -> np.ndarray:
    """jhash2(k, 4, initval) of include/linux/jhash.h; ``words`` is (n, 4) u32."""
    w = np.asarray(words, dtype=U32)
    iv = np.broadcast_to(_u32(initval)[0], w.shape[:1]) + U32(JHASH_INITVAL + 16)
    a, b, c = _mix(iv + w[:, 0], iv + w[:, 1], iv + w[:, 2])
    return _final(a + w[:, 3], b, c)


def s6_addr32(addr16: np.ndarray) -> np.ndarray:
    """(n, 16) network-order bytes -> (n, 4) ``s6_addr32[]`` as a little-endian CPU reads them."""
    return np.ascontiguousarray(addr16, dtype=np.uint8).view("<u4").astype(U32)


def ipv6_addr_jhash(addr16, initval, whole: bool = True) -> np.ndarray:
    """__ipv6_addr_jhash() of include/net/ipv6.h: jhash2 over the 4 words (v6.5+), or
    jhash_3words(w0 ^ w1, w2, w3) before."""
    w = s6_addr32(addr16)
    if whole:
        return jhash2_4(w, initval)
    return jhash_3words(w[:, 0] ^ w[:, 1], w[:, 2], w[:, 3], initval)


def ehash_secrets(seed: int) -> dict[str, int]:
    """The boot-random keys of the lookup hashes (and ``net_hash_mix``), from the seed."""
    vals = np.random.SeedSequence([int(seed), 3]).generate_state(len(SECRETS), np.uint32)
    return dict(zip(SECRETS, (int(v) for v in vals), strict=True))


def lookup_hash(fl, secrets: dict[str, int], inet6_hash_whole: bool,
                rows: np.ndarray | None = None) -> np.ndarray:
    """The hash reuseport_select_sock() gets for each flow (u32), of a FlowTable's
    ``rows`` (a bool mask or indices; default all flows). ``inet6_hash_whole``: the v6.5
    rule (versions.KernelBehaviour.inet6_hash_whole)."""
    idx = np.arange(len(fl)) if rows is None else np.arange(len(fl))[rows]
    s = {k: U32(v) for k, v in secrets.items()}
    udp, is_v6 = fl.proto[idx] == 17, fl.is_v6[idx]
    # lport is hnum (host order); fport a __be16 read as a u32: its bytes swapped
    sport = fl.sport[idx].astype(np.uint16).byteswap().astype(U32)
    ports = (fl.dport[idx].astype(U32) << U32(16)) | sport
    out = np.zeros(len(idx), U32)
    v4 = ~is_v6
    if v4.any():  # __be32 addresses read by a little-endian CPU
        laddr = fl.dst_v4[idx[v4]].astype(U32).byteswap()
        faddr = fl.src_v4[idx[v4]].astype(U32).byteswap()
        iv = np.where(udp[v4], s["udp"], s["inet"]) + s["hash_mix"]
        out[v4] = jhash_3words(laddr, faddr, ports[v4], iv)
    if is_v6.any():
        new = inet6_hash_whole
        u = udp[is_v6]
        lhash = s6_addr32(fl.dst_v6[idx[is_v6]])[:, 3]
        fkey = np.where(u, s["udp_ipv6"], s["ipv6"])
        fhash = ipv6_addr_jhash(fl.src_v6[idx[is_v6]], fkey, whole=new)
        iv = np.where(u, s["udp6"] if new else s["udp_ipv6"], s["inet6"]) + s["hash_mix"]
        out[is_v6] = jhash_3words(lhash, fhash, ports[is_v6], iv)
    return out


def reuseport_pick(hashes: np.ndarray, n: int) -> np.ndarray:
    """reciprocal_scale(hash, n): the index into the group's socks[] (bind order)."""
    return ((np.asarray(hashes, np.uint64) * np.uint64(n)) >> np.uint64(32)).astype(np.int64)
