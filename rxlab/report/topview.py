"""What ``top`` would have shown for a simulated run: /proc/stat and per-task CPU time.

How the kernel accounts the model's CPU time (kernel/sched/cputime.c, v5.7 as v6.x):

* softirq work is CPUTIME_SOFTIRQ, top's ``si``, whether it ran inline (on irq_exit) or in
  ksoftirqd/N. With CONFIG_IRQ_TIME_ACCOUNTING, ``irqtime_account_irq`` charges inline
  softirq time to CPUTIME_SOFTIRQ and skips ksoftirqd ("We do not account for softirq
  time from ksoftirqd here"); ``irqtime_account_process_tick`` then charges ksoftirqd's
  ticks with ``account_system_index_time(p, cputime, CPUTIME_SOFTIRQ)``: to /proc/stat's
  softirq *and* to the ksoftirqd task's own ``stime``. Without it, ``account_system_time``
  picks CPUTIME_SOFTIRQ for a tick that lands ``in_serving_softirq()``.
* hardirq time is CPUTIME_IRQ (``hi``); a task's kernel time CPUTIME_SYSTEM (``sy``), its
  user time CPUTIME_USER (``us``; CPUTIME_NICE for niced tasks, ``ni``).
* fs/proc/stat.c ``show_stat`` prints per CPU ``user nice system idle iowait irq softirq
  steal guest guest_nice`` in USER_HZ ticks.

What top (procps-ng) does with them: the summary line is each field's delta over the sum
of the deltas of user..steal, times 100 (``summaryhlp``); a task's %CPU is its utime +
stime delta over the elapsed time, 100 % = one CPU (Irix mode, the default), or divided
by the number of CPUs in Solaris mode (``I``). So inline softirq shows in ``si`` and in no
task's row (with irq time accounting; without it, in the row of whatever task the
interrupt landed on, and nowhere when that was the idle task); softirq run by ksoftirqd
shows in ``si`` and in the ksoftirqd/N row.
"""

from __future__ import annotations

from rxlab.host.procfs import PROC_STAT_FIELDS as STAT_FIELDS

TOP_KEYS = ("us", "ni", "sy", "id", "wa", "hi", "si", "st")  # same order as STAT_FIELDS
SHOWN = ("us", "sy", "ni", "id", "wa", "hi", "si", "st")  # top's order on screen


def stat_shares(util: dict) -> dict:
    """One CPU's /proc/stat fields as shares of the run, from the model's split (the model
    has no nice, iowait or steal time; its ``softirq`` already includes ksoftirqd's)."""
    return {"user": util["user"], "nice": 0.0, "system": util["system"],
            "idle": util["idle"], "iowait": 0.0, "irq": util["irq"],
            "softirq": util["softirq"], "steal": 0.0}


def proc_stat_text(cpus: list[dict], duration_s: float, user_hz: int = 100) -> str:
    """The ``cpu`` lines of /proc/stat after the run, from counters at 0 (USER_HZ ticks)."""
    rows = [{f: round(v * duration_s * user_hz) for f, v in stat_shares(c["util"]).items()}
            for c in cpus]
    total = {f: sum(r[f] for r in rows) for f in STAT_FIELDS}
    lines = ["cpu  " + " ".join(str(total[f]) for f in STAT_FIELDS) + " 0 0"]
    lines += [f"cpu{c} " + " ".join(str(r[f]) for f in STAT_FIELDS) + " 0 0"
              for c, r in enumerate(rows)]
    return "\n".join(lines) + "\n"


def top_summary(before: dict, after: dict) -> dict:
    """top's ``%Cpu(s)`` line between two /proc/stat readings of one row (procps-ng
    ``summaryhlp``): each field's delta x 100 / the sum of the deltas."""
    d = {f: max(0, after[f] - before[f]) if f == "idle" else after[f] - before[f]
         for f in STAT_FIELDS}
    tot = max(1, sum(d.values()))
    return {k: 100.0 * d[f] / tot for k, f in zip(TOP_KEYS, STAT_FIELDS, strict=True)}


def summary_of(utils: list[dict]) -> dict:
    """The same line straight from the model's shares (no tick rounding)."""
    shares = [stat_shares(u) for u in utils]
    tot = sum(sum(s.values()) for s in shares) or 1.0
    return {k: 100.0 * sum(s[f] for s in shares) / tot
            for k, f in zip(TOP_KEYS, STAT_FIELDS, strict=True)}


def top_view(data: dict) -> dict:
    """A result's CPU time as top shows it: the machine-wide summary line, one line per
    CPU (top's ``1`` toggle) and the ksoftirqd/N rows, %CPU in Irix mode (100 = one CPU)
    and Solaris mode (100 = the machine)."""
    cpus = data["cpus"]
    n = len(cpus)
    tasks = [{"command": f"ksoftirqd/{c['cpu']}",
              "cpu_pct": round(100.0 * c["util"]["ksoftirqd"], 2),
              "cpu_pct_solaris": round(100.0 * c["util"]["ksoftirqd"] / n, 2)} for c in cpus]
    return {
        "summary": {k: round(v, 2) for k, v in summary_of([c["util"] for c in cpus]).items()},
        "per_cpu": [{k: round(v, 2) for k, v in summary_of([c["util"]]).items()}
                    for c in cpus],
        "ksoftirqd": sorted(tasks, key=lambda t: -t["cpu_pct"]),
        "ksoftirqd_pct_sum": round(sum(t["cpu_pct"] for t in tasks), 2),
    }


def summary_line(s: dict) -> str:
    """Formatted like top's: ``%Cpu(s):  0.0 us,  0.0 sy, ...``."""
    return "%Cpu(s): " + ", ".join(f"{s[k]:4.1f} {k}" for k in SHOWN)
