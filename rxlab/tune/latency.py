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
- **Where the receive work runs** (``drops.shared_cpu``): an application whose threads
  share CPUs with rx interrupts or RPS work waits behind that work (and on 6.5+ runs it
  in its own recv()); its threads on CPUs that do none, RPS without its CPUs, or threaded
  NAPI are tried.
"""

from __future__ import annotations

from rxlab.tune.drops import shared_cpu

# rx-usecs values tried below the current one: off, and the common low settings
RX_USECS_STEPS = (0.0, 2.0, 4.0)


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
    placement = shared_cpu(sc, m)
    out.update(placement)
    if not placement:
        said.append("placement: no application thread shares a CPU with rx interrupts or "
                    "RPS work")
    return out, said
