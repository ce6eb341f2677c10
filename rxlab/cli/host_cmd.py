"""``rxlab host``: read a Linux host's steering configuration, export it as a scenario,
apply a scenario to a device (dry run unless ``--yes``), roll an apply back.

    rxlab host show [--json] [--netns NS] [--dev NAME]
    rxlab host export [--dev NAME] [--netns NS] -o scenario.yaml
    rxlab host apply SCENARIO.yaml --dev NAME [--netns NS] [--yes] [--rollback-file F]
    rxlab host rollback FILE
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from pathlib import Path

from rxlab.errors import UsageError


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Register ``host`` and its subcommands."""
    p = subparsers.add_parser(
        "host", help="show, export, apply or roll back a real host's steering configuration",
        description="Read this Linux host's receive-steering configuration (RPS, XPS, RSS, "
                    "IRQ affinity, net.core sysctls), export it as a scenario, or apply a "
                    "scenario to a device.")
    sub = p.add_subparsers(dest="host_command", metavar="ACTION", parser_class=type(p))
    sub.required = True

    s = sub.add_parser("show", help="print the steering configuration")
    s.add_argument("--json", action="store_true", help="one JSON object: cpus, devices, ...")
    s.add_argument("--netns", metavar="NS", help="read devices inside this network namespace")
    s.add_argument("--dev", metavar="NAME", action="append",
                   help="only this device (repeatable)")
    s.set_defaults(func=run, action="show")

    e = sub.add_parser("export", help="write the configuration as a scenario YAML")
    e.add_argument("--dev", metavar="NAME", help="device to export (default: the only one up)")
    e.add_argument("--netns", metavar="NS", help="device inside this network namespace")
    e.add_argument("-o", "--output", metavar="FILE", required=True,
                   help="scenario file to write ('-' for stdout)")
    e.add_argument("--profile", metavar="PATH",
                   help="a cost profile from rxlab calibrate, recorded as host.cost_profile")
    src = e.add_mutually_exclusive_group()
    src.add_argument("--pcap", metavar="FILE",
                     help="traffic: replay this capture (traffic.pcap) instead of the default")
    src.add_argument("--sockets", action="store_true",
                     help="traffic: the host's established TCP connections and connected "
                          "UDP sockets (/proc/net), one group per flow")
    e.add_argument("--max-flows", type=int, default=256, metavar="N",
                   help="with --sockets: at most N flows (default 256)")
    e.set_defaults(func=run, action="export")

    a = sub.add_parser("apply", help="apply a scenario's steering settings to a device")
    a.add_argument("scenario", metavar="SCENARIO", help="scenario YAML (or built-in name)")
    a.add_argument("--dev", metavar="NAME", required=True, help="device to configure")
    a.add_argument("--netns", metavar="NS", help="device inside this network namespace")
    a.add_argument("--yes", action="store_true",
                   help="really apply (default: print the changes only)")
    a.add_argument("--rollback-file", metavar="FILE",
                   help="where previous values are saved (default: "
                        "./rxlab-rollback-DEV-TIME.json)")
    a.set_defaults(func=run, action="apply")

    r = sub.add_parser("rollback", help="restore the values saved by `host apply --yes`")
    r.add_argument("file", metavar="FILE", help="rollback file written by host apply")
    r.set_defaults(func=run, action="rollback")
    p.set_defaults(func=run)
    return p


# ----------------------------------------------------------------------- show


def _fmt_queues(items: list[dict], key: str) -> str:
    # None: the file could not be read (xps_cpus on a device without XPS), not a value
    vals = [str(q.get(key)) if q.get(key) is not None else "unreadable" for q in items]
    if vals and all(v == vals[0] for v in vals):
        return f"{vals[0]} (all {len(vals)})"
    return " ".join(f"{q['queue']}:{q.get(key)}" for q in items)


def format_text(info: dict) -> str:
    from rxlab.host.read import unmodelled_lines

    lines = [f"host {info['hostname']}: {info['cpus']} CPUs (online {info['cpus_online']}), "
             f"kernel {info['kernel']}" + (f", netns {info['netns']}" if info["netns"] else "")]
    sc = info["sysctls"]
    lines.append("net.core: " + " ".join(f"{k}={v}" for k, v in sc.items()))
    for n in info.get("notes", []):
        lines.append(f"note: {n}")
    lines += unmodelled_lines(info)
    for name, d in info["devices"].items():
        lines.append(f"{name}: driver {d['driver'] or '-'}, {d['rx_queues']} rx / "
                     f"{d['tx_queues']} tx queues, {d['operstate']}")
        if d["rx"]:
            lines.append(f"  rps_cpus:     {_fmt_queues(d['rx'], 'rps_cpus')}")
            lines.append(f"  rps_flow_cnt: {_fmt_queues(d['rx'], 'rps_flow_cnt')}")
        if d["tx"]:
            lines.append(f"  xps_cpus:     {_fmt_queues(d['tx'], 'xps_cpus')}")
        if d.get("unmodelled"):
            lines.append("  not modelled: " + " ".join(f"{k}={v}"
                                                       for k, v in d["unmodelled"].items()))
        if d["irqs"]:
            for i in d["irqs"]:
                eff = i["effective_affinity_list"]
                lines.append(f"  irq {i['irq']} {i['name']} ({i['kind']} {i['queue']}): "
                             f"affinity {i['smp_affinity_list']}"
                             + (f", effective {eff}" if eff else ""))
        else:
            lines.append("  irqs: none identified")
        ch = d.get("channels", {})
        if ch.get("supported"):
            cur = " ".join(f"{k} {v}/{ch['max'].get(k)}" for k, v in ch["current"].items()
                           if v is not None)
            lines.append(f"  channels: {cur}")
        elif ch:
            lines.append(f"  channels: unsupported ({ch.get('error')})")
        rss = d.get("rss", {})
        if rss.get("supported"):
            t = rss.get("indirection") or []
            lines.append(f"  rss: {rss.get('hfunc') or '?'}, {len(t)}-entry table "
                         f"{' '.join(map(str, t[:16]))}{' ...' if len(t) > 16 else ''}")
            lines.append(f"  rss key: {rss.get('key')}")
        elif rss:
            lines.append(f"  rss: unsupported ({rss.get('error')})")
        fh = d.get("flow_hash", {})
        if fh.get("supported"):
            lines.append("  rx-flow-hash: " + " ".join(
                f"{t}={fh.get(t) or '-'}" for t in ("tcp4", "udp4", "tcp6", "udp6")))
        elif fh:
            lines.append(f"  rx-flow-hash: unsupported ({fh.get('error')})")
    return "\n".join(lines)


