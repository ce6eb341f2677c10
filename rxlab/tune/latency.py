"""Settings that move the application's latency, for ``tune --objective latency``.

- **Interrupt moderation**: ``nic.rx_usecs`` is the fixed delay the NIC holds an rx
  interrupt after the first descriptor write (``ethtool -C DEV adaptive-rx off rx-usecs
  N``; rxlab models moderation by time alone, ``rxlab.knobs``). Lower values shorten each
  packet's wait for its interrupt and cost more interrupts, which the runs charge as
  hardirq time.
- **IRQ deferral**: with ``napi_defer_hard_irqs`` and ``gro_flush_timeout`` set, a packet
  that arrives while a queue's IRQ is deferred waits for the NAPI's hrtimer
  (``kernel/napi_defer.py``); turning deferral off (``echo 0 >
  /sys/class/net/DEV/napi_defer_hard_irqs``) polls it at its interrupt, for more
  interrupts.
- **Busy polling**: with ``net.core.busy_read`` set, a read that finds its socket empty
  polls the NAPI itself for that long before it sleeps (``kernel/busy_poll.py``), so a
  packet that comes meanwhile skips its interrupt, softirq and wake-up, for a reader
  that spins (system time). Tried at 50 us, the value
  Documentation/admin-guide/sysctl/net.rst recommends for the sysctl.
- **Where the receive work runs** (``drops.shared_cpu``): an application whose threads
  share CPUs with rx interrupts or RPS work waits behind that work (and on 6.5+ runs it
  in its own recv()); its threads on CPUs that do none, RPS without its CPUs, or threaded
  NAPI are tried.
"""

from __future__ import annotations

from rxlab.kernel.versions import behaviour
from rxlab.tune.drops import shared_cpu

# rx-usecs values tried below the current one: off, and the common low settings
RX_USECS_STEPS = (0.0, 2.0, 4.0)
BUSY_READ_US = 50  # net.rst: "a value of 50 is recommended" for net.core.busy_read


def candidates(sc, m) -> tuple[dict, list[str]]:
    """({name: {"overrides", "what", "family"}}, a sentence per kind of setting that has
    no candidate here, saying why)."""
    out: dict[str, dict] = {}
    said: list[str] = []
    now = sc.nic.rx_usecs
    lower = [u for u in RX_USECS_STEPS if u < now]
    for u in lower:
        out[f"rx-usecs {u:g}"] = {
            "overrides": {"nic.rx_usecs": u}, "family": "moderation",
            "what": f"interrupt moderation {now:g} -> {u:g} us: each packet waits less "
                    "for its interrupt, at the price of more interrupts"}
    if not lower:
        said.append(f"moderation: rx-usecs is {now:g} us already, nothing lower to try")
    deferred = [q for q in range(sc.nic.queues) if m.params.queue[q]["defer_hard_irqs"] > 0
                and m.params.queue[q]["gro_flush_ns"] > 0]
    if deferred:
        out["deferral off"] = {
            "overrides": {"nic.napi_defer_hard_irqs": 0}, "family": "deferral",
            "what": f"IRQ deferral off on {len(deferred)} of {sc.nic.queues} queues: a "
                    "packet is polled at its interrupt, not at the NAPI hrtimer's next "
                    "expiry, at the price of more interrupts"}
    else:
        said.append("deferral: no queue defers its IRQ (napi_defer_hard_irqs with "
                    "gro_flush_timeout), nothing to turn off")
    out.update(_busy_poll(sc, m, said))
    placement = shared_cpu(sc, m)
    out.update(placement)
    if not placement:
        said.append("placement: no application thread shares a CPU with rx interrupts or "
                    "RPS work")
    return out, said


def _busy_poll(sc, m, said: list[str]) -> dict:
    """net.core.busy_read 50 when no socket busy-polls yet (and the kernel's loop is the
    one rxlab models, 4.10+)."""
    readers = [a for a in sc.apps if a.afxdp is None]
    if not readers:
        said.append("busy polling: no application reads a UDP or TCP socket")
        return {}
    if m.params.busy_poll_on:
        said.append("busy polling: sockets busy-poll already (kernel.busy_read or "
                    "apps[].busy_poll)")
        return {}
    if not behaviour(sc.host.kernel).busy_poll:
        said.append(f"busy polling: rxlab models the socket busy loop from 4.10, not "
                    f"{sc.host.kernel}")
        return {}
    return {f"busy_read {BUSY_READ_US}": {
        "overrides": {"kernel.busy_read": BUSY_READ_US}, "family": "busy_poll",
        "what": f"net.core.busy_read {BUSY_READ_US} us: a read of an empty socket polls "
                "the NAPI itself that long before sleeping; a packet that comes meanwhile "
                "skips its interrupt, softirq and wake-up, at the price of the reader's CPU "
                "spinning (system time)"}}
