"""The real-kernel side: preflight, sysctl guard, the namespace lab, counters.

Safety rules (docs/kernel-check.md, Safety), as implemented here:

* preflight (``cannot_run``): root, CPUs 0 and 1, ``ip`` and ``tc``, the kernel options,
  the initial network namespace (the global ``net.core`` sysctls exist only there);
* every sysctl written is read first and written back in ``finally`` (``Sysctls``); the
  originals are also kept in a state file, so a run killed with SIGKILL is repaired by
  the next run before it changes anything;
* dedicated namespaces (``rxkc_tx``/``rxkc_rx``; ``rxlab calibrate`` has its own,
  ``rxcal_tx``/``rxcal_rx``), left-overs deleted before setup and both deleted on exit;
  SIGTERM/SIGHUP raise SystemExit so ``finally`` runs, and signals
  are ignored while cleaning up so a second Ctrl-C cannot cut the cleanup short;
* per-device settings (``rps_cpus``, ``rps_flow_cnt``, clsact) are undone after each
  experiment; traffic runs only between the two namespaces (10.77.0.0/24).

Commands are argument lists (never a shell). Per-queue sysfs files exist only in the
namespace that mounted sysfs, so they are written by a forked child that joins the
namespace, unshares its mount namespace and mounts a fresh sysfs (what ``ip netns exec``
does; Python 3.11 has no ``os.setns``, hence ctypes).
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import gzip
import json
import os
import pickle
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Iterator

from rxlab.kcheck.bpf import libc

NS_TX, NS_RX = "rxkc_tx", "rxkc_rx"
DEV_TX, DEV_RX = "rxkc0", "rxkc1"
IP_TX, IP_RX = "10.77.0.1", "10.77.0.2"
# rxlab calibrate's lab: other names, so a left-over of one tool is never taken for the other's
CAL_NAMES = {"ns_tx": "rxcal_tx", "ns_rx": "rxcal_rx", "dev_tx": "rxcal0", "dev_rx": "rxcal1",
             "ip_tx": "10.78.0.1", "ip_rx": "10.78.0.2"}
ALL_NAMESPACES = (NS_TX, NS_RX, CAL_NAMES["ns_tx"], CAL_NAMES["ns_rx"])
QUEUES = 4
NETNS_DIR = "/run/netns"
STATE_DIR = "/run/rxlab-kcheck"
STATE_FILE = os.path.join(STATE_DIR, "state.json")
LOCK_FILE = os.path.join(STATE_DIR, "lock")
CORE = "/proc/sys/net/core"
# the sysctls a run may write (all global, initial namespace only)
SYSCTLS = ("netdev_max_backlog", "flow_limit_cpu_bitmap", "rps_sock_flow_entries")
CLONE_NEWNET, CLONE_NEWNS = 0x40000000, 0x00020000
MS_REC, MS_PRIVATE, MNT_DETACH = 0x4000, 1 << 18, 2
REQUIRED_CONFIG = ("CONFIG_RPS", "CONFIG_NET_FLOW_LIMIT", "CONFIG_VETH", "CONFIG_NET_NS",
                   "CONFIG_BPF_SYSCALL", "CONFIG_NET_CLS_BPF", "CONFIG_NET_SCH_INGRESS")


class CannotRun(Exception):
    """The kernel checks cannot run on this machine (the message says why)."""


# --- preflight ----------------------------------------------------------------------------

def _kernel_config() -> dict[str, str] | None:
    try:
        with gzip.open("/proc/config.gz", "rt") as fh:
            out = {}
            for line in fh:
                if line.startswith("CONFIG_") and "=" in line:
                    k, v = line.strip().split("=", 1)
                    out[k] = v
            return out
    except OSError:
        return None


def in_initial_netns() -> bool:
    try:
        return os.stat("/proc/self/ns/net").st_ino == os.stat("/proc/1/ns/net").st_ino
    except OSError:
        return True


def cannot_run() -> str | None:
    """Why the kernel checks cannot run here, or None."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return "needs root (creates network namespaces, veth devices, BPF programs)"
    try:
        online = os.sched_getaffinity(0)
    except OSError:
        online = set(range(os.cpu_count() or 1))
    if not {0, 1} <= online:
        return f"needs CPUs 0 and 1 (this process may run on {sorted(online)})"
    for tool in ("ip", "tc"):
        if shutil.which(tool) is None:
            return f"needs the `{tool}` command (apt-get install iproute2)"
    cfg = _kernel_config()
    if cfg is not None:
        missing = [c for c in REQUIRED_CONFIG if cfg.get(c) != "y"]
        if missing:
            return f"kernel lacks {', '.join(missing)} (/proc/config.gz)"
    for name in SYSCTLS:
        if not os.path.exists(os.path.join(CORE, name)):
            return (f"{CORE}/{name} is missing: not in the initial network namespace "
                    "(the global net.core sysctls exist only there), or the kernel lacks it")
    if not in_initial_netns():
        return "not in the initial network namespace"
    if not os.path.isdir("/sys/class/net"):
        return "no sysfs at /sys"
    return None


