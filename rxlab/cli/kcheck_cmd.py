"""``rxlab kernel-check``: compare the model with the real kernel (docs/kernel-check.md).

Exit status: 0 when every check that ran agrees, 1 when one disagrees, 77 when the
checks cannot run on this machine (not root, no namespaces, ...: the reason is printed
as "cannot run here: why"), 2 for bad arguments, 130 when interrupted (after cleanup).
"""

from __future__ import annotations

import argparse
import json
import sys

from rxlab.jsonout import dumps

EXIT_CANNOT_RUN = 77


def add_parser(subparsers) -> argparse.ArgumentParser:
    from rxlab.kcheck.checks import CHECKS, MUTATIONS
    p = subparsers.add_parser(
        "kernel-check", help="check the model against the real kernel (needs root)",
        description="Create two network namespaces joined by a multi-queue veth pair, "
                    "configure RPS, RFS and flow_limit, send UDP traffic between them, and "
                    "compare what the kernel did with what the model predicts. Restores "
                    "every sysctl it changes and removes its namespaces, also when "
                    "interrupted.")
    p.add_argument("--only", metavar="NAMES",
                   help="comma-separated checks (default: all): " + ", ".join(CHECKS))
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--duration", type=float, default=1.0, metavar="S",
                   help="seconds of traffic per kernel run (default 1.0; 0.3-5)")
    p.add_argument("--mutate", metavar="NAMES", default="",
                   help="give the model a deliberately wrong setting, to see a check fail: "
                        + ", ".join(f"{k} ({v})" for k, v in MUTATIONS.items()))
    p.add_argument("--profile", metavar="PATH",
                   help="a profile written by rxlab calibrate: adds the rate and load checks "
                        "(backlog_saturation, softirq_half_load, overload_drops) on "
                        "configurations the calibration did not use")
    p.add_argument("--repeat", type=int, default=3, metavar="N",
                   help="kernel runs per rate check (default 3; 3-10)")
    p.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    p.set_defaults(func=run)
    return p


def _fmt(v) -> str:
    """A table cell, escaped: values like [1] or [true] are not rich markup."""
    from rich.markup import escape

    if isinstance(v, float):
        return f"{v:.3f}"
    if v is None:
        return "-"
    if isinstance(v, (list, dict)):
        return escape(json.dumps(v, separators=(", ", ":")))  # a long list wraps by item
    return escape(str(v))


def print_table(report: dict) -> None:
    from rich.table import Table

    from rxlab.report.tables import make_console
    t = Table(title="rxlab kernel-check: kernel vs model", show_lines=True, expand=True)
    t.add_column("check", no_wrap=True)  # names and verdicts are short: whole
    for col, share in (("criterion", 3), ("kernel", 2), ("model", 2)):
        t.add_column(col, overflow="fold", ratio=share)  # wrap at spaces: a list by item
    t.add_column("agree", no_wrap=True)
    for chk in report["checks"]:
        crit = chk.get("criteria")
        if chk["status"] != "ran" or not crit:
            t.add_row(chk["name"], chk["reason"], "", "", chk["status"] if chk["status"] !=
                      "ran" else ("yes" if chk["agree"] else "NO"))
            continue
        for i, c in enumerate(crit):
            t.add_row(chk["name"] if i == 0 else "", c["what"], _fmt(c["kernel"]),
                      _fmt(c["model"]), "yes" if c["ok"] else "NO")
    console = make_console()  # COLUMNS, the terminal's width, or 80 in a pipe
    console.print(t)
    ran = [c for c in report["checks"] if c["status"] == "ran"]
    agree = sum(c["agree"] for c in ran)
    skipped = [c["name"] for c in report["checks"] if c["status"] == "skipped"]
    console.print(f"{agree}/{len(ran)} checks agree"
                  + (f"; skipped: {', '.join(skipped)}" if skipped else "")
                  + (f"; mutations: {', '.join(report['mutations'])}"
                     if report.get("mutations") else "")
                  + f"  ({report['seconds']} s)")


def run(args) -> int:
    from rxlab.errors import UsageError
    from rxlab.host import guard
    from rxlab.kcheck.checks import MUTATIONS
    from rxlab.kcheck.runner import ModelError, run_checks, select
    names = select(args.only)
    mutate = {m.strip() for m in args.mutate.split(",") if m.strip()}
    bad = mutate - set(MUTATIONS)
    if bad:
        raise UsageError(f"--mutate: unknown {', '.join(sorted(bad))}; "
                         f"choose from {', '.join(MUTATIONS)}")
    if not 0.3 <= args.duration <= 5:
        raise UsageError("--duration: give 0.3 to 5 seconds")
    if not 3 <= args.repeat <= 10:
        raise UsageError("--repeat: give 3 to 10 runs (the kernel's spread needs 3)")
    profile = None
    if args.profile:
        from rxlab.kcheck.rates import load
        profile = load(args.profile)

    def log(msg: str) -> None:
        if not args.quiet:
            print(f"kernel-check: {msg}", file=sys.stderr, flush=True)

    try:
        report = run_checks(names, duration=args.duration, mutate=mutate, log=log,
                            profile=profile, repeat=args.repeat)
    except guard.CannotRun as err:
        msg = f"cannot run here: {err}"
        if args.json:
            print(json.dumps({"checks": [], "cannot_run": str(err)}))
            print(msg, file=sys.stderr)
        else:
            print(msg)
        return EXIT_CANNOT_RUN
    except ModelError as err:
        if args.json:
            print(json.dumps({"checks": [], "error": str(err)}))
        print(f"rxlab kernel-check: {err}", file=sys.stderr)
        return 1
    if args.json:
        print(dumps(report, default=list))
    else:
        print_table(report)
    ran = [c for c in report["checks"] if c["status"] == "ran"]
    return 0 if all(c["agree"] for c in ran) else 1
