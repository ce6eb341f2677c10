"""Read a Linux host's receive-steering configuration (``rxlab host show``).

Per device (read inside ``--netns`` when given, through a fresh sysfs mount):
``/sys/class/net/DEV/queues/rx-N/{rps_cpus,rps_flow_cnt}``, ``tx-N/xps_cpus``, the
driver, and through ``ethtool``: channels, RSS indirection table, key and hash function,
rx-flow-hash fields (each noted as unsupported where the driver refuses). Queue IRQs are
identified in ``/proc/interrupts`` by name (``DEV-TxRx-3``, ``virtio2-input.0``,
``mlx5_comp3@pci:ADDR``, ...), their affinity read from ``/proc/irq/N/``.
Global: the CPU count and the ``net.core`` sysctls, which exist only in the initial
network namespace (read by this process, never inside ``--netns``).
"""

from __future__ import annotations

import os
import platform
import re
from pathlib import Path

from rxlab import cpuset, knobs
from rxlab.host import caps, ethtool
from rxlab.host.netns import check_dev, check_netns, in_netns

SYSCTLS = ("netdev_max_backlog", "netdev_budget", "netdev_budget_usecs", "dev_weight",
           "flow_limit_cpu_bitmap", "flow_limit_table_len", "rps_sock_flow_entries",
           "busy_read")
SYSCTL_DIR = Path("/proc/sys/net/core")
SYS_NET = Path("/sys/class/net")


def _read(path: Path | str) -> str | None:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return None


def _int(path: Path | str) -> int | None:
    t = _read(path)
    try:
        return int(t) if t is not None else None
    except ValueError:
        return None


def cpu_count() -> int:
    """Possible CPUs (highest + 1): the range every CPU mask on this host may name."""
    t = _read("/sys/devices/system/cpu/possible")
    if t:
        return max(cpuset.parse_cpulist(t)) + 1
    return os.cpu_count() or 1


def read_sysctls() -> tuple[dict, dict]:
    """The global net.core sysctls this kernel has, and those it lacks with the cause
    ("kernel built without CONFIG_NET_FLOW_LIMIT"): no value is made up for those."""
    out: dict = {}
    absent: dict = {}
    cap = caps.probe()
    for name in SYSCTLS:
        v = _read(SYSCTL_DIR / name)
        if v is None:
            absent[name] = cap.sysctl_why_not(name) or f"{SYSCTL_DIR / name} is unreadable"
        elif name == "flow_limit_cpu_bitmap":
            out[name] = v
        else:
            out[name] = int(v)
    return out, absent


# --------------------------------------------------------------- queue IRQs


def _interrupts() -> list[tuple[int, str, list[int]]]:
    """/proc/interrupts -> (irq, name, per-CPU counts) for numbered IRQs."""
    text = _read("/proc/interrupts") or ""
    lines = text.splitlines()
    if not lines:
        return []
    ncpu = len(lines[0].split())
    out = []
    for line in lines[1:]:
        m = re.match(r"^\s*(\d+):\s+(.*)$", line)
        if not m:
            continue
        parts = m.group(2).split()
        counts = [int(x) for x in parts[:ncpu] if x.isdigit()]
        name = parts[-1] if len(parts) > ncpu else ""
        out.append((int(m.group(1)), name, counts))
    return out




def _queue_of(name: str, ids: list[str]) -> tuple[str, int] | None:
    """('rx'|'tx'|'rxtx', queue) when IRQ ``name`` is a queue IRQ of a device ``ids``."""
    low = name.lower()
    if not any(low.startswith(i.lower()) or f"@pci:{i.lower()}" in low for i in ids if i):
        return None
    for i in ids:
        if i and low.startswith(i.lower()):
            rest = name[len(i):]
            break
    else:  # mlx5_comp3@pci:0000:3b:00.0
        rest = name.split("@", 1)[0]
        rest = re.sub(r"^[a-z0-9]+_", "", rest, flags=re.I)
    m = re.match(r"^[-_.:]?(?P<kind>[A-Za-z-]*?)[-_.]?(?P<q>\d+)$", rest)
    if not m:
        return None
    kind = m.group("kind").lower().strip("-")
    if kind in ("", "txrx", "rxtx", "tx-rx", "rx-tx", "combined", "comp", "fp", "queue", "ce"):
        return "rxtx", int(m.group("q"))
    if kind in ("rx", "input"):
        return "rx", int(m.group("q"))
    if kind in ("tx", "output"):
        return "tx", int(m.group("q"))
    return None


