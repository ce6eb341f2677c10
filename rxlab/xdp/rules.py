"""Compile the scenario's XDP program and cpumap into per-flow arrays (once, vectorised).

A rule's match is evaluated over the flow table, first match wins; the verdict, the rule
and, where the key follows from the flow, the cpumap key are stored per flow. Only a
round-robin redirect decides per packet (``rxlab.xdp.program.redirect_key``).
"""

from __future__ import annotations

import numpy as np

from rxlab.errors import UsageError
from rxlab.kernel.state import (
    XDP_ABORTED,
    XDP_DROP,
    XDP_PASS,
    XDP_REDIRECT,
    XDP_REDIRECT_XSK,
    XDP_TX,
)
from rxlab.kernel.versions import KernelBehaviour
from rxlab.traffic.flows import FlowTable
from rxlab.traffic.match import match_mask
from rxlab.xdp.cpumap import ptr_ring_batch

I64 = np.int64
VERDICT = {"pass": XDP_PASS, "drop": XDP_DROP, "tx": XDP_TX, "aborted": XDP_ABORTED,
           "redirect-cpu": XDP_REDIRECT, "redirect-xsk": XDP_REDIRECT_XSK}


def compile_xdp(sc, fl: FlowTable, steer: dict, costs: dict, kb: KernelBehaviour) -> dict:
    """Params fields for the XDP program and cpumap (all present, empty when unused)."""
    n, ncpu = len(fl), sc.host.cpus
    xdp, cmap = sc.xdp, sc.cpumap
    rules = xdp.rules if xdp else []
    nr = max(1, len(rules))
    act = np.full(n, VERDICT[xdp.default] if xdp else XDP_PASS, I64)
    rule_of = np.full(n, -1, I64)
    key = np.full(n, -1, I64)
    rr_cpus = np.zeros((nr, ncpu), I64)
    rr_n = np.ones(nr, I64)
    extra = np.zeros(nr, np.float64)
    rss = steer["rss_hash"].astype(I64)
    sw = steer["sw_hash"].astype(I64)
    matched = np.zeros(n, bool)
    for r, rule in enumerate(rules):
        where = f"xdp.rules[{r}]"
        m = ~matched & match_mask(rule.match, fl, where, steer["rxq"])
        matched |= m
        act[m] = VERDICT[rule.action]
        rule_of[m] = r
        if rule.action != "redirect-cpu":
            continue
        cpus = np.array(rule.cpu_list(), I64)
        if rule.select == "rss-hash" and not sc.nic.rxhash:
            raise UsageError(f"{where}.select: rss-hash reads the NIC's RX hash, but "
                             "nic.rxhash is off; use flow-hash or turn rxhash on")
        if len(cpus) == 1:
            key[m] = cpus[0]
        elif rule.select == "flow-hash":
            key[m] = cpus[sw[m] % len(cpus)]
        elif rule.select == "rss-hash":
            key[m] = cpus[rss[m] % len(cpus)]
        rr_cpus[r, : len(cpus)] = cpus
        rr_n[r] = len(cpus)
        if rule.select == "flow-hash" and len(cpus) > 1:
            extra[r] += costs["xdp_flow_hash"]
        elif (rule.select == "rss-hash" and len(cpus) > 1) or xdp.hash_metadata:
            extra[r] += costs["xdp_rx_hash"]
    keys = cmap.cpu_list() if cmap else []
    entry = np.full(ncpu, -1, I64)
    for e, c in enumerate(keys):
        entry[c] = e
    ne = max(1, len(keys))
    qsize = np.full(ne, cmap.qsize if cmap else 1, I64)
    gro = kb.version >= (6, 15) if not cmap or cmap.gro == "auto" else bool(cmap.gro)
    return {
        "xdp_on": xdp is not None, "xdp_act": act, "xdp_rule": rule_of, "xdp_cpu": key,
        "xdp_rr_cpus": rr_cpus, "xdp_rr_n": rr_n, "xdp_cost_extra": extra,
        "xdp_hash_meta": bool(xdp and xdp.hash_metadata),
        "flow_sw_hash": sw, "flow_rss_hash": rss if sc.nic.rxhash else np.zeros(n, I64),
        "cm_entry": entry, "cm_cpu": np.array(keys or [0], I64), "cm_qsize": qsize,
        "cm_batch": np.array([ptr_ring_batch(int(q)) for q in qsize], I64),
        "cm_gro": bool(cmap) and gro,
    }


def xdp_config(sc, p) -> dict:
    """What the result's ``config`` reports about the program and the map."""
    if sc.xdp is None:
        return {"xdp": None, "cpumap": None}
    counts = {name: int((p.xdp_act == v).sum()) for name, v in VERDICT.items()}
    out = {"xdp": {"rules": len(sc.xdp.rules), "default": sc.xdp.default,
                   "hash_metadata": sc.xdp.hash_metadata, "flows_by_verdict": counts}}
    if sc.cpumap is not None:
        out["cpumap"] = {"cpus": sc.cpumap.cpu_list(), "qsize": sc.cpumap.qsize,
                         "ptr_ring_batch": int(p.cm_batch[0]), "gro": p.cm_gro}
    else:
        out["cpumap"] = None
    return out