# --- sysctls ------------------------------------------------------------------------------

def read_sysctl(name: str) -> str:
    with open(os.path.join(CORE, name)) as fh:
        return fh.read().strip()


def write_sysctl(name: str, value: str | int) -> None:
    if name not in SYSCTLS:
        raise ValueError(f"kernel-check does not write net.core.{name}")
    with open(os.path.join(CORE, name), "w") as fh:
        fh.write(f"{value}\n")


def _norm_mask(v: str) -> int:
    return int(v.replace(",", ""), 16)


class Sysctls:
    """Originals read before the first change; ``restore`` writes back what differs."""

    def __init__(self, names=SYSCTLS):
        self.orig = {n: read_sysctl(n) for n in names}
        self.changed: set[str] = set()

    def set(self, name: str, value: str | int) -> None:
        self.changed.add(name)
        write_sysctl(name, value)

    def restore(self) -> list[str]:
        errors = []
        for name, val in self.orig.items():
            try:
                cur = read_sysctl(name)
                differs = (_norm_mask(cur) != _norm_mask(val)) if "bitmap" in name else (
                    cur != val)
                if differs:
                    write_sysctl(name, val)
            except OSError as err:
                errors.append(f"{name}: {err}")
        return errors


def cal_state_file() -> str:
    """``rxlab calibrate``'s state file (same directory and lock as kernel-check's)."""
    return os.path.join(STATE_DIR, "calibrate.json")


def save_state(orig: dict[str, str], path: str | None = None,
               namespaces: tuple[str, ...] = (NS_TX, NS_RX)) -> None:
    path = path or STATE_FILE
    os.makedirs(STATE_DIR, exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w") as fh:
        json.dump({"sysctls": orig, "namespaces": list(namespaces), "pid": os.getpid()}, fh)
    os.replace(tmp, path)


def clear_state(path: str | None = None) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path or STATE_FILE)


def repair_leftovers() -> list[str]:
    """Undo what a killed run of kernel-check or calibrate left: sysctls from the state
    files, the namespaces of both tools (the lock says neither is running now)."""
    notes = []
    for path in (STATE_FILE, cal_state_file()):
        try:
            with open(path) as fh:
                state = json.load(fh)
        except (FileNotFoundError, ValueError):
            state = None
        if state:
            for name, val in state.get("sysctls", {}).items():
                if name in SYSCTLS and read_sysctl(name) != val:
                    write_sysctl(name, val)
                    notes.append(f"restored net.core.{name}={val} left by an interrupted run")
        clear_state(path)
    notes += restore_ksoftirqd()
    for ns in ALL_NAMESPACES:
        if os.path.exists(os.path.join(NETNS_DIR, ns)):
            ip("netns", "del", ns, check=False)
            notes.append(f"deleted left-over namespace {ns}")
    return notes


@contextlib.contextmanager
def run_lock() -> Iterator[None]:
    """One kernel-check or calibrate at a time on this machine (they share sysctls)."""
    os.makedirs(STATE_DIR, exist_ok=True)
    fd = os.open(LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise CannotRun("another kernel-check has held the lock for 60 s") from None
                time.sleep(0.2)
        yield
    finally:
        os.close(fd)


# --- commands and namespaces ---------------------------------------------------------------

def ip(*args: str, check: bool = True, ns: str | None = None) -> subprocess.CompletedProcess:
    argv = ["ip", *(["-n", ns] if ns else []), *args]
    p = subprocess.run(argv, capture_output=True, text=True, timeout=30,
                       stdin=subprocess.DEVNULL)
    if check and p.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)}: {p.stderr.strip()}")
    return p


