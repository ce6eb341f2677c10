"""Run every benchmark in one go: the same as ``rxlab bench`` (see docs/performance.md).

Usage::

    .venv/bin/python benchmarks/run_bench.py [--json] [--quick] [--skip-arfs] [--save FILE]
                                             [--record]

``--save FILE`` also writes the JSON figures to FILE; ``--record`` appends them, dated
with the tree and machine, to benchmarks/results/bench.jsonl (``benchmarks/record.py``).
"""

from __future__ import annotations

import argparse
import json
import sys

from rxlab.bench.runner import format_text, run_bench


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--skip-arfs", action="store_true")
    ap.add_argument("--save", metavar="FILE")
    ap.add_argument("--record", action="store_true",
                    help="append the figures to benchmarks/results/bench.jsonl")
    a = ap.parse_args(argv)
    res = run_bench(a.quick, log=lambda m: print(f"# {m}", file=sys.stderr, flush=True),
                    skip_arfs=a.skip_arfs)
    if a.save:
        with open(a.save, "w") as f:
            json.dump(res, f, indent=1, sort_keys=True)
    if a.record:
        from record import record

        print(f"# recorded in {record('bench', res)}", file=sys.stderr)
    if a.json:
        print(json.dumps(res, indent=1, sort_keys=True))
    else:
        from rich.console import Console

        console = Console(width=140)
        for item in format_text(res):
            console.print(item)
    return 0


if __name__ == "__main__":
    sys.exit(main())
