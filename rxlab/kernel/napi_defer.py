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

import numpy as np
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
            napi_timer_start(s, c, q, t + timeout)
            return True
    return False


@njit(**JIT_STATE)
def napi_timer_start(s, c, q, t_exp):
    """hrtimer_start(&n->timer, .., HRTIMER_MODE_REL_PINNED) on CPU c: the NAPI's one
    timer now expires at t_exp there (an earlier arming is moved, not added)."""
    rq = s.nic.queue[q]
    rq.timer_cpu = c
    rq.timer_at = t_exp
    schedule(s.ev, t_exp, PRIO_HARDIRQ, EV_NAPI_TIMER, q)


@njit(**JIT_STATE)
def napi_watchdog(s, q, t):
    """The NAPI's hrtimer expired at t: the CPU it fires on, or -1 if this expiry was
    moved by a later hrtimer_start (no interrupt then). ``test_and_set_bit(SCHED)``
    fails while a busy poll holds the NAPI (rxlab.kernel.busy_poll): the interrupt is
    taken, nothing is scheduled (``q_sched`` stays as it is; the caller checks it)."""
    rq = s.nic.queue[q]
    if rq.timer_at != t:
        return np.int64(-1)
    rq.timer_at = -1
    if not rq.q_sched:
        rq.q_timer_polls += 1
    return rq.timer_cpu
