"""Receive-path settings rxlab knows of but does not model: the one table of them.

A scenario that sets one is refused with a line of its own ("kernel.busy_poll: a known
kernel setting (sysctl net.core.busy_poll), not modelled by this version of rxlab"), not
with "unknown key": a user can tell a knob this version lacks from a misspelling, and
learns what the model does instead. ``rxlab host show`` and ``host export`` read those
a host shows in one file (a sysctl, a sysfs attribute) and list them as read and not
modelled; the others (ethtool, netlink, boot parameters, socket options) are named as
not read. The issues that would model them: 31 (epoll's busy poll, IRQ suspension), 32 (GRO,
adaptive moderation, skb defer free).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Knob:
    key: str  # the scenario key it would have, under ``section``
    section: str  # "kernel" (global), "nic" (per device) or "apps" (per socket)
    what: str  # the kernel's own name: sysctl, sysfs file, ethtool option
    model: str  # what rxlab does instead
    path: str | None = None  # the file a host shows it in ("{dev}": the device)

    @property
    def name(self) -> str:
        """The name a host shows: net.core.busy_poll, threaded (of a device), ..."""
        if self.path and self.path.startswith("/proc/sys/"):
            return self.path.removeprefix("/proc/sys/").replace("/", ".")
        return self.path.rsplit("/", 1)[-1] if self.path else self.what


_CORE = "/proc/sys/net/core"
_DEV = "/sys/class/net/{dev}"

UNMODELLED: tuple[Knob, ...] = (
    Knob("busy_poll", "kernel", "sysctl net.core.busy_poll",
         "poll and epoll never busy-poll, as with 0", f"{_CORE}/busy_poll"),
    Knob("skb_defer_max", "kernel", "sysctl net.core.skb_defer_max",
         "an skb is freed on the CPU that consumes it", f"{_CORE}/skb_defer_max"),
    Knob("gro_normal_batch", "kernel", "sysctl net.core.gro_normal_batch",
         "GRO does not aggregate or batch (docs/model.md, simplification 4)",
         f"{_CORE}/gro_normal_batch"),
    Knob("dev_weight_rx_bias", "kernel", "sysctl net.core.dev_weight_rx_bias",
         "1: the backlog's quota is kernel.dev_weight", f"{_CORE}/dev_weight_rx_bias"),
    Knob("irq_suspend_timeout", "nic", "netdev netlink napi-set irq-suspend-timeout, 6.13+",
         "0: IRQs are never suspended"),
    Knob("adaptive_rx", "nic", "ethtool -C DEV adaptive-rx",
         "moderation is the fixed nic.rx_usecs"),
    Knob("rx_frames", "nic", "ethtool -C DEV rx-frames",
         "moderation is by time alone, nic.rx_usecs"),
    Knob("gro", "nic", "ethtool -K DEV gro",
         "GRO costs `gro` per packet and never aggregates"),
    Knob("gro_max_size", "nic", "ip link set DEV gro_max_size",
         "GRO never aggregates"),
)

# a per-device knob written under kernel (or a global one under nic) is still the knob
_NEIGHBOURS = {"kernel": ("kernel", "nic"), "nic": ("nic", "kernel"), "apps": ("apps",)}


def find(section: str, key: str) -> Knob | None:
    """The unmodelled knob ``section.key`` names, or None."""
    for sec in _NEIGHBOURS.get(section, ()):
        for k in UNMODELLED:
            if k.section == sec and k.key == key:
                return k
    return None


def refusal(knob: Knob) -> str:
    """The message after the field's path."""
    return (f"a known kernel setting ({knob.what}), not modelled by this version of "
            f"rxlab; remove it to run as if unset ({knob.model})")


def readable(section: str) -> list[Knob]:
    """The knobs of ``section`` a host shows in a file."""
    return [k for k in UNMODELLED if k.section == section and k.path]


def not_read() -> list[Knob]:
    """The knobs a host shows only through a tool, a boot parameter or a socket."""
    return [k for k in UNMODELLED if not k.path]
