"""IRQ deferral: napi_defer_hard_irqs and gro_flush_timeout (the deferral timer's loop)."""

from rxlab.mechanisms.base import Event, Mechanism, Stage

NAPI_DEFER = Mechanism(
    name="napi_defer",
    kernel="napi_complete_done, napi_watchdog (net/core/dev.c); gro_flush_timeout "
           "3b47d30396ba (v3.19), napi_defer_hard_irqs 6f8b12d661d0 (v5.8), per NAPI over "
           "netdev netlink (v6.13); Documentation/networking/napi.rst",
    code=("kernel/napi_defer.py",),
    stages=(Stage("napi_watchdog", "the NAPI's hrtimer expiring: the local timer "
                                   "interrupt's entry and exit, hrtimer_interrupt -> "
                                   "napi_watchdog -> __napi_schedule_irqoff "
                                   "(net/core/dev.c)"),),
    events=(Event("NAPI_TIMER", "arg rx queue: its NAPI's hrtimer expires on the CPU that "
                                "armed it (napi_watchdog)"),),
    flags=("gro_flush_timeout", "napi_defer_hard_irqs", "napi_config_per_queue"),
    knobs=("nic.napi_defer_hard_irqs", "nic.gro_flush_timeout"),
    output=("queues",),
)
