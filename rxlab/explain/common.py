"""Facts shared by the drop and latency explanations: a CPU's roles and load, the flows
at a place in the receive path, and the settings (with the command that changes them)."""

from __future__ import annotations

import numpy as np

from rxlab.cpuset import format_mask, parse_mask
from rxlab.explain.inputs import Subject

SATURATED_IDLE = 0.05  # a CPU idle less than this is saturated
ELEPHANT_SHARE = 0.2  # a flow with this share of a place's packets ...
ELEPHANT_FACTOR = 10.0  # ... and this many times the mean flow there is an elephant


def pct(x: float) -> str:
    return f"{100 * x:.1f}%" if x >= 0.001 or x == 0 else f"{100 * x:.2g}%"


def setting(cmd: str, why: str) -> dict:
    return {"setting": cmd, "why": why}


def now(sub: Subject, key: str, i: int | None = None) -> str:
    v = sub.now.get(key)
    if v is not None and i is not None:
        v = v[i] if i < len(v) else None
    if isinstance(v, float) and v.is_integer():
        v = int(v)
    return "" if v is None else f" (now {v})"


def batched_reads(sub: Subject, sock: int) -> str:
    """How a reader of socket ``sock`` takes more per wake-up: recvmmsg is UDP's (a TCP
    socket is a byte stream: one larger read takes more), so the protocol decides."""
    protos = set()
    if sub.flows is not None:
        protos = {int(p) for p in np.unique(sub.flows.table.proto[sub.flows.sock == sock])}
    if protos == {6}:
        return "larger TCP reads (recv buffer size)"
    if 6 in protos:
        return "recvmmsg batch (UDP) or larger reads (TCP)"
    return "recvmmsg batch"


def rps_masks(sub: Subject) -> list[str]:
    nq = len(sub.data["queues"])
    m = sub.data["config"].get("rps_cpus") or [""] * nq
    return [x or "0" for x in m]


def cpu_roles(sub: Subject, c: int) -> dict:
    """What runs on CPU c: the rx queues whose IRQ it takes, the queues whose RPS map
    sends it packets, the application threads on it, and its load split."""
    d = sub.data
    irq_q = [q["queue"] for q in d["queues"] if q["irq_cpu"] == c]
    rps_q = [q for q, m in enumerate(rps_masks(sub)) if c in parse_mask(m)]
    threads = [t for t, th in enumerate(d["config"]["threads"]) if th["cpu"] == c]
    u = d["cpus"][c]["util"]
    return {"irq_queues": irq_q, "rps_from_queues": rps_q, "threads": threads, "util": u,
            "saturated": u["idle"] < SATURATED_IDLE}


def describe_cpu(sub: Subject, c: int) -> str:
    r = cpu_roles(sub, c)
    u = r["util"]
    parts = [f"CPU {c}: softirq {pct(u['softirq'])}"
             + (f" (ksoftirqd {pct(u['ksoftirqd'])})" if u["ksoftirqd"] else "")
             + f", irq {pct(u['irq'])}, system {pct(u['system'])}, user {pct(u['user'])}, "
             f"idle {pct(u['idle'])}" + (" - saturated" if r["saturated"] else "")]
    runs = []
    if r["irq_queues"]:
        runs.append("the IRQ and NAPI poll of rx queue(s) " + _list(r["irq_queues"]))
    if r["rps_from_queues"]:
        runs.append("RPS backlog work from queue(s) " + _list(r["rps_from_queues"]))
    if r["threads"]:
        apps = sorted({sub.data["config"]["threads"][t]["app"] for t in r["threads"]})
        runs.append(f"{len(r['threads'])} application thread(s) ({', '.join(apps)})")
    parts.append("; it runs " + ("; ".join(runs) if runs else "nothing of this workload"))
    return "".join(parts)


def _list(xs: list[int], limit: int = 12) -> str:
    s = ", ".join(str(x) for x in xs[:limit])
    return s + (f" ... ({len(xs)} in all)" if len(xs) > limit else "")


def flows_at(sub: Subject, mask: np.ndarray, top: int) -> dict:
    """The flows selected by ``mask``, largest first, each with its share of the place's
    packets; ``elephant`` is the first row when it alone dominates the place."""
    fl = sub.flows
    idx = np.nonzero(mask)[0]
    total = int(fl.offered[idx].sum())
    all_pk = int(fl.offered.sum()) or 1
    order = idx[np.argsort(-fl.offered[idx], kind="stable")][:top]
    threads = sub.data["config"]["threads"]
    rows = []
    for i in order:
        s = int(fl.sock[i])
        rows.append({
            "index": int(i), "flow": fl.describe(i), "group": str(fl.group[i]),
            "packets": int(fl.offered[i]),
            "share": fl.offered[i] / total if total else 0.0,
            "share_of_all": fl.offered[i] / all_pk, "lost": int(fl.lost[i]),
            "rss_bucket": int(fl.bucket[i]), "queue": int(fl.rxq[i]),
            "irq_cpu": int(fl.irq_cpu[i]), "cpu": int(fl.cpu[i]),
            "socket": s, "thread_cpu": threads[s]["cpu"] if s >= 0 else None,
        })
    n = idx.size
    elephant = None
    if rows and total:
        mean = total / n
        if rows[0]["share"] >= ELEPHANT_SHARE and rows[0]["packets"] >= ELEPHANT_FACTOR * mean:
            elephant = rows[0]
    return {"flows": n, "packets": total, "lost": int(fl.lost[idx].sum()), "top": rows,
            "elephant": elephant}


def tuple_rule(sub: Subject, row: dict, dev: str, queue: int) -> str:
    """``ethtool -N`` n-tuple rule sending exactly this flow to ``queue``."""
    proto, src, _, dst = row["flow"].split(" ", 3)
    sip, sport = src.rsplit(":", 1)
    dip, dport = dst.rsplit(":", 1)
    v6 = sip.startswith("[")
    ft = f"{proto}{6 if v6 else 4}"
    return (f"ethtool -N {dev} flow-type {ft} src-ip {sip.strip('[]')} dst-ip "
            f"{dip.strip('[]')} src-port {sport} dst-port {dport} action {queue}")


def least_loaded_queue(sub: Subject, exclude: int) -> int:
    qs = [q for q in sub.data["queues"] if q["queue"] != exclude]
    if not qs:
        return exclude
    return min(qs, key=lambda q: q["packets"])["queue"]


def spare_cpus(sub: Subject, exclude: set[int]) -> list[int]:
    """CPUs that take no rx IRQ and are not in ``exclude``, most idle first."""
    d = sub.data
    irq = {q["irq_cpu"] for q in d["queues"]}
    cpus = [c["cpu"] for c in d["cpus"] if c["cpu"] not in irq and c["cpu"] not in exclude]
    return sorted(cpus, key=lambda c: -d["cpus"][c]["util"]["idle"])


def mask_of(cpus: list[int]) -> str:
    return format_mask(cpus) if cpus else "0"
