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
                   help="the HTML file to write (default: DIR/report.html; - for "
                        "standard output)")
    p.set_defaults(func=run)
    return p


def run(args) -> int:
    from pathlib import Path

    from rxlab.outfiles import check_file, write_file
    from rxlab.sweep import store
    from rxlab.sweep.report import build_report

    dest = check_file(args.output or Path(args.dir) / store.REPORT, "-o")
    pid = store.writer(Path(args.dir))  # a sweep still running there: say the page is partial
    write_file(dest, build_report(Path(args.dir)), "-o")
    if str(dest) == "-":
        return 0
    who = f"a sweep (pid {pid})" if pid else "a sweep"
    busy = "" if pid is None else (f"; {who} is still writing {args.dir}: the report has the "
                                   "runs finished so far")
    print(f"wrote {dest}{busy}")
    return 0
