"""Hostile captures: every malformed pcap/pcapng form ends in a one-line ``UsageError``
naming the byte offset and the field, or in a replay consistent with its summary; and a
fuzz test (hypothesis, derandomized) runs mutated captures through ``rxlab run``.

The rules checked come from the formats (draft-ietf-opsawg-pcap / -pcapng: the captured
length is at most the original length and the snap length; a timestamp fraction is below
one second; block lengths are multiples of 4, at least 12, repeated at the end), from
libpcap (MAXIMUM_SNAPLEN 262144; a snap length of 0 or above it means 262144; records are
cut to the snap length) and from Linux (no packet exceeds GSO_MAX_SIZE, 524280 bytes).
"""

from __future__ import annotations

import json
import math
import os
import random
import re
import struct
import tempfile
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_capture import (
    FRAMES,
    V4A,
    collect,
    eth,
    ipv4,
    ng_block,
    ng_epb,
    ng_idb,
    ng_shb,
    ng_spb,
    udp,
    write_pcap,
)

from rxlab.capture.pcap import open_capture
from rxlab.cli.main import main
from rxlab.errors import UsageError

FR = eth(ipv4(*V4A, 17, udp(1000, 9000, 18)))  # 60 bytes
FR2 = eth(ipv4(*V4A, 17, udp(1001, 9000, 18)))
REC = 16 + len(FR)  # one pcap record
GSO_MAX_SIZE = 8 * 65535  # include/linux/netdevice.h (Linux 5.19+)
MAXIMUM_SNAPLEN = 262144  # libpcap pcap-int.h
COMPILE_NOTICE = "rxlab: compiling the event loop"  # once per install, before any run


def put(data: bytes, off: int, fmt: str, value) -> bytes:
    b = bytearray(data)
    struct.pack_into(fmt, b, off, value)
    return bytes(b)


def refused(path, pattern: str, **kw) -> str:
    with pytest.raises(UsageError) as ei:
        open_capture(path, **kw)
    msg = str(ei.value)
    assert "\n" not in msg
    assert re.search(pattern, msg), msg
    return msg


