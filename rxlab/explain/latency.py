"""The latency tail -> the wait before the socket (rx ring and backlog, behind the busiest
softirq CPUs) and the wait in the socket (the reading thread), with their settings.

Latency is measured per delivered packet from its arrival at the NIC to the socket
queue and to the application's read. A packet waits in the ring until its queue's
NAPI poll runs, in a backlog until the target CPU's softirq reaches it, and in the
socket until its thread runs; a CPU that is busy in softirq lengthens the first two,
a reader that shares its CPU with softirq (which preempts it) the third.
"""

from __future__ import annotations

import numpy as np

from rxlab.explain.common import (
    batched_reads,
    cpu_roles,
    describe_cpu,
    flows_at,
    now,
    pct,
    setting,
)
from rxlab.explain.inputs import Subject
from rxlab.report.fit import fmt_time_ns


def _busy(u: dict) -> float:
    return u["softirq"] + u["irq"]


def explain_latency(sub: Subject, dev: str = "DEV", top: int = 5) -> dict:
    d = sub.data
    lat = d["latency_ns"]
    ts, ta = lat["to_socket"], lat["to_app"]
    out = {"topic": "latency", "scenario": sub.name, "kernel": d.get("kernel"),
           "to_socket": ts, "to_app": ta, "causes": [], "notes": list(sub.notes)}
    if not ts["samples"]:
        out["notes"].append("no packet reached a socket: there is no latency to explain")
        return out
    rx = [c for c in d["cpus"] if c["softnet_stat"]["processed"]]
    rx.sort(key=lambda c: -_busy(c["util"]))
    causes = out["causes"]
    if rx:
        causes.append(_kernel_path(sub, rx, ts, dev, top))
    if ta["samples"]:
        causes.append(_socket_wait(sub, ts, ta, top))
        # the larger part of the p99.9 first
        gap = (ta["p999"] or 0) - (ts["p999"] or 0)
        if gap > (ts["p999"] or 0):
            causes.reverse()
    dropped = d["packets"]["dropped"]
    if dropped:
        out["notes"].append(f"{dropped:,} dropped packets are not in these latencies: the "
                            "tail is of delivered packets only (see `rxlab explain drops`)")
    return out


def _q(s: dict) -> str:
    return (f"p50 {fmt_time_ns(s['p50'])}, p99 {fmt_time_ns(s['p99'])}, "
            f"p99.9 {fmt_time_ns(s['p999'])}")


def _kernel_path(sub: Subject, rx: list[dict], ts: dict, dev: str, top: int) -> dict:
    c = rx[0]["cpu"]
    roles = cpu_roles(sub, c)
    sn = rx[0]["softnet_stat"]
    facts = [f"wire -> socket: {_q(ts)}",
             f"the busiest softirq CPU is {c} ({pct(_busy(roles['util']))} softirq + IRQ); "
             "its packets wait longest in the rx ring and backlog",
             describe_cpu(sub, c)]
    deferral = _deferral(sub, ts, dev)
    if roles["util"]["idle"] > 0.5:
        what = ("the wait for the NAPI hrtimer (above)" if deferral else "the path's fixed "
                "cost (interrupt, per-packet stages, wake-ups)")
        facts.append(f"no receive CPU is busy (CPU {c} is {pct(roles['util']['idle'])} idle): "
                     f"the latency is mostly {what}, not queueing")
    for other in rx[1:3]:
        facts.append("next: " + describe_cpu(sub, other["cpu"]))
    f = None
    if sub.flows is not None:
        fl = sub.flows
        f = flows_at(sub, (fl.irq_cpu == c) | ((fl.cpu == c) & fl.via_backlog), top)
        facts.append(f"{f['flows']:,} flows are polled or processed on CPU {c}: "
                     f"{f['packets']:,} packets")
        e = f["elephant"]
        if e:
            facts.append(f"elephant flow: {e['flow']} is {pct(e['share'])} of them "
                         f"(RSS bucket {e['rss_bucket']} -> rx queue {e['queue']})")
    if roles["util"]["ksoftirqd"]:
        facts.append(f"CPU {c} deferred softirq to ksoftirqd "
                     f"({pct(roles['util']['ksoftirqd'])}): that work waits for the "
                     "scheduler like any task")
    coalesce = setting(f"ethtool -C {dev} rx-usecs N{now(sub, 'rx_usecs')}",
                       "interrupt coalescing: each packet can wait this long before its poll")
    usecs = sub.now.get("rx_usecs") or 0
    if usecs * 1000 >= 0.25 * (ts["p99"] or 0) and usecs:
        facts.insert(1, f"interrupt coalescing holds each interrupt up to {usecs:g} us: "
                        f"{pct(usecs * 1000 / ts['p99'])} of the p99")
    sets = [setting(f"ethtool -X {dev} weight ... / ethtool -L {dev} combined N / "
                    f"/sys/class/net/{dev}/queues/rx-N/rps_cpus",
                    f"less traffic on CPU {c}: shorter queues in front of each packet"),
            setting(f"ethtool -G {dev} rx N{now(sub, 'ring_size')}",
                    "a shorter ring bounds the wait in it (and drops sooner)")]
    sets.insert(0 if usecs * 1000 >= 0.25 * (ts["p99"] or 0) and usecs else len(sets),
                coalesce)
    if deferral:
        facts.insert(1, deferral[0])
        sets.insert(0, deferral[1])
    busy = _busy_poll(sub)
    if busy:
        facts.insert(1, busy)
    if sn["time_squeeze"]:
        sets.append(setting("sysctl -w net.core.netdev_budget=N",
                            f"CPU {c} ran out of budget {sn['time_squeeze']:,} times; the "
                            "rest waited for the next softirq run"))
    if roles["threads"] and roles["util"]["ksoftirqd"]:
        sets.append(setting(f"taskset -pc <cpus> <tid>  (apps[].cpus without CPU {c})",
                            f"threads on CPU {c} delay its softirq when it runs in ksoftirqd"))
    return {"part": "to_socket", "where": f"CPU {c}",
            "title": f"before the socket: p99 {fmt_time_ns(ts['p99'])}",
            "facts": facts, "flows": f, "elephant": f and f["elephant"] or None,
            "settings": sets}


