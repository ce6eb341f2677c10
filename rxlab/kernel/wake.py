"""What waking a sleeping thread costs the CPUs involved (try_to_wake_up).

A packet queued on a socket wakes its reader through ``sk_data_ready`` =
``sock_def_readable`` (net/core/sock.c: ``wake_up_interruptible_sync_poll`` when
``skwq_has_sleeper``), and a cpumap flush wakes the entry's kthread with
``wake_up_process`` (kernel/bpf/cpumap.c ``__cpu_map_flush``); both end in
``try_to_wake_up`` (kernel/sched/core.c, v6.18). On the waker's own CPU the task is
activated under the local runqueue lock (``ttwu_queue_cond`` is false for
``cpu == smp_processor_id()``): part of the stages around it, no extra charge. For a
thread on another CPU, ``ttwu_queue`` either queues it on that CPU's wake list and
sends a function-call IPI (``ttwu_queue_wakelist`` when the target is idle,
``!cpu_rq(cpu)->nr_running``, or in another LLC; ``send_call_function_single_ipi``
sends none when the idle target polls, ``set_nr_if_polling``), or takes the remote
runqueue lock, ``activate_task`` and ``wakeup_preempt``, whose ``resched_curr`` sends a
reschedule IPI. Either way the waker pays a cross-CPU handshake of the IPI kind:
``wakeup_remote``, in whatever context it runs (NET_RX softirq, ksoftirqd, the cpumap
kthread's system time). The woken CPU, if idle, takes the IPI (``ipi_recv`` as hard
interrupt time, ``sched_ttwu_pending`` activating the task) before the thread runs; a
busy one finishes its segment first (the model has no preemption), so nothing extra.
The delay until the thread runs stays ``wakeup_latency``.
"""

from numba import njit

from rxlab.config import JIT_STATE
from rxlab.engine.core import PRIO_CPU, PRIO_WAKE, schedule
from rxlab.kernel.accounting import cost
from rxlab.kernel.counters import T_SYSTEM
from rxlab.kernel.events import EV_CPU, EV_NAPI_WAKE
from rxlab.kernel.sched_states import (
    SEG_BUSY_SPIN,
    SEG_CPUMAP,
    SEG_NAPI_THREAD,
    TH_RUNNABLE,
    TH_SLEEP,
    TH_WAKING,
)
from rxlab.kernel.stages import C_IPI_RECV, C_WAKEUP_LATENCY, C_WAKEUP_REMOTE


@njit(**JIT_STATE)
def ttwu_remote(s, waker, wakee):
    """ns the waking CPU spends now on waking a thread of CPU ``wakee``."""
    if waker == wakee or waker < 0:
        return 0
    return cost(s, C_WAKEUP_REMOTE)


@njit(**JIT_STATE)
def ttwu_remote_owed(s, waker, wakee):
    """The same wake-up done by a segment of ``waker`` that is still running (it queued
    the packet ahead of the wakee's clock): charged when that segment ends, in its
    context (rx_loop.dispatch)."""
    if waker == wakee or waker < 0:
        return
    sd = s.sd
    sd.cpu[waker].wake_debt += cost(s, C_WAKEUP_REMOTE)
    kind = sd.cpu[waker].seg_kind  # a kthread's segment is system time
    sd.cpu[waker].wake_ctx = (T_SYSTEM if kind == SEG_CPUMAP or kind == SEG_NAPI_THREAD
                              else sd.cpu[waker].seg_ctx)


@njit(**JIT_STATE)
def ttwu_arrive(s, waker, wakee):
    """The wake-up reaches CPU ``wakee``: an idle one takes the IPI first."""
    sd = s.sd
    if (waker != wakee and waker >= 0 and sd.cpu[wakee].ev_pending == 0
            and sd.cpu[wakee].seg_kind != SEG_BUSY_SPIN):
        sd.cpu[wakee].irq_debt += cost(s, C_IPI_RECV)


@njit(**JIT_STATE)
def napi_thread_cpu(s, nid):
    """The CPU of NAPI ``nid``'s kthread: rx queue nid's napi/DEV-ID (-1: not threaded),
    or for a backlog (nid = nq + c) CPU c's backlog_napi/c (threaded backlog, else -1)."""
    p = s.p
    if nid < p.nq:
        return p.queue[nid].napi_cpu
    return nid - p.nq if p.backlog_threaded else -1


@njit(**JIT_STATE)
def napi_thread_wake(s, waker, nid, t):
    """____napi_schedule of a threaded NAPI on CPU ``waker`` at t: wake_up_process of its
    kthread (net/core/dev.c). Returns the ns the wake-up costs the waker. A kthread that
    is awake already polls again (NAPI_STATE_SCHED_THREADED): a backlog's, still in the
    poll that emptied it, is told so (``nt_rewake``, rxlab.kernel.napi_thread)."""
    nt = s.nic.thread
    if nt[nid].nt_state == TH_RUNNABLE and nid >= s.p.nq and nt[nid].nt_rewake < 0:
        nt[nid].nt_rewake = t
    if nt[nid].nt_state != TH_SLEEP:
        return 0
    nt[nid].nt_state = TH_WAKING
    nt[nid].nt_waker = waker
    schedule(s.ev, t + cost(s, C_WAKEUP_LATENCY), PRIO_WAKE, EV_NAPI_WAKE, nid)
    return ttwu_remote(s, waker, napi_thread_cpu(s, nid))


@njit(**JIT_STATE)
def kick_cpu(s, c, t):
    """Make sure CPU c will dispatch at t (it is idle: no segment, no pending event)."""
    sd, ev = s.sd, s.ev
    if sd.cpu[c].ev_pending == 0:
        sd.cpu[c].ev_pending = 1
        schedule(ev, t, PRIO_CPU, EV_CPU, c)
