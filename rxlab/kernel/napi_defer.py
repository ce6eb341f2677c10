"""IRQ deferral: ``napi_defer_hard_irqs`` and ``gro_flush_timeout`` as
``napi_complete_done`` and ``napi_watchdog`` use them (net/core/dev.c, read in 6.18.2).

A poll that found work sets the NAPI's ``defer_hard_irqs_count`` to
``napi_defer_hard_irqs``; while it is above 0, ``napi_complete_done`` decrements it, arms
the NAPI's hrtimer for ``gro_flush_timeout`` ns (``HRTIMER_MODE_REL_PINNED``: on the CPU
that completes the poll) and returns false, so the driver keeps its IRQ masked. The timer
(``napi_watchdog``) schedules the NAPI with no device interrupt: a NET_RX softirq on that
CPU, or a wake-up of its kthread with threaded NAPI. After ``napi_defer_hard_irqs`` empty
polls the count is 0 and the IRQ is enabled again. Without a timeout nothing is deferred
(the count still runs down); ``gro_flush_timeout`` alone arms the timer only while GRO
holds packets, which rxlab's GRO never does (docs/model.md, simplification 4).
"""

from numba import njit

from rxlab.config import JIT_STATE
from rxlab.engine.core import PRIO_HARDIRQ, schedule
from rxlab.kernel.events import EV_NAPI_TIMER


@njit(**JIT_STATE)
def napi_defer_irqs(s, c, q, work, t):
    """napi_complete_done's deferral for rx queue q's NAPI, completing on CPU c at t after
    a poll of ``work`` packets: True if the IRQ stays masked (the hrtimer is armed)."""
    p, rq = s.p, s.nic.queue[q]
    if work > 0:
        rq.defer_count = p.queue[q].defer_hard_irqs  # napi_get_defer_hard_irqs(n)
    if rq.defer_count > 0:
        rq.defer_count -= 1
        timeout = p.queue[q].gro_flush_ns  # napi_get_gro_flush_timeout(n)
        if timeout > 0:
            rq.timer_cpu = c
            schedule(s.ev, t + timeout, PRIO_HARDIRQ, EV_NAPI_TIMER, q)
            return True
    return False


@njit(**JIT_STATE)
def napi_watchdog(s, q):
    """The NAPI's hrtimer expired: the CPU it fires on, where the NAPI is scheduled
    (``__napi_schedule_irqoff``). The NAPI completed when it armed the timer and only the
    timer can schedule it while its IRQ is masked, so ``test_and_set_bit(SCHED)`` always
    succeeds here."""
    rq = s.nic.queue[q]
    rq.q_timer_polls += 1
    return rq.timer_cpu