def _deferral(sub: Subject, ts: dict, dev: str) -> tuple[str, dict] | None:
    """IRQ deferral, when the run's NAPI hrtimers polled (queues[].timer_polls): a packet
    that arrives while its queue's IRQ is deferred waits for the next expiry
    (rxlab/kernel/napi_defer.py)."""
    qs = sub.data["queues"]
    timer = sum(q.get("timer_polls", 0) for q in qs)
    if not timer:
        return None
    polls = max(1, sum(q["polls"] for q in qs))
    fact = (f"IRQ deferral: {pct(timer / polls)} of the polls were started by the NAPI "
            "hrtimer, not an interrupt; a packet that arrives while its queue's IRQ is "
            "deferred waits for the timer's next expiry")
    tmo = sub.now.get("gro_flush_timeout")
    if isinstance(tmo, int) and tmo and ts["p99"]:
        fact += (f" (gro_flush_timeout {fmt_time_ns(tmo)}: {pct(tmo / ts['p99'])} of the "
                 "p99)")
    return fact, setting(f"echo 0 > /sys/class/net/{dev}/napi_defer_hard_irqs"
                         f"{now(sub, 'napi_defer_hard_irqs')}",
                         "IRQ deferral off: each packet is polled at its interrupt, for "
                         "more interrupts")


def _busy_poll(sub: Subject) -> str | None:
    """Socket busy polling, when the run's readers busy-polled (apps[].busy_poll_packets):
    what share of the packets their own polls took, and what the loops cost
    (rxlab/kernel/napi_busy_loop.py)."""
    d = sub.data
    apps = [a for a in d["apps"] if "busy_poll_packets" in a]
    if not apps:
        return None
    n = sum(a["busy_poll_packets"] for a in apps)
    got = max(1, d["packets"]["delivered"])
    cpus = sum(a["busy_poll_s"] for a in apps) / max(d["duration_s"], 1e-12)
    return (f"busy polling: the readers' own busy polls took {pct(n / got)} of the delivered "
            "packets (no interrupt-started softirq or wake-up in their path); their busy "
            f"loops kept {cpus:.2f} CPUs spinning (system time)")


def _socket_wait(sub: Subject, ts: dict, ta: dict, top: int) -> dict:
    d = sub.data
    gap99 = max(0.0, (ta["p99"] or 0) - (ts["p99"] or 0))
    facts = [f"wire -> application: {_q(ta)}; the reader adds about "
             f"{fmt_time_ns(gap99)} at p99"]
    # the threads most likely behind the tail: most served on a CPU busy with softirq
    th = [(t, a) for t, a in enumerate(d["apps"]) if a["served"]]
    score = np.array([a["served"] * (1 + 4 * _busy(d["cpus"][a["cpu"]]["util"]))
                      for _, a in th]) if th else np.zeros(0)
    sets = []
    f, where = None, "the readers"
    if th:
        t, a = th[int(np.argmax(score))]
        c = a["cpu"]
        where = f"socket {t}"
        roles = cpu_roles(sub, c)
        facts.append(f"thread {t} ({a['app']}, CPU {c}) reads {a['served']:,} packets, "
                     f"{pct(a['served'] / max(1, sum(x['served'] for _, x in th)))} of all, "
                     f"on a CPU with {pct(_busy(roles['util']))} softirq + IRQ")
        facts.append(describe_cpu(sub, c))
        if sub.flows is not None:
            f = flows_at(sub, sub.flows.sock == t, top)
            if f["elephant"]:
                e = f["elephant"]
                facts.append(f"elephant flow: {e['flow']} is {pct(e['share'])} of socket "
                             f"{t}'s packets (SO_REUSEPORT hash): one thread reads it all")
        if _busy(roles["util"]) > 0.1:
            sets.append(setting(f"taskset -pc <cpus> <tid>  (apps[].cpus without CPU {c})",
                                "softirq preempts the reader on its CPU"))
        sets.append(setting(f"{batched_reads(sub, t)} / apps[].batch{now(sub, 'batch', t)}",
                            "fewer wake-ups per packet (each costs a scheduler wake-up)"))
        sets.append(setting("apps[].cpus (more reader threads, one SO_REUSEPORT socket "
                            "each)", "fewer packets per socket"))
    return {"part": "to_app", "where": where,
            "title": f"in the socket: +{fmt_time_ns(gap99)} at p99",
            "facts": facts, "flows": f, "elephant": f and f["elephant"] or None,
            "settings": sets}
