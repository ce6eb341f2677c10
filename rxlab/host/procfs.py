"""The real host's counters as the kernel prints them: ``/proc/net/softnet_stat``,
``/proc/stat``, ``/proc/net/snmp`` and ``/proc/net/udp``, ``ethtool -k``.

softnet_stat is parsed by ``rxlab.metrics.softnet.parse_softnet``, the one parser rxlab
has for it (the simulated file and a real one); here it is keyed by CPU for deltas.
"""

from __future__ import annotations

import os

from rxlab.metrics.softnet import parse_softnet


def softnet_by_cpu(text: str) -> dict[int, dict[str, int]]:
    """softnet_stat rows keyed by the CPU of column 12 (offline CPUs have no line)."""
    return {r.pop("cpu"): r for r in parse_softnet(text)}


def softnet() -> dict[int, dict[str, int]]:
    with open("/proc/net/softnet_stat") as fh:
        return softnet_by_cpu(fh.read())


def softnet_delta(a: dict, b: dict) -> dict[int, dict[str, int]]:
    """Per-CPU counter increase from ``a`` to ``b`` (u32 counters: wrap-safe)."""
    return {c: {k: (b[c][k] - a.get(c, {}).get(k, 0)) & 0xFFFFFFFF for k in b[c]} for c in b}


PROC_STAT_FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")


def parse_proc_stat(text: str) -> dict:
    """{"all" | cpu number: {field: clock ticks (USER_HZ)}} from /proc/stat's cpu lines;
    the kernel fills them in fs/proc/stat.c show_stat() from kcpustat_cpu(N).cpustat[]
    (old kernels print fewer columns: the missing ones are 0). The one parser of it."""
    out: dict = {}
    for line in text.splitlines():
        cols = line.split()
        if not cols or not cols[0].startswith("cpu"):
            continue
        key = "all" if cols[0] == "cpu" else int(cols[0][3:])
        vals = [int(x) for x in cols[1:1 + len(PROC_STAT_FIELDS)]]
        vals += [0] * (len(PROC_STAT_FIELDS) - len(vals))
        out[key] = dict(zip(PROC_STAT_FIELDS, vals, strict=True))
    return out


def proc_stat() -> dict[int, dict[str, int]]:
    """This host's per-CPU rows of /proc/stat (the "all" row left out)."""
    with open("/proc/stat") as fh:
        rows = parse_proc_stat(fh.read())
    rows.pop("all", None)
    return rows


def stat_delta(a: dict, b: dict) -> dict[int, dict[str, int]]:
    return {c: {k: b[c][k] - a.get(c, {}).get(k, 0) for k in b[c]} for c in b}


def parse_offload(text: str) -> dict[str, str]:
    """``ethtool -k``: changeable features -> "on"/"off" (fixed ones left out)."""
    out = {}
    for line in text.splitlines()[1:]:
        name, _, rest = line.strip().partition(": ")
        val = rest.split()[0] if rest else ""
        if val in ("on", "off") and "[fixed]" not in rest and name:
            out[name] = val
    return out


UDP_SNMP = ("InDatagrams", "InErrors", "RcvbufErrors", "InCsumErrors", "NoPorts")


def parse_snmp_udp(text: str) -> dict[str, int]:
    rows = [line.split() for line in text.splitlines() if line.startswith("Udp:")]
    if len(rows) < 2:
        return {}
    vals = dict(zip(rows[0][1:], rows[1][1:], strict=False))
    return {k: int(vals[k]) for k in UDP_SNMP if k in vals}


def parse_proc_udp(text: str) -> dict[int, dict[str, int]]:
    """Remote (peer) port -> {"drops", "rx_queue" (bytes queued)} of connected sockets
    (``rem_address`` port != 0)."""
    out: dict[int, dict[str, int]] = {}
    for line in text.splitlines()[1:]:
        cols = line.split()
        if len(cols) < 13:
            continue
        rport = int(cols[2].split(":")[1], 16)
        if rport:
            e = out.setdefault(rport, {"drops": 0, "rx_queue": 0})
            e["drops"] += int(cols[-1])
            e["rx_queue"] += int(cols[4].split(":")[1], 16)
    return out


def udp_stats() -> dict:
    """This namespace's UDP counters and per-socket drops (/proc/net follows the reading
    thread's namespace: call through ``in_netns(ns, udp_stats, sysfs=False)``)."""
    with open("/proc/net/snmp") as fh:
        snmp = parse_snmp_udp(fh.read())
    with open("/proc/net/udp") as fh:
        socks = parse_proc_udp(fh.read())
    return {"snmp": snmp, "sockets": socks}


def parse_netstat(text: str) -> dict[str, int]:
    """/proc/net/netstat (pairs of header and value lines, ``TcpExt: ...``) -> every
    counter as ``Prefix.Name``."""
    out: dict[str, int] = {}
    lines = text.splitlines()
    for head, vals in zip(lines[::2], lines[1::2], strict=False):
        prefix, _, names = head.partition(":")
        for k, v in zip(names.split(), vals.partition(":")[2].split(), strict=False):
            out[f"{prefix}.{k}"] = int(v)
    return out


def netstat() -> dict[str, int]:
    """This namespace's /proc/net/netstat (call through ``in_netns``, as ``udp_stats``):
    the LINUX_MIB counters, per network namespace."""
    with open("/proc/net/netstat") as fh:
        return parse_netstat(fh.read())


def tasks_named(match) -> list[int]:
    """The pids whose comm (in /proc) ``match(comm)`` accepts, in pid order."""
    out = []
    for pid in sorted(filter(str.isdigit, os.listdir("/proc")), key=int):
        try:
            with open(f"/proc/{pid}/comm") as fh:
                if match(fh.read().strip()):
                    out.append(int(pid))
        except OSError:
            continue
    return out


def ksoftirqd_pid(cpu: int) -> int | None:
    """The pid of ``ksoftirqd/<cpu>`` (its comm in /proc), None when there is none."""
    pids = tasks_named(lambda comm: comm == f"ksoftirqd/{cpu}")
    return pids[0] if pids else None


def napi_thread_pids(dev: str) -> list[int]:
    """The pids of device ``dev``'s threaded-NAPI kthreads ``napi/<dev>-<napi id>``
    (net/core/dev.c napi_kthread_create; comm is cut at 15 characters)."""
    prefix = f"napi/{dev}-"[:15]
    return tasks_named(lambda comm: comm.startswith(prefix))


def task_ticks(pid: int) -> int:
    """utime + stime of a task, clock ticks (/proc/PID/stat fields 14 and 15); 0 if gone."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0
    return int(fields[11]) + int(fields[12])


def parse_softirqs(text: str, name: str = "NET_RX") -> dict[int, int]:
    """/proc/softirqs -> CPU -> how often softirq ``name`` ran there (since boot)."""
    for line in text.splitlines():
        head, _, rest = line.strip().partition(":")
        if head == name:
            return dict(enumerate(int(x) for x in rest.split()))
    return {}


def softirqs(name: str = "NET_RX") -> dict[int, int]:
    with open("/proc/softirqs") as fh:
        return parse_softirqs(fh.read(), name)