def netns_exec(ns: str, argv: list[str], check: bool = True,
               timeout: float = 30) -> subprocess.CompletedProcess:
    p = subprocess.run(["ip", "netns", "exec", ns, *argv], capture_output=True, text=True,
                       timeout=timeout, stdin=subprocess.DEVNULL)
    if check and p.returncode != 0:
        raise RuntimeError(f"ip netns exec {ns} {' '.join(argv)}: {p.stderr.strip()}")
    return p


def _check(ret: int, what: str) -> None:
    if ret != 0:
        e = ctypes.get_errno()
        raise OSError(e, f"{what}: {os.strerror(e)}")


def enter_netns(ns: str, sysfs: bool = True) -> None:
    """In a fresh child process: join ``ns`` (and see its devices under /sys)."""
    c = libc()
    fd = os.open(os.path.join(NETNS_DIR, ns), os.O_RDONLY | os.O_CLOEXEC)
    try:
        _check(c.setns(fd, CLONE_NEWNET), f"setns({ns})")
    finally:
        os.close(fd)
    if sysfs:
        _check(c.unshare(CLONE_NEWNS), "unshare(CLONE_NEWNS)")
        _check(c.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None), "make / private")
        _check(c.umount2(b"/sys", MNT_DETACH), "umount /sys")
        _check(c.mount(b"sysfs", b"/sys", b"sysfs", 0, None), "mount sysfs")


