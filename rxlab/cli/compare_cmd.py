"""``rxlab compare A.yaml B.yaml ... [--set-variant NAME:PATH=VALUE ...] [--seeds N]
[--json] [--out DIR [--screenshot] [--force]] [--jobs N]``.

Runs every configuration on the same N traffic seeds in parallel processes and prints,
per metric, each configuration's mean with its 95 % interval and the difference against
the first with its interval (paired by seed), marked where it excludes 0. See
docs/compare.md.
"""

from __future__ import annotations

import argparse
import sys

from rxlab.cli.run_cmd import add_force, add_max_memory
from rxlab.errors import UsageError


def add_parser(subparsers) -> argparse.ArgumentParser:
    from rxlab.compare.runner import DEFAULT_SEEDS

    p = subparsers.add_parser(
        "compare", help="compare configurations over the same seeds: means, differences, "
                        "95 %% intervals",  # argparse %-formats help texts
        description="Run each configuration (a scenario file or built-in name, or a variant "
                    "of the first: --set-variant) on the same traffic seeds and compare "
                    "them metric by metric against the first.")
    p.add_argument("scenarios", nargs="*", metavar="SCENARIO",
                   help="scenario files or built-in names (default: 'default')")
    p.add_argument("--set-variant", action="append", default=[], metavar="NAME:PATH=VALUE",
                   help="a configuration NAME: the first scenario with PATH=VALUE; repeat "
                        "for more values of one variant or for more variants, e.g. "
                        "rps-all:kernel.rps_cpus=ffff")
    p.add_argument("--set", action="append", default=[], metavar="PATH=VALUE",
                   help="override a field in every configuration")
    p.add_argument("--duration", type=float, help="traffic duration of every run (seconds)")
    p.add_argument("--seeds", type=int, default=DEFAULT_SEEDS, metavar="N",
                   help=f"traffic seeds per configuration (default {DEFAULT_SEEDS}, at least 2)")
    p.add_argument("--seed", type=int, metavar="S",
                   help="first seed for every configuration (default: each scenario's seed)")
    p.add_argument("--jobs", "-j", type=int, metavar="N",
                   help="worker processes (default: the number of CPUs)")
    p.add_argument("--json", action="store_true", help="print the comparison as JSON")
    p.add_argument("--out", metavar="DIR",
                   help="write comparison.json, comparison.png and comparison.html")
    add_force(p)
    p.add_argument("--screenshot", action="store_true",
                   help="with --out: also render comparison.html to comparison-page.png in "
                        "headless Chromium")
    add_max_memory(p)
    p.set_defaults(func=run)
    return p


def run(args) -> int:
    from rxlab.memory_budget import process_limit
    from rxlab.parallel import Terminated, sigterm_raises

    try:
        with process_limit(args.max_memory), sigterm_raises():
            return _run(args)
    except KeyboardInterrupt:
        print("rxlab: interrupted", file=sys.stderr)
        return 130
    except Terminated:
        print("rxlab: terminated (SIGTERM)", file=sys.stderr)
        return 143


def _run(args) -> int:
    from rich.console import Console

    from rxlab.cli.run_cmd import dump_json, parse_sets
    from rxlab.compare.analysis import compare
    from rxlab.compare.runner import build_configs, run_all

    if args.screenshot and not args.out:
        raise UsageError("--screenshot: renders the HTML page that --out writes; add --out DIR")
    if args.out:
        from rxlab.report.files import check_out_dir

        check_out_dir(args.out, force=args.force, names=(
            "comparison.json", "comparison.png", "comparison.html", "comparison-page.png"))
    if args.screenshot:
        from rxlab.report.screenshot import find_chromium

        find_chromium()  # absent: one line now, not after the runs
    common = parse_sets(args.set)
    if args.duration is not None:
        if args.duration <= 0:
            raise UsageError("--duration: must be > 0 seconds")
        common["duration"] = args.duration
    configs = build_configs(args.scenarios, args.set_variant, common, args.seeds, args.seed)
    err = Console(stderr=True)
    from rxlab.cli.run_cmd import PlanLine

    tty = sys.stderr.isatty()  # a bar; else one line when the plan takes over ~10 s
    results = run_all(configs, args.jobs, err if tty else None,
                      plan=None if tty else PlanLine("compare"))
    cmp = compare(configs, results)
    text = dump_json(cmp)  # strict JSON; a non-finite number fails here, before any file
    if args.out:
        from rxlab.compare.render import write_out

        written = write_out(cmp, args.out, screenshot=args.screenshot, force=args.force)
    if args.json:
        print(text)
    else:
        from rxlab.compare.table import print_comparison
        from rxlab.report.tables import make_console

        print_comparison(make_console(), cmp)
        if args.out:
            print(f"wrote {args.out}/ ({', '.join(p.name for p in written)})")
    return 0
