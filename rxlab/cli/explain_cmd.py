"""``rxlab explain drops|latency [SCENARIO|RESULT] [--set K=V] [--json]`` and
``rxlab explain arfs [--flows N] [--rps-flow-cnt S] [--queues Q] [--kernel V] [--json]``.

``drops`` and ``latency`` run the scenario (or read a saved result.json) and attribute
each drop reason and the latency tail to places, flows and settings (rxlab.explain).

``arfs`` without options explains the setup of the ice aRFS collision report (16,384 netperf
TCP sessions, rps_flow_cnt 512, 144 queues on a 144-CPU host; seed 000).

"With my connections and table size, how many flows fight over filters, and what does a
larger table cost?" The birthday model of ice's (bucket, flow_id) key, per table size.
"""

from __future__ import annotations

import argparse

from rxlab.errors import UsageError
from rxlab.jsonout import dumps


def add_parser(subparsers) -> argparse.ArgumentParser:
    from rxlab.cli.run_cmd import add_max_memory

    p = subparsers.add_parser(
        "explain", help="attribute drops or latency to flows, queues, CPUs and settings; "
                        "or explain aRFS filter collisions",
        description="drops / latency: run SCENARIO (default: 'default') or read a saved "
                    "result.json (rxlab run --out DIR) and name, for each drop reason and "
                    "for the latency tail, the queue, CPU, socket and flows involved and "
                    "the setting that would move it. arfs: the ice aRFS collision model.")
    p.add_argument("topic", choices=["drops", "latency", "arfs"], metavar="TOPIC",
                   help="drops, latency or arfs")
    p.add_argument("target", nargs="?", metavar="SCENARIO|RESULT",
                   help="drops/latency: a scenario (file or built-in name) or a result.json "
                        "or the --out folder holding it")
    p.add_argument("--set", action="append", default=[], metavar="PATH=VALUE",
                   help="drops/latency: override a scenario field")
    p.add_argument("--seed", type=int, help="drops/latency: override the scenario's seed")
    p.add_argument("--duration", type=float, help="drops/latency: traffic duration (s)")
    p.add_argument("--dev", default="DEV", help="device name shown in the commands")
    p.add_argument("--top", type=int, default=5, help="flows listed per cause (default 5)")
    p.add_argument("--flows", type=int,
                   help="arfs: concurrent connections (default 16384, the ice aRFS report's)")
    p.add_argument("--rps-flow-cnt", type=int, help="arfs: per-queue table size (default 512)")
    p.add_argument("--queues", type=int, help="arfs: rx queues (default 144)")
    p.add_argument("--kernel", help="arfs: kernel version (flow_id rule; default the "
                                    "seed's, as reproduce arfs-flow-match runs it)")
    p.add_argument("--json", action="store_true")
    add_max_memory(p)
    p.set_defaults(func=run)
    return p


def _arfs_defaults() -> dict:
    """The ice aRFS report's setup, as ``rxlab reproduce arfs-flow-match`` runs it."""
    from rxlab.repro import arfs_flow_match as seed

    return {"flows": seed.FLOWS, "rps_flow_cnt": 512, "queues": seed.CPUS,
            "kernel": seed.KERNEL}


ARFS_DEFAULTS = _arfs_defaults()
MAX_FLOWS = 1 << 40
MAX_DURATION_S = 60.0  # explain follows every packet: 60 s of the default is ~4 minutes


def rows(flows: int, cnt: int, queues: int, kernel: str) -> list[dict]:
    from rxlab.kernel.hashfn import roundup_pow_of_two
    from rxlab.kernel.versions import behaviour
    from rxlab.nic.collisions import birthday, memory_bytes
    from rxlab.scenario import _kernel_version as kernel_version

    if flows < 2 or cnt < 2 or queues < 1:
        raise UsageError("explain arfs: --flows and --rps-flow-cnt must be >= 2, --queues >= 1")
    if flows > MAX_FLOWS:  # the birthday estimate divides in floats: 1e300 overflows
        raise UsageError(f"explain arfs: --flows {flows:.3g} is above {MAX_FLOWS:,} (2^40, far "
                         "past any host's sockets); give fewer flows")
    try:  # the releases host.kernel takes: 99.99 would be answered with 7.1's rules
        kernel_version(kernel)
    except ValueError as err:
        raise UsageError(f"explain arfs: --kernel {err}") from None
    kb = behaviour(kernel)
    limit = kb.rps_flow_cnt_limit  # store_rps_dev_flow_table_cnt(), net/core/net-sysfs.c
    if cnt > limit:
        raise UsageError(f"explain arfs: --rps-flow-cnt {cnt} is above the kernel maximum "
                         f"{limit} for {kernel} (-EINVAL)")
    hash32 = kb.rfs_hash32
    size = roundup_pow_of_two(cnt)
    out = []
    for s in sorted({size, size * 2, size * 4, size * 8}):
        b = birthday(flows, s, hash32)
        out.append({
            "rps_flow_cnt": s,
            "flow_id_rule": "hash_32(hash, log)" if hash32 else "hash & (size - 1)",
            "colliding_pairs": round(b["pairs"], 1),
            "flows_sharing_a_filter": round(b["flows_colliding"], 1),
            "share_of_flows": round(b["flows_colliding"] / flows, 5),
            # the socket table (queues x rps_flow_cnt) is rounded up to a power of two
            "memory_bytes": memory_bytes(s, queues, roundup_pow_of_two(s * queues), kb),
        })
    return out


