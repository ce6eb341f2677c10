"""``rxlab report DIR [-o report.html]``: a self-contained HTML page for a sweep's results."""

from __future__ import annotations

import argparse


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "report", help="write a self-contained HTML report of a sweep's results",
        description="Write an HTML page (plots embedded, no network needed) for the sweep "
                    "output folder DIR written by `rxlab sweep`.")
    p.add_argument("dir", metavar="DIR", help="the sweep's output folder")
    p.add_argument("-o", "--output", metavar="FILE",
                   help="the HTML file to write (default: DIR/report.html)")
    p.set_defaults(func=run)
    return p


def run(args) -> int:
    from rxlab.sweep.report import write_report

    dest = write_report(args.dir, args.output)
    print(f"wrote {dest}")
    return 0