def run(args) -> int:
    """Dispatch the host action; bad input raises UsageError."""
    from rxlab.host.read import read_host

    action = getattr(args, "action", None)
    if action == "show":
        from rxlab.host.apply import pending

        info = read_host(args.netns, args.dev)
        for dev in info["devices"]:
            _warn(pending(dev, args.netns))
        if args.json:
            print(json.dumps(info, indent=1))
        else:  # each line within the width, its rest indented under it
            print("\n".join(_wrapped(line, " " * (len(line) - len(line.lstrip()) + 4))
                            for line in format_text(info).splitlines()))
        return 0
    if action == "export":
        from rxlab.host.export import (
            host_fields,
            kernel_hz,
            pick_device,
            render,
            scenario_from_host,
            socket_flows,
        )
        from rxlab.outfiles import check_file, write_file
        from rxlab.scenario import scenario_from_dict

        if not 1 <= args.max_flows <= 100000:
            raise UsageError("--max-flows: give 1 to 100000 flows")
        check_file(args.output, "-o")  # a device or a missing folder: before reading
        info = read_host(args.netns, [args.dev] if args.dev else None)
        dev = pick_device(info, args.dev)
        data, notes = scenario_from_host(info, dev)
        flows, listeners = socket_flows(args.netns) if args.sockets else (None, None)
        host_fields(data, notes, hz=kernel_hz(), profile=args.profile, pcap=args.pcap,
                    flows=flows, listeners=listeners, max_flows=args.max_flows)
        scenario_from_dict(data, f"export of {dev}")  # must load; a UsageError is a bug
        text = render(data, notes, info, dev)
        write_file(args.output, text, "-o")  # '-': stdout, the scenario alone
        if args.output != "-":
            print(f"wrote {args.output}: {dev}, {data['nic']['queues']} queues, "
                  f"{data['host']['cpus']} CPUs" + (f" ({len(notes)} notes in the header)"
                                                    if notes else ""))
        return 0
    if action == "apply":
        return _apply(args)
    if action == "rollback":
        from rxlab.host.apply import rollback

        restored, n = rollback(args.file)
        same = n - restored
        print(f"rolled back {args.file}: restored {restored} of {n} value(s)"
              + (f" ({same} already held the previous value)" if same else ""))
        return 0
    raise UsageError("host: give an action: show, export, apply or rollback")


def _wrapped(line: str, rest: str) -> str:
    """``line`` within the width (COLUMNS, the terminal's, 80 in a pipe), continued under
    ``rest``. A command is never broken: its comment moves to the next line instead."""
    import textwrap

    from rxlab.report.tables import text_width

    width = text_width()
    if len(line) <= width:
        return line
    if "    # " in line and rest.endswith("# "):
        cmd, comment = line.split("    # ", 1)
        return cmd + "\n" + _wrapped(rest + comment, rest)
    return "\n".join(textwrap.wrap(line, width, subsequent_indent=rest,
                                    break_long_words=False, break_on_hyphens=False))


def _warn(line: str | None) -> None:
    if line:
        print(f"rxlab: warning: {line}", file=sys.stderr)


def _apply(args) -> int:
    from rxlab.host.apply import Interrupted, apply, default_rollback_path, plan, unfinished
    from rxlab.host.netns import check_dev, check_netns
    from rxlab.scenario import load_scenario

    check_dev(args.dev)
    check_netns(args.netns)
    found = unfinished(args.dev, args.netns)
    if found and found[1] and args.yes:
        raise UsageError(found[0])  # a new rollback file would save half-applied values
    _warn(found and found[0])
    sc = load_scenario(args.scenario)
    steps, notes, _ = plan(sc, args.dev, args.netns)
    where = f" in netns {args.netns}" if args.netns else ""
    for n in notes:
        print(_wrapped(f"note: {n}", "      "))
    if not steps:
        print(f"{args.dev}{where} already matches {args.scenario}: nothing to change")
        return 0
    print(f"{len(steps)} change(s) for {args.dev}{where}:")
    for s in steps:
        wide = (f"; machine-wide, not only netns {args.netns}"
                if args.netns and s.machine_wide else "")
        print(_wrapped(f"  {s.command(args.dev, args.netns)}    # now {s.shown(s.old)}{wide}",
                       "      # "))
    if not args.yes:
        print("dry run: nothing changed; add --yes to apply (previous values are saved to a "
              "rollback file first)")
        return 0
    path = Path(args.rollback_file) if args.rollback_file else default_rollback_path(args.dev)
    try:
        apply(steps, args.dev, args.netns, path, log=lambda m: None)
    except Interrupted as intr:
        with contextlib.suppress(OSError):  # SIGHUP: the terminal may be gone
            print(f"rxlab: {intr.message}", file=sys.stderr)
        return 128 + intr.signum
    print(f"applied {len(steps)} change(s); undo with: rxlab host rollback {path}")
    return 0
