"""RSS indirection tables: ethtool_rxfh_indir_default() (include/linux/ethtool.h) and friends.

Builders return int64 arrays of queue numbers. ``equal_table`` and ``weight_table`` follow
ethtool userspace ``fill_indir_table()`` (ethtool.c, ``ethtool -X equal N|weight W...``);
``explicit_table`` follows the kernel netlink rule ``rss_set_prep_indir()``
(net/ethtool/rss.c: rss_set_prep_indir).
"""

import math

import numpy as np


def _size(size: int) -> int:
    size = int(size)
    if size < 1:
        raise ValueError(f"indirection table size must be >= 1, got {size}")
    return size


def _rings(n: int) -> int:
    n = int(n)
    if n < 1:
        raise ValueError(f"number of RX rings must be >= 1, got {n}")
    return n


def default_table(size: int, n_rx_rings: int) -> np.ndarray:
    """ethtool_rxfh_indir_default(): entry ``i`` is ``i % n_rx_rings``."""
    return np.arange(_size(size), dtype=np.int64) % _rings(n_rx_rings)


def equal_table(size: int, n: int) -> np.ndarray:
    """``ethtool -X dev equal N``: ``i % N`` over the first N rings (same as the default)."""
    return default_table(size, n)


def weight_table(size: int, weights) -> np.ndarray:
    """``ethtool -X dev weight W0 W1 ...``: ring ``j`` gets entries in proportion to ``Wj``.

    Same algorithm as ethtool's ``fill_indir_table()``: entry ``i`` goes to the first ring
    ``j`` whose cumulative weight satisfies ``i < size * partial_j // sum`` (integer
    division), so each ring gets a contiguous run; zero-weight rings get no entry.
    ethtool refuses a zero total and a total above the table size.
    """
    size = _size(size)
    w = [int(x) for x in weights]
    if not w or any(x < 0 for x in w):
        raise ValueError(f"weights must be non-negative integers, got {list(weights)}")
    total = sum(w)
    if total == 0:
        raise ValueError("at least one weight must be non-zero")
    if total > size:
        raise ValueError(f"total weight {total} exceeds the indirection table size {size}")
    table = np.empty(size, dtype=np.int64)
    j, partial = -1, 0
    for i in range(size):
        while i >= size * partial // total:
            j += 1
            partial += w[j]
        table[i] = j
    return table


def explicit_table(user, size: int, n_rings: int) -> np.ndarray:
    """A user table set through ethtool netlink (``rss_set_prep_indir``).

    The user length must divide the device size; the table is replicated
    (``dev[i] = user[i % len(user)]``) and every entry must be a valid ring. An empty user
    table means "reset to default" (context 0).
    """
    size, n_rings = _size(size), _rings(n_rings)
    u = np.asarray(user, dtype=np.int64).reshape(-1)
    if u.size == 0:
        return default_table(size, n_rings)
    if size % u.size:
        raise ValueError(f"indirection table of {u.size} entries does not divide the device "
                         f"table size {size}")
    bad = np.nonzero((u < 0) | (u >= n_rings))[0]
    if bad.size:
        raise ValueError(f"indirection entry {int(bad[0])} = {int(u[bad[0]])} is not a valid "
                         f"RX ring (0..{n_rings - 1})")
    return np.resize(u, size)


def queue_of(hash_, table) -> np.ndarray | int:
    """Queue of each hash: ``table[hash & (size - 1)]`` (vectorised).

    Which hash bits index the table is NIC specific; the kernel Toeplitz selftest uses
    ``hash % size``. The two agree for power-of-two sizes, the common case (128 entries);
    for other sizes this falls back to ``hash % size``.
    """
    table = np.asarray(table)
    size = table.shape[0]
    h = np.asarray(hash_, dtype=np.uint32)
    idx = h & np.uint32(size - 1) if size & (size - 1) == 0 else h % np.uint32(size)
    q = table[idx]
    return int(q) if np.ndim(q) == 0 else q


def rxfh_form(table, nq: int) -> dict | None:
    """``{'equal': N}`` or ``{'weight': [...]}`` when ``ethtool -X`` can write ``table``
    exactly (ethtool ``fill_indir_table``: round robin over N rings, or contiguous runs),
    else None. Weights are given in lowest terms when those build the same table."""
    t = np.asarray(table, np.int64)
    if t.size == 0 or t.min() < 0:
        return None
    n = int(t.max()) + 1
    if np.array_equal(equal_table(t.size, n), t):
        return {"equal": n}
    counts = np.bincount(t, minlength=nq).tolist()
    while len(counts) > 1 and counts[-1] == 0:
        counts.pop()
    g = math.gcd(*counts)
    for w in ([c // g for c in counts], counts):  # smallest weights first
        try:
            if np.array_equal(weight_table(t.size, w), t):
                return {"weight": w}
        except ValueError:
            continue
    return None
