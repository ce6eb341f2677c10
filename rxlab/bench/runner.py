"""``run_bench``: every benchmark figure in one run, as one dict (``rxlab bench --json``).

Figures and the project's targets (``TARGETS``):

- ``engine_pps``: simulated packets per second of ``simulate()`` on the flow-limit
  scenario (target >= 10 M/s), compile time excluded; ``engine_pps_arfs`` the same for
  the arfs-flow-match scenario (target: about real time for the modelled host, whose
  offered load is 1.64 Mpps: >= 1.5 M/s).
- ``simpy_pps`` and ``ratio_vs_simpy``: the RSS + RPS + backlog reference scenario run by
  rxlab and by the SimPy model on identical inputs; the ratio uses rxlab's figure on that
  same scenario (``rxlab_pps_reference``). ``agreement`` checks drops and mean latency
  of the two models on one run.
- ``toeplitz_hps``, ``c_toeplitz_hps``, ``toeplitz_ratio_vs_c`` (target >= 0.8).
- ``peak_rss_mb``: peak RSS of a child process that runs the flow-limit benchmark run.

rxlab's figures time the whole ``simulate()`` call (traffic generation included); the
SimPy figure times ``env.run()`` only (its inputs are prepared beforehand, untimed), so
``ratio_vs_simpy`` errs in SimPy's favour. ``ratio_vs_simpy_loop`` compares like with
like: rxlab's event loop alone on prepared inputs (``rxlab_loop_pps_reference``).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from rxlab.bench import engine, machine, memory, scenarios, simpy_ref, toeplitz_c

# aRFS: real time for its host (1.64 Mpps offered); flow-limit and like for like: the
# project's targets (docs/performance.md)
TARGETS = {"engine_pps": 15e6, "engine_pps_arfs": 1.64e6, "ratio_vs_simpy_loop": 50.0,
           "toeplitz_ratio_vs_c": 0.8, "peak_rss_mb": 2048.0}


def _settings(quick: bool) -> dict:
    if quick:
        return {"flow_limit_s": 2.0, "arfs_s": 0.25, "reference_s": 0.2, "simpy_s": 0.01,
                "runs": 3, "simpy_runs": 1}
    return {"flow_limit_s": 10.0, "arfs_s": 2.0, "reference_s": 1.0, "simpy_s": 0.05,
            "runs": 5, "simpy_runs": 2}


def run_bench(quick: bool = False, log: Callable[[str], None] | None = None,
              skip_arfs: bool = False) -> dict:
    say = log or (lambda _msg: None)
    cfg = _settings(quick)
    out: dict = {"quick": quick, "machine": machine.machine(), "targets": TARGETS, "notes": []}
    t_all = time.perf_counter()

    # --- engine: flow-limit and arfs-flow-match ----------------------------------------
    say("engine: flow-limit (warm-up, then best of runs)")
    fl = engine.time_simulate(scenarios.flow_limit(False, cfg["flow_limit_s"]), cfg["runs"],
                              warmup=scenarios.flow_limit(True))
    out["engine_pps"] = round(fl["pps"], 1)
    out["engine_flow_limit"] = fl
    arfs = None if skip_arfs else scenarios.arfs_flow_match(False, cfg["arfs_s"])
    if arfs is None:
        out["engine_pps_arfs"] = None
        out["notes"].append("arfs-flow-match: skipped" if skip_arfs else
                            "arfs-flow-match: no such reproduction in rxlab.repro yet")
    else:
        say(f"engine: arfs-flow-match ({scenarios.ARFS_CASE})")
        ar = engine.time_simulate(arfs, max(2, cfg["runs"] - 2),
                                  warmup=scenarios.arfs_flow_match(True, 0.02))
        out["engine_pps_arfs"] = round(ar["pps"], 1)
        out["engine_arfs_flow_match"] = {**ar, "case": scenarios.ARFS_CASE}

    # --- the SimPy reference model --------------------------------------------------------
    say("reference scenario: rxlab")
    ref = engine.time_simulate(scenarios.reference(cfg["reference_s"]), cfg["runs"],
                               warmup=scenarios.reference(0.002))
    say("reference scenario: SimPy model (identical inputs)")
    from rxlab.simulate import simulate

    small = scenarios.reference(cfg["simpy_s"])
    inputs = simpy_ref.model_inputs(small)
    sp = None
    for _ in range(cfg["simpy_runs"]):
        r = simpy_ref.SimpyRx(inputs).run()
        if sp is None or r["wall_s"] < sp["wall_s"]:
            sp = r
    rx = simpy_ref.rxlab_counts(simulate(small))
    simpy_pps = sp["offered"] / sp["wall_s"]
    out["simpy_pps"] = round(simpy_pps, 1)
    out["rxlab_pps_reference"] = round(ref["pps"], 1)
    out["ratio_vs_simpy"] = round(ref["pps"] / simpy_pps, 2)
    # like for like: rxlab's event loop alone on prepared inputs, as SimPy's env.run()
    say("reference scenario: rxlab event loop alone (prepared inputs)")
    loop = min((engine.stage_times(scenarios.reference(cfg["reference_s"]))
                for _ in range(cfg["simpy_runs"])), key=lambda r: r["loop_s"])
    out["rxlab_loop_pps_reference"] = round(loop["packets"] / loop["loop_s"], 1)
    out["ratio_vs_simpy_loop"] = round(out["rxlab_loop_pps_reference"] / simpy_pps, 2)
    out["reference"] = {
        "scenario": "bench-rss-rps: 2 queues (IRQ cpu0, cpu1), RPS to cpu2-3, sink on cpu4, "
                    f"{scenarios.REF_PPS / 1e6:g} Mpps Poisson, {scenarios.REF_FLOWS} UDP flows",
        "rxlab": ref,
        "rxlab_stages_ns_per_packet": {k: round(v, 1) for k, v in loop.items()
                                       if k.endswith("_ns")},
        "simpy": {"duration_s": cfg["simpy_s"], "packets": sp["offered"],
                  "wall_s": round(sp["wall_s"], 4)},
        "counts": {"rxlab": rx, "simpy": {k: v for k, v in sp.items() if k != "wall_s"}},
    }
    out["agreement"] = simpy_ref.compare(rx, sp)

    # --- Toeplitz against C -----------------------------------------------------------------
    say("toeplitz: rxlab softrss vs table-driven C (gcc -O2)")
    try:
        out.update(toeplitz_c.bench(quick))
    except (RuntimeError, OSError) as err:  # no compiler: report, do not fail the rest
        out.update({"toeplitz_hps": None, "c_toeplitz_hps": None, "toeplitz_ratio_vs_c": None})
        out["notes"].append(f"toeplitz vs C skipped: {err}")

    # --- memory -------------------------------------------------------------------------------
    say("peak RSS: flow-limit run in a child process")
    mem = memory.measure_in_child(fl["packets"])
    out["peak_rss_mb"] = mem["peak_rss_mb"]
    out["memory"] = mem

    out["checks"] = {
        f"engine_pps >= {TARGETS['engine_pps'] / 1e6:g}M":
            out["engine_pps"] >= TARGETS["engine_pps"],
        "ratio_vs_simpy_loop >= 50": (out.get("ratio_vs_simpy_loop") or 0.0)
        >= TARGETS["ratio_vs_simpy_loop"],
        "simpy agreement": out["agreement"]["agree"],
        "toeplitz_ratio_vs_c >= 0.8": (out["toeplitz_ratio_vs_c"] or 0.0)
        >= TARGETS["toeplitz_ratio_vs_c"],
        "toeplitz equals C": bool(out.get("toeplitz_c_equal", False)),
        "peak_rss_mb < 2048": out["peak_rss_mb"] < TARGETS["peak_rss_mb"],
    }
    if out["engine_pps_arfs"] is not None:
        out["checks"][f"engine_pps_arfs >= {TARGETS['engine_pps_arfs'] / 1e6:g}M"] = (
            out["engine_pps_arfs"] >= TARGETS["engine_pps_arfs"])
    out["bench_wall_s"] = round(time.perf_counter() - t_all, 1)
    return out


def _m(x: float | None) -> str:
    return "n/a" if x is None else f"{x / 1e6:,.2f} M"


def print_text(r: dict, console) -> None:
    """The figures as a table that fits the console (no name or value cut), then the
    checks and notes."""
    from rxlab.report.fit import print_fitted, print_wrapped
    from rxlab.report.tables import plus_minus

    m = r["machine"]
    pm = plus_minus(console)
    rows: list[tuple] = []
    fl = r["engine_flow_limit"]
    rows.append(("engine_pps (flow-limit)", f"{_m(r['engine_pps'])}pps",
                 f">= {_m(TARGETS['engine_pps'])}",
                 f"{fl['packets']:,} packets, best of {len(fl['walls_s'])}: {fl['best_wall_s']} s"))
    if r["engine_pps_arfs"] is not None:
        ar = r["engine_arfs_flow_match"]
        rows.append(("engine_pps (arfs-flow-match)", f"{_m(r['engine_pps_arfs'])}pps",
                     f">= {_m(TARGETS['engine_pps_arfs'])}",
                     f"{ar['case']}: {ar['packets']:,} packets, {ar['best_wall_s']} s"))
    else:
        rows.append(("engine_pps (arfs-flow-match)", "n/a", f">= {_m(TARGETS['engine_pps_arfs'])}",
                     "; ".join(r["notes"])))
    ref = r["reference"]
    rows.append(("rxlab pps (reference)", f"{_m(r['rxlab_pps_reference'])}pps", "",
                 f"{ref['rxlab']['packets']:,} packets"))
    rows.append(("simpy_pps (reference)", f"{r['simpy_pps'] / 1e3:,.1f} k pps", "",
                 f"{ref['simpy']['packets']:,} packets in {ref['simpy']['wall_s']} s"))
    rows.append(("ratio_vs_simpy", f"{r['ratio_vs_simpy']:,.1f} x", "",
                 "whole simulate() vs env.run()"))
    rows.append(("ratio_vs_simpy_loop", f"{r['ratio_vs_simpy_loop']:,.1f} x",
                 f">= {TARGETS['ratio_vs_simpy_loop']:g} x",
                 f"loop alone, prepared inputs: {_m(r['rxlab_loop_pps_reference'])}pps"))
    a = r["agreement"]
    rows.append(("drops rxlab / simpy",
                 f"{a['drop_fraction']['rxlab']:.2%} / {a['drop_fraction']['simpy']:.2%}",
                 f"{pm}{a['tolerance']['drop_fraction_abs']:.0%} pt or {pm}"
                 f"{a['tolerance']['drop_rel']:.0%}", "of offered packets"))
    rows.append(("mean latency rxlab / simpy",
                 f"{a['mean_latency_ns']['rxlab'] / 1e3:,.1f} / "
                 f"{a['mean_latency_ns']['simpy'] / 1e3:,.1f} us",
                 f"{pm}{a['tolerance']['latency_rel']:.0%}", "NIC arrival to socket"))
    rows.append(("models agree", "yes" if a["agree"] else "NO", "yes", ""))
    if r["toeplitz_hps"] is not None:
        rows.append(("toeplitz_hps (rxlab softrss)", f"{_m(r['toeplitz_hps'])}/s", "",
                     "12-byte IPv4 4-tuples"))
        rows.append(("c_toeplitz_hps", f"{_m(r['c_toeplitz_hps'])}/s", "",
                     f"table-driven C, {r['toeplitz_c_compiler']}"))
        rows.append(("toeplitz_ratio_vs_c", f"{r['toeplitz_ratio_vs_c']:.2f} x", ">= 0.8 x",
                     "equal hashes" if r["toeplitz_c_equal"] else "HASHES DIFFER"))
    mem = r["memory"]
    rows.append(("peak_rss_mb", f"{r['peak_rss_mb']:,.0f} MB", "< 2048 MB",
                 f"{mem['offered']:,} packets (after import: "
                 f"{mem['rss_after_import_mb']:,.0f} MB)"))
    print_fitted(console, f"rxlab bench{' --quick' if r['quick'] else ''}: "
                 f"{m['cpu_model']}, {m['cpus']} CPUs, numpy {m['numpy']}, numba "
                 f"{m['numba']}, simpy {m['simpy']}", ("figure", "value", "target", "detail"),
                 rows, justify=["left", "right", "right", "left"])
    bad = [k for k, ok in r["checks"].items() if not ok]
    print_wrapped(console, f"checks: {len(r['checks']) - len(bad)}/{len(r['checks'])} met"
                  + (f"; not met: {', '.join(bad)}" if bad else "")
                  + f"  (bench took {r['bench_wall_s']} s; load avg {m['load_avg']})")
    for note in r["notes"]:
        print_wrapped(console, note)