def in_netns(ns: str, fn: Callable, *args, sysfs: bool = True):
    """``fn(*args)`` in a forked child inside ``ns`` (with its own sysfs unless
    ``sysfs=False``); result or error. The child inherits open file descriptors."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(r)
            try:
                enter_netns(ns, sysfs=sysfs)
                out = ("ok", fn(*args))
            except BaseException as err:  # noqa: BLE001 - sent to the parent
                out = ("err", f"{type(err).__name__}: {err}")
            with os.fdopen(w, "wb") as fh:
                fh.write(pickle.dumps(out))
        finally:
            os._exit(0)
    os.close(w)
    with os.fdopen(r, "rb") as fh:
        data = fh.read()
    os.waitpid(pid, 0)
    if not data:
        raise RuntimeError(f"child in namespace {ns} died")
    kind, val = pickle.loads(data)
    if kind == "err":
        raise RuntimeError(f"in namespace {ns}: {val}")
    return val


def _write_files(items: list[tuple[str, str]]) -> None:
    for path, value in items:
        with open(path, "w") as fh:
            fh.write(value)


def _read_files(paths: list[str]) -> dict[str, str]:
    out = {}
    for p in paths:
        with open(p) as fh:
            out[p] = fh.read().strip()
    return out


def queue_path(dev: str, kind: str, q: int, name: str) -> str:
    return f"/sys/class/net/{dev}/queues/{kind}-{q}/{name}"


def dev_stat_paths(dev: str) -> list[str]:
    return [f"/sys/class/net/{dev}/statistics/{n}"
            for n in ("rx_packets", "rx_dropped", "tx_packets", "tx_dropped")]


def _offload_features(ns: str, dev: str) -> dict[str, str]:
    return parse_offload(netns_exec(ns, ["ethtool", "-k", dev]).stdout)


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


def _udp_stats() -> dict:
    with open("/proc/net/snmp") as fh:
        snmp = parse_snmp_udp(fh.read())
    with open("/proc/net/udp") as fh:
        socks = parse_proc_udp(fh.read())
    return {"snmp": snmp, "sockets": socks}


class Lab:
    """Namespaces ``rxkc_tx``/``rxkc_rx``, veth ``rxkc0``/``rxkc1`` with 4 queues each
    (other names with ``names``, e.g. ``CAL_NAMES``)."""

    def __init__(self, names: dict[str, str] | None = None):
        self.up = False
        self.tx_features: dict[str, str] | None = None  # sender veth, before tx off
        n = names or {"ns_tx": NS_TX, "ns_rx": NS_RX, "dev_tx": DEV_TX, "dev_rx": DEV_RX,
                      "ip_tx": IP_TX, "ip_rx": IP_RX}
        self.ns_tx, self.ns_rx = n["ns_tx"], n["ns_rx"]
        self.dev_tx, self.dev_rx = n["dev_tx"], n["dev_rx"]
        self.ip_tx, self.ip_rx = n["ip_tx"], n["ip_rx"]

    def setup(self) -> None:
        for ns in (self.ns_tx, self.ns_rx):
            if os.path.exists(os.path.join(NETNS_DIR, ns)):
                ip("netns", "del", ns, check=False)
        self.up = True  # from here on teardown() must run
        ip("netns", "add", self.ns_tx)
        ip("netns", "add", self.ns_rx)
        q = str(QUEUES)
        ip("link", "add", self.dev_tx, "numtxqueues", q, "numrxqueues", q, "netns", self.ns_tx,
           "type", "veth", "peer", "name", self.dev_rx, "numtxqueues", q, "numrxqueues", q,
           "netns", self.ns_rx)
        ip("addr", "add", f"{self.ip_tx}/24", "dev", self.dev_tx, ns=self.ns_tx)
        ip("addr", "add", f"{self.ip_rx}/24", "dev", self.dev_rx, ns=self.ns_rx)
        for ns, dev in ((self.ns_tx, self.dev_tx), (self.ns_rx, self.dev_rx)):
            ip("link", "set", "lo", "up", ns=ns)
            ip("link", "set", dev, "up", ns=ns)

    def teardown(self) -> list[str]:
        errors = []
        for ns in (self.ns_tx, self.ns_rx):
            if os.path.exists(os.path.join(NETNS_DIR, ns)):
                p = ip("netns", "del", ns, check=False)
                if p.returncode != 0:
                    errors.append(f"ip netns del {ns}: {p.stderr.strip()}")
        self.up = False
        return errors

    # per-queue settings on the receiving veth
    def set_rx_queues(self, rps_cpus: str | list[str] | None = None,
                      rps_flow_cnt: int | None = None) -> None:
        items = []
        for q in range(QUEUES):
            if rps_cpus is not None:
                m = rps_cpus[q] if isinstance(rps_cpus, list) else rps_cpus
                items.append((queue_path(self.dev_rx, "rx", q, "rps_cpus"), m))
            if rps_flow_cnt is not None:
                items.append((queue_path(self.dev_rx, "rx", q, "rps_flow_cnt"), str(rps_flow_cnt)))
        in_netns(self.ns_rx, _write_files, items)

    def read_rx_queues(self) -> dict[str, str]:
        paths = [queue_path(self.dev_rx, "rx", q, n) for q in range(QUEUES)
                 for n in ("rps_cpus", "rps_flow_cnt")]
        return in_netns(self.ns_rx, _read_files, paths)

    def reset_device(self) -> None:
        """Undo per-experiment device state: RPS maps, RFS tables, tc hooks, the sender
        veth's offloads."""
        self.restore_tx_offload()
        self.set_rx_queues("0", 0)
        for ns, dev in ((self.ns_tx, self.dev_tx), (self.ns_rx, self.dev_rx)):
            netns_exec(ns, ["tc", "qdisc", "del", "dev", dev, "clsact"], check=False)

    def dev_stats(self) -> dict[str, dict[str, int]]:
        rx = in_netns(self.ns_rx, _read_files, dev_stat_paths(self.dev_rx))
        tx = in_netns(self.ns_tx, _read_files, dev_stat_paths(self.dev_tx))
        out = {}
        for dev, vals in ((self.dev_rx, rx), (self.dev_tx, tx)):
            out[dev] = {os.path.basename(p): int(v) for p, v in vals.items()}
        return out

    def udp_stats(self) -> dict:
        """The receiver namespace's UDP counters (``/proc/net/snmp``) and, per connected
        socket, the peer's source port -> socket drops (receive buffer full) and bytes
        queued (``/proc/net/udp``). /proc/net follows the reading thread's namespace."""
        return in_netns(self.ns_rx, _udp_stats)

    def add_clsact(self, ns: str, dev: str) -> None:
        netns_exec(ns, ["tc", "qdisc", "add", "dev", dev, "clsact"])

    def tx_offload_off(self) -> None:
        """``ethtool -K rxkc0 tx off`` on the sender veth (with tx checksum offload on,
        CHECKSUM_PARTIAL is lost when the cpumap kthread rebuilds the skb from the
        xdp_frame, kernel/bpf/cpumap.c, and UDP drops every packet as InCsumErrors; seen
        on Linux 6.18). The features it turns off
        (tx checksumming and what depends on it) are restored by ``restore_tx_offload``."""
        if self.tx_features is None:
            self.tx_features = _offload_features(self.ns_tx, self.dev_tx)
        netns_exec(self.ns_tx, ["ethtool", "-K", self.dev_tx, "tx", "off"])

    def restore_tx_offload(self) -> list[str]:
        if self.tx_features is None:
            return []
        now = _offload_features(self.ns_tx, self.dev_tx)
        args = []
        for name, val in self.tx_features.items():
            if now.get(name) != val:
                args += [name, val]
        errors = []
        if args:
            p = netns_exec(self.ns_tx, ["ethtool", "-K", self.dev_tx, *args], check=False)
            left = {k: v for k, v in _offload_features(self.ns_tx, self.dev_tx).items()
                    if self.tx_features.get(k) != v}
            if left:
                errors.append(f"ethtool -K {self.dev_tx}: still differs {left} "
                              f"({p.stderr.strip()})")
        self.tx_features = None
        return errors

    def ensure_clsact(self, ns: str, dev: str) -> None:
        """Add the clsact hook unless it is there (the u32 slowdown adds it too)."""
        shown = netns_exec(ns, ["tc", "qdisc", "show", "dev", dev]).stdout
        if "clsact" not in shown:
            self.add_clsact(ns, dev)


