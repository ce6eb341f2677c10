"""The flow table: one row per flow of every group, as numpy columns.

Each group draws from its own ``SeedSequence([seed, 1, group])`` and each column from its
own child of that, so editing one group (or one column's form) leaves the other flows
unchanged.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

import numpy as np

from rxlab.traffic.spec import AddrSpec, GroupSpec, PortSpec, TrafficSpec


@dataclass(frozen=True, eq=False)
class FlowTable:
    src_v4: np.ndarray  # uint32 host-integer address; 0 on v6 rows
    dst_v4: np.ndarray
    src_v6: np.ndarray  # (n, 16) uint8 network-order bytes; zeros on v4 rows
    dst_v6: np.ndarray
    sport: np.ndarray  # uint16
    dport: np.ndarray
    proto: np.ndarray  # uint8: 6 tcp, 17 udp
    is_v6: np.ndarray  # bool
    group: np.ndarray  # int16 group index
    weight: np.ndarray  # float64 share of its group's packets (sums to 1 per group)
    rate_pps: np.ndarray  # float64 mean rate: group pps * weight * onoff duty cycle
    group_names: list[str]
    group_first: np.ndarray  # int64 first row of each group

    def __len__(self) -> int:
        return self.sport.size

    def rows(self, g: int) -> slice:
        """Rows of group ``g``."""
        end = self.group_first[g + 1] if g + 1 < len(self.group_names) else len(self)
        return slice(int(self.group_first[g]), int(end))

    def describe(self, i: int) -> str:
        """E.g. ``udp 10.0.0.4:1234 -> 192.168.0.1:9000`` (v6 addresses in brackets)."""
        if self.is_v6[i]:
            src = f"[{ipaddress.IPv6Address(self.src_v6[i].tobytes())}]"
            dst = f"[{ipaddress.IPv6Address(self.dst_v6[i].tobytes())}]"
        else:
            src = str(ipaddress.IPv4Address(int(self.src_v4[i])))
            dst = str(ipaddress.IPv4Address(int(self.dst_v4[i])))
        proto = {6: "tcp", 17: "udp"}.get(int(self.proto[i]), str(self.proto[i]))
        return f"{proto} {src}:{self.sport[i]} -> {dst}:{self.dport[i]}"


def _v4(a: AddrSpec, n: int, rng: np.random.Generator) -> np.ndarray:
    if a.cidr is not None:
        net = ipaddress.IPv4Network(a.cidr)
        # Random host bits over the network bits: uniform over the CIDR.
        r = rng.integers(0, 1 << 32, n, dtype=np.uint32)
        return (r & np.uint32(int(net.hostmask))) | np.uint32(int(net.network_address))
    vals = np.array([int(ipaddress.IPv4Address(x)) for x in a.list_ or [a.addr]], np.uint32)
    return vals[np.arange(n) % vals.size]


def _v6(a: AddrSpec, n: int, rng: np.random.Generator) -> np.ndarray:
    def raw(x: ipaddress.IPv6Address) -> np.ndarray:
        return np.frombuffer(x.packed, np.uint8)

    if a.cidr is not None:
        net = ipaddress.IPv6Network(a.cidr)
        r = rng.integers(0, 256, (n, 16), dtype=np.uint8)
        return (r & raw(net.hostmask)) | raw(net.network_address)
    vals = np.stack([raw(ipaddress.IPv6Address(x)) for x in a.list_ or [a.addr]])
    return vals[np.arange(n) % len(vals)]


def _ports(p: PortSpec, n: int, rng: np.random.Generator) -> np.ndarray:
    if p.value is not None:
        return np.full(n, p.value, np.uint16)
    if p.range is not None:
        return rng.integers(p.range[0], p.range[1] + 1, n).astype(np.uint16)
    return (p.sequential + np.arange(n)).astype(np.uint16)


def group_weights(g: GroupSpec, rng: np.random.Generator) -> np.ndarray:
    """Per-flow share of the group's packets (float64, sums to 1)."""
    n = g.flows
    if g.rate.per_flow == "zipf":
        ranks = rng.permutation(n) + 1.0  # shuffled so rank 1 is not always flow 0
        w = ranks**-g.rate.zipf_s
    elif g.rate.per_flow == "explicit":
        w = np.asarray(g.rate.weights, np.float64)
    else:
        w = np.ones(n)
    return w / w.sum()


def _group(g: GroupSpec, gi: int, seed: int) -> dict[str, np.ndarray]:
    n = g.flows
    r_src, r_dst, r_sp, r_dp, r_w = (
        np.random.default_rng(s) for s in np.random.SeedSequence([seed, 1, gi]).spawn(5)
    )
    zero4, zero6 = np.zeros(n, np.uint32), np.zeros((n, 16), np.uint8)
    v6 = g.ip == 6
    w = group_weights(g, r_w)
    return dict(
        src_v4=zero4 if v6 else _v4(g.src, n, r_src),
        dst_v4=zero4 if v6 else _v4(g.dst, n, r_dst),
        src_v6=_v6(g.src, n, r_src) if v6 else zero6,
        dst_v6=_v6(g.dst, n, r_dst) if v6 else zero6,
        sport=_ports(g.sport, n, r_sp),
        dport=_ports(g.dport, n, r_dp),
        proto=np.full(n, g.proto_num, np.uint8),
        is_v6=np.full(n, v6),
        group=np.full(n, gi, np.int16),
        weight=w,
        rate_pps=g.rate.pps * g.arrivals.duty * w,
    )


def build_flows(spec: TrafficSpec, seed: int) -> FlowTable:
    """All flows, group order then flow order; deterministic from (seed, group index)."""
    parts = [_group(g, gi, seed) for gi, g in enumerate(spec.groups)]
    cols = {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
    for a in cols.values():
        a.setflags(write=False)  # the table is shared by every stage; keep it immutable
    first = np.cumsum([0] + [g.flows for g in spec.groups[:-1]]).astype(np.int64)
    first.setflags(write=False)
    return FlowTable(**cols, group_names=[g.name for g in spec.groups], group_first=first)
