"""``rxlab reproduce NAME [--json] [--quick] [--kernel V] [--seeds N] [--jobs N]``.

Every case runs under N traffic seeds; each claim of the seed is judged on the 95 %
intervals of its figures and says whether the figure was calibrated to the seed or
predicted by the model.
"""

from __future__ import annotations

import argparse
import sys

from rxlab.cli.run_cmd import add_max_memory
from rxlab.repro.base import DEFAULT_SEEDS


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "reproduce", help="reproduce a seed experiment, printed side by side",
        description="Run a built-in experiment (rxlab list shows them) and print its cases "
                    "side by side with the seed's claims checked.")
    p.add_argument("name", metavar="NAME")
    p.add_argument("--quick", action="store_true",
                   help="shorter traffic (same scale): the qualitative result in < 1 min")
    p.add_argument("--kernel", metavar="VERSION", help="rerun under another kernel version")
    p.add_argument("--seeds", type=int, default=DEFAULT_SEEDS, metavar="N",
                   help=f"traffic seeds per case (default {DEFAULT_SEEDS}); claims are judged "
                        "on the 95 %% interval over them")
    p.add_argument("--jobs", "-j", type=int, metavar="N",
                   help="parallel worker processes (default: 1 with --quick, else up to 4)")
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
    from rxlab.repro.base import default_jobs, get, run_experiment

    mod = get(args.name)
    if args.kernel:
        parse_version(args.kernel)
    jobs = default_jobs(args.quick) if args.jobs is None else args.jobs
    from rxlab.cli.run_cmd import PlanLine

    plan = PlanLine(f"reproduce {mod.NAME}")  # a pipe or --json: no spinner, one line
    if args.json:
        exp = run_experiment(mod, args.quick, args.kernel, seeds=args.seeds, jobs=jobs,
                             progress=plan)
        out = {k: exp[k] for k in ("experiment", "title", "kernels", "cases", "claims", "quick",
                                  "seed_file", "seeds", "seed_table") if k in exp}
        print(dumps(out, indent=1, sort_keys=True))
        return 0
    from rxlab.report.tables import make_console, print_claims, print_experiment

    console = make_console()
    tty = sys.stderr.isatty() and sys.stdout.isatty()  # the spinner is seen

    def progress(i: int, n: int, name: str) -> None:
        status.update(f"running {mod.NAME}: run {i + 1}/{n} ({name})")
        if not tty:
            plan(i, n, name)

    with console.status(f"running {mod.NAME}") as status:
        exp = run_experiment(mod, args.quick, args.kernel, seeds=args.seeds, jobs=jobs,
                             progress=progress)
    print_experiment(exp, console)
    notes = getattr(mod, "notes", None)
    for line in notes(exp) if notes else ():
        console.print(line, highlight=False)
    print_claims(exp, console)
    sys.stdout.flush()
    return 0
