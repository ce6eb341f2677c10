"""Terminal rendering of a ``tune`` report (the dict ``--json`` prints)."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

LABELS = {
    "before": "before (current table)",
    "rsspp": "RSS++ greedy migration (published)",
    "rsspp_best_run": "RSS++, best solver run kept",
    "ours": "ours (min-max + local search)",
    "ours_weight": "ours, ethtool -X weight form",
}


def _us(ns: float) -> str:
    return f"{ns / 1e3:,.1f}"


def _mib(b: int) -> str:
    return f"{b / 2**20:,.2f} MiB"


def table_rows(r: dict) -> Table:
    ind = r["indirection"]
    t = Table(title=f"RSS indirection table: {ind['table_size']} buckets over {ind['queues']} "
                    f"queues (IRQ CPUs {len(ind['irq_cpus'])}); loads over the IRQ CPUs")
    for col in ("table", "buckets moved", "model max/mean", "sim max", "sim mean",
                "sim max/mean", "p99 us", "drops"):
        t.add_column(col, justify="left" if col == "table" else "right")
    for name in ("before", "rsspp", "rsspp_best_run", "ours", "ours_weight"):
        c = ind["candidates"][name]
        s = c["simulated"]
        label = LABELS[name] + ("  <- recommended" if name == ind["recommended"] else "")
        t.add_row(label, str(c["buckets_moved"]), f"{c['predicted']['imbalance']:.3f}",
                  f"{s['max_load']:.3f}", f"{s['mean_load']:.3f}", f"{s['imbalance']:.3f}",
                  _us(s["p99_ns"]), f"{s['drops']:,}")
    lb = ind["lower_bound"]
    t.add_row(f"lower bound of the model (max {lb['max']:.3f})", "",
              f"{lb['imbalance']:.3f}", "", "", "", "", "")
    return t


def before_after(r: dict) -> Table:
    b, a = r["before"], r["after"]
    t = Table(title="Before and after (simulated, same traffic and seed)")
    t.add_column("")
    t.add_column("before", justify="right")
    t.add_column("after", justify="right")
    rows = [("max CPU load", "max_load", "{:.3f}"), ("mean CPU load", "mean_load", "{:.3f}"),
            ("imbalance max/mean", "imbalance", "{:.3f}"), ("p99 latency (us)", "p99_ns", None),
            ("drops", "drops", "{:,}"), ("drop rate", "drop_rate", "{:.4%}")]
    if r["flow_limit"].get("antagonist"):
        rows.append((f"drop rate without {r['flow_limit']['antagonist']}", "victim_drop_rate",
                     "{:.4%}"))
    for label, k, fmt in rows:
        f = _us if fmt is None else fmt.format
        t.add_row(label, f(b[k]), f(a[k]))
    return t


def render(r: dict, console: Console | None = None) -> None:
    from rxlab.report.tables import make_console

    con = console or make_console()
    con.print(f"[bold]rxlab tune {r['scenario']}[/bold]: objective {r['objective']}, "
              f"{r['flows']:,} flows, {r['queues']} queues, {r['cpus']} CPUs, kernel "
              f"{r['kernel']}, seed {r['seed']}, {r['duration_s']} s simulated per run")
    for n in r["notes"]:
        con.print(f"note: {n}", markup=False)
    ind = r["indirection"]
    lm = ind["load_model"]
    con.print(f"load model: {lm['cost_ns_per_packet']:.0f} ns per packet on its IRQ CPU + "
              f"{lm['irq_cpu_overhead']:.3f} per IRQ CPU ({lm['source']})")
    con.print(table_rows(r))
    rs = ind["candidates"]["rsspp"]
    con.print(f"RSS++: {len(rs['rounds'])} round(s) until no move "
              f"(moves per round {[x['moves'] for x in rs['rounds']]}); ours started from "
              f"{ind['candidates']['ours']['start']}.")

    f = r["rfs"]
    if "rps_flow_cnt" in f and f.get("flows"):
        mem = f["memory"]
        con.print(
            f"RFS tables for a {f['target']:.1%} collision target ({f['flows']:,} recording "
            f"flows): rps_sock_flow_entries {f['rps_sock_flow_entries']:,} (exact "
            f"{f['sock_collision_rate']:.2%}, birthday {f['sock_birthday_rate']:.2%}), "
            f"rps_flow_cnt {f['rps_flow_cnt']:,} per queue (exact "
            f"{f['dev_collision_rate']:.2%}, slot {f['dev_slot_rule']}); memory "
            f"{_mib(mem['sock_table_bytes'])} + {_mib(mem['dev_tables_bytes'])} "
            f"({mem['dev_entry_bytes']} B per queue entry). scaling.rst's 32768 / queues "
            f"would give {f['scaling_rst']['sock_collision_rate']:.1%} / "
            f"{f['scaling_rst']['dev_collision_rate']:.1%}.")
    else:
        con.print("RFS tables: no flow records its CPU (no connected consumer).")
    st = r["steering"]
    for k in ("rps", "rfs", "arfs"):
        v = st[k]
        line = f"{k.upper()}: {v['verdict']} - {v['why']}"
        chk = st["simulated_checks"].get(k)
        if chk:
            s = chk["simulated"]
            line += (f". Simulated: max load {s['max_load_all']:.3f}, p99 {_us(s['p99_ns'])} us, "
                     f"drops {s['drops']:,} -> {'adopted' if chk['adopt'] else 'not adopted'}")
        con.print(line, markup=False)

    fl = r["flow_limit"]
    if fl.get("searched") is False:
        con.print(f"flow limit / backlog: not searched ({fl['why']})")
    elif not fl.get("applicable"):
        con.print(f"flow limit / backlog: {fl['why']}")
    else:
        t = Table(title=f"flow_limit and netdev_max_backlog: victims "
                        f"{', '.join(fl['victims'])}, antagonist {fl['antagonist']}, "
                        f"target drop rate {fl['target_drop_rate']:.3%}")
        for col in ("setting", "victim drop rate", "p99 us", "drops by reason", "meets"):
            t.add_column(col, justify="left" if col in ("setting", "drops by reason")
                         else "right")
        for row in fl["rows"]:
            t.add_row(row["setting"], f"{row['victim_drop_rate']:.3%}", _us(row["p99_ns"]),
                      ", ".join(f"{k} {v:,}" for k, v in row["drops_by_reason"].items()),
                      "yes" if row["meets_target"] else "no")
        con.print(t)
        tl = fl["table_len"]
        con.print(f"flow_limit_table_len {tl['flow_limit_table_len']}: victim flows sharing "
                  f"an antagonist bucket {tl['victim_flows_sharing']} "
                  f"({tl['victim_packets_sharing']:.2%} of victim packets). Recommended: "
                  f"{fl['recommended']}" + ("" if fl["met"] else " (target not met)"))
        if fl.get("note"):
            con.print(f"note: {fl['note']}")
    con.print(before_after(r))
    con.print("[bold]Commands[/bold]" + ("" if r["commands"] else ": none, keep the current "
                                        "settings"))
    for c in r["commands"]:
        con.print(f"  # {c['what']}", highlight=False, soft_wrap=True, markup=False)
        con.print(f"  {c['cmd']}", highlight=False, soft_wrap=True, markup=False)
