"""The veth lab: two network namespaces joined by a veth pair, the one rxlab uses for
``kernel-check``, ``calibrate`` and the tests of ``rxlab host``.

Safety rules (docs/kernel-check.md, Safety): dedicated names per tool (``rxkc_*`` for
kernel-check, ``rxcal_*`` for calibrate, ``Lab.named(prefix)`` for tests), left-overs
deleted before setup, both namespaces deleted on exit (as a context manager, SIGTERM and
SIGHUP raise SystemExit so that runs), traffic only between the two namespaces.
Commands are argument lists, never a shell. Per-queue sysfs files exist only in the
namespace that mounted sysfs, so they are read and written by a forked child that joins
the namespace (``rxlab.host.netns.in_netns``).

    with Lab.named("rxt") as lab:        # namespaces rxt_tx / rxt_rx, veth rxt0 / rxt1
        lab.run(lab.ns_tx, ["ping", "-c", "1", lab.ip_rx])
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess

from rxlab.host import caps, procfs
from rxlab.host.netns import NETNS_RUN_DIR, in_netns, ip, netns_exec
from rxlab.host.signals import exit_on_signals

QUEUES = 4
KCHECK_NAMES = {"ns_tx": "rxkc_tx", "ns_rx": "rxkc_rx", "dev_tx": "rxkc0", "dev_rx": "rxkc1",
                "ip_tx": "10.77.0.1", "ip_rx": "10.77.0.2"}
# rxlab calibrate's lab: other names, so a left-over of one tool is never taken for the other's
CAL_NAMES = {"ns_tx": "rxcal_tx", "ns_rx": "rxcal_rx", "dev_tx": "rxcal0", "dev_rx": "rxcal1",
             "ip_tx": "10.78.0.1", "ip_rx": "10.78.0.2"}


def unavailable() -> str | None:
    """Why a lab cannot be made here (None when it can)."""
    cap = caps.probe()
    if not cap.root_user:
        return "needs root (creates network namespaces and veth devices)"
    if shutil.which("ip") is None:
        return "needs the `ip` command (iproute2)"
    if (os.cpu_count() or 1) < 2:
        return "needs at least 2 CPUs"
    missing = cap.missing(("net_core", "netns", "veth"))
    if missing:
        return "; ".join(missing)
    probe = f"rxlab_probe_{os.getpid()}"
    p = ip("netns", "add", probe, check=False)
    if p.returncode != 0:
        return f"cannot create a network namespace: {p.stderr.strip()}"
    ip("netns", "del", probe, check=False)
    return None


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
    return procfs.parse_offload(netns_exec(ns, ["ethtool", "-k", dev]).stdout)


class Lab:
    """Namespaces ``ns_tx``/``ns_rx`` with veth ``dev_tx``/``dev_rx`` of ``queues``
    queues each (kernel-check's names by default; ``CAL_NAMES`` for calibrate)."""

    def __init__(self, names: dict[str, str] | None = None, queues: int = QUEUES,
                 ipv6: bool = False):
        self.up = False
        self.tx_features: dict[str, str] | None = None  # sender veth, before tx off
        self.threaded = False  # threaded NAPI on the receiving veth (set_threaded)
        n = names or KCHECK_NAMES
        self.ns_tx, self.ns_rx = n["ns_tx"], n["ns_rx"]
        self.dev_tx, self.dev_rx = n["dev_tx"], n["dev_rx"]
        self.ip_tx, self.ip_rx = n["ip_tx"], n["ip_rx"]
        self.queues = queues
        self.ipv6 = ipv6
        self.ip6_tx, self.ip6_rx = "fd00:7278::1", "fd00:7278::2"
        self._exit: contextlib.ExitStack | None = None

    @classmethod
    def named(cls, prefix: str, queues: int = QUEUES, subnet: str = "10.231.0",
              ipv6: bool = False) -> Lab:
        """``{prefix}_tx``/``{prefix}_rx`` with veth ``{prefix}0``/``{prefix}1``."""
        return cls({"ns_tx": f"{prefix}_tx", "ns_rx": f"{prefix}_rx", "dev_tx": f"{prefix}0",
                    "dev_rx": f"{prefix}1", "ip_tx": f"{subnet}.1", "ip_rx": f"{subnet}.2"},
                   queues=queues, ipv6=ipv6)

    def __enter__(self) -> Lab:
        self._exit = contextlib.ExitStack()
        self._exit.enter_context(exit_on_signals())
        try:
            self.setup()
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc) -> None:
        try:
            self.teardown()
        finally:
            if self._exit is not None:
                self._exit.close()
                self._exit = None

    def setup(self) -> None:
        for ns in (self.ns_tx, self.ns_rx):
            if os.path.exists(os.path.join(NETNS_RUN_DIR, ns)):
                ip("netns", "del", ns, check=False)
        self.up = True  # from here on teardown() must run
        ip("netns", "add", self.ns_tx)
        ip("netns", "add", self.ns_rx)
        q = str(self.queues)
        ip("link", "add", self.dev_tx, "numtxqueues", q, "numrxqueues", q, "netns", self.ns_tx,
           "type", "veth", "peer", "name", self.dev_rx, "numtxqueues", q, "numrxqueues", q,
           "netns", self.ns_rx)
        ip("addr", "add", f"{self.ip_tx}/24", "dev", self.dev_tx, ns=self.ns_tx)
        ip("addr", "add", f"{self.ip_rx}/24", "dev", self.dev_rx, ns=self.ns_rx)
        for ns, dev in ((self.ns_tx, self.dev_tx), (self.ns_rx, self.dev_rx)):
            ip("link", "set", "lo", "up", ns=ns)
            ip("link", "set", dev, "up", ns=ns)
        if self.ipv6:
            for ns, dev, a in ((self.ns_tx, self.dev_tx, self.ip6_tx),
                               (self.ns_rx, self.dev_rx, self.ip6_rx)):
                ip("addr", "add", f"{a}/64", "dev", dev, "nodad", ns=ns)

    def teardown(self) -> list[str]:
        errors = []
        for ns in (self.ns_tx, self.ns_rx):
            if os.path.exists(os.path.join(NETNS_RUN_DIR, ns)):
                p = ip("netns", "del", ns, check=False)
                if p.returncode != 0:
                    errors.append(f"ip netns del {ns}: {p.stderr.strip()}")
        self.up = False
        return errors

    @staticmethod
    def argv(ns: str, argv: list[str]) -> list[str]:
        """``argv`` run inside namespace ``ns`` (ip netns exec; no shell)."""
        return ["ip", "netns", "exec", ns, *argv]

    def run(self, ns: str, argv: list[str], timeout: float = 30,
            check: bool = True) -> subprocess.CompletedProcess:
        return netns_exec(ns, argv, check=check, timeout=timeout)

    # per-queue settings on the receiving veth
    def set_rx_queues(self, rps_cpus: str | list[str] | None = None,
                      rps_flow_cnt: int | None = None) -> None:
        items = []
        for q in range(self.queues):
            if rps_cpus is not None:
                m = rps_cpus[q] if isinstance(rps_cpus, list) else rps_cpus
                items.append((queue_path(self.dev_rx, "rx", q, "rps_cpus"), m))
            if rps_flow_cnt is not None:
                items.append((queue_path(self.dev_rx, "rx", q, "rps_flow_cnt"), str(rps_flow_cnt)))
        in_netns(self.ns_rx, _write_files, items)

    def read_rx_queues(self) -> dict[str, str]:
        paths = [queue_path(self.dev_rx, "rx", q, n) for q in range(self.queues)
                 for n in ("rps_cpus", "rps_flow_cnt")]
        return in_netns(self.ns_rx, _read_files, paths)

    def reset_device(self) -> None:
        """Undo per-experiment device state: RPS maps, RFS tables, tc hooks, the sender
        veth's offloads."""
        self.restore_tx_offload()
        if self.threaded:
            self.set_threaded(None)
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
        return in_netns(self.ns_rx, procfs.udp_stats, sysfs=False)

    def netstat(self) -> dict[str, int]:
        """The receiver namespace's /proc/net/netstat counters (``TcpExt.BusyPollRxPackets``:
        LINUX_MIB_BUSYPOLLRXPACKETS counts per namespace, ``dev_net(napi->dev)``)."""
        return in_netns(self.ns_rx, procfs.netstat, sysfs=False)

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

    def write_rx_files(self, items: list[tuple[str, str]]) -> None:
        """(path, value) writes inside the receiving namespace (its /sys/class/net)."""
        in_netns(self.ns_rx, _write_files, items)

    def set_gro(self, on: bool) -> None:
        """GRO on the receiving veth: with it veth has a NAPI of its own
        (drivers/net/veth.c ``veth_gro_requested``), scheduled by the sender's xmit."""
        netns_exec(self.ns_rx, ["ethtool", "-K", self.dev_rx, "gro", "on" if on else "off"])

    def set_threaded(self, cpu: int | None) -> list[int]:
        """Threaded NAPI on the receiving veth, its ``napi/<dev>-<id>`` kthreads pinned to
        ``cpu`` (as Documentation/networking/napi.rst recommends); ``None`` turns it off.
        veth has a NAPI of its own only with GRO (or XDP) on the receiving side
        (drivers/net/veth.c ``veth_gro_requested``; without it the sysfs write fails
        with EIO), and the sender's TSO must be off (``tx_offload_off``) or local UDP
        skips it. Returns the kthreads' pids."""
        path = f"/sys/class/net/{self.dev_rx}/threaded"
        if cpu is None:
            in_netns(self.ns_rx, _write_files, [(path, "0")])
            netns_exec(self.ns_rx, ["ethtool", "-K", self.dev_rx, "gro", "off"])
            self.threaded = False
            return []
        netns_exec(self.ns_rx, ["ethtool", "-K", self.dev_rx, "gro", "on"])
        self.tx_offload_off()
        self.threaded = True
        in_netns(self.ns_rx, _write_files, [(path, "1")])
        pids = procfs.napi_thread_pids(self.dev_rx)
        for pid in pids:
            os.sched_setaffinity(pid, {cpu})
        return pids

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
