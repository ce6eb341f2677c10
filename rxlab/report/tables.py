"""Rich terminal tables rendered from a Result's dict (the same dict --json prints)."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from rxlab.report.fit import fmt_per_s, fmt_rate, fmt_time_ns, print_fitted


def _pct(x: float) -> str:
    return f"{100 * x:.1f}"


def _n(x: float) -> str:
    return f"{x:,.0f}"


def summary_table(d: dict) -> Table:
    pk, tp = d["packets"], d["throughput"]
    t = Table(title=f"{d['scenario']}  (kernel {d['kernel']}, "
                    f"{fmt_time_ns(d['duration_s'] * 1e9)}, seed {d['seed']})",
              show_header=False)
    t.add_column(style="bold")
    t.add_column(justify="right")
    t.add_row("offered", f"{_n(pk['offered'])}  ({fmt_rate(tp['offered_pps'])})")
    t.add_row("delivered", f"{_n(pk['delivered'])}  ({fmt_rate(tp['delivered_pps'])})")
    t.add_row("dropped", _n(pk["dropped"]))
    for reason, n in pk["dropped_by_reason"].items():
        if n:
            t.add_row(f"  {reason}", _n(n))
    if pk.get("forwarded"):
        t.add_row("forwarded (XDP_TX)", _n(pk["forwarded"]))
    t.add_row("in flight at end", _n(pk["in_flight"]))
    lat = d["latency_ns"]
    # every latency starts when the frame is off the wire
    for key, label in (("to_socket", "wire -> socket"), ("to_app", "wire -> app")):
        v = lat[key]
        if v["samples"]:
            t.add_row(f"latency {label}",
                      f"p50 {fmt_time_ns(v['p50'])}  p99 {fmt_time_ns(v['p99'])}  "
                      f"p99.9 {fmt_time_ns(v['p999'])}")
    v = lat.get("nic_wait")
    if v and v["samples"] and v["max"]:  # only where the NIC's packet-rate ceiling queues
        t.add_row("NIC FIFO wait", f"mean {fmt_time_ns(v['mean'])}  p50 "
                                   f"{fmt_time_ns(v['p50'])}  p99 {fmt_time_ns(v['p99'])}")
    t.add_row("reordered packets", _n(d["reordered_packets"]))
    cap = d.get("capture")
    if cap:  # a replay: what of the file was offered, and what was not
        skipped = ", ".join(f"{n:,} {why}" for why, n in cap["skipped"].items()) or "none"
        t.add_row("capture", f"{_n(cap['packets'])} of {_n(cap['records'])} records replayed "
                             f"({_n(cap['flows'])} flows); skipped: {skipped}")
    return t


def nothing_delivered(pk: dict) -> str | None:
    """A word under 'delivered 0': why, so that a flood that is meant to reach no socket
    (the built-in cpumap scenario) does not read as a broken run."""
    if pk["delivered"] or not pk["offered"] or pk.get("forwarded"):
        return None
    reasons = {r: n for r, n in pk["dropped_by_reason"].items() if n}
    if not reasons:
        return None
    top = max(reasons, key=reasons.get)
    if top == "no_socket":
        return ("delivered 0: no socket is bound to these flows' port (no_socket), as in a "
                "UdpNoPorts flood, which measures the path up to the socket lookup")
    return f"delivered 0: every packet was dropped, most for {top}"


def print_cpus(d: dict, console: Console) -> None:
    # ksoftirqd's time is part of softirq's, not beside it: the header says so
    headers = ("cpu", "softirq %", "of it in ksoftirqd %", "irq %", "system %", "user %",
               "idle %",
               "processed", "dropped", "time_squeeze", "received_rps", "flow_limit_count")
    rows = []
    for c in d["cpus"]:
        u, s = c["util"], c["softnet_stat"]
        rows.append([str(c["cpu"]), _pct(u["softirq"]), _pct(u["ksoftirqd"]), _pct(u["irq"]),
                     _pct(u["system"]), _pct(u["user"]), _pct(u["idle"]), _n(s["processed"]),
                     _n(s["dropped"]), _n(s["time_squeeze"]), _n(s["received_rps"]),
                     _n(s["flow_limit_count"])])
    print_fitted(console, "Per-CPU load (% of time: softirq + irq + system + user + idle = "
                 "100) and softnet_stat", headers, rows)


def print_queues(d: dict, console: Console) -> None:
    """Per rx queue, with its interrupt rate (its /proc/interrupts line over the traffic's
    duration) and, when IRQ deferral ran, the polls its hrtimer started; when sockets
    busy-poll, the packets their busy polls took (BusyPollRxPackets)."""
    secs = d["duration_s"]
    timer = any(q.get("timer_polls") for q in d["queues"])
    busy = any("busy_poll_packets" in q for q in d["queues"])
    rows = [[str(q["queue"]), str(q["irq_cpu"]), _n(q["packets"]), _n(q["ring_full_drops"]),
             _n(q["polls"]), _irq_rate(q.get("irqs"), secs)]
            + ([_n(q["timer_polls"])] if timer else [])
            + ([_n(q["busy_poll_packets"])] if busy else []) for q in d["queues"]]
    print_fitted(console, "Per-queue", ("queue", "irq cpu", "packets", "ring_full drops",
                                        "polls", "irqs/s") + (("timer polls",) if timer else ())
                 + (("busy-polled",) if busy else ()), rows)


def _irq_rate(irqs: int | None, secs: float) -> str:
    if irqs is None or secs <= 0:
        return "–"
    return fmt_per_s(irqs / secs)


def print_apps(d: dict, console: Console) -> None:
    if not d["apps"]:
        return
    busy = any("busy_poll_packets" in a for a in d["apps"])
    rows = [[a["app"], str(a["cpu"]), _n(a["served"]), fmt_rate(a["served_pps"]),
             _n(a["socket_drops"])]
            + ([_n(a["busy_poll_packets"]), _pct(a["busy_poll_s"] / d["duration_s"])]
               if busy else []) for a in d["apps"]]
    print_fitted(console, "Application threads",
                 ("app", "cpu", "served", "served rate", "socket drops")
                 + (("busy-polled", "busy loop %") if busy else ()), rows)


TASKS_SHOWN = 12


def print_tasks(d: dict, console: Console) -> None:
    """The busiest tasks, as top or pidstat would list them: CPU time over the run, and
    how much of it was softirq run in the task's own context (rxlab.metrics.tasks)."""
    busy = sorted((t for t in d.get("tasks", []) if t["cpu_s"] > 0),
                  key=lambda t: -t["cpu_s"])
    if not busy:
        return
    rows = [[t["task"], str(t["cpu"]), _pct(t["share"]),
             _pct(t["softirq_s"] / t["cpu_s"])] for t in busy[:TASKS_SHOWN]]
    title = "Tasks (CPU time of the run, as /proc/PID/stat shows it)"
    if len(busy) > TASKS_SHOWN:
        title += f"; the {TASKS_SHOWN} busiest of {len(busy)}"
    print_fitted(console, title, ("task", "cpu", "cpu %", "of it softirq %"), rows)


