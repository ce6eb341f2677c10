"""``rxlab tune SCENARIO [--objective balance|latency|drops] [--json] [-o FILE] ...``.

"My CPUs are unevenly loaded, or I drop packets: what do I change?" Every candidate
setting is simulated on several traffic seeds (and on the capture, with --pcap) and
recommended only when it improves the objective on every one. See docs/tune.md.
"""

from __future__ import annotations

import argparse
import sys

from rxlab.cli.run_cmd import add_max_memory
from rxlab.errors import UsageError


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "tune", help="recommend steering, ring, backlog and (with real flows) RSS table "
                     "settings, each held on several traffic seeds",
        description="Recommend settings for SCENARIO (RPS/RFS/aRFS, RFS table sizes, ring "
                    "size, IRQ spread, queues, flow limit, backlog, socket buffers; for "
                    "latency interrupt moderation and where the application runs; with "
                    "real flows, an RSS indirection table), each simulated on several "
                    "traffic seeds and recommended only when it improves on every one.")
    p.add_argument("scenario", metavar="SCENARIO", help="scenario YAML or built-in name")
    p.add_argument("--objective", default="balance",
                   help="balance (default), latency or drops: what a recommendation "
                        "must improve")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("-o", "--output", metavar="FILE",
                   help="write the scenario with the recommended settings (YAML; - for "
                        "standard output, instead of the report)")
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
    p.add_argument("--seeds", type=int, default=5, metavar="N",
                   help="traffic seeds every setting is simulated on, from the scenario's "
                        "seed up (5, the least); a setting must improve on every one")
    p.add_argument("--pcap", metavar="FILE",
                   help="the real flows, as a capture of this traffic: their addresses make "
                        "an indirection table plannable (also replayed as a run)")
    p.add_argument("--accept-latency", action="store_true",
                   help="recommend a setting for drops or balance even when it raises the "
                        "mean p99 latency by more than 10 %%")
    p.add_argument("--jobs", "-j", type=int, metavar="N",
                   help="parallel simulation processes (default: one per CPU)")
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
    from rxlab.outfiles import check_file, write_file
    from rxlab.scenario import load_scenario, with_overrides
    from rxlab.tune import scenario_yaml, tune
    from rxlab.tune.runs import default_jobs

    sc = load_scenario(args.scenario)
    if args.seed is not None:
        seed = _num(args.seed, "--seed", int)
        if seed < 0:
            raise UsageError(f"--seed {seed}: must be >= 0")
        sc = with_overrides(sc, {"seed": seed})
    duration = _num(args.duration, "--duration") if args.duration is not None else None
    out = check_file(args.output, "-o") if args.output else None  # before the runs
    quiet = args.json or not sys.stderr.isatty()
    report = tune(
        sc, objective=args.objective, dev=args.dev,
        collision_target=_num(args.collision_target, "--collision-target"),
        antagonist=args.antagonist,
        target_drops=_num(args.target_drops, "--target-drops"),
        rounds=_num(args.rsspp_rounds, "--rsspp-rounds", int),
        duration=duration, form=args.form,
        seeds=args.seeds, pcap=args.pcap, accept_latency=args.accept_latency,
        jobs=args.jobs if args.jobs is not None else default_jobs(args.seeds + 1),
        progress=None if quiet else (lambda m: print(f"rxlab tune: {m}", file=sys.stderr)),
    )
    if out is not None:
        write_file(out, scenario_yaml(sc, report, args.form), "-o")
        report["scenario_file"] = str(out)
    if str(out) == "-":  # stdout holds the scenario alone, for a pipe or a redirect
        return 0
    if args.json:
        print(dumps(report, indent=1))
    else:
        from rxlab.tune.report import render

        render(report)
        if out is not None:
            print(f"wrote {out} (rxlab run {out} simulates it; rxlab host apply {out} --dev "
                  f"{args.dev} applies what ethtool -X and the sysctls it knows can set)")
    return 0
