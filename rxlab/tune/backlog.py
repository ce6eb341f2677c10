"""flow_limit helpers for ``rxlab tune``: the CPU bitmap, the table length, group losses.

Flow limit acts only in ``enqueue_to_backlog`` (net/core/dev.c, ``skb_flow_limit``): with
RPS/RFS, or a device that delivers with ``netif_rx()``. The flow-limit table is the
*enqueuing* CPU's, so the bitmap names the CPUs that take the rx interrupts.
``flow_limit_table_len`` matters only for known hashes (real flows): the smallest power
of two (from the current value up) at which no victim packets share a flow-limit bucket
with an antagonist flow (bucket = ``hash_32(hash, log)`` since v6.16, ``hash & (len - 1)``
before). The table length is read only when a CPU's table is allocated, so it must be
written before the bitmap.
"""

from __future__ import annotations

import numpy as np

from rxlab.cpuset import format_mask
from rxlab.kernel.hashfn import roundup_pow_of_two

GOLDEN_RATIO_32 = 0x61C88647
TABLE_LEN_MAX = 1 << 20  # the scenario schema's limit


def cpu_mask(cpus) -> str:
    """CPU numbers -> the kernel's hex bitmap (32-bit groups, commas between)."""
    return format_mask(cpus)


def fl_bucket(hashes: np.ndarray, table_len: int, hash32: bool) -> np.ndarray:
    h = hashes.astype(np.uint64) & np.uint64(0xFFFFFFFF)
    if hash32:
        log = int(table_len).bit_length() - 1
        return ((h * np.uint64(GOLDEN_RATIO_32)) & np.uint64(0xFFFFFFFF)) >> np.uint64(32 - log)
    return h & np.uint64(table_len - 1)


def table_len_for(hashes, is_antagonist, rate, start: int, hash32: bool) -> dict:
    """Smallest power-of-two flow_limit_table_len >= start at which no victim flow
    shares a bucket with an antagonist flow (or the best one up to the maximum)."""
    start = max(2, roundup_pow_of_two(start))
    victims = ~is_antagonist
    vpps = float(rate[victims].sum()) or 1.0
    best = None
    n = start
    while n <= TABLE_LEN_MAX:
        b = fl_bucket(hashes, n, hash32)
        shared = np.isin(b[victims], b[is_antagonist])
        share = float(rate[victims][shared].sum()) / vpps
        if best is None or share < best[1]:
            best = (n, share, int(shared.sum()))
        if share == 0.0:
            break
        n *= 2
    return {"flow_limit_table_len": best[0], "victim_packets_sharing": best[1],
            "victim_flows_sharing": best[2]}


def group_loss(d: dict, victims: list[str]) -> dict:
    fb = d["flows_by_group"]
    off = sum(fb[g]["offered"] for g in victims)
    dl = sum(fb[g]["delivered"] for g in victims)
    return {"offered": off, "delivered": dl, "drop_rate": (off - dl) / off if off else 0.0}
