"""Rich terminal tables rendered from a Result's dict (the same dict --json prints)."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table


def _pct(x: float) -> str:
    return f"{100 * x:.1f}"


def _n(x: float) -> str:
    return f"{x:,.0f}"


def summary_table(d: dict) -> Table:
    pk, tp = d["packets"], d["throughput"]
    t = Table(title=f"{d['scenario']}  (kernel {d['kernel']}, {d['duration_s']} s, "
                    f"seed {d['seed']})", show_header=False)
    t.add_column(style="bold")
    t.add_column(justify="right")
    t.add_row("offered", f"{_n(pk['offered'])}  ({_n(tp['offered_pps'])} pps)")
    t.add_row("delivered", f"{_n(pk['delivered'])}  ({_n(tp['delivered_pps'])} pps)")
    t.add_row("dropped", _n(pk["dropped"]))
    for reason, n in pk["dropped_by_reason"].items():
        if n:
            t.add_row(f"  {reason}", _n(n))
    if pk.get("forwarded"):
        t.add_row("forwarded (XDP_TX)", _n(pk["forwarded"]))
    t.add_row("in flight at end", _n(pk["in_flight"]))
    lat = d["latency_ns"]
    for key, label in (("to_socket", "NIC -> socket"), ("to_app", "NIC -> app")):
        v = lat[key]
        if v["samples"]:
            t.add_row(f"latency {label}",
                      f"p50 {v['p50'] / 1e3:.1f} us  p99 {v['p99'] / 1e3:.1f} us  "
                      f"p99.9 {v['p999'] / 1e3:.1f} us")
    t.add_row("reordered packets", _n(d["reordered_packets"]))
    return t


def cpu_table(d: dict) -> Table:
    t = Table(title="Per-CPU load (% of time; ksd = softirq run by ksoftirqd) and softnet_stat",
              padding=(0, 1))
    for col in ("cpu", "soft", "ksd", "irq", "sys", "usr", "idle",
                "processed", "dropped", "squeeze", "rps_ipi", "fl_cnt"):
        t.add_column(col, justify="right", no_wrap=True)
    for c in d["cpus"]:
        u, s = c["util"], c["softnet_stat"]
        t.add_row(str(c["cpu"]), _pct(u["softirq"]), _pct(u["ksoftirqd"]), _pct(u["irq"]),
                  _pct(u["system"]), _pct(u["user"]), _pct(u["idle"]), _n(s["processed"]),
                  _n(s["dropped"]), _n(s["time_squeeze"]), _n(s["received_rps"]),
                  _n(s["flow_limit_count"]))
    return t


def queue_table(d: dict) -> Table:
    t = Table(title="Per-queue")
    for col in ("queue", "irq cpu", "packets", "ring_full drops", "polls"):
        t.add_column(col, justify="right")
    for q in d["queues"]:
        t.add_row(str(q["queue"]), str(q["irq_cpu"]), _n(q["packets"]),
                  _n(q["ring_full_drops"]), _n(q["polls"]))
    return t


def app_table(d: dict) -> Table | None:
    if not d["apps"]:
        return None
    t = Table(title="Application threads")
    for col in ("app", "cpu", "served", "served pps", "socket drops"):
        t.add_column(col, justify="right")
    for a in d["apps"]:
        t.add_row(a["app"], str(a["cpu"]), _n(a["served"]), _n(a["served_pps"]),
                  _n(a["socket_drops"]))
    return t


def xdp_table(d: dict) -> Table | None:
    """XDP verdicts and, per cpumap entry, the sums of the xdp_cpumap_* tracepoints."""
    if "xdp" not in d:
        return None
    x = d["xdp"]
    t = Table(title=f"XDP: {_n(x['runs'])} runs, pass {_n(x['pass'])}, drop {_n(x['drop'])}, "
                    f"aborted {_n(x['aborted'])}, tx {_n(x['tx'])}, "
                    f"redirect {_n(x['redirect'])}")
    for col in ("cpumap cpu", "qsize", "enqueued", "enqueue drops", "bulk avg",
                "kthread processed", "wakeups"):
        t.add_column(col, justify="right")
    for e in d.get("cpumap", []):
        t.add_row(str(e["cpu"]), str(e["qsize"]), _n(e["enqueued"]), _n(e["enqueue_drops"]),
                  f"{e['bulk_average']:.2f}", _n(e["kthread_processed"]),
                  _n(e["kthread_wakeups"]))
    return t


def make_console() -> Console:
    """A terminal keeps its width; a pipe or file gets 140 columns, not rich's 80."""
    import sys

    return Console() if sys.stdout.isatty() else Console(width=140)


def print_result(d: dict, console: Console | None = None) -> None:
    console = console or make_console()
    console.print(summary_table(d))
    console.print(cpu_table(d))
    console.print(queue_table(d))
    xt = xdp_table(d)
    if xt is not None:
        console.print(xt)
    at = app_table(d)
    if at is not None:
        console.print(at)


def experiment_table(exp: dict) -> Table:
    """Cases side by side, metrics as rows (like the seeds' tables); with many cases,
    one row per case instead."""
    cases = exp["cases"]
    t = Table(title=exp.get("title", exp["experiment"]))
    keys = exp.get("table_metrics") or [k for k in cases[0]["metrics"]
                                        if isinstance(cases[0]["metrics"][k], (int, float))]
    if len(cases) > 5:
        t.add_column("case", style="bold", no_wrap=True)  # names stay whole
        for k in keys:
            t.add_column(k, justify="right", overflow="fold")
        for c in cases:
            t.add_row(c["name"], *(_fmt(c["metrics"].get(k)) for k in keys))
        return t
    t.add_column("metric", style="bold")
    for c in cases:
        t.add_column(c["name"], justify="right")
    for k in keys:
        row = []
        for c in cases:
            v = c["metrics"].get(k)
            row.append(_fmt(v))
        t.add_row(k, *row)
    return t


def _fmt(v) -> str:
    if isinstance(v, bool) or v is None:
        return str(v)
    if isinstance(v, float) and abs(v) < 10:
        return f"{v:.3f}"
    if isinstance(v, (int, float)):
        return _n(v)
    if isinstance(v, list):
        return " ".join(_fmt(x) for x in v)
    return str(v)
