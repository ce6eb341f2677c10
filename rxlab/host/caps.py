"""What the running kernel has: the one capability probe of rxlab's real-host layer.

Kernels differ in their build options (flow limit, RPS, BPF, XDP sockets, busy polling),
in the sysctls they expose and in what a driver supports. ``rxlab host``, ``kernel-check``
and ``calibrate`` ask this module instead of keeping lists of their own, and each refusal
names its cause: "kernel built without CONFIG_NET_FLOW_LIMIT", "not in the initial network
namespace", "needs root".

A feature is read twice over, as the kernel shows it:

* the build option, from ``/proc/config.gz`` when the kernel has ``CONFIG_IKCONFIG_PROC``
  (``y`` or ``m``; an option the file does not list, or lists as ``is not set``, is off);
* the file the feature creates (``/proc/sys/net/core/flow_limit_cpu_bitmap`` exists only
  with ``CONFIG_NET_FLOW_LIMIT``, net/core/sysctl_net_core.c; ``busy_read`` only with
  ``CONFIG_NET_RX_BUSY_POLL``; the ``rps_cpus`` file of an rx queue only with
  ``CONFIG_RPS``, net/core/net-sysfs.c).

The file decides; the option names the cause. The global ``net.core`` sysctls are
registered in the initial network namespace only (``register_net_sysctl(&init_net, ...)``
in net/core/sysctl_net_core.c), so an absent sysctl in another namespace says nothing of
the build.

Everything is read below ``root`` (``/`` on a real host), so the tests run the probe on
fake ``/proc`` and ``/sys`` trees: a kernel without flow limit, without RPS, a process in
another namespace, without busy polling.
"""

from __future__ import annotations

import gzip
import os
from dataclasses import dataclass, field
from functools import cached_property

CORE = "proc/sys/net/core"


@dataclass(frozen=True)
class Feature:
    """A kernel feature: its build option and the file that shows it is there."""

    name: str
    config: str | None  # the CONFIG_ option that builds it
    path: str | None  # a file (below root) that exists when the feature does
    sysctl: bool = False  # a global net.core sysctl: visible in the initial namespace only
    what: str = ""  # what it is, for messages


FEATURES: dict[str, Feature] = {f.name: f for f in (
    Feature("flow_limit", "CONFIG_NET_FLOW_LIMIT", f"{CORE}/flow_limit_cpu_bitmap", True,
            "flow limit (net.core.flow_limit_cpu_bitmap, flow_limit_table_len)"),
    Feature("rps", "CONFIG_RPS", f"{CORE}/rps_sock_flow_entries", True,
            "RPS and RFS (rps_cpus, rps_flow_cnt, net.core.rps_sock_flow_entries)"),
    Feature("net_core", None, f"{CORE}/netdev_max_backlog", True,
            "the global net.core sysctls"),
    Feature("busy_poll", "CONFIG_NET_RX_BUSY_POLL", f"{CORE}/busy_read", True,
            "busy polling (net.core.busy_read, busy_poll)"),
    Feature("bpf", "CONFIG_BPF_SYSCALL", "proc/sys/kernel/unprivileged_bpf_disabled", False,
            "the bpf() system call"),
    Feature("xdp_sockets", "CONFIG_XDP_SOCKETS", None, False, "AF_XDP sockets"),
    Feature("veth", "CONFIG_VETH", None, False, "veth devices"),
    Feature("netns", "CONFIG_NET_NS", "proc/self/ns/net", False, "network namespaces"),
    Feature("cls_bpf", "CONFIG_NET_CLS_BPF", None, False, "tc BPF classifiers"),
    Feature("clsact", "CONFIG_NET_SCH_INGRESS", None, False, "the tc clsact qdisc"),
)}


def _net_ns_id(path: str) -> str | None:
    """The namespace a ``/proc/PID/ns/net`` link names (``net:[4026531840]``)."""
    try:
        return os.readlink(path)
    except OSError:
        try:
            st = os.stat(path)
        except OSError:
            return None
        return f"{st.st_dev}:{st.st_ino}"


