"""``rxlab list``: built-in scenarios, experiments and cost profiles."""

from __future__ import annotations

import argparse


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser("list", help="list built-in scenarios, experiments, profiles")
    p.set_defaults(func=run)
    return p


def run(args) -> int:
    from rxlab.profiles import profile_names
    from rxlab.repro import EXPERIMENTS
    from rxlab.scenario import builtin_names

    print("scenarios:   " + ", ".join(builtin_names()))
    print("experiments: " + ", ".join(sorted(EXPERIMENTS)))
    print("profiles:    " + ", ".join(profile_names()))
    return 0
