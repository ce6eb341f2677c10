"""pcap / pcapng replay: hand-built captures (every header form, pcapng blocks, corruption
and truncation at known offsets) and a capture written by tcpdump between two network
namespaces (root only; skipped with the reason otherwise)."""

from __future__ import annotations

import ipaddress
import json
import re
import shutil
import struct
import subprocess
import sys
import time

import numpy as np
import pytest

from rxlab.capture.pcap import PcapStream, open_capture
from rxlab.errors import UsageError

# ----------------------------------------------------------------------------- frames

MAC = b"\x02\x00\x00\x00\x00\x01\x02\x00\x00\x00\x00\x02"


def ipv4(src, dst, proto, payload, frag=0x4000):
    total = 20 + len(payload)
    return struct.pack(">BBHHHBBH4s4s", 0x45, 0, total, 1, frag, 64, proto, 0,
                       ipaddress.IPv4Address(src).packed,
                       ipaddress.IPv4Address(dst).packed) + payload


def ipv6(src, dst, nh, payload, ext=b""):
    return struct.pack(">IHBB16s16s", 0x60000000, len(ext) + len(payload), nh, 64,
                       ipaddress.IPv6Address(src).packed,
                       ipaddress.IPv6Address(dst).packed) + ext + payload


def udp(sport, dport, n):
    return struct.pack(">HHHH", sport, dport, 8 + n, 0) + bytes(n)


def tcp(sport, dport, n):
    return struct.pack(">HHIIBBHHH", sport, dport, 1, 0, 0x50, 0x18, 65535, 0, 0) + bytes(n)


def eth(l3, ethertype=0x0800, vlans=()):
    tags = b"".join(struct.pack(">HH", tpid, vid) for tpid, vid in vlans)
    return MAC + tags + struct.pack(">H", ethertype) + l3


def frame_bytes(fr: bytes) -> int:
    """What the replay reports: wire length + 4 (FCS), at least 64."""
    return max(len(fr) + 4, 64)


# one frame of every kind; (frame, flow key or None if skipped)
V4A = ("10.0.0.1", "10.0.0.2")
FRAMES = [
    (eth(ipv4(*V4A, 17, udp(1000, 9000, 18))), ("udp", "10.0.0.1", 1000, "10.0.0.2", 9000)),
    (eth(ipv4(*V4A, 6, tcp(1001, 80, 100))), ("tcp", "10.0.0.1", 1001, "10.0.0.2", 80)),
    (eth(ipv4(*V4A, 17, udp(1000, 9000, 500)), vlans=[(0x8100, 5)]),
     ("udp", "10.0.0.1", 1000, "10.0.0.2", 9000)),
    (eth(ipv4(*V4A, 17, udp(1002, 9000, 10)), vlans=[(0x88A8, 7), (0x8100, 5)]),
     ("udp", "10.0.0.1", 1002, "10.0.0.2", 9000)),
    (eth(ipv6("fd00::1", "fd00::2", 17, udp(2000, 9000, 64)), 0x86DD),
     ("udp", "fd00::1", 2000, "fd00::2", 9000)),
    # IPv6 with a hop-by-hop header before TCP
    (eth(ipv6("fd00::1", "fd00::2", 0, tcp(2001, 443, 0), ext=bytes([6, 0]) + bytes(6)), 0x86DD),
     ("tcp", "fd00::1", 2001, "fd00::2", 443)),
    (eth(b"\x00\x01\x08\x00\x06\x04\x00\x01" + bytes(20), 0x0806), None),  # ARP
    (eth(ipv4(*V4A, 1, bytes(16))), None),  # ICMP
    (eth(ipv4(*V4A, 17, udp(1000, 9000, 100), frag=0x2000)), None),  # first fragment
    (eth(ipv6("fd00::1", "fd00::2", 44, udp(2000, 9000, 8), ext=bytes([17, 0, 0, 1]) + bytes(4)),
         0x86DD), None),  # IPv6 fragment header
]


def _v(text):
    return ipaddress.ip_address(text)


