"""What a CPU runs next: pending softirq work, then the CFS-like choice between threads.

A softirq raised on a CPU runs at once on the way out of the interrupt or at
``local_bh_enable`` (inline, ``T_SOFTIRQ``), ahead of any thread. Once
``handle_softirqs`` has deferred the work to ``ksoftirqd/<cpu>``, that thread competes
with the CPU's other threads by runtime like any CFS task: the one with the least
runtime runs (kernel/sched/fair.c, ``pick_next_entity``); ties go to the earlier
candidate in ``THREADS``. A kernel thread that a mechanism adds (a kworker, say) is one
more candidate: a constant here and a branch in ``_candidate``.
"""

from numba import njit

from rxlab.config import JIT_STATE
from rxlab.kernel.state import TH_RUNNABLE

# Candidates, in the order that breaks a tie of runtimes.
SCHED_KSOFTIRQD = 0  # ksoftirqd/<cpu> with NET_RX work pending
SCHED_CPUMAP_KTHREAD = 1  # the cpumap entry's kthread on this CPU
SCHED_APP = 2  # the CPU's application threads (one runtime, round robin among them)
THREADS = 3
SCHED_SOFTIRQ = -2  # inline softirq: not a thread, runs before any of them
SCHED_IDLE = -1


@njit(**JIT_STATE)
def has_runnable_thread(s, c):
    """An application thread on CPU c is runnable."""
    so = s.so
    for k in range(so.cpu_nthreads[c]):
        if so.sock[so.cpu_threads[c, k]].th_state == TH_RUNNABLE:
            return True
    return False


@njit(**JIT_STATE)
def kthread_runnable(s, c):
    """The cpumap kthread of CPU c's entry is runnable."""
    e = s.p.cpu[c].cm_entry
    return e >= 0 and s.cm.entry[e].kt_state == TH_RUNNABLE


@njit(**JIT_STATE)
def _candidate(s, c, k):
    """(runnable, runtime) of candidate k on CPU c."""
    sd = s.sd
    if k == SCHED_KSOFTIRQD:
        soft = sd.cpu[c].softirq_pending or sd.cpu[c].in_rx_action
        return soft != 0 and sd.cpu[c].ksoftirqd != 0, sd.cpu[c].ks_vrt
    if k == SCHED_CPUMAP_KTHREAD:
        e = s.p.cpu[c].cm_entry
        if kthread_runnable(s, c):
            return True, s.cm.entry[e].kt_vrt
        return False, sd.cpu[c].app_vrt
    return has_runnable_thread(s, c), sd.cpu[c].app_vrt


@njit(**JIT_STATE)
def need_resched(s, c):
    """A thread other than ksoftirqd waits for CPU c (handle_softirqs stops restarting)."""
    for k in range(SCHED_KSOFTIRQD + 1, THREADS):
        if _candidate(s, c, k)[0]:
            return True
    return False


@njit(**JIT_STATE)
def pick_next(s, c):
    """What CPU c runs next, and the least runtime among its runnable threads other
    than ksoftirqd (the CPU's application runtime when none is): a thread woken now
    starts level with it."""
    sd = s.sd
    best = SCHED_IDLE
    bv = sd.cpu[c].app_vrt
    vmin = sd.cpu[c].app_vrt
    others = False
    for k in range(THREADS):
        ok, v = _candidate(s, c, k)
        if not ok:
            continue
        if k != SCHED_KSOFTIRQD and (not others or v < vmin):
            vmin = v
            others = True
        if best == SCHED_IDLE or v < bv:
            best = k
            bv = v
    if (sd.cpu[c].softirq_pending or sd.cpu[c].in_rx_action) and not sd.cpu[c].ksoftirqd:
        best = SCHED_SOFTIRQ
    return best, vmin
