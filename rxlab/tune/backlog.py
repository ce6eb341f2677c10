"""flow_limit and netdev_max_backlog for a target drop rate under an antagonist.

Both act only in ``enqueue_to_backlog`` (reference 3.5, 6.2): with RPS/RFS, or a device
that delivers with ``netif_rx()``. The flow-limit table is the *enqueuing* CPU's, so the
bitmap names the CPUs that take the rx interrupts. ``flow_limit_table_len`` is chosen
from the concrete hashes: the smallest power of two (from the current value up) at which
no victim packets share a flow-limit bucket with an antagonist flow (bucket =
``hash_32(hash, log)`` since v6.16, ``hash & (len - 1)`` before). The table length is
read only when a CPU's table is allocated, so it must be written before the bitmap.

The search is by simulation, cheapest change first: flow limit on at the current
backlog, then the backlog doubled (up to 16x) with flow limit on (off when there is no
antagonist), stopping at the first setting whose victims' drop rate meets the target.
"""

from __future__ import annotations

import numpy as np

from rxlab.cpuset import format_mask
from rxlab.kernel.hashfn import roundup_pow_of_two

GOLDEN_RATIO_32 = 0x61C88647
TABLE_LEN_MAX = 1 << 20  # the scenario schema's limit
BACKLOG_STEPS = (2, 4, 8, 16)


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


def search(sc, m, *, simulate, base_overrides: dict, antagonist: str | None,
           target: float, metrics) -> dict:
    """Simulate candidate settings; returns the rows tried and the recommendation."""
    from rxlab.build import flow_steering

    p = m.params
    netif_rx = sc.nic.rx_mode == "netif_rx"
    uses_backlog = bool(p.rps_needed) or netif_rx or any(
        k.startswith("kernel.rps") and v for k, v in base_overrides.items())
    out: dict = {"antagonist": antagonist, "target_drop_rate": target}
    if not uses_backlog:
        out.update(applicable=False, why=(
            "no packet goes through enqueue_to_backlog (NAPI driver, no RPS/RFS): "
            "flow_limit and netdev_max_backlog cannot change drops here; drops come from "
            "the rx ring (ethtool -G DEV rx N) or the socket buffer"))
        return out
    groups = sc.traffic.group_names()
    victims = [g for g in groups if g != antagonist] or groups
    irq = sorted(set(int(c) for c in p.queue["irq_cpu"]))
    mask = cpu_mask(irq)
    k = sc.kernel
    from rxlab.kernel.versions import behaviour

    hash32 = behaviour(sc.host.kernel).flow_limit_hash_32
    fl = m.flows
    tl = {"flow_limit_table_len": k.flow_limit_table_len, "victim_packets_sharing": 0.0,
          "victim_flows_sharing": 0}
    if antagonist is not None:
        steer = flow_steering(sc, fl)
        is_ant = fl.group == fl.group_names.index(antagonist)
        tl = table_len_for(steer["skb_hash"], is_ant, fl.rate_pps, k.flow_limit_table_len,
                           hash32)
    out.update(applicable=True, victims=victims, enqueuing_cpus=irq, table_len=tl)

    rows = []

    def run(label: str, ov: dict) -> dict:
        res = simulate(sc, overrides={**base_overrides, **ov})
        d = res.data
        row = {"setting": label, "overrides": ov, **metrics(d),
               "drops_by_reason": {r: n for r, n in d["packets"]["dropped_by_reason"].items()
                                   if n}}
        row["meets_target"] = row["victim_drop_rate"] <= target
        rows.append(row)
        return row

    cur_on = k.flow_limit_cpu_bitmap.strip("0,x") != ""
    now = run("as configured", {})
    pick = now if now["meets_target"] else None
    fl_ov = {"kernel.flow_limit_cpu_bitmap": mask}
    if tl["flow_limit_table_len"] != k.flow_limit_table_len:
        fl_ov["kernel.flow_limit_table_len"] = tl["flow_limit_table_len"]
    use_fl = antagonist is not None
    if pick is None and use_fl and (not cur_on or tl["flow_limit_table_len"] !=
                                    k.flow_limit_table_len):
        r = run("flow limit on", fl_ov)
        pick = r if r["meets_target"] else None
    if pick is None:
        for mult in BACKLOG_STEPS:
            nb = k.netdev_max_backlog * mult
            ov = {**(fl_ov if use_fl else {}), "kernel.netdev_max_backlog": nb}
            r = run(f"{'flow limit on, ' if use_fl else ''}netdev_max_backlog {nb}", ov)
            if r["meets_target"]:
                pick = r
                break
    best = pick or min(rows, key=lambda r: (r["victim_drop_rate"], r["p99_ns"]))
    out.update(rows=rows, met=pick is not None, recommended=best["setting"],
               overrides=best["overrides"])
    if antagonist is not None and int((fl.group == fl.group_names.index(antagonist)).sum()) > 1:
        out["note"] = ("flow_limit singles out flows holding more than half of the last "
                       "128 recorded packets; an antagonist of many small flows passes it")
    return out
