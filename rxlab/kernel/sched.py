"""What a CPU runs next: pending softirq work, then the CFS-like choice between threads.

A softirq raised on a CPU runs at once on the way out of the interrupt or at
``local_bh_enable`` (inline, ``T_SOFTIRQ``), ahead of any thread. Once
``handle_softirqs`` has deferred the work to ``ksoftirqd/<cpu>``, that thread competes
with the CPU's other threads by runtime like any CFS task: the one with the least
runtime runs (kernel/sched/fair.c, ``pick_next_entity``); ties go to the earlier
candidate in ``THREADS``. A kernel thread that a mechanism adds is one more candidate:
a constant here and a branch in ``_candidate``.

The kworker that runs the driver's aRFS work (``rxlab.nic.arfs``) is such a thread: it
is runnable on its CPU while the work is queued, never while ``net_rx_action`` is under
way there (a softirq is not preempted by a thread), and competes by runtime. So are the
NAPI kthreads of threaded NAPI (``rxlab.kernel.napi_thread``): each queue's
``napi/DEV-ID`` competes with its own runtime; among those of one CPU the least runtime
goes first.
"""

from numba import njit

from rxlab.config import JIT_STATE
from rxlab.kernel.sched_states import SVC_RUNNABLE, TH_RUNNABLE

# Candidates, in the order that breaks a tie of runtimes.
SCHED_KSOFTIRQD = 0  # ksoftirqd/<cpu> with NET_RX work pending
SCHED_CPUMAP_KTHREAD = 1  # the cpumap entry's kthread on this CPU
SCHED_KWORKER = 2  # the kworker running the driver's aRFS work item on this CPU
SCHED_NAPI_THREAD = 3  # a queue's NAPI kthread napi/DEV-ID on this CPU (threaded NAPI)
SCHED_APP = 4  # the CPU's application threads (one runtime, round robin among them)
THREADS = 5
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
def kworker_runnable(s, c):
    """The aRFS work item is queued on CPU c's kworker, and no net_rx_action is under
    way there (ksoftirqd runs handle_softirqs with BH off: not preempted mid-way)."""
    g = s.ar.glob[0]
    return g.svc_pending == SVC_RUNNABLE and g.svc_cpu == c and s.sd.cpu[c].in_rx_action == 0


@njit(**JIT_STATE)
def napi_thread_next(s, c):
    """The runnable NAPI kthread on CPU c with the least runtime: its queue, or -1."""
    p, nq = s.p, s.nic.thread
    best = -1
    if not p.napi_threaded:
        return best
    for q in range(p.nq):
        if (p.queue[q].napi_cpu == c and nq[q].nt_state == TH_RUNNABLE
                and (best < 0 or nq[q].nt_vrt < nq[best].nt_vrt)):
            best = q
    return best


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
    if k == SCHED_KWORKER:
        return kworker_runnable(s, c), sd.cpu[c].kw_vrt
    if k == SCHED_NAPI_THREAD:
        q = napi_thread_next(s, c)
        if q >= 0:
            return True, s.nic.thread[q].nt_vrt
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
    elif sd.cpu[c].in_rx_action:
        # ksoftirqd is inside handle_softirqs -> net_rx_action with BH off: no thread
        # runs until it returns (its cond_resched comes after)
        best = SCHED_KSOFTIRQD
    return best, vmin
