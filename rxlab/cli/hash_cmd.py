"""``rxlab hash``: the Toeplitz RSS hash (and queue) of one flow, as a NIC would compute it.

Mirrors the kernel selftest's ``toeplitz()`` (tools/testing/selftests/drivers/net/hw/
toeplitz.c) and the ``RXH_XFRM_SYM_*`` transforms (include/uapi/linux/ethtool.h): fields in
src, dst, sport, dport order, optional symmetric transform, default indirection table.

``--to-queue Q`` inverts it (predictable RSS, as DPDK's rte_thash): the source ports (or
another field) that land the flow on queue Q for the key and table, by solving the
hash's GF(2)-linear equations (``rxlab.tune.predictable``).
"""

import argparse
import ipaddress
import json

import numpy as np

from rxlab.errors import UsageError
from rxlab.nic.indirection import default_table, queue_of
from rxlab.nic.toeplitz import MS_RSS_KEY, XFRMS, hash_input, parse_key, toeplitz_hash


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Register the ``hash`` subcommand."""
    p = subparsers.add_parser(
        "hash", help="Toeplitz RSS hash and queue of one flow",
        description="Print the Toeplitz hash of SRC DST [SPORT DPORT] (4-tuple with ports, "
                    "2-tuple without). The default key is the Microsoft RSS verification key.")
    p.add_argument("src", metavar="SRC", help="source address (IPv4 or IPv6)")
    p.add_argument("dst", metavar="DST", help="destination address")
    p.add_argument("sport", metavar="SPORT", nargs="?", help="source port")
    p.add_argument("dport", metavar="DPORT", nargs="?", help="destination port")
    p.add_argument("--key", help="RSS key as hex, '6d5a56da...' or '6d:5a:56:...' (>= 40 bytes)")
    p.add_argument("--ipv6", action="store_true", help="force IPv6 (else detected from ':')")
    p.add_argument("--table", metavar="N", help="also print the queue for N RX queues")
    p.add_argument("--table-size", metavar="SIZE", default="128",
                   help="indirection table entries (default 128)")
    p.add_argument("--xfrm", default="none", help="input transform: " + ", ".join(XFRMS))
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--to-queue", metavar="Q",
                   help="find values of --vary that land the flow on queue Q (needs --table "
                        "N or --indir)")
    p.add_argument("--vary", choices=("sport", "dport", "src", "dst"),
                   help="field to choose with --to-queue (default sport; src without ports)")
    p.add_argument("--range", metavar="LO-HI", default="1024-65535",
                   help="port range for --to-queue (default 1024-65535)")
    p.add_argument("--within", metavar="CIDR",
                   help="address range for --vary src|dst (default: the address's /16, "
                        "/112 for IPv6)")
    p.add_argument("--count", metavar="K", default="8", help="values to list (default 8)")
    p.add_argument("--indir", metavar="LIST",
                   help="explicit indirection table, comma-separated queues (replicated "
                        "to --table-size, as ethtool netlink does)")
    p.set_defaults(func=run)
    return p


def _addr(text: str, v6: bool) -> bytes:
    try:
        ip = ipaddress.ip_address(text)
    except ValueError:
        raise UsageError(f"bad address {text!r}") from None
    if (ip.version == 6) != v6:
        raise UsageError(f"address {text!r} is not IPv{6 if v6 else 4} like the other one")
    return ip.packed


def _row(packed: bytes) -> np.ndarray:
    return np.frombuffer(packed, np.uint8)[None, :]  # hash_input wants (n, bytes) columns


def _int(text, what: str, lo: int, hi: int) -> int:
    try:
        v = int(str(text), 0)
    except ValueError:
        raise UsageError(f"{what} {text!r} is not an integer") from None
    if not lo <= v <= hi:
        raise UsageError(f"{what} {v} out of range {lo}..{hi}")
    return v


def run(args) -> int:
    """Compute and print; bad input raises UsageError."""
    v6 = bool(getattr(args, "ipv6", False)) or ":" in args.src or ":" in args.dst
    src, dst = _addr(args.src, v6), _addr(args.dst, v6)
    if (args.sport is None) != (args.dport is None):
        raise UsageError("give both SPORT and DPORT, or neither")
    with_ports = args.sport is not None
    sport = _int(args.sport, "SPORT", 0, 0xFFFF) if with_ports else None
    dport = _int(args.dport, "DPORT", 0, 0xFFFF) if with_ports else None
    xfrm = getattr(args, "xfrm", None) or "none"
    if xfrm not in XFRMS:
        raise UsageError(f"--xfrm {xfrm!r}: choose one of {', '.join(XFRMS)}")
    try:
        given = getattr(args, "key", None)
        key = MS_RSS_KEY if given is None else parse_key(given)  # an empty --key is refused
    except ValueError as e:
        raise UsageError(f"--key: {e}") from None
    data = hash_input(_row(src), _row(dst), sport, dport,
                      "sdfn" if with_ports else "sd", xfrm)[0].tobytes()
    h = toeplitz_hash(key, data)
    out = {"hash": f"0x{h:08x}", "family": "ipv6" if v6 else "ipv4",
           "tuple": 4 if with_ports else 2, "xfrm": xfrm, "input": data.hex()}
    if getattr(args, "to_queue", None) is not None:
        return _to_queue(args, key, src, dst, sport, dport, v6, xfrm)
    if getattr(args, "table", None) is not None:
        n = _int(args.table, "--table", 1, 1 << 16)
        size = _int(getattr(args, "table_size", 128), "--table-size", 1, 1 << 16)
        out.update(queue=queue_of(h, default_table(size, n)), queues=n, table_size=size)
    if getattr(args, "json", False):
        print(json.dumps(out))
    else:
        print(out["hash"])
        if "queue" in out:
            print(f"queue: {out['queue']}")
    return 0


def _table_arg(args) -> tuple[np.ndarray, int]:
    from rxlab.nic.indirection import explicit_table

    size = _int(getattr(args, "table_size", 128), "--table-size", 1, 1 << 16)
    indir = getattr(args, "indir", None)
    n = _int(args.table, "--table", 1, 1 << 16) if getattr(args, "table", None) else None
    if indir is None:
        if n is None:
            raise UsageError("--to-queue needs the table: --table N (default table over N "
                             "queues) or --indir LIST")
        return default_table(size, n), n
    try:
        user = [int(x, 0) for x in indir.replace(",", " ").split()]
    except ValueError:
        raise UsageError(f"--indir {indir!r}: give queue numbers separated by commas") from None
    if not user:
        raise UsageError("--indir: empty table")
    n = n or max(user) + 1
    try:
        return explicit_table(user, size, n), n
    except ValueError as err:
        raise UsageError(f"--indir: {err}") from None


def _to_queue(args, key, src, dst, sport, dport, v6, xfrm) -> int:
    from rxlab.tune.predictable import Flow, addr_text, find

    table, n = _table_arg(args)
    q = _int(args.to_queue, "--to-queue", 0, n - 1)
    count = _int(getattr(args, "count", 8), "--count", 1, 1 << 20)
    vary = getattr(args, "vary", None) or ("sport" if sport is not None else "src")
    flow = Flow(key, src, dst, sport, dport, xfrm)
    if vary in ("sport", "dport"):
        if sport is None:
            raise UsageError(f"--vary {vary}: the flow has no ports (2-tuple); give SPORT "
                             "DPORT or vary src/dst")
        text = getattr(args, "range", None) or "1024-65535"
        lo_s, sep, hi_s = str(text).partition("-")
        if not sep:
            raise UsageError(f"--range {text!r}: use LO-HI, e.g. 1024-65535")
        lo = _int(lo_s, "--range LO", 0, 0xFFFF)
        hi = _int(hi_s, "--range HI", 0, 0xFFFF)
        if lo > hi:
            raise UsageError(f"--range {text!r}: LO is above HI")
        base, width = 0, 16
    else:
        bits = 128 if v6 else 32
        addr = src if vary == "src" else dst
        text = getattr(args, "within", None) or (
            f"{ipaddress.ip_address(addr)}/{112 if v6 else 16}")
        try:
            net = ipaddress.ip_network(text, strict=False)
        except ValueError:
            raise UsageError(f"--within {text!r} is not a CIDR such as 10.0.0.0/16") from None
        if (net.version == 6) != v6:
            raise UsageError(f"--within {text!r}: not the flow's address family")
        width = bits - net.prefixlen
        if width < 1:
            raise UsageError(f"--within {text!r}: a single address leaves nothing to vary")
        base, lo, hi = int(net.network_address), 0, (1 << width) - 1
    try:
        res = find(flow, vary, table, q, lo=lo, hi=hi, base=base, width=width, count=count)
    except ValueError as err:
        raise UsageError(f"--to-queue: {err}") from None
    shown = ([str(v) for v in res["values"]] if vary in ("sport", "dport")
             else [addr_text(v, v6) for v in res["values"]])
    out = {"to_queue": q, "queues": n, "table_size": int(table.size), "vary": vary,
           "range": (f"{lo}-{hi}" if vary in ("sport", "dport")
                     else str(ipaddress.ip_network(f"{addr_text(base, v6)}/{bits - width}"))),
           "buckets": res["buckets"], "total_in_range": res["total_in_range"],
           "values": shown, "hashes": [f"0x{h:08x}" for h in res["hashes"]],
           "method": res["method"], "xfrm": xfrm}
    if getattr(args, "json", False):
        print(json.dumps(out))
        return 0
    if not shown:
        print(f"no {vary} in {out['range']} lands on queue {q}")
        return 0
    print(f"queue {q}: {res['total_in_range']:,} {vary} values in {out['range']} land on it "
          f"({len(res['buckets'])} of {table.size} buckets, {res['method']}); first "
          f"{len(shown)}:")
    for v, h in zip(shown, out["hashes"], strict=True):
        print(f"  {v}  {h}")
    return 0
