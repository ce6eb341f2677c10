"""RFS table sizes for a target collision rate, and whether RPS, RFS or aRFS help at all.

**Collision rate**: the share of flows that share their slot with at least one other
flow. Two tables (net/core/sysctl_net_core.c ``rps_sock_flow_sysctl``,
net/core/net-sysfs.c ``store_rps_dev_flow_table_cnt``):

* ``rps_sock_flow_entries`` (global): slot ``hash & (size - 1)`` over every flow whose
  socket records its CPU (TCP_ESTABLISHED only: ``sock_rps_record_flow``). A flow whose
  entry another flow overwrote carries the wrong hash high bits and is not steered.
* ``rps_flow_cnt`` (per rx queue): slot ``hash_32(hash, log)`` since v6.15, ``hash &
  mask`` before, over the flows of that queue. Before v6.15 the slot's low bits are the
  RSS bucket bits that chose the queue, so a queue holding ``k`` of ``B`` buckets reaches
  only ``k/B`` of its slots (``effective_slots``).

**Birthday model**: with ``n`` flows on ``S`` equally likely slots a flow collides with
probability ``1 - (1 - 1/S)^(n-1)``; the smallest power of two meeting the target is the
start of a search on the **exact count** for the scenario's concrete hashes (what the
kernel would see for these flows), which decides.

Memory: the socket table is ``4 + 4 x entries`` bytes (``struct rps_sock_flow_table``:
u32 mask, u32 entries; include/net/rps.h); each rx queue's table is ``entries x 8`` bytes
(``struct rps_dev_flow``: u16 cpu, u16 filter, u32 last_qtail), 12 with the u32 hash that
CONFIG_RFS_ACCEL adds since v6.18. Tables whose total would pass ``MEMORY_LIMIT`` are
halved (the larger one first) until they fit, and the report says what the collision
rate then is: a table of hundreds of MiB for a few thousand flows is not advice.

Only flows whose socket records its CPU count (``sock_rps_record_flow`` records only a
socket in TCP_ESTABLISHED: TCP, or a connected UDP socket). With synthetic flows the
sizes come from the birthday model alone (the exact hashes are a draw of the seed); with
real flows the exact count on their hashes decides.
"""

from __future__ import annotations

import math

import numpy as np

from rxlab.cpuset import format_cpulist
from rxlab.kernel.hashfn import roundup_pow_of_two
from rxlab.kernel.versions import KernelBehaviour

GOLDEN_RATIO_32 = 0x61C88647
SOCK_MAX = 1 << 29  # rps_sock_flow_entries above this: -EINVAL (rps_sock_flow_sysctl)
DEV_MAX = 1 << 27  # keep per-queue tables within the INT_MAX / entry size limit of
# store_rps_dev_flow_table_cnt (v7.1)
MEMORY_LIMIT = 64 << 20  # bytes for all RFS tables together


def birthday_rate(n: float, slots: float) -> float:
    """Expected share of ``n`` flows that share a slot with another flow."""
    if n <= 1 or slots <= 0:
        return 0.0
    return 1.0 - (1.0 - 1.0 / slots) ** (n - 1)


def birthday_size(n: float, target: float, fraction: float = 1.0) -> int:
    """Smallest power of two S whose birthday rate for ``n`` flows on ``S * fraction``
    reachable slots is at most ``target``."""
    if n <= 1:
        return 2
    need = 1.0 / (1.0 - (1.0 - target) ** (1.0 / (n - 1)))  # reachable slots needed
    return max(2, roundup_pow_of_two(math.ceil(need / fraction)))


def dev_slot(hashes: np.ndarray, size: int, hash32: bool) -> np.ndarray:
    h = hashes.astype(np.uint64) & np.uint64(0xFFFFFFFF)
    log = int(size).bit_length() - 1
    if hash32:
        return ((h * np.uint64(GOLDEN_RATIO_32)) & np.uint64(0xFFFFFFFF)) >> np.uint64(32 - log)
    return h & np.uint64(size - 1)


def colliding(keys: np.ndarray) -> int:
    """Flows whose key another flow also has."""
    if keys.size < 2:
        return 0
    _, counts = np.unique(keys, return_counts=True)
    return int(counts[counts > 1].sum())


def sock_collisions(hashes: np.ndarray, size: int) -> int:
    return colliding(hashes.astype(np.uint64) & np.uint64(size - 1))


def dev_collisions(hashes: np.ndarray, rxq: np.ndarray, size: int, hash32: bool) -> int:
    key = rxq.astype(np.uint64) * np.uint64(1 << 32) + dev_slot(hashes, size, hash32)
    return colliding(key)


def effective_slots(table: np.ndarray, q: int, size: int, hash32: bool) -> float:
    """Reachable fraction of a queue's rps_flow_cnt slots (1 with hash_32)."""
    if hash32:
        return 1.0
    B = table.size
    buckets = np.nonzero(table == q)[0]
    if buckets.size == 0:
        return 1.0
    if size >= B:
        return buckets.size / B
    return np.unique(buckets & (size - 1)).size / size


