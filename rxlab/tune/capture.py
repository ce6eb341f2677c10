"""Write a scenario's generated traffic as a pcap file (what a capture of it would hold).

Classic pcap with nanosecond timestamps (magic 0xa1b23c4d), link type Ethernet. Each
record keeps the headers only (Ethernet, IPv4, UDP or TCP: 42 or 54 bytes, the file's
snap length) with the frame's original length, the wire length without the 4-byte FCS,
which is what ``rxlab.capture.pcap`` reads back as the frame size. IPv4 flows only.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from rxlab.errors import UsageError

SNAP = 54


def _headers(fl) -> np.ndarray:
    """(flows, 54) header bytes per flow (a UDP flow uses the first 42)."""
    n = len(fl)
    h = np.zeros((n, SNAP), np.uint8)
    h[:, 0:6] = [0x02, 0, 0, 0, 0, 1]
    h[:, 6:12] = [0x02, 0, 0, 0, 0, 2]
    h[:, 12:14] = [0x08, 0x00]
    h[:, 14] = 0x45
    h[:, 22] = 64  # TTL
    h[:, 23] = fl.proto
    for col, a in ((26, fl.src_v4), (30, fl.dst_v4)):
        h[:, col:col + 4] = np.asarray(a, ">u4").view(np.uint8).reshape(n, 4)
    h[:, 34:36] = np.asarray(fl.sport, ">u2").view(np.uint8).reshape(n, 2)
    h[:, 36:38] = np.asarray(fl.dport, ">u2").view(np.uint8).reshape(n, 2)
    tcp = fl.proto == 6
    h[tcp, 46] = 0x50  # data offset 5 words
    h[tcp, 47] = 0x10  # ACK
    return h


def write_pcap(sc, path: str | Path) -> dict:
    """Write ``sc``'s traffic (its seed, its duration) to ``path``; returns counts."""
    from rxlab.traffic.flows import build_flows
    from rxlab.traffic.stream import PacketStream

    if sc.traffic.pcap is not None:
        raise UsageError("traffic.pcap: the scenario already replays a capture")
    fl = build_flows(sc.traffic, sc.seed)
    if fl.is_v6.any():
        raise UsageError("traffic.groups: writing a capture supports IPv4 groups only")
    hdr = _headers(fl)
    caplen = np.where(fl.proto == 6, 54, 42).astype(np.int64)
    n = 0
    with open(path, "wb") as f:
        f.write(np.array([0xA1B23C4D], "<u4").tobytes()
                + np.array([2, 4], "<u2").tobytes()
                + np.array([0, 0, SNAP, 1], "<u4").tobytes())
        for ch in PacketStream(sc.traffic, fl, sc.seed, sc.duration).chunks(1 << 16):
            k = len(ch)
            cl = caplen[ch.flow]
            ip_len = ch.size.astype(np.int64) - 18
            rec = np.zeros((k, 16 + SNAP), np.uint8)
            ts = ch.t_ns.astype(np.int64)
            rec[:, 0:16] = np.stack([ts // 10**9, ts % 10**9, cl, ch.size - 4],
                                    axis=1).astype("<u4").view(np.uint8).reshape(k, 16)
            rec[:, 16:] = hdr[ch.flow]
            rec[:, 16 + 16:16 + 18] = ip_len.astype(">u2").view(np.uint8).reshape(k, 2)
            udp = fl.proto[ch.flow] == 17
            rec[udp, 16 + 38:16 + 40] = (ip_len[udp] - 20).astype(">u2").view(
                np.uint8).reshape(-1, 2)
            keep = np.arange(16 + SNAP)[None, :] < (16 + cl)[:, None]
            f.write(rec[keep].tobytes())
            n += k
    return {"packets": n, "flows": len(fl), "file": str(path)}
