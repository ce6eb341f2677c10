"""The calibration experiments on the real kernel, and one run's figures.

Every run: 8 connected UDP flows, sender pinned to CPU 0 and paced, receiver on CPU 0
reading every 1 ms (``RECV_NAP``: nothing on CPU 1 has to wake it),
``rps_cpus=2`` on every rx queue of the receiving veth (all packets processed on CPU 1),
``n`` non-matching tc u32 filters at the receiver's ingress (0 = the plain stack; more
filters slow CPU 1's per-packet work, so the fit can separate the host's own cost from
the lab's slowdown and the checks can reach saturation with a Python sender). One
block holds at most 2047 u32 filters (net/sched/cls_u32.c gen_new_htid: hash table
ids below 0x800), hence the counts.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass

from rxlab.host.experiment import (
    RECV_NAP,
    HandoffTimer,
    Run,
    SoftirqTimer,
    handoff_quantiles,
    run_traffic,
    slow_consumer,
)
from rxlab.host.lab import Lab

SEND_CPU, TARGET_CPU, APP_CPU = 0, 1, 0
HANDOFF_PPS = 2000  # one packet at a time: CPU 1 idle when each arrives (the best case)
FLOWS = list(range(41000, 41008))
USER_HZ = os.sysconf("SC_CLK_TCK")  # /proc/stat counts in these ticks


@dataclass
class Plan:
    """What to run: u32 filter counts, load fractions of the usable rate (besides the
    unpaced runs), repetitions."""

    filters: tuple[int, ...] = (0, 800, 1600)
    fractions: tuple[float, ...] = (0.5, 0.75, 1.0)
    repeat: int = 3
    duration: float = 1.0

    @classmethod
    def quick(cls) -> Plan:
        return cls(filters=(0, 800, 1600), fractions=(0.5, 1.0), repeat=3, duration=0.4)

    def runs(self) -> int:  # + the background, the waiting receiver's and the hand-off runs
        return (len(self.filters) * (1 + len(self.fractions)) + 2) * self.repeat + 1


def configure(lab: Lab, n_filters: int) -> None:
    """RPS to CPU 1 on every rx queue, ``n_filters`` u32 filters at tc ingress."""
    lab.reset_device()
    lab.set_rx_queues("2", 0)
    if n_filters:
        lab.add_clsact(lab.ns_rx, lab.dev_rx)
        slow_consumer(n_filters, lab)


def point(run: Run, n_filters: int, pps: float | None, soft: dict) -> dict:
    """One run's figures: CPU 1's softirq time (tracepoints ``soft``, and /proc/stat
    ticks) and packets, CPU 0's, the processes' own CPU time."""
    tick_ns = 1e9 / USER_HZ
    sn1 = run.softnet.get(TARGET_CPU, {})
    t1 = run.cpu_ticks.get(TARGET_CPU, {})
    t0 = run.cpu_ticks.get(SEND_CPU, {})
    return {
        "filters": n_filters, "pps_target": round(pps or 0.0, 1),
        "sent": run.total_sent, "send_seconds": round(run.send_seconds, 4),
        "window_s": round(run.window, 4),
        "processed": sn1.get("processed", 0), "dropped": sn1.get("dropped", 0),
        "ipis": sn1.get("received_rps", 0),
        "softirq_ns": soft.get(TARGET_CPU, {}).get("ns", 0),
        "softirq_runs": soft.get(TARGET_CPU, {}).get("runs", 0),
        "softirq_ns_cpu0": soft.get(SEND_CPU, {}).get("ns", 0),
        "softirq_ticks_ns": t1.get("softirq", 0) * tick_ns,
        "busy_ns_cpu1": sum(t1.get(k, 0) for k in ("user", "nice", "system", "irq",
                                                   "softirq")) * tick_ns,
        "softirq_ticks_ns_cpu0": t0.get("softirq", 0) * tick_ns,
        "received": sum(run.received.values()),
        "recv_stime_ns": run.recv_rusage.get("stime", 0.0) * 1e9,
        "recv_utime_ns": run.recv_rusage.get("utime", 0.0) * 1e9,
        "send_stime_ns": run.send_rusage.get("stime", 0.0) * 1e9,
        "recv_wakeups": run.recv_rusage.get("nvcsw", 0),
        "send_sleeps": run.send_pacing.get("sleeps", 0),
        "send_slept_s": round(run.send_pacing.get("slept", 0.0), 4),
    }


def one(lab: Lab, timer: SoftirqTimer, n_filters: int, pps: float | None,
        duration: float, nap: float = RECV_NAP) -> dict:
    a = timer.read()
    run = run_traffic(lab, FLOWS, duration=duration, send_cpu=SEND_CPU, recv_cpu=APP_CPU,
                      pps=pps, nap=nap)
    b = timer.read()
    soft = {c: {k: v - a.get(c, {}).get(k, 0) for k, v in e.items()} for c, e in b.items()}
    return point(run, n_filters, pps, soft)


def usable_rate(pilot: dict) -> float:
    """The highest load to fit on: below what the sender managed unpaced (0.85) and
    below CPU 1's estimated capacity (0.75): the fit needs unsaturated runs."""
    sent_rate = pilot["sent"] / max(pilot["send_seconds"], 1e-3)
    busy = pilot["softirq_ns"] / max(pilot["send_seconds"] * 1e9, 1.0)
    proc_rate = pilot["processed"] / max(pilot["window_s"], 1e-3)
    cap = proc_rate / busy if busy > 0.05 else float("inf")
    return max(1000.0, min(0.85 * sent_rate, 0.75 * cap))


