"""A host's steering configuration as an rxlab scenario (``rxlab host export``).

Exported: ``host.cpus`` and ``host.kernel``; ``nic.queues`` (rx queues), ``nic.driver``,
``nic.irq_affinity`` (first CPU of each rx queue IRQ's effective affinity, when every rx
queue has an identified IRQ), ``nic.rss`` (key, table size, indirection table and the
rx-flow-hash fields, when the driver reports them); ``kernel.rps_cpus`` per queue and the
global ``net.core`` knobs the model has, RFS (``rps_sock_flow_entries``, per-queue
``rps_flow_cnt``), and ``nic.rx_mode: netif_rx`` for veth/tun. The scenario schema has no
place for ``xps_cpus`` (transmit side): it is listed in the file's header comment, with
anything else that could not be read. A default traffic group
and one application thread per CPU make the file ready to simulate.
"""

from __future__ import annotations

import datetime as _dt
import gzip
import os
import platform
import re
import time

import yaml

from rxlab.errors import UsageError
from rxlab.host.read import mask_int, parse_cpulist
from rxlab.scenario import scenario_from_dict

DEFAULT_TRAFFIC = {
    "groups": [{
        "name": "clients", "flows": 256, "proto": "udp",
        "src": {"cidr": "10.0.0.0/8"}, "dst": {"addr": "192.168.0.1"},
        "sport": {"range": [1024, 65535]}, "dport": {"value": 9000},
        "rate": {"pps": 100000}, "arrivals": "poisson", "size": 128,
    }]
}


def _config_hz(text: str) -> int | None:
    m = re.search(r"^CONFIG_HZ=(\d+)$", text, re.M)
    return int(m.group(1)) if m else None


