"""Changing a real host safely: the preflight, the sysctl guard, the state files that
let the next run repair a killed one, the machine-wide lock, ksoftirqd's priority.

Safety rules (docs/kernel-check.md, Safety), as implemented here for ``kernel-check`` and
``calibrate``:

* preflight (``cannot_run``): root, CPUs 0 and 1, ``ip`` and ``tc``, what the lab needs
  from the kernel (``rxlab.host.caps``), the initial network namespace (the global
  ``net.core`` sysctls exist only there);
* every sysctl written is read first and written back in ``finally`` (``Sysctls``); the
  originals are also kept in a state file, so a run killed with SIGKILL is repaired by
  the next run before it changes anything; a sysctl this kernel lacks is left alone, and
  asking it for anything but "off" raises ``CannotRun`` with the cause;
* the lab's namespaces (``rxlab.host.lab``) left over by a killed run are deleted;
  signals are handled by ``rxlab.host.signals``.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import time
from collections.abc import Iterator

from rxlab import cpuset
from rxlab.host import caps
from rxlab.host.lab import CAL_NAMES, KCHECK_NAMES
from rxlab.host.netns import NETNS_RUN_DIR, ip
from rxlab.host.procfs import ksoftirqd_pid
from rxlab.host.signals import signals_ignored

ALL_NAMESPACES = (KCHECK_NAMES["ns_tx"], KCHECK_NAMES["ns_rx"], CAL_NAMES["ns_tx"],
                  CAL_NAMES["ns_rx"])
STATE_DIR = "/run/rxlab-kcheck"
STATE_FILE = os.path.join(STATE_DIR, "state.json")
LOCK_FILE = os.path.join(STATE_DIR, "lock")
CORE = "/proc/sys/net/core"
# the sysctls a run may write (all global, initial namespace only)
SYSCTLS = ("netdev_max_backlog", "flow_limit_cpu_bitmap", "rps_sock_flow_entries")

# what the lab needs from the kernel (rxlab.host.caps features); flow limit is asked for by
# the one check that uses it (checks.NEEDS), not here
LAB_NEEDS = ("net_core", "rps", "netns", "veth", "bpf", "cls_bpf", "clsact")


class CannotRun(Exception):
    """The kernel checks cannot run on this machine (the message says why)."""


# --- preflight ----------------------------------------------------------------------------

def cannot_run() -> str | None:
    """Why the lab cannot run here, or None."""
    cap = caps.probe()
    if not cap.root_user:
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
    if not cap.initial_netns:
        return "not in the initial network namespace (the global net.core sysctls live there)"
    missing = cap.missing(LAB_NEEDS)
    if missing:
        return "; ".join(missing)
    if not os.path.isdir("/sys/class/net"):
        return "no sysfs at /sys"
    return None


# --- sysctls -----------------------------------------------------------------------------

def read_sysctl(name: str) -> str:
    with open(os.path.join(CORE, name)) as fh:
        return fh.read().strip()


def write_sysctl(name: str, value: str | int) -> None:
    if name not in SYSCTLS:
        raise ValueError(f"kernel-check does not write net.core.{name}")
    with open(os.path.join(CORE, name), "w") as fh:
        fh.write(f"{value}\n")


def _same(name: str, a: str, b: str) -> bool:
    if name.endswith("_bitmap"):  # a CPU mask: compared as the kernel parses it
        return cpuset.mask_value(a) == cpuset.mask_value(b)
    return a == b


def _is_off(value: str | int) -> bool:
    """The value that leaves a feature unused (flow limit on no CPU, no RFS table)."""
    return str(value).strip() in ("0", "")


def _absent_cause(name: str) -> str:
    return caps.probe().sysctl_why_not(name) or f"{CORE}/{name} does not exist"


class Sysctls:
    """Originals read before the first change; ``restore`` writes back what differs.

    Only the sysctls this kernel has are kept: writing an absent one's "off" value is a
    no-op (a kernel without CONFIG_NET_FLOW_LIMIT has flow limit off everywhere), any
    other value raises ``CannotRun`` with the cause."""

    def __init__(self, names=SYSCTLS):
        self.absent = {n: _absent_cause(n) for n in names
                       if not os.path.exists(os.path.join(CORE, n))}
        self.orig = {n: read_sysctl(n) for n in names if n not in self.absent}
        self.changed: set[str] = set()

    def set(self, name: str, value: str | int) -> None:
        if name in self.absent:
            if _is_off(value):
                return
            raise CannotRun(f"net.core.{name}={value}: {self.absent[name]}")
        self.changed.add(name)
        write_sysctl(name, value)

    def restore(self) -> list[str]:
        errors = []
        for name, val in self.orig.items():
            try:
                if not _same(name, read_sysctl(name), val):
                    write_sysctl(name, val)
            except OSError as err:
                errors.append(f"{name}: {err}")
        return errors


def cal_state_file() -> str:
    """``rxlab calibrate``'s state file (same directory and lock as kernel-check's)."""
    return os.path.join(STATE_DIR, "calibrate.json")


def save_state(orig: dict[str, str], path: str | None = None,
               namespaces: tuple[str, ...] = ALL_NAMESPACES[:2]) -> None:
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
                if name in SYSCTLS and not _same(name, read_sysctl(name), val):
                    write_sysctl(name, val)
                    notes.append(f"restored net.core.{name}={val} left by an interrupted run")
        clear_state(path)
    notes += restore_ksoftirqd()
    for ns in ALL_NAMESPACES:
        if os.path.exists(os.path.join(NETNS_RUN_DIR, ns)):
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


# --- ksoftirqd priority -----------------------------------------------------------------------

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
