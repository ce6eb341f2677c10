"""``rxlab hash`` subcommand, driven through run() and its own argparse parser."""

import argparse
import json

import pytest

from rxlab.cli.hash_cmd import add_parser, run
from rxlab.errors import UsageError
from rxlab.nic.toeplitz import MS_RSS_KEY


def _args(*argv):
    parser = argparse.ArgumentParser(prog="rxlab")
    add_parser(parser.add_subparsers(dest="cmd"))
    return parser.parse_args(["hash", *argv])


def _ns(src, dst, sport=None, dport=None, **kw):
    base = dict(key=None, ipv6=False, table=None, table_size="128", xfrm="none", json=False)
    return argparse.Namespace(src=src, dst=dst, sport=sport, dport=dport, **{**base, **kw})


def test_ipv4_four_and_two_tuple(capsys):
    assert run(_ns("66.9.149.187", "161.142.100.80", "2794", "1766")) == 0
    assert capsys.readouterr().out == "0x51ccc178\n"
    assert run(_ns("66.9.149.187", "161.142.100.80")) == 0
    assert capsys.readouterr().out == "0x323e8fc2\n"


def test_ipv6_detected_and_table(capsys):
    args = _args("3ffe:2501:200:1fff::7", "3ffe:2501:200:3::1", "2794", "1766", "--table", "3")
    assert args.func(args) == 0
    assert capsys.readouterr().out == f"0x40207d3d\nqueue: {(0x40207D3D & 127) % 3}\n"


def test_json_and_table_size(capsys):
    args = _args("66.9.149.187", "161.142.100.80", "2794", "1766", "--json", "--table", "4",
                 "--table-size", "64", "--key", ":".join(f"{b:02x}" for b in MS_RSS_KEY))
    run(args)
    out = json.loads(capsys.readouterr().out)
    assert out["hash"] == "0x51ccc178" and out["queue"] == (0x51CCC178 & 63) % 4
    assert out["table_size"] == 64 and out["family"] == "ipv4" and out["tuple"] == 4


def test_symmetric_xfrm(capsys):
    run(_ns("10.0.0.1", "10.0.0.2", "1000", "80", xfrm="sym-or-xor"))
    run(_ns("10.0.0.2", "10.0.0.1", "80", "1000", xfrm="sym-or-xor"))
    a, b = capsys.readouterr().out.split()
    assert a == b


@pytest.mark.parametrize("ns,msg", [
    (_ns("10.0.0.300", "10.0.0.1"), "bad address"),
    (_ns("10.0.0.1", "fe80::1"), "not IPv6"),
    (_ns("10.0.0.1", "10.0.0.2", ipv6=True), "not IPv6"),
    (_ns("10.0.0.1", "10.0.0.2", "80"), "both SPORT and DPORT"),
    (_ns("10.0.0.1", "10.0.0.2", "80", "65536"), "out of range"),
    (_ns("10.0.0.1", "10.0.0.2", "x", "1"), "not an integer"),
    (_ns("10.0.0.1", "10.0.0.2", key="6d5a"), "--key"),
    (_ns("10.0.0.1", "10.0.0.2", key="zz" * 40), "--key"),
    (_ns("10.0.0.1", "10.0.0.2", xfrm="sym"), "--xfrm"),
    (_ns("10.0.0.1", "10.0.0.2", table="0"), "--table"),
    (_ns("10.0.0.1", "10.0.0.2", table="4", table_size="big"), "--table-size"),
])
def test_usage_errors(ns, msg):
    with pytest.raises(UsageError, match=msg):
        run(ns)