@dataclass
class Capabilities:
    """The probe, read lazily and once per instance. ``probe()`` gives the host's."""

    root: str = "/"
    euid: int | None = None  # None: this process's
    _cache: dict = field(default_factory=dict, repr=False)

    def _p(self, rel: str) -> str:
        return os.path.join(self.root, rel)

    @cached_property
    def config(self) -> dict[str, str] | None:
        """The kernel's build options from /proc/config.gz; None without the file."""
        try:
            with gzip.open(self._p("proc/config.gz"), "rt") as fh:
                out = {}
                for line in fh:
                    if line.startswith("CONFIG_") and "=" in line:
                        k, v = line.strip().split("=", 1)
                        out[k] = v
                return out
        except (OSError, EOFError, UnicodeDecodeError):
            return None

    @cached_property
    def initial_netns(self) -> bool:
        """This process shares PID 1's network namespace (True when it cannot tell)."""
        me = _net_ns_id(self._p("proc/self/ns/net"))
        init = _net_ns_id(self._p("proc/1/ns/net"))
        return me is None or init is None or me == init

    @property
    def root_user(self) -> bool:
        return (os.geteuid() if self.euid is None else self.euid) == 0

    def built_with(self, option: str) -> bool | None:
        """The build option is y or m; None when the kernel does not publish its config."""
        if self.config is None:
            return None
        return self.config.get(option) in ("y", "m")

    def why_not(self, name: str) -> str | None:
        """None when the kernel has feature ``name``, else the cause in a few words."""
        if name not in self._cache:
            self._cache[name] = self._why_not(FEATURES[name])
        return self._cache[name]

    def has(self, name: str) -> bool:
        return self.why_not(name) is None

    def _why_not(self, f: Feature) -> str | None:
        if f.path is not None and os.path.lexists(self._p(f.path)):
            return None
        built = self.built_with(f.config) if f.config else None
        if built is False:
            return f"kernel built without {f.config}"
        if f.path is None:
            return None  # known only from the config, which does not say no
        if f.sysctl and not self.initial_netns:
            return ("not in the initial network namespace (the global net.core sysctls "
                    "exist only there)")
        cause = f" (built without {f.config}?)" if f.config else ""
        return f"this kernel has no /{f.path}{cause}"

    def sysctl_why_not(self, name: str) -> str | None:
        """Why ``net.core.NAME`` cannot be read or written here (None: it can)."""
        if os.path.exists(self._p(f"{CORE}/{name}")):
            return None
        for f in FEATURES.values():
            if f.sysctl and f.path and name in SYSCTL_FEATURE.get(f.name, ()):
                why = self.why_not(f.name)
                if why:
                    return why
        if not self.initial_netns:
            return ("not in the initial network namespace (the global net.core sysctls "
                    "exist only there)")
        return f"this kernel has no /{CORE}/{name}"

    def missing(self, names) -> list[str]:
        """``['name: cause', ...]`` for the features of ``names`` this kernel lacks."""
        return [f"{n}: {self.why_not(n)}" for n in names if not self.has(n)]

    def summary(self) -> dict[str, str | None]:
        """Every feature -> None (present) or the cause of its absence (for --json)."""
        return {n: self.why_not(n) for n in FEATURES}


# the net.core sysctls each feature creates (net/core/sysctl_net_core.c, v6.18)
SYSCTL_FEATURE = {
    "flow_limit": ("flow_limit_cpu_bitmap", "flow_limit_table_len"),
    "rps": ("rps_sock_flow_entries", "rps_default_mask"),
    "busy_poll": ("busy_read", "busy_poll"),
}

_HOST: Capabilities | None = None


def probe() -> Capabilities:
    """This host's capabilities, read once per process."""
    global _HOST
    if _HOST is None:
        _HOST = Capabilities()
    return _HOST