def consistent(cap) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The replay offers exactly what the summary counts: packets, bytes, flows, order."""
    t, f, s = collect(cap, 3)
    assert t.size == cap.packets
    assert int(s.sum()) == cap.bytes
    assert np.all(np.diff(t) >= 0) and (t.size == 0 or t[0] == 0)
    assert t.size == 0 or cap.duration_ns == int(t[-1]) + 1
    assert np.array_equal(np.bincount(f, minlength=len(cap.flows)),
                          np.round(cap.flows.weight * cap.packets).astype(int))
    return t, f, s


def cli(capsys, path, *extra) -> tuple[int, str, str]:
    capsys.readouterr()
    rc = main(["run", "default", "--pcap", str(path), "--duration", "0.001", "--json", *extra])
    out, err = capsys.readouterr()
    return rc, out, err


def _no_constant(c):
    raise ValueError(f"{c} in the JSON output")


def check_cli(rc: int, out: str, err: str) -> str:
    """Exit 0 with strict JSON, or exit 2 with one line: nothing else."""
    if rc == 0:
        data = json.loads(out, parse_constant=_no_constant)
        pk, cap = data["packets"], data["capture"]
        assert pk["offered"] == (pk["delivered"] + pk["dropped"] + pk["forwarded"]
                                 + pk["in_flight"])
        assert 0 < pk["offered"] <= cap["packets"] <= cap["records"]
        # no frame longer than a Linux packet plus a link header and FCS
        assert cap["bytes"] <= cap["packets"] * (GSO_MAX_SIZE + 18)
        return "replayed"
    assert rc == 2, (rc, err)
    lines = [ln for ln in err.strip().splitlines() if not ln.startswith(COMPILE_NOTICE)]
    assert len(lines) == 1 and lines[0].startswith("rxlab: error: "), err
    return "refused"


# ------------------------------------------------------------------------- wire length


def test_wire_length_beyond_any_linux_packet_is_refused(tmp_path, capsys):
    p = write_pcap(tmp_path / "w.pcap", [(0, FR, 0xFFFFFFFF), (0.01, FR)])
    refused(p, r"byte offset 24: corrupt capture: original \(wire\) length 4294967295 "
               r"exceeds 524280 bytes")
    rc, out, err = cli(capsys, p)
    assert check_cli(rc, out, err) == "refused" and "4294967295" in err
    # the same record later in the file: the prefix before it, with --allow-truncated
    p = write_pcap(tmp_path / "w2.pcap", [(0, FR), (0.0001, FR2, GSO_MAX_SIZE + 1)])
    refused(p, rf"byte offset {24 + REC}: .*length {GSO_MAX_SIZE + 1} exceeds")
    cap = open_capture(p, allow_truncated=True)
    assert cap.packets == 1 and cap.truncated_at == 24 + REC
    _, _, s = consistent(cap)
    assert s.tolist() == [len(FR) + 4]


def test_wire_length_up_to_gso_max_size_replays_as_that_frame(tmp_path):
    # a GRO/BIG TCP super-packet as tcpdump on the receiving host records it
    p = write_pcap(tmp_path / "gro.pcap", [(0, FR, GSO_MAX_SIZE), (0.001, FR, 65000)])
    cap = open_capture(p)
    _, _, s = consistent(cap)
    assert s.tolist() == [GSO_MAX_SIZE + 4, 65000 + 4]  # wire length + FCS
    assert cap.summary()["bytes"] == GSO_MAX_SIZE + 65000 + 8


def test_wire_length_below_captured_length_is_malformed(tmp_path):
    p = write_pcap(tmp_path / "o.pcap", [(0, FR, 3)])
    refused(p, rf"byte offset 24: corrupt capture: original \(wire\) length 3 is below the "
               rf"captured length {len(FR)}")
    shb, idb = ng_shb(), ng_idb(1)
    p = tmp_path / "o.pcapng"
    p.write_bytes(shb + idb + ng_epb(0, 1, FR, orig=59))
    refused(p, rf"byte offset {len(shb + idb)}: .*length 59 is below the captured length 60")
    p.write_bytes(shb + idb + ng_epb(0, 1, FR, orig=0xFFFFFFFF))
    refused(p, r"length 4294967295 exceeds 524280")
    spb = ng_block(3, struct.pack("<I", 0xFFFFFFFF) + FR)  # simple packet block
    p.write_bytes(shb + idb + spb)
    refused(p, rf"byte offset {len(shb + idb)}: .*length 4294967295 exceeds 524280")


# ------------------------------------------------------------------------- speed-up


@pytest.mark.parametrize("value", [1e-300, math.nan, math.inf, -math.inf, 0.0, -1.0, 1e300,
                                   1.0000001e6, 0.99e-6])
def test_speedup_outside_a_millionth_to_a_million_is_refused(tmp_path, value):
    p = write_pcap(tmp_path / "s.pcap", [(0, FR), (0.01, FR)])
    refused(p, r"^speedup: must be >= 1e-06 and <= 1e\+06 .*got ", speedup=value)


@pytest.mark.parametrize("argv", [["--speedup", "1e-300"], ["--speedup", "nan"],
                                  ["--speedup", "inf"], ["--speedup", "-5"]])
def test_speedup_from_the_command_line(tmp_path, capsys, argv):
    p = write_pcap(tmp_path / "s.pcap", [(0, FR), (0.01, FR)])
    rc, out, err = cli(capsys, p, *argv)
    assert check_cli(rc, out, err) == "refused" and "speedup" in err


def test_speedup_at_its_bounds_scales_time_exactly(tmp_path):
    p = write_pcap(tmp_path / "s.pcap", [(0, FR), (0.01, FR)])
    slow = open_capture(p, speedup=1e-6)  # 10 ms replayed over 10^4 s
    t, _, _ = consistent(slow)
    assert t[1] == pytest.approx(1e13, rel=1e-12) and slow.duration_s == pytest.approx(1e4)
    fast = open_capture(p, speedup=1e6)  # 10 ms replayed in 10 ns
    assert consistent(fast)[0].tolist() == [0, 10]


def test_replay_time_past_2_pow_62_ns_is_refused_with_the_fix(tmp_path):
    # pcap seconds are u32 (at most ~136 years): a slow-down can still pass int64 ns
    p = write_pcap(tmp_path / "far.pcap", [(0, FR), (1, FR), (4_000_000_000, FR)])
    assert open_capture(p).duration_s == pytest.approx(4e9)
    msg = refused(p, rf"byte offset {24 + 2 * REC}: corrupt capture: record 4000000000 s after "
                     r"the first packet: .* past 2\^62 ns .*use a larger speed-up", speedup=0.5)
    cap = open_capture(p, speedup=0.5, allow_truncated=True)
    assert cap.packets == 2 and cap.truncated_at == 24 + 2 * REC and "2^62" in msg
    assert consistent(cap)[0].tolist() == [0, 2_000_000_000]


# ------------------------------------------------------------------------- time span


def _scan_peak(path) -> int:
    tracemalloc.start()
    try:
        cap = open_capture(path)
        consistent(cap)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_memory_does_not_follow_the_time_span(tmp_path, capsys):
    near = write_pcap(tmp_path / "near.pcap", [(1000, FR), (1000.01, FR)])
    days = write_pcap(tmp_path / "days.pcap", [(1000, FR), (1000 + 2 * 86400, FR)])
    ages = write_pcap(tmp_path / "ages.pcap", [(0, FR), (4_000_000_000, FR)])
    cap = open_capture(days)
    assert cap.packets == 2 and cap.duration_ns == 2 * 86400 * 10**9 + 1
    assert cap.flows.rate_pps[0] == pytest.approx(2 / (2 * 86400))
    _scan_peak(near)  # compiled and warm
    base = _scan_peak(near)
    assert _scan_peak(days) <= base * 1.1 + 65536
    assert _scan_peak(ages) <= base * 1.1 + 65536
    rc, out, err = cli(capsys, days)  # the run's own --duration cuts the replay
    assert check_cli(rc, out, err) == "replayed"
    assert json.loads(out)["packets"]["offered"] == 1


# ------------------------------------------------------------------------- timestamps


def test_records_out_of_order_are_offered_after_their_predecessor(tmp_path):
    p = write_pcap(tmp_path / "back.pcap", [(10, FR), (9, FR), (8, FR2), (11, FR), (10.5, FR2)])
    cap = open_capture(p)
    t, f, _ = consistent(cap)
    assert t.tolist() == [0, 0, 0, 10**9, 10**9] and f.tolist() == [0, 0, 1, 0, 1]
    assert cap.reordered == 3
    # a first record stamped last (a corrupt u32 second): the rest arrive with it
    good = write_pcap(tmp_path / "g.pcap", [(0.001 * i, FR) for i in range(6)]).read_bytes()
    p.write_bytes(put(good, 24, "<I", 0xFFFFFFFF))
    cap = open_capture(p)
    assert consistent(cap)[0].tolist() == [0] * 6 and cap.reordered == 5


def test_timestamp_fraction_of_a_second_or_more_is_malformed(tmp_path):
    good = write_pcap(tmp_path / "g.pcap", [(0, FR), (0.5, FR)]).read_bytes()
    p = tmp_path / "f.pcap"
    p.write_bytes(put(good, 24 + REC + 4, "<I", 999_999))
    assert consistent(open_capture(p))[0].tolist() == [0, 999_999_000]
    p.write_bytes(put(good, 24 + REC + 4, "<I", 1_000_000))
    refused(p, rf"byte offset {24 + REC}: corrupt capture: timestamp fraction 1000000 is not "
               r"below 1000000")
    ns = write_pcap(tmp_path / "n.pcap", [(0, FR), (0.5, FR)], nanos=True).read_bytes()
    p.write_bytes(put(ns, 24 + REC + 4, "<I", 999_999_999))
    assert consistent(open_capture(p))[0].tolist() == [0, 999_999_999]
    p.write_bytes(put(ns, 24 + REC + 4, "<I", 0xFFFFFFFF))
    refused(p, r"timestamp fraction 4294967295 is not below 1000000000")


@pytest.mark.parametrize("idb,units,ok_ns", [
    (dict(tsresol=9), (1 << 63) - 1, (1 << 63) - 1),  # ns: the last int64 ns
    (dict(tsresol=9), 1 << 63, None),
    (dict(tsresol=9), (1 << 64) - 1, None),
    (dict(), (1 << 63) // 1000 + 1, None),  # microseconds past 2262
    (dict(), (1 << 63) // 1000, 9_223_372_036_854_775_000),
    (dict(tsresol=12), (1 << 64) - 1, ((1 << 64) - 1) // 1000),  # ps: always fits
    (dict(tsresol=0x80), (1 << 34), None),  # 2^0 s units
    (dict(tsresol=0x80 | 62), (1 << 64) - 1, 3_999_999_999),  # 2^-62 s: just under 4 s
    (dict(tsresol=9, tsoffset=-1), 10**9 - 1, None),  # before 1970
    (dict(tsresol=9, tsoffset=1), (1 << 63) - 10**9 - 1, (1 << 63) - 1),
    (dict(tsresol=9, tsoffset=1), (1 << 63) - 10**9, None),
    (dict(tsresol=0x80 | 30, tsoffset=2), (6 << 30) + (1 << 29), 8_500_000_000),
])
def test_pcapng_timestamps_beyond_int64_ns_are_refused(tmp_path, idb, units, ok_ns):
    shb, i = ng_shb(), ng_idb(1, **idb)
    at = len(shb + i)
    p = tmp_path / "ts.pcapng"
    p.write_bytes(shb + i + ng_epb(0, units, FR) + ng_epb(0, units, FR))
    if ok_ns is None:
        refused(p, rf"byte offset {at}: corrupt capture: timestamp out of range")
        return
    assert consistent(open_capture(p))[0].tolist() == [0, 0]
    # after a packet at 0 (the interface's offset): exact, or past what a replay may span
    p.write_bytes(shb + i + ng_epb(0, 0, FR) + ng_epb(0, units, FR))
    rel = ok_ns - idb.get("tsoffset", 0) * 10**9
    if rel <= 1 << 62:
        assert consistent(open_capture(p))[0].tolist() == [0, rel]
    else:
        refused(p, rf"byte offset {at + len(ng_epb(0, 0, FR))}: corrupt capture: record "
                   rf"{rel // 10**9} s after the first packet")


def test_pcapng_offset_and_resolution_out_of_range(tmp_path):
    shb = ng_shb()
    p = tmp_path / "o.pcapng"
    p.write_bytes(shb + ng_idb(1, tsoffset=1 << 62) + ng_epb(0, 5, FR))
    refused(p, rf"byte offset {len(shb)}: corrupt capture: pcapng if_tsoffset "
               r"4611686018427387904 s is past int64 nanoseconds")
    p.write_bytes(shb + ng_idb(1, tsoffset=-(1 << 40)) + ng_epb(0, 5, FR))
    refused(p, r"if_tsoffset -1099511627776 s")
    p.write_bytes(shb + ng_idb(1, tsresol=19) + ng_epb(0, 5, FR))
    refused(p, r"if_tsresol 10\^-19 is out of range")
    p.write_bytes(shb + ng_idb(1, tsresol=0x80 | 63) + ng_epb(0, 5, FR))
    refused(p, r"if_tsresol 2\^-63 is out of range")


# ------------------------------------------------------------------------- pcap headers


def test_snap_length_follows_libpcap(tmp_path):
    recs = [(0.001 * i, fr) for i, (fr, _) in enumerate(FRAMES)]
    good = write_pcap(tmp_path / "g.pcap", recs)
    ref = consistent(open_capture(good))
    data = good.read_bytes()
    p = tmp_path / "s.pcap"
    for snap in (0, MAXIMUM_SNAPLEN + 1, 0xFFFFFFFF):  # means MAXIMUM_SNAPLEN
        p.write_bytes(put(data, 16, "<I", snap))
        for a, b in zip(ref, consistent(open_capture(p)), strict=True):
            assert np.array_equal(a, b)
    # records longer than the snap length are cut to it: 14 + 20 + 4 bytes name a UDP flow
    one = write_pcap(tmp_path / "one.pcap", [(0, FR), (0.001, FR)]).read_bytes()
    p.write_bytes(put(one, 16, "<I", 38))
    cap = open_capture(p)
    assert cap.packets == 2 and consistent(cap)[2].tolist() == [len(FR) + 4] * 2
    p.write_bytes(put(one, 16, "<I", 37))
    refused(p, r"no TCP or UDP packet over IPv4/IPv6 \(2 headers cut by the snap length\)")


@pytest.mark.parametrize("name,mangle,pattern", [
    ("empty", lambda b: b"", r"byte offset 0: truncated capture: 0 bytes, too short"),
    ("3 bytes", lambda b: b[:3], r"byte offset 0: truncated capture: 3 bytes"),
    ("header 20", lambda b: b[:20], r"byte offset 0: truncated capture: the 24-byte pcap file "
                                    r"header has only 20 bytes"),
    ("header only", lambda b: b[:24], r"no TCP or UDP packet .*\(no packet records\)"),
    ("cut record header", lambda b: b[:24 + 7],
     r"byte offset 24: truncated capture: the record at byte offset 24 needs 16 bytes but the "
     r"file ends after 7"),
    ("incl_len past the file", lambda b: put(put(b, 32, "<I", 5000), 36, "<I", 5000),
     rf"byte offset 24: truncated capture: the record at byte offset 24 needs 5016 bytes but "
     rf"the file ends after {2 * REC}"),
    ("incl_len over MAXIMUM_SNAPLEN", lambda b: put(put(b, 32, "<I", MAXIMUM_SNAPLEN + 1), 36,
                                                    "<I", MAXIMUM_SNAPLEN + 1),
     r"byte offset 24: corrupt capture: record length 262145 exceeds the 262144-byte maximum"),
    ("incl_len 0xFFFFFFFF", lambda b: put(b, 32, "<I", 0xFFFFFFFF), r"record length 4294967295"),
    ("bad magic", lambda b: b"\x00" + b[1:], r"not a pcap or pcapng file \(magic 00c3b2a1"),
    ("random bytes", lambda b: random.Random(5).randbytes(4000), r"not a pcap or pcapng file"),
    ("link type 999", lambda b: put(b, 20, "<I", 999),
     r"no TCP or UDP packet .*\(2 unsupported link type\)"),
    ("link type 0xFFFFFFFF", lambda b: put(b, 20, "<I", 0xFFFFFFFF),
     r"\(2 unsupported link type\)"),
])
def test_mutated_pcap_files(tmp_path, capsys, name, mangle, pattern):
    good = write_pcap(tmp_path / "g.pcap", [(0, FR), (0.0001, FR2)]).read_bytes()
    p = tmp_path / "m.pcap"
    p.write_bytes(mangle(good))
    refused(p, pattern)
    assert check_cli(*cli(capsys, p)) == "refused"


# ------------------------------------------------------------------------- pcapng blocks


def _ng():
    shb, idb = ng_shb(), ng_idb(1, tsresol=9)
    epbs = [ng_epb(0, 1000 * i, FR if i % 2 else FR2) for i in range(4)]
    return shb, idb, epbs


@pytest.mark.parametrize("name,build,pattern", [
    ("length not a multiple of 4", lambda s, i, e: s + i + put(e[0], 4, "<I", 62) + e[1],
     r"byte offset {at}: corrupt capture: pcapng block length 62 is not a multiple of 4"),
    ("length below 12", lambda s, i, e: s + i + put(e[0], 4, "<I", 8) + e[1],
     r"byte offset {at}: corrupt capture: pcapng block length 8 is not a multiple of 4 or "
     r"below 12"),
    ("length past the file", lambda s, i, e: s + i + put(e[0], 4, "<I", 60 << 20) + e[1],
     r"byte offset {at}: truncated capture: the record at byte offset {at} needs 62914560 "
     r"bytes but the file ends after"),
    ("length over 64 MiB", lambda s, i, e: s + i + put(e[0], 4, "<I", 0xFFFFFFF0),
     r"byte offset {at}: corrupt capture: pcapng block length 4294967280 exceeds 64 MiB"),
    ("trailing length", lambda s, i, e: s + i + e[0][:-4] + b"\0\0\0\0" + e[1],
     r"byte offset {at}: corrupt capture: pcapng block length \d+ does not match its "
     r"trailing copy"),
    ("section header length 0", lambda s, i, e: put(s, 4, "<I", 0) + i + e[0],
     r"byte offset 0: corrupt capture: pcapng section header length 0"),
    ("section header length 24", lambda s, i, e: put(s, 4, "<I", 24) + i + e[0],
     r"byte offset 0: corrupt capture: pcapng section header length 24 is not a multiple of "
     r"4 or below 28"),
    ("section version 2", lambda s, i, e: put(s, 12, "<H", 2) + i + e[0],
     r"byte offset 0: corrupt capture: pcapng section version 2.0; only 1.x is defined"),
    ("byte-order magic", lambda s, i, e: put(s, 8, "<I", 0) + i + e[0],
     r"byte offset 0: corrupt capture: bad pcapng byte-order magic 00000000"),
    ("interface block missing", lambda s, i, e: s + e[0],
     r"byte offset {shb}: corrupt capture: pcapng packet block before any interface "
     r"description block"),
    ("interface block missing, simple packet", lambda s, i, e: s + ng_spb(FR),
     r"byte offset {shb}: corrupt capture: pcapng packet block before any interface"),
    ("interface 7 of 1", lambda s, i, e: s + i + ng_epb(7, 1, FR),
     r"byte offset {at}: corrupt capture: pcapng packet block names interface 7"),
    ("packet length over its block", lambda s, i, e: s + i + put(e[0], 20, "<I", 5000),
     r"byte offset {at}: corrupt capture: pcapng packet length 5000 overruns its block"),
    ("captured length over MAXIMUM_SNAPLEN",
     lambda s, i, e: s + i + ng_epb(0, 1, FR + bytes(MAXIMUM_SNAPLEN)),
     r"byte offset {at}: corrupt capture: record length 262204 exceeds the 262144-byte"),
    ("interface block cut", lambda s, i, e: s + ng_block(1, b"\x01\x00"),
     r"byte offset {shb}: corrupt capture: pcapng interface block shorter than 20 bytes"),
    ("unknown link type", lambda s, i, e: s + ng_idb(4242) + e[0],
     r"no TCP or UDP packet .*\(1 unsupported link type\)"),
    ("zero-length", lambda s, i, e: b"", r"byte offset 0: truncated capture: 0 bytes"),
])
def test_mutated_pcapng_files(tmp_path, capsys, name, build, pattern):
    shb, idb, epbs = _ng()
    p = tmp_path / "m.pcapng"
    p.write_bytes(build(shb, idb, epbs))
    tracemalloc.start()
    try:
        refused(p, pattern.format(at=len(shb + idb), shb=len(shb)))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 16 << 20  # a block length is not an allocation: the file must hold it
    assert check_cli(*cli(capsys, p)) == "refused"


def test_pcapng_unknown_link_type_on_one_interface_skips_only_its_packets(tmp_path):
    shb = ng_shb()
    p = tmp_path / "two.pcapng"
    p.write_bytes(shb + ng_idb(4242) + ng_idb(1) + ng_epb(0, 1, FR) + ng_epb(1, 2, FR)
                  + ng_epb(0, 3, FR2))
    cap = open_capture(p)
    assert cap.packets == 1 and cap.skipped == {"unsupported link type": 2}
    assert cap.linktypes == [1, 4242]
    consistent(cap)


def test_many_interface_blocks_cost_linear_time_and_are_bounded(tmp_path):
    shb = ng_shb()
    p = tmp_path / "idbs.pcapng"
    p.write_bytes(shb + ng_idb(1) * 20000 + ng_epb(19999, 5, FR))
    cap = open_capture(p)
    assert cap.packets == 1
    p.write_bytes(shb + ng_idb(1) * 70000 + ng_epb(0, 5, FR))
    at = len(shb) + 65535 * len(ng_idb(1))  # the 65537th section or interface block
    refused(p, rf"byte offset {at}: corrupt capture: more than 65536 pcapng section and "
               r"interface blocks")


# ------------------------------------------------------------------------- the file itself


def test_only_regular_files_of_at_most_4_gib(tmp_path, capsys):
    refused(tmp_path / "nope.pcap", r"nope.pcap: no such capture file")
    refused(tmp_path, r": is a directory; give a pcap or pcapng file")
    refused("/dev/zero", r"^/dev/zero: not a regular file \(a device or a pipe\)")
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)  # nobody writes: an open without O_NONBLOCK would wait forever
    refused(fifo, r"fifo: not a regular file")
    big = tmp_path / "big.pcap"
    good = write_pcap(tmp_path / "g.pcap", [(0, FR)]).read_bytes()
    with open(big, "wb") as fh:  # sparse: no disk used
        fh.write(good)
        fh.truncate((4 << 30) + 1)
    refused(big, r"big.pcap: 4,294,967,297 bytes, more than a capture may have \(4 GiB\)")
    for path in ("/dev/zero", fifo, big):
        assert check_cli(*cli(capsys, path)) == "refused"


def test_a_file_changed_after_the_scan_is_refused_not_replayed(tmp_path):
    p = write_pcap(tmp_path / "c.pcap", [(0, FR), (0.001, FR)])
    cap = open_capture(p)
    with open(p, "ab") as fh:  # a third record with a new flow
        fh.write(struct.pack("<IIII", 0, 2000, len(FR2), len(FR2)) + FR2)
    with pytest.raises(UsageError, match=r"c.pcap: byte offset 0: the file changed since it "
                                         r"was scanned; run again"):
        collect(cap)
    assert open_capture(p).packets == 3


# ------------------------------------------------------------------------- fuzz, via the CLI


def _bases() -> list[tuple[bytes, list[int]]]:
    """Valid small captures and the offsets of their header fields (u32 each)."""
    frames = [fr for fr, _ in FRAMES]
    out = []
    for big, nanos in ((False, False), (True, True)):
        recs = [(1.5 + 0.0003 * i, fr) for i, fr in enumerate(frames[:6])]
        data = write_pcap_bytes(recs, big=big, nanos=nanos)
        offs, at = [16, 20], 24
        for _, fr in recs:
            offs += [at, at + 4, at + 8, at + 12]
            at += 16 + len(fr)
        out.append((data, offs))
    blocks = [ng_shb(), ng_idb(1, tsresol=9), ng_idb(101, tsresol=0x80 | 20, tsoffset=3),
              ng_epb(0, 5_000, frames[0]), ng_spb(frames[1]), ng_block(4, bytes(8)),
              ng_epb(1, 1 << 21, ipv4(*V4A, 17, udp(7, 8, 30))), ng_epb(0, 9_000, frames[4]),
              ng_epb(0, 7_000, frames[2])]
    data, offs, at = b"".join(blocks), [], 0
    for b in blocks:
        offs += [at, at + 4, at + len(b) - 4] + [at + k for k in range(8, min(len(b) - 4, 40), 4)]
        at += len(b)
    out.append((data, offs))
    return out


def write_pcap_bytes(recs, **kw) -> bytes:
    with tempfile.TemporaryDirectory() as d:
        return write_pcap(Path(d) / "b.pcap", recs, **kw).read_bytes()


BASES = _bases()
EXTREMES = [0, 1, 3, 11, 12, 16, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF, 0xFFFFFFFC, 65535, 65536,
            MAXIMUM_SNAPLEN, MAXIMUM_SNAPLEN + 1, GSO_MAX_SIZE, GSO_MAX_SIZE + 1, 999_999,
            1_000_000, 999_999_999, 1_000_000_000, 0x0A0D0D0A, 0x1A2B3C4D]

_mutation = st.one_of(
    st.tuples(st.just("flip"), st.integers(0, 1 << 20), st.integers(0, 7)),
    st.tuples(st.just("byte"), st.integers(0, 1 << 20), st.integers(0, 255)),
    st.tuples(st.just("cut"), st.integers(0, 1 << 20), st.just(0)),
    st.tuples(st.just("splice"), st.integers(0, 1 << 20), st.integers(0, 1 << 20)),
    st.tuples(st.just("field"), st.integers(0, 1 << 20), st.sampled_from(EXTREMES)),
    st.tuples(st.just("field"), st.integers(0, 1 << 20), st.integers(0, 0xFFFFFFFF)),
)


def mutate(base: int, muts: list[tuple[str, int, int]]) -> bytes:
    data, offs = BASES[base]
    b = bytearray(data)
    big = data[:4] in (b"\xa1\xb2\xc3\xd4", b"\xa1\xb2\x3c\x4d")
    for kind, where, arg in muts:
        if not b:
            break
        i = where % len(b)
        if kind == "flip":
            b[i] ^= 1 << arg
        elif kind == "byte":
            b[i] = arg
        elif kind == "cut":
            del b[i:]
        elif kind == "splice":  # a piece of another capture at i
            other = BASES[arg % len(BASES)][0]
            j = arg % len(other)
            b[i:i] = other[j:j + 1 + arg % 64]
        else:  # a header field, in the file's byte order, set to an extreme value
            off = offs[where % len(offs)]
            if off + 4 <= len(b):
                struct.pack_into(">I" if big else "<I", b, off, arg)
    return bytes(b)


OUTCOMES: dict[str, int] = {}


@settings(max_examples=150, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture,
                                 HealthCheck.too_slow])
@given(base=st.integers(0, len(BASES) - 1),
       muts=st.lists(_mutation, min_size=1, max_size=4),
       allow=st.booleans(),
       speedup=st.sampled_from([None, "1e-6", "0.37", "1e6"]))
def _fuzz_one(path, capsys, base, muts, allow, speedup):
    path.write_bytes(mutate(base, muts))
    extra = (["--allow-truncated"] if allow else []) + (
        ["--speedup", speedup] if speedup else [])
    outcome = check_cli(*cli(capsys, path, *extra))
    OUTCOMES[outcome] = OUTCOMES.get(outcome, 0) + 1


def test_fuzz_mutated_captures_through_rxlab_run(tmp_path, capsys):
    """Bit flips, byte overwrites, cuts, splices and extreme header fields: each case ends
    in exit 0 with strict JSON that conserves packets, or exit 2 with one line."""
    for data, _ in BASES:  # the bases themselves replay
        p = tmp_path / "base.cap"
        p.write_bytes(data)
        assert check_cli(*cli(capsys, p)) == "replayed"
    OUTCOMES.clear()
    _fuzz_one(tmp_path / "fuzz.cap", capsys)
    total = sum(OUTCOMES.values())
    with capsys.disabled():
        print(f"\ncapture fuzz: {total} cases, {OUTCOMES}")
    assert total >= 100 and OUTCOMES.get("replayed", 0) >= 10 and OUTCOMES.get("refused", 0) >= 10