def describe(flows, i):
    return flows.describe(i)


def key_text(k):
    proto, s, sp, d, dp = k
    if ":" in s:
        return f"{proto} [{s}]:{sp} -> [{d}]:{dp}"
    return f"{proto} {s}:{sp} -> {d}:{dp}"


# ----------------------------------------------------------------------------- writers


def write_pcap(path, records, *, linktype=1, nanos=False, big=False, snaplen=262144):
    """records: (t_seconds, frame[, origlen])."""
    o = ">" if big else "<"
    magic = 0xA1B23C4D if nanos else 0xA1B2C3D4
    out = [struct.pack(o + "IHHiIII", magic, 2, 4, 0, 0, snaplen, linktype)]
    for rec in records:
        t, fr = rec[0], rec[1]
        orig = rec[2] if len(rec) > 2 else len(fr)
        sec = int(t)
        frac = round((t - sec) * (1e9 if nanos else 1e6))
        out.append(struct.pack(o + "IIII", sec, frac, len(fr), orig) + fr)
    path.write_bytes(b"".join(out))
    return path


def _pad(b):
    return b + bytes(-len(b) % 4)


def ng_block(btype, body, big=False):
    o = ">" if big else "<"
    body = _pad(body)
    n = 12 + len(body)
    return struct.pack(o + "II", btype, n) + body + struct.pack(o + "I", n)


def ng_shb(big=False):
    o = ">" if big else "<"
    return ng_block(0x0A0D0D0A, struct.pack(o + "IHHq", 0x1A2B3C4D, 1, 0, -1), big)


def ng_idb(linktype, tsresol=None, big=False, tsoffset=None):
    o = ">" if big else "<"
    opts = b""
    if tsresol is not None:
        opts += struct.pack(o + "HH", 9, 1) + _pad(bytes([tsresol]))
    if tsoffset is not None:
        opts += struct.pack(o + "HHq", 14, 8, tsoffset)
    if opts:
        opts += struct.pack(o + "HH", 0, 0)
    return ng_block(1, struct.pack(o + "HHI", linktype, 0, 0) + opts, big)


def ng_epb(iface, ts_units, frame, big=False, orig=None):
    o = ">" if big else "<"
    return ng_block(6, struct.pack(o + "IIIII", iface, ts_units >> 32, ts_units & 0xFFFFFFFF,
                                   len(frame), orig or len(frame)) + frame, big)


def ng_spb(frame, big=False):
    o = ">" if big else "<"
    return ng_block(3, struct.pack(o + "I", len(frame)) + frame, big)


def collect(cap_or_stream, chunk=1 << 16):
    cs = list(cap_or_stream.chunks(chunk))
    if not cs:
        return np.zeros(0, np.int64), np.zeros(0, np.int32), np.zeros(0, np.int32)
    return tuple(np.concatenate([getattr(c, f) for c in cs]) for f in ("t_ns", "flow", "size"))


# ----------------------------------------------------------------------------- synthetic


@pytest.fixture(scope="module")
def mixed(tmp_path_factory):
    path = tmp_path_factory.mktemp("cap") / "mixed.pcap"
    recs = [(100.0 + 0.001 * i, fr) for i, (fr, _) in enumerate(FRAMES)]
    return write_pcap(path, recs)


