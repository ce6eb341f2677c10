"""``rxlab top``: live per-CPU softnet_stat rates and per-queue packet rates of this host.

Refreshes every ``--interval`` seconds in the terminal (rich.Live) until Ctrl-C or
``--count`` refreshes; ``--json`` prints one JSON object per interval instead.
"""

from __future__ import annotations

import argparse
import json
import math
import time

from rxlab.errors import UsageError


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Register the ``top`` subcommand."""
    p = subparsers.add_parser(
        "top", help="live softnet_stat and per-queue packet rates of this host",
        description="Per-CPU softnet_stat rates (processed, dropped, time_squeeze, "
                    "received_rps, flow_limit_count) and per-device / per-queue packet "
                    "rates, refreshed every interval.")
    p.add_argument("--netns", metavar="NS", help="devices of this network namespace")
    p.add_argument("--dev", metavar="NAME", action="append", help="only this device (repeatable)")
    p.add_argument("--interval", metavar="S", default="1", help="seconds between refreshes "
                                                               "(default 1)")
    p.add_argument("--count", metavar="N", help="stop after N refreshes (default: until Ctrl-C)")
    p.add_argument("--json", action="store_true", help="one JSON object per refresh")
    p.add_argument("--no-ethtool", action="store_true",
                   help="skip ethtool -S (no per-queue rates)")
    p.set_defaults(func=run)
    return p


def _num(text, what: str, lo: float, integer: bool = False):
    try:
        v = int(text) if integer else float(text)
    except (TypeError, ValueError):
        raise UsageError(f"{what} {text!r} is not a{'n integer' if integer else ' number'}") \
            from None
    if not math.isfinite(v) or v < lo:
        raise UsageError(f"{what} must be >= {lo:g}, got {text}")
    return v


def run(args) -> int:
    from rxlab.host import top
    from rxlab.host.netns import check_dev, check_netns

    interval = _num(args.interval, "--interval", 0.05)
    count = None if args.count is None else _num(args.count, "--count", 1, integer=True)
    netns = check_netns(args.netns)
    devs = [check_dev(d) for d in args.dev] if args.dev else None
    eth = not args.no_ethtool

    def take():
        try:
            return top.sample(netns, devs, eth)
        except FileNotFoundError as err:
            raise UsageError(f"cannot read {err.filename}: no such device") from None

    prev = take()
    title = "rxlab top" + (f" (netns {netns})" if netns else "")
    if args.json:
        n = 0
        while count is None or n < count:
            time.sleep(interval)
            cur = take()
            print(json.dumps(top.rates(prev, cur)), flush=True)
            prev, n = cur, n + 1
        return 0
    from rich.live import Live

    from rxlab.report.tables import make_console

    console = make_console()
    n = 0
    with Live(top.render(top.rates(prev, prev), title), console=console,
              auto_refresh=False, transient=False) as live:
        while count is None or n < count:
            time.sleep(interval)
            cur = take()
            live.update(top.render(top.rates(prev, cur), title), refresh=True)
            prev, n = cur, n + 1
    return 0