# --- /proc/net/softnet_stat ------------------------------------------------------------------

SOFTNET_COLS = {"processed": 0, "dropped": 1, "time_squeeze": 2, "received_rps": 9,
                "flow_limit_count": 10}


def parse_softnet(text: str) -> dict[int, dict[str, int]]:
    """Rows keyed by the CPU number of column 12 (offline CPUs have no line)."""
    out = {}
    for i, line in enumerate(text.split("\n")):
        cols = line.split()
        if not cols:
            continue
        cpu = int(cols[12], 16) if len(cols) > 12 else i
        out[cpu] = {k: int(cols[c], 16) for k, c in SOFTNET_COLS.items() if c < len(cols)}
    return out


def softnet() -> dict[int, dict[str, int]]:
    with open("/proc/net/softnet_stat") as fh:
        return parse_softnet(fh.read())


def softnet_delta(a: dict, b: dict) -> dict[int, dict[str, int]]:
    return {c: {k: (b[c][k] - a.get(c, {}).get(k, 0)) & 0xFFFFFFFF for k in b[c]} for c in b}


# --- signals --------------------------------------------------------------------------------

_PENDING: list[int] = []  # signals received inside exit_on_signals


def _raise_for(signum: int) -> None:
    if signum == signal.SIGINT:
        raise KeyboardInterrupt
    raise SystemExit(128 + signum)


def check_signals() -> None:
    """Raise again for a signal already received: an exception raised by a signal
    handler while Python runs a finalizer (``__del__``) is printed and dropped, so the
    experiment loops call this between runs."""
    if _PENDING:
        _raise_for(_PENDING[-1])


@contextlib.contextmanager
def exit_on_signals() -> Iterator[None]:
    """SIGTERM and SIGHUP raise SystemExit (so ``finally`` blocks run), SIGINT
    KeyboardInterrupt; each is also recorded for ``check_signals``. Main thread only."""
    def _handler(signum, _frame):
        _PENDING.append(signum)
        _raise_for(signum)
    _PENDING.clear()
    old = {}
    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        with contextlib.suppress(ValueError):
            if sig == signal.SIGINT and signal.getsignal(sig) is signal.SIG_IGN:
                continue  # started with Ctrl-C ignored (a background job): keep it so
            old[sig] = signal.signal(sig, _handler)
    try:
        yield
    finally:
        for sig, h in old.items():
            signal.signal(sig, h)