def memory(sock_entries: int, flow_cnt: int, queues: int, kb: KernelBehaviour) -> dict:
    entry = 12 if kb.rps_dev_flow_hash else 8
    sock = 4 + 4 * sock_entries if sock_entries else 0
    dev = queues * flow_cnt * entry
    return {"sock_table_bytes": sock, "dev_tables_bytes": dev, "dev_entry_bytes": entry,
            "total_bytes": sock + dev}


def size_tables(hashes: np.ndarray, rxq: np.ndarray, table: np.ndarray, nq: int,
                target: float, kb: KernelBehaviour, exact: bool = True) -> dict:
    """Smallest power-of-two tables whose collision rate meets ``target``: the exact
    count on ``hashes`` when they are real (``exact``), else the birthday model."""
    hash32 = kb.rfs_hash32
    n = int(hashes.size)
    out = {"flows": n, "target": target, "exact": exact,
           "dev_slot_rule": "hash_32(hash, log)" if hash32 else "hash & (size - 1)"}
    if n == 0:
        out.update(rps_sock_flow_entries=0, rps_flow_cnt=0, met=True)
        return out
    if not exact:
        return _birthday_tables(out, n, rxq, table, nq, target, kb, hash32)
    # socket table: all recording flows together
    s = birthday_size(n, target)
    s = max(2, s // 4)  # start below the estimate; the exact count decides
    while s < SOCK_MAX and sock_collisions(hashes, s) / n > target:
        s *= 2
    sock_rate = sock_collisions(hashes, s) / n
    # per-queue tables: one size for every queue (the sysfs file is per queue, but a
    # uniform size is what operators set); the busiest queue in flows decides
    per_q = np.bincount(rxq, minlength=nq)
    qmax = int(per_q.argmax())
    frac = min(effective_slots(table, q, 1 << 30, hash32) for q in range(nq)
               if per_q[q]) if per_q.any() else 1.0
    d = max(2, birthday_size(int(per_q.max()), target, frac) // 4)
    while d < DEV_MAX and dev_collisions(hashes, rxq, d, hash32) / n > target:
        d *= 2
    dev_rate = dev_collisions(hashes, rxq, d, hash32) / n
    out.update(
        rps_sock_flow_entries=s,
        sock_collision_rate=sock_rate,
        sock_birthday_rate=birthday_rate(n, s),
        rps_flow_cnt=d,
        dev_collision_rate=dev_rate,
        dev_birthday_rate=birthday_rate(int(per_q.max()), d * frac),
        busiest_queue={"queue": qmax, "flows": int(per_q.max())},
        met=bool(sock_rate <= target and dev_rate <= target),
        scaling_rst={"rps_sock_flow_entries": 32768, "rps_flow_cnt": 32768 // nq,
                     "sock_collision_rate": sock_collisions(hashes, 32768) / n,
                     "dev_collision_rate": dev_collisions(
                         hashes, rxq, max(2, roundup_pow_of_two(max(1, 32768 // nq))),
                         hash32) / n},
    )
    return _limit(out, n, int(per_q.max()), frac, nq, target, kb)


def _birthday_tables(out, n, rxq, table, nq, target, kb, hash32) -> dict:
    per_q = np.bincount(rxq, minlength=nq)
    frac = min(effective_slots(table, q, 1 << 30, hash32) for q in range(nq)
               if per_q[q]) if per_q.any() else 1.0
    busiest = int(per_q.max())
    s = min(SOCK_MAX, birthday_size(n, target))
    d = min(DEV_MAX, birthday_size(busiest, target, frac))
    out.update(rps_sock_flow_entries=s, sock_birthday_rate=birthday_rate(n, s),
               rps_flow_cnt=d, dev_birthday_rate=birthday_rate(busiest, d * frac),
               busiest_queue={"queue": int(per_q.argmax()), "flows": busiest},
               met=bool(birthday_rate(n, s) <= target
                        and birthday_rate(busiest, d * frac) <= target))
    return _limit(out, n, busiest, frac, nq, target, kb)


def _limit(out: dict, n: int, busiest: int, frac: float, nq: int, target: float,
           kb: KernelBehaviour) -> dict:
    """Halve the larger table until all fit in MEMORY_LIMIT; say what that costs."""
    s, d = out["rps_sock_flow_entries"], out["rps_flow_cnt"]
    wanted = memory(s, d, nq, kb)
    capped = False
    while memory(s, d, nq, kb)["total_bytes"] > MEMORY_LIMIT and (s > 2 or d > 2):
        mem = memory(s, d, nq, kb)
        if mem["sock_table_bytes"] >= mem["dev_tables_bytes"] and s > 2:
            s //= 2
        else:
            d //= 2
        capped = True
    out["memory_limit_bytes"] = MEMORY_LIMIT
    out["capped"] = capped
    if capped:
        out["wanted"] = {"rps_sock_flow_entries": out["rps_sock_flow_entries"],
                         "rps_flow_cnt": out["rps_flow_cnt"], "memory": wanted}
        out.update(rps_sock_flow_entries=s, rps_flow_cnt=d,
                   sock_birthday_rate=birthday_rate(n, s),
                   dev_birthday_rate=birthday_rate(busiest, d * frac),
                   met=bool(birthday_rate(n, s) <= target
                            and birthday_rate(busiest, d * frac) <= target))
    out["memory"] = memory(s, d, nq, kb)
    return out


def verdicts(d: dict, sc, m, rfs_sizes: dict | None) -> dict:
    """Whether RPS, RFS and aRFS can help on this host, from the simulated run ``d``
    and the built model ``m`` (queues against CPUs, where consumers run)."""
    ncpu, nq = sc.host.cpus, sc.nic.queues
    irq = sorted(set(int(c) for c in m.params.queue["irq_cpu"]))
    busy = [1 - c["util"]["idle"] for c in d["cpus"]]
    app_cpus = sorted({c for _, c in m.threads})
    rec = [bool(x) for x in m.so.sock["sock_record"][: len(m.threads)]]
    connected = bool(rec) and all(rec)
    any_connected = any(rec)
    rps_on = bool(m.params.queue["rps_len"].any())
    rfs_on = bool(m.params.rfs_on)
    st = d["steering"]
    good, bad = st["good_queue_packets"], st["bad_queue_packets"]
    mismatch = bad / (good + bad) if good + bad else 0.0
    irq_max = max(busy[c] for c in irq) if irq else 0.0
    others = [c for c in range(ncpu) if c not in irq]
    idle_others = [c for c in others if busy[c] < 0.5]
    out = {"irq_cpus": irq, "consumer_cpus": app_cpus, "queues": nq, "cpus": ncpu,
           "packets_off_consumer_cpu": round(mismatch, 4)}
    # RPS
    if len(irq) >= ncpu:
        rps = ("not needed", f"{nq} queues put rx interrupts on all {ncpu} CPUs; RPS would "
               "only add a backlog enqueue and an IPI per packet")
    elif not others or not idle_others:
        rps = ("no", "the CPUs without rx interrupts are already busy")
    elif irq_max < 0.5:
        rps = ("not needed now", f"only {len(irq)} of {ncpu} CPUs take rx interrupts, but "
               f"the busiest is {irq_max:.0%} busy")
    else:
        rps = ("yes", f"only {len(irq)} of {ncpu} CPUs take rx interrupts (busiest "
               f"{irq_max:.0%}); rps_cpus can spread protocol work to CPUs "
               f"{format_cpulist(idle_others)}")
    out["rps"] = {"verdict": rps[0], "why": rps[1], "enabled": rps_on,
                  "spread_to": idle_others if rps[0] == "yes" else []}
    # RFS
    if not sc.apps:
        rfs = ("no", "no application consumes the traffic")
    elif not any_connected:
        rfs = ("no", "the sockets are not connected (unconnected UDP): recvmsg records no "
               "flow (sock_rps_record_flow needs TCP_ESTABLISHED, include/net/rps.h), so "
               "RFS has nothing to steer by")
    elif mismatch < 0.1:
        rfs = ("not needed", f"{1 - mismatch:.0%} of packets already arrive on a queue whose "
               "IRQ CPU runs their consumer")
    else:
        rfs = ("may help", f"{mismatch:.0%} of packets are processed on a CPU other than "
               "their consumer's; RFS moves protocol processing to the consumer's CPU "
               "(cache locality) at the cost of a backlog enqueue and an IPI per packet")
        if not connected:
            rfs = (rfs[0], rfs[1] + "; only the connected apps' flows are steered")
    out["rfs"] = {"verdict": rfs[0], "why": rfs[1], "enabled": rfs_on}
    # aRFS
    drv = sc.nic.driver
    if sc.nic.arfs is not None:
        arfs = ("configured", f"nic.arfs model {sc.nic.arfs.model}")
    elif rfs[0] in ("no", "not needed"):
        arfs = ("no", "RFS does not help here, so neither does its hardware version")
    elif not set(app_cpus) <= set(irq):
        miss = sorted(set(app_cpus) - set(irq))
        arfs = ("partly", f"consumers on CPUs {format_cpulist(miss)} have no queue whose IRQ runs "
                "there (cpu_rmap), so aRFS cannot steer their flows in hardware")
    else:
        n = rfs_sizes.get("flows", 0) if rfs_sizes else 0
        arfs = ("may help", "every consumer CPU has a queue: aRFS (ethtool -K DEV ntuple on, "
                "a driver with ndo_rx_flow_steer such as ice or mlx5) steers flows to it in "
                f"the NIC, saving RFS's IPI; it needs a hardware filter per steered flow "
                f"({n:,} flows here) within the NIC's n-tuple filter capacity")
    out["arfs"] = {"verdict": arfs[0], "why": arfs[1], "driver": drv}
    return out


