"""Terminal rendering of a ``tune`` report (the dict ``--json`` prints)."""

from __future__ import annotations

import textwrap

from rich.console import Console
from rich.table import Table

from rxlab.tune.recommend import fmt_ns, idle_runs


def _mib(b: int) -> str:
    return f"{b / 2**20:,.2f} MiB"


NAMES = {"p99_ns": "p99 latency", "imbalance": "CPU load max/mean",
         "victim_drop_rate": "victims' drop rate"}


def fmt_metric(key: str, v: float) -> str:
    if key == "p99_ns":
        return fmt_ns(v)
    if key.endswith("rate"):
        return f"{v:.3%}"
    return f"{v:.3f}"


def _line(con: Console, text: str) -> None:
    con.print(text, markup=False, highlight=False)


def candidates_table(r: dict) -> Table:
    key = r["metric"]
    t = Table(title=f"Settings tried, each on {len(r['runs'])} runs ({', '.join(r['runs'])}): "
                    f"{NAMES[key]}, lower is better")
    for col, just in (("setting", "left"), ("before (mean)", "right"),
                      ("after: mean [min, max]", "right"), ("better on", "right"),
                      ("verdict", "left")):
        t.add_column(col, justify=just, overflow="fold")  # a long word wraps, never cut
    for name, c in r["candidates"].items():
        if c.get("in_place"):
            t.add_row(name, "", "", "", "already in place")
            continue
        v = c["validation"]
        t.add_row(name, fmt_metric(key, v["mean_before"]),
                  f"{fmt_metric(key, v['mean_after'])} [{fmt_metric(key, v['min_after'])}, "
                  f"{fmt_metric(key, v['max_after'])}]", f"{v['wins']}/{v['runs']}",
                  ("recommended" if name in r["recommended"] else
                   "adopted" if c["adopt"] else "no") + f": {c['why']}")
    return t


def runs_table(r: dict) -> Table:
    key = r["metric"]
    t = Table(title="Before and after, per run (simulated)")
    t.add_column("run")
    keys = [key] + [k for k in ("p99_ns",) if k != key]
    for k in keys:
        t.add_column(f"{NAMES[k]} before", justify="right")
        t.add_column("after", justify="right")
    t.add_column("drops before", justify="right")
    t.add_column("after", justify="right")
    for lab in r["runs"]:
        b, a = r["before"][lab], r["after"][lab]
        cells = [x for k in keys for x in (fmt_metric(k, b[k]), fmt_metric(k, a[k]))]
        t.add_row(lab, *cells, f"{b['drops']:,}", f"{a['drops']:,}")
    return t


def _idle(v: dict) -> str:
    """The runs a recommendation could not improve: the metric 0 before and after."""
    idle = idle_runs(v)
    return f" (the other {idle} had nothing to improve: 0 before and after)" if idle else ""


def limits(r: dict) -> list[str]:
    """What keeps the drop target out of reach: the dominant drop, and each setting that
    lowered drops on every run but was held back by its cost."""
    out = [r["drops"]["bottleneck"]] if r["drops"]["total"] else []
    out += [f"{n} lowers drops on every run but {c['why']}"
            for n, c in r["candidates"].items() if c.get("trade_refused")]
    return out or ["no setting tried lowered the drops on every run"]


