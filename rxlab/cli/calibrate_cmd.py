"""``rxlab calibrate``: measure this host's per-stage costs (docs/calibrate.md).

Exit status: 0 with the profile written, 77 when it cannot run on this machine (the
reason is printed), 2 for bad arguments, 130 when interrupted (after cleanup).
"""

from __future__ import annotations

import os
import sys

EXIT_CANNOT_RUN = 77


def add_parser(subparsers):
    p = subparsers.add_parser(
        "calibrate", help="measure this host's per-stage costs into a profile (needs root)",
        description="Measure this machine's receive-path costs in two network namespaces "
                    "joined by a veth pair (netif_rx, RPS, backlog, UDP sockets) at paced "
                    "loads, fit them with their standard errors, and write a cost profile "
                    "for host.cost_profile. Restores every setting and removes its "
                    "namespaces, also when interrupted.")
    p.add_argument("-o", "--output", metavar="PATH", default="calibrated.yaml",
                   help="profile to write (default calibrated.yaml; - for standard output)")
    p.add_argument("--quick", action="store_true",
                   help="fewer loads and shorter runs (about 40 s instead of 2 minutes)")
    p.add_argument("--base", default="modern-x86", metavar="PROFILE",
                   help="profile the stages not measured here come from (default modern-x86)")
    p.add_argument("--quiet", action="store_true", help="no progress display")
    p.set_defaults(func=run)
    return p


def run(args) -> int:
    from rxlab.calibrate.profile import write
    from rxlab.calibrate.runner import calibrate
    from rxlab.host import guard
    from rxlab.outfiles import check_file
    from rxlab.profiles import load_profile

    # a device, a folder, a missing folder or /proc: refused before the measurement
    check_file(args.output, "--output")
    out = args.output if args.output == "-" else os.path.abspath(args.output)
    load_profile(args.base)  # a bad --base fails before anything runs
    try:
        if args.quiet:
            prof = calibrate(quick=args.quick, base=args.base)
        else:
            prof = _with_progress(args)
    except guard.CannotRun as err:
        print(f"cannot run here: {err}")
        return EXIT_CANNOT_RUN
    write(prof, out)
    if out != "-":  # with -, stdout holds the profile alone
        _summary(prof, out)
    return 0


def _with_progress(args) -> dict:
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from rxlab.calibrate.runner import calibrate
    with Progress(TextColumn("calibrate"), BarColumn(), TextColumn("{task.completed}/"
                  "{task.total}"), TimeElapsedColumn(), TextColumn("{task.description}"),
                  transient=True) as bar:
        task = bar.add_task("", total=1)

        def progress(msg: str, done: int, total: int) -> None:
            bar.update(task, description=msg, completed=done, total=total)

        return calibrate(quick=args.quick, base=args.base, progress=progress)


def _summary(prof: dict, path: str) -> None:
    m, lab = prof["measured"], prof["lab"]
    print(f"wrote {path}: {m['runs_fitted']} runs fitted in {m['seconds']} s on "
          f"{m['host']} ({m['cpu_model']}, Linux {m['kernel'].split()[0]}, HZ {m['hz']})")
    for s in m["stages"]:
        print(f"  {s}: {prof['stages'][s]['ns']} ns")
    print(f"  RPS-target softirq per packet: {lab['softirq_ns_per_packet']} +- "
          f"{lab['softirq_ns_per_packet_se']} ns; lab u32 filter: {lab['u32_filter_ns']} +- "
          f"{lab['u32_filter_ns_se']} ns per packet")
    wk = lab.get("receiver_wakeup_softirq_ns")
    if wk:
        mc = wk.get("model_consistent", {})
        print(f"  a wake-up of the receiving process costs the waking softirq {wk['ns']:.0f} "
              f"+- {wk.get('se', 0):.0f} ns [{wk['min']:.0f}-{wk['max']:.0f}] at "
              f"{wk['wakeups_per_packet']:.3f} wake-ups per packet; the model, at "
              f"{mc.get('model_wakeups_per_packet', 0):.3f}, needs wakeup_remote "
              f"{mc.get('wakeup_remote', 0):.0f} ns for the same CPU time")
    print(f"use it with host.cost_profile: {path}", file=sys.stdout)
