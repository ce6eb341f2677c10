"""Running code and commands inside a named network namespace, without a shell.

``in_netns(ns, fn, *args)`` forks; the child enters the namespace (``setns`` on
``/run/netns/NS``), unshares its mount namespace and mounts a fresh sysfs on ``/sys`` (the
way ``ip netns exec`` does: sysfs shows the devices of the namespace that mounted it),
runs ``fn`` and sends the result back through a pipe (signals held, see ``in_netns``).
Python 3.11 has no ``os.setns``, so the system calls go through ctypes. ``run_cmd`` runs
an argument list (never a shell) in the current or, through ``in_netns``, another
namespace.

Names are validated first: device names the way the kernel's ``dev_valid_name()`` does
(1-15 bytes, not ``.``/``..``, no ``/``, ``:`` or whitespace), namespace names the way
``ip netns`` does (no ``/``, not ``.``/``..``).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import pickle
import re
import signal
import subprocess
from collections.abc import Callable
from typing import Any, TypeVar

from rxlab.errors import UsageError
from rxlab.host.signals import SIGNALS

NETNS_RUN_DIR = "/run/netns"
CLONE_NEWNET = 0x40000000
CLONE_NEWNS = 0x00020000
MS_REC, MS_PRIVATE = 0x4000, 1 << 18
MNT_DETACH = 2

_DEV_RE = re.compile(r"[^/:\s]{1,15}")  # fullmatch: "$" would let a final newline in
_NS_RE = re.compile(r"[^/\s\x00]{1,255}")

T = TypeVar("T")


def check_dev(name: str) -> str:
    """A device name the kernel would accept (``dev_valid_name``), else UsageError."""
    if not isinstance(name, str) or not _DEV_RE.fullmatch(name) or name in (".", "..") or (
            len(name.encode()) > 15):
        raise UsageError(f"bad device name {name!r}: 1-15 characters, no '/', ':' or "
                         "whitespace, not '.' or '..'")
    return name


def check_netns(name: str | None) -> str | None:
    """A namespace name that exists under /run/netns (None = the current namespace)."""
    if name is None:
        return None
    if not isinstance(name, str) or not _NS_RE.fullmatch(name) or name in (".", ".."):
        raise UsageError(f"bad network namespace name {name!r}: no '/' or whitespace")
    if not os.path.exists(os.path.join(NETNS_RUN_DIR, name)):
        raise UsageError(f"network namespace {name!r} does not exist (see `ip netns list`)")
    return name


def in_initial_netns() -> bool:
    """True when this process shares the network namespace of PID 1 (read afresh: a
    forked child may have moved)."""
    from rxlab.host.caps import Capabilities
    return Capabilities().initial_netns


_libc = None


def _libc_fn():
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    return _libc


def _check(ret: int, what: str) -> None:
    if ret != 0:
        e = ctypes.get_errno()
        raise OSError(e, f"{what}: {os.strerror(e)}")


def _enter(ns: str, sysfs: bool = True) -> None:
    """In a fresh child: join ``ns`` and (``sysfs``) see its devices under /sys."""
    libc = _libc_fn()
    fd = os.open(os.path.join(NETNS_RUN_DIR, ns), os.O_RDONLY | os.O_CLOEXEC)
    try:
        _check(libc.setns(fd, CLONE_NEWNET), f"setns({ns})")
    finally:
        os.close(fd)
    if not sysfs:  # /proc/net and sockets follow the namespace; /sys needs a remount
        return
    _check(libc.unshare(CLONE_NEWNS), "unshare(CLONE_NEWNS)")
    _check(libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None), "mount --make-rprivate /")
    _check(libc.umount2(b"/sys", MNT_DETACH), "umount /sys")
    _check(libc.mount(b"sysfs", b"/sys", b"sysfs", 0, None), "mount sysfs")




def in_netns(ns: str | None, fn: Callable[..., T], *args: Any, sysfs: bool = True) -> T:
    """``fn(*args)`` run inside namespace ``ns`` (here when None); result or its exception.
    The child sees the namespace's devices under /sys unless ``sysfs=False`` (enough for
    /proc/net, sockets and netlink; it also inherits open file descriptors).

    SIGINT, SIGTERM and SIGHUP are held while forking (a handler that raises must not run
    inside the interpreter's at-fork hooks, where its exception would be lost) and stay
    blocked in the child and the commands it starts: the child's one short call runs to
    its end, and the parent, which takes the signal, waits for it, so whoever then undoes
    the call's work never races it."""
    if ns is None:
        return fn(*args)
    check_netns(ns)
    before = signal.pthread_sigmask(signal.SIG_BLOCK, ())
    r, w = os.pipe()
    try:
        signal.pthread_sigmask(signal.SIG_BLOCK, SIGNALS)  # held: see above
        pid = os.fork()
    except BaseException:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)
        os.close(r)
        os.close(w)
        raise
    if pid == 0:  # child: never returns
        code = 0
        try:
            os.close(r)
            try:
                _enter(ns, sysfs)
                out: tuple = ("ok", fn(*args))
            except BaseException as err:  # noqa: BLE001 - sent to the parent
                out = ("err", err)
            try:
                data = pickle.dumps(out)
            except Exception as err:  # noqa: BLE001 - an unpicklable exception
                data = pickle.dumps(("err", RuntimeError(f"{type(err).__name__}: {err}")))
            with os.fdopen(w, "wb") as fh:
                fh.write(data)
        except BaseException:  # noqa: BLE001
            code = 1
        finally:
            os._exit(code)
    fh = None
    try:
        os.close(w)
        fh = os.fdopen(r, "rb")
        signal.pthread_sigmask(signal.SIG_SETMASK, before)  # a held signal is taken here
        data = fh.read()
    finally:
        if fh is None:
            os.close(r)
        else:
            fh.close()  # a child still writing gets EPIPE and ends
        _, status = os.waitpid(pid, 0)
    if not data:
        raise RuntimeError(f"child in netns {ns!r} died (status {status})")
    kind, value = pickle.loads(data)
    if kind == "err":
        raise value
    return value


def run_cmd(argv: list[str], timeout: float = 10.0) -> subprocess.CompletedProcess:
    """Run an argument list (no shell) in the current namespace; output as text."""
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                              check=False, stdin=subprocess.DEVNULL)
    except FileNotFoundError:
        raise UsageError(f"{argv[0]}: command not found (install it, e.g. apt-get install "
                         f"{argv[0]})") from None


def ip(*args: str, check: bool = True, ns: str | None = None) -> subprocess.CompletedProcess:
    """``ip [-n NS] ARGS``; RuntimeError with ip's message when ``check`` and it fails."""
    argv = ["ip", *(["-n", ns] if ns else []), *args]
    p = run_cmd(argv, timeout=30)
    if check and p.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)}: {p.stderr.strip()}")
    return p


def netns_exec(ns: str, argv: list[str], check: bool = True,
               timeout: float = 30) -> subprocess.CompletedProcess:
    """A command inside ``ns`` (``ip netns exec``, which also remounts /sys there)."""
    p = run_cmd(["ip", "netns", "exec", ns, *argv], timeout=timeout)
    if check and p.returncode != 0:
        raise RuntimeError(f"ip netns exec {ns} {' '.join(argv)}: {p.stderr.strip()}")
    return p


def have_cmd(name: str) -> bool:
    from shutil import which
    return which(name) is not None
