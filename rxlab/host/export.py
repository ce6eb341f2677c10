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

``host.hz`` is the kernel's CONFIG_HZ (``kernel_hz``); ``--profile`` puts a calibrated
cost profile (``rxlab calibrate``) in ``host.cost_profile``; ``--pcap`` replaces the
default traffic with a capture (``traffic.pcap``) and ``--sockets`` with the host's own
flows: established TCP connections and connected UDP sockets from /proc/net/{tcp,udp}[6]
(``socket_flows``), so that run and tune work on real addresses and ports.
"""

from __future__ import annotations

import datetime as _dt
import os
import platform
import re
import time

import yaml

from rxlab.cpuset import mask_value, parse_cpulist
from rxlab.drivers import DRIVERS
from rxlab.errors import UsageError
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
    from rxlab.host.caps import probe
    hz = (probe().config or {}).get("CONFIG_HZ", "")
    if hz.isdigit():
        return {"hz": int(hz), "source": "/proc/config.gz"}
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
    nic = _nic_fields(d, dev, nq, notes)
    kern = _kernel_fields(info, d, nq, notes)
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


def _nic_fields(d: dict, dev: str, nq: int, notes: list[str]) -> dict:
    """``nic``: driver, queues, delivery, IRQ affinity, threaded NAPI, IRQ deferral and
    RSS."""
    name = d.get("driver") or "generic"
    nic: dict = {"driver": name if name in DRIVERS else "generic", "queues": nq}
    if name not in DRIVERS:
        notes.append(f"driver {name}: rxlab has no preset for it (nic.driver: generic)")
    if name in NETIF_RX_DRIVERS:
        nic["rx_mode"] = "netif_rx"
        notes.append(f"{name} delivers through netif_rx on the sending CPU "
                     "(nic.rx_mode: netif_rx); it has no queue IRQs")
    irqs = _irq_cpus(d, nq)
    if irqs and len(irqs) == nq:
        nic["irq_affinity"] = [irqs[q] for q in range(nq)]
    elif irqs:
        notes.append(f"IRQs identified for rx queues {sorted(irqs)} only; nic.irq_affinity "
                     "left at the default (queue q on CPU q % cpus)")
    else:
        notes.append(f"no queue IRQs identified for {dev}; nic.irq_affinity left at the "
                     "default (queue q on CPU q % cpus)")
    if d.get("threaded") and nic.get("rx_mode") != "netif_rx":
        nic["threaded"] = True
        notes.append("threaded NAPI is on: the napi/DEV-ID kthreads' affinity is not read; "
                     "nic.napi_thread_affinity left at the default (each queue's IRQ CPU)")
    for key in ("napi_defer_hard_irqs", "gro_flush_timeout"):
        if d.get(key) and nic.get("rx_mode") != "netif_rx":
            nic[key] = d[key]  # the device's value (per-NAPI values over netlink: not read)
    rss = _rss_fields(d.get("rss") or {}, nq, notes)
    flow_hash = _flow_hash_fields(d.get("flow_hash") or {}, notes)
    if flow_hash:
        rss["flow_hash"] = flow_hash
    if rss:
        nic["rss"] = rss
    return nic


def _irq_cpus(d: dict, nq: int) -> dict[int, int]:
    """rx queue -> the first CPU of its IRQ's effective affinity (else of the allowed
    one), for the queues whose IRQ was identified."""
    irqs = {}
    for q in d.get("irqs", []):
        if q["kind"] in ("rx", "rxtx") and q["queue"] < nq:
            cpus = parse_cpulist(q.get("effective_affinity_list")
                                 or q.get("smp_affinity_list") or "")
            if cpus:
                irqs[q["queue"]] = cpus[0]
    return irqs


def _rss_fields(rss_info: dict, nq: int, notes: list[str]) -> dict:
    """``nic.rss`` from ``ethtool -x``: the table and key where the model can use them."""
    rss: dict = {}
    if not rss_info.get("supported"):
        notes.append(f"RSS (ethtool -x): {rss_info.get('error', 'not read')}")
        return rss
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
    return rss


def _flow_hash_fields(fh: dict, notes: list[str]) -> dict:
    """``nic.rss.flow_hash`` from ``ethtool -n``: the flow types hashed on fields the
    model has (s, d, f, n)."""
    if not fh.get("supported"):
        notes.append(f"rx-flow-hash (ethtool -n): {fh.get('error', 'not read')}")
        return {}
    fields = {t: v for t, v in fh.items() if t in ("tcp4", "udp4", "tcp6", "udp6")}
    good = {t: v for t, v in fields.items() if v and not set(v) - set("sdfn")}
    other = sorted(set(fields) - set(good))
    if other:
        notes.append(f"rx-flow-hash for {', '.join(other)} not exported (no fields, or "
                     "fields other than s,d,f,n)")
    return good


def _kernel_fields(info: dict, d: dict, nq: int, notes: list[str]) -> dict:
    """``kernel``: rps_cpus, the net.core knobs the model has, the threaded backlog and
    RFS; xps_cpus only as a note (the model is receive side only)."""
    kern: dict = {}
    rps = {q["queue"]: q["rps_cpus"] for q in d["rx"] if q.get("rps_cpus") is not None}
    if any(mask_value(m) for m in rps.values()):
        kern["rps_cpus"] = {q: m for q, m in rps.items() if q < nq}
    sc = info.get("sysctls") or {}
    for k in ("netdev_max_backlog", "netdev_budget", "netdev_budget_usecs", "dev_weight",
              "flow_limit_cpu_bitmap", "flow_limit_table_len", "busy_read"):
        why = (info.get("sysctls_absent") or {}).get(k)
        if sc.get(k) is not None:
            kern[k] = sc[k]
        elif why and k.startswith("flow_limit"):
            notes.append(f"net.core.{k}: {why}; the scenario models no flow limit")
        else:
            notes.append(f"net.core.{k}: {why or 'not readable here'}; scenario default used")
    if kern.get("netdev_budget_usecs") == 0:
        kern.pop("netdev_budget_usecs")
        notes.append("netdev_budget_usecs is 0; scenario default used")
    if info.get("thread_backlog_napi"):
        from rxlab.kernel.versions import behaviour
        if behaviour(_kernel_version(info.get("kernel", ""))).backlog_threads:
            kern["thread_backlog_napi"] = True
        else:  # a PREEMPT_RT kernel before 6.10: its own backlog rule, not modelled
            notes.append("PREEMPT_RT before 6.10: its backlog handling is not modelled")
    # RFS: the global socket flow table and the per-queue flow tables
    if sc.get("rps_sock_flow_entries"):
        kern["rps_sock_flow_entries"] = int(sc["rps_sock_flow_entries"])
    flows = {q["queue"]: int(q.get("rps_flow_cnt") or 0) for q in d["rx"] if q["queue"] < nq}
    if any(flows.values()):
        vals = set(flows.values())
        kern["rps_flow_cnt"] = vals.pop() if len(vals) == 1 and len(flows) == nq else flows
    xps = [q.get("xps_cpus") for q in d["tx"] if q.get("xps_cpus") not in (None, "0")]
    if any(mask_value(m) for m in xps):
        notes.append("xps_cpus is set on some tx queues; not modelled (receive side only)")
    return kern


def render(data: dict, notes: list[str], info: dict, dev: str) -> str:
    stamp = _dt.datetime.now().astimezone().isoformat(timespec="seconds")
    head = [f"# rxlab host export: device {dev} on {info.get('hostname')} "
            f"(kernel {info.get('kernel')}"
            + (f", netns {info['netns']}" if info.get("netns") else "") + f"), {stamp}",
            ("# The traffic group and the application are defaults: edit them to match the "
             "real workload." if data.get("traffic") == DEFAULT_TRAFFIC else
             "# The application is a default: edit it to match the real workload.")]
    head += [f"# not exported: {n}" for n in notes]
    head += _unmodelled_header(info, dev)
    return "\n".join(head) + "\n" + yaml.safe_dump(data, sort_keys=False,
                                                   default_flow_style=None, width=100)


def _unmodelled_header(info: dict, dev: str) -> list[str]:
    """The settings rxlab does not model, read or not, as comment lines of at most 88."""
    import textwrap

    from rxlab.host.read import unmodelled_lines
    out = []
    for line in unmodelled_lines(info, [dev]):
        out += textwrap.wrap(line, 88, initial_indent="# ", subsequent_indent="#   ",
                             break_on_hyphens=False)
    return out


# --- flows: a sample of the host's sockets, or a capture ---------------------------------------

TCP_ESTABLISHED = 1  # include/net/tcp_states.h
PROC_NET = {"tcp": ("/proc/net/tcp", 4), "tcp6": ("/proc/net/tcp6", 6),
            "udp": ("/proc/net/udp", 4), "udp6": ("/proc/net/udp6", 6)}


def _proc_addr(text: str, ip: int) -> tuple[str, int]:
    """``0100007F:1F90`` -> ("127.0.0.1", 8080): the kernel prints each 32-bit word of
    the address with %08X in host byte order (net/ipv4/tcp_ipv4.c get_tcp4_sock,
    net/ipv6/tcp_ipv6.c get_tcp6_sock)."""
    import ipaddress
    import sys
    addr, port = text.split(":")
    words = [int(addr[i:i + 8], 16) for i in range(0, len(addr), 8)]
    raw = b"".join(w.to_bytes(4, sys.byteorder) for w in words)
    a = ipaddress.IPv4Address(raw) if ip == 4 else ipaddress.IPv6Address(raw)
    if ip == 6 and a.ipv4_mapped is not None:
        a = a.ipv4_mapped
    return str(a), int(port, 16)


def parse_proc_net(text: str, proto: str, ip: int) -> tuple[list[dict], list[int]]:
    """One /proc/net/{tcp,udp}[6] table -> (receive-side flows, ports of unconnected UDP
    sockets). A flow is an established TCP connection or a connected UDP socket: the
    packets it receives come from (remote addr, port) to (local addr, port)."""
    flows, listeners = [], []
    for line in text.splitlines()[1:]:
        cols = line.split()
        if len(cols) < 4:
            continue
        try:
            laddr, lport = _proc_addr(cols[1], ip)
            raddr, rport = _proc_addr(cols[2], ip)
            st = int(cols[3], 16)
        except (ValueError, IndexError):
            continue
        if proto.startswith("tcp"):
            if st != TCP_ESTABLISHED:
                continue
        elif rport == 0:
            listeners.append(lport)
            continue
        flows.append({"proto": proto.rstrip("6"), "src": raddr, "sport": rport,
                      "dst": laddr, "dport": lport})
    return flows, listeners


def _read_proc_net() -> dict[str, str]:
    out = {}
    for name, (path, _ip) in PROC_NET.items():
        try:
            with open(path) as fh:
                out[name] = fh.read()
        except OSError:
            pass
    return out


def socket_flows(netns: str | None = None) -> tuple[list[dict], list[int]]:
    """The host's (or a namespace's) receive-side flows from its socket tables, without
    loopback ones (they never cross a NIC), sorted; and unconnected UDP ports."""
    import ipaddress
    if netns:
        from rxlab.host.netns import in_netns
        texts = in_netns(netns, _read_proc_net, sysfs=False)  # /proc/net is per netns
    else:
        texts = _read_proc_net()
    flows, listeners = [], []
    for name, text in texts.items():
        f, ls = parse_proc_net(text, name, PROC_NET[name][1])
        flows += f
        listeners += ls
    flows = [f for f in flows if not ipaddress.ip_address(f["src"]).is_loopback]
    uniq = {tuple(sorted(f.items())): f for f in flows}
    return sorted(uniq.values(), key=lambda f: (f["proto"], f["dst"], f["dport"], f["src"],
                                                f["sport"])), sorted(set(listeners))


def flow_groups(flows: list[dict], total_pps: float) -> list[dict]:
    """One traffic group per flow (a group's ports are a single value, a range or a
    sequence, so real port pairs need one each), ``total_pps`` shared evenly: a socket
    table holds no rates."""
    import ipaddress
    pps = total_pps / max(1, len(flows))
    out = []
    for i, f in enumerate(flows):
        ip = ipaddress.ip_address(f["src"]).version
        g = {"name": f"{f['proto']}-{i}", "flows": 1, "proto": f["proto"],
             "src": {"addr": f["src"]}, "dst": {"addr": f["dst"]},
             "sport": {"value": f["sport"]}, "dport": {"value": f["dport"]},
             "rate": {"pps": pps}, "arrivals": "poisson", "size": 128}
        if ip == 6:
            g["ip"] = 6
        out.append(g)
    return out


def host_fields(data: dict, notes: list[str], *, hz: dict | None, profile: str | None,
                pcap: str | None = None, flows: list[dict] | None = None,
                listeners: list[int] | None = None, max_flows: int = 256,
                total_pps: float = 100000.0) -> dict:
    """Add HZ, the calibrated profile and real flows to an exported scenario mapping."""
    from rxlab.profiles import load_profile
    host = data["host"]
    if hz and hz["hz"] in (100, 250, 300, 1000):
        host["hz"] = hz["hz"]
    else:
        notes.append(f"HZ: {'not found' if not hz else hz['hz']} (CONFIG_HZ in /boot/config-*"
                     " or /proc/config.gz, or jiffies in /proc/timer_list); default used")
    if profile:
        path = os.path.abspath(profile)
        try:
            load_profile(path)
        except UsageError as err:
            raise UsageError(f"--profile: {str(err).removeprefix('host.cost_profile: ')}") \
                from None
        host["cost_profile"] = path
    if pcap:
        path = os.path.abspath(pcap)
        if not os.path.isfile(path):
            raise UsageError(f"--pcap: {pcap!r} is not a file; give a pcap or pcapng capture")
        data["traffic"] = {"pcap": {"file": path}}
    elif flows is not None:
        if not flows:
            notes.append("no established TCP connection or connected UDP socket besides "
                         "loopback: the default traffic group is kept")
        else:
            if len(flows) > max_flows:
                notes.append(f"{len(flows)} socket flows; the first {max_flows} (sorted) "
                             "exported")
                flows = flows[:max_flows]
            data["traffic"] = {"groups": flow_groups(flows, total_pps)}
            notes.append(f"traffic: {len(flows)} flows from the socket tables; their rates "
                         f"are not in /proc, so {total_pps:g} pps is shared evenly")
        if listeners:
            notes.append("unconnected UDP sockets on port(s) "
                         f"{', '.join(map(str, listeners[:20]))}: their peers are unknown "
                         "(a capture, --pcap, gives them)")
    return data