def render(r: dict, console: Console | None = None) -> None:
    from rxlab.report.tables import make_console

    con = console or make_console()
    from rxlab.report.printable import for_rich  # the scenario's name: the user's text

    con.print(f"[bold]rxlab tune {for_rich(r['scenario'])}[/bold]: objective {r['objective']} "
              f"({NAMES[r['metric']]}), {r['flows']:,} {r['flows_source']} flows, {r['queues']} "
              f"queues, {r['cpus']} CPUs, kernel {r['kernel']}, {r['duration_s']} s per run; "
              f"runs: {', '.join(r['runs'])}")
    for n in r["notes"]:
        _line(con, f"note: {n}")

    ind = r["indirection"]
    if not ind["planned"]:
        _line(con, f"RSS indirection table: none recommended - {ind['why']}.")
    else:
        lm = ind["load_model"]
        _line(con, f"RSS indirection table (real flows): load model {lm['cost_ns_per_packet']:.0f}"
                   f" ns per packet on its IRQ CPU; model max/mean now "
                   f"{ind['before_predicted']['imbalance']:.3f}, lower bound "
                   f"{ind['lower_bound']['imbalance']:.3f}. Recommended: "
                   f"{ind['recommended'] or 'none (no table improved on every run)'}")

    f = r["rfs"]
    if not f.get("offered"):
        _line(con, f"RFS tables: not offered - {f['why']}.")
    else:
        mem = f["memory"]
        how = "exact count on the real hashes" if f["exact"] else "birthday model"
        _line(con, f"RFS tables for a {f['target']:.1%} collision target ({f['flows']:,} "
                   f"recording flows, {how}): rps_sock_flow_entries "
                   f"{f['rps_sock_flow_entries']:,}, rps_flow_cnt {f['rps_flow_cnt']:,} per "
                   f"queue; memory {_mib(mem['sock_table_bytes'])} (4 B per entry) + "
                   f"{_mib(mem['dev_tables_bytes'])} ({mem['dev_entry_bytes']} B per entry per "
                   f"queue)" + (f"; capped to the {_mib(f['memory_limit_bytes'])} limit "
                                f"(wanted {_mib(f['wanted']['memory']['total_bytes'])}), "
                                f"collision rate then {f['sock_birthday_rate']:.1%}"
                                if f.get("capped") else ""))
    st = r["steering"]
    for k in ("rps", "rfs", "arfs"):
        _line(con, f"{k.upper()}: {st[k]['verdict']} - {st[k]['why']}")

    d = r["drops"]
    if d["total"]:
        _line(con, "Drops over all runs: " + ", ".join(f"{k} {v:,}" for k, v in
                                                      d["by_reason"].items()))
        _line(con, f"Dominant: {d['bottleneck']}")
        for s in d["not_addressed"]:
            _line(con, f"  {s}")
    else:
        _line(con, "Drops: none in any run.")

    for k in r.get("searched", []):
        _line(con, f"Searched {k['kind']}: " + (", ".join(k["tried"]) if k["tried"] else
                                                 f"nothing tried - {k['why']}"))
    if r["candidates"]:
        con.print(candidates_table(r))
        for name, c in r["candidates"].items():
            for cost in c.get("costs", []):
                _line(con, f"  {name}: {cost}")
    con.print(runs_table(r))
    if r["recommended"]:
        v = r["validation"]
        _line(con, f"Recommended: {', '.join(r['recommended'])}: {NAMES[r['metric']]} "
                   f"{fmt_metric(r['metric'], v['mean_before'])} -> "
                   f"{fmt_metric(r['metric'], v['mean_after'])} (mean), better on "
                   f"{v['wins']} of {v['runs']} runs" + _idle(v))
        for cost in r["costs"]:
            _line(con, f"  cost: {cost}")
    t = r["target_drops"]
    if r["objective"] == "drops":
        _line(con, f"Target victim drop rate {t['victim_drop_rate']:.3%}: "
                   + ("met on every run" if t["met_after"] else "not met on every run")
                   + (" (already before)" if t["met_before"] else ""))
        if not t["met_after"]:
            for line in limits(r):
                _line(con, f"  limited by: {line}")
    con.print("[bold]Commands[/bold]" + ("" if r["commands"] else ": none, keep the current "
                                        "settings"))
    for c in r["commands"]:
        # the comment wraps as a comment; the command stays one line, to paste as it is
        for line in textwrap.wrap(c["what"], max(40, con.width - 4)):
            con.print(f"  # {line}", highlight=False, soft_wrap=True, markup=False)
        con.print(f"  {c['cmd']}", highlight=False, soft_wrap=True, markup=False)
