"""A throw-away pair of network namespaces joined by a veth pair, for tests and demos.

Follows the safety rules of docs/kernel-check.md: dedicated names, left-overs
deleted before setup, both namespaces deleted on exit (also on SIGTERM, which raises
SystemExit so ``finally`` blocks run), traffic only inside the namespaces. Commands are
argument lists run without a shell.

    with VethLab("rxt") as lab:            # namespaces rxt_tx / rxt_rx
        lab.run(lab.ns_tx, ["ping", "-c", "1", lab.ip_rx])
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys

from rxlab.host.netns import NETNS_RUN_DIR


def unavailable() -> str | None:
    """Why namespace tests cannot run here (None when they can)."""
    if os.geteuid() != 0:
        return "needs root (creates network namespaces and veth devices)"
    for tool in ("ip",):
        if shutil.which(tool) is None:
            return f"needs the `{tool}` command (iproute2)"
    if (os.cpu_count() or 1) < 2:
        return "needs at least 2 CPUs"
    if not os.path.exists("/proc/sys/net/core/netdev_max_backlog"):
        return "not in the initial network namespace (net.core sysctls are not visible)"
    probe = f"rxlab_probe_{os.getpid()}"
    p = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if p.returncode != 0:
        return f"cannot create a network namespace: {p.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return None


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    p = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=20)
    if check and p.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {p.stderr.strip()}")
    return p


class VethLab:
    """Namespaces ``{prefix}_tx`` / ``{prefix}_rx`` with veth ``{prefix}0`` / ``{prefix}1``."""

    def __init__(self, prefix: str = "rxlab", queues: int = 4, subnet: str = "10.231.0",
                 ipv6: bool = False):
        self.ns_tx, self.ns_rx = f"{prefix}_tx", f"{prefix}_rx"
        self.dev_tx, self.dev_rx = f"{prefix}0", f"{prefix}1"
        self.queues = queues
        self.ip_tx, self.ip_rx = f"{subnet}.1", f"{subnet}.2"
        self.ipv6 = ipv6
        self.ip6_tx, self.ip6_rx = "fd00:7278::1", "fd00:7278::2"
        self._old_term = None

    def cleanup(self) -> None:
        for ns in (self.ns_tx, self.ns_rx):
            if os.path.exists(os.path.join(NETNS_RUN_DIR, ns)):
                _ip("netns", "del", ns, check=False)

    def __enter__(self) -> VethLab:
        self.cleanup()
        try:
            import threading
            if threading.current_thread() is threading.main_thread():
                self._old_term = signal.signal(signal.SIGTERM,
                                               lambda *_: sys.exit(128 + signal.SIGTERM))
        except ValueError:
            self._old_term = None
        try:
            self._setup()
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def _setup(self) -> None:
        q = str(self.queues)
        _ip("netns", "add", self.ns_tx)
        _ip("netns", "add", self.ns_rx)
        _ip("link", "add", self.dev_tx, "numtxqueues", q, "numrxqueues", q, "netns",
            self.ns_tx, "type", "veth", "peer", "name", self.dev_rx, "numtxqueues", q,
            "numrxqueues", q, "netns", self.ns_rx)
        for ns, dev, a in ((self.ns_tx, self.dev_tx, self.ip_tx),
                           (self.ns_rx, self.dev_rx, self.ip_rx)):
            _ip("-n", ns, "addr", "add", f"{a}/24", "dev", dev)
            _ip("-n", ns, "link", "set", "lo", "up")
            _ip("-n", ns, "link", "set", dev, "up")
        if self.ipv6:
            for ns, dev, a in ((self.ns_tx, self.dev_tx, self.ip6_tx),
                               (self.ns_rx, self.dev_rx, self.ip6_rx)):
                _ip("-n", ns, "addr", "add", f"{a}/64", "dev", dev, "nodad")

    def __exit__(self, *exc) -> None:
        try:
            self.cleanup()
        finally:
            if self._old_term is not None:
                signal.signal(signal.SIGTERM, self._old_term)
                self._old_term = None

    @staticmethod
    def argv(ns: str, argv: list[str]) -> list[str]:
        """``argv`` run inside namespace ``ns`` (ip netns exec; no shell)."""
        return ["ip", "netns", "exec", ns, *argv]

    def run(self, ns: str, argv: list[str], timeout: float = 30,
            check: bool = True) -> subprocess.CompletedProcess:
        p = subprocess.run(self.argv(ns, argv), capture_output=True, text=True,
                           timeout=timeout, stdin=subprocess.DEVNULL)
        if check and p.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)} in {ns}: {p.stderr.strip()}")
        return p
