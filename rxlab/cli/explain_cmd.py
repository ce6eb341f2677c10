"""``rxlab explain arfs --flows N --rps-flow-cnt S --queues Q [--kernel V] [--json]``.

"With my connections and table size, how many flows fight over filters, and what does a
larger table cost?" The birthday model of ice's (bucket, flow_id) key, per table size.
"""

from __future__ import annotations

import argparse

from rxlab.errors import UsageError
from rxlab.jsonout import dumps


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser("explain", help="explain a mechanism with numbers (arfs)")
    p.add_argument("topic", choices=["arfs"], metavar="TOPIC", help="arfs")
    p.add_argument("--flows", type=int, required=True, help="concurrent connections")
    p.add_argument("--rps-flow-cnt", type=int, required=True, help="per-queue table size")
    p.add_argument("--queues", type=int, required=True, help="rx queues")
    p.add_argument("--kernel", default="6.19", help="kernel version (flow_id rule)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=run)
    return p


def rows(flows: int, cnt: int, queues: int, kernel: str) -> list[dict]:
    from rxlab.kernel.hashfn import roundup_pow_of_two
    from rxlab.kernel.versions import parse_version
    from rxlab.nic.collisions import birthday, memory_bytes

    if flows < 2 or cnt < 2 or queues < 1:
        raise UsageError("explain arfs: --flows and --rps-flow-cnt must be >= 2, --queues >= 1")
    v = parse_version(kernel)
    limit = 1 << 27 if v >= (7, 1) else 1 << 32  # reference 4.3
    if cnt > limit:
        raise UsageError(f"explain arfs: --rps-flow-cnt {cnt} is above the kernel maximum "
                         f"{limit} for {kernel} (-EINVAL)")
    hash32 = v >= (6, 15)
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
            "memory_bytes": memory_bytes(s, queues, roundup_pow_of_two(s * queues), v),
        })
    return out


def run(args) -> int:
    data = rows(args.flows, args.rps_flow_cnt, args.queues, args.kernel)
    if args.json:
        print(dumps({"topic": "arfs", "flows": args.flows, "queues": args.queues,
                     "kernel": args.kernel, "tables": data}, indent=1))
        return 0
    from rich.table import Table

    from rxlab.report.tables import make_console

    t = Table(title=f"aRFS filter collisions (ice before the 2025 fix): {args.flows:,} flows, "
                    f"{args.queues} queues, kernel {args.kernel}")
    for col in ("rps_flow_cnt", "flow_id rule", "colliding pairs", "flows sharing a filter",
                "share", "memory (tables)"):
        t.add_column(col, justify="right")
    for r in data:
        t.add_row(f"{r['rps_flow_cnt']:,}", r["flow_id_rule"], f"{r['colliding_pairs']:,.1f}",
                  f"{r['flows_sharing_a_filter']:,.1f}", f"{100 * r['share_of_flows']:.2f}%",
                  f"{r['memory_bytes'] / 2**20:,.1f} MiB")
    make_console().print(t)
    print("Model: two flows share an ice filter when they agree on hash & 1023 (bucket) and "
          "on flow_id; memory: rps_dev_flow entries per queue plus a socket table of "
          "queues x rps_flow_cnt entries (scaling.rst's rule).")
    return 0
