"""aRFS flow_id collisions: the birthday model and the exact count for given hashes.

In ice before the 2025 fix an entry is found by (raw hash & 1023 bucket, flow_id); two
flows that agree on both share one filter. flow_id is the flow's slot in the target
queue's rps_dev_flow table: ``hash & (S-1)`` up to v6.14, ``hash_32(hash, log S)`` since.
"""

from __future__ import annotations

import numpy as np

ICE_BUCKETS = 1024


def pair_probability(table_size: int, hash32: bool) -> float:
    """P(two random flows share bucket and flow_id)."""
    if hash32:  # high bits (hash_32) and low bits (bucket) are independent
        return 1.0 / (ICE_BUCKETS * table_size)
    # hash & (S-1) and hash & 1023 are nested masks: the larger one decides
    return 1.0 / max(ICE_BUCKETS, table_size)


def birthday(n_flows: int, table_size: int, hash32: bool) -> dict:
    """Expected colliding pairs and flows that share their filter key with another."""
    p = pair_probability(table_size, hash32)
    pairs = n_flows * (n_flows - 1) / 2 * p
    flows = n_flows * (1.0 - (1.0 - p) ** (n_flows - 1))
    sd = float(np.sqrt(pairs))  # pairs ~ Poisson for small p
    return {"pairs": pairs, "pairs_sd": sd, "flows_colliding": flows, "p_pair": p}


def observed(hashes: np.ndarray, table_size: int, hash32: bool,
             target_queue: np.ndarray | None = None) -> dict:
    """Exact count for concrete hashes (optionally only flows steered to the same queue
    can share a flow_id slot of the same table; ice's list spans all queues)."""
    h = hashes.astype(np.uint64) & np.uint64(0xFFFFFFFF)
    log = int(table_size).bit_length() - 1
    if hash32:
        fid = ((h * np.uint64(0x61C88647)) & np.uint64(0xFFFFFFFF)) >> np.uint64(32 - log)
    else:
        fid = h & np.uint64(table_size - 1)
    key = (h & np.uint64(ICE_BUCKETS - 1)) * np.uint64(table_size) + fid
    _, counts = np.unique(key, return_counts=True)
    pairs = int((counts * (counts - 1) // 2).sum())
    flows = int(counts[counts > 1].sum())
    return {"pairs": pairs, "flows_colliding": flows}


def memory_bytes(table_size: int, queues: int, sock_entries: int, kb) -> int:
    """rps_dev_flow: u16 cpu, u16 filter, u32 last_qtail (+ u32 hash since v6.18)."""
    entry = 12 if kb.rps_dev_flow_hash else 8  # kb: versions.KernelBehaviour
    return table_size * queues * entry + 4 * sock_entries
