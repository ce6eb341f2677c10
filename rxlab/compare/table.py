"""The comparison in the terminal: one table within the console's width.

Wide form (a row per metric; per configuration its mean, and beside it the difference
against the first) when it fits; otherwise a long form (a row per metric and
configuration, three value columns) that fits 80 columns with names of up to ~15
characters; past that ``print_fitted`` prints records. A number is never cut.
"""

from __future__ import annotations

import math

from rxlab.report.fit import fmt_count, fmt_per_s, fmt_rate, fmt_time_ns, print_fitted

MARK = "*"  # the difference's 95 % interval excludes 0
SHORT = {  # labels that keep the long form within 80 columns
    "delivered rate": "delivered rate", "drops, all reasons": "drops, all",
    "latency to socket p50": "sock latency p50", "latency to socket p99": "sock latency p99",
    "latency to socket p99.9": "sock latency p99.9", "latency to app p50": "app latency p50",
    "latency to app p99": "app latency p99", "latency to app p99.9": "app latency p99.9",
    "softirq, busiest CPU": "softirq max CPU", "softirq, mean of CPUs": "softirq mean CPU",
    "irq, mean of CPUs": "irq mean CPU", "system, mean of CPUs": "system mean CPU",
    "device interrupts, all queues": "interrupts", "reordered packets": "reordered pkts",
    "busy-polled packets, all queues": "busy-polled",
}


def fmt_value(kind: str, v: float | None, *, signed: bool = False) -> str:
    """A number in its kind's unit, chosen by magnitude; ``signed``: '+' on a rise."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "–"
    if kind == "time":
        s = fmt_time_ns(v)
    elif kind == "rate":
        s = fmt_rate(v)
    elif kind == "per_s":  # events per second (interrupts), not packets
        s = fmt_per_s(v)
    elif kind == "fraction":
        s = f"{100 * v:.2f} %" if abs(v) < 0.01 else f"{100 * v:.1f} %"
        if v and abs(100 * v) < 0.005:  # not "+0.00 %" beside a mark that says it is not 0
            s = f"{100 * v:.2g} %"
    else:
        s = fmt_count(v)
    return f"+{s}" if signed and v > 0 else s


def fmt_interval(kind: str, iv: dict, *, diff: bool = False) -> str:
    est, half = iv["estimate"], iv["ci95"]
    s = fmt_value(kind, est, signed=diff)
    if half is not None:
        s += f" ± {fmt_value(kind, half)}"
    if diff:
        s += f" {MARK}" if iv["significant"] else "  "
    return s


def _title(cmp: dict) -> str:
    cfg = cmp["configurations"]
    seeds = cfg[0]["seeds"]
    how = ("paired by seed" if cmp["paired"] else "Welch t, seeds differ")
    return (f"{len(cfg)} configurations x {len(seeds)} seeds ({seeds[0]}..{seeds[-1]}): mean "
            f"± 95 % CI; difference against {cmp['baseline']} ({how}); {MARK} = the "
            "difference's interval excludes 0")


def wide_rows(cmp: dict) -> tuple[list[str], list[list[str]]]:
    names = [c["name"] for c in cmp["configurations"]]
    head = ["metric", names[0]]
    for n in names[1:]:
        head += [n, f"Δ {n}"]
    rows = []
    for m in cmp["metrics"]:
        r = [m["label"], fmt_interval(m["kind"], m["mean"][names[0]])]
        for n in names[1:]:
            r += [fmt_interval(m["kind"], m["mean"][n]),
                  fmt_interval(m["kind"], m["diff"][n], diff=True)]
        rows.append(r)
    return head, rows


def long_rows(cmp: dict) -> tuple[list[str], list[list[str]]]:
    names = [c["name"] for c in cmp["configurations"]]
    head = ["metric / configuration", "mean ± 95 % CI", f"Δ vs {names[0]} ± 95 % CI"]
    rows = []
    for m in cmp["metrics"]:
        rows.append([SHORT.get(m["label"], m["label"]), "", ""])
        for i, n in enumerate(names):
            rows.append([f"  {n}", fmt_interval(m["kind"], m["mean"][n]),
                         "" if i == 0 else fmt_interval(m["kind"], m["diff"][n], diff=True)])
    return head, rows


def _fits(head: list[str], rows: list[list[str]], width: int) -> bool:
    cols = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(head)]
    return sum(cols) + 3 * len(cols) + 1 <= width


def print_comparison(console, cmp: dict) -> None:
    head, rows = wide_rows(cmp)
    if not _fits(head, rows, console.width):
        head, rows = long_rows(cmp)
    print_fitted(console, _title(cmp), head, rows)
    for c in cmp["configurations"]:
        if c["overrides"]:
            sets = ", ".join(f"{k}={v}" for k, v in c["overrides"].items())
            console.print(f"{c['name']}: {c['source']} with {sets}", highlight=False,
                          soft_wrap=True)
