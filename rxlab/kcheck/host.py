"""The real-kernel side: preflight, sysctl guard, the namespace lab, counters.

Safety rules of ``../shared/reference/kernel-lab.md`` sec. 12, as implemented here:

* preflight (``cannot_run``): root, CPUs 0 and 1, ``ip`` and ``tc``, the kernel options,
  the initial network namespace (the global ``net.core`` sysctls exist only there);
* every sysctl written is read first and written back in ``finally`` (``Sysctls``); the
  originals are also kept in a state file, so a run killed with SIGKILL is repaired by
  the next run before it changes anything;
* dedicated namespaces (``rxkc_tx``/``rxkc_rx``), left-overs deleted before setup and
  both deleted on exit; SIGTERM/SIGHUP raise SystemExit so ``finally`` runs, and signals
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


def save_state(orig: dict[str, str]) -> None:
    os.makedirs(STATE_DIR, exist_ok=True)
    tmp = STATE_FILE + ".tmp"
    with open(tmp, "w") as fh:
        json.dump({"sysctls": orig, "namespaces": [NS_TX, NS_RX], "pid": os.getpid()}, fh)
    os.replace(tmp, STATE_FILE)


def clear_state() -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(STATE_FILE)


def repair_leftovers() -> list[str]:
    """Undo what a killed run left: sysctls from the state file, our namespaces."""
    notes = []
    try:
        with open(STATE_FILE) as fh:
            state = json.load(fh)
    except (FileNotFoundError, ValueError):
        state = None
    if state:
        for name, val in state.get("sysctls", {}).items():
            if name in SYSCTLS and read_sysctl(name) != val:
                write_sysctl(name, val)
                notes.append(f"restored net.core.{name}={val} left by an interrupted run")
    for ns in (NS_TX, NS_RX):
        if os.path.exists(os.path.join(NETNS_DIR, ns)):
            ip("netns", "del", ns, check=False)
            notes.append(f"deleted left-over namespace {ns}")
    clear_state()
    return notes


@contextlib.contextmanager
def run_lock() -> Iterator[None]:
    """One kernel-check at a time on this machine (they share the names and sysctls)."""
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
    """Namespaces ``rxkc_tx``/``rxkc_rx``, veth ``rxkc0``/``rxkc1`` with 4 queues each."""

    def __init__(self):
        self.up = False
        self.tx_features: dict[str, str] | None = None  # sender veth, before tx off

    def setup(self) -> None:
        for ns in (NS_TX, NS_RX):
            if os.path.exists(os.path.join(NETNS_DIR, ns)):
                ip("netns", "del", ns, check=False)
        self.up = True  # from here on teardown() must run
        ip("netns", "add", NS_TX)
        ip("netns", "add", NS_RX)
        q = str(QUEUES)
        ip("link", "add", DEV_TX, "numtxqueues", q, "numrxqueues", q, "netns", NS_TX,
           "type", "veth", "peer", "name", DEV_RX, "numtxqueues", q, "numrxqueues", q,
           "netns", NS_RX)
        ip("addr", "add", f"{IP_TX}/24", "dev", DEV_TX, ns=NS_TX)
        ip("addr", "add", f"{IP_RX}/24", "dev", DEV_RX, ns=NS_RX)
        for ns, dev in ((NS_TX, DEV_TX), (NS_RX, DEV_RX)):
            ip("link", "set", "lo", "up", ns=ns)
            ip("link", "set", dev, "up", ns=ns)

    def teardown(self) -> list[str]:
        errors = []
        for ns in (NS_TX, NS_RX):
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
                items.append((queue_path(DEV_RX, "rx", q, "rps_cpus"), m))
            if rps_flow_cnt is not None:
                items.append((queue_path(DEV_RX, "rx", q, "rps_flow_cnt"), str(rps_flow_cnt)))
        in_netns(NS_RX, _write_files, items)

    def read_rx_queues(self) -> dict[str, str]:
        paths = [queue_path(DEV_RX, "rx", q, n) for q in range(QUEUES)
                 for n in ("rps_cpus", "rps_flow_cnt")]
        return in_netns(NS_RX, _read_files, paths)

    def reset_device(self) -> None:
        """Undo per-experiment device state: RPS maps, RFS tables, tc hooks, the sender
        veth's offloads."""
        self.restore_tx_offload()
        self.set_rx_queues("0", 0)
        for ns, dev in ((NS_TX, DEV_TX), (NS_RX, DEV_RX)):
            netns_exec(ns, ["tc", "qdisc", "del", "dev", dev, "clsact"], check=False)

    def dev_stats(self) -> dict[str, dict[str, int]]:
        rx = in_netns(NS_RX, _read_files, dev_stat_paths(DEV_RX))
        tx = in_netns(NS_TX, _read_files, dev_stat_paths(DEV_TX))
        out = {}
        for dev, vals in ((DEV_RX, rx), (DEV_TX, tx)):
            out[dev] = {os.path.basename(p): int(v) for p, v in vals.items()}
        return out

    def udp_stats(self) -> dict:
        """The receiver namespace's UDP counters (``/proc/net/snmp``) and, per connected
        socket, the peer's source port -> socket drops (receive buffer full) and bytes
        queued (``/proc/net/udp``). /proc/net follows the reading thread's namespace."""
        return in_netns(NS_RX, _udp_stats)

    def add_clsact(self, ns: str, dev: str) -> None:
        netns_exec(ns, ["tc", "qdisc", "add", "dev", dev, "clsact"])

    def tx_offload_off(self) -> None:
        """``ethtool -K rxkc0 tx off`` on the sender veth (kernel-lab.md sec. 9.3: with tx
        checksum offload on, CHECKSUM_PARTIAL is lost in the cpumap's xdp_frame -> skb
        rebuild and UDP drops every packet as InCsumErrors). The features it turns off
        (tx checksumming and what depends on it) are restored by ``restore_tx_offload``."""
        if self.tx_features is None:
            self.tx_features = _offload_features(NS_TX, DEV_TX)
        netns_exec(NS_TX, ["ethtool", "-K", DEV_TX, "tx", "off"])

    def restore_tx_offload(self) -> list[str]:
        if self.tx_features is None:
            return []
        now = _offload_features(NS_TX, DEV_TX)
        args = []
        for name, val in self.tx_features.items():
            if now.get(name) != val:
                args += [name, val]
        errors = []
        if args:
            p = netns_exec(NS_TX, ["ethtool", "-K", DEV_TX, *args], check=False)
            left = {k: v for k, v in _offload_features(NS_TX, DEV_TX).items()
                    if self.tx_features.get(k) != v}
            if left:
                errors.append(f"ethtool -K {DEV_TX}: still differs {left} "
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

@contextlib.contextmanager
def exit_on_signals() -> Iterator[None]:
    """SIGTERM and SIGHUP raise SystemExit (so ``finally`` blocks run); SIGINT raises
    KeyboardInterrupt as usual. Main thread only."""
    def _raise(signum, _frame):
        raise SystemExit(128 + signum)
    old = {}
    for sig in (signal.SIGTERM, signal.SIGHUP):
        with contextlib.suppress(ValueError):
            old[sig] = signal.signal(sig, _raise)
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