def print_xdp(d: dict, console: Console) -> None:
    """XDP verdicts and, per cpumap entry, the sums of the xdp_cpumap_* tracepoints."""
    if "xdp" not in d:
        return
    x = d["xdp"]
    title = (f"XDP: {_n(x['runs'])} runs, pass {_n(x['pass'])}, drop {_n(x['drop'])}, "
             f"aborted {_n(x['aborted'])}, tx {_n(x['tx'])}, redirect {_n(x['redirect'])}")
    rows = [[str(e["cpu"]), str(e["qsize"]), _n(e["enqueued"]), _n(e["enqueue_drops"]),
             f"{e['bulk_average']:.2f}", _n(e["kthread_processed"]), _n(e["kthread_wakeups"])]
            for e in d.get("cpumap", [])]
    if not rows:
        console.print(title, highlight=False)
        return
    print_fitted(console, title, ("cpumap cpu", "qsize", "enqueued", "enqueue drops",
                                  "bulk avg", "kthread processed", "wakeups"), rows)


MIN_WIDTH = 40  # narrower, no table holds a key column and a value beside it


def console_width() -> int | None:
    """``COLUMNS`` when set, in a pipe too (``COLUMNS=80 rxlab run | less``); else 80 in
    a pipe or file, and None on a terminal: rich reads its width."""
    import os
    import sys

    cols = os.environ.get("COLUMNS", "").strip()
    if cols.isdigit() and int(cols) > 0:
        return max(MIN_WIDTH, int(cols))
    return None if sys.stdout.isatty() else 80


def text_width() -> int:
    """The width plain ``print`` text is wrapped to: ``console_width``, or the terminal's."""
    import shutil

    return console_width() or shutil.get_terminal_size().columns


def plus_minus(console: Console) -> str:
    """'±' where the console draws Unicode, '+-' in a pipe (one byte, one column)."""
    return "±" if console.encoding.startswith("utf") else "+-"