def _timer_list_jiffies() -> int | None:
    try:
        with open("/proc/timer_list") as fh:
            for line in fh:
                if line.startswith("jiffies:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return None


def kernel_hz(boot: str = "/boot") -> dict | None:
    """The kernel's tick rate: CONFIG_HZ from /boot/config-<release> or /proc/config.gz,
    else measured as jiffies per second from /proc/timer_list (kernel/time/timer_list.c
    prints ``jiffies: N``; rounded to the nearest of 100, 250, 300, 1000). ``{"hz",
    "source"}`` or None."""
    path = os.path.join(boot, f"config-{platform.release()}")
    try:
        with open(path) as fh:
            hz = _config_hz(fh.read())
        if hz:
            return {"hz": hz, "source": path}
    except OSError:
        pass
    try:
        with gzip.open("/proc/config.gz", "rt") as fh:
            hz = _config_hz(fh.read())
        if hz:
            return {"hz": hz, "source": "/proc/config.gz"}
    except OSError:
        pass
    j0, t0 = _timer_list_jiffies(), time.monotonic()
    if j0 is None:
        return None
    time.sleep(0.5)
    j1, t1 = _timer_list_jiffies(), time.monotonic()
    if j1 is None or j1 <= j0:
        return None
    rate = (j1 - j0) / (t1 - t0)
    hz = min((100, 250, 300, 1000), key=lambda h: abs(h - rate))
    return {"hz": hz, "source": f"measured: {rate:.0f} jiffies/s in /proc/timer_list"}


NETIF_RX_DRIVERS = ("veth", "tun")  # no NAPI ring unless XDP/GRO is on: netif_rx delivery


def pick_device(info: dict, dev: str | None) -> str:
    devs = info["devices"]
    if dev is not None:
        if dev not in devs:
            where = f" in netns {info['netns']!r}" if info.get("netns") else ""
            raise UsageError(f"no network device {dev!r}{where} (have: {', '.join(devs)})")
        return dev
    cands = [n for n, d in devs.items() if n != "lo" and d.get("operstate") != "down"]
    cands = cands or [n for n in devs if n != "lo"]
    if len(cands) != 1:
        raise UsageError(f"give --dev NAME: the devices are {', '.join(devs) or 'none'}")
    return cands[0]


def _kernel_version(release: str) -> str:
    m = re.match(r"^(\d+)\.(\d+)", release or "")
    return f"{m.group(1)}.{m.group(2)}" if m else "6.19"


def scenario_from_host(info: dict, dev: str) -> tuple[dict, list[str]]:
    """(scenario mapping, notes on what was not exported)."""
    d = info["devices"][dev]
    ncpu = int(info["cpus"])
    nq = max(1, int(d["rx_queues"]))
    notes: list[str] = []
    nic: dict = {"driver": d.get("driver") or "generic", "queues": nq}
    if nic["driver"] in NETIF_RX_DRIVERS:
        nic["rx_mode"] = "netif_rx"
        notes.append(f"{nic['driver']} delivers through netif_rx on the sending CPU "
                     "(nic.rx_mode: netif_rx); it has no queue IRQs")

    # IRQ affinity: one CPU per rx queue, from the queue IRQs
    irqs = {}
    for q in d.get("irqs", []):
        if q["kind"] in ("rx", "rxtx") and q["queue"] < nq:
            cpus = parse_cpulist(q.get("effective_affinity_list")
                                 or q.get("smp_affinity_list") or "")
            if cpus:
                irqs[q["queue"]] = cpus[0]
    if irqs and len(irqs) == nq:
        nic["irq_affinity"] = [irqs[q] for q in range(nq)]
    elif irqs:
        notes.append(f"IRQs identified for rx queues {sorted(irqs)} only; nic.irq_affinity "
                     "left at the default (queue q on CPU q % cpus)")
    else:
        notes.append(f"no queue IRQs identified for {dev}; nic.irq_affinity left at the "
                     "default (queue q on CPU q % cpus)")

    rss_info = d.get("rss") or {}
    rss: dict = {}
    if rss_info.get("supported"):
        table = rss_info.get("indirection")
        if table:
            if len(table) & (len(table) - 1):
                notes.append(f"RSS table of {len(table)} entries is not a power of two; "
                             "not exported")
            elif max(table) >= nq:
                notes.append("RSS table names queues beyond the rx queue count; not exported")
            else:
                rss["table_size"] = len(table)
                rss["indirection"] = [int(x) for x in table]
        key = rss_info.get("key")
        if key:
            if len(key.replace(":", "")) // 2 >= 40:
                rss["key"] = key.replace(":", "")
            else:
                notes.append(f"RSS key of {len(key.replace(':', '')) // 2} bytes is shorter "
                             "than the 40 bytes the model needs; not exported")
        hf = rss_info.get("hfunc")
        if hf and hf != "toeplitz":
            notes.append(f"RSS hash function {hf!r}: the model computes Toeplitz")
    else:
        notes.append(f"RSS (ethtool -x): {rss_info.get('error', 'not read')}")
    fh = d.get("flow_hash") or {}
    if fh.get("supported"):
        fields = {t: v for t, v in fh.items() if t in ("tcp4", "udp4", "tcp6", "udp6")}
        good = {t: v for t, v in fields.items() if v and not set(v) - set("sdfn")}
        if good:
            rss["flow_hash"] = good
        other = sorted(set(fields) - set(good))
        if other:
            notes.append(f"rx-flow-hash for {', '.join(other)} not exported (no fields, or "
                         "fields other than s,d,f,n)")
    else:
        notes.append(f"rx-flow-hash (ethtool -n): {fh.get('error', 'not read')}")
    if rss:
        nic["rss"] = rss

    kern: dict = {}
    rps = {q["queue"]: q["rps_cpus"] for q in d["rx"] if q.get("rps_cpus") is not None}
    if any(mask_int(m) for m in rps.values()):
        kern["rps_cpus"] = {q: m for q, m in rps.items() if q < nq}
    sc = info.get("sysctls") or {}
    for k in ("netdev_max_backlog", "netdev_budget", "netdev_budget_usecs", "dev_weight",
              "flow_limit_cpu_bitmap", "flow_limit_table_len"):
        if sc.get(k) is not None:
            kern[k] = sc[k]
        else:
            notes.append(f"net.core.{k} not readable here; scenario default used")
    if kern.get("netdev_budget_usecs") == 0:
        kern.pop("netdev_budget_usecs")
        notes.append("netdev_budget_usecs is 0; scenario default used")
    # RFS: the global socket flow table and the per-queue flow tables
    if sc.get("rps_sock_flow_entries"):
        kern["rps_sock_flow_entries"] = int(sc["rps_sock_flow_entries"])
    flows = {q["queue"]: int(q.get("rps_flow_cnt") or 0) for q in d["rx"] if q["queue"] < nq}
    if any(flows.values()):
        vals = set(flows.values())
        kern["rps_flow_cnt"] = vals.pop() if len(vals) == 1 and len(flows) == nq else flows
    xps = [q.get("xps_cpus") for q in d["tx"] if q.get("xps_cpus") not in (None, "0")]
    if any(mask_int(m) for m in xps):
        notes.append("xps_cpus is set on some tx queues; not modelled (receive side only)")

    host = info.get("hostname") or "host"
    safe = re.sub(r"[^A-Za-z0-9_.-]", "-", f"{host}-{dev}")
    data = {
        "name": safe,
        "description": f"steering configuration of {dev} on {host}"
                       + (f" (netns {info['netns']})" if info.get("netns") else "")
                       + ", exported by rxlab host export",
        "seed": 1,
        "duration": 0.1,
        "host": {"cpus": ncpu, "kernel": _kernel_version(info.get("kernel", ""))},
        "nic": nic,
        "kernel": kern,
        "traffic": DEFAULT_TRAFFIC,
        "apps": [{"name": "app", "cpus": f"0-{ncpu - 1}" if ncpu > 1 else 0}],
    }
    scenario_from_dict(data, f"export of {dev}")  # must load; a UsageError here is a bug
    return data, notes


def render(data: dict, notes: list[str], info: dict, dev: str) -> str:
    stamp = _dt.datetime.now().astimezone().isoformat(timespec="seconds")
    head = [f"# rxlab host export: device {dev} on {info.get('hostname')} "
            f"(kernel {info.get('kernel')}"
            + (f", netns {info['netns']}" if info.get("netns") else "") + f"), {stamp}",
            "# The traffic group and the application are defaults: edit them to match the "
            "real workload."]
    head += [f"# not exported: {n}" for n in notes]
    return "\n".join(head) + "\n" + yaml.safe_dump(data, sort_keys=False,
                                                   default_flow_style=None, width=100)