def measure(lab: Lab, timer: SoftirqTimer, plan: Plan,
            progress: Callable[[str], None]) -> dict:
    """All runs of ``plan``: per filter count ``repeat`` runs at the sender's full rate
    (the first, the pilot, sets the paced loads) and ``repeat`` at each fraction of the
    usable rate; then, with the middle filter count at half the usable rate, ``repeat``
    runs with the receiver waiting on its sockets (woken by CPU 1's softirq: what a
    wake-up costs the waker, not fitted); {"pilots": [...], "points": [every fitted run],
    "wakeup_points": [...], "handoff": [hand-off quantiles per run],
    "background_ns_per_s"}."""
    pilots, points, wakes, tops = [], [], [], {}
    progress("background: CPU 1's NET_RX softirq time without traffic")
    a = timer.read()
    t = time.monotonic()
    time.sleep(plan.duration)
    b = timer.read()
    bg = ((b.get(TARGET_CPU, {}).get("ns", 0) - a.get(TARGET_CPU, {}).get("ns", 0))
          / (time.monotonic() - t))
    for n in plan.filters:
        configure(lab, n)
        for rep in range(plan.repeat):  # unpaced: CPU 1 saturated where the filters allow
            progress(f"{n} u32 filters: the sender's full rate, repetition {rep + 1}")
            points.append(one(lab, timer, n, None, plan.duration))
        pilots.append(points[-plan.repeat])
        top = tops[n] = usable_rate(pilots[-1])
        for rep in range(plan.repeat):
            for frac in plan.fractions:
                pps = top * frac
                progress(f"{n} u32 filters: {pps / 1000:.0f} kpps, repetition {rep + 1}")
                points.append(one(lab, timer, n, pps, plan.duration))
    n = plan.filters[len(plan.filters) // 2]
    configure(lab, n)
    for rep in range(plan.repeat):
        progress(f"{n} u32 filters: the receiver woken by CPU 1, repetition {rep + 1}")
        wakes.append(one(lab, timer, n, tops[n] * 0.5, plan.duration, nap=0.0))
    configure(lab, 0)
    handoff = []
    for rep in range(plan.repeat):
        progress(f"the RPS hand-off at {HANDOFF_PPS} pps, repetition {rep + 1}")
        handoff.append(handoff_run(lab, plan.duration))
    lab.reset_device()
    return {"pilots": pilots, "points": points, "wakeup_points": wakes,
            "handoff": handoff, "background_ns_per_s": bg}


def handoff_run(lab: Lab, duration: float) -> dict:
    """The time from ``netif_rx`` on CPU 0 to ``__netif_receive_skb_core`` on CPU 1 of
    each packet of a slow paced run (``HandoffTimer``): what the RPS IPI and CPU 1's
    softirq add when CPU 1 has nothing else to do."""
    timer = HandoffTimer()
    try:
        h0 = timer.read()
        run = run_traffic(lab, FLOWS, duration=duration, send_cpu=SEND_CPU,
                          recv_cpu=APP_CPU, pps=HANDOFF_PPS, nap=RECV_NAP)
        q = handoff_quantiles(h0, timer.read())
    finally:
        timer.close()
    q["sent"] = run.total_sent
    return q