def test_pcap_every_header_form_flows_sizes_and_skips(mixed):
    cap = open_capture(mixed)
    offered = [(fr, k) for fr, k in FRAMES if k is not None]
    keys = list(dict.fromkeys(k for _, k in offered))
    assert [cap.flows.describe(i) for i in range(len(cap.flows))] == [key_text(k) for k in keys]
    t, f, s = collect(cap)
    assert f.tolist() == [keys.index(k) for _, k in offered]
    assert s.tolist() == [frame_bytes(fr) for fr, _ in offered]
    # times relative to the first offered packet, 1 ms apart in record order
    rec_index = [i for i, (_, k) in enumerate(FRAMES) if k is not None]
    assert t.tolist() == [1_000_000 * i for i in rec_index]
    assert cap.packets == len(offered) and cap.records == len(FRAMES)
    assert cap.skipped == {"not IPv4/IPv6": 1, "not TCP/UDP": 1, "IP fragment": 2}
    assert cap.flows.is_v6.tolist() == [False, False, False, True, True]
    assert cap.flows.proto.tolist() == [17, 6, 17, 17, 6]
    assert int(cap.flows.src_v4[0]) == int(_v("10.0.0.1"))
    assert bytes(cap.flows.dst_v6[3]) == _v("fd00::2").packed
    assert cap.flows.weight.sum() == pytest.approx(1.0)
    assert cap.flows.group_names == ["pcap"] and cap.flows.group.tolist() == [0] * 5


