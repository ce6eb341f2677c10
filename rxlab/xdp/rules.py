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


def flow_fields(fl: FlowTable, steer: dict) -> dict:
    """What an XDP program can see of each flow (one row per flow), for user programs."""
    return {"src_v4": fl.src_v4, "dst_v4": fl.dst_v4, "sport": fl.sport, "dport": fl.dport,
            "proto": fl.proto, "is_v6": fl.is_v6, "group": fl.group,
            "group_names": list(fl.group_names), "rx_queue": steer["rxq"],
            "rss_hash": steer["rss_hash"], "sw_hash": steer["sw_hash"]}


def apply_user_program(program, fl: FlowTable, steer: dict, act: np.ndarray,
                       key: np.ndarray, rule_of: np.ndarray) -> None:
    """``program(fields) -> (verdicts, keys)``: a vectorised function over all flows
    (numpy or numba); verdicts are names ('pass', 'redirect-cpu', ...) or XDP_* codes,
    keys the cpumap key per flow (-1 where none). It replaces the rules' decisions."""
    try:
        verdicts, keys = program(flow_fields(fl, steer))
    except Exception as err:  # the user's code: report it in one line
        raise UsageError(f"xdp program: {type(err).__name__}: {err}") from None
    verdicts, keys = np.asarray(verdicts), np.asarray(keys, dtype=I64)
    if verdicts.shape != (len(fl),) or keys.shape != (len(fl),):
        raise UsageError(f"xdp program: return two arrays of {len(fl)} entries (one per "
                         f"flow), got shapes {verdicts.shape} and {keys.shape}")
    if verdicts.dtype.kind in "US":
        bad = sorted(set(verdicts.tolist()) - set(VERDICT))
        if bad:
            raise UsageError(f"xdp program: unknown verdict {bad[0]!r}; use one of "
                             f"{', '.join(VERDICT)}")
        verdicts = np.array([VERDICT[v] for v in verdicts.tolist()], I64)
    verdicts = verdicts.astype(I64)
    if verdicts.min(initial=0) < 0 or verdicts.max(initial=0) > max(VERDICT.values()):
        raise UsageError("xdp program: verdict codes are 0-5 (XDP_ABORTED .. redirect-xsk)")
    if np.any((verdicts == XDP_REDIRECT) & (keys < 0)):
        raise UsageError("xdp program: a redirect-cpu verdict needs a cpumap key >= 0")
    act[:] = verdicts
    key[:] = np.where(verdicts == XDP_REDIRECT, keys, -1)
    rule_of[:] = -1


def compile_xdp(sc, fl: FlowTable, steer: dict, costs: dict, kb: KernelBehaviour,
                program=None) -> dict:
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
    if program is not None:
        if xdp is None:
            raise UsageError("xdp program: the scenario needs an xdp section (the program "
                             "replaces its rules)")
        apply_user_program(program, fl, steer, act, key, rule_of)
        if np.any(key >= ncpu):
            raise UsageError(f"xdp program: key {int(key.max())} is not a CPU "
                             f"(host.cpus = {ncpu})")
    keys = cmap.cpu_list() if cmap else []
    entry = np.full(ncpu, -1, I64)
    for e, c in enumerate(keys):
        entry[c] = e
    ne = max(1, len(keys))
    qsize = np.full(ne, cmap.qsize if cmap else 1, I64)
    gro = kb.cpumap_gro if not cmap or cmap.gro == "auto" else bool(cmap.gro)
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
    counts = {name: int((p.flow["xdp_act"] == v).sum()) for name, v in VERDICT.items()}
    out = {"xdp": {"rules": len(sc.xdp.rules), "default": sc.xdp.default,
                   "hash_metadata": sc.xdp.hash_metadata, "flows_by_verdict": counts}}
    if sc.cpumap is not None:
        out["cpumap"] = {"cpus": sc.cpumap.cpu_list(), "qsize": sc.cpumap.qsize,
                         "ptr_ring_batch": int(p.cpumap[0]["batch"]), "gro": p.cm_gro}
    else:
        out["cpumap"] = None
    return out