@contextlib.contextmanager
def signals_ignored() -> Iterator[None]:
    """Cleanup must not be cut short by a second Ctrl-C or SIGTERM."""
    old = {}
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        with contextlib.suppress(ValueError):
            old[sig] = signal.signal(sig, signal.SIG_IGN)
    try:
        yield
    finally:
        for sig, h in old.items():
            signal.signal(sig, h)


# --- /proc/stat: per-CPU time ------------------------------------------------------------------

PROC_STAT_FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")


def parse_proc_stat(text: str) -> dict[int, dict[str, int]]:
    """``cpuN`` lines of /proc/stat -> {N: {field: clock ticks (USER_HZ)}}; the kernel
    fills them in fs/proc/stat.c show_stat() from kcpustat_cpu(N).cpustat[]."""
    out = {}
    for line in text.splitlines():
        cols = line.split()
        if not cols or not cols[0].startswith("cpu") or cols[0] == "cpu":
            continue
        vals = [int(x) for x in cols[1:1 + len(PROC_STAT_FIELDS)]]
        out[int(cols[0][3:])] = dict(zip(PROC_STAT_FIELDS, vals, strict=False))
    return out


def proc_stat() -> dict[int, dict[str, int]]:
    with open("/proc/stat") as fh:
        return parse_proc_stat(fh.read())


def stat_delta(a: dict, b: dict) -> dict[int, dict[str, int]]:
    return {c: {k: b[c][k] - a.get(c, {}).get(k, 0) for k in b[c]} for c in b}


# --- ksoftirqd priority -----------------------------------------------------------------------

def ksoftirqd_pid(cpu: int) -> int | None:
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/comm") as fh:
                if fh.read().strip() == f"ksoftirqd/{cpu}":
                    return int(pid)
        except OSError:
            continue
    return None


def _ksoftirqd_file() -> str:
    return os.path.join(STATE_DIR, "ksoftirqd.json")


def _set_policy(pid: int, policy: int, prio: int) -> None:
    os.sched_setscheduler(pid, policy, os.sched_param(prio))


def restore_ksoftirqd() -> list[str]:
    """Put back the scheduling policy a run saved (also after a SIGKILL)."""
    notes = []
    try:
        with open(_ksoftirqd_file()) as fh:
            saved = json.load(fh)
    except (FileNotFoundError, ValueError):
        return notes
    for pid, (policy, prio) in saved.items():
        try:
            if (os.sched_getscheduler(int(pid)), os.sched_getparam(int(pid)).sched_priority) \
                    != (policy, prio):
                _set_policy(int(pid), policy, prio)
                notes.append(f"restored the scheduling policy of pid {pid} (ksoftirqd)")
        except (ProcessLookupError, PermissionError) as err:
            notes.append(f"ksoftirqd pid {pid}: {err}")
    clear_state(_ksoftirqd_file())
    return notes


@contextlib.contextmanager
def ksoftirqd_fifo(cpu: int) -> Iterator[dict]:
    """``ksoftirqd/<cpu>`` at SCHED_FIFO 1 for the block, so that the receive softirq
    owns the CPU as on the model's otherwise idle CPU (under SCHED_OTHER it shares the
    CPU with whatever else runs there: kernel/softirq.c defers to ksoftirqd after 2 ms
    or 10 restarts). The real-time throttle (sched_rt_runtime_us, 95 % by default)
    still leaves the rest of the machine a share. The old policy is saved to a state
    file first and restored on the way out (and by the next run after a SIGKILL)."""
    pid = ksoftirqd_pid(cpu)
    info = {"pid": pid, "changed": False}
    if pid is None:
        yield info
        return
    old = (os.sched_getscheduler(pid), os.sched_getparam(pid).sched_priority)
    os.makedirs(STATE_DIR, exist_ok=True)
    with open(_ksoftirqd_file(), "w") as fh:
        json.dump({str(pid): list(old)}, fh)
    try:
        _set_policy(pid, os.SCHED_FIFO, 1)
        info["changed"] = True
        yield info
    finally:
        with signals_ignored():
            restore_ksoftirqd()