def test_chunks_are_exact_and_speedup_divides_time(mixed):
    cap = open_capture(mixed)
    ref = collect(cap)
    sizes = [len(c) for c in cap.chunks(4)]
    assert sizes == [4, 2]
    got = collect(cap, 4)
    for a, b in zip(ref, got, strict=True):
        assert np.array_equal(a, b)
    fast = open_capture(mixed, speedup=4)
    t4, f4, _ = collect(fast)
    assert t4.tolist() == [x // 4 for x in ref[0].tolist()] and np.array_equal(f4, ref[1])
    assert fast.duration_ns == ref[0][-1] // 4 + 1


def test_pcapstream_has_the_packetstream_interface(mixed):
    cap = open_capture(mixed)
    st = PcapStream(cap)
    assert st.flows is cap.flows and st.expected_packets() == cap.packets
    t, _, _ = collect(st, 3)
    assert t.size == cap.packets
    cut = PcapStream(cap, duration_s=0.0035)  # packets at 0, 1, ..., 5 ms: 4 before 3.5 ms
    assert cut.expected_packets() == 4
    assert collect(cut)[0].tolist() == [0, 1_000_000, 2_000_000, 3_000_000]


def test_pcap_variants_nanosecond_big_endian_raw_ip_and_cooked(tmp_path):
    fr = ipv4(*V4A, 17, udp(5, 6, 100))
    p = write_pcap(tmp_path / "raw.pcap", [(1.000000001, fr), (1.000000003, fr)],
                   linktype=101, nanos=True, big=True)
    cap = open_capture(p)
    t, f, s = collect(cap)
    assert t.tolist() == [0, 2] and s.tolist() == [len(fr) + 18] * 2
    assert cap.format == "pcap-ns" and cap.linktypes == [101]
    sll = struct.pack(">HHH8sH", 0, 1, 6, bytes(8), 0x0800) + fr  # Linux cooked v1
    cap = open_capture(write_pcap(tmp_path / "sll.pcap", [(0, sll)], linktype=113))
    assert collect(cap)[2].tolist() == [len(fr) + 18]
    # a snap length that cuts the ports: skipped, the wire length still counts elsewhere
    cut = eth(ipv4(*V4A, 17, udp(1, 2, 50)))
    cap_path = write_pcap(tmp_path / "snap.pcap",
                          [(0, cut[:36], len(cut)), (0, cut[:60], len(cut))])
    cap = open_capture(cap_path)
    assert cap.skipped == {"headers cut by the snap length": 1}
    assert collect(cap)[2].tolist() == [len(cut) + 4]


def test_pcapng_sections_interfaces_resolutions_and_block_kinds(tmp_path):
    fr4 = eth(ipv4(*V4A, 17, udp(1000, 9000, 18)))
    fr6 = ipv6("fd00::1", "fd00::2", 17, udp(2000, 9000, 30))
    blocks = [
        ng_shb(big=True),
        ng_idb(1, big=True),  # microseconds (default)
        ng_idb(101, tsresol=9, big=True),  # nanoseconds, raw IP
        ng_epb(0, 5_000_000, fr4, big=True),  # 5 s
        ng_block(4, b"\x00" * 8, big=True),  # name resolution block: skipped
        ng_epb(1, 5_000_000_250, fr6, big=True),  # 5 s + 250 ns
        ng_spb(fr4, big=True),  # no timestamp: the previous one
        ng_block(5, struct.pack(">III", 0, 0, 0), big=True),  # interface statistics
        ng_shb(big=False),  # a new little-endian section, interfaces restart
        ng_idb(1, tsresol=0x80 | 20, tsoffset=1),  # 2^-20 s units, +1 s offset
        ng_epb(0, 4 << 20, fr4),  # 4 s + 1 s offset = 5 s
        ng_epb(0, (4 << 20) + (1 << 19), fr4),  # + 0.5 s
    ]
    p = tmp_path / "multi.pcapng"
    p.write_bytes(b"".join(blocks))
    cap = open_capture(p)
    t, f, s = collect(cap)
    assert cap.format == "pcapng" and cap.linktypes == [1, 101]
    assert t.tolist() == [0, 250, 250, 250, 500_000_000]
    assert f.tolist() == [0, 1, 0, 0, 0]
    assert s.tolist() == [frame_bytes(fr4), len(fr6) + 18] + [frame_bytes(fr4)] * 3
    assert cap.reordered == 1  # the second section's first packet is 250 ns "early"


CORRUPT_CASES = {
    "cut record data": (lambda b: b[:-7],
                        r"truncated capture: the record at byte offset 24 needs "),
    "cut record header": (lambda b: b[:24 + 10], r"byte offset 24: truncated"),
    "header only part": (lambda b: b[:20], r"byte offset 0: truncated capture"),
    "huge caplen": (lambda b: b[:32] + struct.pack("<I", 10**7) + b[36:],
                    r"byte offset 24: corrupt capture: record length 10000000"),
    "not a capture": (lambda b: b"hello world, this is not a capture", r"not a pcap or pcapng"),
}


@pytest.mark.parametrize("case", list(CORRUPT_CASES))
def test_bad_pcap_names_the_byte_offset(tmp_path, case):
    fr = eth(ipv4(*V4A, 17, udp(1, 2, 30)))
    good = write_pcap(tmp_path / "g.pcap", [(0, fr)]).read_bytes()
    mangle, pattern = CORRUPT_CASES[case]
    p = tmp_path / "bad.pcap"
    p.write_bytes(mangle(good))
    with pytest.raises(UsageError, match=pattern) as ei:
        open_capture(p)
    assert "\n" not in str(ei.value)


def test_allow_truncated_replays_the_intact_prefix(tmp_path):
    fr = eth(ipv4(*V4A, 17, udp(1, 2, 30)))
    data = write_pcap(tmp_path / "g.pcap", [(i * 0.001, fr) for i in range(5)]).read_bytes()
    rec = 16 + len(fr)
    p = tmp_path / "cut.pcap"
    p.write_bytes(data[:24 + 3 * rec + 9])  # three whole records, then 9 bytes
    with pytest.raises(UsageError, match=rf"byte offset {24 + 3 * rec}: truncated"):
        open_capture(p)
    cap = open_capture(p, allow_truncated=True)
    assert cap.packets == 3 and cap.truncated_at == 24 + 3 * rec
    assert "replaying the intact prefix" in cap.notice and str(24 + 3 * rec) in cap.notice
    assert collect(cap)[0].tolist() == [0, 1_000_000, 2_000_000]
    # corruption in the middle: same treatment
    bad = bytearray(data)
    struct.pack_into("<I", bad, 24 + 2 * rec + 8, 1 << 30)
    p.write_bytes(bytes(bad))
    with pytest.raises(UsageError, match=rf"byte offset {24 + 2 * rec}: corrupt"):
        open_capture(p)
    assert open_capture(p, allow_truncated=True).packets == 2


def test_bad_pcapng_blocks_name_the_byte_offset(tmp_path):
    fr = eth(ipv4(*V4A, 17, udp(1, 2, 30)))
    shb, idb, epb = ng_shb(), ng_idb(1), ng_epb(0, 1, fr)
    at = len(shb) + len(idb)
    cases = {
        "trailer": (shb + idb + epb[:-4] + b"\x00\x00\x00\x00", f"byte offset {at}: corrupt "
                    "capture: pcapng block length"),
        "cut": (shb + idb + epb[:-10], f"byte offset {at}: truncated"),
        "iface": (shb + idb + ng_epb(3, 1, fr), f"byte offset {at}: corrupt capture: pcapng "
                  "packet block names interface 3"),
        "odd length": (shb + idb + struct.pack("<II", 6, 30) + bytes(22),
                       f"byte offset {at}: corrupt capture: pcapng block length 30"),
        "bom": (shb[:8] + b"\x00\x00\x00\x00" + shb[12:] + idb, "byte offset 0: corrupt "
                "capture: bad pcapng byte-order magic"),
    }
    for name, (data, msg) in cases.items():
        p = tmp_path / f"{name}.pcapng"
        p.write_bytes(data)
        with pytest.raises(UsageError, match=re.escape(msg)):
            open_capture(p)
    p = tmp_path / "ok_then_cut.pcapng"
    p.write_bytes(shb + idb + epb + epb[:13])
    cap = open_capture(p, allow_truncated=True)
    assert cap.packets == 1 and cap.truncated_at == at + len(epb)


def test_usage_errors(tmp_path, mixed):
    with pytest.raises(UsageError, match="no such capture file"):
        open_capture(tmp_path / "nope.pcap")
    with pytest.raises(UsageError, match=r"speedup: must be >= 1e-06 and <= 1e\+06 .*got 0"):
        open_capture(mixed, speedup=0)
    only_arp = write_pcap(tmp_path / "arp.pcap", [(0, FRAMES[6][0])])
    with pytest.raises(UsageError, match=r"no TCP or UDP packet .*1 not IPv4/IPv6"):
        open_capture(only_arp)


def test_many_flows_grow_the_table_and_stream_in_bounded_chunks(tmp_path):
    n = 5000
    recs = [(i * 1e-6, eth(ipv4("10.1.0.1", "10.2.0.2", 17, udp(1024 + i % 3000, 9000, 18))))
            for i in range(n)]
    cap = open_capture(write_pcap(tmp_path / "many.pcap", recs))
    assert len(cap.flows) == 3000 and cap.packets == n
    assert cap.flows.sport[:3].tolist() == [1024, 1025, 1026]
    counts = np.bincount(collect(cap, 777)[1], minlength=3000)
    assert counts.tolist() == [2] * 2000 + [1] * 1000
    assert cap.flows.rate_pps[0] == pytest.approx(2 / (cap.duration_ns / 1e9))


# ----------------------------------------------------------------------------- tcpdump

SENDER = r"""
import json, socket, struct, sys, time
cfg = json.loads(sys.argv[1])
sent = {}
for fam, src, sport, dst, dport, size, count in cfg["udp"]:
    af = socket.AF_INET6 if fam == 6 else socket.AF_INET
    s = socket.socket(af, socket.SOCK_DGRAM)
    s.bind((src, sport))
    for _ in range(count):
        s.sendto(bytes(size), (dst, dport))
        time.sleep(0.0002)
    s.close()
# 802.1Q-tagged frames (this kernel has no vlan devices): AF_PACKET on the veth
raw = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
raw.bind((cfg["dev"], 0))
for vid, src, sport, dst, dport, size, count in cfg["vlan"]:
    body = struct.pack(">HHHH", sport, dport, 8 + size, 0) + bytes(size)
    ip = struct.pack(">BBHHHBBH4s4s", 0x45, 0, 20 + len(body), 0, 0x4000, 64, 17, 0,
                     socket.inet_aton(src), socket.inet_aton(dst))
    frame = b"\xff" * 6 + b"\x02\x00\x00\x00\x00\x07" + struct.pack(">HHH", 0x8100, vid, 0x0800)
    for _ in range(count):
        raw.send(frame + ip + body)
        time.sleep(0.0002)
raw.close()
src, sport, dst, dport, msgs = cfg["tcp"]
c = socket.socket()
c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
c.bind((src, sport))
c.connect((dst, dport))
for _ in range(msgs):
    c.sendall(bytes(100))
    time.sleep(0.002)
c.shutdown(socket.SHUT_WR)
c.recv(10)
c.close()
"""

RECEIVER = r"""
import socket, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], int(sys.argv[2])))
s.listen(1)
print("ready", flush=True)
s.settimeout(20)
c, _ = s.accept()
while c.recv(65536):
    pass
c.close()
"""


def _lab_reason():
    from rxlab.host.lab import unavailable

    why = unavailable()
    if why is None and shutil.which("tcpdump") is None:
        why = "needs tcpdump (apt-get install tcpdump)"
    return why


@pytest.fixture(scope="module")
def real_capture(tmp_path_factory):
    """tcpdump on the receiving veth while UDP (v4, v6, VLAN) and TCP flows are sent."""
    why = _lab_reason()
    if why:
        pytest.skip(why)
    from rxlab.host.lab import Lab

    out = tmp_path_factory.mktemp("tcpdump")
    pcap = out / "veth.pcap"
    with Lab.named("rxcap", queues=1, ipv6=True) as lab:
        udp_flows = [
            [4, lab.ip_tx, 40001, lab.ip_rx, 9000, 64, 30],
            [4, lab.ip_tx, 40002, lab.ip_rx, 9000, 200, 20],
            [6, lab.ip6_tx, 40003, lab.ip6_rx, 9001, 1000, 10],
        ]
        vlan_flows = [[5, "10.232.0.1", 40004, "10.232.0.2", 9002, 18, 15]]
        tcp_flow = [lab.ip_tx, 41000, lab.ip_rx, 9100, 8]
        dump = subprocess.Popen(
            lab.argv(lab.ns_rx, ["tcpdump", "-i", lab.dev_rx, "-w", str(pcap), "-U", "-n",
                                 "-s", "0", "--immediate-mode"]),
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        recv = None
        try:
            line = dump.stderr.readline()  # "listening on ..."
            assert "listening" in line, line
            recv = subprocess.Popen(
                lab.argv(lab.ns_rx, [sys.executable, "-c", RECEIVER, lab.ip_rx, "9100"]),
                stdout=subprocess.PIPE, text=True)
            assert recv.stdout.readline().strip() == "ready"
            cfg = {"udp": udp_flows, "tcp": tcp_flow, "vlan": vlan_flows, "dev": lab.dev_tx}
            lab.run(lab.ns_tx, [sys.executable, "-c", SENDER, json.dumps(cfg)])
            recv.wait(timeout=20)
            time.sleep(0.3)
        finally:
            if recv and recv.poll() is None:
                recv.kill()
            dump.terminate()
            dump.wait(timeout=10)
    # the VLAN flow as _check_replay describes UDP flows: family 4, 4 more header bytes
    return pcap, udp_flows + [[4] + f[1:] for f in vlan_flows], tcp_flow


def _tcpdump_lines(pcap, *filt):
    p = subprocess.run(["tcpdump", "-r", str(pcap), "-nn", "-tt", *filt],
                       capture_output=True, text=True, check=True)
    return p.stdout.splitlines()


def _check_replay(path, udp_flows, tcp_flow, oracle):
    cap = open_capture(path)
    t, f, s = collect(cap, 50)
    fl = cap.flows
    # every packet tcpdump itself reads as TCP/UDP over IPv4/IPv6 (VLAN too) is offered
    offered = _tcpdump_lines(oracle, "tcp or udp or (vlan and (tcp or udp))")
    assert cap.packets == len(offered) == t.size
    assert cap.records == len(_tcpdump_lines(oracle))
    assert sum(cap.skipped.values()) == cap.records - cap.packets
    names = [fl.describe(i) for i in range(len(fl))]
    for fam, src, sport, dst, dport, size, count in udp_flows:
        a, b = (f"[{src}]", f"[{dst}]") if fam == 6 else (src, dst)
        row = names.index(f"udp {a}:{sport} -> {b}:{dport}")
        vlan = 4 if src.startswith("10.232.") else 0
        l3 = (40 if fam == 6 else 20) + 8 + size
        assert (f == row).sum() == count
        assert set(s[f == row].tolist()) == {max(14 + vlan + l3 + 4, 64)}
    src, sport, dst, dport, _ = tcp_flow
    fwd = names.index(f"tcp {src}:{sport} -> {dst}:{dport}")
    back = names.index(f"tcp {dst}:{dport} -> {src}:{sport}")
    n_fwd = len(_tcpdump_lines(oracle, f"tcp and src port {sport}"))
    assert (f == fwd).sum() == n_fwd and (f == back).sum() == len(offered) - n_fwd - sum(
        c for *_, c in udp_flows)
    # timestamps kept: tcpdump's own times of the offered packets, relative to the first
    ts = [round(float(x.split()[0]) * 1e6) for x in offered]
    assert (t // 1000).tolist() == [x - ts[0] for x in ts]
    assert np.all(np.diff(t) >= 0)
    return cap, t


def test_replay_of_a_tcpdump_capture_between_namespaces(real_capture):
    pcap, udp_flows, tcp_flow = real_capture
    cap, t = _check_replay(pcap, udp_flows, tcp_flow, pcap)
    assert cap.format == "pcap" and cap.linktypes == [1]
    fast = open_capture(pcap, speedup=10)
    assert collect(fast)[0].tolist() == (t // 10).tolist()


def test_replay_of_the_same_capture_as_pcapng(real_capture, tmp_path):
    pcap, udp_flows, tcp_flow = real_capture
    if shutil.which("editcap") is None:
        pytest.skip("needs editcap (apt-get install wireshark-common) to write pcapng")
    ng = tmp_path / "veth.pcapng"
    subprocess.run(["editcap", "-F", "pcapng", str(pcap), str(ng)], check=True,
                   capture_output=True)
    assert ng.read_bytes()[:4] == b"\x0a\x0d\x0d\x0a"
    cap, t = _check_replay(ng, udp_flows, tcp_flow, pcap)
    assert cap.format == "pcapng"
    ref = collect(open_capture(pcap))
    for a, b in zip(ref, collect(cap), strict=True):
        assert np.array_equal(a, b)


def test_mangled_captures_give_usage_errors_or_consistent_replays(tmp_path):
    """Random byte flips and cuts: never a crash, and the replay offers what the scan
    counted (the parser was also run this way under NUMBA_BOUNDSCHECK=1)."""
    import random

    fr4 = eth(ipv4(*V4A, 17, udp(1000, 9000, 18)))
    bases = [
        write_pcap(tmp_path / "a.pcap", [(0.001 * i, fr) for i, (fr, _) in enumerate(FRAMES)])
        .read_bytes(),
        b"".join([ng_shb(), ng_idb(1, tsresol=9), ng_epb(0, 5, fr4), ng_spb(fr4),
                  ng_block(4, bytes(8))] + [ng_epb(0, 7, fr) for fr, _ in FRAMES]),
    ]
    rng = random.Random(7)
    p = tmp_path / "x.bin"
    outcomes = set()
    for _ in range(300):
        b = bytearray(rng.choice(bases))
        for _ in range(rng.randint(1, 6)):
            b[rng.randrange(len(b))] = rng.randrange(256)
        if rng.random() < 0.3:
            b = b[:rng.randrange(len(b))]
        p.write_bytes(bytes(b))
        try:
            cap = open_capture(p, allow_truncated=rng.random() < 0.5)
        except UsageError as err:
            assert "\n" not in str(err)
            outcomes.add("error")
            continue
        assert sum(len(c) for c in cap.chunks(7)) == cap.packets
        outcomes.add("replayed")
    assert outcomes == {"error", "replayed"}