class _PlainConsole(Console):
    """A pipe's or file's console: tables drawn in ASCII, so that a line's bytes are its
    columns (``awk 'length > 80'``, ``cut -c``, a mail) as they are on the screen."""

    @property
    def encoding(self) -> str:
        return "ascii"  # rich's ascii_only: ASCII boxes and bars


def make_console(**kwargs) -> Console:
    """The console every table is printed on: see ``console_width``."""
    import sys

    cls = Console if sys.stdout.isatty() else _PlainConsole
    return cls(width=console_width(), **kwargs)


def print_result(d: dict, console: Console | None = None) -> None:
    console = console or make_console()
    console.print(summary_table(d))
    note = nothing_delivered(d["packets"])
    if note:
        from rxlab.report.fit import print_wrapped

        print_wrapped(console, note)
    print_cpus(d, console)
    print_queues(d, console)
    print_xdp(d, console)
    print_apps(d, console)
    print_tasks(d, console)


def print_experiment(exp: dict, console: Console) -> None:
    """Cases side by side, metrics as rows (like the seeds' tables); with many cases,
    one row per case instead. Either way the table fits the console's width."""
    cases = exp["cases"]
    title = exp.get("title", exp["experiment"])
    if exp.get("seeds", 1) > 1:
        title += f": means over {exp['seeds']} traffic seeds"
    keys = exp.get("table_metrics") or [k for k in cases[0]["metrics"]
                                        if isinstance(cases[0]["metrics"][k], (int, float))]
    if len(cases) > 5:
        rows = [[c["name"], *(_fmt(c["metrics"].get(k)) for k in keys)] for c in cases]
        print_fitted(console, title, ["case", *keys], rows)
    else:
        rows = [[k, *(_fmt(c["metrics"].get(k)) for c in cases)] for k in keys]
        print_fitted(console, title, ["metric", *(c["name"] for c in cases)], rows)
    if exp.get("seed_table"):  # the seed's whole posted table beside the model's
        from rxlab.report.seed_table import print_seed_table

        print_seed_table(exp["seed_table"], console)


def print_claims(exp: dict, console: Console) -> None:
    """Each claim with its verdict and basis, then every figure that judged it: the mean
    and 95 % interval over the seeds against the claimed bound."""
    import textwrap

    from rich.text import Text

    from rxlab.report.fit import print_wrapped

    n = exp.get("seeds")
    print_wrapped(console, f"Claims of the seed, judged on 95 % Student-t intervals over {n} "
                  "traffic seeds (calibrated: a cost was set from that figure of the seed; "
                  "predicted: the model's output)")
    pad = " " * 14  # a claim's later lines and its figures sit under its text, not at 0
    for c in exp["claims"]:
        head = f"  {'held    ' if c['held'] else 'NOT held'}  {c['basis']}  {c['claim']}"
        for i, line in enumerate(textwrap.wrap(head, console.width, subsequent_indent=pad,
                                               break_long_words=False,
                                               break_on_hyphens=False)):
            t = Text(line)
            if i == 0:  # the verdict in colour, the basis in bold, as before
                t.stylize("green" if c["held"] else "red", 2, 10)
                t.stylize("bold", 12, 12 + len(c["basis"]))
            console.print(t, soft_wrap=True)
        if c.get("calibrated_from"):
            print_wrapped(console, f"calibrated from: {c['calibrated_from']}", pad,
                          style="dim")
        for f in c["figures"]:
            print_wrapped(console, figure_text(f), f"{pad}{'ok ' if f['held'] else 'NO '} ",
                          pad + "    ")


def figure_text(f: dict) -> str:
    """``label: mean [lo, hi] op bound`` (a yes/no figure: on how many seeds it was true)."""
    if f["op"] == "true":
        k = sum(1 for v in f["values"] if v == 1.0)
        return f"{f['figure']}: true on {k}/{len(f['values'])} seeds"
    lo, hi = f["ci95"]
    b = f["bound"]
    side = (f"within [{_num(b[0])}, {_num(b[1])}]" if f["op"] == "within"
            else f"{f['op']} {_num(b)}")
    return f"{f['figure']}: {_num(f['mean'])} [{_num(lo)}, {_num(hi)}], claimed {side}"


def _num(x: float) -> str:
    if x != x or abs(x) >= 1e4:
        return f"{x:,.0f}"
    if abs(x) >= 100:
        return f"{x:,.1f}"
    return f"{x:.4g}"


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