def queue_irqs(dev: str, device_path: str | None) -> list[dict]:
    """Queue IRQs of ``dev`` with their affinity; [] when none can be identified."""
    ids = [dev]
    pci = None
    if device_path:
        base = os.path.basename(device_path)
        if base.startswith("virtio"):
            ids.append(base)
            pci = os.path.basename(os.path.dirname(device_path))
        elif re.match(r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.\d$", base):
            pci = base
    if pci and not ids[-1].startswith("virtio"):
        ids.append(pci)
    out = []
    for irq, name, _counts in _interrupts():
        q = _queue_of(name, ids)
        if q is None:
            continue
        aff = _read(f"/proc/irq/{irq}/smp_affinity_list")
        eff = _read(f"/proc/irq/{irq}/effective_affinity_list")
        out.append({"irq": irq, "name": name, "kind": q[0], "queue": q[1],
                    "smp_affinity_list": aff,
                    "effective_affinity_list": eff or None})
    return out


# --------------------------------------------------------------- devices


def _queues(d: Path) -> tuple[list[dict], list[dict]]:
    rx, tx = [], []
    qdir = d / "queues"
    names = sorted(os.listdir(qdir)) if qdir.is_dir() else []
    for n in sorted((x for x in names if x.startswith("rx-")), key=lambda x: int(x[3:])):
        rx.append({"queue": int(n[3:]), "rps_cpus": _read(qdir / n / "rps_cpus"),
                   "rps_flow_cnt": _int(qdir / n / "rps_flow_cnt")})
    for n in sorted((x for x in names if x.startswith("tx-")), key=lambda x: int(x[3:])):
        tx.append({"queue": int(n[3:]), "xps_cpus": _read(qdir / n / "xps_cpus")})
    return rx, tx


def _try(fn, *args) -> dict:
    try:
        return {"supported": True, **fn(*args)}
    except ethtool.EthtoolError as err:
        return {"supported": False, "error": str(err)}


def read_device(dev: str, with_ethtool: bool = True) -> dict:
    """One device, read in the current namespace (call through in_netns)."""
    d = SYS_NET / dev
    if not d.exists():
        raise FileNotFoundError(f"no network device {dev!r}")
    dpath = os.path.realpath(d / "device") if (d / "device").exists() else None
    drv = os.path.basename(os.path.realpath(d / "device" / "driver")) if dpath and (
        d / "device" / "driver").exists() else None
    rx, tx = _queues(d)
    info: dict = {
        "ifindex": _int(d / "ifindex"), "driver": drv, "device_path": dpath,
        "operstate": _read(d / "operstate"), "mtu": _int(d / "mtu"),
        "rx_queues": len(rx), "tx_queues": len(tx), "rx": rx, "tx": tx,
        "irqs": queue_irqs(dev, dpath),
        "threaded": _int(d / "threaded"),  # absent before 5.12
        # IRQ deferral: absent before 5.8 / 3.19; a write sets every NAPI of the device
        "napi_defer_hard_irqs": _int(d / "napi_defer_hard_irqs"),
        "gro_flush_timeout": _int(d / "gro_flush_timeout"),
    }
    if with_ethtool:
        if info["driver"] is None:
            info["driver"] = ethtool.driver(dev) if ethtool.have_cmd("ethtool") else None
        info["channels"] = _try(ethtool.channels, dev)
        info["rss"] = _try(ethtool.rxfh, dev)
        fh: dict = {}
        for t in ethtool.FLOW_TYPES:
            try:
                fh[t] = ethtool.flow_hash(dev, t)
            except ethtool.EthtoolError as err:
                fh = {"supported": False, "error": str(err)}
                break
        else:
            fh = {"supported": True, **fh}
        info["flow_hash"] = fh
    info["unmodelled"] = read_unmodelled("nic", dev)
    return info


def list_devices() -> list[str]:
    return sorted(os.listdir(SYS_NET))


def _read_devices(devs: list[str] | None, with_ethtool: bool) -> dict:
    names = devs if devs is not None else list_devices()
    return {n: read_device(n, with_ethtool) for n in names}


def read_host(netns: str | None = None, devices: list[str] | None = None,
              with_ethtool: bool = True) -> dict:
    """The whole configuration as a JSON-able dict: cpus, sysctls, devices by name."""
    from rxlab.errors import UsageError

    check_netns(netns)
    for dv in devices or []:
        check_dev(dv)
    try:
        devs = in_netns(netns, _read_devices, devices, with_ethtool)
    except FileNotFoundError as err:
        where = f" in netns {netns!r}" if netns else ""
        raise UsageError(f"{err}{where}") from None
    cap = caps.probe()
    online = _read("/sys/devices/system/cpu/online")
    sysctls, absent = read_sysctls()
    notes = [f"net.core.{n}: {why}" for n, why in absent.items()]
    return {
        "cpus": cpu_count(),
        "cpus_online": online,
        "kernel": platform.release(),
        "hostname": platform.node(),
        "netns": netns,
        "sysctls": sysctls,
        "sysctls_absent": absent,
        "thread_backlog_napi": backlog_threads(),
        "kernel_features": cap.summary(),
        "devices": devs,
        "unmodelled": read_unmodelled("kernel"),
        "not_read": {k.what: k.model for k in knobs.not_read()},
        "notes": notes,
    }


def backlog_threads(cmdline: str | None = None, version: str | None = None) -> bool:
    """Threaded backlog NAPI is on (net/core/dev.c ``use_backlog_threads``, 6.10+): the
    boot parameter ``thread_backlog_napi``, or a PREEMPT_RT kernel."""
    if cmdline is None:
        cmdline = _read("/proc/cmdline") or ""
    if version is None:
        version = platform.version()
    return "thread_backlog_napi" in cmdline.split() or "PREEMPT_RT" in version.split()


# --------------------------------------------------------------- not modelled


def read_unmodelled(section: str, dev: str | None = None, root: str = "/") -> dict:
    """The receive-path settings rxlab knows but does not model (rxlab.knobs) that this
    host shows in a file: {the kernel's name: value as read}; absent files are left out
    (an older kernel, or a global sysctl seen from another namespace)."""
    out: dict = {}
    for k in knobs.readable(section):
        v = _read(Path(root) / k.path.format(dev=dev).lstrip("/"))
        if v is not None:
            out[k.name] = v
    return out


def unmodelled_lines(info: dict, devs: list[str] = ()) -> list[str]:
    """What ``host show`` and ``export`` say of the settings rxlab does not model: those
    read (the global ones, and those of ``devs``) and those not read."""
    read = [f"{k}={v}" for k, v in info.get("unmodelled", {}).items()]
    for name in devs:
        read += [f"{name}/{k}={v}" for k, v in info["devices"][name]["unmodelled"].items()]
    out = [f"not modelled, read: {' '.join(read)}"] if read else []
    return out + ["not modelled, not read: " + "; ".join(k.what for k in knobs.not_read())]
