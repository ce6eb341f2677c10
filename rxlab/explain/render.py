"""Print an explanation within the terminal's width (tables through rxlab.report.fit)."""

from __future__ import annotations

import textwrap

from rich.console import Console

from rxlab.cpuset import format_cpulist
from rxlab.explain.common import pct
from rxlab.report.fit import fmt_count, print_fitted
from rxlab.report.printable import printable

FLOW_HEADERS = ["flow", "share", "of all", "packets", "not delivered", "RSS bucket",
                "queue", "IRQ CPU", "backlog CPU", "socket", "thread CPU"]


def _say(console: Console, text: str, indent: int = 0, hang: int = 2) -> None:
    """One paragraph wrapped at the console's width, continuation lines indented."""
    # a user's name may hold control characters: escaped before wrap turns \n to ' '
    lines = textwrap.wrap(printable(text), max(20, console.width - 1), initial_indent=" " * indent,
                          subsequent_indent=" " * (indent + hang), break_long_words=False,
                          break_on_hyphens=False) or [""]
    for line in lines:  # markup off: 5-tuples with IPv6 addresses hold brackets
        console.print(line, markup=False, highlight=False, soft_wrap=True)


def _flow_table(console: Console, f: dict, where: str) -> None:
    rows = [[r["flow"], pct(r["share"]), pct(r["share_of_all"]), fmt_count(r["packets"]),
             fmt_count(r["lost"]), str(r["rss_bucket"]), str(r["queue"]), str(r["irq_cpu"]),
             str(r["cpu"]), "-" if r["socket"] < 0 else str(r["socket"]),
             "-" if r["thread_cpu"] is None else str(r["thread_cpu"])] for r in f["top"]]
    print_fitted(console, f"largest flows at {where}", FLOW_HEADERS, rows)


def print_explanation(ex: dict, console: Console) -> None:
    kernel = f", kernel {ex['kernel']}" if ex.get("kernel") else ""
    if ex["topic"] == "drops":
        _say(console, f"{ex['scenario']}{kernel}: offered {ex['offered']:,}, delivered "
                      f"{ex['delivered']:,}, dropped {ex['dropped']:,}")
        if not ex["causes"]:
            _say(console, "No packet was dropped: nothing to attribute.")
    else:
        _say(console, f"{ex['scenario']}{kernel}: latency of delivered packets")
    for n, c in enumerate(ex["causes"], 1):
        console.print()
        _say(console, f"{n}. {c['title']}")
        for fact in c["facts"]:
            _say(console, f"- {fact}", 3)
        if c.get("flows") and c["flows"]["top"]:
            _flow_table(console, c["flows"], c["where"])
        if c["settings"]:
            _say(console, "settings that move it:", 3)
            for s in c["settings"]:
                _say(console, s["setting"], 5, 4)
                _say(console, s["why"], 7)
    sq = ex.get("softirq_budget")
    if sq and ex["causes"]:
        console.print()
        _say(console, "time_squeeze (softnet_stat column 3) per CPU with rx work:")
        groups: dict[str, list[dict]] = {}
        for r in sq:  # CPUs with the same reason on one line
            groups.setdefault(r["why"], []).append(r)
        for why, rs in groups.items():
            cpus = format_cpulist([r["cpu"] for r in rs])
            _say(console, f"- CPU{'s' if len(rs) > 1 else ''} {cpus}: {why}", 3)
            for s in rs[0]["settings"]:
                _say(console, f"{s['setting']}: {s['why']}", 5)
    for note in ex.get("notes", []):
        _say(console, f"note: {note}")