def run(args) -> int:
    if args.topic != "arfs":
        return _explain(args)
    if args.target is not None or args.set or args.seed is not None or (
            args.duration is not None):
        raise UsageError("explain arfs: takes no scenario, --set, --seed or --duration; "
                         "use --flows, --rps-flow-cnt, --queues, --kernel")
    for k, v in ARFS_DEFAULTS.items():
        if getattr(args, k) is None:
            setattr(args, k, v)
    data = rows(args.flows, args.rps_flow_cnt, args.queues, args.kernel)
    if args.json:
        from rxlab.report.arfs_drivers import as_json

        print(dumps({"topic": "arfs", "flows": args.flows, "queues": args.queues,
                     "kernel": args.kernel, "tables": data, "drivers": as_json()}, indent=1))
        return 0
    from rxlab.report.fit import print_fitted, print_wrapped
    from rxlab.report.tables import make_console

    console = make_console()
    # print_fitted: a value is never cut ("hash_32(ha…"); columns that do not fit move on
    print_fitted(console, f"aRFS filter collisions (ice before the 2025 fix): "
                 f"{args.flows:,} flows, {args.queues} queues, kernel {args.kernel}",
                 ("rps_flow_cnt", "flow_id rule", "colliding pairs", "flows sharing a filter",
                  "share", "memory (tables)"),
                 [(f"{r['rps_flow_cnt']:,}", r["flow_id_rule"], f"{r['colliding_pairs']:,.1f}",
                   f"{r['flows_sharing_a_filter']:,.1f}", f"{100 * r['share_of_flows']:.2f}%",
                   f"{r['memory_bytes'] / 2**20:,.1f} MiB") for r in data],
                 justify=["right", "left", "right", "right", "right", "right"])
    print_wrapped(console, "Model: two flows share an ice filter when they agree on hash & "
                  "1023 (bucket) and on flow_id; memory: rps_dev_flow entries per queue plus "
                  "a socket table of queues x rps_flow_cnt entries (scaling.rst's rule).")
    from rxlab.report.arfs_drivers import print_drivers

    console.print("\nThe drivers' filter paths (ndo_rx_flow_steer, then the deferred "
                  "programming) and what rxlab models for each step:", highlight=False)
    print_drivers(console)
    return 0


def _explain(args) -> int:
    from rxlab.cli.run_cmd import run_overrides
    from rxlab.memory_budget import process_limit

    given = [f"--{k.replace('_', '-')}" for k in ARFS_DEFAULTS if getattr(args, k) is not None]
    if given:
        raise UsageError(f"explain {args.topic}: {', '.join(given)} belongs to explain arfs; "
                         "change the scenario with --set PATH=VALUE")
    if args.top < 1:
        raise UsageError(f"--top: {args.top} flows; give N >= 1")
    if args.duration is not None and args.duration > MAX_DURATION_S:
        raise UsageError(f"--duration {args.duration:g}: explain runs at most "
                         f"{MAX_DURATION_S:g} s of traffic; give a shorter window (the "
                         "drops of a steady state show within a second)")
    ov = run_overrides(args)
    with process_limit(args.max_memory):
        from rxlab.explain.drops import explain_drops
        from rxlab.explain.inputs import load_subject
        from rxlab.explain.latency import explain_latency

        sub = load_subject(args.target or "default", ov, args.max_memory)
        fn = explain_drops if args.topic == "drops" else explain_latency
        ex = fn(sub, dev=args.dev, top=args.top)
    if args.json:
        print(dumps(ex, indent=1))
        return 0
    from rxlab.explain.render import print_explanation
    from rxlab.report.tables import make_console

    print_explanation(ex, make_console())
    return 0
