"""``rxlab tune SCENARIO [--objective balance|latency|drops] [--json] [-o FILE] ...``.

"My CPUs are unevenly loaded, or I drop packets: what do I change?" Recommends an RSS
indirection table (RSS++'s greedy migration as the baseline, and ours), RFS table sizes,
whether RPS/RFS/aRFS help, and flow-limit/backlog settings; every recommendation is
simulated next to the current configuration. See docs/tune.md.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rxlab.cli.run_cmd import add_max_memory
from rxlab.errors import UsageError


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "tune", help="recommend RSS table, RFS sizes and flow-limit settings, proved by "
                     "simulation",
        description="Recommend an RSS indirection table (RSS++ baseline and ours), RFS "
                    "table sizes, whether RPS/RFS/aRFS help, and flow_limit/backlog "
                    "settings for SCENARIO; print before/after simulations and commands.")
    p.add_argument("scenario", metavar="SCENARIO", help="scenario YAML or built-in name")
    p.add_argument("--objective", default="balance",
                   help="balance (default), latency or drops: what a recommendation "
                        "must improve")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("-o", "--output", metavar="FILE",
                   help="write the scenario with the recommended settings (YAML)")
    p.add_argument("--form", default="explicit",
                   help="table form: explicit (any table; netlink/ioctl) or weight "
                        "(only what `ethtool -X weight` and `rxlab host apply` can write)")
    p.add_argument("--dev", default="eth0", help="device name in the commands (eth0)")
    p.add_argument("--seed", help="override the scenario's seed")
    p.add_argument("--duration", help="seconds of traffic per simulation (default: the "
                                      "scenario's)")
    p.add_argument("--collision-target", default="0.02", metavar="RATE",
                   help="share of flows allowed to share an RFS table slot (0.02)")
    p.add_argument("--antagonist", metavar="GROUP",
                   help="traffic group to protect the others from (flow-limit search)")
    p.add_argument("--target-drops", default="0.001", metavar="RATE",
                   help="victims' drop rate the flow-limit/backlog search aims at (0.001)")
    p.add_argument("--rsspp-rounds", default="20", metavar="N",
                   help="RSS++ ticks at most (stops earlier when a tick moves nothing)")
    add_max_memory(p)
    p.set_defaults(func=run)
    return p


def _num(text, what: str, kind=float):
    try:
        return kind(str(text))
    except ValueError:
        raise UsageError(f"{what} {text!r} is not a{'n integer' if kind is int else ' number'}"
                         ) from None


def run(args) -> int:
    from rxlab.memory_budget import process_limit

    with process_limit(args.max_memory):
        return _run(args)


def _run(args) -> int:
    from rxlab.jsonout import dumps
    from rxlab.scenario import load_scenario, with_overrides
    from rxlab.tune import scenario_yaml, tune

    sc = load_scenario(args.scenario)
    if args.seed is not None:
        seed = _num(args.seed, "--seed", int)
        if seed < 0:
            raise UsageError(f"--seed {seed}: must be >= 0")
        sc = with_overrides(sc, {"seed": seed})
    duration = _num(args.duration, "--duration") if args.duration is not None else None
    out = Path(args.output) if args.output else None
    if out is not None and not out.parent.exists():
        raise UsageError(f"-o {out}: directory {out.parent} does not exist")
    quiet = args.json or not sys.stderr.isatty()
    report = tune(
        sc, objective=args.objective, dev=args.dev,
        collision_target=_num(args.collision_target, "--collision-target"),
        antagonist=args.antagonist,
        target_drops=_num(args.target_drops, "--target-drops"),
        rounds=_num(args.rsspp_rounds, "--rsspp-rounds", int),
        duration=duration, form=args.form,
        progress=None if quiet else (lambda m: print(f"rxlab tune: {m}", file=sys.stderr)),
    )
    if out is not None:
        out.write_text(scenario_yaml(sc, report, args.form))
        report["scenario_file"] = str(out)
    if args.json:
        print(dumps(report, indent=1))
    else:
        from rxlab.tune.report import render

        render(report)
        if out is not None:
            print(f"wrote {out} (rxlab run {out} simulates it; rxlab host apply {out} --dev "
                  f"{args.dev} applies what ethtool -X and the sysctls it knows can set)")
    return 0
