"""``rxlab hash``: the Toeplitz RSS hash (and queue) of one flow, as a NIC would compute it.

Mirrors the kernel selftest toeplitz.c computation (reference 1.1-1.4): fields in
src, dst, sport, dport order, optional symmetric transform, default indirection table.
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
        key = parse_key(args.key) if getattr(args, "key", None) else MS_RSS_KEY
    except ValueError as e:
        raise UsageError(f"--key: {e}") from None
    data = hash_input(_row(src), _row(dst), sport, dport,
                      "sdfn" if with_ports else "sd", xfrm)[0].tobytes()
    h = toeplitz_hash(key, data)
    out = {"hash": f"0x{h:08x}", "family": "ipv6" if v6 else "ipv4",
           "tuple": 4 if with_ports else 2, "xfrm": xfrm, "input": data.hex()}
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
