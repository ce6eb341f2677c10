"""Live per-CPU softnet and per-queue packet rates (``rxlab top``).

A ``Sample`` holds ``/proc/net/softnet_stat`` (``rxlab.host.procfs.softnet``, rows keyed
by the CPU column, not line position)
and, per device, ``/sys/class/net/DEV/statistics`` plus the per-queue packet counters of
``ethtool -S`` (``rx_queue_N_packets``, ``rx-N.packets``, ``rxN_packets``; veth:
``rx_queue_N_xdp_packets``), read inside ``--netns`` when given, and /proc/stat for
top's ``%Cpu(s)`` line (rxlab.report.topview). ``rates()`` turns two samples into
per-second rates; softnet counters are u32 and wrap.
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass, field

from rxlab.host import ethtool, procfs
from rxlab.host.netns import in_netns
from rxlab.report.topview import summary_line, top_summary

SOFTNET_FIELDS = ("processed", "dropped", "time_squeeze", "received_rps", "flow_limit_count")
DEV_FIELDS = ("rx_packets", "tx_packets", "rx_dropped", "tx_dropped")
_QSTAT = re.compile(r"^(rx|tx)[_-]?(?:queue[_-])?(\d+)[_.](?:xdp_)?packets$")


@dataclass
class Sample:
    t: float
    softnet: dict[int, dict]  # cpu -> counters
    devices: dict[str, dict] = field(default_factory=dict)  # dev -> {stats, queues}
    stat: dict = field(default_factory=dict)  # /proc/stat cpu rows, USER_HZ ticks


def _devices(names: list[str] | None, with_ethtool: bool) -> dict[str, dict]:
    base = "/sys/class/net"
    out = {}
    for dev in names if names is not None else sorted(os.listdir(base)):
        if dev == "lo" and names is None:
            continue
        st = {}
        for f in DEV_FIELDS:
            try:
                with open(f"{base}/{dev}/statistics/{f}") as fh:
                    st[f] = int(fh.read())
            except (OSError, ValueError):
                st[f] = None
        queues: dict[str, int] = {}
        if with_ethtool and ethtool.have_cmd("ethtool"):
            try:
                for k, v in ethtool.stats(dev).items():
                    m = _QSTAT.match(k)
                    if m:
                        key = f"{m.group(1)}-{int(m.group(2))}"
                        # plain packets win over xdp_packets when a driver has both
                        if key not in queues or "xdp" not in k:
                            queues[key] = v
            except ethtool.EthtoolError:
                pass
        out[dev] = {"stats": st, "queues": queues}
    return out


def sample(netns: str | None = None, devices: list[str] | None = None,
           with_ethtool: bool = True) -> Sample:
    sn = {cpu: {"cpu": cpu, **row} for cpu, row in procfs.softnet().items()}
    devs = in_netns(netns, _devices, devices, with_ethtool)
    with open("/proc/stat") as fh:
        stat = procfs.parse_proc_stat(fh.read())
    return Sample(time.monotonic(), sn, devs, stat)


def _delta(a: int | None, b: int | None, wrap: int | None = None) -> int | None:
    if a is None or b is None:
        return None
    d = b - a
    if wrap and d < 0:
        d += wrap
    return max(d, 0)


def rates(a: Sample, b: Sample) -> dict:
    """Per-second rates between two samples: {'interval', 'cpus': [...], 'devices': {...}}."""
    dt = max(b.t - a.t, 1e-9)
    cpus = []
    for cpu in sorted(b.softnet):
        ra, rb = a.softnet.get(cpu), b.softnet[cpu]
        row = {"cpu": cpu}
        for f in SOFTNET_FIELDS:
            d = _delta(ra[f], rb[f], 1 << 32) if ra else None
            row[f] = None if d is None else d / dt
        cpus.append(row)
    devs = {}
    for dev, db in b.devices.items():
        da = a.devices.get(dev, {"stats": {}, "queues": {}})
        st = {f: (None if (d := _delta(da["stats"].get(f), v)) is None else d / dt)
              for f, v in db["stats"].items()}
        qs = {q: (None if (d := _delta(da["queues"].get(q), v)) is None else d / dt)
              for q, v in sorted(db["queues"].items(),
                                 key=lambda kv: (kv[0][:2], int(kv[0][3:])))}
        devs[dev] = {"stats": st, "queues": qs}
    both = "all" in a.stat and "all" in b.stat
    summary = top_summary(a.stat["all"], b.stat["all"]) if both else None
    return {"interval": dt, "cpus": cpus, "devices": devs, "cpu_summary": summary}


def render(r: dict, title: str = "rxlab top"):
    """A rich renderable: one table of CPUs, one of devices and queues."""
    from rich.console import Group
    from rich.table import Table

    def f(x):
        return "-" if x is None else f"{x:,.0f}"

    t1 = Table(title=f"{title}: softnet_stat per CPU, per second over {r['interval']:.2f} s")
    for c in ("cpu",) + SOFTNET_FIELDS:
        t1.add_column(c, justify="right")
    for row in r["cpus"]:
        t1.add_row(str(row["cpu"]), *[f(row[k]) for k in SOFTNET_FIELDS])
    t2 = Table(title="packets per second per device and queue")
    for c in ("device", "queue", "rx pps", "tx pps", "rx dropped", "tx dropped"):
        t2.add_column(c, justify="right")
    for dev, d in r["devices"].items():
        s = d["stats"]
        t2.add_row(dev, "all", f(s.get("rx_packets")), f(s.get("tx_packets")),
                   f(s.get("rx_dropped")), f(s.get("tx_dropped")))
        rxq = {q[3:]: v for q, v in d["queues"].items() if q.startswith("rx")}
        txq = {q[3:]: v for q, v in d["queues"].items() if q.startswith("tx")}
        for q in sorted(set(rxq) | set(txq), key=int):
            t2.add_row("", q, f(rxq.get(q)), f(txq.get(q)), "", "")
    if not r.get("cpu_summary"):
        return Group(t1, t2)
    from rich.text import Text

    return Group(Text(summary_line(r["cpu_summary"])), t1, t2)
