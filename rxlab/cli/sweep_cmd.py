"""``rxlab sweep SWEEP.yaml [--jobs N] [--scheduler tcp://HOST:PORT] [--out DIR [--force]]
[--resume | --replace]``.

Runs a base scenario over a grid (or list) of overrides times seeds, on local processes
or on an existing Dask cluster; writes one JSON per run, a Parquet table, a summary
with 95 % confidence intervals and plots. One sweep writes a folder at a time. Ctrl-C
and SIGTERM stop the workers, keep the finished runs and say so in one line (exit 130,
143). See docs/sweeps.md.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

from rxlab.cli.run_cmd import add_force, add_max_memory
from rxlab.errors import UsageError

MAX_SUMMARY_ROWS = 40


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "sweep", help="run a scenario over a grid of parameters and seeds (local or Dask)",
        description="Run the sweep described in SWEEP (YAML: base, grid/zip/points, "
                    "replications); see docs/sweeps.md.")
    p.add_argument("sweep", metavar="SWEEP", help="the sweep file (YAML)")
    p.add_argument("--jobs", "-j", type=int, metavar="N",
                   help="local worker processes (default: the number of CPUs)")
    p.add_argument("--scheduler", metavar="ADDRESS",
                   help="run on an existing Dask cluster, e.g. tcp://10.0.0.5:8786")
    p.add_argument("--out", metavar="DIR",
                   help="output folder (default: sweep-NAME in the current folder)")
    add_force(p)
    p.add_argument("--resume", action="store_true",
                   help="keep the finished runs in DIR and run only the rest")
    p.add_argument("--replace", action="store_true",
                   help="delete the sweep that DIR holds (its runs, table, summary, plots) "
                        "and start over")
    p.add_argument("--no-plots", action="store_true", help="skip the PNG plots")
    p.add_argument("--quiet", "-q", action="store_true",
                   help="no progress bar and no summary table")
    add_max_memory(p)
    p.set_defaults(func=run)
    return p


def run(args) -> int:
    from rxlab.memory_budget import process_limit
    from rxlab.parallel import Terminated, sigterm_raises

    try:
        # local workers inherit the limit; Dask workers use their own machine's default
        with process_limit(args.max_memory), sigterm_raises():
            return _run(args)
    except KeyboardInterrupt as e:
        return _stopped("interrupted", e, 130)
    except Terminated as e:
        return _stopped("terminated (SIGTERM)", e, 143)


def _stopped(what: str, e: BaseException, status: int) -> int:
    """One line: what stopped the sweep and, once runs started, how to finish it."""
    notes = getattr(e, "__notes__", None)
    print(f"rxlab: {what}" + (f": {notes[0]}" if notes else ""), file=sys.stderr)
    return status


def _run(args) -> int:
    from rich.console import Console

    from rxlab.outfiles import check_dir
    from rxlab.sweep import store
    from rxlab.sweep.runner import run_sweep
    from rxlab.sweep.spec import load_sweep

    sweep = load_sweep(args.sweep)
    if not args.out and "/" in sweep.name:
        raise UsageError(f"sweep.name: {sweep.name!r} has a '/', so it cannot name the default "
                         "folder sweep-NAME; give --out DIR or a name without '/'")
    out = Path(args.out) if args.out else Path(f"sweep-{sweep.name}")
    # before a worker starts; in a sweep's own folder the user's files may stay (a sweep,
    # even --replace, removes only the names it writes), and --resume/--replace decide
    ours = (out / store.SPEC).is_file() and not out.is_symlink()
    check_dir(out, "--out", args.force or ours, own=store.is_own)
    err = Console(stderr=True)
    res = run_sweep(sweep, out, jobs=args.jobs, scheduler=args.scheduler, resume=args.resume,
                    replace=args.replace, console=err, show_progress=not args.quiet,
                    plots=not args.no_plots)
    if not args.quiet:
        from rxlab.report.tables import make_console

        print_summary(make_console(), sweep, res)
    skipped = f", {res.skipped} already finished" if res.skipped else ""
    print(f"{res.total} runs ({res.ran} run now{skipped}) in {res.wall_s:.1f} s -> "
          f"{out / 'results.parquet'}")
    if res.plots_skipped:
        print("not plotted: " + "; ".join(res.plots_skipped))
    return 0


def print_summary(console, sweep, res) -> None:
    from rxlab.report.fit import fmt_metric, print_fitted
    from rxlab.report.printable import for_rich
    from rxlab.report.tables import plus_minus
    from rxlab.sweep.plots import fmt

    pm = plus_minus(console)
    headers = [*sweep.param_paths, "n", *sweep.metrics]
    rows = []
    for e in res.summary[:MAX_SUMMARY_ROWS]:
        cells = [fmt(e["params"][p]) for p in sweep.param_paths] + [str(e["n"])]
        for m in sweep.metrics:
            mean, ci = e["stats"][m]
            cells.append(fmt_metric(m, mean) + ("" if math.isnan(ci) else
                                                 f" {pm} {fmt_metric(m, ci, ci=True)}"))
        rows.append(cells)
    name = for_rich(sweep.name)  # the user's text: no raw ESC, '[/]' as typed
    print_fitted(console, f"sweep {name}: mean {pm} 95% CI over {len(sweep.seeds)} seed(s)",
                 headers, rows, keys=len(sweep.param_paths))
    if len(res.summary) > MAX_SUMMARY_ROWS:
        console.print(f"... {len(res.summary) - MAX_SUMMARY_ROWS} more points in summary.csv")
