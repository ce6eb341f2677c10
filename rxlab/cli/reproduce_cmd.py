"""``rxlab reproduce NAME [--json] [--quick] [--kernel V]``: the seeds' experiments."""

from __future__ import annotations

import argparse
import sys

from rxlab.cli.run_cmd import add_max_memory


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "reproduce", help="reproduce a seed experiment, printed side by side",
        description="Run a built-in experiment (rxlab list shows them) and print its cases "
                    "side by side with the seed's claims checked.")
    p.add_argument("name", metavar="NAME")
    p.add_argument("--quick", action="store_true",
                   help="shorter traffic (same scale): the qualitative result in < 1 min")
    p.add_argument("--kernel", metavar="VERSION", help="rerun under another kernel version")
    p.add_argument("--json", action="store_true", help="print the cases as JSON")
    add_max_memory(p)
    p.set_defaults(func=run)
    return p


def run(args) -> int:
    from rxlab.memory_budget import process_limit

    with process_limit(args.max_memory):
        return _run(args)


def _run(args) -> int:
    from rxlab.jsonout import dumps
    from rxlab.kernel.versions import parse_version
    from rxlab.repro.base import get, run_experiment

    mod = get(args.name)
    if args.kernel:
        parse_version(args.kernel)
    if args.json:
        exp = run_experiment(mod, args.quick, args.kernel)
        out = {k: exp[k] for k in ("experiment", "title", "kernels", "cases", "claims", "quick",
                                  "seed_file")}
        print(dumps(out, indent=1, sort_keys=True))
        return 0
    from rxlab.report.tables import make_console, print_experiment

    console = make_console()
    with console.status(f"running {mod.NAME}") as status:
        exp = run_experiment(mod, args.quick, args.kernel,
                             progress=lambda i, n, name: status.update(
                                 f"running {mod.NAME}: case {i + 1}/{n} ({name})"))
    print_experiment(exp, console)
    for c in exp["claims"]:
        mark = "[green]held[/green]" if c["held"] else "[red]NOT held[/red]"
        console.print(f"  {mark}  {c['claim']}")
    sys.stdout.flush()
    return 0
